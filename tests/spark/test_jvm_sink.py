"""format("odradek")'s JVM sink (jvm/), through Spark with its jar on the classpath and `odradek.sink.jvm=true`:
writes it refuses and why, a partition leader killed with kill -9 mid-write (idempotence: every row once, in
order), bad rows and unreachable nodes, and rows on Apache Kafka 4.0 placed where Kafka's partitioner places
them, read back by confluent-kafka and kafka-python. tests/spark/test_sink.py runs its column and option tests
on this path too."""

import datetime
import threading

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from odradek.spark.options import OptionError  # noqa: E402
from odradek.spark.sink import OdradekBatchWriter, OdradekStreamWriter  # noqa: E402
from tests.e2e.test_cluster import wait_for  # noqa: E402
from tests.e2e.test_cluster_transactions import all_in_sync, leaders  # noqa: E402
from tests.java.conftest import _two_free_ports  # noqa: E402
from tests.kafka_python_reads import take  # noqa: E402
from tests.reference_kafka import ReferenceBroker, requires_reference  # noqa: E402
from tests.spark.test_produce_client import read_back  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, create_topic, unique  # noqa: E402

JVM_SINK = {"odradek.sink.jvm": "true"}


def write(df, bootstrap: str, topic: str | None, **options) -> None:
    writer = df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).options(**JVM_SINK)
    if topic is not None:
        writer = writer.option("topic", topic)
    writer.options(**options).mode("append").save()


@pytest.mark.parametrize(("options", "reason"), [
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "GSSAPI"},
     "it logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not GSSAPI"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.key.password": "secret"}, "it reads unencrypted keys only"),
    ({"kafka.acks": "0"}, "not acks=0"),
    ({"kafka.compression.type": "zstd"}, "gzip or not at all, not zstd"),
    ({"kafka.socket.keepalive.enable": "true"}, "it does not speak kafka.socket.keepalive.enable"),
    ({"valueSchemaRegistry.url": "http://127.0.0.1:1"}, "does not encode Avro columns"),
    ({"odradek.sink.jvm": "maybe"}, "'odradek.sink.jvm' must be 'true' or 'false', got 'maybe'"),
], ids=["gssapi", "encrypted-key", "acks-0", "zstd", "librdkafka-setting", "avro", "not-a-boolean"])
def test_a_write_the_jvm_sink_cannot_take_fails_with_odradek_sink_jvm_true_saying_why(spark, shared_node, options,
                                                                                     reason):
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match=reason):
        write(df, shared_node.bootstrap, unique("refused"), **options)


@pytest.mark.parametrize("writer", [OdradekBatchWriter, OdradekStreamWriter])
def test_odradek_sink_jvm_true_without_the_jar_fails_in_the_python_data_source(writer):
    """A write reaches the Python data source with odradek.sink.jvm=true only when the JVM sink is not there."""
    schema = StructType([StructField("value", StringType())])
    options = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "odradek.sink.transactional": "false",
               **JVM_SINK}
    with pytest.raises(OptionError, match="the JVM sink is not on Spark's classpath: add "
                                          "odradek.spark.datasource.JAR to spark.jars"):
        writer(options, schema)


def test_a_partition_the_topic_does_not_have_fails_the_task_and_its_rows_are_not_sent(spark, shared_node):
    topic = unique("jvm-partition")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    df = spark.createDataFrame([("kept back", 0), ("refused", 5)], "value string, partition int").coalesce(1)
    with pytest.raises(Exception, match=f"topic {topic} has no partition 5"):
        write(df, shared_node.bootstrap, topic)
    assert read_back({"bootstrap.servers": shared_node.bootstrap}, topic) == []


def test_no_node_answering_fails_the_write_at_once_naming_the_servers(spark):
    port, _ = _two_free_ports()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=f"no node of 127.0.0.1:{port} answered"):
        write(df, f"127.0.0.1:{port}", "nowhere")


def _paused_rows(pause_at: int, resume_flag: str):
    """mapInArrow's function: values v0.. in order, holding back the rows from `pause_at` until `resume_flag`
    exists (the test creates it once the leader is dead)."""
    def rows(batches):
        import os as _os
        import time as _time

        for batch in batches:
            ids = batch.column(0).to_pylist()
            if ids and ids[0] >= pause_at:
                while not _os.path.exists(resume_flag):
                    _time.sleep(0.01)
            yield pa.RecordBatch.from_pydict({"value": [f"v{i}" for i in ids]})
    return rows


def test_a_leader_killed_mid_write_every_row_is_written_once_in_order(spark, cluster_factory, tmp_path):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    topic = unique("jvm-failover")
    admin = AdminClient(cluster.client_settings())
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_for(lambda: all_in_sync(cluster, [topic]), 60, "every replica in sync")
    victim = leaders(cluster, topic)[0][0]
    total, pause_at = 40_000, 10_000
    resume = str(tmp_path / "resume")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    df = spark.range(0, total, 1, 1).mapInArrow(_paused_rows(pause_at, resume), "value string")
    failure: list[BaseException] = []

    def run():
        try:
            write(df, cluster.bootstrap, topic, **{"kafka.batch.size": "4096"})
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            failure.append(e)

    writer = threading.Thread(target=run)
    writer.start()
    try:
        watermarks = Consumer({**cluster.client_settings(), "group.id": unique("watch")})
        # The sink sends a batch once it holds 4 KiB: most of the first rows are in the log before the pause.
        wait_for(lambda: watermarks.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] >= pause_at // 2,
                 SPARK_DEADLINE_S, "the first rows written")
        watermarks.close()
        cluster.node(victim).kill()
    finally:
        open(resume, "w").close()
        writer.join(SPARK_DEADLINE_S)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert not writer.is_alive() and failure == []
    got = read_back(cluster.client_settings(), topic)
    assert [value for _, _, value, _, _ in got] == [f"v{i}".encode() for i in range(total)]
    assert leaders(cluster, topic)[0][0] not in (victim, -1)


@requires_reference
def test_rows_on_apache_kafka_land_where_its_partitioner_puts_them_and_read_back_with_two_clients(spark, tmp_path):
    port, _ = _two_free_ports()
    kafka = ReferenceBroker(tmp_path / "kafka", port).start()
    try:
        topic, by_kafka_python = "jvm-on-kafka", "jvm-placed-by-kafka-python"
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for name in (topic, by_kafka_python):
            admin.create_topics([NewTopic(name, 5, 1)])[name].result(60)
        n = 2000
        keys = [f"key-{i}" if i % 7 else None for i in range(n)]
        stamps = [1_700_000_000_000 + i for i in range(n)]
        headers = [[("n", str(i).encode()), ("empty", None)] if i % 3 else [] for i in range(n)]
        df = spark.createDataFrame(
            [(keys[i], f"v{i}", datetime.datetime.fromtimestamp(stamps[i] / 1000, datetime.UTC),
              [(k, bytearray(v) if v is not None else None) for k, v in headers[i]]) for i in range(n)],
            "key string, value string, timestamp timestamp, headers array<struct<key:string,value:binary>>")
        write(df, kafka.bootstrap, topic, **{"kafka.compression.type": "gzip", "kafka.batch.size": "16384"})
        placer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
        for key in {k for k in keys if k is not None}:
            placer.send(by_kafka_python, key=key.encode(), value=b"x")
        placer.close(timeout=60)

        got = read_back({"bootstrap.servers": kafka.bootstrap}, topic)
        assert sorted((v, k, ts, h) for _, k, v, ts, h in got) == sorted(
            (f"v{i}".encode(), keys[i] and keys[i].encode(), stamps[i], headers[i]) for i in range(n))
        placed = {k: p for p, k, _, _, _ in got if k is not None}
        assert placed == {k: p for p, k, _, _, _ in read_back({"bootstrap.servers": kafka.bootstrap},
                                                               by_kafka_python)}
        assert len(set(placed.values())) == 5
        reader = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                               consumer_timeout_ms=10_000)
        assert sorted((r.value, r.headers) for r in take(reader, n)) == sorted(
            (f"v{i}".encode(), headers[i]) for i in range(n))
        reader.close()
    finally:
        kafka.stop()


def test_save_mode_overwrite_is_refused_as_the_python_data_source_refuses_it(spark, shared_node):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="save mode 'overwrite' is not allowed"):
        df.write.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap) \
            .option("topic", unique("overwritten")).mode("overwrite").save()


def test_batches_are_cut_before_batch_size_so_a_topics_max_message_bytes_takes_them(spark, shared_node):
    """batch.size equal to the topic's max.message.bytes: every batch fits, a big row that does not fit in the open
    batch included (appending first and cutting after would make batches past batch.size, which the topic
    refuses)."""
    topic = unique("jvm-cut")
    create_topic(shared_node.bootstrap, topic, partitions=1, config={"max.message.bytes": "20000"})
    rows = [(f"v{i:04d}" + "x" * 100,) for i in range(2000)] + [("big" + "y" * 15000,)]
    df = spark.createDataFrame(rows, "value string").coalesce(1)
    write(df, shared_node.bootstrap, topic, **{"kafka.batch.size": "20000"})
    got = [v for _, _, v, _, _ in read_back({"bootstrap.servers": shared_node.bootstrap}, topic)]
    assert got == [v.encode() for (v,) in rows]
