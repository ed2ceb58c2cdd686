"""Options of the "odradek" data source, as Spark's Kafka connector names and checks them.

Spark hands a data source its options in a case-insensitive dict with lowercased keys, so every name is
looked up lowercased here. Offsets use Spark's conventions: -2 means earliest and -1 latest in JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

KAFKA_PREFIX = "kafka."
EARLIEST = -2
LATEST = -1

# Client settings the connector owns: Spark's Kafka source refuses them too.
_OWNED_CLIENT_SETTINGS = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' instead",
    "enable.auto.commit": "the source keeps its offsets in the query's checkpoint, not in a consumer group",
    "key.deserializer": "keys are returned as binary; cast them in the query, or set 'keySchemaRegistry.url'",
    "value.deserializer": "values are returned as binary; cast them in the query, or set 'valueSchemaRegistry.url'",
}
_STRATEGIES = ("subscribe", "subscribepattern", "assign")
_ENDING_OPTIONS = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")

TopicPartition = tuple[str, int]


class OptionError(ValueError):
    """An option of the data source is missing, malformed, or not allowed for this kind of query."""


def _get(options, name: str) -> str | None:
    """Look up an option by name, whatever the case of the dict's keys."""
    name = name.lower()
    for key, value in options.items():
        if key.lower() == name:
            return value
    return None


def kafka_client_config(options) -> dict:
    """Every `kafka.<name>` option as the confluent-kafka (librdkafka) setting `<name>`."""
    config: dict = {}
    for key, value in options.items():
        if key.lower().startswith(KAFKA_PREFIX):
            config[key[len(KAFKA_PREFIX):].lower()] = value
    if "bootstrap.servers" not in config:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    return config


# --- where to read: the subscription strategy ---

@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Strategy = Subscribe | SubscribePattern | Assign


def _parse_strategy(options) -> Strategy:
    given = [name for name in _STRATEGIES if _get(options, name) is not None]
    if not given:
        raise OptionError("one of the options 'subscribe', 'subscribePattern' or 'assign' must be specified")
    if len(given) > 1:
        raise OptionError("only one of the options 'subscribe', 'subscribePattern' and 'assign' can be specified")
    value = _get(options, given[0])
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"no topics to subscribe to in 'subscribe': {value!r}")
        return Subscribe(topics)
    if given[0] == "subscribepattern":
        if not value.strip():
            raise OptionError("pattern to subscribe is empty")
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError(f"'subscribePattern' is not a valid regular expression: {e}") from None
        return SubscribePattern(value)
    parsed = _parse_json(value, "assign", 'like {"topicA":[0,1],"topicB":[2,4]}')
    try:
        partitions = tuple((str(t), int(p)) for t, ps in parsed.items() for p in ps)
    except (AttributeError, TypeError, ValueError):
        raise OptionError(f'\'assign\' must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {value!r}') from None
    if not partitions:
        raise OptionError("'assign' names no partitions")
    return Assign(partitions)


# --- where to start and stop ---

@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per partition; EARLIEST and LATEST stand for the ends of the log."""

    offsets: dict[TopicPartition, int] = field(hash=False)


@dataclass(frozen=True)
class GlobalTimestamp:
    timestamp_ms: int


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps: dict[TopicPartition, int] = field(hash=False)


OffsetLimit = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


def _parse_json(value: str, name: str, example: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise OptionError(f"'{name}' must be JSON {example}, got {value!r}") from None


def _parse_per_partition(value: str, name: str) -> dict[TopicPartition, int]:
    parsed = _parse_json(value, name, 'like {"topicA":{"0":23,"1":-1}}')
    try:
        return {(str(t), int(p)): int(v) for t, ps in parsed.items() for p, v in ps.items()}
    except (AttributeError, TypeError, ValueError):
        raise OptionError(f"'{name}' must be JSON like {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {value!r}") from None


def _parse_limit(options, prefix: str, default: OffsetLimit) -> OffsetLimit:
    """`<prefix>Timestamp` wins over `<prefix>OffsetsByTimestamp`, which wins over `<prefix>Offsets`."""
    timestamp = _get(options, f"{prefix}Timestamp")
    if timestamp is not None:
        try:
            return GlobalTimestamp(int(timestamp))
        except ValueError:
            raise OptionError(f"'{prefix}Timestamp' must be a timestamp in milliseconds, got {timestamp!r}") from None
    by_timestamp = _get(options, f"{prefix}OffsetsByTimestamp")
    if by_timestamp is not None:
        return SpecificTimestamps(_parse_per_partition(by_timestamp, f"{prefix}OffsetsByTimestamp"))
    offsets = _get(options, f"{prefix}Offsets")
    if offsets is None:
        return default
    word = offsets.strip().lower()
    if word == "earliest":
        return Earliest()
    if word == "latest":
        return Latest()
    return SpecificOffsets(_parse_per_partition(offsets, f"{prefix}Offsets"))


def _positive_int(options, name: str) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise OptionError(f"'{name}' must be a positive integer, got {value!r}")
    return number


# Spark's time strings (JavaUtils.timeStringAsMs): a whole number and a unit, milliseconds without one.
_TIME_UNITS_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _duration_s(options, name: str, default: str) -> float:
    value = _get(options, name) or default
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", value.strip().lower())
    if match is None or match.group(2) not in ("", *_TIME_UNITS_S):
        raise OptionError(f"'{name}' must be a duration such as 500ms, 30s, 15m or 1h, got {value!r}")
    return int(match.group(1)) * _TIME_UNITS_S.get(match.group(2), 1e-3)


def boolean_option(options, name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise OptionError(f"'{name}' must be 'true' or 'false', got {value!r}")
    return value.strip().lower() == "true"


# --- Avro with a schema registry (odradek.spark.schema_registry) ---

@dataclass(frozen=True)
class RegistryOptions:
    """`<column>SchemaRegistry.*`: where the column's Avro schemas are, under which subject."""

    urls: tuple[str, ...]
    subject: str
    permissive: bool = False


_REGISTRY_MODES = ("FAILFAST", "PERMISSIVE")


def parse_registry(options, column: str, topics: tuple[str, ...] | None, source: bool) -> RegistryOptions | None:
    """The `<column>SchemaRegistry.*` options of the key or value column, or None without a URL. The subject
    defaults to `<topic>-<column>` (Confluent's TopicNameStrategy) when `topics` names exactly one topic."""
    prefix = f"{column}SchemaRegistry."
    url = _get(options, prefix + "url")
    if url is None:
        for name in ("subject", "mode"):
            if _get(options, prefix + name) is not None:
                raise OptionError(f"option '{prefix}{name}' needs '{prefix}url'")
        return None
    urls = tuple(u.strip().rstrip("/") for u in url.split(",") if u.strip())
    if not urls:
        raise OptionError(f"'{prefix}url' is empty")
    for u in urls:
        if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", u):
            raise OptionError(f"'{prefix}url' must be http:// or https:// URLs, comma-separated, got {u!r}")
    subject = _get(options, prefix + "subject")
    if subject is not None and not subject.strip():
        raise OptionError(f"'{prefix}subject' is empty")
    if subject is None:
        if topics is None or len(topics) != 1:
            what = "reading several topics or a pattern" if source else "the topic comes from a 'topic' column"
            raise OptionError(f"option '{prefix}subject' is required when {what}: the subject can default to "
                              f"'<topic>-{column}' only for a single topic")
        subject = f"{topics[0]}-{column}"
    mode = _get(options, prefix + "mode")
    if mode is not None and not source:
        raise OptionError(f"'{prefix}mode' is a source option: the sink fails on a {column} that does not fit")
    if (mode or "FAILFAST").strip().upper() not in _REGISTRY_MODES:
        raise OptionError(f"'{prefix}mode' must be 'FAILFAST' or 'PERMISSIVE', got {mode!r}")
    return RegistryOptions(urls=urls, subject=subject.strip(),
                           permissive=(mode or "").strip().upper() == "PERMISSIVE")


def _single_topics(strategy: Strategy) -> tuple[str, ...] | None:
    if isinstance(strategy, Subscribe):
        return strategy.topics
    if isinstance(strategy, Assign):
        return tuple(dict.fromkeys(t for t, _ in strategy.partitions))
    return None


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs from the options, checked once on the driver."""

    client: dict
    strategy: Strategy
    starting: OffsetLimit
    ending: OffsetLimit
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_s: float = 15 * 60.0
    min_partitions: int | None = None
    starting_by_timestamp_latest: bool = False
    poll_timeout_s: float = 120.0
    group_id_prefix: str = "odradek-spark-source"
    key_registry: RegistryOptions | None = None
    value_registry: RegistryOptions | None = None

    @staticmethod
    def parse_include_headers(options) -> bool:
        return boolean_option(options, "includeHeaders", False)

    @staticmethod
    def parse_registries(options) -> tuple[RegistryOptions | None, RegistryOptions | None]:
        """The key's and the value's schema registry options."""
        if all(_get(options, f"{column}SchemaRegistry.{name}") is None
               for column in ("key", "value") for name in ("url", "subject", "mode")):
            return None, None
        topics = _single_topics(_parse_strategy(options))
        return (parse_registry(options, "key", topics, source=True),
                parse_registry(options, "value", topics, source=True))

    @classmethod
    def parse(cls, options, streaming: bool) -> SourceOptions:
        client = kafka_client_config(options)
        for name, advice in _OWNED_CLIENT_SETTINGS.items():
            if name in client:
                raise OptionError(f"kafka option '{name}' is not supported: {advice}")
        client.setdefault("isolation.level", "read_uncommitted")
        strategy = _parse_strategy(options)
        starting = _parse_limit(options, "starting", Latest() if streaming else Earliest())
        if streaming:
            for name in _ENDING_OPTIONS:
                if _get(options, name) is not None:
                    raise OptionError(f"'{name}' is not valid in streaming queries: a stream has no end")
            ending: OffsetLimit = Latest()
        else:
            ending = _parse_limit(options, "ending", Latest())
            _check_batch_limits(starting, ending)
        strategy_name = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
        if strategy_name not in ("error", "latest"):
            raise OptionError(f"'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy_name!r}")
        poll_timeout = _positive_int(options, "kafkaConsumer.pollTimeoutMs")
        max_per_trigger = _positive_int(options, "maxOffsetsPerTrigger")
        min_per_trigger = _positive_int(options, "minOffsetsPerTrigger")
        if max_per_trigger and min_per_trigger and min_per_trigger > max_per_trigger:
            raise OptionError(f"'minOffsetsPerTrigger' ({min_per_trigger}) is higher than 'maxOffsetsPerTrigger' "
                              f"({max_per_trigger})")
        key_registry, value_registry = cls.parse_registries(options)
        return cls(
            client=client, strategy=strategy, starting=starting, ending=ending,
            fail_on_data_loss=boolean_option(options, "failOnDataLoss", True),
            include_headers=cls.parse_include_headers(options),
            max_offsets_per_trigger=max_per_trigger,
            min_offsets_per_trigger=min_per_trigger,
            max_trigger_delay_s=_duration_s(options, "maxTriggerDelay", "15m"),
            min_partitions=_positive_int(options, "minPartitions"),
            starting_by_timestamp_latest=strategy_name == "latest",
            poll_timeout_s=poll_timeout / 1000 if poll_timeout else 120.0,
            group_id_prefix=_get(options, "groupIdPrefix") or "odradek-spark-source",
            key_registry=key_registry, value_registry=value_registry,
        )


def _check_batch_limits(starting: OffsetLimit, ending: OffsetLimit) -> None:
    if isinstance(starting, Latest):
        raise OptionError("startingOffsets can't be 'latest' for batch queries")
    if isinstance(starting, SpecificOffsets):
        for (topic, partition), offset in starting.offsets.items():
            if offset == LATEST:
                raise OptionError(f"startingOffsets for {topic}-{partition} can't be latest (-1) for batch queries")
    if isinstance(ending, Earliest):
        raise OptionError("endingOffsets can't be 'earliest' for batch queries")
    if isinstance(ending, SpecificOffsets):
        for (topic, partition), offset in ending.offsets.items():
            if offset == EARLIEST:
                raise OptionError(f"endingOffsets for {topic}-{partition} can't be earliest (-2) for batch queries")
