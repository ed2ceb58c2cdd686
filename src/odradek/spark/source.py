"""The reading side of the "odradek" Spark data source: batch and streaming readers with Spark's Kafka semantics.

The driver turns the options into offset ranges, one (topic, partition, start, end) per input partition;
each Spark task reads its range and hands Spark Arrow record batches built column by column: through
Odradek's own Fetch client (fetch.py, record_columns.py), or, when a kafka.* setting is one only librdkafka
speaks, from what each `consume()` of a confluent-kafka consumer returned. A streaming query's offsets are
Spark's Kafka source JSON, {"topic": {"partition": next offset}}, so they read the same in the checkpoint.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.fetch import fetch_range, uses_fetch_client
from odradek.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetLimit,
    OptionError,
    SourceOptions,
    SpecificOffsets,
    Subscribe,
    TopicPartition,
)
from odradek.spark.record_columns import Columns
from odradek.spark.schema_registry import SourceDecoders

log = logging.getLogger("odradek.spark")

# Topics a pattern subscription skips, as Kafka consumers exclude internal topics.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__odradek_spark_commits"})
_ADMIN_TIMEOUT_S = 30.0
# Marks the start of a query's first micro-batch (no topic can be named so).
INITIAL_MARK = "@initial"
_MESSAGES_PER_CONSUME = 10_000
_CONSUME_WAIT_S = 0.05
# A task reads one partition start to end: librdkafka's defaults pace its prefetching for a consumer that
# keeps up with a live stream, and left a task waiting on fetches most of the time (a quarter of the rate
# in benchmarks/spark_connectors.py). The prefetch is capped at the range's size: a micro-batch's task
# would otherwise fetch the partition's every later record and drop them. Given kafka.* options win.
_MAX_PREFETCH = 1_000_000
_READ_DEFAULT_ALIASES = {"fetch.message.max.bytes": "max.partition.fetch.bytes"}

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
_ARROW_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_ARROW_TIMESTAMP = pa.timestamp("us", tz="UTC")


def source_schema(include_headers: bool, key: DataType | None = None, value: DataType | None = None) -> StructType:
    """The columns of Spark's Kafka source, in its order; key and value are binary unless decoded with a
    schema registry (then their type is the subject's, see schema_registry.py)."""
    fields = [
        StructField("key", key or BinaryType()),
        StructField("value", value or BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool, decoders: SourceDecoders | None = None) -> pa.Schema:
    """`source_schema` as Spark expects the Arrow batches of a Python data source (UTC microseconds)."""
    key, value = (decoders.key, decoders.value) if decoders else (None, None)
    fields = [
        ("key", key.arrow_type if key else pa.binary()), ("value", value.arrow_type if value else pa.binary()),
        ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64()), ("timestamp", _ARROW_TIMESTAMP), ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", _ARROW_HEADERS))
    return pa.schema(fields)


class DataLossError(RuntimeError):
    """Offsets the query should read are no longer in the log, and failOnDataLoss is true."""


def report_data_loss(options: SourceOptions, what: str) -> None:
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{what}. Some data may have been lost: it was deleted (retention, DeleteRecords) or its topic was "
            "deleted before the query read it. Set the source option \"failOnDataLoss\" to \"false\" to skip "
            "lost offsets and go on.")
    log.warning("%s; failOnDataLoss is false, so the query skips the lost offsets", what)


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One input partition: offsets [start, end) of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def offsets_to_json(offsets: dict[TopicPartition, int]) -> dict:
    """Spark's Kafka offset JSON, {"topic": {"0": 123}}, ordered so equal offsets serialize equally."""
    result: dict = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


def offsets_from_json(value: dict) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, partitions in value.items() if topic != INITIAL_MARK
            for p, o in partitions.items()}


def apportion(total: int, weights: dict, cap: dict | None = None) -> dict:
    """Split `total` in proportion to `weights` (largest remainders get the rounding), each share <= its cap."""
    weight_sum = sum(weights.values())
    if weight_sum <= 0:
        return dict.fromkeys(weights, 0)
    exact = {k: total * w / weight_sum for k, w in weights.items()}
    shares = {k: int(x) for k, x in exact.items()}
    leftover = total - sum(shares.values())
    for k in sorted(weights, key=lambda k: (shares[k] - exact[k], k))[:leftover]:
        shares[k] += 1
    if cap is not None:
        shares = {k: min(s, cap[k]) for k, s in shares.items()}
    return shares


def limit_offsets(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
                  max_rows: int) -> dict[TopicPartition, int]:
    """End offsets that read at most `max_rows` records, split across partitions by how far each is behind.

    Spark's Kafka source rounds small shares up so no partition starves, which can overshoot the limit;
    here the rounding goes to the largest remainders, so a micro-batch never exceeds `max_rows` and still
    reads at least one record while any is available.
    """
    behind = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end > start[tp]}
    if sum(behind.values()) <= max_rows:
        return dict(latest)
    shares = apportion(max_rows, behind, cap=behind)
    return {tp: start[tp] + shares[tp] if tp in shares else end for tp, end in latest.items()}


@dataclass
class MinimumPerTrigger:
    """minOffsetsPerTrigger and maxTriggerDelay, as Spark's Kafka source has them: a trigger that finds fewer
    records waiting than the minimum is skipped, unless maxTriggerDelay has passed since the last batch. A
    query's first trigger always runs."""

    minimum: int
    max_delay_s: float
    last_batch: float | None = None

    def admits(self, waiting: int, now: float) -> bool:
        if self.last_batch is None or now - self.last_batch >= self.max_delay_s or waiting >= self.minimum:
            self.last_batch = now
            return True
        return False


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least `min_partitions` input partitions (when there are that many records): big ranges split first."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    sizes = {i: r.size for i, r in enumerate(ranges)}
    # every range keeps one part; the extra parts go to ranges by size, none to more parts than records
    extra = apportion(min_partitions - len(ranges), sizes, cap={i: size - 1 for i, size in sizes.items()})
    result = []
    for i, r in enumerate(ranges):
        count = 1 + extra[i]
        start = r.start
        for j in range(count):
            end = r.start + r.size * (j + 1) // count
            result.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return result


class OffsetLookup:
    """The driver's view of the cluster: which partitions a subscription covers and their offsets."""

    def __init__(self, client_config: dict):
        # Ranges end where a consumer of the same isolation level sees the log end (the LSO for read_committed).
        self.read_committed = client_config.get("isolation.level") == "read_committed"
        self.admin = AdminClient({k: v for k, v in client_config.items() if k != "isolation.level"})

    def partitions(self, strategy) -> list[TopicPartition]:
        if isinstance(strategy, Assign):
            return sorted(set(strategy.partitions))
        topics = self.admin.list_topics(timeout=_ADMIN_TIMEOUT_S).topics
        if isinstance(strategy, Subscribe):
            chosen = [t for t in strategy.topics if t in topics and topics[t].error is None]
        else:
            pattern = re.compile(strategy.pattern)
            chosen = [t for t in topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t)
                      and topics[t].error is None]
        return sorted((t, p) for t in chosen for p in topics[t].partitions)

    def _list(self, specs: dict) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        requests = {KafkaTopicPartition(t, p): spec for (t, p), spec in specs.items()}
        isolation = IsolationLevel.READ_COMMITTED if self.read_committed else IsolationLevel.READ_UNCOMMITTED
        futures = self.admin.list_offsets(requests, isolation_level=isolation, request_timeout=_ADMIN_TIMEOUT_S)
        result = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as e:
                raise RuntimeError(f"cannot list offsets of {tp.topic}-{tp.partition}: {e.args[0].str()}") from None
        return result

    def earliest(self, tps) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(tps, OffsetSpec.earliest()))

    def latest(self, tps) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(tps, OffsetSpec.latest()))

    def for_timestamps(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The first offset whose timestamp is >= the given one, or -1 when there is none."""
        return self._list({tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()})

    def resolve(self, limit: OffsetLimit, tps: list[TopicPartition], *, starting: bool,
                no_match_is_latest: bool) -> dict[TopicPartition, int]:
        """Concrete offsets for every partition. A timestamp no record reaches means latest when
        `no_match_is_latest`, or else fails."""
        if isinstance(limit, Earliest):
            return self.earliest(tps)
        if isinstance(limit, Latest):
            return self.latest(tps)
        if isinstance(limit, SpecificOffsets):
            _check_names_every_partition(limit.offsets, tps, "startingOffsets" if starting else "endingOffsets")
            earliest = self.earliest([tp for tp in tps if limit.offsets[tp] == EARLIEST])
            latest = self.latest([tp for tp in tps if limit.offsets[tp] == LATEST])
            return {tp: earliest.get(tp, latest.get(tp, limit.offsets[tp])) for tp in tps}
        if isinstance(limit, GlobalTimestamp):
            timestamps = dict.fromkeys(tps, limit.timestamp_ms)
        else:
            name = ("starting" if starting else "ending") + "OffsetsByTimestamp"
            _check_names_every_partition(limit.timestamps, tps, name)
            timestamps = {tp: limit.timestamps[tp] for tp in tps}
        found = self.for_timestamps(timestamps)
        unmatched = [tp for tp, offset in found.items() if offset < 0]
        if unmatched and not no_match_is_latest:
            t, p = unmatched[0]
            raise OptionError(f"no record of {t}-{p} has a timestamp at or after {timestamps[(t, p)]}; set "
                              "'startingOffsetsByTimestampStrategy' to 'latest' to start at the end instead")
        latest = self.latest(unmatched)
        return {tp: latest[tp] if offset < 0 else offset for tp, offset in found.items()}


def _check_names_every_partition(given: dict, tps: list[TopicPartition], name: str) -> None:
    if set(given) != set(tps):
        raise OptionError(f"'{name}' must name every partition of the subscribed topics (-2 for earliest, -1 for "
                          f"latest): it names {_names(given)}, the topics have {_names(tps)}")


def _names(tps) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "none"


# --- reading one range on an executor ---

def _read_defaults(r: OffsetRange) -> dict:
    return {"queued.min.messages": min(_MAX_PREFETCH, max(_MESSAGES_PER_CONSUME, r.end - r.start)),
            "fetch.message.max.bytes": 4 << 20}


def read_range(options: SourceOptions, r: OffsetRange,
               decoders: SourceDecoders | None = None) -> Iterator[pa.RecordBatch]:
    """Every record of `r` as Arrow batches; offsets missing from the log are a data loss."""
    schema = arrow_schema(options.include_headers, decoders)
    if not uses_fetch_client(options.client):
        yield from _consume_range(options, r, schema, decoders)
        return
    for columns in fetch_range(options.client, r.topic, r.partition, r.start, r.end,
                               include_headers=options.include_headers, timeout_s=options.poll_timeout_s,
                               on_lost=lambda what: report_data_loss(options, what)):
        yield _columns_to_arrow(columns, r.topic, r.partition, options.include_headers, schema, decoders)


def _columns_to_arrow(columns: list[Columns], topic: str, partition: int, include_headers: bool,
                      schema: pa.Schema, decoders: SourceDecoders | None) -> pa.RecordBatch:
    """One record batch of the fetched records, in offset order."""
    offsets = np.concatenate([c.offsets for c in columns])
    return _record_batch(
        pa.concat_arrays([c.keys for c in columns]), pa.concat_arrays([c.values for c in columns]), offsets,
        pa.array(np.concatenate([c.timestamps_ms for c in columns])),
        pa.array(np.concatenate([np.full(len(c.offsets), c.timestamp_type, np.int32) for c in columns])),
        [h for c in columns for h in c.headers] if include_headers else None, topic, partition, schema, decoders)


def _record_batch(keys: pa.Array | list, values: pa.Array | list, offsets, timestamps_ms: pa.Array,
                  timestamp_types: pa.Array, headers: list | None, topic: str, partition: int, schema: pa.Schema,
                  decoders: SourceDecoders | None) -> pa.RecordBatch:
    """The source's columns; keys and values as Arrow binary arrays or lists of bytes, decoded when a schema
    registry's decoders are given; headers only when the query asked for them."""
    if decoders and (decoders.key or decoders.value):
        offsets = offsets.tolist() if isinstance(offsets, np.ndarray) else offsets
        if decoders.key:
            keys = decoders.key.column_of(_as_list(keys), topic, partition, offsets)
        if decoders.value:
            values = decoders.value.column_of(_as_list(values), topic, partition, offsets)
    n = len(offsets)
    arrays = [
        pa.array(keys, pa.binary()) if isinstance(keys, list) else keys,
        pa.array(values, pa.binary()) if isinstance(values, list) else values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        # Kafka timestamps are milliseconds; Spark wants microseconds.
        pc.multiply(timestamps_ms, 1000).cast(_ARROW_TIMESTAMP),
        timestamp_types,
    ]
    if headers is not None:
        arrays.append(pa.array(headers, _ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _as_list(column: pa.Array | list) -> list:
    return column if isinstance(column, list) else column.to_pylist()


def _consume_range(options: SourceOptions, r: OffsetRange, schema: pa.Schema,
                   decoders: SourceDecoders | None) -> Iterator[pa.RecordBatch]:
    """read_range through librdkafka, for connection settings the fetch client does not speak."""
    consumer = Consumer({
        **{name: value for name, value in _read_defaults(r).items()
           if name not in options.client and _READ_DEFAULT_ALIASES.get(name) not in options.client},
        **options.client,
        "group.id": options.client.get("group.id", f"{options.group_id_prefix}-{uuid.uuid4()}"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    try:
        tp = KafkaTopicPartition(r.topic, r.partition)
        position = r.start
        low, _ = consumer.get_watermark_offsets(tp, timeout=options.poll_timeout_s)
        if position < low:
            report_data_loss(options, f"offsets {position} to {min(low, r.end) - 1} of {r.topic}-{r.partition} are "
                                      f"gone: the log starts at {low}")
            position = low
        if position >= r.end:
            return
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, position)])
        idle_since = time.monotonic()
        while position < r.end:
            # consume() waits for a full batch or its timeout, so the timeout is short and the loop counts idleness.
            messages = consumer.consume(_MESSAGES_PER_CONSUME, _CONSUME_WAIT_S)
            if not messages:
                if time.monotonic() - idle_since > options.poll_timeout_s:
                    raise TimeoutError(f"no record of {r.topic}-{r.partition} after offset {position} within "
                                       f"{options.poll_timeout_s}s (kafkaConsumer.pollTimeoutMs)")
                continue
            idle_since = time.monotonic()
            if not any(map(_error_of, messages)):  # the usual case: records only
                records = messages if messages[-1].offset() < r.end else [m for m in messages if m.offset() < r.end]
                if len(records) < len(messages):
                    position = r.end
                if records:
                    position = max(position, records[-1].offset() + 1)
                    yield _to_arrow(records, r.topic, r.partition, options.include_headers, schema, decoders)
                continue
            records = []
            for message in messages:
                error = message.error()
                if error is None:
                    if message.offset() < r.end:
                        records.append(message)
                    else:  # the range's last offsets hold no record (compacted, or a transaction marker)
                        position = r.end
                elif error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() < r.end:
                        report_data_loss(options, f"{r.topic}-{r.partition} ends at {message.offset()}, before "
                                                  f"the query's end offset {r.end}")
                    position = r.end
                elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                    reached = records[-1].offset() + 1 if records else position
                    position = _skip_deleted(consumer, options, r, tp, reached)
                    break
                else:
                    raise RuntimeError(f"reading {r.topic}-{r.partition}: {error.str()}")
            if records:
                position = max(position, records[-1].offset() + 1)
                yield _to_arrow(records, r.topic, r.partition, options.include_headers, schema, decoders)
    finally:
        consumer.close()


def _skip_deleted(consumer, options: SourceOptions, r: OffsetRange, tp, position: int) -> int:
    """The log start moved past `position` while reading: a data loss; go on from the new start, or stop."""
    low, _ = consumer.get_watermark_offsets(tp, timeout=options.poll_timeout_s)
    report_data_loss(options, f"offsets from {position} of {r.topic}-{r.partition} were deleted while reading: the "
                              f"log starts at {low}")
    position = max(position, low)
    if position < r.end:
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, position)])
    return position


# Message's methods, unbound: map() calls them without a Python frame per record.
_key_of, _value_of, _offset_of = Message.key, Message.value, Message.offset
_timestamp_of, _headers_of, _error_of = Message.timestamp, Message.headers, Message.error
# confluent-kafka's (timestamp type, timestamp ms) pairs, converted by Arrow in one call.
_ARROW_TIMESTAMP_PAIR = pa.struct([("type", pa.int32()), ("ms", pa.int64())])


def _to_arrow(messages: list, topic: str, partition: int, include_headers: bool,
              schema: pa.Schema, decoders: SourceDecoders | None = None) -> pa.RecordBatch:
    """One record batch, column by column, from the consumed messages."""
    timestamps = pa.array(list(map(_timestamp_of, messages)), _ARROW_TIMESTAMP_PAIR)
    return _record_batch(
        list(map(_key_of, messages)), list(map(_value_of, messages)), list(map(_offset_of, messages)),
        timestamps.field("ms"),
        # confluent-kafka numbers timestamp types 0 none, 1 create, 2 log append; Kafka and Spark -1, 0, 1.
        pc.subtract(timestamps.field("type"), 1),
        list(map(_headers_of, messages)) if include_headers else None, topic, partition, schema, decoders)


# --- the readers ---

def _check_schema(schema: StructType, options: SourceOptions, decoders: SourceDecoders | None) -> None:
    expected = source_schema(options.include_headers, **(decoders.column_types() if decoders else {}))
    if schema != expected:
        changed = " (a subject's latest schema changed since the query was planned?)" if decoders else ""
        raise OptionError(f"the odradek source has a fixed schema and cannot be read with another: expected "
                          f"{expected.simpleString()}, got {schema.simpleString()}{changed}")


def source_decoders(options: SourceOptions, planned: SourceDecoders | None) -> SourceDecoders | None:
    """The decoders of the schema-registry columns: those the schema was planned with, or else fetched now."""
    if options.key_registry is None and options.value_registry is None:
        return None
    if planned is not None and planned.matches(options.key_registry, options.value_registry):
        return planned
    return SourceDecoders.fetch(options.key_registry, options.value_registry)


class OdradekBatchReader(DataSourceReader):
    """`spark.read.format("odradek")`: the records between the starting and ending offsets at planning time."""

    def __init__(self, options, schema: StructType, decoders: SourceDecoders | None = None):
        self.options = SourceOptions.parse(options, streaming=False)
        self.decoders = source_decoders(self.options, decoders)
        _check_schema(schema, self.options, self.decoders)

    def partitions(self) -> Sequence[OffsetRange]:
        lookup = OffsetLookup(self.options.client)
        tps = lookup.partitions(self.options.strategy)
        start = lookup.resolve(self.options.starting, tps, starting=True,
                               no_match_is_latest=self.options.starting_by_timestamp_latest)
        end = lookup.resolve(self.options.ending, tps, starting=False, no_match_is_latest=True)
        ranges = []
        for t, p in tps:
            if start[(t, p)] > end[(t, p)]:
                raise OptionError(f"the starting offset {start[(t, p)]} of {t}-{p} is after its ending offset "
                                  f"{end[(t, p)]}")
            ranges.append(OffsetRange(t, p, start[(t, p)], end[(t, p)]))
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):  # Spark passes a bare InputPartition when there are none
            yield from read_range(self.options, partition, self.decoders)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("odradek")`: micro-batches of offset ranges, new partitions included."""

    def __init__(self, options, schema: StructType, decoders: SourceDecoders | None = None):
        self.options = SourceOptions.parse(options, streaming=True)
        self.decoders = source_decoders(self.options, decoders)
        _check_schema(schema, self.options, self.decoders)
        self._lookup: OffsetLookup | None = None
        self._available_now: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._minimum = (None if self.options.min_offsets_per_trigger is None else
                         MinimumPerTrigger(self.options.min_offsets_per_trigger, self.options.max_trigger_delay_s))

    def __getstate__(self):
        # Executors get a pickled copy for read(); the admin client stays on the driver.
        return {**self.__dict__, "_lookup": None}

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.options.client)
        return self._lookup

    def initialOffset(self) -> dict:
        """The starting offsets, resolved now. Spark calls this again when it replays the first batch after a
        crash, and "latest" (or a timestamp, after retention) then resolves differently; Spark's Kafka source
        keeps the first answer in the checkpoint's sources/ directory, which a Python source cannot reach. So
        the first micro-batch is empty: its end, these offsets, lands in the checkpoint's offset log, and a
        replay of it reads nothing. The INITIAL_MARK key tells the first batch's start from any other."""
        tps = self.lookup.partitions(self.options.strategy)
        offsets = offsets_to_json(self.lookup.resolve(
            self.options.starting, tps, starting=True, no_match_is_latest=self.options.starting_by_timestamp_latest))
        return {INITIAL_MARK: True, **offsets}

    def getDefaultReadLimit(self) -> ReadLimit:
        # One limit travels to latestOffset (Python sources have no composite limit), so the options decide
        # there; the limit only says whether the engine overrides them with ReadAllAvailable.
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.lookup.latest(self.lookup.partitions(self.options.strategy))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if INITIAL_MARK in start:  # Spark runs a first batch even without data, and logs its end: the start
            return {k: v for k, v in start.items() if k != INITIAL_MARK}
        begin = offsets_from_json(start)
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self.lookup.latest(self.lookup.partitions(self.options.strategy))
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json(latest)
        new = [tp for tp in latest if tp not in begin]
        starts = {**self.lookup.earliest(new), **begin} if new else begin
        # AvailableNow never waits for a minimum: at the end of what it has to read, it would wait forever.
        if self._minimum is not None and self._available_now is None:
            waiting = sum(max(0, end - starts.get(tp, end)) for tp, end in latest.items())
            if not self._minimum.admits(waiting, time.monotonic()):
                return start
        if self.options.max_offsets_per_trigger:
            latest = limit_offsets(starts, latest, self.options.max_offsets_per_trigger)
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[OffsetRange]:
        if INITIAL_MARK in start:  # the first batch, or its replay from a fresh initialOffset: empty
            return []
        begin, until = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        new_starts = self.lookup.earliest(new)
        for (t, p), offset in sorted(new_starts.items()):
            if offset != 0:
                report_data_loss(self.options, f"the new partition {t}-{p} starts at offset {offset}, not 0")
        gone = sorted(tp for tp in begin if tp not in until)
        if gone:
            report_data_loss(self.options, f"partitions {_names(gone)} no longer exist")
        ranges = []
        for (t, p), end_offset in sorted(until.items()):
            start_offset = begin.get((t, p), new_starts.get((t, p)))
            if end_offset < start_offset:
                report_data_loss(self.options, f"the offset of {t}-{p} went back from {start_offset} to {end_offset}")
                continue
            ranges.append(OffsetRange(t, p, start_offset, end_offset))
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):  # Spark passes a bare InputPartition when there are none
            yield from read_range(self.options, partition, self.decoders)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in the query's checkpoint, as with Spark's Kafka source."""
