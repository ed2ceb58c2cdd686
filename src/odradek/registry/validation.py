"""Broker-side schema id validation: Confluent Server's `confluent.key.schema.validation` and
`confluent.value.schema.validation` topic settings (Redpanda has the same).

With one of them true on a topic, every produced record's key (or value) must be in Confluent's wire format,
the magic byte 0 then a 4-byte big-endian schema id, and the id must be that of a live (not soft-deleted)
version of the topic's subject, `<topic>-key` or `<topic>-value` (TopicNameStrategy). A null key or value
(a tombstone) has no schema and passes. A batch with any record that fails is refused whole with
INVALID_RECORD, naming each such record (record_errors), as a compacted topic refuses keyless records.

`record_errors` is the check, sans-I/O; `check_produce` is the produce path's hook (ReplicaManager.append),
called only for topics with a flag set: it decodes the batch and looks ids up in the registry state of this
node (the partition's leader), which needs schema.registry.listener set on it. While that registry has not
read `_schemas` to its end, or a record names an id newer than it has read (registered a moment ago through
another node), the batch gets REQUEST_TIMED_OUT, which producers retry, instead of a refusal.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable

from odradek.protocol import records as rec
from odradek.protocol.errors import ErrorCode, KafkaError

MAGIC_BYTE = 0
HEADER_SIZE = 5  # the magic byte, then the schema id as a big-endian int32
KEY, VALUE = "key", "value"
SHOWN_ERRORS = 3  # as Kafka's message for a refused batch shows them


def subject_of(topic: str, field: str) -> str:
    """TopicNameStrategy: the subject of a topic's keys or values."""
    return f"{topic}-{field}"


def schema_id(data: bytes) -> int | None:
    """The schema id a key or value in Confluent's wire format carries; None when it is not in that format."""
    if len(data) < HEADER_SIZE or data[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(data[1:HEADER_SIZE], "big", signed=True)


def _problem(topic: str, field: str, data: bytes | None, subject: str, live: Collection[int]) -> str | None:
    if data is None:
        return None
    if len(data) < HEADER_SIZE:
        return (f"the {field} of {len(data)} bytes is too short for Confluent's wire format (magic byte 0 and a "
                f"4-byte schema id), as schema validation of topic {topic} requires")
    if data[0] != MAGIC_BYTE:
        return (f"the {field} starts with byte {data[0]}, not Confluent's magic byte 0 (then a 4-byte schema id), "
                f"as schema validation of topic {topic} requires")
    found = schema_id(data)
    if found not in live:
        return f"the {field}'s schema id {found} is not the id of a live version of subject {subject}"
    return None


def record_errors(topic: str, field: str, records: Iterable[rec.Record],
                  live_ids: Callable[[str], Collection[int]]) -> list[tuple[int, str]]:
    """(index in the batch, why) of each record whose key or value (`field`) carries no schema id of
    the topic's subject; `live_ids(subject)` gives the ids of the subject's live versions (asked once)."""
    subject = subject_of(topic, field)
    live: Collection[int] | None = None
    errors = []
    for index, record in enumerate(records):
        data = record.key if field == KEY else record.value
        if data is None:
            continue
        if live is None and len(data) >= HEADER_SIZE and data[0] == MAGIC_BYTE:
            live = live_ids(subject)
        problem = _problem(topic, field, data, subject, live or ())
        if problem is not None:
            errors.append((index, problem))
    return errors


def refusal(errors: list[tuple[int, str]]) -> KafkaError:
    """INVALID_RECORD for the batch, with Kafka's message for records refused one by one (KIP-467)."""
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                      for index, message in errors[:SHOWN_ERRORS])
    return KafkaError(ErrorCode.INVALID_RECORD,
                      f"One or more records have been rejected due to {len(errors)} record errors in total, and "
                      f"only showing the first three errors at most: [{shown}]", tuple(errors))


def live_ids_of(registry_server) -> Callable[[str], frozenset[int]]:
    """The lookup of a node's registry: the ids of a subject's live versions, read under the store's lock."""
    store = registry_server.store

    def lookup(subject: str) -> frozenset[int]:
        with store.lock:
            return frozenset(record.id for record in store.state.versions(subject) if not record.deleted)

    return lookup


def check_produce(node, topic: str, records_view, config, from_coordinator: bool = False) -> None:
    """Refuse a produced batch (INVALID_RECORD) whose keys or values fail the topic's schema validation.

    Called by the partition's leader, before the log appends, only when `config` (the partition log's
    LogConfig) has a validation flag set. A malformed batch raises as the log's append would.
    """
    fields = [field for field, on in ((KEY, config.confluent_key_schema_validation),
                                      (VALUE, config.confluent_value_schema_validation)) if on]
    if not fields:
        return
    infos = rec.validate_batches(records_view, max_batch_size=config.max_message_bytes,
                                 from_coordinator=from_coordinator)
    if len(infos) != 1:
        return  # the log's append refuses it
    registry_server = getattr(node, "registry_server", None)
    if registry_server is None:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"topic {topic} has {', '.join(f'confluent.{f}.schema.validation' for f in fields)} set, "
                         f"and schema validation needs schema.registry.listener on the partition leader's node "
                         f"{node.node_id}, which serves no schema registry")
    store = registry_server.store
    if not store.ready.is_set():
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"the schema registry of node {node.node_id} is still reading "
                                                      f"{store.topic}; retry")
    decoded = rec.decode_batch(records_view, infos[0])
    lookup = live_ids_of(registry_server)
    errors = sorted(error for field in fields for error in record_errors(topic, field, decoded, lookup))
    if errors:
        newest = [i for field in fields for i in framed_ids(decoded, field) if i > store.state.max_id]
        if newest and _still_catching_up(newest, time.monotonic()):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"schema id {newest[0]} is newer than what node {node.node_id} has read of "
                             f"{store.topic}; retry")
        raise refusal(errors)


def framed_ids(records: Iterable[rec.Record], field: str) -> list[int]:
    return [i for record in records
            if (i := schema_id((record.key if field == KEY else record.value) or b"")) is not None]


# An id newer than any this node has read may have just been registered through another node (a serializer
# registers, then produces at once): such a batch gets a retriable error for CATCH_UP_S from the first time
# the id was seen, and INVALID_RECORD after that.
CATCH_UP_S = 5.0
_first_seen: OrderedDict[int, float] = OrderedDict()
FIRST_SEEN_KEPT = 1024


def _still_catching_up(ids: list[int], now: float) -> bool:
    waiting = False
    for schema in ids:
        first = _first_seen.setdefault(schema, now)
        _first_seen.move_to_end(schema)
        waiting = waiting or now - first < CATCH_UP_S
    while len(_first_seen) > FIRST_SEEN_KEPT:
        _first_seen.popitem(last=False)
    return waiting
