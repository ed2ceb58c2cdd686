"""The JVM sink's exactly-once streaming sink (jvm/, ExactlyOnceWrite), through Spark with its jar and
`odradek.sink.jvm=true`: an earlier attempt's open transaction fenced and aborted (its marker in
`__odradek_spark_commits` skipped as aborted), markers compressed with each codec, what it refuses, and
exactly-once on Apache Kafka 4.0 read back read_committed by confluent-kafka and kafka-python.
tests/spark/test_sink.py replays batches across this sink and the Python data source's."""

import json
import os

import pytest

pytest.importorskip("pyspark")

from confluent_kafka import KafkaException, Producer  # noqa: E402
from kafka import KafkaConsumer  # noqa: E402

from odradek.spark.sink import COMMITS_TOPIC, transactional_id  # noqa: E402
from tests.java.conftest import _two_free_ports  # noqa: E402
from tests.kafka_python_reads import take  # noqa: E402
from tests.reference_kafka import ReferenceBroker, requires_reference  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, read_all, unique  # noqa: E402

JVM_SINK = {"odradek.sink.jvm": "true"}


def run_batch(spark, bootstrap: str, topic: str, checkpoint, rows: int = 10, **options):
    """One micro-batch of `rows` numbers from rate-micro-batch (two tasks in local[2]) into the exactly-once sink;
    the query, once it ended."""
    query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows).load()
             .selectExpr("cast(value as string) as value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("checkpointLocation", str(checkpoint)).options(**JVM_SINK).options(**options)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(SPARK_DEADLINE_S)
    finally:
        query.stop()
    assert query.exception() is None
    return query


def numbers(records) -> list[int]:
    return sorted(int(value) for _, _, value, _ in records)


def test_an_earlier_attempts_open_transaction_is_fenced_and_its_marker_aborted(spark, shared_node, tmp_path):
    """Batch 1's task 0 finds an earlier attempt's transaction open, holding rows and a done marker that says
    batch 1 is written: its new epoch aborts that transaction, the aborted marker is skipped, and it writes."""
    topic, checkpoint = unique("jvm-fenced"), tmp_path / "checkpoint"
    query = run_batch(spark, shared_node.bootstrap, topic, checkpoint)
    sink_id = f"checkpoint:{os.path.normpath(checkpoint)}#{query.id}"
    dead = Producer({"bootstrap.servers": shared_node.bootstrap, "transactional.id": transactional_id(sink_id, 0),
                     "transaction.timeout.ms": 20_000})
    dead.init_transactions(30)
    dead.begin_transaction()
    for i in range(4):
        dead.produce(topic, value=f"dead{i}".encode())
    dead.produce(COMMITS_TOPIC, key=f"done/{sink_id}/0".encode(), value=b'{"batch_id": 1}', partition=0)
    dead.flush(30)

    run_batch(spark, shared_node.bootstrap, topic, checkpoint)  # batch 1: rows 10..19
    assert numbers(read_all(shared_node.bootstrap, topic)) == list(range(20))
    with pytest.raises(KafkaException):
        dead.commit_transaction(10)


def test_markers_compressed_by_each_codec_are_read(spark, shared_node, tmp_path):
    """A commit marker of the next batch, compressed by librdkafka with gzip, snappy, lz4 or zstd (padded, so that
    compressing pays and librdkafka keeps it compressed), makes that batch done: the JVM sink decodes each."""
    topic, checkpoint = unique("jvm-codecs"), tmp_path / "checkpoint"
    query = run_batch(spark, shared_node.bootstrap, topic, checkpoint)  # batch 0: rows 0..9
    sink_id = f"checkpoint:{os.path.normpath(checkpoint)}#{query.id}"
    for batch, codec in enumerate(["gzip", "snappy", "lz4", "zstd"], start=1):
        marker = Producer({"bootstrap.servers": shared_node.bootstrap, "compression.type": codec})
        marker.produce(COMMITS_TOPIC, key=f"commit/{sink_id}".encode(), partition=0,
                       value=json.dumps({"batch_id": batch, "pad": "x" * 4000}).encode())
        assert marker.flush(30) == 0
        run_batch(spark, shared_node.bootstrap, topic, checkpoint)  # batch `batch`: committed, so dropped
    assert numbers(read_all(shared_node.bootstrap, topic)) == list(range(10))


def test_the_transaction_timeout_reaches_the_coordinator(spark, shared_node, tmp_path):
    """kafka.transaction.timeout.ms past the broker's transaction.max.timeout.ms (15 minutes): refused by name."""
    with pytest.raises(Exception, match="INVALID_TRANSACTION_TIMEOUT"):
        run_batch(spark, shared_node.bootstrap, unique("jvm-timeout"), tmp_path / "checkpoint",
                  **{"kafka.transaction.timeout.ms": "3600000"})


def test_tagged_records_are_the_python_data_sources_and_odradek_sink_jvm_true_says_so(spark, shared_node,
                                                                                       tmp_path):
    with pytest.raises(Exception, match="it does not tag records with their sink, batch and task"):
        run_batch(spark, shared_node.bootstrap, unique("jvm-tagged"), tmp_path / "checkpoint",
                  **{"odradek.sink.tagRecords": "true"})


@requires_reference
def test_exactly_once_on_apache_kafka_read_committed_by_two_clients(spark, tmp_path):
    """Two batches into Kafka 4.0, then the last one replayed after its commit file is lost (and, the trigger being
    availableNow, one batch more): every row once."""
    port, _ = _two_free_ports()
    kafka = ReferenceBroker(tmp_path / "kafka", port).start()
    try:
        topic, checkpoint = "jvm-exactly-once", tmp_path / "checkpoint"
        for _ in range(2):
            run_batch(spark, kafka.bootstrap, topic, checkpoint, **{"kafka.compression.type": "gzip"})
        last = max((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
        last.unlink()  # as if the driver died between the sink's commit and Spark's commit log
        (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
        run_batch(spark, kafka.bootstrap, topic, checkpoint)

        got = numbers(read_all(kafka.bootstrap, topic))
        assert got == list(range(len(got))) and len(got) >= 20
        reader = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                               isolation_level="read_committed", consumer_timeout_ms=10_000)
        assert sorted(int(r.value) for r in take(reader, len(got))) == got
        reader.close()
    finally:
        kafka.stop()
