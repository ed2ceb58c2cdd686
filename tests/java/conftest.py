"""Fixtures of the Java ecosystem tests: Kafka 4.0's own tools, run against Odradek nodes.

`KAFKA_TOOLS_TARGET=reference` runs the tool tests against the reference Kafka 4.0 (one broker, or a cluster of
three) instead of Odradek nodes: they assert Kafka's behaviour, so there they all pass.
"""

import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import FAST_CLUSTER_SETTINGS, Cluster, NodeProcess, free_port
from tests.java.tool_shell import KafkaTools
from tests.reference_kafka import KAFKA_BIN, ReferenceBroker, java_env

# Settings of the broker under test: groups start at once instead of waiting 3 s for more members.
TOOLS_BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="session")
def kafka_tools(tmp_path_factory):
    """Kafka's command-line tools: kafka_tools.run("kafka-topics", "--bootstrap-server", ..., "--list").
    Test modules using it carry the `requires_reference` mark (they skip without Kafka 4.0 or java)."""
    tools = KafkaTools(tmp_path_factory.mktemp("kafka-tools"))
    yield tools
    tools.close()


@dataclass(frozen=True)
class ToolsBroker:
    """The single broker (node id 1, also the metadata quorum's only voter) that a module's tools talk to."""

    kind: str                   # "odradek", or "kafka" with KAFKA_TOOLS_TARGET=reference
    bootstrap: str
    controller_bootstrap: str   # its CONTROLLER listener, for --bootstrap-controller
    log_dirs: tuple[Path, ...]  # where its partition directories are

    @property
    def log_dir(self) -> Path:
        return self.log_dirs[0]


def _two_free_ports() -> tuple[int, int]:
    """A port and the one after it (the reference broker puts its controller on PORT+1)."""
    while True:
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port, port + 1


@contextmanager
def running_tools_broker(directory: Path, log_dir_count: int = 1, settings: dict[str, str] | None = None):
    """Starts the broker under test (Odradek, or Kafka with KAFKA_TOOLS_TARGET=reference) and stops it after;
    `settings` are more broker settings, by Kafka's names."""
    extra = dict(settings or {})
    directory.mkdir(parents=True, exist_ok=True)
    port, controller_port = _two_free_ports()
    log_dirs = tuple(directory / f"data-{i}" for i in range(log_dir_count)) if log_dir_count > 1 else (
        directory / "data",)
    if os.environ.get("KAFKA_TOOLS_TARGET") == "reference":
        settings = {**TOOLS_BROKER_SETTINGS, **({"log.dirs": ",".join(map(str, log_dirs))} if log_dir_count > 1 else {})}
        broker = ReferenceBroker(directory, port, {**settings, **extra}).start()
        try:
            yield ToolsBroker("kafka", broker.bootstrap, broker.controller_bootstrap, log_dirs)
        finally:
            broker.stop()
        return
    node = NodeProcess(log_dirs[0], port=port, settings={
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "log.dirs": ",".join(map(str, log_dirs)),
        **TOOLS_BROKER_SETTINGS,
        **extra,
    }).start()
    try:
        yield ToolsBroker("odradek", node.bootstrap, f"127.0.0.1:{controller_port}", log_dirs)
    finally:
        node.stop()


@pytest.fixture(scope="module")
def tools_broker(tmp_path_factory):
    """One broker for a test module, with a CONTROLLER listener reachable with --bootstrap-controller."""
    with running_tools_broker(tmp_path_factory.mktemp("tools-broker")) as broker:
        yield broker


@pytest.fixture
def two_dir_broker(tmp_path):
    """A broker of its own with two log dirs, for moves of replicas between them."""
    with running_tools_broker(tmp_path / "two-dirs", log_dir_count=2) as broker:
        yield broker


@pytest.fixture(scope="module")
def tools_cluster(tmp_path_factory):
    """Three Odradek nodes (each a broker and a voter) for a test module. Leaders stay where elections put
    them (no automatic rebalance), so a test can watch kafka-leader-election move them back."""
    settings = {**TOOLS_BROKER_SETTINGS, "auto.leader.rebalance.enable": "false"}
    if os.environ.get("KAFKA_TOOLS_TARGET") == "reference":
        cluster = ReferenceCluster(tmp_path_factory.mktemp("tools-cluster"), 3,
                                   {**FAST_CLUSTER_SETTINGS, **settings}).start()
    else:
        cluster = Cluster(tmp_path_factory.mktemp("tools-cluster"), 3, settings).start()
    yield cluster
    cluster.stop()


class ReferenceNode:
    """One Kafka 4.0 process of a ReferenceCluster, shaped like tests.conftest.NodeProcess."""

    def __init__(self, directory: Path, node_id: int, port: int, controller_port: int, voters: str,
                 settings: dict[str, str]):
        self.directory = directory
        self.port = port
        self.settings = {
            "process.roles": "broker,controller", "node.id": str(node_id), "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}", "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(directory / "data"), **settings}
        self.properties = directory / "server.properties"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def format(self, cluster_id: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        subprocess.run([str(KAFKA_BIN / "kafka-storage.sh"), "format", "-t", cluster_id, "-c", str(self.properties)],
                       check=True, capture_output=True, timeout=120, env=self._env())

    def _env(self) -> dict[str, str]:
        return java_env(LOG_DIR=str(self.directory / "logs"), KAFKA_HEAP_OPTS="-Xmx512M")

    def spawn(self) -> "ReferenceNode":
        with open(self.directory / "broker.out", "ab") as out:
            self.proc = subprocess.Popen([str(KAFKA_BIN / "kafka-server-start.sh"), str(self.properties)],
                                         stdout=out, stderr=subprocess.STDOUT, env=self._env(),
                                         start_new_session=True)
        return self

    def wait_listening(self, timeout: float = 120.0) -> "ReferenceNode":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"Kafka node exited; see {self.directory / 'broker.out'}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"Kafka node did not listen within {timeout}s")

    def start(self) -> "ReferenceNode":
        return self.spawn().wait_listening()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class ReferenceCluster:
    """Three Kafka 4.0 nodes (each a broker and a static voter), shaped like tests.conftest.Cluster: what the
    cluster tool tests run against with KAFKA_TOOLS_TARGET=reference."""

    def __init__(self, directory: Path, count: int, settings: dict[str, str]):
        ports = [(free_port(), free_port()) for _ in range(count)]
        voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports, 1))
        self.nodes = [ReferenceNode(directory / f"node-{i}", i, p, c, voters, settings)
                      for i, (p, c) in enumerate(ports, 1)]
        self.cluster_id = subprocess.run([str(KAFKA_BIN / "kafka-storage.sh"), "random-uuid"], check=True,
                                         capture_output=True, text=True, env=java_env()).stdout.strip()
        for node in self.nodes:
            node.format(self.cluster_id)

    def start(self) -> "ReferenceCluster":
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            node.wait_listening()
        return self

    @property
    def brokers(self) -> list[ReferenceNode]:
        return self.nodes

    def node(self, node_id: int) -> ReferenceNode:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
