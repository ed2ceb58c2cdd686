"""A `_schemas` topic written by Confluent's registry (copied from a Kafka cluster, say with MirrorMaker 2)
is read as it is: its records, plain (not transactional) as Confluent writes them, in Confluent's JSON
format, give the same subjects, versions, ids and configs, and new ids follow the highest one."""

from __future__ import annotations

import io
import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from fastavro import schemaless_writer

from tests.conftest import NodeProcess
from tests.registry.conftest import registry_settings, wait_until_serving

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {**ORDER, "fields": ORDER["fields"] + [{"name": "note", "type": "string", "default": ""}]}


def confluent_record(key: dict, value: dict | None) -> tuple[bytes, bytes | None]:
    """A record as Confluent's registry writes it: Jackson's compact JSON, its key fields in its order."""
    return (json.dumps(key, separators=(",", ":")).encode(),
            None if value is None else json.dumps(value, separators=(",", ":")).encode())


COPIED = [
    confluent_record({"keytype": "NOOP", "magic": 0}, None),
    confluent_record({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
    confluent_record({"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1},
                     {"subject": "orders-value", "version": 1, "id": 41, "schema": json.dumps(ORDER),
                      "deleted": False}),
    confluent_record({"keytype": "SCHEMA", "subject": "orders-value", "version": 2, "magic": 1},
                     {"subject": "orders-value", "version": 2, "id": 57, "schema": json.dumps(ORDER_V2),
                      "deleted": False}),
    confluent_record({"keytype": "SCHEMA", "subject": "old-value", "version": 1, "magic": 1},
                     {"subject": "old-value", "version": 1, "id": 12, "schemaType": "JSON",
                      "schema": '{"type":"object"}', "deleted": False}),
    confluent_record({"keytype": "DELETE_SUBJECT", "subject": "old-value", "magic": 0},
                     {"subject": "old-value", "version": 1}),
    confluent_record({"keytype": "CONFIG", "subject": "orders-value", "magic": 0},
                     {"compatibilityLevel": "BACKWARD_TRANSITIVE"}),
]


def test_a_schemas_topic_written_by_confluents_registry_is_read_as_it_is(tmp_path):
    registry_node = NodeProcess(tmp_path / "data", settings=registry_settings())
    plain = NodeProcess(registry_node.data_dir, port=registry_node.port).start()  # first without a registry
    try:
        admin = AdminClient({"bootstrap.servers": plain.bootstrap})
        admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(30)
        producer = Producer({"bootstrap.servers": plain.bootstrap, "acks": "all"})
        for key, value in COPIED:
            producer.produce("_schemas", key=key, value=value, partition=0)
        order = {"id": 7, "note": "copied"}
        framed = io.BytesIO(b"\0" + (57).to_bytes(4, "big"))
        framed.seek(0, io.SEEK_END)
        schemaless_writer(framed, ORDER_V2, order)  # written in the source cluster with id 57
        producer.produce("orders", value=framed.getvalue())
        assert producer.flush(30) == 0
    finally:
        plain.stop()

    registry_node.start()
    try:
        registry = wait_until_serving(registry_node.settings["schema.registry.listener"])
        assert registry.ok("GET", "/subjects") == ["orders-value"]
        assert registry.ok("GET", "/subjects?deleted=true") == ["old-value", "orders-value"]
        assert [(v["version"], v["id"]) for v in registry.ok("GET", "/schemas?subjectPrefix=orders")] == \
            [(1, 41), (2, 57)]
        assert registry.ok("GET", "/config") == {"compatibilityLevel": "FULL"}
        assert registry.ok("GET", "/config/orders-value") == {"compatibilityLevel": "BACKWARD_TRANSITIVE"}
        assert json.loads(registry.ok("GET", "/schemas/ids/12")["schema"]) == {"type": "object"}

        client = SchemaRegistryClient({"url": registry.url})
        deserialize = AvroDeserializer(client)
        assert deserialize(framed.getvalue(), SerializationContext("orders", MessageField.VALUE)) == order
        v3 = {**ORDER_V2, "fields": ORDER_V2["fields"] + [{"name": "qty", "type": "int", "default": 1}]}
        assert registry.ok("POST", "/subjects/orders-value/versions", {"schema": json.dumps(v3)}) == {
            "id": 58, "subject": "orders-value", "version": 3, "schema": json.dumps(v3, separators=(",", ":"))}
    finally:
        registry_node.stop()
