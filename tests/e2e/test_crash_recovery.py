"""kill -9 in the middle of an acks=1 produce stream: every acknowledged record survives at its offset."""

import random
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 2


def read_partition(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    while len(records) < end and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            records[msg.offset()] = msg.value()
    consumer.close()
    return records


def test_kill_9_during_produce_keeps_every_acknowledged_record(node_factory, seed):
    rng = random.Random(seed)
    node = node_factory({"log.segment.bytes": "1048576"})  # many segment rolls under way
    topic = "crash-stream"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)

    acknowledged: dict[tuple[int, int], bytes] = {}

    def on_delivery(err, msg):
        if err is None:
            key = (msg.partition(), msg.offset())
            assert key not in acknowledged, f"offset {key} acknowledged twice (seed {seed})"
            acknowledged[key] = msg.value()

    sequence = 0
    for _round in range(3):
        producer = Producer({"bootstrap.servers": node.bootstrap, "acks": 1, "linger.ms": 1, "retries": 0,
                             "enable.idempotence": False, "message.timeout.ms": 5000})
        kill_after = len(acknowledged) + rng.randrange(2000, 6000)
        while len(acknowledged) < kill_after:
            producer.produce(topic, value=f"record-{sequence}".encode() + b"." * rng.randrange(200),
                             partition=sequence % PARTITIONS, on_delivery=on_delivery)
            sequence += 1
            producer.poll(0)
            if sequence % 1000 == 0:
                producer.flush(10)
        node.kill()
        producer.flush(10)  # the rest fail: the node is gone
        node.start()

    ends = {}
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    for partition in range(PARTITIONS):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        assert low == 0
        ends[partition] = high
    consumer.close()
    for partition in range(PARTITIONS):
        stored = read_partition(node.bootstrap, topic, partition, ends[partition])
        assert sorted(stored) == list(range(ends[partition])), f"offsets not contiguous (seed {seed})"
        for (p, offset), value in acknowledged.items():
            if p == partition:
                assert stored.get(offset) == value, f"acknowledged record {p}/{offset} lost (seed {seed})"

    producer = Producer({"bootstrap.servers": node.bootstrap})
    delivered = []
    producer.produce(topic, value=b"after", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg)))
    producer.flush(15)
    assert delivered[0][0] is None and delivered[0][1].offset() == ends[0]
