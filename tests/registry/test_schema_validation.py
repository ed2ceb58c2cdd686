"""Broker-side schema id validation (confluent.key/value.schema.validation): the check itself, its hook in
the produce path, and a node with a registry refusing records without a registered schema id."""

from __future__ import annotations

import json
import struct
import threading
import time
import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.protocol import records as rec
from odradek.protocol.errors import ErrorCode
from odradek.protocol.errors import KafkaError as OdradekError
from odradek.registry import validation
from odradek.registry.records import SchemaRecord, encode, schema_key
from odradek.registry.state import RegistryState
from odradek.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig
from tests.conftest import NodeProcess
from tests.registry.conftest import RegistryHttp, start_registry_node

PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}


def framed(schema_id: int, payload: bytes = b"payload") -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def record(key: bytes | None, value: bytes | None) -> rec.Record:
    return rec.Record(0, 0, key, value, [])


# the check, sans-I/O

LIVE = {"orders-value": {1, 7}, "orders-key": {3}, "other-value": {9}}


def errors_of(field: str, *records: rec.Record, topic: str = "orders") -> list[tuple[int, str]]:
    asked = []

    def live_ids(subject: str) -> set[int]:
        asked.append(subject)
        return LIVE.get(subject, set())

    found = validation.record_errors(topic, field, records, live_ids)
    assert len(asked) <= 1, "the live ids of a subject are looked up once per batch"
    return found


def test_values_with_registered_ids_pass():
    assert errors_of("value", record(None, framed(1)), record(b"k", framed(7)), record(b"k", framed(1, b""))) == []


def test_an_unknown_id_is_refused_naming_the_record():
    (error,) = errors_of("value", record(None, framed(1)), record(None, framed(42)))
    assert error[0] == 1
    assert "schema id 42" in error[1] and "orders-value" in error[1]


def test_the_id_of_another_subject_is_refused():
    (error,) = errors_of("value", record(None, framed(9)))
    assert error[0] == 0 and "schema id 9" in error[1] and "orders-value" in error[1]
    assert errors_of("value", record(None, framed(9)), topic="other") == []


def test_the_id_of_a_soft_deleted_version_is_refused():
    store = SimpleNamespace(lock=threading.Lock(), state=SimpleNamespace(versions=lambda subject: [
        SimpleNamespace(id=1, deleted=False), SimpleNamespace(id=2, deleted=True)] if subject == "orders-value" else []))
    live_ids = validation.live_ids_of(SimpleNamespace(store=store))
    assert live_ids("orders-value") == {1}
    assert not store.lock.locked()
    errors = validation.record_errors("orders", "value", [record(None, framed(1)), record(None, framed(2))], live_ids)
    assert [index for index, _ in errors] == [1]
    assert "schema id 2" in errors[0][1]


def test_a_value_too_short_for_the_wire_format_is_refused():
    errors = errors_of("value", record(None, b""), record(None, b"\x00\x00\x00\x01"))
    assert [index for index, _ in errors] == [0, 1]
    assert "0 bytes is too short" in errors[0][1] and "4 bytes is too short" in errors[1][1]


def test_a_wrong_magic_byte_is_refused():
    plain = json.dumps({"id": "p1"}).encode()
    (error,) = errors_of("value", record(None, plain))
    assert error[0] == 0 and f"starts with byte {plain[0]}" in error[1] and "magic byte 0" in error[1]
    (error,) = errors_of("value", record(None, b"\x01" + framed(1)[1:]))
    assert "starts with byte 1" in error[1]


def test_a_tombstone_passes():
    assert errors_of("value", record(b"k", None)) == []
    assert errors_of("key", record(None, b"anything")) == []  # no key: nothing to validate


def test_keys_are_validated_against_the_key_subject():
    assert errors_of("key", record(framed(3), b"plain value")) == []
    errors = errors_of("key", record(framed(1), None), record(b"plain key", None))
    assert [index for index, _ in errors] == [0, 1]
    assert "orders-key" in errors[0][1] and "key's schema id 1" in errors[0][1]
    assert "the key starts with byte" in errors[1][1]


def test_the_refusal_names_every_record_and_shows_three():
    errors = [(index, f"problem {index}") for index in range(5)]
    refusal = validation.refusal(errors)
    assert refusal.code == ErrorCode.INVALID_RECORD
    assert refusal.record_errors == tuple(errors)
    assert "5 record errors in total" in refusal.message
    assert "RecordError(batchIndex=2, message='problem 2')" in refusal.message and "batchIndex=3" not in refusal.message


# the produce path's hook, on a batch as a client sends it

def fake_node(live: dict[str, set[int]] | None, ready: bool = True):
    """A node whose registry state holds these subjects' ids (as a node's registry would after reading them)."""
    if live is None:
        return SimpleNamespace(node_id=1, registry_server=None)
    state = RegistryState()
    for offset, (subject, schema_id) in enumerate((s, i) for s, ids in live.items() for i in sorted(ids)):
        value = SchemaRecord(subject, offset + 1, schema_id, '"string"').value()
        state.apply(encode(schema_key(subject, offset + 1)), encode(value), offset)
    store = SimpleNamespace(lock=threading.Lock(), state=state, ready=threading.Event(), topic="_schemas")
    if ready:
        store.ready.set()
    return SimpleNamespace(node_id=1, registry_server=SimpleNamespace(store=store))


def test_check_produce_decodes_the_batch_and_validates_the_flagged_fields():
    config = LogConfig.from_properties({"confluent.key.schema.validation": "true",
                                        "confluent.value.schema.validation": "true"})
    node = fake_node(LIVE)
    validation.check_produce(node, "orders", rec.build_batch([(framed(3), framed(1)), (None, None)]), config)
    with pytest.raises(OdradekError) as refused:
        validation.check_produce(node, "orders", rec.build_batch([(framed(3), framed(1)), (b"k", framed(3))]), config)
    assert refused.value.code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in refused.value.record_errors] == [1, 1]  # its key and its value

    values_only = LogConfig.from_properties({"confluent.value.schema.validation": "true"})
    validation.check_produce(node, "orders", rec.build_batch([(b"plain key", framed(7))]), values_only)


def test_an_id_the_node_has_not_read_yet_gets_a_retriable_error_for_a_while(monkeypatch):
    config = LogConfig.from_properties({"confluent.value.schema.validation": "true"})
    batch = rec.build_batch([(None, framed(99))])  # newer than any id this node's registry has read
    clock = [1000.0]
    monkeypatch.setattr(validation.time, "monotonic", lambda: clock[0])
    for _ in range(2):
        with pytest.raises(OdradekError) as waiting:
            validation.check_produce(fake_node(LIVE), "orders", batch, config)
        assert waiting.value.code == ErrorCode.REQUEST_TIMED_OUT  # producers retry it
        clock[0] += validation.CATCH_UP_S / 2 - 0.01
    clock[0] += 1
    with pytest.raises(OdradekError) as refused:
        validation.check_produce(fake_node(LIVE), "orders", batch, config)
    assert refused.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(OdradekError) as loading:
        validation.check_produce(fake_node(LIVE, ready=False), "orders", rec.build_batch([(None, framed(1))]), config)
    assert loading.value.code == ErrorCode.REQUEST_TIMED_OUT


def test_check_produce_without_a_registry_on_the_node_refuses():
    config = LogConfig.from_properties({"confluent.value.schema.validation": "true"})
    with pytest.raises(OdradekError) as refused:
        validation.check_produce(fake_node(None), "orders", rec.build_batch([(None, framed(1))]), config)
    assert refused.value.code == ErrorCode.INVALID_RECORD
    assert "schema.registry.listener" in refused.value.message
    assert "confluent.value.schema.validation" in refused.value.message


def test_the_settings_are_topic_configs_off_by_default():
    assert {"confluent.key.schema.validation", "confluent.value.schema.validation"} <= TOPIC_CONFIG_NAMES
    config = LogConfig()
    assert not config.confluent_key_schema_validation and not config.confluent_value_schema_validation
    assert config.to_properties()["confluent.value.schema.validation"] == "false"
    assert LogConfig.from_properties({"confluent.value.schema.validation": "TRUE"}).confluent_value_schema_validation


# a node with a registry, and real clients

@pytest.fixture(scope="module")
def validating_node(tmp_path_factory):
    node = start_registry_node(tmp_path_factory.mktemp("validation") / "data")
    yield node
    node.stop()


def register(node, subject: str, schema: dict) -> int:
    answer = RegistryHttp(node.registry_url).ok("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)})
    return answer["id"]


def create_topic(admin: AdminClient, topic: str, config: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def described(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(30).items()}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    """Each value in its own batch (so one refusal does not take the others with it): the delivery errors."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0})
    outcomes: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda error, message: outcomes.append(error))
        assert producer.flush(30) == 0
    return outcomes


def consume(bootstrap: str, topic: str) -> list[bytes]:
    """Every value in the topic's partition 0, up to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return values
            values.append(message.value())
    finally:
        consumer.close()
    raise AssertionError(f"no end of {topic} within 30s; read {values}")


def test_a_topic_with_value_validation_takes_only_registered_ids(validating_node):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    topic = f"payments-{uuid.uuid4().hex[:8]}"
    schema_id = register(validating_node, f"{topic}-value", PAYMENT)
    other_id = register(validating_node, f"other-{uuid.uuid4().hex[:8]}-value", {**PAYMENT, "name": "Refund"})
    assert other_id != schema_id
    admin = AdminClient({"bootstrap.servers": validating_node.bootstrap})
    create_topic(admin, topic, {"confluent.value.schema.validation": "true"})
    assert described(admin, topic)["confluent.value.schema.validation"] == "true"
    assert described(admin, topic)["confluent.key.schema.validation"] == "false"

    good = framed(schema_id, b"\x04p1\x00\x00\x00\x00\x00\x00\xf8?")
    outcomes = produce(validating_node.bootstrap, topic, [good, b'{"id": "p2"}', framed(other_id), None, good])
    assert outcomes[0] is None and outcomes[3] is None and outcomes[4] is None, outcomes
    for refused in outcomes[1:3]:
        assert refused is not None and refused.code() == KafkaError.INVALID_RECORD, outcomes

    producer = KafkaProducer(bootstrap_servers=validating_node.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send(topic, b"plain text").get(timeout=30)
        producer.send(topic, good).get(timeout=30)
    finally:
        producer.close()

    assert consume(validating_node.bootstrap, topic) == [good, None, good, good]


def test_alter_configs_turns_validation_on_for_an_existing_topic(validating_node):
    topic = f"events-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": validating_node.bootstrap})
    create_topic(admin, topic, {})
    assert described(admin, topic)["confluent.key.schema.validation"] == "false"
    assert produce(validating_node.bootstrap, topic, [b"before"]) == [None]

    key_id = register(validating_node, f"{topic}-key", {"type": "string"})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("confluent.key.schema.validation", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert described(admin, topic)["confluent.key.schema.validation"] == "true"

    producer = Producer({"bootstrap.servers": validating_node.bootstrap, "linger.ms": 0, "retries": 0})
    outcomes = []
    deadline = time.monotonic() + 30
    while not outcomes or outcomes[-1] is None:  # the node applies the change just after it is committed
        assert time.monotonic() < deadline, outcomes
        producer.produce(topic, key=b"plain key", value=b"v", on_delivery=lambda error, message: outcomes.append(error))
        producer.flush(30)
    assert outcomes[-1].code() == KafkaError.INVALID_RECORD
    producer.produce(topic, key=framed(key_id, b"\x02k"), value=b"after",
                     on_delivery=lambda error, message: outcomes.append(error))
    producer.flush(30)
    assert outcomes[-1] is None
    accepted = len(outcomes) - 2  # the plain keys produced before the change applied
    assert consume(validating_node.bootstrap, topic) == [b"before"] + [b"v"] * accepted + [b"after"]


def test_a_node_without_a_registry_refuses_produces_to_a_validated_topic(tmp_path):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    node = NodeProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        create_topic(admin, "validated", {"confluent.value.schema.validation": "true"})
        create_topic(admin, "plain", {})
        (refused,) = produce(node.bootstrap, "validated", [framed(1)])
        assert refused is not None and refused.code() == KafkaError.INVALID_RECORD
        producer = KafkaProducer(bootstrap_servers=node.bootstrap, retries=0)
        try:
            with pytest.raises(InvalidRecordError, match="needs schema.registry.listener"):
                producer.send("validated", framed(1)).get(timeout=30)
        finally:
            producer.close()
        assert produce(node.bootstrap, "plain", [b"unchecked"]) == [None]
    finally:
        node.stop()
