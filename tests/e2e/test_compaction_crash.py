"""kill -9 at seeded random moments while a compacted topic takes updates and the cleaner rewrites it.

After every restart, and at the end once cleaning has caught up: offsets strictly increase, every batch
reads back with a valid CRC (librdkafka checks them), and for every key the log's latest value is the
last acknowledged update of that key or a later one (a write can land without its acknowledgement).
Replay a failure with `pytest --seed N`.
"""

import random
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

NODE_SETTINGS = {
    "log.cleaner.backoff.ms": "50",
    "log.segment.delete.delay.ms": "200",
}
COMPACTED = {"segment.bytes": "16384",  # many small segments
             "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "1000"}
KEYS = 40
KILLS = 6


def read_log(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record up to the high watermark, CRCs checked."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False,
                         "enable.partition.eof": True, "check.crcs": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= high:
                    return out
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() + 1 >= high:
                return out
        raise AssertionError(f"did not reach the high watermark {high}")
    finally:
        consumer.close()


def check(records, acked: dict[bytes, int], seed: int) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), f"offsets not strictly increasing (seed {seed})"
    latest = {key: int(value) for _, key, value in records}
    for key, sequence in acked.items():
        assert key in latest, f"acknowledged key {key!r} is gone (seed {seed})"
        assert latest[key] >= sequence, \
            f"{key!r}: the log ends at update {latest[key]}, update {sequence} was acknowledged (seed {seed})"


def test_kill_9_during_compaction_keeps_the_latest_acknowledged_value_of_every_key(node_factory, seed):
    rng = random.Random(seed)
    node = node_factory(NODE_SETTINGS)
    topic = f"crash-compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # must outlive its future
    admin.create_topics([NewTopic(topic, 1, 1, config=COMPACTED)])[topic].result(15)

    acked: dict[bytes, int] = {}
    acknowledgements = 0
    sequence = 0

    def on_delivery(err, msg):
        nonlocal acknowledgements
        if err is None:
            key, value = msg.key(), int(msg.value())
            acked[key] = max(acked.get(key, -1), value)
            acknowledgements += 1

    for kill in range(KILLS + 1):
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 2, "batch.num.messages": 100,
                             "acks": "all", "message.timeout.ms": 3000, "retries": 0})
        deadline = time.monotonic() + (rng.uniform(0.5, 2.0) if kill < KILLS else 1.0)
        while time.monotonic() < deadline:
            sequence += 1
            try:
                producer.produce(topic, str(sequence).encode(), key=f"k{rng.randrange(KEYS)}".encode(),
                                 on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        if kill < KILLS:
            node.kill()  # mid-stream: in-flight writes may or may not have landed
            producer.flush(5)  # collect the acknowledgements that did arrive
            node.start()
            check(read_log(node.bootstrap, topic), acked, seed)
        else:
            assert producer.flush(15) == 0
    # the cleaner catches up once the load stops (segment.ms rolls the last segment): far fewer records than
    # acknowledged updates remain; a loaded machine may take a while, so wait for it rather than a set time
    deadline = time.monotonic() + 60
    while True:
        records = read_log(node.bootstrap, topic)
        if len(records) < acknowledgements / 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(records, acked, seed)
    assert len(acked) == KEYS
    assert len(records) < acknowledgements / 2, (len(records), acknowledgements, f"seed {seed}")
