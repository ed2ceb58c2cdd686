"""End to end: a node samples its own load into __balancer_samples, and the load monitor's model carries it."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.balancer.load_monitor import LoadMonitor, build_model, metadata_from_client, read_samples
from odradek.balancer.sampler import SAMPLES_TOPIC, decode_sample
from tests.sql.server_process import wait_for

TOPIC = "sampled"
MESSAGES = 20


def read_all_samples(bootstrap: str) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-samples", "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(SAMPLES_TOPIC, 0, 0)])
        samples = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    break
                raise AssertionError(message.error())
            samples.append(decode_sample(message.value()))
        return samples
    finally:
        consumer.close()


def totals(samples, key) -> tuple[int, int, int, int, int]:
    """bytes in, bytes out, produce requests, fetch requests summed over the samples; the latest size."""
    bytes_in = bytes_out = produce = fetch = size = 0
    for sample in samples:
        for r in sample.replicas:
            if (r.topic, r.index) == key:
                bytes_in += r.counts.bytes_in
                bytes_out += r.counts.bytes_out
                produce += r.counts.produce_requests
                fetch += r.counts.fetch_requests
                size = r.size_bytes
    return bytes_in, bytes_out, produce, fetch, size


def test_produced_and_consumed_bytes_reach_the_samples_and_the_model(node_factory):
    node = node_factory({"balancer.sampling.enable": "true", "balancer.sample.interval.ms": "500",
                         "broker.rack": "rack-a"})
    bootstrap = node.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(20)

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 0})
    for i in range(MESSAGES):
        producer.produce(TOPIC, key=b"k%d" % i, value=bytes(1000 + i), partition=0)
        assert producer.flush(20) == 0  # one Produce request per message
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sampled-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 30
    while got < MESSAGES and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got += 1
    consumer.close()
    assert got == MESSAGES

    def sampled():
        samples = [s for s in read_all_samples(bootstrap) if s is not None]
        bytes_in, bytes_out, produce, fetch, size = totals(samples, (TOPIC, 0))
        return samples if size > 0 and bytes_in == size and bytes_out >= size and produce == MESSAGES else None

    samples = wait_for(sampled, timeout_s=40, what="samples counting what was produced and consumed")
    bytes_in, bytes_out, produce, fetch, size = totals(samples, (TOPIC, 0))
    # bytes in: the record batches appended, which are the log; bytes out: each batch sent once to the one
    # consumer (a fetch may send a batch again only when an earlier response was not read, not here)
    assert bytes_in == size and size > MESSAGES * 1000
    assert bytes_out == size
    assert produce == MESSAGES and fetch >= 1
    sample = samples[-1]
    assert sample.rack == "rack-a" and sample.log_dirs and sample.log_dirs[0].capacity_bytes > 0
    assert all(s.end_ms > s.start_ms for s in samples)

    monitor = LoadMonitor(window_ms=3_600_000)
    assert read_samples({"bootstrap.servers": bootstrap}, monitor) > 0
    load = monitor.loads(monitor.latest_ms)[(TOPIC, 0)]
    # the rate over the time the samples cover: all of what was produced, none of it twice
    assert load.bytes_in * load.covered_ms / 1000 == pytest.approx(size)
    assert load.produce_requests * load.covered_ms / 1000 == pytest.approx(MESSAGES)
    metadata = metadata_from_client(admin.list_topics(timeout=10), {n: s.rack for n, s in monitor.nodes.items()})
    built = build_model(metadata, monitor, monitor.latest_ms)
    partition = next(p for p in built.model.partitions if (p.topic, p.index) == (TOPIC, 0))
    assert partition.size_bytes >= size and partition.bytes_in > 0 and partition.bytes_out > 0
    assert partition.produce_requests > 0 and partition.fetch_requests > 0
    (model_node,) = built.model.nodes
    assert model_node.rack == "rack-a" and model_node.log_dirs[0].capacity_bytes > 0
    assert partition.log_dirs[0] == model_node.log_dirs[0].path
    assert built.coverage.unsampled_partitions == () or all(name.startswith("__") for name in
                                                            built.coverage.unsampled_partitions)
