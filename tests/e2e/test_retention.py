"""Retention on a real node: whole segments go by time and by size, the log start moves, consumers reset."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

SEGMENT_BYTES = 1 << 20  # segments of 1 MiB: several per partition
VALUE = b"r" * 1000


@pytest.fixture
def node(node_factory):
    # retention checks every 200 ms, from the start (Kafka waits log.initial.task.delay.ms, 30 s by default)
    return node_factory({"log.retention.check.interval.ms": "200", "log.initial.task.delay.ms": "0"})


def create(bootstrap: str, config: dict[str, str]) -> str:
    topic = f"retained-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES),
                                                                     **config})]).values():
        future.result(30)
    return topic


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, VALUE, key=str(i).encode())
    assert producer.flush(30) == 0


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()


def wait_for_log_start(bootstrap: str, topic: str, above: int, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        low, _ = watermarks(bootstrap, topic)
        if low > above:
            return low
        time.sleep(0.2)
    raise AssertionError(f"the log start of {topic} stayed at {above} for {timeout}s")


def test_retention_ms_deletes_old_segments_and_a_consumer_resets_to_the_new_start(node):
    topic = create(node.bootstrap, {"retention.ms": "3000"})
    produce(node.bootstrap, topic, 3000)  # about 3 segments of 1 MiB
    low = wait_for_log_start(node.bootstrap, topic, above=0)
    _, high = watermarks(node.bootstrap, topic)
    assert 0 < low <= high == 3000

    # a consumer asking for offset 0 gets OFFSET_OUT_OF_RANGE, and auto.offset.reset=earliest moves it to the
    # log start, from where it reads what is still there and what comes next
    produce(node.bootstrap, topic, 1)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "reset", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(10)
        assert message is not None and message.error() is None, message and message.error()
        assert low <= message.offset() <= 3000
    finally:
        consumer.close()


def test_retention_bytes_keeps_the_partition_within_the_bound_plus_one_segment(node):
    bound = 2 * SEGMENT_BYTES
    topic = create(node.bootstrap, {"retention.bytes": str(bound)})
    produce(node.bootstrap, topic, 6000)  # about 6 MiB
    low = wait_for_log_start(node.bootstrap, topic, above=0)
    time.sleep(1)  # a few more checks: the deletion is complete, not partial
    low, high = watermarks(node.bootstrap, topic)
    kept_bytes = (high - low) * len(VALUE)
    assert kept_bytes <= bound + SEGMENT_BYTES, (low, high)
    assert kept_bytes >= bound - SEGMENT_BYTES, f"retention removed more than it had to: {low}..{high}"


def test_retention_ms_altered_on_a_running_node_takes_effect(node):
    topic = create(node.bootstrap, {})
    produce(node.bootstrap, topic, 3000)
    time.sleep(1)
    assert watermarks(node.bootstrap, topic)[0] == 0  # the default 7 days keeps everything
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    change = ConfigEntry("retention.ms", "500", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[change])]).values():
        future.result(30)
    assert wait_for_log_start(node.bootstrap, topic, above=0) > 0


def test_fetch_below_the_log_start_without_reset_is_an_error(node):
    topic = create(node.bootstrap, {"retention.ms": "3000"})
    produce(node.bootstrap, topic, 3000)
    wait_for_log_start(node.bootstrap, topic, above=0)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "no-reset", "auto.offset.reset": "error",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None:
                assert message.error() is not None, "a record below the log start was served"
                assert message.error().code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
                return
        raise AssertionError("no OFFSET_OUT_OF_RANGE for a fetch below the log start")
    finally:
        consumer.close()
