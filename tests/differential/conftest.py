"""The two brokers a differential test compares: the reference Kafka 4.0 and an Odradek node, started with the
same explicit settings (those of Kafka's own config/server.properties, which the reference starts from)."""

from dataclasses import dataclass

import pytest

from tests.conftest import NodeProcess
from tests.java.conftest import _two_free_ports
from tests.java.tool_shell import KafkaTools
from tests.reference_kafka import ReferenceBroker

# Kafka's config/server.properties, less its listener and quorum lines (each broker gets its own ports), plus
# a group that rebalances at once. Odradek is given the same explicit settings, so both describe them alike.
SHARED_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                      "SASL_SSL:SASL_SSL",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
    "group.initial.rebalance.delay.ms": "0",
}


@dataclass(frozen=True)
class Target:
    kind: str  # "kafka" or "odradek"
    bootstrap: str


@pytest.fixture(scope="package")
def kafka(tmp_path_factory):
    port, _ = _two_free_ports()
    broker = ReferenceBroker(tmp_path_factory.mktemp("differential-kafka"), port, SHARED_SETTINGS).start()
    try:
        yield Target("kafka", broker.bootstrap)
    finally:
        broker.stop()


@pytest.fixture(scope="package")
def odradek(tmp_path_factory):
    port, controller_port = _two_free_ports()
    node = NodeProcess(tmp_path_factory.mktemp("differential-odradek") / "data", port=port, settings={
        **SHARED_SETTINGS,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
    }).start()
    try:
        yield Target("odradek", node.bootstrap)
    finally:
        node.stop()


@pytest.fixture(scope="package")
def kafka_tools(tmp_path_factory):
    """Kafka's command-line tools, for scenarios that compare the text they print."""
    tools = KafkaTools(tmp_path_factory.mktemp("differential-tools"))
    yield tools
    tools.close()
