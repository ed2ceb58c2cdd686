"""Topic helpers for the Spark tests: unique names, creating topics, reading a topic back with confluent-kafka;
and how long a Spark step may take before a test gives up on it."""

import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# A failure bound, never a wait: a Spark driver's JVM start and its first micro-batch take tens of seconds on
# a loaded 2-core machine (a whole minute and a half has been seen), so a step that makes no progress in five
# minutes is stuck.
SPARK_DEADLINE_S = 300


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for fut in client.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        fut.result(30)


def read_all(bootstrap: str, topic: str) -> list:
    """Every committed record of every partition of the topic (read_committed: records of aborted
    transactions are skipped), as (partition, key, value, headers) tuples."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-read-all", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            return []
        out = []
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if low >= high:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while True:
                msg = consumer.poll(30)
                assert msg is not None, f"timed out reading {topic}[{p}]"
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise AssertionError(str(msg.error()))
                out.append((p, msg.key(), msg.value(), msg.headers() or []))
                if msg.offset() + 1 >= high:
                    break
        return out
    finally:
        consumer.close()
