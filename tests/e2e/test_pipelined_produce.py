"""librdkafka's default producer (not idempotent: up to a million requests in flight per connection) with
acks=all and linger.ms=0 sends one request per record. Every one must be answered in milliseconds, not
queued behind its predecessors' replication: once each waited for the one before it, and at a few thousand
records a second the answers fell seconds behind (issue 15).

Not a benchmark (benchmarks/latency.py measures), and no fixed time bound: a loaded machine slows every
answer. The same load with acks=1, which never waited for replication, runs first as the yardstick: with
acks=all half the records are answered within a few times its median (plus the replication round trip),
where before the fix they waited 2 s (one node, 6,000 records/s) and 5 s (three replicas, 2,000 records/s)
while acks=1 answered in milliseconds."""

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REQUEST_TIMEOUT_MS = 30000
ANSWER_BOUND_S = REQUEST_TIMEOUT_MS / 1000 / 3
YARDSTICK_FACTOR = 5  # acks=all's median within this many acks=1 medians, plus REPLICATION_ALLOWANCE_S
REPLICATION_ALLOWANCE_S = 0.25


def create_topic(bootstrap: str, replication_factor: int) -> str:
    topic = f"pipelined-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication_factor)])[topic].result(30)
    return topic


def consume(bootstrap: str, topic: str, expected: int, out: list) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 120
    while len(out) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            out.append(int(message.value()))
    consumer.close()


def produce_at_rate(bootstrap: str, topic: str, rate: int, seconds: float, acks: str = "all") -> list[float]:
    """Seconds from produce() to acknowledgement of each record; fails on any delivery error."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "enable.idempotence": False,
                         "request.timeout.ms": REQUEST_TIMEOUT_MS})
    waits, errors = [], []
    total = int(rate * seconds)
    start = time.monotonic()
    for i in range(total):
        while time.monotonic() < start + i / rate:
            producer.poll(0.001)
        sent = time.monotonic()
        producer.produce(topic, str(i).encode(), partition=0, on_delivery=lambda err, msg, sent=sent: (
            errors.append(err) if err else waits.append(time.monotonic() - sent)))
        producer.poll(0)
    assert producer.flush(120) == 0
    assert errors == []
    return waits


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def check_pipelined_acks_all(bootstrap: str, replication_factor: int, rate: int) -> None:
    seconds = 4
    yardstick = median(produce_at_rate(bootstrap, create_topic(bootstrap, replication_factor), rate, seconds, "1"))
    topic = create_topic(bootstrap, replication_factor)
    consumed: list[int] = []
    consumer = threading.Thread(target=consume, args=(bootstrap, topic, rate * seconds, consumed))
    consumer.start()
    waits = produce_at_rate(bootstrap, topic, rate, seconds)
    consumer.join()
    assert len(waits) == rate * seconds
    bound = YARDSTICK_FACTOR * yardstick + REPLICATION_ALLOWANCE_S
    print(f"acks=all answered after {median(waits) * 1000:.1f} ms (median), {max(waits) * 1000:.1f} ms (max); "
          f"acks=1 after {yardstick * 1000:.1f} ms (median)")
    assert median(waits) < bound, f"half the records waited more than {median(waits):.2f} s for acks=all, " \
                                  f"acks=1 {yardstick:.3f} s"
    assert max(waits) < ANSWER_BOUND_S, f"a record waited {max(waits):.1f} s for its acknowledgement"
    assert consumed == list(range(rate * seconds))  # every record once, in order


def test_pipelined_acks_all_requests_on_one_node_are_answered_promptly(node):
    check_pipelined_acks_all(node.bootstrap, 1, rate=6000)


def test_pipelined_acks_all_requests_on_three_replicas_do_not_wait_for_each_other(cluster_factory):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    check_pipelined_acks_all(cluster.bootstrap, 3, rate=2000)
