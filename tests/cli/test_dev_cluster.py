"""`odradek dev-cluster`: each node's ports, its metrics.listener among them, and a real run whose nodes all
answer /metrics at the URLs the command prints."""

from __future__ import annotations

import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from odradek.cli import main as cli
from odradek.cli.dev_cluster import METRICS_PORT_OFFSET, REGISTRY_PORT_OFFSET, node_settings
from tests.registry.conftest import wait_until_serving

START_TIMEOUT_S = 90.0


def test_each_node_has_its_metrics_listener_on_its_client_port_plus_1000(tmp_path):
    voter = node_settings(1, 1, tmp_path, 19092)
    broker = node_settings(2, 1, tmp_path, 19092)
    assert voter["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert voter["metrics.listener"] == "http://127.0.0.1:20092"
    assert broker["listeners"] == "PLAINTEXT://127.0.0.1:19094"
    assert broker["metrics.listener"] == "http://127.0.0.1:20094"
    assert METRICS_PORT_OFFSET == 1000


def test_one_metrics_listener_for_every_node_is_refused_before_anything_is_written(tmp_path, capsys):
    directory = tmp_path / "cluster"
    assert cli.main(["dev-cluster", "--dir", str(directory), "--set", "metrics.listener=http://127.0.0.1:9644"]) == 1
    err = capsys.readouterr().err
    assert err == ("error: --set metrics.listener=http://127.0.0.1:9644: each node has its own, on its client port "
                   "+ 1000; --set metrics.listener= turns them off\n")
    assert not directory.exists()


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port(nodes: int) -> int:
    """A base port whose nodes' client, controller, metrics and registry ports are free (below the ephemeral
    range, from 32768)."""
    choice = random.Random()
    while True:
        base = choice.randrange(20000, 30000)
        ports = [base + 2 * i + k for i in range(nodes) for k in (0, 1, METRICS_PORT_OFFSET, REGISTRY_PORT_OFFSET)]
        if all(bindable(port) for port in ports):
            return base


def lines_of(stream) -> queue.Queue:
    """The stream's lines, read by a thread, so that waiting for one can time out."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def node_logs(directory: Path) -> str:
    return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                     for path in sorted(directory.glob("node-*.log")))


def test_dev_cluster_nodes_serve_metrics_at_the_printed_urls(tmp_path):
    directory = tmp_path / "cluster"
    base = free_base_port(2)
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "dev-cluster", "--nodes", "1", "--broker-only", "1",
                             "--dir", str(directory), "--base-port", str(base)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed: list[str] = []
    try:
        lines = lines_of(proc.stdout)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not printed or not printed[-1].startswith("Bootstrap servers:"):
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no bootstrap servers printed: {printed}\n{node_logs(directory)}") from None
            assert line is not None, f"dev-cluster exited: {printed}\n{node_logs(directory)}"
            printed.append(line.rstrip("\n"))
        nodes = [re.fullmatch(r"Node (\d+): 127\.0\.0\.1:(\d+), metrics (http://\S+/metrics), "
                              r"schema registry (http://\S+)", line)
                 for line in printed if line.startswith("Node ")]
        assert [m.groups() for m in nodes if m] == [
            ("1", str(base), f"http://127.0.0.1:{base + 1000}/metrics", f"http://127.0.0.1:{base + 2000}"),
            ("2", str(base + 2), f"http://127.0.0.1:{base + 1002}/metrics", f"http://127.0.0.1:{base + 2002}")], printed
        states = [wait_for_state(match.group(3)) for match in nodes]
        assert states == ["leader", "observer"]  # the voter, then the broker-only node
        for match in nodes:
            wait_until_serving(match.group(4))  # each node's schema registry answers
    finally:
        proc.send_signal(signal.SIGTERM)  # dev-cluster stops its nodes, then exits
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, printed


def wait_for_state(url: str) -> str:
    """The node's metadata quorum role from its /metrics, once it has one other than unattached."""
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = response.read().decode()
        assert "kafka_server_replicamanager_partitioncount " in text
        states = re.findall(r'^kafka_server_raftmetrics_current_state\{state="(\w+)"\} 1$', text, re.MULTILINE)
        if states and states[0] not in ("unattached", "candidate", "prospective") or time.monotonic() > deadline:
            return states[0] if states else ""
        time.sleep(0.2)
