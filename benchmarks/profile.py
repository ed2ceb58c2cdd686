"""Where an Odradek node spends its time under load: py-spy samples the node while kcat produces, then consumes.

    .venv/bin/python benchmarks/profile.py [--records 2000000] [--value-bytes 100] [--partitions 4] [--top 15]
    .venv/bin/python benchmarks/profile.py --small-requests 5000 [--seconds 5]

With --small-requests RATE it samples the small-request path instead: benchmarks/rdkafka_load's latency load
(acks=all, linger.ms=0, librdkafka's default producer, not idempotent, so one record per request, pipelined)
at RATE records/s to one partition, with its consumer reading along; it prints the load's latency line too.

For each phase prints the functions with the most samples on top of the stack ("self"), as a share of the
node's busy samples (py-spy leaves out threads waiting in a system call, such as the event loop in epoll).
py-spy attaches to the running node (ptrace: root, or kernel.yama.ptrace_scope=0); `make bench` installs it
with the `bench` extra.
"""

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from brokers import Odradek
from throughput import CONSUMER_FETCH_WAIT_MS, RDKAFKA_LOAD, create_topic, records_file

PY_SPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")


def sample(pid: int, out: str, command: list[str]) -> str:
    """Run `command` while py-spy records the node's stacks into `out` (collapsed-stack format); returns what
    the command printed."""
    spy = subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--function",
                            "--output", out, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches
    printed = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    spy.send_signal(signal.SIGINT)
    _, err = spy.communicate(timeout=60)
    if not os.path.exists(out):
        sys.exit(f"py-spy wrote no profile: {err.decode(errors='replace').strip()}")
    return printed


def summarize(path: str, top: int) -> list[str]:
    self_samples: collections.Counter = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            total += int(count)
            self_samples[stack.split(";")[-1]] += int(count)
    lines = [f"{total} busy samples at 200 Hz", "", "| self % | function |", "| --- | --- |"]
    for frame, count in self_samples.most_common(top):
        lines.append(f"| {100 * count / max(1, total):.1f} | `{frame}` |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--small-requests", type=int, metavar="RATE", help="profile one-record acks=all requests")
    parser.add_argument("--seconds", type=float, default=5.0, help="of the --small-requests load")
    args = parser.parse_args()
    if shutil.which("kcat") is None or PY_SPY is None:
        sys.exit("kcat and py-spy are needed: `make test` installs kcat, `make bench` py-spy")
    if args.small_requests and not os.path.exists(RDKAFKA_LOAD):
        sys.exit("benchmarks/rdkafka_load is missing: `make bench` builds it")
    node = Odradek()
    path = None if args.small_requests else records_file(args.records, args.value_bytes)
    workdir = tempfile.mkdtemp(prefix="odradek-profile-")
    try:
        topic = f"profile-{uuid.uuid4().hex[:8]}"
        create_topic(node.bootstrap, topic, 1 if args.small_requests else args.partitions)
        if args.small_requests:
            phases = {"one-record requests": [
                RDKAFKA_LOAD, "latency", node.bootstrap, topic, str(args.small_requests), str(args.seconds),
                str(args.value_bytes), "enable.idempotence=false", "linger.ms=0"]}
            print(f"acks=all, one record per request, {args.small_requests:,} records/s for {args.seconds:g} s")
        else:
            phases = {
                "produce": ["kcat", "-P", "-b", node.bootstrap, "-t", topic, "-l", "-X", "acks=1", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", path],
                "consume": ["kcat", "-C", "-b", node.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                            "-X", f"fetch.wait.max.ms={CONSUMER_FETCH_WAIT_MS}"],
            }
            print(f"{args.records:,} × {args.value_bytes} B records, {args.partitions} partitions, acks=1")
        for phase, command in phases.items():
            out = os.path.join(workdir, f"{phase}.txt")
            printed = sample(node.proc.pid, out, command)
            print(f"\n### {phase}\n")
            if args.small_requests:
                print("achieved records/s, p50, p99, p99.9, max ms: " + printed.strip() + "\n")
            print("\n".join(summarize(out, args.top)))
    finally:
        node.stop()
        if path:
            os.unlink(path)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
