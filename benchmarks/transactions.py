"""What transactions cost: records/s and commit latency of a transactional producer against a plain
idempotent one, on one Odradek node.

    .venv/bin/python benchmarks/transactions.py [--records 200000] [--per-transaction 100 1000 10000]
        [--value-bytes 100] [--runs 3]

A confluent-kafka producer (acks=all, idempotent) writes --records records of --value-bytes to one partition:
once without transactions, then with transactions of each --per-transaction size (begin, produce, commit).
Reports medians over --runs of records/s and of the commit_transaction() time (p50, p99 over the commits of a
run), and checks a read_committed read-back count so a broken run cannot look fast.
"""

import argparse
import statistics
import time
import uuid

from brokers import BROKERS
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def new_topic(bootstrap: str) -> str:
    topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    return topic


def plain(bootstrap: str, topic: str, records: int, value: bytes) -> tuple[float, list[float]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    producer.list_topics(topic, timeout=30)  # connected, as init_transactions leaves the other mode
    started = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.monotonic() - started, []


def transactional(bootstrap: str, topic: str, records: int, value: bytes, per_txn: int) -> tuple[float, list[float]]:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(30)
    commits = []
    started = time.monotonic()
    for first in range(0, records, per_txn):
        producer.begin_transaction()
        for _ in range(min(per_txn, records - first)):
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        committing = time.monotonic()
        producer.commit_transaction(60)
        commits.append((time.monotonic() - committing) * 1000)
    return time.monotonic() - started, commits


def committed_count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    count = 0
    try:
        while True:
            messages = consumer.consume(10000, 10.0)
            if not messages:
                raise RuntimeError("read-back stalled")
            for message in messages:
                if message.error() is None:
                    count += 1
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return count
                else:
                    raise RuntimeError(message.error().str())
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--per-transaction", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    value = b"x" * args.value_bytes
    broker = BROKERS["odradek"]()
    try:
        bootstrap = broker.bootstrap
        print(f"{args.records} records of {args.value_bytes} B, one partition, medians of {args.runs} runs")
        print(f"{'mode':<22} {'records/s':>10} {'commit p50 ms':>14} {'commit p99 ms':>14}")
        modes = [("idempotent, no txn", None)] + [(f"{n} per transaction", n) for n in args.per_transaction]
        for label, per_txn in modes:
            rates, p50s, p99s = [], [], []
            for _ in range(args.runs):
                topic = new_topic(bootstrap)
                if per_txn is None:
                    seconds, commits = plain(bootstrap, topic, args.records, value)
                else:
                    seconds, commits = transactional(bootstrap, topic, args.records, value, per_txn)
                got = committed_count(bootstrap, topic)
                if got != args.records:
                    raise RuntimeError(f"{label}: read back {got} committed records, not {args.records}")
                rates.append(args.records / seconds)
                if commits:
                    ordered = sorted(commits)
                    p50s.append(ordered[len(ordered) // 2])
                    p99s.append(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))])
            p50 = f"{statistics.median(p50s):.1f}" if p50s else "-"
            p99 = f"{statistics.median(p99s):.1f}" if p99s else "-"
            print(f"{label:<22} {statistics.median(rates):>10,.0f} {p50:>14} {p99:>14}")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
