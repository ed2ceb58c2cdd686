"""The registry and the Kafka listener against an independent, non-Python client: the JavaScript ecosystem.

tests/registry/js/roundtrip.mjs uses @kafkajs/confluent-schema-registry (registration, and Avro, JSON
Schema and Protobuf encoding and decoding) and kafkajs (a pure-JavaScript Kafka client); this module runs it
with node against one real node, and checks its work with confluent-kafka's serializers and the registry's
HTTP answers:
  - JS registers and produces Avro, JSON Schema and Protobuf records, Python decodes them (and a fresh JS
    client reads them back through the registry's stored forms);
  - Python registers and produces Avro records, JS decodes them;
  - the same schemas registered from JS and from Python under different subjects have one id each (and, an
    expected failure for now, an Avro schema written in another key order has that id too, as in Confluent's).

The node modules are pinned in tests/registry/js/package-lock.json; `make test` installs them (`npm ci`), and
this module does so itself when they are missing or older than the lock file.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from tests.conftest import NodeProcess, free_port
from tests.registry.conftest import RegistryHttp, registry_settings, wait_until_serving

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js 20+) is not on PATH")

JS_DIR = Path(__file__).parent / "js"
SCRIPT = JS_DIR / "roundtrip.mjs"
# Failure bounds, not expected durations: the machine may be loaded.
JS_TIMEOUT_S = 180
NPM_CI_TIMEOUT_S = 900
WAIT_S = 120

COUNT = 6  # records of each format
FORMATS = ("avro", "json", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
RECORD_NAMES = {"avro": "shop.Payment", "json": "shop.Shipment", "protobuf": "shop.Order"}

# Python's own copies of the schemas roundtrip.mjs registers, written differently where the registry's
# canonical form allows it: Avro and JSON Schema with another layout (JSON Schema's key order is part of the
# schema), Protobuf as a descriptor built here (roundtrip.mjs sends .proto text).
PAYMENT_AVRO = {
    "type": "record", "name": "Payment", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "method",
         "type": {"type": "enum", "name": "Method", "symbols": ["CARD", "CASH", "TRANSFER"]}},
    ],
}
# The same schema with every object's keys in another order: Confluent's registry stores Java's
# Schema.toString of what it parsed (AvroSchema.canonicalString), so it gives this the id of PAYMENT_AVRO.
PAYMENT_AVRO_REORDERED = {
    "namespace": "shop", "name": "Payment", "type": "record",
    "fields": [
        {"type": "string", "name": "id"},
        {"type": "double", "name": "amount"},
        {"default": None, "type": ["null", "string"], "name": "note"},
        {"type": {"items": "string", "type": "array"}, "name": "tags"},
        {"type": {"symbols": ["CARD", "CASH", "TRANSFER"], "name": "Method", "type": "enum"},
         "name": "method"},
    ],
}
SHIPMENT_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "shop.Shipment",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "destination": {"type": "string"},
        "express": {"type": "boolean"},
        "weightKg": {"type": "number"},
        "parcels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "destination"],
    "additionalProperties": False,
}

# What Python produces for JS to decode: every Avro type that has a JSON form in avsc.
REFUND_AVRO = {
    "type": "record", "name": "Refund", "namespace": "shop.refunds",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "sequence", "type": "long"},
        {"name": "units", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "amount", "type": "double"},
        {"name": "approved", "type": "boolean"},
        {"name": "receipt", "type": "bytes"},
        {"name": "reason", "type": ["null", "string"], "default": None},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["OPEN", "PAID", "DENIED"]}},
        {"name": "items", "type": {"type": "array", "items": {
            "type": "record", "name": "Item",
            "fields": [{"name": "sku", "type": "string"}, {"name": "count", "type": "int"}]}}},
        {"name": "labels", "type": {"type": "map", "values": "string"}},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"}, {"name": "vip", "type": "boolean", "default": False}]}},
    ],
}


# The records roundtrip.mjs sends (its RECORDS), built here independently.
def payment(i: int) -> dict:
    return {"id": f"p{i}", "amount": i * 1.25, "note": None if i % 2 == 0 else f"note {i}",
            "tags": [f"t{t}" for t in range(i % 3)], "method": ["CARD", "CASH", "TRANSFER"][i % 3]}


def shipment(i: int) -> dict:
    return {"id": 1000 + i, "destination": f"city {i}", "express": i % 2 == 1, "weightKg": i + 0.5,
            "parcels": [f"parcel-{i}-{p}" for p in range(i % 3)]}


def order(i: int) -> dict:
    """As protobuf's JSON mapping with proto field names, every field present: what roundtrip.mjs prints."""
    return {"id": f"o{i}", "quantity": i + 1, "status": ["PLACED", "SHIPPED"][i % 2],
            "lines": [{"sku": f"sku-{i}", "count": i + 2}], "tags": [f"tag{i}"]}


EXPECTED = {"avro": payment, "json": shipment, "protobuf": order}


def refund(i: int) -> dict:
    return {"id": f"r{i}", "sequence": 2**40 + i, "units": -i, "ratio": i * 0.25, "amount": i * 10.5,
            "approved": i % 2 == 0, "receipt": bytes([i, 0, 255, i * 3]),
            "reason": f"reason {i}" if i % 3 else None,
            "state": ["OPEN", "PAID", "DENIED"][i % 3],
            "items": [{"sku": f"s{i}-{n}", "count": n} for n in range(i % 3 + 1)],
            "labels": {f"k{n}": f"v{n}" for n in range(i % 2 + 1)},
            "customer": {"name": f"customer {i}", "vip": i % 4 == 0}}


def refund_as_json(i: int) -> dict:
    """refund(i) as roundtrip.mjs prints what avsc decoded: bytes as base64."""
    return {**refund(i), "receipt": base64.b64encode(refund(i)["receipt"]).decode()}


def order_file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """roundtrip.mjs' ORDER_PROTO, as a descriptor built field by field (what protoc would make of it)."""
    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    status = message.enum_type.add(name="Status")
    for number, name in enumerate(["STATUS_UNSPECIFIED", "PLACED", "SHIPPED"]):
        status.value.add(name=name, number=number)
    line = message.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=field.TYPE_STRING, label=optional, json_name="sku")
    line.field.add(name="count", number=2, type=field.TYPE_INT32, label=optional, json_name="count")
    message.field.add(name="id", number=1, type=field.TYPE_STRING, label=optional, json_name="id")
    message.field.add(name="quantity", number=2, type=field.TYPE_INT32, label=optional, json_name="quantity")
    message.field.add(name="status", number=3, type=field.TYPE_ENUM, label=optional,
                      type_name=".shop.Order.Status", json_name="status")
    message.field.add(name="lines", number=4, type=field.TYPE_MESSAGE, label=repeated,
                      type_name=".shop.Order.Line", json_name="lines")
    message.field.add(name="tags", number=5, type=field.TYPE_STRING, label=repeated, json_name="tags")
    return file


def message_class(file: descriptor_pb2.FileDescriptorProto, full_name: str):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def message_class_from_registry(registry: RegistryHttp, schema_id: int, full_name: str):
    """The message class of a registered Protobuf schema, from its base64 FileDescriptorProto."""
    answer = registry.ok("GET", f"/schemas/ids/{schema_id}?format=serialized")
    assert answer.get("schemaType") == "PROTOBUF", answer
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"]))
    return message_class(file, full_name)


# --- the node, the node modules, and running roundtrip.mjs ------------------------------------------------


@pytest.fixture(scope="module")
def js_modules() -> Path:
    """tests/registry/js/node_modules, installed with `npm ci` unless `make test` has done it already."""
    lock = JS_DIR / "package-lock.json"
    installed = JS_DIR / "node_modules" / ".package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("tests/registry/js/node_modules is missing or stale, and npm is not on PATH")
        try:
            # As `make test` does; the one install script of these packages (protobufjs') only prints advice.
            result = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=JS_DIR,
                                    capture_output=True, text=True, timeout=NPM_CI_TIMEOUT_S)
        except subprocess.TimeoutExpired as timeout:
            pytest.fail(f"npm ci in {JS_DIR} did not finish within {NPM_CI_TIMEOUT_S}s: {timeout.stderr}")
        assert result.returncode == 0, f"npm ci in {JS_DIR} failed:\n{result.stdout}\n{result.stderr}"
        installed.touch()
    return JS_DIR / "node_modules"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One node with a schema registry for the whole module; each test uses its own topics and subjects."""
    node = NodeProcess(tmp_path_factory.mktemp("js-registry") / "data",
                       settings=registry_settings(free_port())).start(timeout=WAIT_S)
    node.registry_url = node.settings["schema.registry.listener"]
    try:
        wait_until_serving(node.registry_url, timeout_s=WAIT_S)
        yield node
    finally:
        node.stop()


@pytest.fixture
def registry(node) -> RegistryHttp:
    return RegistryHttp(node.registry_url)


def run_js(node, mode: str, topic: str, count: int = COUNT) -> list[dict]:
    """roundtrip.mjs in `mode`; the JSON lines it printed. Fails with its stderr and the node's log tail."""
    args = ["node", str(SCRIPT), "--mode", mode, "--bootstrap-server", node.bootstrap,
            "--registry-url", node.registry_url, "--topic", topic, "--count", str(count),
            "--timeout-ms", str(JS_TIMEOUT_S * 1000)]
    env = {**os.environ, "NODE_NO_WARNINGS": "1"}
    try:
        # The script bounds its own run; this bound only catches a node that ignores it.
        result = subprocess.run(args, cwd=JS_DIR, capture_output=True, text=True, env=env,
                                timeout=JS_TIMEOUT_S + 60)
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"roundtrip.mjs {mode} hung past its own timeout:\n{timeout.stderr}\n"
                    f"--- node log (tail) ---\n{node.log_text()[-4000:]}")
    if result.returncode != 0:
        pytest.fail(f"roundtrip.mjs {mode} exited with {result.returncode}:\n{result.stderr}\n"
                    f"--- node log (tail) ---\n{node.log_text()[-4000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str) -> None:
    """One partition, and its leader known in the metadata, before a client that creates nothing uses it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        future.result(timeout=WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while True:
        partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
        if partitions and all(p.leader >= 0 and p.error is None for p in partitions.values()):
            return
        assert time.monotonic() < deadline, f"{topic} has no leader after {WAIT_S}s: {partitions}"
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(WAIT_S) == 0


def consume(bootstrap: str, topic: str, count: int) -> list[tuple[str, bytes]]:
    """(key, value) of the first `count` records of the topic's one partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-python",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records: list[tuple[str, bytes]] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert not message.error(), message.error()
            records.append((message.key().decode(), message.value()))
    finally:
        consumer.close()
    assert len(records) == count, f"{len(records)} of {count} records of {topic} within {WAIT_S}s"
    return records


def schema_id_of(framed: bytes) -> int:
    assert framed[0] == 0, framed[:8]
    return int.from_bytes(framed[1:5], "big")


# --- the tests --------------------------------------------------------------------------------------------


def test_javascript_registers_and_produces_avro_json_and_protobuf_python_decodes(node, js_modules, registry):
    topic = topic_name("js-produced")
    create_topic(node.bootstrap, topic)
    sent = run_js(node, "produce", topic)

    assert [(line["format"], line["key"]) for line in sent] == [(f, f) for f in FORMATS for _ in range(COUNT)]
    ids = {line["format"]: line["id"] for line in sent}
    subjects = {line["format"]: line["subject"] for line in sent}
    assert subjects == {f: f"{topic}-{RECORD_NAMES[f]}" for f in FORMATS}
    assert len(set(ids.values())) == 3, ids
    for fmt in FORMATS:  # the ids JS was given are the ones the registry answers for those subjects
        latest = registry.ok("GET", f"/subjects/{subjects[fmt]}/versions/latest")
        assert (latest["id"], latest["version"]) == (ids[fmt], 1)
        assert latest.get("schemaType", "AVRO") == SCHEMA_TYPES[fmt]
        holders = registry.ok("GET", f"/schemas/ids/{ids[fmt]}/versions")
        assert {"subject": subjects[fmt], "version": 1} in holders, holders
    assert json.loads(registry.ok("GET", f"/schemas/ids/{ids['avro']}")["schema"]) == PAYMENT_AVRO
    assert json.loads(registry.ok("GET", f"/schemas/ids/{ids['json']}")["schema"]) == SHIPMENT_JSON

    order_class = message_class_from_registry(registry, ids["protobuf"], "shop.Order")
    protobuf_records = [line["value"] for line in sent if line["format"] == "protobuf"]
    assert [json_format.ParseDict(v, order_class()) for v in protobuf_records] == [
        json_format.ParseDict(order(i), order_class()) for i in range(COUNT)]
    assert [line["value"] for line in sent if line["format"] != "protobuf"] == [
        EXPECTED[f](i) for f in ("avro", "json") for i in range(COUNT)]

    client = SchemaRegistryClient({"url": node.registry_url})
    by_record = {"subject.name.strategy": topic_record_subject_name_strategy}
    deserializers = {
        "avro": AvroDeserializer(client, conf=by_record),
        "json": JSONDeserializer(None, conf=by_record, schema_registry_client=client),
        "protobuf": ProtobufDeserializer(order_class, {"use.deprecated.format": False, **by_record}, client),
    }
    context = SerializationContext(topic, MessageField.VALUE)
    decoded: dict[str, list] = {f: [] for f in FORMATS}
    for key, value in consume(node.bootstrap, topic, len(sent)):
        assert schema_id_of(value) == ids[key], key
        decoded[key].append(deserializers[key](value, context))
    assert decoded["avro"] == [payment(i) for i in range(COUNT)]
    assert decoded["json"] == [shipment(i) for i in range(COUNT)]
    assert decoded["protobuf"] == [json_format.ParseDict(order(i), order_class()) for i in range(COUNT)]

    # A fresh JS client decodes them too, with the schemas as the registry stores them (its own .proto text).
    read_back = run_js(node, "consume", topic, count=len(sent))
    assert [(r["offset"], r["key"], r["schemaId"]) for r in read_back] == [
        (n, line["format"], line["id"]) for n, line in enumerate(sent)]
    assert [r["value"] for r in read_back] == [EXPECTED[f](i) for f in FORMATS for i in range(COUNT)]


def test_python_produces_avro_javascript_decodes(node, js_modules, registry):
    topic = topic_name("py-produced")
    create_topic(node.bootstrap, topic)
    client = SchemaRegistryClient({"url": node.registry_url})
    serialize = AvroSerializer(client, json.dumps(REFUND_AVRO),
                               conf={"subject.name.strategy": topic_subject_name_strategy})
    context = SerializationContext(topic, MessageField.VALUE)
    values = [serialize(refund(i), context) for i in range(COUNT)]
    produce(node.bootstrap, topic, values)
    schema_id = registry.ok("GET", f"/subjects/{topic}-value/versions/latest")["id"]
    assert {schema_id_of(v) for v in values} == {schema_id}

    received = run_js(node, "consume", topic, count=COUNT)
    assert [(r["partition"], r["offset"], r["key"], r["schemaId"]) for r in received] == [
        (0, i, None, schema_id) for i in range(COUNT)]
    assert [r["value"] for r in received] == [refund_as_json(i) for i in range(COUNT)]


def test_the_same_schema_from_javascript_and_python_has_one_id(node, js_modules, registry):
    topic = topic_name("same-schema")
    registered = {line["format"]: line for line in run_js(node, "register", topic)}
    assert sorted(registered) == sorted(FORMATS)
    assert len({line["id"] for line in registered.values()}) == 3, registered

    # Python registers its own copies (auto-registration by its serializers) under subjects of its own.
    client = SchemaRegistryClient({"url": node.registry_url})
    context = SerializationContext(topic, MessageField.VALUE)

    def python_subject(fmt: str):
        return lambda ctx, record_name: f"{ctx.topic}-python-{fmt}"

    order_class = message_class(order_file_descriptor(), "shop.Order")
    serializers = {
        "avro": (AvroSerializer(client, json.dumps(PAYMENT_AVRO, indent=2),
                                conf={"subject.name.strategy": python_subject("avro")}), payment(1)),
        "json": (JSONSerializer(json.dumps(SHIPMENT_JSON, indent=4), client,
                                conf={"subject.name.strategy": python_subject("json")}), shipment(1)),
        "protobuf": (ProtobufSerializer(order_class, client, {
            "use.deprecated.format": False, "subject.name.strategy": python_subject("protobuf")}),
            json_format.ParseDict(order(1), order_class())),
    }
    for fmt, (serialize, value) in serializers.items():
        python_id = schema_id_of(serialize(value, context))
        assert python_id == registered[fmt]["id"], (fmt, registered[fmt], python_id)
        # (the other tests of the module may have registered it too, under subjects of their own)
        holders = {(v["subject"], v["version"])
                   for v in registry.ok("GET", f"/schemas/ids/{python_id}/versions")}
        assert {(registered[fmt]["subject"], 1), (f"{topic}-python-{fmt}", 1)} <= holders, holders
        python_version = registry.ok("GET", f"/subjects/{topic}-python-{fmt}/versions/latest")
        assert (python_version["id"], python_version["version"]) == (python_id, 1)


def test_an_avro_schema_in_another_key_order_has_the_same_id(node, js_modules, registry):
    topic = topic_name("key-order")
    registered = {line["format"]: line for line in run_js(node, "register", topic)}
    client = SchemaRegistryClient({"url": node.registry_url})
    python_id = client.register_schema(f"{topic}-python-reordered",
                                       Schema(json.dumps(PAYMENT_AVRO_REORDERED), "AVRO"))
    assert python_id == registered["avro"]["id"]
