"""Replication throttles on a three-node cluster: a reassignment's new replica copies no faster than the
throttle allows, on the leader's side or the follower's, and catches up once the throttle is lifted."""

import time
import uuid

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

from odradek.protocol.errors import ErrorCode
from tests.e2e.raw_client import RawClient

pytestmark = pytest.mark.timeout(300)

FETCH_BYTES = 65536  # replica.fetch.max.bytes: what one follower fetch of the partition may bring
RECORD = b"r" * 10_000


def alter(admin: AdminClient, kind: ResourceType, name: str, key: str, value: str | None) -> None:
    operation = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(kind, name, incremental_configs=[ConfigEntry(key, value, incremental_operation=operation)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def size_on(node, topic: str) -> int | None:
    """The size of the topic's partition 0 on `node`, None if it holds no replica of it."""
    with RawClient(node.bootstrap) as client:
        response = client.request(35, 4, {"topics": [{"topic": topic, "partitions": [0]}]})
    sizes = [p["partition_size"] for result in response["results"] for t in result["topics"] for p in t["partitions"]]
    return sizes[0] if sizes else None


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_reassignment_copies_within_the_rate_and_completes_once_lifted(cluster_factory, side):
    cluster = cluster_factory(3, {"replica.fetch.max.bytes": str(FETCH_BYTES)})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = f"throttled-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "batch.size": 16384})
    for _ in range(200):
        producer.produce(topic, RECORD, partition=0)
    assert producer.flush(60) == 0
    total = size_on(cluster.node(1), topic)
    assert total > 2_000_000
    throttled_broker = "1" if side == "leader" else "2"
    alter(admin, ResourceType.BROKER, throttled_broker, f"{side}.replication.throttled.rate", "1")
    alter(admin, ResourceType.TOPIC, topic, f"{side}.replication.throttled.replicas", f"0:{throttled_broker}")
    with RawClient(cluster.node(1).bootstrap) as client:
        response = client.request(45, 0, {"timeout_ms": 30000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]})
    assert response["error_code"] == ErrorCode.NONE
    new_replica = cluster.node(2)
    wait_for(lambda: (size_on(new_replica, topic) or 0) > 0, 60, "the new replica's first fetch")
    # At 1 byte/s, once one fetch has come the quota is spent for the rest of its 11 s window: nothing more
    # arrives meanwhile, however long this looks (a slower machine only sees less).
    watched_until = time.monotonic() + 3
    while time.monotonic() < watched_until:
        assert size_on(new_replica, topic) <= FETCH_BYTES + len(RECORD) + 200
        time.sleep(0.2)
    alter(admin, ResourceType.BROKER, throttled_broker, f"{side}.replication.throttled.rate", None)
    wait_for(lambda: size_on(new_replica, topic) == total, 60, "the new replica to catch up once the throttle went")

