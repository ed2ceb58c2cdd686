"""confluent-kafka (librdkafka) against a real node: produce with every codec, idempotence, assign/seek, admin."""

import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def create_topic(node, name: str, partitions: int = 1, config: dict | None = None) -> None:
    client = admin(node)  # must outlive the future, or the handle is destroyed before the answer arrives
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def produce(node, topic: str, records: list, **config) -> list:
    """Produce (key, value, partition) tuples; returns the delivered messages in delivery order."""
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5, **config})
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg)

    for key, value, partition in records:
        kwargs = {"partition": partition} if partition is not None else {}
        producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **kwargs)
    assert producer.flush(30) == 0
    assert errors == []
    return delivered


def consume_all(node, topic: str, partitions: list[int], expected: int, start=OFFSET_BEGINNING, timeout=30.0):
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    messages = []
    deadline = time.monotonic() + timeout
    while len(messages) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        messages.append(msg)
    consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_producer_with_each_codec_round_trips_records(shared_node, codec):
    topic = topic_name(f"codec-{codec}")
    create_topic(shared_node, topic, partitions=2)
    records = [(f"k{i}".encode(), f"value {i} ".encode() * 20, i % 2) for i in range(500)]
    delivered = produce(shared_node, topic, records, **{"compression.type": codec})
    messages = consume_all(shared_node, topic, [0, 1], len(records))
    assert len(messages) == len(records)
    for partition in (0, 1):
        got = [(m.key(), m.value()) for m in messages if m.partition() == partition]
        want = [(k, v) for k, v, p in records if p == partition]
        assert got == want
        offsets = [m.offset() for m in messages if m.partition() == partition]
        assert offsets == list(range(len(want)))
    assert {(m.partition(), m.offset()) for m in delivered} == {(m.partition(), m.offset()) for m in messages}


def test_headers_timestamps_and_null_values_survive(shared_node):
    topic = topic_name("headers")
    create_topic(shared_node, topic)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    timestamp = int(time.time() * 1000) - 12_345
    producer.produce(topic, value=b"v", key=b"k", headers=[("h1", b"a"), ("h2", None)], timestamp=timestamp)
    producer.produce(topic, value=None, key=b"tombstone")
    assert producer.flush(15) == 0
    first, second = consume_all(shared_node, topic, [0], 2)
    assert first.headers() == [("h1", b"a"), ("h2", None)]
    assert first.timestamp()[1] == timestamp
    assert second.value() is None and second.key() == b"tombstone"


def test_idempotent_producer_writes_each_record_once_in_order(shared_node):
    topic = topic_name("idempotent")
    create_topic(shared_node, topic, partitions=3)
    records = [(str(i).encode(), str(i).encode(), None) for i in range(3000)]
    produce(shared_node, topic, records, **{"enable.idempotence": True, "acks": "all",
                                            "max.in.flight.requests.per.connection": 5})
    messages = consume_all(shared_node, topic, [0, 1, 2], len(records))
    assert sorted(int(m.value()) for m in messages) == list(range(3000))
    for partition in range(3):
        values = [int(m.value()) for m in messages if m.partition() == partition]
        assert values == sorted(values)


def test_consumer_seek_and_offsets_for_times(shared_node):
    topic = topic_name("seek")
    create_topic(shared_node, topic)
    base = int(time.time() * 1000) - 3_600_000  # recent: older records would fall to the 7-day retention
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    for i in range(100):
        producer.produce(topic, value=str(i).encode(), timestamp=base + i * 1000)
        producer.poll(0)
    assert producer.flush(15) == 0

    tail = consume_all(shared_node, topic, [0], 10, start=90)
    assert [int(m.value()) for m in tail] == list(range(90, 100))

    consumer = Consumer({"bootstrap.servers": shared_node.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 100)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 42_500)], timeout=10)
    assert found[0].offset == 43
    beyond = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10_000_000)], timeout=10)
    assert beyond[0].offset == -1  # librdkafka's "end"
    consumer.assign([TopicPartition(topic, 0, 0)])
    msg = None
    while msg is None:
        msg = consumer.poll(1)
    consumer.seek(TopicPartition(topic, 0, 77))
    msg = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and msg.offset() == 77:
            break
    assert msg is not None and msg.value() == b"77"
    consumer.close()


def test_admin_creates_describes_alters_and_deletes_topics(node):
    client = admin(node)
    name = topic_name("admin")
    client.create_topics([NewTopic(name, 3, 1, config={"retention.ms": "3600000"})])[name].result(15)

    with pytest.raises(KafkaException) as exists:
        client.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    validated = topic_name("validate-only")
    client.create_topics([NewTopic(validated, 2, 1)], validate_only=True)[validated].result(15)
    assert validated not in client.list_topics(timeout=10).topics

    metadata = client.list_topics(timeout=10)
    assert sorted(metadata.topics[name].partitions) == [0, 1, 2]
    assert metadata.topics[name].partitions[0].leader == 1

    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = client.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "3600000"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["cleanup.policy"].value == "delete"

    alter = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    client.incremental_alter_configs([alter])[alter].result(15)
    configs = client.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].value == "delete,compact"

    bad = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as invalid:
        client.incremental_alter_configs([bad])[bad].result(15)
    assert invalid.value.args[0].code() == KafkaError.INVALID_CONFIG

    client.create_partitions([NewPartitions(name, 5)])[name].result(15)
    assert sorted(client.list_topics(name, timeout=10).topics[name].partitions) == [0, 1, 2, 3, 4]

    client.delete_topics([name])[name].result(15)
    deadline = time.monotonic() + 10
    while name in client.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in client.list_topics(timeout=10).topics


def test_admin_rejects_bad_topic_requests(node):
    client = admin(node)
    cases = {
        "bad/name": (1, KafkaError.TOPIC_EXCEPTION, {}),
        topic_name("zero-partitions"): (0, KafkaError.INVALID_PARTITIONS, {}),
        topic_name("bad-config"): (1, KafkaError.INVALID_CONFIG, {"retention.ms": "x"}),
        topic_name("unknown-config"): (1, KafkaError.INVALID_CONFIG, {"no.such.config": "1"}),
    }
    for name, (partitions, code, config) in cases.items():
        with pytest.raises(KafkaException) as failure:
            client.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(15)
        assert failure.value.args[0].code() == code, name
    name = topic_name("rf")
    with pytest.raises(KafkaException) as failure:
        client.create_topics([NewTopic(name, 1, 3)])[name].result(15)
    assert failure.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_describe_cluster_and_broker_configs(node):
    client = admin(node)
    cluster = client.describe_cluster().result(15)
    assert [n.id for n in cluster.nodes] == [1]
    assert cluster.controller.id == 1
    assert cluster.cluster_id
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = client.describe_configs([resource])[resource].result(15)
    assert configs["num.partitions"].value == "1"
    assert configs["message.max.bytes"].value == "1048588"


def test_delete_records_moves_the_low_watermark(shared_node):
    topic = topic_name("delete-records")
    create_topic(shared_node, topic)
    produce(shared_node, topic, [(None, str(i).encode(), 0) for i in range(50)])
    client = admin(shared_node)
    result = client.delete_records([TopicPartition(topic, 0, 20)])
    deleted = result[TopicPartition(topic, 0, 20)].result(15)
    assert deleted.low_watermark == 20
    consumer = Consumer({"bootstrap.servers": shared_node.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (20, 50)
    consumer.close()
    messages = consume_all(shared_node, topic, [0], 30)
    assert [m.offset() for m in messages] == list(range(20, 50))


def test_oversized_record_is_rejected_and_the_partition_stays_writable(shared_node):
    topic = topic_name("too-large")
    create_topic(shared_node, topic, config={"max.message.bytes": "10000"})
    producer = Producer({"bootstrap.servers": shared_node.bootstrap, "message.max.bytes": 1_000_000})
    errors = []
    producer.produce(topic, value=b"x" * 50_000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    delivered = produce(shared_node, topic, [(None, b"small", 0)])
    assert delivered[0].offset() == 0


def test_auto_created_topic_on_produce(shared_node):
    topic = topic_name("auto")
    delivered = produce(shared_node, topic, [(None, b"hello", None)])
    assert delivered[0].offset() == 0
    assert consume_all(shared_node, topic, [0], 1)[0].value() == b"hello"
