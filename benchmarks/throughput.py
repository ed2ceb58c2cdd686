"""Produce and consume throughput of a node, loaded by kcat (librdkafka) so the load generator is native code.

    .venv/bin/python benchmarks/throughput.py [--records 1000000] [--value-bytes 100 1024] [--partitions 1 4]
                                              [--acks 1 all] [--runs 3]

For each combination: a fresh topic; `kcat -P -l` sends the records from a file (one record per line), then
`kcat -C -e` reads them all back. Reports the median records/s and MB/s of --runs runs, and the node's CPU
seconds (user + system, from /proc) per run. Starts its own throwaway node unless --bootstrap-server is given.
"""

import argparse
import itertools
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """A throwaway `odradek server` on a free port."""

    def __init__(self):
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="odradek-bench-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "server", "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
             "--set", f"log.dirs={self.data}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("node did not start")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.data, ignore_errors=True)


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


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


@dataclass
class Run:
    produce_s: float
    consume_s: float
    produce_cpu_s: float
    consume_cpu_s: float


def one_run(node: Node | None, bootstrap: str, path: str, partitions: int, acks: str, count: int) -> Run:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    cpu = node.cpu_seconds() if node else 0.0
    start = time.perf_counter()
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", "-X", f"acks={acks}",
                    "-X", "linger.ms=5", "-X", "batch.size=1000000", "-X", "compression.codec=none", path],
                   check=True)
    produce_s = time.perf_counter() - start
    produce_cpu = (node.cpu_seconds() - cpu) if node else 0.0
    cpu = node.cpu_seconds() if node else 0.0
    start = time.perf_counter()
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "\n"],
                         check=True, stdout=subprocess.PIPE).stdout
    consume_s = time.perf_counter() - start
    consume_cpu = (node.cpu_seconds() - cpu) if node else 0.0
    consumed = out.count(b"\n")
    if consumed != count:
        raise RuntimeError(f"consumed {consumed} records, produced {count}")
    return Run(produce_s, consume_s, produce_cpu, consume_cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--acks", nargs="+", default=["1", "all"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        sys.exit("kcat is not installed: `make test` installs it (apt-get install kcat)")

    node = None if args.bootstrap_server else Node()
    bootstrap = args.bootstrap_server or node.bootstrap
    print(f"{args.records:,} records per run, median of {args.runs} runs, broker {bootstrap}")
    print("| value | partitions | acks | produce rec/s | produce MB/s | node CPU s | consume rec/s | consume MB/s "
          "| node CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for value_bytes in args.value_bytes:
            path = records_file(args.records, value_bytes)
            try:
                for partitions, acks in itertools.product(args.partitions, args.acks):
                    runs = [one_run(node, bootstrap, path, partitions, acks, args.records) for _ in range(args.runs)]
                    produce = statistics.median(r.produce_s for r in runs)
                    consume = statistics.median(r.consume_s for r in runs)
                    mb = args.records * value_bytes / 1e6
                    print(f"| {value_bytes} B | {partitions} | {acks} "
                          f"| {args.records / produce:,.0f} | {mb / produce:,.1f} "
                          f"| {statistics.median(r.produce_cpu_s for r in runs):.2f} "
                          f"| {args.records / consume:,.0f} | {mb / consume:,.1f} "
                          f"| {statistics.median(r.consume_cpu_s for r in runs):.2f} |", flush=True)
            finally:
                os.unlink(path)
    finally:
        if node:
            node.stop()


if __name__ == "__main__":
    main()
