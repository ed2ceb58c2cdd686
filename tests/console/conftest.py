"""Fixtures of the console's tests: a node whose client listener takes SASL logins, with an authorizer."""

import pytest

from tests.conftest import NodeProcess, free_port
from tests.console.harness import ADMIN, ADMIN_PASSWORD, BOB, BOB_PASSWORD


@pytest.fixture
def secured_node(tmp_path):
    port, controller = free_port(), free_port()
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{ADMIN}" '
            f'password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}" user_{BOB}="{BOB_PASSWORD}";')
    node = NodeProcess(tmp_path / "data", port=port, settings={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}", "node.id": "1",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN};User:ANONYMOUS", "group.initial.rebalance.delay.ms": "0",
    }).start()
    yield node
    node.stop()
