"""librdkafka's default producer (not idempotent: up to a million requests in flight per connection) with
acks=all and linger.ms=0 sends one request per record. Every one must be answered in milliseconds, not
queued behind its predecessors' replication: once each waited for the one before it, and at a few thousand
records a second the answers fell seconds behind (issue 15).

Not a benchmark (benchmarks/latency.py measures), and no fixed time bound: a loaded machine slows every
answer. Two yardsticks run at the same time, under the same load: the same stream with acks=1 (which never
waited for replication) and acks=all records sent one at a time (one replication round trip each, nothing
to wait behind). Pipelined acks=all requests must be answered within a few times the larger of the two
medians:
before the fix half of them waited 2 s (one node, 6,000 records/s) and 5 s (three replicas, 3,000
records/s), each behind the round trips of those before it. Three replicas run at 1,000 records/s: three
node processes on a loaded two-core machine fall behind a faster stream however they pipeline, while
requests that waited for each other's round trips would still fall seconds behind at this rate."""

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REQUEST_TIMEOUT_MS = 30000
ANSWER_BOUND_S = REQUEST_TIMEOUT_MS / 1000 / 3
YARDSTICK_FACTOR = 5  # pipelined acks=all's median within this many yardstick medians, plus SLACK_S
SLACK_S = 0.05


def create_topic(bootstrap: str, replication_factor: int) -> str:
    topic = f"pipelined-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication_factor)])[topic].result(30)
    return topic


def consume(bootstrap: str, topic: str, expected: int, out: list) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 1)])  # after the warm-up record
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


def produce_one_at_a_time(bootstrap: str, topic: str, count: int | None = None,
                          seconds: float | None = None) -> list[float]:
    """Seconds from produce() to acknowledgement of acks=all records sent only once the one before is
    answered: `count` records, or as many as fit in `seconds`."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    waits = []
    deadline = time.monotonic() + (seconds or 0)
    while len(waits) < count if count is not None else time.monotonic() < deadline:
        sent = time.monotonic()
        producer.produce(topic, str(len(waits)).encode(), partition=0)
        assert producer.flush(30) == 0
        waits.append(time.monotonic() - sent)
    return waits


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def in_parallel(**calls) -> dict:
    """Runs the calls at once (each a zero-argument function), so that they see the same load; their results."""
    results, failures = {}, []

    def run(name, call):
        try:
            results[name] = call()
        except BaseException as exc:  # re-raised below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return results


def check_pipelined_acks_all(bootstrap: str, replication_factor: int, rate: int) -> None:
    seconds = 4
    topics = {kind: create_topic(bootstrap, replication_factor) for kind in ("pipelined", "acks=1", "one at a time")}
    for topic in topics.values():
        produce_one_at_a_time(bootstrap, topic, 1)  # the followers of a new topic are replicating from here on
    consumed: list[int] = []
    waits = in_parallel(
        pipelined=lambda: produce_at_rate(bootstrap, topics["pipelined"], rate, seconds),
        acks_one=lambda: produce_at_rate(bootstrap, topics["acks=1"], rate, seconds, "1"),
        round_trip=lambda: produce_one_at_a_time(bootstrap, topics["one at a time"], seconds=seconds),
        consumed=lambda: consume(bootstrap, topics["pipelined"], rate * seconds, consumed))
    pipelined, acks_one, round_trip = median(waits["pipelined"]), median(waits["acks_one"]), median(waits["round_trip"])
    assert len(waits["pipelined"]) == rate * seconds
    bound = YARDSTICK_FACTOR * max(acks_one, round_trip) + SLACK_S
    print(f"pipelined acks=all answered after {pipelined * 1000:.1f} ms (median), "
          f"{max(waits['pipelined']) * 1000:.1f} ms (max); at the same time acks=1 after {acks_one * 1000:.1f} ms, "
          f"one at a time {round_trip * 1000:.1f} ms (medians)")
    assert pipelined < bound, f"half the records waited more than {pipelined:.2f} s for acks=all; at the same " \
                              f"time acks=1 {acks_one:.3f} s, one at a time {round_trip:.3f} s"
    assert max(waits["pipelined"]) < ANSWER_BOUND_S, f"a record waited {max(waits['pipelined']):.1f} s"
    assert consumed == list(range(rate * seconds))  # every record once, in order


def test_pipelined_acks_all_requests_on_one_node_are_answered_promptly(node):
    check_pipelined_acks_all(node.bootstrap, 1, rate=6000)


def test_pipelined_acks_all_requests_on_three_replicas_do_not_wait_for_each_other(cluster_factory):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    check_pipelined_acks_all(cluster.bootstrap, 3, rate=1000)
