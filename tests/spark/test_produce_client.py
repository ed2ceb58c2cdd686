"""The sink's own producer (odradek.spark.produce) against real nodes and Apache Kafka 4.0, without Spark: which
settings it takes, a leader killed with kill -9 mid-write over plaintext and over SASL_SSL (idempotence: every
record once, in order), refused credentials, partitions it cannot write to, and the same rows on Kafka 4.0
placed where Kafka's own partitioner places them, read back with their headers and timestamps by confluent-kafka
and kafka-python."""

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from odradek.spark.produce import ColumnProducer, uses_produce_client
from tests.conftest import SECURITIES
from tests.e2e.test_cluster import wait_for
from tests.e2e.test_cluster_transactions import all_in_sync, leaders
from tests.java.conftest import _two_free_ports
from tests.kafka_python_reads import take
from tests.reference_kafka import ReferenceBroker, requires_reference
from tests.spark.topics import create_topic, unique

SASL_SSL_SETTINGS = {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL",
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "p"}
SINK_DEFAULTS = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                 "partitioner": "murmur2_random"}


@pytest.mark.parametrize(("settings", "own"), [
    ({"bootstrap.servers": "b:1", **SINK_DEFAULTS}, True),
    ({**SASL_SSL_SETTINGS, "compression.type": "zstd", "acks": "1", "batch.size": "65536"}, True),
    ({"bootstrap.servers": "b:1", "acks": "0"}, False),  # no answer to wait for
    ({"bootstrap.servers": "b:1", "partitioner": "consistent_random"}, False),  # librdkafka's CRC32
    ({"bootstrap.servers": "b:1", "compression.type": "brotli"}, False),  # librdkafka's error, not ours
    ({"bootstrap.servers": "b:1", "transactional.id": "t"}, False),
    ({**SASL_SSL_SETTINGS, "sasl.mechanism": "GSSAPI"}, False),
], ids=["sink-defaults", "sasl-ssl-zstd-acks-1", "acks-0", "crc32-partitioner", "unknown-codec", "transactional",
        "gssapi"])
def test_settings_the_producer_does_not_speak_produce_through_librdkafka(settings, own):
    assert uses_produce_client(settings) is own


def rows(start: int, n: int, **columns) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": [f"v{i}".encode() for i in range(start, start + n)], **columns})


def read_back(settings: dict, topic: str) -> list[tuple]:
    """(partition, key, value, timestamp, headers) of every record, read by confluent-kafka."""
    consumer = Consumer({**settings, "group.id": unique("read-back"), "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out, ended = [], set()
        while len(ended) < len(partitions):
            msg = consumer.poll(30)
            assert msg is not None, f"timed out reading {topic}"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                ended.add(msg.partition())
                continue
            out.append((msg.partition(), msg.key(), msg.value(), msg.timestamp()[1], msg.headers() or []))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("security", SECURITIES)
def test_a_leader_killed_mid_write_every_record_is_written_once_in_order(cluster_factory, security):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"}, security=security)
    topic = unique("produce-failover")
    admin = AdminClient(cluster.client_settings())  # outlives its futures
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_for(lambda: all_in_sync(cluster, [topic]), 60, "every replica in sync")
    victim = leaders(cluster, topic)[0][0]
    total, per_batch = 40_000, 200

    def batches():
        for start in range(0, total, per_batch):
            if start == total // 10:
                cluster.node(victim).kill()  # while the last batch's request may be in flight
            yield rows(start, per_batch)

    producer = ColumnProducer(cluster.client_settings({**SINK_DEFAULTS, "batch.size": "4096"}))
    try:
        assert producer.write(batches(), topic) == total
    finally:
        producer.close()
    got = read_back(cluster.client_settings(), topic)
    assert [value for _, _, value, _, _ in got] == [f"v{i}".encode() for i in range(total)]
    assert leaders(cluster, topic)[0][0] not in (victim, -1)


def test_refused_credentials_fail_the_write_at_once_with_the_brokers_reason(cluster_factory):
    cluster = cluster_factory(1, security="SASL_SSL")
    producer = ColumnProducer(cluster.client_settings({"sasl.password": "not-the-password"}))
    try:
        # Not retried as a lost connection until the delivery timeout (a RuntimeError naming the timeout).
        with pytest.raises(RuntimeError, match="cannot get a producer id: authentication to .* failed: .*"):
            producer.write([rows(0, 1)], unique("produce-auth"))
    finally:
        producer.close()


def test_a_partition_the_topic_does_not_have_fails_the_write_and_nothing_is_written(shared_node):
    topic = unique("produce-partition")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    producer = ColumnProducer({"bootstrap.servers": shared_node.bootstrap})
    try:
        with pytest.raises(ValueError, match=f"topic {topic} has no partition 2"):
            producer.write([rows(0, 3, partition=pa.array([0, 2, None], pa.int32()))], topic)
        assert producer.write([rows(3, 2, partition=pa.array([1, None], pa.int32()))], topic) == 2
    finally:
        producer.close()
    got = {v: p for p, _, v, _, _ in read_back({"bootstrap.servers": shared_node.bootstrap}, topic)}
    assert got.keys() == {b"v3", b"v4"} and got[b"v3"] == 1, "the refused rows are nowhere"


@requires_reference
def test_rows_on_apache_kafka_land_where_its_partitioner_puts_them_and_read_back_with_two_clients(tmp_path):
    port, _ = _two_free_ports()
    kafka = ReferenceBroker(tmp_path / "kafka", port).start()
    try:
        topic, by_kafka_python = "produce-on-kafka", "placed-by-kafka-python"
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for name in (topic, by_kafka_python):
            admin.create_topics([NewTopic(name, 5, 1)])[name].result(60)
        keys = [f"key-{i}".encode() if i % 7 else None for i in range(2000)]
        stamps = [1_700_000_000_000 + i for i in range(2000)]
        headers = [[("n", str(i).encode()), ("empty", None)] if i % 3 else [] for i in range(2000)]
        headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
        producer = ColumnProducer({"bootstrap.servers": kafka.bootstrap, "compression.type": "gzip",
                                   "batch.size": "16384"})
        try:
            written = producer.write([rows(i, 500, key=keys[i:i + 500], timestamp=pa.array(stamps[i:i + 500]),
                                           headers=pa.array([[{"key": k, "value": v} for k, v in h]
                                                             for h in headers[i:i + 500]], headers_type))
                                      for i in range(0, 2000, 500)], topic)
        finally:
            producer.close()
        assert written == 2000
        placer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
        for key in {k for k in keys if k is not None}:
            placer.send(by_kafka_python, key=key, value=b"x")
        placer.close(timeout=60)

        got = read_back({"bootstrap.servers": kafka.bootstrap}, topic)
        assert sorted((v, k, ts, h) for _, k, v, ts, h in got) == sorted(
            (f"v{i}".encode(), keys[i], stamps[i], headers[i]) for i in range(2000))
        placed = {k: p for p, k, _, _, _ in got if k is not None}
        assert placed == {k: p for p, k, _, _, _ in read_back({"bootstrap.servers": kafka.bootstrap},
                                                               by_kafka_python)}
        reader = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                               consumer_timeout_ms=10_000)
        assert sorted((r.value, r.headers) for r in take(reader, 2000)) == sorted(
            (f"v{i}".encode(), headers[i]) for i in range(2000))
        reader.close()
    finally:
        kafka.stop()
