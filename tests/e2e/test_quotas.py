"""Client quotas on a real node, with real clients: a producer and a consumer held to their byte rates and told
of the throttle, request time, controller mutations refused once a client's bucket is empty, connection creation
rates, AlterClientQuotas' refusals and DescribeClientQuotas' filters, and quotas kept across a restart.

The node measures over quota.window.num=2 windows of a second (Kafka's default is 11): a client may then burst one
second's worth rather than ten, so a rate held for a few seconds is the quota within the margins tested here.
"""

import socket
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.protocol.records import build_batch
from tests.conftest import NodeProcess, free_port
from tests.e2e.raw_client import RawClient

WINDOWS = {"quota.window.num": "2", "group.initial.rebalance.delay.ms": "0"}
RATE = 200_000  # bytes a second
MEASURED_S = (2.0, 8.0)  # from the first record on: after the first window's burst, until the client stops


@pytest.fixture(scope="module")
def quota_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("quotas") / "data", settings=WINDOWS).start()
    yield node
    node.stop()


def alter_quotas(node, entity: dict, values: dict, validate_only: bool = False) -> list[tuple]:
    """AlterClientQuotas for one entity ({type: name or None}); a value None removes the key."""
    with RawClient(node.bootstrap) as client:
        response = client.request(49, 1, {"entries": [{
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
            "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None} for k, v in values.items()],
        }], "validate_only": validate_only})
    return [(e["error_code"], e["error_message"]) for e in response["entries"]]


def set_quotas(node, entity: dict, **values) -> None:
    assert alter_quotas(node, entity, values) == [(0, None)]


def describe_quotas(node, components: list[tuple], strict: bool = False) -> dict:
    """DescribeClientQuotas: {((type, name), ...): {key: value}}, or (error code, message)."""
    with RawClient(node.bootstrap) as client:
        response = client.request(48, 1, {"components": [
            {"entity_type": t, "match_type": m, "match": s} for t, m, s in components], "strict": strict})
    if response["error_code"]:
        return (response["error_code"], response["error_message"])
    return {tuple((d["entity_type"], d["entity_name"]) for d in e["entity"]): {v["key"]: v["value"] for v in e["values"]}
            for e in response["entries"]}


def create_topic(node, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def rate_between(events: list[tuple[float, int]], start_s: float, end_s: float) -> float:
    """Bytes a second of (time, bytes) events from start_s to end_s after the first event."""
    first = events[0][0]
    return sum(size for at, size in events if first + start_s <= at < first + end_s) / (end_s - start_s)


def test_a_producer_is_held_to_its_byte_rate_and_told_it_was_throttled(quota_node):
    create_topic(quota_node, "produced-slowly")
    set_quotas(quota_node, {"client-id": "slow-producer"}, producer_byte_rate=RATE)
    delivered, throttles = [], []

    def on_delivery(error, message):
        if error is None:
            delivered.append((time.monotonic(), len(message.value())))

    # Requests of 16 kB (Java's batch.size), so that the rate is not measured in a few big lumps.
    producer = Producer({"bootstrap.servers": quota_node.bootstrap, "client.id": "slow-producer", "linger.ms": 5,
                         "batch.size": 16384, "queue.buffering.max.kbytes": 256, "acks": 1,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    value = b"x" * 1000
    give_up = time.monotonic() + 120  # a failure bound only: the loop ends on the deliveries it measures
    while not delivered or time.monotonic() < delivered[0][0] + MEASURED_S[1]:
        if not delivered and time.monotonic() > give_up:
            break
        try:
            producer.produce("produced-slowly", value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(30)
    assert delivered, "nothing was delivered"
    rate = rate_between(delivered, *MEASURED_S)
    print(f"producer: {rate:.0f} B/s against a quota of {RATE} B/s; {len(throttles)} throttles reported")
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s against a quota of {RATE} B/s"
    # librdkafka's throttle_cb, in seconds: each throttled answer (and a 0 once throttling ends)
    assert any(t > 0 for t in throttles) and all(t <= 2 for t in throttles), throttles


def test_a_consumer_is_held_to_its_byte_rate(quota_node):
    create_topic(quota_node, "consumed-slowly")
    producer = Producer({"bootstrap.servers": quota_node.bootstrap, "client.id": "fast-producer", "linger.ms": 5,
                         "batch.size": 16384})  # batches well under the one window's worth a fetch may carry
    for _ in range(int(RATE * (MEASURED_S[1] + 4) / 1000)):
        while True:
            try:
                producer.produce("consumed-slowly", b"y" * 1000)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(30) == 0
    set_quotas(quota_node, {"client-id": "slow-consumer"}, consumer_byte_rate=RATE)
    throttles, consumed = [], []
    consumer = Consumer({"bootstrap.servers": quota_node.bootstrap, "client.id": "slow-consumer",
                         "group.id": "slow-consumers", "auto.offset.reset": "earliest",
                         "max.partition.fetch.bytes": 16384, "fetch.max.bytes": 65536, "message.max.bytes": 65536,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.subscribe(["consumed-slowly"])
    try:
        deadline = time.monotonic() + 60
        while not consumed or time.monotonic() < consumed[0][0] + MEASURED_S[1]:
            assert time.monotonic() < deadline, f"consumed {len(consumed)} records in 60 s"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                consumed.append((time.monotonic(), len(message.value())))
    finally:
        consumer.close()
    rate = rate_between(consumed, *MEASURED_S)
    print(f"consumer: {rate:.0f} B/s against a quota of {RATE} B/s; {len(throttles)} throttles reported")
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s against a quota of {RATE} B/s"
    assert any(t > 0 for t in throttles), throttles


def test_handler_time_over_request_percentage_is_throttled_by_at_most_a_window(quota_node):
    set_quotas(quota_node, {"user": "ANONYMOUS", "client-id": "busy"}, request_percentage=0.01)  # 0.1 ms a second
    with RawClient(quota_node.bootstrap) as client:
        throttles = [client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False},
                                    client_id="busy")["throttle_time_ms"] for _ in range(3)]
    assert any(throttles) and all(0 <= t <= 1000 for t in throttles), throttles


def create_topics_v7(client: RawClient, topics: list[tuple[str, int]], client_id: str) -> dict:
    return client.request(19, 7, {"topics": [
        {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
        for name, count in topics], "timeout_ms": 30000, "validate_only": False}, client_id=client_id)


def test_a_strict_mutation_quota_refuses_topics_once_the_clients_bucket_is_empty(quota_node):
    set_quotas(quota_node, {"client-id": "topic-maker"}, controller_mutation_rate=1)  # a burst of 11 partitions
    with RawClient(quota_node.bootstrap, timeout=30) as client:
        response = create_topics_v7(client, [("mutated-a", 6), ("mutated-b", 6), ("mutated-c", 1)], "topic-maker")
        assert [(t["name"], t["error_code"], t["error_message"]) for t in response["topics"]] == [
            ("mutated-a", 0, None), ("mutated-b", 0, None),
            ("mutated-c", 89, "The throttling quota has been exceeded.")]  # THROTTLING_QUOTA_EXCEEDED
        assert 0 < response["throttle_time_ms"] <= 1000
        other = create_topics_v7(client, [("mutated-d", 1)], "someone-else")  # another client's bucket is its own
        assert other["topics"][0]["error_code"] == 0 and other["throttle_time_ms"] == 0


def test_alterations_are_refused_with_kafkas_codes_and_messages_and_validate_only_writes_nothing(quota_node):
    assert alter_quotas(quota_node, {"user": "carol"}, {"producer_byte_rate": 1.5}) == [
        (42, "producer_byte_rate cannot be a fractional value.")]
    assert alter_quotas(quota_node, {"user": "carol"}, {"no_such_quota": 1}) == [
        (42, "Invalid configuration key no_such_quota")]
    assert alter_quotas(quota_node, {"ip": "1.2.3.4"}, {"producer_byte_rate": 10}) == [
        (42, "Invalid configuration key producer_byte_rate")]
    assert alter_quotas(quota_node, {"ip": "no such host"}, {"connection_creation_rate": 10}) == [
        (42, "no such host is not a valid IP or resolvable host.")]
    assert alter_quotas(quota_node, {"user": "carol"}, {"producer_byte_rate": 100}, validate_only=True) == [(0, None)]
    assert describe_quotas(quota_node, [("user", 0, "carol")]) == {}
    assert describe_quotas(quota_node, [("topic", 2, None)]) == (35, "Unsupported entity type topic")


def test_quotas_are_described_with_kafkas_filters_and_survive_a_restart(node_factory):
    node = node_factory(WINDOWS)
    set_quotas(node, {"user": "alice"}, producer_byte_rate=1024)
    set_quotas(node, {"user": "bob", "client-id": "app"}, producer_byte_rate=4096, consumer_byte_rate=8192)
    set_quotas(node, {"user": None}, request_percentage=50)
    set_quotas(node, {"client-id": None}, producer_byte_rate=1000)
    set_quotas(node, {"ip": "127.0.0.1"}, connection_creation_rate=1000)
    everything = {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("client-id", "app"), ("user", "bob")): {"consumer_byte_rate": 8192.0, "producer_byte_rate": 4096.0},
        (("user", None),): {"request_percentage": 50.0},
        (("client-id", None),): {"producer_byte_rate": 1000.0},
        (("ip", "127.0.0.1"),): {"connection_creation_rate": 1000.0},
    }

    def described() -> dict:
        return {
            "all": describe_quotas(node, []),
            "users": describe_quotas(node, [("user", 2, None)], strict=True),
            "alice": describe_quotas(node, [("user", 0, "alice")], strict=True),
            "default client": describe_quotas(node, [("client-id", 1, None)]),
            "bob's clients": describe_quotas(node, [("user", 0, "bob"), ("client-id", 2, None)], strict=True),
        }

    before = described()
    assert before == {
        "all": everything,
        "users": {k: v for k, v in everything.items() if len(k) == 1 and k[0][0] == "user"},
        "alice": {(("user", "alice"),): {"producer_byte_rate": 1024.0}},
        "default client": {(("client-id", None),): {"producer_byte_rate": 1000.0}},
        "bob's clients": {(("client-id", "app"), ("user", "bob")): everything[(("client-id", "app"), ("user", "bob"))]},
    }
    node.restart()
    assert described() == before
    # Enforced again at once: the default client id's 1000 B/s throttles a 5000 B produce (one second allowed).
    create_topic(node, "after-restart")
    with RawClient(node.bootstrap) as client:
        response = client.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
            {"name": "after-restart", "partition_data": [
                {"index": 0, "records": build_batch([(None, b"z" * 5000, [])])}]}]}, client_id="anyone")
    assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert response["throttle_time_ms"] > 3000


def answered(node) -> bool:
    """Whether a new connection is served: a refused one is closed, unanswered, after its throttle time."""
    try:
        with RawClient(node.bootstrap, timeout=10) as client:
            return client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})[
                "error_code"] == 0
    except (ConnectionError, OSError):
        return False


def test_an_address_over_its_connection_creation_rate_is_refused(node_factory):
    node = node_factory(WINDOWS)
    with RawClient(node.bootstrap) as admin:  # connected before the quota, to lift it after
        set_quotas(node, {"ip": "127.0.0.1"}, connection_creation_rate=3)
        served = [answered(node) for _ in range(8)]
        assert served[:3] == [True] * 3 and False in served, served  # three a second, a second's worth at once
        lifted = admin.request(49, 1, {"entries": [{"entity": [{"entity_type": "ip", "entity_name": "127.0.0.1"}],
                                                    "ops": [{"key": "connection_creation_rate", "value": 0.0,
                                                             "remove": True}]}], "validate_only": False})
        assert lifted["entries"][0]["error_code"] == 0
    assert all(answered(node) for _ in range(8))


def test_max_connection_creation_rate_makes_new_connections_wait(node_factory):
    node = node_factory(WINDOWS)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("max.connection.creation.rate", "4", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    start = time.monotonic()
    sockets = [socket.create_connection(("127.0.0.1", node.port), timeout=30) for _ in range(8)]
    try:
        assert all(answered(node) for _ in range(2))  # delayed, never refused
    finally:
        for sock in sockets:
            sock.close()
    # Ten connections at 4 a second, after one second's worth: they cannot all have been accepted within a second.
    assert time.monotonic() - start >= 1.0


def test_a_topic_the_principal_may_not_create_is_refused_as_such_never_throttled(tmp_path):
    """With an authorizer, authorization comes before the mutation quota (as in Kafka): once alice's bucket is
    empty, a topic she may not create is still TOPIC_AUTHORIZATION_FAILED, one she may is throttled."""
    admin_port, sasl_port = free_port(), free_port()
    node = NodeProcess(tmp_path / "data", port=admin_port, settings={
        "listeners": f"ADMIN://127.0.0.1:{admin_port},SASL://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "ADMIN:PLAINTEXT,SASL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "ADMIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}).start()
    try:
        set_quotas(node, {"user": "alice"}, controller_mutation_rate=1)  # a burst of 11 partitions
        with RawClient(node.bootstrap) as client:  # alice may create topics named alice-*
            created = client.request(30, 3, {"creations": [{
                "resource_type": 2, "resource_name": "alice-", "resource_pattern_type": 4, "principal": "User:alice",
                "host": "*", "operation": 5, "permission_type": 3}]})  # TOPIC, PREFIXED, CREATE, ALLOW
            assert created["results"][0]["error_code"] == 0
        with RawClient(f"127.0.0.1:{sasl_port}", timeout=30) as client:
            client.sasl_plain("alice", "alice-secret")
            first = create_topics_v7(client, [("alice-a", 40)], "alice-tool")
            assert first["topics"][0]["error_code"] == 0  # the burst and some 30 s of refill, now spent
            second = create_topics_v7(client, [("bob-x", 1), ("alice-b", 1)], "alice-tool")
            assert {t["name"]: t["error_code"] for t in second["topics"]} == {
                "bob-x": 29, "alice-b": 89}  # TOPIC_AUTHORIZATION_FAILED, THROTTLING_QUOTA_EXCEEDED
    finally:
        node.stop()
