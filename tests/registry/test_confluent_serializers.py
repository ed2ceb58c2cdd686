"""confluent-kafka's schema registry client and its Avro, JSON Schema and Protobuf serializers, through a
node's registry and a topic: auto-registration, use.latest.version, and an incompatible change refused."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
PAYMENT_V2 = {**PAYMENT, "fields": PAYMENT["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}
PAYMENT_BREAKING = {**PAYMENT, "fields": PAYMENT["fields"] + [{"name": "country", "type": "string"}]}
ORDER_JSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
              "required": ["id"], "additionalProperties": False}


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                values.append(message.value())
                if len(values) == count:
                    break
    finally:
        consumer.close()
    assert len(values) == count
    return values


@pytest.fixture
def client(registry_node) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_node.registry_url})


def test_avro_auto_registration_and_round_trip(registry_node, client):
    topic = topic_name("payments")
    serialize = AvroSerializer(client, json.dumps(PAYMENT))
    context = SerializationContext(topic, MessageField.VALUE)
    payments = [{"id": f"p{i}", "amount": i * 1.5} for i in range(20)]
    produce(registry_node.bootstrap, topic, [serialize(p, context) for p in payments])

    registered = client.get_latest_version(f"{topic}-value")
    assert registered.version == 1 and json.loads(registered.schema.schema_str) == PAYMENT
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_node.registry_url}))
    values = consume(registry_node.bootstrap, topic, len(payments))
    assert [deserialize(v, context) for v in values] == payments
    assert all(v[0] == 0 and int.from_bytes(v[1:5], "big") == registered.schema_id for v in values)


def test_avro_use_latest_version_and_an_incompatible_change(registry_node, client):
    topic = topic_name("payments")
    subject = f"{topic}-value"
    client.register_schema(subject, Schema(json.dumps(PAYMENT), "AVRO"))
    latest_id = client.register_schema(subject, Schema(json.dumps(PAYMENT_V2), "AVRO"))
    serialize = AvroSerializer(client, conf={"auto.register.schemas": False, "use.latest.version": True})
    context = SerializationContext(topic, MessageField.VALUE)
    produce(registry_node.bootstrap, topic, [serialize({"id": "x", "amount": 2.0}, context)])
    [value] = consume(registry_node.bootstrap, topic, 1)
    assert int.from_bytes(value[1:5], "big") == latest_id
    reader = AvroDeserializer(client, json.dumps(PAYMENT_V2))
    assert reader(value, context) == {"id": "x", "amount": 2.0, "currency": "EUR"}

    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(PAYMENT_BREAKING), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 40901)
    assert "incompatible" in refused.value.error_message
    assert client.get_versions(subject) == [1, 2]


def test_json_schema_round_trip_and_use_latest_version(registry_node, client):
    topic = topic_name("orders")
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = JSONSerializer(json.dumps(ORDER_JSON), client)
    orders = [{"id": i, "item": f"thing {i}"} for i in range(10)]
    produce(registry_node.bootstrap, topic, [serialize(o, context) for o in orders])
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON" and json.loads(registered.schema.schema_str) == ORDER_JSON

    latest = JSONSerializer(None, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    produce(registry_node.bootstrap, topic, [latest({"id": 99}, context)])
    deserialize = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry_node.registry_url}))
    values = consume(registry_node.bootstrap, topic, len(orders) + 1)
    assert [deserialize(v, context) for v in values] == orders + [{"id": 99}]
    with pytest.raises(SerializationError):  # the schema refuses what does not match it, before anything is sent
        serialize({"id": "not a number"}, context)


def order_message_class():
    """A Protobuf message class made at run time (as protoc's generated code would), using a well-known type."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    message = file.message_type.add(name="Order")
    scalar = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=scalar.TYPE_STRING, label=scalar.LABEL_OPTIONAL)
    message.field.add(name="quantity", number=2, type=scalar.TYPE_INT32, label=scalar.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=scalar.TYPE_STRING, label=scalar.LABEL_REPEATED)
    message.field.add(name="placed_at", number=4, type=scalar.TYPE_MESSAGE, label=scalar.LABEL_OPTIONAL,
                      type_name=".google.protobuf.Timestamp")
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_round_trip(registry_node, client):
    order_class = order_message_class()
    topic = topic_name("pb-orders")
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    orders = []
    for i in range(10):
        order = order_class(id=f"o{i}", quantity=i, tags=["a", str(i)])
        order.placed_at.seconds = 1_700_000_000 + i
        orders.append(order)
    produce(registry_node.bootstrap, topic, [serialize(o, context) for o in orders])

    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert "message Order" in registered.schema.schema_str  # stored as .proto text, as Confluent stores it
    deserialize = ProtobufDeserializer(order_class, {"use.deprecated.format": False},
                                       SchemaRegistryClient({"url": registry_node.registry_url}))
    values = consume(registry_node.bootstrap, topic, len(orders))
    assert [deserialize(v, context) for v in values] == orders

    # a client of its own: confluent-kafka caches a subject's latest version whatever format it asked for
    fresh = SchemaRegistryClient({"url": registry_node.registry_url})
    latest = ProtobufSerializer(order_class, fresh, {"use.deprecated.format": False, "auto.register.schemas": False,
                                                     "use.latest.version": True})
    assert latest(orders[0], context)[1:5] == registered.schema_id.to_bytes(4, "big")
