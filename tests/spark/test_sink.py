"""The "odradek" sink: Spark's Kafka sink columns and options, batch writes, exactly-once streaming writes."""

import datetime

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
from confluent_kafka import KafkaException, Producer  # noqa: E402
from kafka import KafkaProducer  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from odradek.spark.produce import ColumnProducer  # noqa: E402
from odradek.spark.sink import (  # noqa: E402
    HEADER_BATCH,
    check_schema,
    commit_batch,
    read_sink_state,
    transactional_id,
    write_streaming_task,
)
from odradek.sql.partitioning import partition_for  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, create_topic, read_all, unique  # noqa: E402

# Options that pick the path of a plain write: the JVM sink (the session has its jar), the Python data source's
# own producer, or librdkafka, which alone speaks this setting.
JVM_SINK = {"odradek.sink.jvm": "true"}
OWN_PRODUCER = {"odradek.sink.jvm": "false"}
LIBRDKAFKA = {"kafka.socket.keepalive.enable": "true"}
EVERY_PATH = pytest.mark.parametrize("path", [JVM_SINK, OWN_PRODUCER, LIBRDKAFKA],
                                     ids=["jvm-sink", "own-producer", "librdkafka"])


def values(records) -> list[bytes]:
    return [r[2] for r in records]


# --- schema checks (Spark's Kafka sink errors) ---

def test_missing_value_column_is_an_error():
    schema = StructType([StructField("key", StringType()), StructField("topic", StringType())])
    with pytest.raises(ValueError, match="'value' not found"):
        check_schema(schema, {})


def test_missing_topic_column_and_option_is_an_error():
    schema = StructType([StructField("value", StringType())])
    with pytest.raises(ValueError, match="topic option required"):
        check_schema(schema, {})
    check_schema(schema, {"topic": "t"})


# --- streaming task logic, driven directly (no Spark): the replay cases of exactly-once ---

def stream_options(bootstrap: str, topic: str, sink_id: str, **more) -> dict:
    return {"kafka.bootstrap.servers": bootstrap, "topic": topic, "odradek.sink.id": sink_id, **more}


def rows(n: int, start: int = 0) -> list[pa.RecordBatch]:
    """A task's input as Spark hands it to the sink: Arrow record batches of string keys and values."""
    return [pa.RecordBatch.from_pylist([{"key": f"k{i % 3}", "value": f"v{i}"} for i in range(start, start + n)])]


@pytest.fixture
def commits_topic(shared_node):
    from odradek.spark.sink import ensure_commits_topic

    ensure_commits_topic({"bootstrap.servers": shared_node.bootstrap})


def test_replay_of_a_committed_batch_writes_nothing(shared_node, commits_topic):
    topic, sink = unique("committed"), unique("sink")
    options = stream_options(shared_node.bootstrap, topic, sink)
    msg = write_streaming_task(options, rows(5), batch_id=0, task=0)
    assert msg.written == 5
    commit_batch(options, 0)
    assert read_sink_state({"bootstrap.servers": shared_node.bootstrap}, sink).last_committed == 0

    replay = write_streaming_task(options, rows(5), batch_id=0, task=0)
    assert (replay.written, replay.skipped) == (0, 5)
    written = read_all(shared_node.bootstrap, topic)
    assert values(written) == [f"v{i}".encode() for i in range(5)]
    assert all(headers == [] for *_, headers in written), "headers only with odradek.sink.tagRecords"


def test_an_attempt_that_died_mid_batch_is_aborted_and_the_replay_writes_every_record_once(shared_node,
                                                                                            commits_topic):
    topic, sink = unique("partial"), unique("sink")
    create_topic(shared_node.bootstrap, topic, partitions=3)
    options = stream_options(shared_node.bootstrap, topic, sink, **{"odradek.sink.tagRecords": "true"})
    write_streaming_task(options, rows(3, start=100), batch_id=0, task=0)
    commit_batch(options, 0)
    # batch 1's first attempt died after writing 4 of its 10 records: its transaction is left open
    dead = Producer({"bootstrap.servers": shared_node.bootstrap, "transactional.id": transactional_id(sink, 0)})
    dead.init_transactions(30)
    dead.begin_transaction()
    for i in range(4):
        dead.produce(topic, key=b"k", value=f"v{i}".encode())
    dead.flush(30)
    replay = write_streaming_task(options, rows(10), batch_id=1, task=0)  # fences the dead attempt
    assert (replay.written, replay.skipped) == (10, 0)
    commit_batch(options, 1)

    written = read_all(shared_node.bootstrap, topic)  # read_committed
    assert sorted(values(written)) == sorted([f"v{i}".encode() for i in range(10)] +
                                             [f"v{i}".encode() for i in range(100, 103)])
    assert all(dict(h)[HEADER_BATCH] in (b"0", b"1") for _, _, _, h in written)  # tagRecords
    with pytest.raises(KafkaException):  # the dead attempt is fenced
        dead.commit_transaction(10)


def test_a_fully_written_uncommitted_batch_is_not_written_again(shared_node, commits_topic):
    topic, sink = unique("full"), unique("sink")
    options = stream_options(shared_node.bootstrap, topic, sink)
    assert write_streaming_task(options, rows(6), batch_id=0, task=0).written == 6
    replay = write_streaming_task(options, rows(6), batch_id=0, task=0)
    assert (replay.written, replay.skipped) == (0, 6)
    assert sorted(values(read_all(shared_node.bootstrap, topic))) == sorted(f"v{i}".encode() for i in range(6))


def test_identical_records_in_one_batch_are_each_written(shared_node, commits_topic):
    topic, sink = unique("identical"), unique("sink")
    options = stream_options(shared_node.bootstrap, topic, sink)
    same = pa.RecordBatch.from_pylist([{"key": "k", "value": "same"}] * 3)
    assert write_streaming_task(options, [same], batch_id=0, task=0).written == 3
    assert values(read_all(shared_node.bootstrap, topic)) == [b"same"] * 3


def test_a_worker_reads_the_commits_topic_on_from_where_it_stopped(shared_node, commits_topic):
    from odradek.spark import sink as sink_module

    config, sink = {"bootstrap.servers": shared_node.bootstrap}, unique("sink")
    options = stream_options(shared_node.bootstrap, unique("resumed"), sink)
    assert read_sink_state(config, sink).last_committed == -1
    (cache_key,) = [key for key in sink_module._sink_states if key[1] == sink]
    _, read_to = sink_module._sink_states[cache_key]
    commit_batch(options, 0)  # by the driver, after this worker's read
    commit_batch(options, 1)
    assert read_sink_state(config, sink).last_committed == 1, "markers written since the last read are seen"
    assert sink_module._sink_states[cache_key][1] >= read_to + 2
    # What was read before is not read again: a state the topic never held survives the next read.
    sink_module._sink_states[cache_key] = (sink_module.SinkState(7, {0: 7}), sink_module._sink_states[cache_key][1])
    commit_batch(options, 2)
    again = read_sink_state(config, sink)
    assert (again.last_committed, again.done) == (7, {0: 7})


# --- through Spark: df.write / df.writeStream with format("odradek") ---

@EVERY_PATH
def test_batch_write_sends_key_value_headers_and_partition(spark, shared_node, path):
    topic = unique("batch")
    create_topic(shared_node.bootstrap, topic, partitions=3)
    df = spark.createDataFrame(
        [("k1", "v1", [("h", bytearray(b"x"))], 2), (None, "v2", [], 0)],
        "key string, value string, headers array<struct<key:string,value:binary>>, partition int")
    df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap) \
        .option("topic", topic).options(**path).mode("append").save()
    got = sorted(read_all(shared_node.bootstrap, topic), key=lambda r: r[2])
    assert got == [(2, b"k1", b"v1", [("h", b"x")]), (0, None, b"v2", [])]


@EVERY_PATH
def test_keyed_rows_land_in_the_partitions_javas_partitioner_and_kafka_python_give_their_keys(spark, shared_node,
                                                                                              path):
    """Spark's Kafka sink places a key with Kafka's murmur2; a pipeline moved to format("odradek") must keep
    every key in its partition (librdkafka's own default, CRC32, would not)."""
    topic, by_kafka_python = unique("keyed"), unique("keyed-kp")
    for name in (topic, by_kafka_python):
        create_topic(shared_node.bootstrap, name, partitions=7)
    keys = [f"key-{i}" for i in range(300)]
    spark.createDataFrame([(k, "v") for k in keys], "key string, value string") \
        .write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap) \
        .option("topic", topic).options(**path).mode("append").save()
    producer = KafkaProducer(bootstrap_servers=shared_node.bootstrap)
    for k in keys:
        producer.send(by_kafka_python, key=k.encode(), value=b"v")
    producer.close(timeout=60)
    placed = {r[1]: r[0] for r in read_all(shared_node.bootstrap, topic)}
    assert len(placed) == len(keys)
    assert placed == {r[1]: r[0] for r in read_all(shared_node.bootstrap, by_kafka_python)}
    assert placed == {k.encode(): partition_for(k.encode(), 7) for k in keys}
    assert len(set(placed.values())) == 7


@EVERY_PATH
def test_batch_write_sets_record_timestamps_and_leaves_null_columns_to_the_producer(spark, shared_node, path):
    topic = unique("stamped")
    # The stamp is years old: time retention would delete it before the read.
    create_topic(shared_node.bootstrap, topic, partitions=2, config={"retention.ms": "-1"})
    stamp = datetime.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=datetime.UTC)
    df = spark.createDataFrame(
        [(bytearray(b"k1"), "v1", stamp, 1, None), (None, None, None, None, [("h", None)])],
        "key binary, value string, timestamp timestamp, partition int, headers array<struct<key:string,value:binary>>")
    df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap) \
        .option("topic", topic).options(**path).mode("append").save()
    got = (spark.read.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap)
           .option("subscribe", topic).option("includeHeaders", "true").load()
           .selectExpr("partition", "key", "value", "unix_millis(timestamp) as ms", "headers").collect())
    stamped = [r for r in got if r.key is not None]
    assert [(r.partition, bytes(r.key), bytes(r.value), r.ms, r.headers) for r in stamped] == \
        [(1, b"k1", b"v1", 1714564800123, None)], "milliseconds of the timestamp column, the partition column"
    (tombstone,) = [r for r in got if r.key is None]
    assert tombstone.value is None and tombstone.ms > 1714564800123, "a null timestamp is the time of producing"
    assert [(h.key, h.value) for h in tombstone.headers] == [("h", None)]


@EVERY_PATH
def test_a_null_topic_in_the_topic_column_fails_the_write(spark, shared_node, path):
    df = spark.createDataFrame([(unique("named"), "1"), (None, "2")], "topic string, value string")
    with pytest.raises(Exception, match="null topic"):
        df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap).options(**path) \
            .mode("append").save()


@EVERY_PATH
def test_topic_column_routes_rows_and_the_topic_option_overrides_it(spark, shared_node, path):
    a, b, forced = unique("col-a"), unique("col-b"), unique("forced")
    df = spark.createDataFrame([(a, "1"), (b, "2")], "topic string, value string")
    df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap).options(**path) \
        .mode("append").save()
    assert values(read_all(shared_node.bootstrap, a)) == [b"1"]
    assert values(read_all(shared_node.bootstrap, b)) == [b"2"]
    df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap) \
        .option("topic", forced).options(**path).mode("append").save()
    assert sorted(values(read_all(shared_node.bootstrap, forced))) == [b"1", b"2"]


def test_write_without_value_column_fails(spark, shared_node):
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="value"):
        df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap) \
            .option("topic", unique("novalue")).mode("append").save()


# The exactly-once sink of the Python data source (librdkafka's transactions), or the JVM sink's.
PYTHON_SINK = OWN_PRODUCER


@pytest.mark.parametrize(("first", "replay"), [(JVM_SINK, JVM_SINK), (PYTHON_SINK, JVM_SINK), (JVM_SINK, PYTHON_SINK)],
                         ids=["jvm-then-jvm", "python-then-jvm", "jvm-then-python"])
def test_streaming_batch_replayed_after_its_commit_file_is_lost_is_not_written_twice(spark, shared_node, tmp_path,
                                                                                      first, replay):
    """Spark replays the last batch whose commit file is missing: the sink's marker makes it a no-op, whichever of
    the two exactly-once sinks wrote it and whichever replays it (the same transactional ids and markers)."""
    topic = unique("replayed")
    checkpoint = tmp_path / "checkpoint"

    def run_once(path):
        query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
                 .selectExpr("cast(value as string) as value")
                 .writeStream.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap)
                 .option("topic", topic).option("checkpointLocation", str(checkpoint)).options(**path)
                 .trigger(availableNow=True).start())
        query.awaitTermination(SPARK_DEADLINE_S)
        assert query.exception() is None
        return query

    run_once(first)  # rate-micro-batch with availableNow: one batch, ids 0..9
    assert sorted(int(v) for v in values(read_all(shared_node.bootstrap, topic))) == list(range(10))
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: p.name)
    last = [p for p in commits if p.name.isdigit()][-1]
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    last.unlink()  # as if the driver died between the sink's commit and Spark's commit log
    run_once(replay)
    got = sorted(int(v) for v in values(read_all(shared_node.bootstrap, topic)))
    assert len(got) == len(set(got))
    assert got == list(range(len(got)))


def test_a_recreated_checkpoint_is_a_new_sink_whose_batches_are_written(spark, shared_node, tmp_path):
    """Batch ids restart at 0 with a new checkpoint; the new query id keeps them from looking committed."""
    import shutil

    topic = unique("recreated")
    checkpoint = tmp_path / "checkpoint"
    for _ in range(2):
        shutil.rmtree(checkpoint, ignore_errors=True)
        query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
                 .selectExpr("cast(value as string) as value")
                 .writeStream.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap)
                 .option("topic", topic).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(SPARK_DEADLINE_S)
    assert sorted(int(v) for v in values(read_all(shared_node.bootstrap, topic))) == sorted(list(range(5)) * 2)


@EVERY_PATH
def test_the_sink_without_transactions_writes_each_batch_plainly(spark, shared_node, commits_topic, tmp_path, path):
    """odradek.sink.transactional=false: Spark's Kafka sink's at-least-once writes, no markers, no transactions."""
    topic = unique("plain")
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 7).load()
             .selectExpr("cast(value as string) as value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap)
             .option("topic", topic).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .option("odradek.sink.transactional", "false").options(**path).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(SPARK_DEADLINE_S)
    finally:
        query.stop()
    assert query.exception() is None
    assert sorted(int(v) for v in values(read_all(shared_node.bootstrap, topic))) == list(range(7))
    sink_id = f"checkpoint:{tmp_path / 'checkpoint'}#{query.id}"
    state = read_sink_state({"bootstrap.servers": shared_node.bootstrap}, sink_id)
    assert (state.last_committed, state.done) == (-1, {}), "no markers without transactions"
    with pytest.raises(Exception, match="'odradek.sink.transactional' must be 'true' or 'false'"):
        (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
         .selectExpr("cast(value as string) as value").writeStream.format("odradek")
         .option("kafka.bootstrap.servers", shared_node.bootstrap).option("topic", topic)
         .option("checkpointLocation", str(tmp_path / "other")).option("odradek.sink.transactional", "maybe")
         .trigger(availableNow=True).start().awaitTermination(SPARK_DEADLINE_S))


@pytest.mark.parametrize(("path", "error"), [(OWN_PRODUCER, "has no partition 5"),
                                             (LIBRDKAFKA, "Unknown partition")], ids=["own-producer", "librdkafka"])
def test_a_worker_reuses_its_plain_producer_until_a_write_fails(shared_node, path, error):
    from odradek.spark import sink

    topic = unique("reused")
    create_topic(shared_node.bootstrap, topic, partitions=1)
    options = {"kafka.bootstrap.servers": shared_node.bootstrap, "topic": topic, **path}
    sink._plain_producers.clear()  # as in a fresh Python worker
    assert sink.write_plain(options, rows(3), None) == 3
    (first,) = [p for p in sink._plain_producers.values()]
    assert isinstance(first, ColumnProducer) is (path is OWN_PRODUCER)
    assert sink.write_plain(options, rows(2, start=3), None) == 2
    assert list(sink._plain_producers.values()) == [first], "the next task's rows go through the same producer"
    to_missing_partition = pa.RecordBatch.from_pylist([{"value": "lost", "partition": 5}])
    with pytest.raises((KafkaException, ValueError), match=error):
        sink.write_plain(options, [to_missing_partition], None)
    assert first not in sink._plain_producers.values(), "a producer that failed is not used again"
    assert sink.write_plain(options, rows(1, start=5), None) == 1
    assert values(read_all(shared_node.bootstrap, topic)) == [f"v{i}".encode() for i in range(6)]
