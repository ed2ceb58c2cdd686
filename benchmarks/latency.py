"""End-to-end latency at fixed rates, acks=all, Odradek and Apache Kafka 4.0 side by side in the same run.

    .venv/bin/python benchmarks/latency.py [--brokers odradek kafka] [--rates 1000 5000 10000 20000 50000]
        [--producers plain-0 plain-5 idempotent-0 idempotent-5] [--seconds 5] [--value-bytes 100] [--runs 3]

benchmarks/rdkafka_load (native librdkafka, built by `make bench`) sends records to one partition at a fixed
rate, each carrying its send time, while its consumer thread reads them as they arrive (`fetch.wait.max.ms=100`)
and records arrival minus send time; the first second is warm-up and not counted. A producer is `plain`
(librdkafka's default: not idempotent, so it pipelines up to a million requests per connection) or
`idempotent` (at most 5 requests in flight), with linger.ms 0 or 5. All brokers run at once, each on a fresh
topic per run, and the runs are interleaved (broker A, broker B, A, B, ...), each starting once all brokers
are quiet, so a disturbance of the machine hits all of them alike. Before measuring, every broker takes one unmeasured run (Kafka's JVM compiles its
hot paths then). Reports medians over --runs of each percentile and of the rate achieved, and p99 as a ratio
to the last broker listed (Kafka by default; below 1 is faster).
"""

import argparse
import os
import statistics
import subprocess
import sys
import uuid

from brokers import BROKERS, running, settle
from throughput import RDKAFKA_LOAD, create_topic

PRODUCERS = {
    "plain-0": ["enable.idempotence=false", "linger.ms=0"],
    "plain-5": ["enable.idempotence=false", "linger.ms=5"],
    "idempotent-0": ["enable.idempotence=true", "linger.ms=0"],
    "idempotent-5": ["enable.idempotence=true", "linger.ms=5"],
}


def one_run(bootstrap: str, rate: int, seconds: float, value_bytes: int, producer: str,
            brokers) -> tuple[float, ...] | str:
    """(achieved records/s, p50, p99, p99.9, max ms), or why the run failed; it starts once `brokers` are quiet."""
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    settle(brokers)
    run = subprocess.run([RDKAFKA_LOAD, "latency", bootstrap, topic, str(rate), str(seconds), str(value_bytes),
                          *PRODUCERS[producer]], capture_output=True, text=True,
                         timeout=seconds + 300)
    if run.returncode != 0:
        return run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit code {run.returncode}"
    return tuple(float(field) for field in run.stdout.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=["odradek", "kafka"])
    parser.add_argument("--rates", type=int, nargs="+", default=[1000, 5000, 10000, 20000, 50000])
    parser.add_argument("--producers", nargs="+", choices=list(PRODUCERS), default=list(PRODUCERS))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not os.path.exists(RDKAFKA_LOAD):
        sys.exit("benchmarks/rdkafka_load is missing: `make bench` builds it")

    with running(args.brokers) as brokers:
        for broker in brokers.values():  # warm-up, not measured
            one_run(broker.bootstrap, 10000, args.seconds, args.value_bytes, "plain-0", brokers.values())
        base = args.brokers[-1]
        print(f"acks=all, one partition, {args.value_bytes} B records, {args.seconds:g} s per run after 1 s of "
              f"warm-up, median of {args.runs} interleaved runs (p99 range: lowest and highest p99 of the runs); "
              f"x = p99 / {base}'s p99")
        print()
        print("| producer | rate/s | broker | achieved/s | p50 ms | p99 ms | p99 range ms | p99.9 ms | max ms | x |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for producer in args.producers:
            for rate in args.rates:
                runs = {name: [] for name in brokers}
                for _ in range(args.runs):
                    for name, broker in brokers.items():
                        runs[name].append(one_run(broker.bootstrap, rate, args.seconds, args.value_bytes, producer,
                                                  brokers.values()))
                medians = {}
                for name, results in runs.items():
                    good = [r for r in results if not isinstance(r, str)]
                    if len(good) == len(results):
                        medians[name] = [statistics.median(column) for column in zip(*good, strict=True)]
                for name, results in runs.items():
                    if name not in medians:
                        failure = next(r for r in results if isinstance(r, str))
                        print(f"| {producer} | {rate:,} | {name} | failed: {failure} | | | | | | |", flush=True)
                        continue
                    achieved, p50, p99, p999, worst = medians[name]
                    ratio = f"{p99 / medians[base][2]:.2f}" if base in medians else ""
                    p99s = [result[2] for result in results]
                    print(f"| {producer} | {rate:,} | {name} | {achieved:,.0f} | {p50:.2f} | {p99:.2f} "
                          f"| {min(p99s):.2f}–{max(p99s):.2f} | {p999:.2f} | {worst:.2f} | {ratio} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
