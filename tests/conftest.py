"""Shared fixtures: real Odradek node processes on free 127.0.0.1 ports with throwaway data directories."""

import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.e2e.raw_client import RawClient


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, help="replay the randomized end-to-end tests with this seed")


# Test files that take a minute or more of a worker, longest first. `make test` runs files on two workers
# (-n 2 --dist loadfile --no-loadscope-reorder), handing out files in collection order: these go first, so
# that no worker starts one of them last while the other has finished.
_LONG_FILES = ("tests/spark_cluster/test_spark_cluster.py", "tests/spark_connect/test_spark_connect.py",
               "tests/e2e/test_cluster_transactions.py", "tests/sql/test_sql_failures.py",
               "tests/spark/test_source.py", "tests/e2e/test_cluster.py", "tests/sql/test_conformance.py",
               "tests/e2e/test_crash_points.py", "tests/e2e/test_authentication.py", "tests/spark/test_sink.py",
               "tests/e2e/test_transactions.py", "tests/sql/test_sql_on_reference_kafka.py",
               "tests/sql/test_rest_api.py", "tests/e2e/test_oauthbearer.py", "tests/e2e/test_cluster_nemesis.py",
               "tests/links/test_cluster_links.py", "tests/links/test_source_truncation.py",
               "tests/balancer/test_service.py", "tests/operator/test_nodes.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(_LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: others keep their order


@pytest.fixture
def seed(request) -> int:
    """A fresh random seed, or the one given with --seed; tests put it in their failure messages."""
    given = request.config.getoption("--seed")
    return given if given is not None else random.randrange(2**32)


# Listening ports come from below Linux's ephemeral range (32768-60999 by default): a port the kernel picked
# for us (bind to 0) can be taken, before the node binds it, as the source port of some outgoing
# connection, or handed out again for another listener. Nor is a port given twice in one run: each pytest-xdist
# worker takes its own slice of the range, as two workers could otherwise both find a port free before either
# process binds it.
def _listen_ports() -> tuple[int, int]:
    low, high = 20000, 32768
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    worker = int((os.environ.get("PYTEST_XDIST_WORKER") or "gw0").removeprefix("gw"))
    size = (high - low) // workers
    return low + worker * size, low + (worker + 1) * size


_LISTEN_PORTS = _listen_ports()
_given_ports: set[int] = set()
_port_choice = random.Random()


def free_port() -> int:
    while True:
        port = _port_choice.randrange(*_LISTEN_PORTS)
        if port in _given_ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port


class NodeProcess:
    """One `odradek server` subprocess; restartable on the same port and data directory."""

    def __init__(self, data_dir: Path, port: int | None = None, settings: dict[str, str] | None = None,
                 extra_args: tuple[str, ...] = ()):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.settings = dict(settings or {})
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"node-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "NodeProcess":
        return self.spawn().wait_listening(timeout)

    def spawn(self) -> "NodeProcess":
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            # the balancer would move partitions under tests about something else; its own tests turn it on
            "balancer.mode": "off",
            "balancer.sampling.enable": "false",
            **self.settings,
        }
        args = [sys.executable, "-m", "odradek", "server", *self.extra_args]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def wait_listening(self, timeout: float = 30.0) -> "NodeProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"node did not listen within {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """kill -9: no chance to flush or checkpoint."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> "NodeProcess":
        self.stop()
        return self.start()


# Quick failure detection for cluster tests; Kafka's defaults are several times longer.
FAST_CLUSTER_SETTINGS = {
    "controller.quorum.election.timeout.ms": "500", "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000", "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2000", "replica.lag.time.max.ms": "4000", "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
}


# A SASL_SSL cluster's clients log in as this user, whose credential `odradek storage format --add-scram` writes.
CLIENT_MECHANISM, CLIENT_USER, CLIENT_PASSWORD = "SCRAM-SHA-512", "admin", "admin-secret"
# The nodes log in to one another with PLAIN as "node", on the client (inter-broker) and controller listeners.
NODE_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
             'password="node-secret" user_node="node-secret";')
SECURITIES = ("PLAINTEXT", "SASL_SSL")


class Cluster:
    """Nodes of one metadata quorum, formatted with one cluster id. By default every node is a voter and a
    broker (combined mode); `roles` gives each node's process.roles instead (a broker-only node is no voter).

    With security="SASL_SSL" every listener (client, replication, controller) is SASL_SSL: the listener names
    stay PLAINTEXT and CONTROLLER, mapped to SASL_SSL; the nodes log in to one another with PLAIN, clients with
    SCRAM-SHA-512 as CLIENT_USER (no authorizer, so it may do anything). `client_config` and what derives from
    it give each kind of client what it needs to connect."""

    def __init__(self, directory: Path, count: int, settings: dict[str, str] | None = None,
                 roles: list[str] | None = None, security: str = "PLAINTEXT"):
        from odradek.broker.node import format_storage, new_cluster_id
        from odradek.cli.storage import scram_records
        from odradek.config import BrokerConfig
        from odradek.controller import bootstrap
        from tests.security.certificates import CertificateAuthority

        if security not in SECURITIES:
            raise ValueError(f"security={security!r}: expected one of {SECURITIES}")
        self.security = security
        self.ca: Path | None = None  # the CA that signed the nodes' certificates
        self.command_config: Path | None = None  # client_config as a properties file
        security_settings, bootstrap_records = {}, []
        if security == "SASL_SSL":
            authority = CertificateAuthority(directory / "ca")
            keys = authority.issue("node")
            self.ca = authority.path
            security_settings = {
                "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
                "ssl.keystore.location": str(keys.keystore), "ssl.truststore.location": str(authority.path),
                "sasl.enabled.mechanisms": f"PLAIN,{CLIENT_MECHANISM}",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.plaintext.plain.sasl.jaas.config": NODE_JAAS,
                "listener.name.controller.plain.sasl.jaas.config": NODE_JAAS,
            }
            bootstrap_records = scram_records([f"{CLIENT_MECHANISM}=[name={CLIENT_USER},password={CLIENT_PASSWORD}]"])
            self.command_config = directory / "client.properties"
            self.command_config.write_text("".join(f"{key}={value}\n" for key, value in self.client_config.items()))

        roles = roles or ["broker,controller"] * count
        ports = [(free_port(), free_port()) for _ in roles]
        voters = ",".join(f"{i}@127.0.0.1:{controller}" for i, (_, controller) in enumerate(ports, 1)
                          if "controller" in roles[i - 1])
        self.cluster_id = new_cluster_id()
        self.nodes: list[NodeProcess] = []
        for i, (port, controller) in enumerate(ports, 1):
            listeners = [f"PLAINTEXT://127.0.0.1:{port}"] if "broker" in roles[i - 1] else []
            listeners += [f"CONTROLLER://127.0.0.1:{controller}"] if "controller" in roles[i - 1] else []
            node_settings = {"node.id": str(i), "process.roles": roles[i - 1], "listeners": ",".join(listeners),
                             "controller.quorum.voters": voters, **FAST_CLUSTER_SETTINGS, **security_settings,
                             **(settings or {})}
            # A controller-only node has no client listener: it is up once its controller listener is.
            node = NodeProcess(directory / f"node-{i}", port=port if listeners[0].startswith("PLAINTEXT") else controller,
                               settings=node_settings)
            if bootstrap_records:  # as `odradek storage format --add-scram` does, before meta.properties
                node.data_dir.mkdir(parents=True, exist_ok=True)
                bootstrap.write_records(str(node.data_dir), bootstrap_records)
            format_storage(BrokerConfig({**node_settings, "log.dirs": str(node.data_dir)}), self.cluster_id)
            self.nodes.append(node)

    def start(self, timeout: float = 60.0) -> "Cluster":
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            node.wait_listening(timeout)
        return self

    @property
    def brokers(self) -> list["NodeProcess"]:
        return [n for n in self.nodes if "broker" in n.settings["process.roles"]]

    def node(self, node_id: int) -> NodeProcess:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.brokers)

    @property
    def client_config(self) -> dict[str, str]:
        """librdkafka settings (confluent-kafka, kcat, the odradek CLI) for the client listeners, but
        bootstrap.servers; none for PLAINTEXT. Every other client's settings derive from these."""
        if self.security == "PLAINTEXT":
            return {}
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca), "sasl.mechanism": CLIENT_MECHANISM,
                "sasl.username": CLIENT_USER, "sasl.password": CLIENT_PASSWORD}

    def client_settings(self, settings: dict | None = None, bootstrap: str | None = None) -> dict:
        """confluent-kafka settings: `settings` with bootstrap.servers (every broker, or `bootstrap`) and the
        cluster's security."""
        return {"bootstrap.servers": bootstrap or self.bootstrap, **self.client_config, **(settings or {})}

    @property
    def kafka_python_config(self) -> dict[str, str]:
        """Keyword arguments of kafka-python's clients, but bootstrap_servers."""
        config = self.client_config
        names = {"security.protocol": "security_protocol", "ssl.ca.location": "ssl_cafile",
                 "sasl.mechanism": "sasl_mechanism", "sasl.username": "sasl_plain_username",
                 "sasl.password": "sasl_plain_password"}
        return {names[key]: value for key, value in config.items()}

    @property
    def kcat_args(self) -> list[str]:
        return [arg for key, value in self.client_config.items() for arg in ("-X", f"{key}={value}")]

    @property
    def cli_args(self) -> list[str]:
        """The connection options of `odradek` client commands, but --bootstrap-server."""
        return ["--command-config", str(self.command_config)] if self.command_config else []

    def raw_client(self, node: NodeProcess, timeout: float = 10.0) -> "RawClient":
        """A RawClient connected to one node's client listener, logged in as the other clients are."""
        from tests.e2e.raw_client import RawClient

        if self.security == "PLAINTEXT":
            return RawClient(node.bootstrap, timeout)
        client = RawClient(node.bootstrap, timeout, ssl_context=ssl.create_default_context(cafile=str(self.ca)))
        client.sasl_login(CLIENT_MECHANISM, CLIENT_USER, CLIENT_PASSWORD)
        return client

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop()


@pytest.fixture
def cluster_factory(tmp_path):
    """Start clusters: cluster_factory(3, {"min.insync.replicas": "2"}), cluster_factory(3, security="SASL_SSL")."""
    clusters: list[Cluster] = []

    def make(count: int = 3, settings: dict[str, str] | None = None, roles: list[str] | None = None,
             security: str = "PLAINTEXT") -> Cluster:
        cluster = Cluster(tmp_path / f"cluster-{len(clusters)}", len(roles) if roles else count, settings, roles,
                          security)
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.stop()


@pytest.fixture(params=SECURITIES)
def security(request) -> str:
    """Runs a test once with PLAINTEXT and once with SASL_SSL on every listener: cluster_factory(3, security=security)."""
    return request.param


@pytest.fixture
def node_factory(tmp_path):
    """Start nodes with extra settings: node_factory(**{"num.partitions": "3"})."""
    nodes: list[NodeProcess] = []

    def make(settings: dict[str, str] | None = None, name: str = "node") -> NodeProcess:
        node = NodeProcess(tmp_path / f"{name}-{len(nodes)}", settings=settings)
        nodes.append(node)
        return node.start()

    yield make
    for node in nodes:
        node.stop()


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    """One node for a whole test module; tests use distinct topic names."""
    node = NodeProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield node
    node.stop()


@pytest.fixture
def node(node_factory) -> NodeProcess:
    return node_factory()
