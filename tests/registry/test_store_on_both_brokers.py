"""The registry's storage is a plain Kafka client, so its protocol runs the same against Apache Kafka 4.0
(the reference broker) and against an Odradek node: `_schemas` created compacted, a write committed in a
transaction and read back (read_committed) before it is answered, a second writer fencing the first so that
no id is given twice, and a new reader that reaches the topic's end and holds the same state."""

from __future__ import annotations

import asyncio
import json

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from odradek.registry.state import RegisterRequest
from odradek.registry.store import SchemaStore
from tests.conftest import NodeProcess
from tests.java.conftest import _two_free_ports
from tests.reference_kafka import ReferenceBroker, requires_reference

READY_S = 60


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"K{n}", "fields": [{"name": "n", "type": "int"}]})


def register(store: SchemaStore, subject: str, n: int) -> dict:
    write, _ = asyncio.run(store.write(lambda state: state.plan_register(subject, RegisterRequest(schema(n)),
                                                                         normalize=False)))
    return write.answer


def snapshot(store: SchemaStore) -> dict:
    with store.lock:
        return {s: [(r.version, r.id) for r in store.state.versions(s)] for s in store.state.subject_names()}


@pytest.fixture(params=[pytest.param("kafka", marks=requires_reference), "odradek"])
def broker(request, tmp_path):
    if request.param == "kafka":
        port, _ = _two_free_ports()
        kafka = ReferenceBroker(tmp_path / "kafka", port, {"transaction.state.log.replication.factor": "1",
                                                          "transaction.state.log.min.isr": "1"}).start()
        yield kafka
        kafka.stop()
    else:
        node = NodeProcess(tmp_path / "odradek").start()
        yield node
        node.stop()


def test_the_registry_store_on_either_broker(broker):
    kafka = broker
    first = second = third = None
    try:
        first = SchemaStore(kafka.bootstrap, {}, "_schemas", 3)
        first.start()
        assert first.leader() == 1  # creates _schemas, with the one broker there is
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        config = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "_schemas")])
        assert next(iter(config.values())).result(30)["cleanup.policy"].value == "compact"
        answers = [register(first, f"s{n}", n) for n in range(3)]
        assert [a["id"] for a in answers] == [1, 2, 3]

        second = SchemaStore(kafka.bootstrap, {}, "_schemas", 3)
        second.start()
        assert second.ready.wait(READY_S)
        assert register(second, "s3", 3)["id"] == 4  # fences the first writer, after reading all it wrote
        assert register(first, "s4", 4)["id"] == 5  # fenced: it takes over again, reads id 4, and goes on
        assert register(second, "s5", 5)["id"] == 6

        third = SchemaStore(kafka.bootstrap, {}, "_schemas", 3)
        third.start()
        assert third.ready.wait(READY_S)
        expected = {f"s{n}": [(1, n + 1)] for n in range(6)}
        assert snapshot(third) == expected
        assert second.wait_applied(third.state.next_offset - 1, READY_S)
        assert snapshot(second) == expected
    finally:
        for store in (first, second, third):
            if store is not None:
                store.close()
