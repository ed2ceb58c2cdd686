"""The web console at size: its pages on a large topic, and whether browsing disturbs producers.

    .venv/bin/python benchmarks/console.py [--gib 10] [--partitions 4] [--value-bytes 1000] [--runs 5]
        [--rate 5000] [--seconds 20] [--rounds 3] [--pause 0]

One Odradek node with `metrics.listener` (so it serves the console) and, next to it, `odradek console` as a
process of its own against the same node.

- pages: --gib GiB of records are written to one topic of --partitions partitions (rdkafka_load, values of
  --value-bytes); then each console page is fetched --runs times from the node's console, one request at a
  time: the overview, the topics list, the topic, the message browser newest first over all partitions, from
  an offset in the middle of partition 0, from a time in the middle, a substring filter nothing matches (the
  scan stops at the console's budget), and the JSON API of a page. Median and slowest seconds, and the size of
  the answer.
- disturbance: a producer at --rate records/s (acks=all, linger.ms=0, 100 B) with its consumer measures
  end-to-end latency for --seconds (rdkafka_load latency) with nobody browsing, while a loop fetches message
  pages from the node's own console (back to back, or --pause seconds apart, as a person clicks), and while it
  does the same from the separate console process; --rounds rounds, interleaved. Reports each setting's median p50 and p99 and the pages fetched per
  second.

Nothing here is part of `make test`; figures go to BENCHMARKS.md.
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

from brokers import Odradek, free_port, settle
from throughput import RDKAFKA_LOAD, create_topic

GIB = 2**30


def fetch(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started, len(body)


def fill(bootstrap: str, topic: str, partitions: int, gib: float, value_bytes: int) -> float:
    """Writes the topic; returns the seconds it took."""
    create_topic(bootstrap, topic, partitions)
    records = int(gib * GIB) // value_bytes
    started = time.perf_counter()
    subprocess.run([RDKAFKA_LOAD, "produce", bootstrap, topic, str(records), str(value_bytes)], check=True,
                   stdout=subprocess.DEVNULL, timeout=7200)
    return time.perf_counter() - started


def middle_offset_and_time(bootstrap: str, topic: str) -> tuple[int, str]:
    """Partition 0's middle offset, and the timestamp of the record there (ISO 8601, UTC)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-console", "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    middle = (low + high) // 2
    consumer.assign([TopicPartition(topic, 0, middle)])
    message = None
    deadline = time.monotonic() + 60
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(1)
    consumer.close()
    if message is None or message.error():
        raise RuntimeError(f"could not read partition 0 at {middle}")
    ms = message.timestamp()[1]
    return middle, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def page_figures(base: str, topic: str, middle: int, middle_time: str, runs: int) -> list[tuple[str, float, float, int]]:
    pages = [
        ("overview", "/"),
        ("topics list", "/topics"),
        ("topic (partitions, configs)", f"/topics/{topic}"),
        ("messages, newest first, all partitions", f"/topics/{topic}/messages"),
        ("messages from the middle offset of partition 0",
         f"/topics/{topic}/messages?partition=0&start=offset&offset={middle}"),
        ("messages from the middle time", f"/topics/{topic}/messages?start=timestamp&timestamp={middle_time}"),
        ("substring filter matching nothing", f"/topics/{topic}/messages?q=no-such-value"),
        ("JSON API, newest first", f"/api/topics/{topic}/messages"),
    ]
    results = []
    for name, path in pages:
        fetch(base + path)  # the clients and caches the page uses are made on first use
        times, sizes = [], []
        for _ in range(runs):
            seconds, size = fetch(base + path)
            times.append(seconds)
            sizes.append(size)
        results.append((name, statistics.median(times), max(times), sizes[-1]))
        print(f"  {name}: median {statistics.median(times):.3f} s, slowest {max(times):.3f} s, "
              f"{sizes[-1]:,} bytes", flush=True)
    return results


def latency(bootstrap: str, rate: int, seconds: float) -> tuple[float, float]:
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    run = subprocess.run([RDKAFKA_LOAD, "latency", bootstrap, topic, str(rate), str(seconds), "100",
                          "enable.idempotence=false", "linger.ms=0"], capture_output=True, text=True,
                         timeout=seconds + 300)
    if run.returncode != 0:
        raise RuntimeError(f"rdkafka_load latency: {run.stderr.strip()[-500:]}")
    _, p50, p99, _, _ = (float(f) for f in run.stdout.split())
    return p50, p99


def browse_while(base: str, topic: str, middle: int, pause: float, stop: threading.Event,
                 counter: list[int]) -> None:
    paths = [f"/topics/{topic}/messages", f"/topics/{topic}/messages?partition=0&start=offset&offset={middle}",
             f"/api/topics/{topic}/messages?partition=1"]
    i = 0
    while not stop.is_set():
        fetch(base + paths[i % len(paths)])
        counter[0] += 1
        i += 1
        stop.wait(pause)


def disturbance(node: Odradek, consoles: dict[str, str], topic: str, middle: int, rate: int, seconds: float,
                rounds: int, pause: float) -> dict[str, list[tuple[float, float, float]]]:
    figures: dict[str, list[tuple[float, float, float]]] = {"nobody browsing": []}
    figures.update({f"browsing the {name}": [] for name in consoles})
    for round_ in range(rounds):
        for setting in figures:
            settle([node])
            stop, counter = threading.Event(), [0]
            browser = None
            if setting != "nobody browsing":
                base = consoles[setting.removeprefix("browsing the ")]
                browser = threading.Thread(target=browse_while, args=(base, topic, middle, pause, stop, counter))
                browser.start()
            started = time.perf_counter()
            try:
                p50, p99 = latency(node.bootstrap, rate, seconds)
            finally:
                stop.set()
                if browser is not None:
                    browser.join()
            pages_per_s = counter[0] / (time.perf_counter() - started)
            figures[setting].append((p50, p99, pages_per_s))
            print(f"  round {round_ + 1}, {setting}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
                  f"{pages_per_s:.1f} pages/s", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between the browsing loop's pages")
    args = parser.parse_args()
    if not os.path.exists(RDKAFKA_LOAD):
        sys.exit("benchmarks/rdkafka_load is missing: `make bench` builds it")

    http_port = free_port()
    node = Odradek({"metrics.listener": f"http://127.0.0.1:{http_port}"})
    standalone_port = free_port()
    standalone = subprocess.Popen([sys.executable, "-m", "odradek", "console", "--bootstrap-server", node.bootstrap,
                                   "--listen", f"http://127.0.0.1:{standalone_port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    consoles = {"node's console": f"http://127.0.0.1:{http_port}",
                "separate console process": f"http://127.0.0.1:{standalone_port}"}
    try:
        topic = "big"
        print(f"writing {args.gib:g} GiB to {topic} ({args.partitions} partitions, {args.value_bytes} B values)",
              flush=True)
        took = fill(node.bootstrap, topic, args.partitions, args.gib, args.value_bytes)
        print(f"  written in {took:.0f} s", flush=True)
        middle, middle_time = middle_offset_and_time(node.bootstrap, topic)
        settle([node], at_most_s=120)
        print("pages of the node's console:", flush=True)
        pages = page_figures(consoles["node's console"], topic, middle, middle_time, args.runs)
        print(f"producer latency at {args.rate:,} records/s:", flush=True)
        latencies = disturbance(node, consoles, topic, middle, args.rate, args.seconds, args.rounds,
                                args.pause)

        print(f"\n{args.gib:g} GiB in {args.partitions} partitions, {args.value_bytes} B values\n")
        print("| page | median s | slowest s | answer bytes |\n| --- | --- | --- | --- |")
        for name, median, slowest, size in pages:
            print(f"| {name} | {median:.3f} | {slowest:.3f} | {size:,} |")
        print(f"\n| producer at {args.rate:,}/s, acks=all | p50 ms | p99 ms | p99 range ms | pages/s browsed |")
        print("| --- | --- | --- | --- | --- |")
        for setting, runs in latencies.items():
            p50 = statistics.median(r[0] for r in runs)
            p99s = [r[1] for r in runs]
            pages_per_s = statistics.median(r[2] for r in runs)
            print(f"| {setting} | {p50:.2f} | {statistics.median(p99s):.2f} | {min(p99s):.2f}–{max(p99s):.2f} | "
                  f"{pages_per_s:.1f} |")
    finally:
        standalone.terminate()
        standalone.wait(30)
        node.stop()


if __name__ == "__main__":
    main()
