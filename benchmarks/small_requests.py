"""Small requests: one record per produce request, and reading a log of one-record batches, side by side.

    .venv/bin/python benchmarks/small_requests.py [--brokers odradek kafka] [--records 100000] [--runs 3]

benchmarks/rdkafka_load (native librdkafka, built by `make bench`) produces --records 100 B records to one
partition with `batch.num.messages=1` and `linger.ms=0` (so every produce request carries one record;
librdkafka's default producer, not idempotent, pipelines them), with acks=1 and with acks=all, and reads
back the acks=1 topic, a log of one-record batches, from the beginning (`fetch.wait.max.ms=20`). The
timings are the load generator's own, from its first record to its last acknowledged or read one. All
brokers run at once and the runs are interleaved, each starting once all brokers are quiet; each broker first takes one unmeasured round (Kafka's JVM
compiles its hot paths then). Reports medians, and the ratio to the last broker listed (above 1 is faster).
"""

import argparse
import os
import statistics
import subprocess
import sys
import uuid

from brokers import BROKERS, running, settle
from throughput import RDKAFKA_LOAD, create_topic

ONE_RECORD_PER_REQUEST = ["linger.ms=0", "batch.num.messages=1"]


def timed(command: list[str]) -> float:
    """The seconds rdkafka_load reports."""
    return float(subprocess.run(command, check=True, capture_output=True, text=True, timeout=600).stdout.split()[-1])


def one_round(bootstrap: str, records: int, brokers) -> dict[str, float]:
    """{row: records per second} for one round on one broker; each load starts once `brokers` are quiet."""
    rates = {}
    topics = {}
    for acks in ("1", "all"):
        topic = topics[acks] = f"small-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 1)
        settle(brokers)
        seconds = timed([RDKAFKA_LOAD, "produce", bootstrap, topic, str(records), "100", f"acks={acks}",
                         *ONE_RECORD_PER_REQUEST])
        rates[f"produce, one record per request, acks={acks} (requests/s)"] = records / seconds
    settle(brokers)
    seconds = timed([RDKAFKA_LOAD, "consume", bootstrap, topics["1"], str(records)])
    rates[f"consume {records:,} one-record batches (records/s)"] = records / seconds
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=["odradek", "kafka"])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not os.path.exists(RDKAFKA_LOAD):
        sys.exit("benchmarks/rdkafka_load is missing: `make bench` builds it")

    with running(args.brokers) as brokers:
        for broker in brokers.values():  # warm-up, not measured
            one_round(broker.bootstrap, args.records, brokers.values())
        rounds = {name: [] for name in brokers}
        for _ in range(args.runs):
            for name, broker in brokers.items():
                rounds[name].append(one_round(broker.bootstrap, args.records, brokers.values()))

    base = args.brokers[-1]
    medians = {name: {row: statistics.median(r[row] for r in results) for row in results[0]}
               for name, results in rounds.items()}
    print(f"100 B records, one partition, median of {args.runs} interleaved runs; x = the rate / {base}'s")
    print()
    print("| load | " + " | ".join(f"{name} | x" for name in brokers) + " |")
    print("| --- |" + " --- | --- |" * len(brokers))
    for row in medians[base]:
        cells = [f"{medians[name][row]:,.0f} | {medians[name][row] / medians[base][row]:.2f}" for name in brokers]
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
