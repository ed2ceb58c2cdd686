"""Writes records with confluent-kafka and reads them back with a consumer group: the check that a client
configuration (say, a secured listener's) works for both ends."""

import time
import uuid

from confluent_kafka import Consumer, Producer


def confluent_roundtrip(settings: dict, prefix: str, values: list[bytes], timeout_s: float = 30) -> list[bytes]:
    """The values read back from a new topic after writing them with acks=all."""
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    producer = Producer({**settings, "acks": "all"})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(timeout_s) == 0
    consumer = Consumer({**settings, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got
