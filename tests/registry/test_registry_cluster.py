"""The registry on a 3-node cluster: every node answers reads, writes go through the leader of `_schemas`
(forwarded from the others, read-your-writes where they were taken), and nothing is lost or given twice
across a kill -9 of the writer and a restart of every node."""

from __future__ import annotations

import json
import time

from confluent_kafka.admin import AdminClient

from tests.conftest import Cluster, free_port
from tests.registry.conftest import RegistryHttp, wait_until_serving

DEADLINE_S = 120.0


def record_schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"Event{n}", "fields": [{"name": "n", "type": "int"}]})


def schemas_leader(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics("_schemas", timeout=10).topics["_schemas"]
    return topic.partitions[0].leader


def register_until_done(registry: RegistryHttp, subject: str, schema: str) -> dict:
    """Register, retrying while the cluster moves the writer (Confluent's 5xx codes mean: try again)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            status, answer = registry.post(f"/subjects/{subject}/versions", {"schema": schema})
        except OSError as exc:
            status, answer = 0, {"message": str(exc)}
        if status == 200:
            return answer
        assert status in (0, 500), answer
        assert time.monotonic() < deadline, f"registering {subject} kept failing: {answer}"
        time.sleep(0.2)


def wait_for_brokers(admin: AdminClient, count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while len(admin.list_topics(timeout=10).brokers) < count:
        assert time.monotonic() < deadline, "the brokers did not all register"
        time.sleep(0.1)


def snapshot(registry: RegistryHttp) -> dict:
    """Every subject's versions with their ids, as one node answers them."""
    return {s: [(v["version"], v["id"]) for v in registry.ok("GET", f"/schemas?subjectPrefix={s}")
                if v["subject"] == s] for s in registry.ok("GET", "/subjects")}


def wait_same(registries: list[RegistryHttp], expected: dict) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        seen = [snapshot(r) for r in registries]
        if all(s == expected for s in seen):
            return
        assert time.monotonic() < deadline, f"nodes disagree: {seen} != {expected}"
        time.sleep(0.2)


def test_writes_forwarded_read_your_writes_and_survive_a_writer_kill_and_restarts(tmp_path):
    cluster = Cluster(tmp_path, 3)
    urls = {}
    for node_id, node in enumerate(cluster.nodes, 1):
        urls[node_id] = f"http://127.0.0.1:{free_port()}"
        node.settings["schema.registry.listener"] = urls[node_id]
    cluster.start()
    try:
        registries = {node_id: wait_until_serving(url) for node_id, url in urls.items()}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for_brokers(admin, 3)  # the first write creates _schemas with as many replicas as there are brokers
        first = register_until_done(registries[1], "events-0", record_schema(0))
        topic = admin.list_topics("_schemas", timeout=10).topics["_schemas"]
        assert len(topic.partitions[0].replicas) == 3
        leader = schemas_leader(cluster.bootstrap)
        follower = next(n for n in registries if n != leader)

        # a write taken by a node that is not the writer is forwarded, and readable there at once
        taken = registries[follower].ok("POST", "/subjects/events-1/versions", {"schema": record_schema(1)})
        assert registries[follower].ok("GET", "/subjects/events-1/versions/latest")["id"] == taken["id"]
        expected = {"events-0": [(1, first["id"])], "events-1": [(1, taken["id"])]}
        wait_same(list(registries.values()), expected)

        cluster.node(leader).kill()
        survivor = next(n for n in registries if n != leader)
        for n in range(2, 6):
            answer = register_until_done(registries[survivor], f"events-{n}", record_schema(n))
            expected[f"events-{n}"] = [(1, answer["id"])]
        new_leader = schemas_leader(cluster.node(survivor).bootstrap)
        assert new_leader != leader

        cluster.node(leader).start()
        wait_until_serving(urls[leader])
        wait_same(list(registries.values()), expected)

        cluster.stop()
        cluster.start()
        for node_id, url in urls.items():
            wait_until_serving(url)
            # a registry that answers has read all of _schemas: its very first answers are complete
            assert snapshot(registries[node_id]) == expected
        ids = [version_id for versions in expected.values() for _, version_id in versions]
        assert len(set(ids)) == len(ids) == 6, "six different schemas, six different ids"
        after = register_until_done(registries[leader], "events-6", record_schema(6))
        assert after["id"] > max(ids)
    finally:
        cluster.stop()
