"""max.connections, max.connections.per.ip and its overrides: connections past the limit are closed at once;
the limits are dynamic broker configs, so raising one lets new connections in without a restart.
connections.max.idle.ms: a connection without requests is closed, one whose request is being served is not."""

import socket
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.e2e.raw_client import RawClient
from tests.e2e.test_protocol_apis import fetch, values_of


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


def test_an_idle_connection_is_closed_and_one_waiting_for_an_answer_is_not(node_factory):
    # The limit leaves a loaded machine's test process seconds between connecting and sending its request.
    node = node_factory({"connections.max.idle.ms": "2000"})
    topic = "idle-connections"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with served_connection(node) as idle:
        idle.sock.settimeout(60)
        assert idle.sock.recv(1) == b""  # end of stream: the node closed it
    with RawClient(node.bootstrap, timeout=60) as waiting:  # its first request at once: no idle gap before it
        # A fetch of an empty partition is answered only when its wait, three times the idle limit, is over.
        answer = fetch(waiting, topic, 0, max_wait_ms=6000)["responses"][0]["partitions"][0]
        assert answer["error_code"] == 0 and answer["high_watermark"] == 0, answer


def test_clients_reconnect_after_their_idle_connections_are_closed(node_factory):
    # Long enough for librdkafka to go from connecting to producing, which takes it a few of its backoffs.
    node = node_factory({"connections.max.idle.ms": "3000"})
    topic = "idle-producer"
    # Idempotent: a record sent as its connection is closed for idleness is retried on a new one, and only an
    # idempotent producer is promised that the retry is not written twice (once seen on a loaded machine)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    delivered = []
    for value in (b"before", b"after"):
        producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0
        with served_connection(node) as idle:  # a connection as old as the producer's is closed by now
            idle.sock.settimeout(60)
            assert idle.sock.recv(1) == b""
    assert delivered == [None, None]
    with served_connection(node) as reader:
        answer = fetch(reader, topic, 0)["responses"][0]["partitions"][0]
    assert values_of(answer["records"]) == [b"before", b"after"]


def test_an_address_named_in_the_overrides_gets_its_own_limit(node_factory):
    node = node_factory({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "localhost:2"})
    kept = [served_connection(node) for _ in range(2)]
    try:
        assert not admitted(node)
    finally:
        for client in kept:
            client.close()
