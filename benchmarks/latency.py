"""End-to-end latency at fixed rates: produce (acks=all) to consume, p50 / p99 / p99.9, side by side.

    .venv/bin/python benchmarks/latency.py [--brokers odradek tansu noida-db] [--rates 1000 10000]
        [--seconds 10] [--value-bytes 100] [--runs 3]

A producer process (confluent-kafka, acks=all, linger.ms=0) sends records at a fixed rate, each carrying its
send time (CLOCK_MONOTONIC, shared by all processes); a consumer process reads them as they arrive and
records arrival minus send time. The first second is warm-up and not counted. Reports medians over --runs
runs of each percentile, and the rate actually achieved.
"""

import argparse
import multiprocessing
import statistics
import struct
import sys
import time
import uuid

from brokers import BROKERS, Broker
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

WARMUP_S = 1.0
STAMP = struct.Struct(">q")


def consume(bootstrap: str, topic: str, expected: int, ready, results) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)  # connected and fetching before the producer starts
    ready.set()
    latencies, received = [], 0
    deadline = time.monotonic() + 120
    while received < expected and time.monotonic() < deadline:
        message = consumer.poll(0.1)  # returns at the first record (consume() would wait for a full batch)
        now = time.monotonic_ns()
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(message.error().str())
            continue
        received += 1
        sent = STAMP.unpack_from(message.value())[0]
        if sent >= 0:
            latencies.append((now - sent) / 1e6)
    consumer.close()
    results.put((received, latencies))


def produce(bootstrap: str, topic: str, rate: int, seconds: float, value_bytes: int) -> tuple[int, float]:
    """Send rate × (warm-up + seconds) records on schedule; warm-up records carry -1 instead of a send time."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True})
    padding = b"x" * max(0, value_bytes - STAMP.size)
    total = int(rate * (WARMUP_S + seconds))
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0.0005:
            time.sleep(delay)
        producer.poll(0)
        warm = i < rate * WARMUP_S
        producer.produce(topic, STAMP.pack(-1 if warm else time.monotonic_ns()) + padding, partition=0)
    producer.flush(60)
    return total, total / (time.monotonic() - start)


def one_run(bootstrap: str, rate: int, seconds: float, value_bytes: int) -> tuple[list[float], float]:
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    total = int(rate * (WARMUP_S + seconds))
    ready, results = multiprocessing.Event(), multiprocessing.Queue()
    consumer = multiprocessing.Process(target=consume, args=(bootstrap, topic, total, ready, results))
    consumer.start()
    ready.wait(30)
    _, achieved = produce(bootstrap, topic, rate, seconds, value_bytes)
    received, latencies = results.get(timeout=180)
    consumer.join()
    if received != total:
        raise RuntimeError(f"received {received} of {total} records")
    return latencies, achieved


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=list(BROKERS))
    parser.add_argument("--rates", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    print(f"acks=all, {args.value_bytes} B records, {args.seconds:g} s per run after {WARMUP_S:g} s warm-up, "
          f"median of {args.runs} runs")
    print("| broker | rate/s | achieved/s | p50 ms | p99 ms | p99.9 ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.brokers:
        broker: Broker = BROKERS[name]()  # one at a time: brokers never share the cores
        try:
            for rate in args.rates:
                try:
                    runs = [one_run(broker.bootstrap, rate, args.seconds, args.value_bytes) for _ in range(args.runs)]
                except Exception as e:  # a broker the client cannot use is a finding, not a crash
                    print(f"| {name} | {rate} | not measured: {e} | | | |", flush=True)
                    continue
                p50, p99, p999 = (statistics.median(percentile(lat, q) for lat, _ in runs) for q in (0.5, 0.99, 0.999))
                achieved = statistics.median(a for _, a in runs)
                print(f"| {name} | {rate:,} | {achieved:,.0f} | {p50:.2f} | {p99:.2f} | {p999:.2f} |", flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
