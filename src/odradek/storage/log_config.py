"""LogConfig: the topic-level settings of a partition log, with Kafka 4.0's names, defaults and valid ranges."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True)
class _Def:
    name: str
    type: str  # int, long, double, boolean, string, list (Kafka's ConfigDef types)
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    doc: str = ""  # for the settings no node setting defaults (the others' docs are their node setting's)


_THROTTLED_REPLICAS = ("Replicas of this topic (partition:broker pairs, or * for all) whose replication is "
                       "throttled: {}")
_NOT_TIERED = "Accepted and described as Kafka does; Odradek has no tiered storage, so nothing is tiered."
_SCHEMA_VALIDATION = ("Produce requests to this topic are refused (INVALID_RECORD, naming each record) when a "
                      "record's {0} is not in Confluent's wire format with the id of a live version of the subject "
                      "`<topic>-{0}` in the schema registry of the partition leader's node (which needs "
                      "schema.registry.listener); a null {0} passes. While that registry is still reading its topic, or for "
                      "5 s after an id newer than any it has read first shows up, the error is REQUEST_TIMED_OUT, "
                      "which producers retry. Confluent Server's setting.")

# Kafka's TopicConfig names, and Confluent Server's schema validation settings; the attribute of LogConfig is
# the name with '.' replaced by '_'.
_DEFS: tuple[_Def, ...] = (
    _Def("cleanup.policy", "list", choices=CLEANUP_POLICIES),
    _Def("compression.gzip.level", "int", -1, 9),  # 1..9 or -1 (Deflater's default), checked below
    _Def("compression.lz4.level", "int", 1, 17),
    _Def("compression.type", "string", choices=COMPRESSION_TYPES),
    _Def("compression.zstd.level", "int", -131072, 22),
    _Def("confluent.key.schema.validation", "boolean", doc=_SCHEMA_VALIDATION.format("key")),
    _Def("confluent.value.schema.validation", "boolean", doc=_SCHEMA_VALIDATION.format("value")),
    _Def("delete.retention.ms", "long", 0),
    _Def("file.delete.delay.ms", "long", 0),
    _Def("flush.messages", "long", 1),
    _Def("flush.ms", "long", 0),
    _Def("follower.replication.throttled.replicas", "list", doc=_THROTTLED_REPLICAS.format(
        "a node fetches them as a follower within its follower.replication.throttled.rate.")),
    _Def("index.interval.bytes", "int", 0),
    _Def("leader.replication.throttled.replicas", "list", doc=_THROTTLED_REPLICAS.format(
        "a leader sends to them within its leader.replication.throttled.rate.")),
    _Def("local.retention.bytes", "long", -2),
    _Def("local.retention.ms", "long", -2),
    _Def("max.compaction.lag.ms", "long", 1),
    _Def("max.message.bytes", "int", 0),
    _Def("message.timestamp.after.max.ms", "long", 0),
    _Def("message.timestamp.before.max.ms", "long", 0),
    _Def("message.timestamp.type", "string", choices=TIMESTAMP_TYPES),
    _Def("min.cleanable.dirty.ratio", "double", 0.0, 1.0),
    _Def("min.compaction.lag.ms", "long", 0),
    _Def("min.insync.replicas", "int", 1),
    _Def("preallocate", "boolean"),
    _Def("remote.log.copy.disable", "boolean", doc=_NOT_TIERED),
    _Def("remote.log.delete.on.disable", "boolean", doc=_NOT_TIERED),
    _Def("remote.storage.enable", "boolean", doc=_NOT_TIERED),
    _Def("retention.bytes", "long"),
    _Def("retention.ms", "long", -1),
    _Def("segment.bytes", "int", 14),  # a v0 record's overhead: Kafka 4.0's floor (4.1 raises it to 1 MiB)
    _Def("segment.index.bytes", "int", 4),
    _Def("segment.jitter.ms", "long", 0),
    _Def("segment.ms", "long", 1),
    _Def("unclean.leader.election.enable", "boolean"),
)
_DEF_BY_NAME = {d.name: d for d in _DEFS}

TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(_DEF_BY_NAME)


def topic_config_type(name: str) -> str | None:
    """Kafka's type of a topic setting (int, long, double, boolean, string, list), None if there is no such one."""
    definition = _DEF_BY_NAME.get(name)
    return definition.type if definition else None


def topic_config_doc(name: str) -> str:
    """What a topic setting does, for those no node setting defaults ("" for the others and unknown names)."""
    definition = _DEF_BY_NAME.get(name)
    return definition.doc if definition else ""


@dataclass
class LogConfig:
    """Settings of one topic's partition logs. Attribute names are Kafka's config names in snake_case."""

    cleanup_policy: str = "delete"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_type: str = "producer"
    compression_zstd_level: int = 3
    confluent_key_schema_validation: bool = False
    confluent_value_schema_validation: bool = False
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: str = ""
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: str = ""
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_after_max_ms: int = 3600000  # Kafka 4.0 default (KIP-1030); was Long.MAX before
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604800000
    segment_bytes: int = 1073741824
    segment_index_bytes: int = 10485760
    segment_jitter_ms: int = 0
    segment_ms: int = 604800000
    unclean_leader_election_enable: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Parse Kafka-named settings over `defaults` (Kafka's defaults if None).

        Unknown names are ignored (the caller validates names); a bad value raises INVALID_CONFIG.
        """
        values: dict[str, object] = {}
        for name, raw in props.items():
            definition = _DEF_BY_NAME.get(name)
            if definition is None or raw is None:
                continue
            values[name.replace(".", "_")] = _parse(definition, raw)
        base = defaults if defaults is not None else cls()
        return dataclasses.replace(base, **values)

    def to_properties(self) -> dict[str, str]:
        """Every supported setting as Kafka-named text values."""
        return {d.name: _text(getattr(self, d.name.replace(".", "_"))) for d in _DEFS}

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def max_segment_ms(self) -> int:
        """Kafka's maxSegmentMs: a compacted log also rolls by max.compaction.lag.ms, so the cleaner can reach it."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bad(name: str, raw: str, why: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: {why}")


def _parse(definition: _Def, raw: str) -> object:
    name, kind = definition.name, definition.type
    text = str(raw).strip()
    if kind in ("int", "long"):
        try:
            value = int(text)
        except ValueError:
            raise _bad(name, raw, f"Not a number of type {kind.upper()}") from None
        low, high = (INT_MIN, INT_MAX) if kind == "int" else (LONG_MIN, LONG_MAX)
        if not low <= value <= high:
            raise _bad(name, raw, f"Not a number of type {kind.upper()}")
        if name == "compression.gzip.level" and value != -1 and not 1 <= value <= 9:
            raise _bad(name, raw, "Value must be between 1 and 9, or -1")
        _check_range(definition, raw, value)
        return value
    if kind == "double":
        try:
            value = float(text)
        except ValueError:
            raise _bad(name, raw, "Not a number of type DOUBLE") from None
        _check_range(definition, raw, value)
        return value
    if kind == "boolean":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise _bad(name, raw, "Expected value to be either true or false")
        return lowered == "true"
    if kind == "list":
        items = [item.strip() for item in text.split(",") if item.strip()]
        if definition.choices is not None:
            items = [item.lower() for item in items]
            for item in items:
                if item not in definition.choices:
                    raise _bad(name, raw, f"String must be one of: {', '.join(definition.choices)}")
            if not items:
                raise _bad(name, raw, "Empty list")
        return ",".join(items)
    if definition.choices is not None:
        # Kafka's ValidString is case-sensitive for timestamp type, case-insensitive for compression type
        if name == "compression.type":
            text = text.lower()
        if text not in definition.choices:
            raise _bad(name, raw, f"String must be one of: {', '.join(definition.choices)}")
    return text


def _check_range(definition: _Def, raw: str, value: float) -> None:
    low, high = definition.minimum, definition.maximum
    if low is not None and value < low:
        raise _bad(definition.name, raw, f"Value must be at least {low}")
    if high is not None and value > high:
        raise _bad(definition.name, raw, f"Value must be no more than {high}")
