"""The "odradek" source: Spark's Kafka source columns and options, batch and streaming reads, recovery."""

import collections
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

pytest.importorskip("pyspark")
pytest.importorskip("odradek.spark.datasource")

from odradek.spark.progress import offsets_behind_latest  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, create_topic, read_all, unique  # noqa: E402

BASE_MS = 1_700_000_000_000
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


# --- helpers: topics, producing with known offsets, reading results ---


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


# The client must outlive its futures: a collected AdminClient fails them with _DESTROY.


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    client = admin(bootstrap)
    for fut in client.create_partitions([NewPartitions(topic, total)]).values():
        fut.result(30)


def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """DeleteRecords: the log of topic-partition starts at `offset` afterwards, as if retention removed the rest."""
    client = admin(bootstrap)
    for fut in client.delete_records([TopicPartition(topic, partition, offset)]).values():
        fut.result(30)


@dataclass(frozen=True)
class Sent:
    """A record as the broker acknowledged it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int

    @property
    def row(self) -> tuple:
        return (self.topic, self.partition, self.offset, self.key, self.value)


def produce(bootstrap: str, records: list[dict]) -> list[Sent]:
    """Produce dicts of Producer.produce arguments (topic, partition, value, key, timestamp, headers) in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    sent, errors = [], []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            sent.append(Sent(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

    for record in records:
        producer.produce(on_delivery=delivered, **record)
        producer.poll(0)
    assert producer.flush(30) == 0, "records still in flight"
    assert not errors, errors
    return sent


def fill(bootstrap: str, topic: str, partitions: int, count: int, tag: str = "v") -> list[Sent]:
    """`count` records in each partition: key b"k<partition>-<i>", value b"<tag><partition>-<i>"."""
    return produce(bootstrap, [
        {"topic": topic, "partition": p, "key": f"k{p}-{i}".encode(), "value": f"{tag}{p}-{i}".encode()}
        for i in range(count) for p in range(partitions)])


def as_bytes(value) -> bytes | None:
    return None if value is None else bytes(value)


def rows(df) -> list[tuple]:
    """(topic, partition, offset, key, value) of every row, sorted."""
    return sorted((r.topic, r.partition, r.offset, as_bytes(r.key), as_bytes(r.value))
                  for r in df.select("topic", "partition", "offset", "key", "value").collect())


def expected(sent: list[Sent], keep=lambda s: True) -> list[tuple]:
    return sorted(s.row for s in sent if keep(s))


def record_count(bootstrap: str, topic: str) -> int:
    """The sum of the high watermarks of the topic's partitions (the sink writes no transaction markers)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-count"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in meta.partitions)
    finally:
        consumer.close()


# --- helpers: queries ---

def load(reader, bootstrap: str | None, **options):
    """`reader.format("odradek")` with the options (values as Spark turns them into strings), then load()."""
    reader = reader.format("odradek")
    if bootstrap is not None:
        reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def start_memory(df, checkpoint: Path, available_now: bool = False):
    """A query into a fresh memory table (query.name); availableNow, or a 100 ms processing-time trigger."""
    writer = (df.writeStream.format("memory").queryName(unique("q").replace("-", "_"))
              .option("checkpointLocation", str(checkpoint)))
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="100 milliseconds").start()


def run_available_now(df, checkpoint: Path):
    """Run an availableNow query to its end; raises the query's error if it fails."""
    query = start_memory(df, checkpoint, available_now=True)
    try:
        assert query.awaitTermination(SPARK_DEADLINE_S), "availableNow query did not finish"
    finally:
        query.stop()
    return query


def start_collecting(df, checkpoint: Path, available_now: bool = False):
    """A query whose batches foreachBatch appends to a list: unlike the memory sink it restarts from a checkpoint.

    Returns (query, rows): rows grows as the query runs; a replayed batch is appended again."""
    collected: list[tuple] = []
    writer = (df.writeStream.foreachBatch(lambda batch, _: collected.extend(rows(batch)))
              .option("checkpointLocation", str(checkpoint)))
    if available_now:
        return writer.trigger(availableNow=True).start(), collected
    return writer.trigger(processingTime="100 milliseconds").start(), collected


def collect_available_now(df, checkpoint: Path) -> list[tuple]:
    """Run an availableNow query to its end into a list; raises the query's error if it fails."""
    query, collected = start_collecting(df, checkpoint, available_now=True)
    try:
        assert query.awaitTermination(SPARK_DEADLINE_S), "availableNow query did not finish"
    finally:
        query.stop()
    return sorted(collected)


def checkpoint_offsets(checkpoint: Path) -> list[dict]:
    """The source offset of every batch in the offset log, in batch order (the last line of offsets/<n>)."""
    files = sorted((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [json.loads(p.read_text().strip().splitlines()[-1]) for p in files]


# --- a shared data set: 2 topics x 3 partitions, 10 records each, with explicit CreateTime timestamps ---

@dataclass
class DataSet:
    prefix: str
    a: str
    b: str
    decoy: str
    sent: list[Sent]


def data_timestamp(partition: int, i: int) -> int:
    """Record i of a partition: BASE_MS + 1000 i + partition, so partitions differ at the boundaries."""
    return BASE_MS + 1000 * i + partition


@pytest.fixture(scope="module")
def dataset(shared_node) -> DataSet:
    prefix = unique("src")
    a, b, decoy = f"{prefix}-a", f"{prefix}-b", f"{prefix}-ax"
    for topic in (a, b):
        # the timestamps are from 2023: without retention.ms=-1 the node's retention check would delete them
        create_topic(shared_node.bootstrap, topic, partitions=3, config={"retention.ms": "-1"})
    create_topic(shared_node.bootstrap, decoy)
    sent = produce(shared_node.bootstrap, [
        {"topic": t, "partition": p, "timestamp": data_timestamp(p, i),
         "key": None if i % 5 == 4 else f"{t}/{p}/{i}".encode(), "value": f"{t[-1]}{p}-{i}".encode()}
        for t in (a, b) for p in range(3) for i in range(10)])
    produce(shared_node.bootstrap, [{"topic": decoy, "value": b"not matched"}])
    return DataSet(prefix, a, b, decoy, sent)


# --- 1. batch reads from earliest ---

# Tasks read through Odradek's own Fetch client, or through librdkafka when a kafka.* setting is one only
# librdkafka honours (check.crcs here).
READ_PATHS = pytest.mark.parametrize("read_path", [{}, {"kafka.check.crcs": "true"}],
                                     ids=["fetch-client", "librdkafka"])


@READ_PATHS
def test_batch_subscribe_reads_every_record_with_its_offset_key_value_and_timestamp(spark, shared_node, dataset,
                                                                                   read_path):
    df = load(spark.read, shared_node.bootstrap, subscribe=f"{dataset.a},{dataset.b}", **read_path)
    assert df.columns == COLUMNS
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int")]
    got = sorted((r.topic, r.partition, r.offset, as_bytes(r.key), as_bytes(r.value), r.ts, r.timestampType)
                 for r in df.selectExpr("*", "unix_millis(timestamp) as ts").collect())
    assert got == sorted((s.topic, s.partition, s.offset, s.key, s.value, s.timestamp_ms, 0) for s in dataset.sent)
    assert {s.offset for s in dataset.sent} == set(range(10))


def test_batch_subscribe_pattern_matches_whole_topic_names(spark, shared_node, dataset):
    both = load(spark.read, shared_node.bootstrap, subscribePattern=re.escape(dataset.prefix) + "-[ab]")
    assert rows(both) == expected(dataset.sent)
    # "<prefix>-ax" starts with "<prefix>-a" but is not matched: the pattern must match the whole name
    only_a = load(spark.read, shared_node.bootstrap, subscribePattern=re.escape(dataset.a))
    assert rows(only_a) == expected(dataset.sent, lambda s: s.topic == dataset.a)


def test_batch_assign_reads_only_the_assigned_partitions(spark, shared_node, dataset):
    df = load(spark.read, shared_node.bootstrap, assign=json.dumps({dataset.a: [0, 2], dataset.b: [1]}))
    assert rows(df) == expected(dataset.sent, lambda s: (s.topic, s.partition) in
                                {(dataset.a, 0), (dataset.a, 2), (dataset.b, 1)})


def test_batch_read_of_nothing_is_an_empty_dataframe(spark, shared_node, dataset):
    topic = unique("empty")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    assert load(spark.read, shared_node.bootstrap, subscribe=topic).collect() == []
    same = json.dumps({dataset.b: {"0": 5, "1": 5, "2": 10}})
    assert load(spark.read, shared_node.bootstrap, subscribe=dataset.b, startingOffsets=same,
                endingOffsets=same).collect() == []


# --- 2. batch starting and ending offsets: JSON, timestamps ---

def test_batch_json_offsets_bound_each_partition_with_minus_2_earliest_and_minus_1_latest(spark, shared_node,
                                                                                          dataset):
    b = dataset.b
    df = load(spark.read, shared_node.bootstrap, subscribe=b,
              startingOffsets=json.dumps({b: {"0": 3, "1": -2, "2": 7}}),
              endingOffsets=json.dumps({b: {"0": 6, "1": 4, "2": -1}}))
    bounds = {0: (3, 6), 1: (0, 4), 2: (7, 10)}
    assert rows(df) == expected(dataset.sent, lambda s: s.topic == b and
                                bounds[s.partition][0] <= s.offset < bounds[s.partition][1])
    # endingOffsets alone, and a JSON that names only the assigned partitions
    ends = {0: 1, 1: 0, 2: 2}
    ending = load(spark.read, shared_node.bootstrap, subscribe=b,
                  endingOffsets=json.dumps({b: {str(p): end for p, end in ends.items()}}))
    assert rows(ending) == expected(dataset.sent, lambda s: s.topic == b and s.offset < ends[s.partition])
    assigned = load(spark.read, shared_node.bootstrap, assign=json.dumps({b: [1]}),
                    startingOffsets=json.dumps({b: {"1": 8}}), endingOffsets="latest")
    assert rows(assigned) == expected(dataset.sent, lambda s: s.topic == b and s.partition == 1 and s.offset >= 8)


def test_batch_json_offsets_must_name_every_partition(spark, shared_node, dataset):
    df = load(spark.read, shared_node.bootstrap, subscribe=dataset.b,
              startingOffsets=json.dumps({dataset.b: {"0": 3, "1": -2}}))
    with pytest.raises(Exception, match=r"(?i)every partition|all topicpartitions"):
        df.collect()


def test_batch_starting_and_ending_timestamps_pick_the_first_offset_at_or_after_them(spark, shared_node, dataset):
    a = dataset.a

    def a_rows(start: dict, end: dict) -> list[tuple]:
        return expected(dataset.sent, lambda s: s.topic == a and start[s.partition] <= s.offset < end[s.partition])

    # partition p holds timestamps BASE + 1000 i + p: BASE + 5001 is offset 6 in partition 0, 5 in 1 and 2
    df = load(spark.read, shared_node.bootstrap, subscribe=a, startingTimestamp=BASE_MS + 5001)
    assert rows(df) == a_rows({0: 6, 1: 5, 2: 5}, {0: 10, 1: 10, 2: 10})
    # the end is exclusive: the first offset at or after BASE + 3001 is 4 in partition 0, 3 in 1 and 2
    df = load(spark.read, shared_node.bootstrap, subscribe=a, startingTimestamp=BASE_MS + 1001,
              endingTimestamp=BASE_MS + 3001)
    assert rows(df) == a_rows({0: 2, 1: 1, 2: 1}, {0: 4, 1: 3, 2: 3})
    # no record reaches an ending timestamp: read to the latest offset
    df = load(spark.read, shared_node.bootstrap, subscribe=a, endingTimestamp=BASE_MS + 99_000)
    assert rows(df) == a_rows({0: 0, 1: 0, 2: 0}, {0: 10, 1: 10, 2: 10})
    df = load(spark.read, shared_node.bootstrap, subscribe=a, endingOffsetsByTimestamp=json.dumps(
        {a: {"0": BASE_MS + 1000, "1": BASE_MS + 2000, "2": BASE_MS + 99_000}}))
    assert rows(df) == a_rows({0: 0, 1: 0, 2: 0}, {0: 1, 1: 2, 2: 10})


def test_batch_timestamp_options_take_precedence_over_starting_offsets(spark, shared_node, dataset):
    a = dataset.a
    everywhere = json.dumps({a: {"0": 1, "1": 1, "2": 1}})
    by_ts = json.dumps({a: {"0": BASE_MS + 9000, "1": BASE_MS + 9000, "2": BASE_MS + 9000}})
    df = load(spark.read, shared_node.bootstrap, subscribe=a, startingTimestamp=BASE_MS + 8000,
              startingOffsetsByTimestamp=by_ts, startingOffsets=everywhere)
    assert rows(df) == expected(dataset.sent, lambda s: s.topic == a and s.offset >= 8)
    df = load(spark.read, shared_node.bootstrap, subscribe=a, startingOffsetsByTimestamp=by_ts,
              startingOffsets=everywhere)
    assert rows(df) == expected(dataset.sent, lambda s: s.topic == a and s.offset >= 9)


def test_batch_starting_timestamp_no_record_reaches_fails_or_starts_at_latest(spark, shared_node, dataset):
    a = dataset.a
    by_ts = json.dumps({a: {"0": BASE_MS + 2000, "1": BASE_MS + 7000, "2": BASE_MS + 99_000}})
    with pytest.raises(Exception, match=re.escape(f"{a}-2")):
        load(spark.read, shared_node.bootstrap, subscribe=a, startingOffsetsByTimestamp=by_ts).collect()
    with pytest.raises(Exception, match=re.escape(a)):
        load(spark.read, shared_node.bootstrap, subscribe=a, startingTimestamp=BASE_MS + 99_000).collect()
    df = load(spark.read, shared_node.bootstrap, subscribe=a, startingOffsetsByTimestamp=by_ts,
              startingOffsetsByTimestampStrategy="latest")
    # partition 0 from offset 2 (BASE + 2000), partition 1 from 7 (BASE + 7001), partition 2 at its end
    assert rows(df) == expected(dataset.sent, lambda s: s.topic == a and s.offset >= {0: 2, 1: 7, 2: 10}[s.partition])


# --- 3. headers ---

@READ_PATHS
def test_include_headers_round_trips_headers_and_gives_null_without_them(spark, shared_node, read_path):
    topic = unique("headers")
    create_topic(shared_node.bootstrap, topic)
    sent_headers = [
        [("a", b"1"), ("b", b"2"), ("a", b"3")],  # order and duplicate keys are kept
        [("empty", b""), ("nothing", None)],
        None,
        [("utf8-\u00e9", "caf\u00e9")],
    ]
    produce(shared_node.bootstrap, [{"topic": topic, "value": f"r{i}".encode(), **({"headers": h} if h else {})}
                                    for i, h in enumerate(sent_headers)])
    df = load(spark.read, shared_node.bootstrap, subscribe=topic, includeHeaders="true", **read_path)
    assert df.columns == [*COLUMNS, "headers"]
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    got = {r.offset: None if r.headers is None else [(h.key, as_bytes(h.value)) for h in r.headers]
           for r in df.collect()}
    assert got == {
        0: [("a", b"1"), ("b", b"2"), ("a", b"3")],
        1: [("empty", b""), ("nothing", None)],
        2: None,
        3: [("utf8-\u00e9", "caf\u00e9".encode())],
    }
    without = load(spark.read, shared_node.bootstrap, subscribe=topic, **read_path)
    assert without.columns == COLUMNS
    assert load(spark.read, shared_node.bootstrap, subscribe=topic, includeHeaders="false").columns == COLUMNS
    assert without.count() == 4


@READ_PATHS
def test_read_committed_leaves_out_aborted_transactions_and_stops_before_an_open_one(spark, shared_node,
                                                                                     read_path):
    topic = unique("committed")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit", "open"):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=i % 2)
        producer.flush(30)  # an abort would drop records still queued in the producer, never written
        if outcome == "commit":
            producer.commit_transaction(30)
        elif outcome == "abort":
            producer.abort_transaction(30)
    try:
        def values(isolation: str) -> list[bytes]:
            df = load(spark.read, shared_node.bootstrap, subscribe=topic, **{"kafka.isolation.level": isolation},
                      **read_path)
            return sorted(as_bytes(r.value) for r in df.select("value").collect())

        commits = [f"commit-{i}".encode() for i in range(4)]
        # the open transaction holds the last stable offset back: read_committed ends before it
        assert values("read_committed") == sorted(commits * 2)
        assert values("read_uncommitted") == sorted(commits * 2 + [f"{o}-{i}".encode() for o in ("abort", "open")
                                                                   for i in range(4)])
    finally:
        producer.abort_transaction(30)


# --- 4. option errors ---

@pytest.mark.parametrize(("options", "match"), [
    ({"subscribe": "t"}, r"kafka\.bootstrap\.servers"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP"}, r"(?i)subscribe.*assign"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "assign": '{"t":[0]}'}, r"(?i)only one"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "subscribePattern": "t.*"}, r"(?i)only one"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "startingOffsets": "latest"},
     r"(?i)startingOffsets.*latest"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'},
     r"(?i)startingOffsets.*latest"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "endingOffsets": "earliest"},
     r"(?i)endingOffsets.*earliest"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'},
     r"(?i)endingOffsets.*earliest"),
    ({"kafka.bootstrap.servers": "BOOTSTRAP", "subscribe": "t", "kafka.auto.offset.reset": "earliest"},
     r"auto\.offset\.reset"),
], ids=["no-bootstrap", "no-strategy", "subscribe-and-assign", "subscribe-and-pattern", "batch-starting-latest",
        "batch-starting-json-latest", "batch-ending-earliest", "batch-ending-json-earliest", "owned-client-setting"])
def test_batch_option_errors(spark, shared_node, options, match):
    options = {k: shared_node.bootstrap if v == "BOOTSTRAP" else v for k, v in options.items()}
    with pytest.raises(Exception, match=match):
        load(spark.read, None, **options).collect()


@pytest.mark.parametrize(("options", "match"), [
    ({"endingOffsets": "latest"}, r"(?i)endingOffsets"),
    ({"endingTimestamp": str(BASE_MS)}, r"(?i)endingTimestamp"),
    ({"assign": '{"t":[0]}'}, r"(?i)only one"),
], ids=["ending-offsets", "ending-timestamp", "two-strategies"])
def test_streaming_option_errors(spark, shared_node, tmp_path, options, match):
    with pytest.raises(Exception, match=match):
        query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribe=unique("t"), **options),
                             tmp_path / "checkpoint", available_now=True)
        try:
            query.awaitTermination(60)
        finally:
            query.stop()


# --- 5. streaming reads ---

def test_streaming_from_earliest_reads_every_record_of_every_subscribed_partition(spark, shared_node, dataset,
                                                                                   tmp_path):
    df = load(spark.readStream, shared_node.bootstrap, subscribePattern=re.escape(dataset.prefix) + "-[ab]",
              startingOffsets="earliest")
    query = run_available_now(df, tmp_path / "checkpoint")
    assert rows(spark.table(query.name)) == expected(dataset.sent)
    got = {(r.topic, r.partition, r.offset): (r.ts, r.timestampType)
           for r in spark.table(query.name).selectExpr("*", "unix_millis(timestamp) as ts").collect()}
    assert got == {(s.topic, s.partition, s.offset): (s.timestamp_ms, 0) for s in dataset.sent}


def test_streaming_from_latest_sees_only_records_produced_after_the_start(spark, shared_node, tmp_path):
    t1, t2 = unique("latest"), unique("latest")
    create_topic(shared_node.bootstrap, t1, partitions=2)
    create_topic(shared_node.bootstrap, t2, partitions=1)
    fill(shared_node.bootstrap, t1, 2, 5, tag="old")
    fill(shared_node.bootstrap, t2, 1, 5, tag="old")
    query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribe=f"{t1},{t2}"), tmp_path / "ckpt")
    try:
        query.processAllAvailable()
        assert spark.table(query.name).count() == 0
        new = fill(shared_node.bootstrap, t1, 2, 4, tag="new") + fill(shared_node.bootstrap, t2, 1, 3, tag="new")
        query.processAllAvailable()
        assert rows(spark.table(query.name)) == expected(new)
        assert {s.offset for s in new} == {5, 6, 7, 8}
    finally:
        query.stop()


def test_streaming_from_json_offsets_then_new_records(spark, shared_node, tmp_path):
    t1, t2 = unique("json"), unique("json")
    create_topic(shared_node.bootstrap, t1, partitions=2)
    create_topic(shared_node.bootstrap, t2, partitions=1)
    before = fill(shared_node.bootstrap, t1, 2, 10) + fill(shared_node.bootstrap, t2, 1, 10)
    start = {t1: {"0": 4, "1": -2}, t2: {"0": -1}}
    query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribe=f"{t1},{t2}",
                              startingOffsets=json.dumps(start)), tmp_path / "ckpt")
    try:
        query.processAllAvailable()
        first = expected(before, lambda s: s.topic == t1 and s.offset >= {0: 4, 1: 0}[s.partition])
        assert rows(spark.table(query.name)) == first
        after = fill(shared_node.bootstrap, t1, 2, 3, tag="more") + fill(shared_node.bootstrap, t2, 1, 3, tag="more")
        query.processAllAvailable()
        assert rows(spark.table(query.name)) == sorted(first + expected(after))
    finally:
        query.stop()


def test_streaming_from_timestamps_starts_at_the_first_offset_at_or_after_them(spark, shared_node, dataset,
                                                                              tmp_path):
    a = dataset.a
    # partition p holds timestamps BASE + 1000 i + p: BASE + 7001 is offset 8 in partition 0, 7 in 1 and 2
    df = load(spark.readStream, shared_node.bootstrap, subscribe=a, startingTimestamp=BASE_MS + 7001)
    query = run_available_now(df, tmp_path / "global")
    start = {0: 8, 1: 7, 2: 7}
    assert rows(spark.table(query.name)) == expected(dataset.sent,
                                                     lambda s: s.topic == a and s.offset >= start[s.partition])
    by_partition = json.dumps({a: {"0": BASE_MS, "1": BASE_MS + 9001, "2": BASE_MS + 4002}})
    df = load(spark.readStream, shared_node.bootstrap, subscribe=a, startingOffsetsByTimestamp=by_partition)
    query = run_available_now(df, tmp_path / "by-partition")
    start = {0: 0, 1: 9, 2: 4}
    assert rows(spark.table(query.name)) == expected(dataset.sent,
                                                     lambda s: s.topic == a and s.offset >= start[s.partition])


# --- 6. maxOffsetsPerTrigger, 11. the checkpoint's offsets ---

def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, shared_node, tmp_path):
    topic = unique("limit")
    create_topic(shared_node.bootstrap, topic, partitions=3)
    sent = produce(shared_node.bootstrap, [{"topic": topic, "partition": i % 3 if i < 70 else 0,
                                            "value": str(i).encode()} for i in range(100)])
    checkpoint = tmp_path / "ckpt"
    query = run_available_now(load(spark.readStream, shared_node.bootstrap, subscribe=topic,
                                   startingOffsets="earliest", maxOffsetsPerTrigger=30), checkpoint)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    sizes = [p["numInputRows"] for p in batches]
    assert len(sizes) >= 4 and max(sizes) <= 30 and sum(sizes) == 100, sizes
    # progress as Spark's Kafka source reports it: per-partition offsets, and the lag that follows from them
    last = {topic: {str(p): n for p, n in collections.Counter(s.partition for s in sent).items()}}
    lags = []
    for batch in batches:
        source = batch["sources"][0]
        assert json.loads(source["latestOffset"]) == last
        end = json.loads(source["endOffset"])[topic]
        assert sum(end.values()) - sum(json.loads(source["startOffset"])[topic].values()) == batch["numInputRows"]
        behind = [last[topic][p] - end[p] for p in end]
        assert offsets_behind_latest(source) == {
            "minOffsetsBehindLatest": str(min(behind)), "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": str(sum(behind) / 3)}
        lags.append(sum(behind))
    assert lags == sorted(lags, reverse=True) and lags[-1] == 0, lags
    assert rows(spark.table(query.name)) == expected(sent)
    # every batch's end offsets in the offset log: at most 30 records past the previous batch's
    ends = checkpoint_offsets(checkpoint)
    totals = [sum(partitions.values()) for partitions in (e[topic] for e in ends)]
    assert all(0 <= b - a <= 30 for a, b in zip([0, *totals], totals, strict=False)), ends
    per_partition = collections.Counter(s.partition for s in sent)
    assert ends[-1] == {topic: {str(p): n for p, n in sorted(per_partition.items())}}


def wait_for(condition, what: str, query=None):
    """Poll `condition` until it holds; the deadline only bounds a failure."""
    deadline = time.monotonic() + SPARK_DEADLINE_S
    while not condition():
        assert query is None or query.isActive, query.exception()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def batch_totals(checkpoint: Path, topic: str) -> list[int]:
    """Records read up to the end of each micro-batch, from the checkpoint's offset log."""
    return [sum(e[topic].values()) for e in checkpoint_offsets(checkpoint)]


def test_min_offsets_per_trigger_skips_triggers_until_enough_records_wait(spark, shared_node, tmp_path):
    topic = unique("min")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    fill(shared_node.bootstrap, topic, 2, 30)
    checkpoint = tmp_path / "ckpt"
    # a progress event for every trigger without data, so the test sees the source look at the new records
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    try:
        query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribe=topic, startingOffsets="earliest",
                                  minOffsetsPerTrigger=50, maxTriggerDelay="1h"), checkpoint)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        table = spark.table(query.name)
        wait_for(lambda: table.count() == 60, "the first batch: a query's first trigger always runs", query)
        fill(shared_node.bootstrap, topic, 2, 12, tag="second")  # 24 waiting, below the minimum of 50

        def seen_waiting() -> bool:
            last = query.lastProgress
            latest = last and last["sources"][0]["latestOffset"]
            return latest is not None and json.loads(latest) == {topic: {"0": 42, "1": 42}}

        wait_for(seen_waiting, "a trigger that saw 24 records waiting", query)
        assert table.count() == 60, "a batch ran with fewer records than minOffsetsPerTrigger"
        fill(shared_node.bootstrap, topic, 2, 13, tag="third")  # 50 waiting
        wait_for(lambda: table.count() == 110, "the batch of the 50 waiting records", query)
    finally:
        query.stop()
    assert batch_totals(checkpoint, topic) == [0, 60, 110]


def test_max_trigger_delay_runs_a_batch_below_the_minimum_once_it_passed(spark, shared_node, tmp_path):
    topic = unique("delay")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    fill(shared_node.bootstrap, topic, 2, 10)
    checkpoint = tmp_path / "ckpt"
    query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribe=topic, startingOffsets="earliest",
                              minOffsetsPerTrigger=1000, maxTriggerDelay="500ms"), checkpoint)
    try:
        table = spark.table(query.name)
        wait_for(lambda: table.count() == 20, "the first batch", query)
        fill(shared_node.bootstrap, topic, 2, 3, tag="late")
        wait_for(lambda: table.count() == 26, "a batch of 6 records, far below the minimum, after the delay", query)
    finally:
        query.stop()
    assert batch_totals(checkpoint, topic) == [0, 20, 26]


def test_available_now_ignores_the_minimum_and_stops_at_the_offsets_of_its_start(spark, shared_node, tmp_path):
    topic = unique("now")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    sent = fill(shared_node.bootstrap, topic, 2, 25)
    query, collected = start_collecting(
        load(spark.readStream, shared_node.bootstrap, subscribe=topic, startingOffsets="earliest",
             maxOffsetsPerTrigger=20, minOffsetsPerTrigger=15, maxTriggerDelay="1h"), tmp_path / "ckpt",
        available_now=True)
    try:
        wait_for(lambda: len(collected) > 0, "the first rows", query)
        late = fill(shared_node.bootstrap, topic, 2, 5, tag="late")
        assert query.awaitTermination(SPARK_DEADLINE_S), "availableNow query did not finish"
    finally:
        query.stop()
    # 50 records in batches of 20, 20, 10: the last one below the minimum still runs
    assert sorted(collected) == expected(sent) and not set(expected(late)) & set(collected)
    assert batch_totals(tmp_path / "ckpt", topic) == [0, 20, 40, 50]


def test_checkpoint_offsets_are_spark_kafka_source_json(spark, shared_node, dataset, tmp_path):
    checkpoint = tmp_path / "ckpt"
    run_available_now(load(spark.readStream, shared_node.bootstrap, subscribe=f"{dataset.a},{dataset.b}",
                           startingOffsets="earliest"), checkpoint)
    last_file = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1].read_text()
    assert last_file.splitlines()[0] == "v1"
    assert checkpoint_offsets(checkpoint)[-1] == {t: {str(p): 10 for p in range(3)} for t in (dataset.a, dataset.b)}


# --- 7. minPartitions ---

def test_min_partitions_splits_large_partitions_into_offset_ranges(spark, shared_node):
    topic = unique("minparts")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    sent = produce(shared_node.bootstrap, [{"topic": topic, "partition": 0 if i < 90 else 1,
                                            "value": str(i).encode()} for i in range(100)])
    plain = load(spark.read, shared_node.bootstrap, subscribe=topic, minPartitions=1)
    assert plain.rdd.getNumPartitions() == 2
    df = load(spark.read, shared_node.bootstrap, subscribe=topic, minPartitions=6)
    assert df.rdd.getNumPartitions() >= 6
    assert rows(df) == expected(sent)
    # every Spark partition reads one contiguous offset range of one Kafka partition
    by_split = collections.defaultdict(list)
    for r in df.selectExpr("spark_partition_id() as split", "partition", "offset").collect():
        by_split[r.split].append((r.partition, r.offset))
    for split in by_split.values():
        assert len({p for p, _ in split}) == 1
        offsets = sorted(o for _, o in split)
        assert offsets == list(range(offsets[0], offsets[-1] + 1))


# --- 8. failOnDataLoss ---

def test_batch_start_below_the_log_start_fails_or_skips_the_lost_offsets(spark, shared_node):
    topic = unique("lost")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    sent = fill(shared_node.bootstrap, topic, 2, 20)
    delete_before(shared_node.bootstrap, topic, 0, 10)
    start = json.dumps({topic: {"0": 5, "1": -2}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        load(spark.read, shared_node.bootstrap, subscribe=topic, startingOffsets=start).collect()
    skipped = load(spark.read, shared_node.bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false")
    remaining = expected(sent, lambda s: s.partition == 1 or s.offset >= 10)
    assert rows(skipped) == remaining
    # earliest is the log start: nothing is lost
    assert rows(load(spark.read, shared_node.bootstrap, subscribe=topic)) == remaining


def test_streaming_restart_after_records_past_the_checkpoint_were_deleted(spark, shared_node, tmp_path):
    topic = unique("lost-stream")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    fill(shared_node.bootstrap, topic, 2, 20)
    checkpoint = tmp_path / "ckpt"

    def stream(**options):
        return load(spark.readStream, shared_node.bootstrap, subscribe=topic, startingOffsets="earliest", **options)

    assert len(collect_available_now(stream(), checkpoint)) == 40
    later = fill(shared_node.bootstrap, topic, 2, 20, tag="later")  # offsets 20..39 in both partitions
    delete_before(shared_node.bootstrap, topic, 0, 30)
    lenient = tmp_path / "ckpt-lenient"
    shutil.copytree(checkpoint, lenient)
    with pytest.raises(Exception, match="failOnDataLoss"):
        collect_available_now(stream(), checkpoint)
    got = collect_available_now(stream(failOnDataLoss="false"), lenient)
    assert got == expected(later, lambda s: s.partition == 1 or s.offset >= 30)


# --- 9. partitions and topics added while a query runs ---

def test_new_partitions_and_matching_topics_are_read_from_their_earliest_offset(spark, shared_node, tmp_path):
    prefix = unique("grow")
    first, second = f"{prefix}-1", f"{prefix}-2"
    create_topic(shared_node.bootstrap, first, partitions=1)
    sent = fill(shared_node.bootstrap, first, 1, 5)
    query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribePattern=re.escape(prefix) + "-.*",
                              startingOffsets="earliest"), tmp_path / "ckpt")
    try:
        query.processAllAvailable()
        assert rows(spark.table(query.name)) == expected(sent)
        add_partitions(shared_node.bootstrap, first, 3)
        create_topic(shared_node.bootstrap, second, partitions=2)
        sent += produce(shared_node.bootstrap, [{"topic": first, "partition": p, "value": f"new{p}-{i}".encode()}
                                                for p in (1, 2) for i in range(4)])
        sent += fill(shared_node.bootstrap, second, 2, 3)
        query.processAllAvailable()
        assert rows(spark.table(query.name)) == expected(sent)
    finally:
        query.stop()


def test_new_partition_of_a_subscribed_topic_is_read_from_offset_0(spark, shared_node, tmp_path):
    topic = unique("grow-sub")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    sent = fill(shared_node.bootstrap, topic, 2, 3)
    query = start_memory(load(spark.readStream, shared_node.bootstrap, subscribe=topic), tmp_path / "ckpt")
    try:
        query.processAllAvailable()  # startingOffsets latest: nothing yet
        add_partitions(shared_node.bootstrap, topic, 3)
        new = produce(shared_node.bootstrap, [{"topic": topic, "partition": 2, "value": f"p2-{i}".encode()}
                                              for i in range(5)])
        new += fill(shared_node.bootstrap, topic, 2, 1, tag="after")
        query.processAllAvailable()
        assert rows(spark.table(query.name)) == expected(new)
        assert not set(expected(sent)) & set(rows(spark.table(query.name)))
    finally:
        query.stop()


# --- 10. exactly-once from the source through the sink, across a query stop (kill -9 of the driver, a worker or
# an Odradek leader: tests/spark_cluster) ---

def copy_stream(spark, bootstrap: str, source: str, target: str, checkpoint: Path, available_now: bool,
                max_per_trigger: int | None = 50):
    """The driver's pipeline in this process: source topic -> key, value -> target topic."""
    limit = {} if max_per_trigger is None else {"maxOffsetsPerTrigger": max_per_trigger}
    writer = (load(spark.readStream, bootstrap, subscribe=source, startingOffsets="earliest", **limit)
              .selectExpr("key", "value")
              .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", target).option("checkpointLocation", str(checkpoint)))
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="100 milliseconds").start()


def numbered_input(bootstrap: str, topic: str, count: int) -> collections.Counter:
    create_topic(bootstrap, topic, partitions=3)
    sent = produce(bootstrap, [{"topic": topic, "partition": i % 3, "key": f"k{i % 7}".encode(),
                                "value": str(i).encode()} for i in range(count)])
    return collections.Counter((s.key, s.value) for s in sent)


def test_source_to_sink_is_exactly_once_across_query_stop_and_restart(spark, shared_node, tmp_path):
    source, target = unique("stop-in"), unique("stop-out")
    inputs = numbered_input(shared_node.bootstrap, source, 300)
    create_topic(shared_node.bootstrap, target, partitions=2)
    checkpoint = tmp_path / "checkpoint"
    query = copy_stream(spark, shared_node.bootstrap, source, target, checkpoint, available_now=False,
                        max_per_trigger=100)
    try:
        deadline = time.monotonic() + SPARK_DEADLINE_S
        while record_count(shared_node.bootstrap, target) < 100:
            assert query.isActive and time.monotonic() < deadline, query.exception()
            time.sleep(0.05)
    finally:
        query.stop()
    assert record_count(shared_node.bootstrap, target) < 300, "the query finished before it was stopped"
    query = copy_stream(spark, shared_node.bootstrap, source, target, checkpoint, available_now=True,
                        max_per_trigger=100)
    try:
        assert query.awaitTermination(SPARK_DEADLINE_S)
    finally:
        query.stop()
    outputs = collections.Counter((k, v) for _, k, v, _ in read_all(shared_node.bootstrap, target))
    assert outputs == inputs


def test_first_batch_replayed_after_a_crash_starts_where_latest_first_resolved(spark, shared_node, tmp_path):
    """Spark's Kafka source keeps the offsets `latest` resolved to, so a replayed batch 0 reads the same range."""
    topic = unique("replay0")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    fill(shared_node.bootstrap, topic, 2, 3, tag="old")
    checkpoint = tmp_path / "ckpt"
    query, collected = start_collecting(load(spark.readStream, shared_node.bootstrap, subscribe=topic), checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert collected == []
    assert checkpoint_offsets(checkpoint) == [{topic: {"0": 3, "1": 3}}]
    # as if the driver died after writing offsets/0 but before commits/0: batch 0 is replayed on restart
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    stopped = fill(shared_node.bootstrap, topic, 2, 2, tag="stopped")
    got = collect_available_now(load(spark.readStream, shared_node.bootstrap, subscribe=topic), checkpoint)
    assert got == expected(stopped)
