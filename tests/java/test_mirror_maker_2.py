"""MirrorMaker 2 (Kafka 4.0's connect-mirror-maker.sh) between two Odradek nodes: topics and records are
mirrored, and a consumer group's committed offsets are translated onto the target cluster."""

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.java.kafka_process import KafkaProgram, read_partition
from tests.reference_kafka import requires_reference

pytestmark = requires_reference

NODE_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


def mm2_properties(source, target) -> dict:
    settings = {
        "clusters": "A, B", "A.bootstrap.servers": source.bootstrap, "B.bootstrap.servers": target.bootstrap,
        "A->B.enabled": "true", "A->B.topics": "mm-.*", "A->B.groups": "mm-group", "B->A.enabled": "false",
        "sync.group.offsets.enabled": "true", "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
        "offset.lag.max": "0",  # an offset sync for every record, so a committed offset translates exactly
    }
    for topic in ("replication", "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage",
                  "config.storage", "status.storage"):
        settings[f"{topic}.replication.factor"] = "1"
    return settings


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def test_topics_records_and_group_offsets_are_mirrored_to_the_other_cluster(node_factory, tmp_path):
    source, target = node_factory(NODE_SETTINGS, name="cluster-a"), node_factory(NODE_SETTINGS, name="cluster-b")
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("mm-orders", 1, 1)])["mm-orders"].result(30)
    producer = Producer({"bootstrap.servers": source.bootstrap})
    records = [(f"k{i}".encode(), f"order {i}".encode()) for i in range(100)]
    for key, value in records:
        producer.produce("mm-orders", key=key, value=value)
    assert producer.flush(30) == 0
    # The group has read 60 records on A (and is not active on B, so MirrorMaker may write its offsets there).
    consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "mm-group"})
    consumer.commit(offsets=[TopicPartition("mm-orders", 0, 60)], asynchronous=False)
    consumer.close()

    config = tmp_path / "mm2.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in mm2_properties(source, target).items()))
    mirror = KafkaProgram("connect-mirror-maker.sh", config, work_dir=tmp_path / "mm2").start()
    try:
        mirror.wait_for(lambda: read_partition(target.bootstrap, "A.mm-orders") == records
                        if "A.mm-orders" in AdminClient({"bootstrap.servers": target.bootstrap})
                        .list_topics(timeout=30).topics else False, "every record mirrored to A.mm-orders on B")
        translated = mirror.wait_for(lambda: max(committed(target.bootstrap, "mm-group", "A.mm-orders"), 0),
                                     "the group's offset translated onto B")
        # MirrorMaker translates conservatively (never past what the group has read), through its offset syncs.
        assert 0 < translated <= 60, translated
        checkpoints = AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=30).topics
        assert "A.checkpoints.internal" in checkpoints and "heartbeats" in checkpoints, sorted(checkpoints)
        # The ACL sync learns, as from a Kafka without an authorizer, that there is nothing to sync.
        mirror.wait_for(lambda: "No ACL authorizer is configured on the source Kafka cluster"
                        in mirror.log_path.read_text(errors="replace"), "the ACL sync skipped")
        log = mirror.log_path.read_text(errors="replace")
        assert not [line for line in log.splitlines() if " ERROR " in line and "ACL" in line.upper()]
    finally:
        mirror.stop()
