"""max.connections and max.connections.per.ip: connections past the limit are closed at once; the limits are
dynamic broker configs, so raising one lets new connections in without a restart."""

import socket
import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.e2e.raw_client import RawClient


def api_versions_answered(client: RawClient) -> bool:
    try:
        return client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0
    except (ConnectionError, OSError):
        return False


def set_broker_config(node, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def admitted(node) -> bool:
    with RawClient(node.bootstrap) as client:
        return api_versions_answered(client)


def served_connection(node, timeout: float = 30) -> RawClient:
    """A connection the node serves. Slots free up only once the node has seen a connection close (its own
    start-up probe's among them), so a try may be refused first."""
    deadline = time.monotonic() + timeout
    while True:
        client = RawClient(node.bootstrap)
        if api_versions_answered(client):
            return client
        client.close()
        assert time.monotonic() < deadline, f"no connection was served within {timeout}s"
        time.sleep(0.1)


@pytest.mark.parametrize("setting", ["max.connections.per.ip", "max.connections"])
def test_connections_past_the_limit_are_closed_until_it_is_raised(node_factory, setting):
    node = node_factory({setting: "3"})
    kept = [served_connection(node) for _ in range(3)]
    try:
        assert not admitted(node)
        kept.pop().close()
        kept.append(served_connection(node))  # the freed slot is taken again
        while kept:
            kept.pop().close()
        set_broker_config(node, setting, "10")
        kept = [served_connection(node) for _ in range(10)]
        assert not admitted(node)
    finally:
        for client in kept:
            client.close()


def test_a_refused_connection_is_closed_by_the_node(node_factory):
    node = node_factory({"max.connections.per.ip": "1"})
    with served_connection(node):
        with socket.create_connection(("127.0.0.1", node.port), timeout=10) as second:
            assert second.recv(1) == b""  # end of stream: the node closed it
