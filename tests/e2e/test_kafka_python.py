"""kafka-python against a real node: admin, producer with acks and compression, consumer assign/seek."""

import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import TopicAlreadyExistsError

from tests.kafka_python_reads import take


def test_kafka_python_admin_produce_consume(shared_node):
    topic = f"kafka-python-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=shared_node.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        raise AssertionError("creating an existing topic must fail")
    except TopicAlreadyExistsError:
        pass
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert configs

    for acks, codec in ((1, None), ("all", "gzip"), (0, None)):
        producer = KafkaProducer(bootstrap_servers=shared_node.bootstrap, acks=acks, compression_type=codec)
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2) for i in range(100)]
        producer.flush(30)
        if acks != 0:
            metadata = [f.get(30) for f in futures]
            assert all(m.offset >= 0 for m in metadata)
        producer.close()

    consumer = KafkaConsumer(bootstrap_servers=shared_node.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning()
    records = take(consumer, 300)
    assert len(records) == 300
    for partition in (0, 1):
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(150))
    assert consumer.end_offsets(partitions) == {partitions[0]: 150, partitions[1]: 150}
    consumer.seek(partitions[1], 140)
    tail = list(consumer)
    assert [r.offset for r in tail if r.partition == 1] == list(range(140, 150))
    consumer.close()
    admin.delete_topics([topic])
    admin.close()


def test_kafka_python_legacy_alter_configs(shared_node):
    topic = f"kafka-python-alter-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=shared_node.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  topic_configs={"retention.ms": "1000000", "segment.ms": "2000000"})])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "3000000"})],
                        incremental=False)
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert described["retention.ms"]["value"] == "3000000"
    # AlterConfigs replaces every override; kafka-python re-sends the ones it did not change, so they stay.
    assert described["segment.ms"]["value"] == "2000000"
    assert described["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    admin.close()
