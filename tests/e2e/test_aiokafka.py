"""aiokafka against a real node: produce (plain and gzip) and consume with assign/seek."""

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


def test_aiokafka_produce_and_consume(shared_node):
    topic = f"aiokafka-{uuid.uuid4().hex[:6]}"

    async def scenario():
        offsets = []
        for codec in (None, "gzip"):
            producer = AIOKafkaProducer(bootstrap_servers=shared_node.bootstrap, compression_type=codec,
                                        enable_idempotence=codec is None)
            await producer.start()
            try:
                for i in range(50):
                    metadata = await producer.send_and_wait(topic, value=f"{codec}-{i}".encode(), key=b"k")
                    offsets.append(metadata.offset)
            finally:
                await producer.stop()
        assert offsets == list(range(100))

        consumer = AIOKafkaConsumer(bootstrap_servers=shared_node.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            values = []
            while len(values) < 100:
                batch = await consumer.getmany(partition, timeout_ms=5000)
                assert batch, "no records within 5 s"
                values += [r.value.decode() for r in batch[partition]]
            assert values == [f"None-{i}" for i in range(50)] + [f"gzip-{i}" for i in range(50)]
            consumer.seek(partition, 95)
            batch = await consumer.getmany(partition, timeout_ms=5000)
            assert [r.offset for r in batch[partition]] == [95, 96, 97, 98, 99]
        finally:
            await consumer.stop()

    asyncio.run(scenario())
