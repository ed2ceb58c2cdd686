"""Log compaction against a real node: the background cleaner, tombstones, keyless records, live config changes."""

import os
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from odradek.protocol.records import decode_batches

SMALL_SEGMENTS = {"segment.bytes": "16384"}  # many small segments (Kafka refuses a node-wide size under 1 MiB)
NODE_SETTINGS = {
    "log.cleaner.backoff.ms": "100",
    "log.segment.delete.delay.ms": "500",
}
COMPACTED = {**SMALL_SEGMENTS, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "2000"}


def create_topic(node, name: str, config: dict) -> None:
    client = AdminClient({"bootstrap.servers": node.bootstrap})
    client.create_topics([NewTopic(name, 1, 1, config={**SMALL_SEGMENTS, **config})])[name].result(15)


def producer(node) -> Producer:
    # small batches: each must fit the 16 KiB segments
    return Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5, "batch.num.messages": 200,
                     "enable.idempotence": True})


def read_all(node, topic: str, timeout: float = 20.0) -> list[tuple[bytes, bytes | None]]:
    """Every record from the beginning to the high watermark, as (key, value)."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        return out
                    continue
                raise AssertionError(msg.error())
            out.append((msg.key(), msg.value()))
            if msg.offset() + 1 >= high:
                return out
        raise AssertionError(f"did not reach the high watermark {high} in {timeout}s")
    finally:
        consumer.close()


def records_on_disk(node, topic: str) -> int:
    """Records in the partition's segment files; the cleaner may swap a segment while they are read (its
    file is then gone), so the count is taken again until one pass reads every file it listed."""
    directory = os.path.join(node.data_dir, f"{topic}-0")
    while True:
        count = 0
        try:
            for name in sorted(os.listdir(directory)):
                if name.endswith(".log"):
                    with open(os.path.join(directory, name), "rb") as f:
                        count += sum(len(recs) for _, recs in decode_batches(f.read()))
        except FileNotFoundError:
            continue
        return count


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = condition()
        if ok:
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout}s; last state: {last}")


def test_hundred_thousand_updates_over_a_thousand_keys_compact_to_the_latest_of_each(node_factory):
    node = node_factory(NODE_SETTINGS)
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic, COMPACTED)
    p = producer(node)
    latest = {}
    for i in range(100_000):
        key = b"key-%04d" % (i % 1000 if i < 50_000 else (i * 7919) % 1000)
        value = b"value-%d" % i
        latest[key] = value
        while True:
            try:
                p.produce(topic, key=key, value=value)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0

    def converged():
        records = read_all(node, topic)
        return len(records) == 1000 and dict(records) == latest, len(records)

    wait_until(converged, 45, "the topic did not compact to one record per key")
    # the active segment rolled (segment.ms) and was cleaned too: 1,000 records are left on disk
    wait_until(lambda: (records_on_disk(node, topic) == 1000, records_on_disk(node, topic)), 10,
               "old segments were not removed")
    checkpoint = open(os.path.join(node.data_dir, "cleaner-offset-checkpoint")).read().splitlines()
    assert checkpoint[0] == "0" and any(line.startswith(f"{topic} 0 ") for line in checkpoint[2:])


def test_tombstoned_keys_disappear_after_delete_retention_ms(node_factory):
    node = node_factory(NODE_SETTINGS)
    topic = f"tombstones-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic, {**COMPACTED, "delete.retention.ms": "6000"})
    p = producer(node)
    for round_ in range(3):
        for k in range(100):
            p.produce(topic, key=b"k%03d" % k, value=b"v%d" % round_)
    for k in range(0, 100, 2):
        p.produce(topic, key=b"k%03d" % k, value=None)
    assert p.flush(30) == 0
    started = time.monotonic()

    def compacted_with_tombstones():
        records = dict(read_all(node, topic))
        return len(read_all(node, topic)) == 100, records

    records = wait_until(compacted_with_tombstones, 20, "the topic did not compact")
    if time.monotonic() - started < 5:  # still within delete.retention.ms: the tombstones are there
        assert all(records[b"k%03d" % k] is None for k in range(0, 100, 2))
    assert all(records[b"k%03d" % k] == b"v2" for k in range(1, 100, 2))

    def tombstones_gone():
        # a cleaning needs new dirty data, as in Kafka: keep writing to another key
        p.produce(topic, key=b"nudge", value=b"%f" % time.monotonic())
        p.flush(10)
        keys = {key for key, _ in read_all(node, topic)}
        return keys == {b"k%03d" % k for k in range(1, 100, 2)} | {b"nudge"}, len(keys)

    wait_until(tombstones_gone, 40, "tombstones were not removed after delete.retention.ms")


def test_keyless_records_are_rejected_once_the_topic_becomes_compacted(node_factory):
    node = node_factory(NODE_SETTINGS)
    topic = f"keyless-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic, {"cleanup.policy": "delete"})
    results = []
    p = Producer({"bootstrap.servers": node.bootstrap, "retries": 0})
    p.produce(topic, value=b"no key, fine", on_delivery=lambda err, msg: results.append(err))
    p.flush(15)
    assert results == [None]
    client = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(15)
    results.clear()
    p.produce(topic, value=b"no key, refused", on_delivery=lambda err, msg: results.append(err))
    p.flush(15)  # alone in its batch: Kafka rejects a whole batch with one keyless record
    p.produce(topic, key=b"k", value=b"keyed, fine", on_delivery=lambda err, msg: results.append(err))
    p.flush(15)
    assert len(results) == 2
    assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD
    assert results[1] is None



def test_committed_offsets_survive_compaction_of_consumer_offsets_and_a_restart(node_factory):
    node = node_factory({**NODE_SETTINGS, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "16384",
                         "log.cleaner.min.cleanable.ratio": "0.01"})
    topic = f"data-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic, {})
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "compacting", "enable.auto.commit": False})
    try:
        for offset in range(1, 1501):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()
    checkpoint_path = os.path.join(node.data_dir, "cleaner-offset-checkpoint")

    def offsets_topic_cleaned():
        if not os.path.exists(checkpoint_path):
            return False, None
        lines = open(checkpoint_path).read().splitlines()
        return any(line.startswith("__consumer_offsets 0 ") for line in lines[2:]), lines

    wait_until(offsets_topic_cleaned, 30, "__consumer_offsets was not cleaned")
    assert records_on_disk(node, "__consumer_offsets") < 1500
    node.restart()
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "compacting", "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=15)
    finally:
        consumer.close()
    assert committed[0].offset == 1500
