"""The writing side of the "odradek" Spark data source: batch writes and an exactly-once streaming sink.

Rows follow Spark's Kafka sink: `value` (string or binary, required), `key` (string or binary), `headers`
(array<struct<key: string, value: binary>>), `topic` (string; the `topic` option overrides it) and
`partition` (int), and, beyond Spark's sink, `timestamp` (the record's timestamp). Spark hands each task
Arrow record batches. A plain write's go to Odradek's own idempotent producer (produce.py), which encodes them
straight into record batches; Avro columns, the transactional sink, and settings only librdkafka speaks go to
a confluent-kafka Producer (acks=all, idempotence on), column by column without a
Python object per row. Either way a task's records are acknowledged before it returns, and any delivery
error fails it.

With `valueSchemaRegistry.url` (or `keySchemaRegistry.url`) the column is encoded as Avro in Confluent's
framing with the subject's latest schema (schema_registry.py), checked against the column type on the driver.

Streaming writes are exactly-once through Kafka transactions (see docs/spark.md, "Exactly-once"):

* each task of a micro-batch writes with its own transactional id (derived from the sink id and the task's
  partition id), so a later attempt of the task fences an earlier one and aborts what it left open;
* in the same transaction as its records, the task appends `done/<sink id>/<task> -> batch id` to
  `__odradek_spark_commits`: its records and that marker become visible together, or not at all;
* after fencing, the task reads `__odradek_spark_commits` (read_committed) and writes nothing if its batch
  is already done, or committed by the driver, whose commit(batch) appends `commit/<sink id> -> batch id`.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, MapType, StructType

from odradek.spark.options import OptionError, boolean_option, kafka_client_config, parse_registry
from odradek.spark.produce import ColumnProducer, epoch_ms, uses_produce_client
from odradek.spark.schema_registry import SinkEncoders

COMMITS_TOPIC = "__odradek_spark_commits"
COMMITS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": "600000"}
SINK_ID_OPTION = "odradek.sink.id"
# "true": every record of the streaming sink says which sink, batch and task wrote it. Off by default: a
# record's headers cost as much to produce as the record, and Spark's Kafka sink adds none.
TAG_RECORDS_OPTION = "odradek.sink.tagRecords"
# "false": the streaming sink writes each task's rows without a transaction, at-least-once as Spark's Kafka sink.
TRANSACTIONAL_OPTION = "odradek.sink.transactional"
# "true": a plain write must run in the JVM sink (datasource.JAR), "false": never; unset: wherever it can. A write
# with "true" that reaches this module is one the JVM sink is not there to take.
JVM_OPTION = "odradek.sink.jvm"
HEADER_SINK = "odradek.sink"
HEADER_BATCH = "odradek.batch"
HEADER_TASK = "odradek.task"
# Spark's MicroBatchExecution sets this local property on every task of a micro-batch.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# ... and this one to the query id, which is kept in the checkpoint: a new checkpoint gets a new id.
QUERY_ID_PROPERTY = "sql.streaming.queryId"

_TIMEOUT_S = 30.0


@dataclass
class OdradekCommitMessage(WriterCommitMessage):
    """What one task reports to the driver."""

    partition_id: int
    written: int
    skipped: int = 0
    batch_id: int | None = None
    sink_id: str | None = None


@dataclass
class OutRecord:
    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_ms: int | None = None


def _option(options: dict, name: str) -> str | None:
    for key, value in options.items():
        if key.lower() == name.lower():
            return value
    return None


def _as_bytes(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _epoch_ms(value) -> int | None:
    """The record timestamp of an optional `timestamp` column (a Spark timestamp, or epoch ms)."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):  # aware from Spark's Arrow batches; naive means local time
        return math.floor(value.timestamp() * 1000)  # as unix_millis(): microseconds floored
    return int(value)


def check_schema(schema: StructType, options: dict) -> None:
    """Raise Spark-Kafka-sink-like errors for a schema that cannot be written."""
    names = {f.name.lower(): f for f in schema.fields}
    if "value" not in names:
        raise ValueError("Required attribute 'value' not found")
    if _option(options, "topic") is None and "topic" not in names:
        raise ValueError("topic option required when no 'topic' attribute is present. "
                         "Use the topic option for setting a topic.")


def check_jvm_option(options: dict) -> None:
    """Fail a write that asked for the JVM sink (odradek.sink.jvm=true) and reached the Python data source."""
    if boolean_option(options, JVM_OPTION, False):
        raise OptionError(f"{JVM_OPTION}=true, but the JVM sink is not on Spark's classpath: add "
                          "odradek.spark.datasource.JAR to spark.jars")


def sink_encoders(options: dict, schema: StructType) -> SinkEncoders | None:
    """The Avro encoders of the key and value columns, with the subjects' latest schemas fetched now."""
    topic = _option(options, "topic")
    topics = (topic,) if topic else None
    key = parse_registry(options, "key", topics, source=False)
    value = parse_registry(options, "value", topics, source=False)
    for f in schema.fields:
        if f.name.lower() in ("key", "value") and isinstance(f.dataType, StructType | ArrayType | MapType) and \
                (value if f.name.lower() == "value" else key) is None:
            raise ValueError(f"the '{f.name}' column is {f.dataType.simpleString()}: set the option "
                             f"'{f.name.lower()}SchemaRegistry.url' to write it as Avro, or make it a string or "
                             "binary (to_json, to_avro)")
    return SinkEncoders.fetch(schema, key, value)


def to_records(rows: Iterable[dict], options: dict, encoders: SinkEncoders | None = None) -> Iterator[OutRecord]:
    """Turn rows (dicts of Python values) into records, the `topic` option overriding the `topic` column."""
    topic_option = _option(options, "topic")
    for row in rows:
        d = {k.lower(): v for k, v in row.items()}
        topic = topic_option or d.get("topic")
        if topic is None:
            raise ValueError(f"null topic present in the data: {row}. Use the topic option for setting a topic.")
        headers = []
        for h in d.get("headers") or []:
            hk, hv = (h["key"], h["value"]) if not isinstance(h, tuple | list) else (h[0], h[1])
            headers.append((hk, _as_bytes(hv)))
        partition = d.get("partition")
        key, value = d.get("key"), d["value"]
        if encoders is not None:
            key = encoders.key.encode(key) if encoders.key else key
            value = encoders.value.encode(value) if encoders.value else value
        yield OutRecord(topic=topic, value=_as_bytes(value), key=_as_bytes(key),
                        partition=None if partition is None else int(partition), headers=headers,
                        timestamp_ms=_epoch_ms(d.get("timestamp")))


def producer_config(options: dict) -> dict:
    # A task produces its rows as fast as it reads them: a queue of librdkafka's default 100,000 messages
    # filled up and made it wait (queue.buffering.max.kbytes still bounds the memory).
    # murmur2_random: a key's partition is the one Spark's Kafka sink and every Java producer give it
    # (librdkafka's own default hashes keys with CRC32, and would place them elsewhere).
    config = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
              "partitioner": "murmur2_random"}
    config.update(kafka_client_config(options))
    return config


class _DeliveryErrors:
    def __init__(self):
        self.errors: list[str] = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")


class SinkProducer:
    """A Producer that reports deliveries only when they fail (a callback per record costs as much as the
    record), and raises on flush if any did."""

    def __init__(self, config: dict):
        self.errors = _DeliveryErrors()
        self.producer = Producer({**config, "on_delivery": self.errors, "delivery.report.only.error": True})

    def produce(self, topic: str, value, key, partition: int = -1, timestamp: int = 0, headers=None) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, partition=partition, timestamp=timestamp, headers=headers)
                return
            except BufferError:  # the local queue is full: let deliveries make room (they report no event)
                self.producer.poll(0.005)

    def flush(self) -> None:
        remaining = self.producer.flush(_TIMEOUT_S)
        if remaining:
            raise RuntimeError(f"{remaining} records not delivered within {_TIMEOUT_S}s")
        if self.errors.errors:
            raise RuntimeError("delivery failed: " + "; ".join(self.errors.errors[:5]))


# Plain producers outlive their task in the Python worker, which Spark reuses for the next tasks: a new
# idempotent producer waits for its producer id (librdkafka's for 500 ms: it asks before a connection is up).
_plain_producers: dict[str, SinkProducer | ColumnProducer] = {}


def write_plain(options: dict, batches: Iterable[pa.RecordBatch], encoders: SinkEncoders | None) -> int:
    """A task's rows without a transaction, through this worker's producer for these options; a producer that
    failed is dropped. Rows without registry encoders go through Odradek's own producer (produce.py) where it
    speaks the options' settings, others through librdkafka."""
    config = producer_config(options)
    # A kept producer says which path: the settings are checked (and their TLS context built) once per worker.
    key = json.dumps([encoders is None, config], sort_keys=True, default=str)
    producer = _plain_producers.pop(key, None) or (
        ColumnProducer(config) if encoders is None and uses_produce_client(config) else SinkProducer(config))
    try:
        if isinstance(producer, ColumnProducer):
            written = producer.write(batches, _option(options, "topic"))
        else:
            written = write_batches(producer, batches, options, encoders)
    except BaseException:
        if isinstance(producer, ColumnProducer):
            producer.close()
        raise
    _plain_producers[key] = producer
    return written


def produce_all(producer: SinkProducer, records: Iterable[OutRecord]) -> int:
    """Produce records and flush, raising on any delivery error; returns how many were written."""
    count = 0
    for r in records:
        producer.produce(r.topic, r.value, r.key, -1 if r.partition is None else r.partition,
                         r.timestamp_ms or 0, r.headers or None)
        count += 1
    producer.flush()
    return count


def produce_arrow(producer: SinkProducer, batches: Iterable[pa.RecordBatch], options: dict,
                  tags: list[tuple[str, bytes]] | None = None) -> int:
    """Produce the rows of Arrow record batches, column by column, and flush; the rows' columns are those of
    to_records (without encoders), `tags` are headers added to every record. Returns how many were written."""
    topic_option = _option(options, "topic")
    count = 0
    for batch in batches:
        columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        n = batch.num_rows
        values = _binary_list(columns["value"])
        keys = _binary_list(columns["key"]) if "key" in columns else itertools.repeat(None, n)
        if topic_option is not None or "topic" not in columns:
            topics = itertools.repeat(topic_option, n)
        else:
            topic_column = columns["topic"]
            if topic_column.null_count:
                raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
            topics = topic_column.to_pylist()
        if not ({"partition", "timestamp", "headers"} & columns.keys()) and not tags:
            produce = producer.producer.produce  # the common case: no extras, no Python frame per record
            for topic, key, value in zip(topics, keys, values, strict=True):
                try:
                    produce(topic, value, key)
                except BufferError:
                    producer.produce(topic, value, key)
        else:
            partitions = (pc.fill_null(columns["partition"], -1).to_pylist() if "partition" in columns
                          else itertools.repeat(-1, n))
            timestamps = (_epoch_ms_list(columns["timestamp"]) if "timestamp" in columns
                          else itertools.repeat(0, n))
            headers = (_header_lists(columns["headers"], tags or []) if "headers" in columns
                       else itertools.repeat(tags or None, n))
            for topic, key, value, partition, timestamp, record_headers in zip(
                    topics, keys, values, partitions, timestamps, headers, strict=True):
                producer.produce(topic, value, key, partition, timestamp, record_headers)
        count += n
    producer.flush()
    return count


def _binary_list(column: pa.Array) -> list:
    """A string or binary column's values as bytes (None for null)."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())  # the same bytes, UTF-8
    return column.to_pylist()


def _epoch_ms_list(column: pa.Array) -> list:
    """The `timestamp` column as epoch milliseconds, 0 ("now" to librdkafka) for null."""
    return pc.fill_null(epoch_ms(column), 0).to_pylist()


def _header_lists(column: pa.Array, tags: list[tuple[str, bytes]]) -> list:
    return [[*((h["key"], h["value"]) for h in record or ()), *tags] or None for record in column.to_pylist()]


def write_batches(producer: SinkProducer, batches: Iterable[pa.RecordBatch], options: dict,
                  encoders: SinkEncoders | None, tags: list[tuple[str, bytes]] | None = None) -> int:
    """Produce Spark's Arrow batches and flush; Avro columns go through Python rows for their encoders."""
    if encoders is None:
        return produce_arrow(producer, batches, options, tags)
    records = to_records((row for batch in batches for row in batch.to_pylist()), options, encoders)
    if tags:
        records = (dataclasses.replace(r, headers=[*r.headers, *tags]) for r in records)
    return produce_all(producer, records)


class OdradekBatchWriter(DataSourceArrowWriter):
    """`df.write.format("odradek")`: every task produces its rows and flushes (at-least-once on retries)."""

    def __init__(self, options: dict, schema: StructType):
        self.options = dict(options)
        self.schema = schema
        check_schema(schema, self.options)
        check_jvm_option(self.options)
        kafka_client_config(self.options)  # fail on the driver for a missing bootstrap server
        self.encoders = sink_encoders(self.options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OdradekCommitMessage:
        ctx = TaskContext.get()
        written = write_plain(self.options, iterator, self.encoders)
        return OdradekCommitMessage(partition_id=ctx.partitionId() if ctx else 0, written=written)

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        pass


def sink_id_from_options(options: dict) -> str:
    sink_id = _option(options, SINK_ID_OPTION)
    if sink_id:
        return sink_id
    checkpoint = _option(options, "checkpointLocation")
    if checkpoint:
        return "checkpoint:" + os.path.normpath(checkpoint)
    raise ValueError(f"the odradek streaming sink needs a stable id: set option '{SINK_ID_OPTION}' "
                     "(or 'checkpointLocation' as a writer option)")


class SinkState:
    """What `__odradek_spark_commits` says about one sink: the last committed batch and each task's last
    batch done."""

    def __init__(self, last_committed: int = -1, done: dict[int, int] | None = None):
        self.last_committed = last_committed
        self.done = done or {}


def _commit_key(sink_id: str) -> bytes:
    return f"commit/{sink_id}".encode()


def _done_key(sink_id: str, task: int) -> bytes:
    return f"done/{sink_id}/{task}".encode()


def transactional_id(sink_id: str, task: int) -> str:
    """One transactional id per task of a sink: the same in every attempt of the task, and short."""
    return f"odradek-sink-{hashlib.sha256(sink_id.encode()).hexdigest()[:24]}-{task}"


def ensure_commits_topic(config: dict) -> None:

    admin = AdminClient({"bootstrap.servers": config["bootstrap.servers"]})
    if COMMITS_TOPIC in admin.list_topics(timeout=_TIMEOUT_S).topics:
        return
    # replication factor -1: the broker's default.replication.factor, as durable as the data topics by default
    # Ten-minute segments: compaction only cleans closed ones, and a worker's first task reads the whole topic.
    futures = admin.create_topics([NewTopic(COMMITS_TOPIC, 1, -1, config=COMMITS_TOPIC_CONFIG)])
    for fut in futures.values():
        try:
            fut.result(_TIMEOUT_S)
        except Exception as e:  # a concurrent creator won
            if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                raise


def _consumer(config: dict, isolation: str = "read_committed"):
    # The read ends at the log end, where a fetch waits fetch.wait.max.ms for more: keep that short.
    return Consumer({**config, "group.id": "odradek-spark-sink", "enable.auto.commit": False,
                     "enable.partition.eof": True, "auto.offset.reset": "earliest", "isolation.level": isolation,
                     "fetch.wait.max.ms": 10})


def _read_range(consumer, topic: str, partition: int, start: int, end: int) -> Iterator:
    """Every message of topic[partition] from start (inclusive) to end (exclusive)."""

    if start >= end:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    try:
        while True:
            msg = consumer.poll(_TIMEOUT_S)
            if msg is None:
                raise RuntimeError(f"timed out reading {topic}[{partition}] up to offset {end}")
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= end:
                        return
                    continue
                raise RuntimeError(f"reading {topic}[{partition}]: {msg.error()}")
            if msg.offset() >= end:
                return
            yield msg
            if msg.offset() + 1 >= end:
                return
    finally:
        consumer.unassign()


# What this Python worker read of `__odradek_spark_commits` for each sink, and where it stopped: its next
# task of the sink reads on from there, not the whole topic again (it holds every sink's markers).
_sink_states: dict[tuple[str, str], tuple[SinkState, int]] = {}


def read_sink_state(config: dict, sink_id: str) -> SinkState:
    """Read `__odradek_spark_commits` to its end, transactions decided: up to its high watermark, waiting
    for the last stable offset to get there (a transaction open in it is committed or aborted soon).
    Markers only ever raise a task's or a sink's batch id, so what was read before stays true."""
    cache_key = (json.dumps(config, sort_keys=True, default=str), sink_id)
    known, read_to = _sink_states.get(cache_key, (SinkState(), 0))
    probe = _consumer(config, "read_uncommitted")
    try:
        low, high = probe.get_watermark_offsets(TopicPartition(COMMITS_TOPIC, 0), timeout=_TIMEOUT_S)
    finally:
        probe.close()
    if high < read_to:  # the topic was deleted and made again: what was read is gone
        known, read_to = SinkState(), 0
    consumer = _consumer(config)
    try:
        state = SinkState(known.last_committed, dict(known.done))
        commit_key = _commit_key(sink_id)
        done_prefix = f"done/{sink_id}/".encode()
        for msg in _read_range(consumer, COMMITS_TOPIC, 0, max(low, read_to), high):
            key = msg.key() or b""
            if key == commit_key:
                state.last_committed = max(state.last_committed, json.loads(msg.value())["batch_id"])
            elif key.startswith(done_prefix) and key[len(done_prefix):].isdigit():  # not another sink's "<id>/..."
                task = int(key[len(done_prefix):])
                state.done[task] = max(state.done.get(task, -1), json.loads(msg.value())["batch_id"])
        _sink_states[cache_key] = (state, high)
        return state
    finally:
        consumer.close()


def _append_marker(config: dict, key: bytes, value: dict) -> None:
    # Not idempotent: a new idempotent producer waits librdkafka's 500 ms timer for its producer id, on every
    # micro-batch's commit, and a marker written twice by a retry means what it meant once.
    producer = SinkProducer({"acks": "all", **config, "enable.idempotence": False})
    produce_all(producer, [OutRecord(topic=COMMITS_TOPIC, key=key, value=json.dumps(value).encode(), partition=0)])


def _fence_earlier_attempts(options: dict, sink_id: str, task: int) -> tuple[SinkProducer, SinkState]:
    """The task's transactional producer, once it has fenced every earlier attempt of the task and aborted what
    they left open, and what the markers say after that."""
    producer = SinkProducer({**producer_config(options), "transactional.id": transactional_id(sink_id, task)})
    # A connection first: a new producer that looks for its transaction coordinator before any broker is up
    # retries only on librdkafka's 500 ms coordinator timer.
    producer.producer.list_topics(timeout=_TIMEOUT_S)
    producer.producer.init_transactions(_TIMEOUT_S)
    return producer, read_sink_state(kafka_client_config(options), sink_id)


def write_streaming_task(options: dict, batches: Iterable[pa.RecordBatch], batch_id: int, task: int,
                         sink_id: str | None = None, encoders: SinkEncoders | None = None) -> OdradekCommitMessage:
    """One task of micro-batch `batch_id`: its records and its done marker in one transaction, unless an
    earlier attempt of the task (or the driver's commit) already made the batch done."""
    sink_id = sink_id or sink_id_from_options(options)
    # Fencing and the marker read wait on the brokers (about 80 ms): they run while Spark sends the rows.
    with ThreadPoolExecutor(1, thread_name_prefix="odradek-sink-fence") as pool:
        fenced = pool.submit(_fence_earlier_attempts, options, sink_id, task)
        batches = list(batches)
        producer, state = fenced.result()
    if batch_id <= state.last_committed or state.done.get(task, -1) >= batch_id:
        return OdradekCommitMessage(partition_id=task, written=0, skipped=sum(b.num_rows for b in batches),
                                    batch_id=batch_id, sink_id=sink_id)
    tags = None
    if boolean_option(options, TAG_RECORDS_OPTION, False):
        tags = [(HEADER_SINK, sink_id.encode()), (HEADER_BATCH, str(batch_id).encode()),
                (HEADER_TASK, str(task).encode())]
    done = OutRecord(topic=COMMITS_TOPIC, key=_done_key(sink_id, task), partition=0,
                     value=json.dumps({"batch_id": batch_id}).encode())
    producer.producer.begin_transaction()
    try:
        written = write_batches(producer, batches, options, encoders, tags)
        produce_all(producer, [done])
        producer.producer.commit_transaction(_TIMEOUT_S)
    except BaseException:
        try:
            producer.producer.abort_transaction(_TIMEOUT_S)
        except Exception:  # the next attempt's init_transactions aborts it anyway
            pass
        raise
    return OdradekCommitMessage(partition_id=task, written=written, batch_id=batch_id, sink_id=sink_id)


def commit_batch(options: dict, batch_id: int, sink_id: str | None = None) -> None:
    """The driver's commit of a micro-batch: after it, replays of the batch write nothing."""
    config = kafka_client_config(options)
    _append_marker(config, _commit_key(sink_id or sink_id_from_options(options)), {"batch_id": batch_id})


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("odradek")`: exactly-once across replays of a micro-batch (module docstring), or,
    with `odradek.sink.transactional=false`, at-least-once like Spark's Kafka sink."""

    def __init__(self, options: dict, schema: StructType):
        self.options = dict(options)
        self.schema = schema
        check_schema(schema, self.options)
        check_jvm_option(self.options)
        self.transactional = boolean_option(self.options, TRANSACTIONAL_OPTION, True)
        self.encoders = sink_encoders(self.options, schema)
        if self.transactional:
            sink_id_from_options(self.options)
            ensure_commits_topic(kafka_client_config(self.options))
        else:
            kafka_client_config(self.options)  # fail on the driver for a missing bootstrap server

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OdradekCommitMessage:
        ctx = TaskContext.get()
        if not self.transactional:
            written = write_plain(self.options, iterator, self.encoders)
            return OdradekCommitMessage(partition_id=ctx.partitionId(), written=written)
        batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
        if batch is None:
            raise RuntimeError(f"task has no '{BATCH_ID_PROPERTY}' local property; is this a micro-batch query?")
        sink_id = sink_id_from_options(self.options)
        query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
        if query_id:  # a recreated checkpoint starts batch ids at 0 again: it must not look committed
            sink_id = f"{sink_id}#{query_id}"
        return write_streaming_task(self.options, iterator, int(batch), ctx.partitionId(), sink_id, self.encoders)

    def commit(self, messages, batchId: int) -> None:
        sink_ids = {m.sink_id for m in messages if isinstance(m, OdradekCommitMessage) and m.sink_id}
        for sink_id in sink_ids:  # no task ran: nothing was written, nothing to mark
            commit_batch(self.options, batchId, sink_id)

    def abort(self, messages, batchId: int) -> None:
        pass
