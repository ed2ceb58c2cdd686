"""Writes records and reads them back, with confluent-kafka or aiokafka: the check that
a client configuration (say, a secured listener's) works for both ends."""

import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
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


async def aiokafka_roundtrip(settings: dict, prefix: str, values: list[bytes], timeout_s: float = 30) -> list[bytes]:
    """The same with aiokafka's producer and a consumer without a group (settings: their keyword arguments)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    producer = AIOKafkaProducer(acks="all", **settings)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
    await consumer.start()
    try:
        got = []
        deadline = time.monotonic() + timeout_s
        while len(got) < len(values) and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            got += [message.value for messages in batch.values() for message in messages]
        return got
    finally:
        await consumer.stop()
