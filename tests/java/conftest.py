"""Fixtures of the Java ecosystem tests: Kafka 4.0's own tools, run against Odradek nodes.

`KAFKA_TOOLS_TARGET=reference` runs the single-node tool tests against the reference Kafka 4.0 broker
instead of an Odradek node: they assert Kafka's behaviour, so there they all pass.
"""

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import NodeProcess, free_port
from tests.java.tool_shell import KafkaTools
from tests.reference_kafka import ReferenceBroker

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
    log_dir: Path               # where its partition directories are


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


@pytest.fixture(scope="module")
def tools_broker(tmp_path_factory):
    """One broker for a test module, with a CONTROLLER listener reachable with --bootstrap-controller."""
    directory = tmp_path_factory.mktemp("tools-broker")
    port, controller_port = _two_free_ports()
    if os.environ.get("KAFKA_TOOLS_TARGET") == "reference":
        broker = ReferenceBroker(directory, port, TOOLS_BROKER_SETTINGS).start()
        try:
            yield ToolsBroker("kafka", broker.bootstrap, broker.controller_bootstrap, directory / "data")
        finally:
            broker.stop()
        return
    node = NodeProcess(directory / "data", port=port, settings={
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        **TOOLS_BROKER_SETTINGS,
    }).start()
    try:
        yield ToolsBroker("odradek", node.bootstrap, f"127.0.0.1:{controller_port}", node.data_dir)
    finally:
        node.stop()
