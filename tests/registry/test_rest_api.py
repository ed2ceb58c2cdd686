"""The registry's REST API over HTTP, as Confluent Schema Registry answers it, and bad input refused with
Confluent's error codes, writing nothing."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

RECORD = {"type": "record", "name": "Thing", "fields": [{"name": "a", "type": "string"}]}
RECORD_V2 = {**RECORD, "fields": RECORD["fields"] + [{"name": "b", "type": "int", "default": 1}]}


def subject_name(prefix: str = "s") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def avro(schema: dict, **fields) -> dict:
    return {"schema": json.dumps(schema), **fields}


def schemas_end_offset(bootstrap: str) -> int:
    """The end of `_schemas` (0 while it does not exist: a refused write may create it, empty)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": "read_committed"})
    try:
        if "_schemas" not in consumer.list_topics(timeout=10).topics:
            return 0
        return consumer.get_watermark_offsets(TopicPartition("_schemas", 0), timeout=10)[1]
    finally:
        consumer.close()


def test_register_read_and_delete_as_confluent_answers(registry):
    subject = subject_name()
    first = registry.ok("POST", f"/subjects/{subject}/versions", avro(RECORD))
    second = registry.ok("POST", f"/subjects/{subject}/versions", avro(RECORD_V2))
    assert second["id"] > first["id"] and second["version"] == 2
    assert registry.ok("GET", f"/subjects/{subject}/versions") == [1, 2]
    latest = registry.ok("GET", f"/subjects/{subject}/versions/latest")
    assert latest == {"subject": subject, "version": 2, "id": second["id"],
                      "schema": json.dumps(RECORD_V2, separators=(",", ":"))}
    assert registry.ok("GET", f"/subjects/{subject}/versions/1/schema") == RECORD
    assert json.loads(registry.ok("GET", f"/schemas/ids/{first['id']}")["schema"]) == RECORD
    assert registry.ok("GET", f"/schemas/ids/{first['id']}/schema") == RECORD
    assert registry.ok("GET", f"/schemas/ids/{second['id']}/versions") == [{"subject": subject, "version": 2}]
    assert subject in registry.ok("GET", "/subjects")
    assert registry.ok("GET", "/schemas/types") == ["JSON", "PROTOBUF", "AVRO"]
    looked_up = registry.ok("POST", f"/subjects/{subject}", avro(RECORD))
    assert (looked_up["version"], looked_up["id"]) == (1, first["id"])

    assert registry.ok("DELETE", f"/subjects/{subject}/versions/1") == 1
    assert registry.get(f"/subjects/{subject}/versions/1")[1]["error_code"] == 40402
    assert registry.ok("GET", f"/subjects/{subject}/versions/1?deleted=true")["id"] == first["id"]
    assert registry.ok("DELETE", f"/subjects/{subject}") == [2]
    assert subject not in registry.ok("GET", "/subjects")
    assert subject in registry.ok("GET", "/subjects?deleted=true")
    assert registry.delete(f"/subjects/{subject}")[1]["error_code"] == 40404
    assert registry.ok("DELETE", f"/subjects/{subject}?permanent=true") == [1, 2]
    assert registry.get(f"/subjects/{subject}/versions")[1]["error_code"] == 40401
    assert registry.get(f"/schemas/ids/{second['id']}")[1]["error_code"] == 40403

    again = registry.ok("POST", f"/subjects/{subject}/versions", avro(RECORD))
    assert again["id"] > second["id"], "an id is never given twice, even after a permanent delete"


def test_one_schema_under_two_subjects_has_one_id(registry):
    schema = {"type": "record", "name": "Shared", "fields": [{"name": "x", "type": "long"}]}
    one = registry.ok("POST", f"/subjects/{subject_name()}/versions", avro(schema))
    two = registry.ok("POST", f"/subjects/{subject_name()}/versions", {"schema": json.dumps(schema, indent=4)})
    assert one["id"] == two["id"]
    assert len(registry.ok("GET", f"/schemas/ids/{one['id']}/subjects")) == 2


def test_compatibility_config_and_checks(registry):
    subject = subject_name()
    registry.ok("POST", f"/subjects/{subject}/versions", avro(RECORD))
    breaking = {**RECORD, "fields": [{"name": "a", "type": "int"}]}
    check = registry.ok("POST", f"/compatibility/subjects/{subject}/versions/latest?verbose=true", avro(breaking))
    assert check["is_compatible"] is False and check["messages"]
    assert registry.ok("POST", f"/compatibility/subjects/{subject}/versions/1", avro(RECORD_V2)) == \
        {"is_compatible": True}
    status, refused = registry.post(f"/subjects/{subject}/versions", avro(breaking))
    assert (status, refused["error_code"]) == (409, 40901)

    assert registry.get(f"/config/{subject}")[1]["error_code"] == 40408
    assert registry.ok("GET", f"/config/{subject}?defaultToGlobal=true") == {"compatibilityLevel": "BACKWARD"}
    assert registry.ok("PUT", f"/config/{subject}", {"compatibility": "NONE"}) == {"compatibility": "NONE"}
    assert registry.ok("GET", f"/config/{subject}") == {"compatibilityLevel": "NONE"}
    assert registry.ok("POST", f"/subjects/{subject}/versions", avro(breaking))["version"] == 2
    assert registry.ok("DELETE", f"/config/{subject}") == {"compatibilityLevel": "NONE"}
    status, refused = registry.put(f"/config/{subject}", {"compatibility": "SOMETIMES"})
    assert (status, refused["error_code"]) == (422, 42203)


def test_modes_read_only_and_import(registry):
    subject = subject_name()
    assert registry.ok("PUT", f"/mode/{subject}", {"mode": "READONLY"}) == {"mode": "READONLY"}
    status, refused = registry.post(f"/subjects/{subject}/versions", avro(RECORD))
    assert (status, refused["error_code"]) == (422, 42205)
    assert registry.ok("PUT", f"/mode/{subject}", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    imported = registry.ok("POST", f"/subjects/{subject}/versions", avro(RECORD, id=90_000, version=3))
    assert (imported["id"], imported["version"]) == (90_000, 3)
    assert registry.ok("GET", "/schemas/ids/90000/versions") == [{"subject": subject, "version": 3}]
    assert registry.ok("DELETE", f"/mode/{subject}") == {"mode": "IMPORT"}
    assert registry.get(f"/mode/{subject}")[1]["error_code"] == 40409
    assert registry.ok("GET", "/mode") == {"mode": "READWRITE"}
    status, refused = registry.put("/mode", {"mode": "WHATEVER"})
    assert (status, refused["error_code"]) == (422, 42204)


def test_references(registry):
    address_subject, person_subject = subject_name("address"), subject_name("person")
    address = {"type": "record", "name": "Address", "namespace": "acme", "fields": [{"name": "city", "type": "string"}]}
    registry.ok("POST", f"/subjects/{address_subject}/versions", avro(address))
    person = {"type": "record", "name": "Person", "namespace": "acme", "fields": [{"name": "home", "type": "acme.Address"}]}
    references = [{"name": "acme.Address", "subject": address_subject, "version": 1}]
    registered = registry.ok("POST", f"/subjects/{person_subject}/versions", avro(person, references=references))
    assert registry.ok("GET", f"/subjects/{person_subject}/versions/1")["references"] == references
    assert registry.ok("GET", f"/subjects/{address_subject}/versions/1/referencedby") == [registered["id"]]
    status, refused = registry.delete(f"/subjects/{address_subject}/versions/1")
    assert (status, refused["error_code"]) == (422, 42206)


@pytest.mark.parametrize("body, content_type, status, code", [
    (avro(RECORD) | {"schema": '{"type": "record", "name": "X"'}, None, 422, 42201),  # not JSON
    ({"schema": '{"type": "recrod", "name": "X", "fields": []}'}, None, 422, 42201),
    ({"schema": json.dumps({"type": "record", "name": "P", "fields": [{"name": "a", "type": "acme.Missing"}]}),
      "references": [{"name": "acme.Missing", "subject": "no-such-subject", "version": 1}]}, None, 422, 42201),
    ({"schema": "syntax = \"proto3\"; message M { strin x = 1; }", "schemaType": "PROTOBUF"}, None, 422, 42201),
    ({"schema": '{"type": 12}', "schemaType": "JSON"}, None, 422, 42201),
    ({"schema": "{}", "schemaType": "XML"}, None, 422, 42201),
    ({"schema": ""}, None, 422, 42201),
    ({"schema": json.dumps(RECORD), "references": "nope"}, None, 422, 422),
    (avro(RECORD), "text/plain", 415, 415),
    ({"schema": '{"type": "record", "name": "X\ud800", "fields": []}'}, None, 422, 42201),  # a lone surrogate
    (avro(RECORD, id=5), None, 422, 42205),  # an id is kept in IMPORT mode only
])
def test_bad_input_gets_confluents_error_and_writes_nothing(registry, registry_node, body, content_type, status, code):
    registry.ok("POST", "/subjects/warm-up/versions", avro(RECORD))  # this node is the writer from here on
    subject = subject_name("bad")
    before = schemas_end_offset(registry_node.bootstrap)
    options = {"content_type": content_type} if content_type else {}
    answer_status, answer = registry.post(f"/subjects/{subject}/versions", body, **options)
    assert (answer_status, answer["error_code"]) == (status, code), answer
    assert isinstance(answer["message"], str) and answer["message"]
    assert subject not in registry.ok("GET", "/subjects?deleted=true")
    assert schemas_end_offset(registry_node.bootstrap) == before


def test_malformed_requests_are_4xx(registry):
    subject = subject_name("bad")
    assert registry.post(f"/subjects/{subject}/versions", raw=b"{not json")[1]["error_code"] == 400
    assert registry.post(f"/subjects/{subject}/versions", raw=b"[1, 2]")[1]["error_code"] == 422
    status, answer = registry.post(f"/subjects/{subject}/versions", raw=b" " * (17 * 1024 * 1024))
    assert (status, answer["error_code"]) == (422, 42209)
    assert registry.get(f"/subjects/{subject}/versions/0")[1]["error_code"] == 42202
    assert registry.get(f"/subjects/{subject}/versions/first")[1]["error_code"] == 42202
    assert registry.get("/schemas/ids/notanumber")[1]["error_code"] == 40403
    status, answer = registry.get("/no/such/path")
    assert (status, answer["error_code"]) == (404, 404)
    status, answer = registry.call("PATCH", "/subjects")
    assert (status, answer["error_code"]) == (405, 405)
    deep = b'{"schema": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert registry.post(f"/subjects/{subject}/versions", raw=deep)[1]["error_code"] == 400


def test_verbose_compatibility_names_an_invalid_schema(registry):
    subject = subject_name()
    registry.ok("POST", f"/subjects/{subject}/versions", avro(RECORD))
    answer = registry.ok("POST", f"/compatibility/subjects/{subject}/versions?verbose=true", {"schema": "{nope"})
    assert answer["is_compatible"] is False and answer["messages"]
    status, refused = registry.post(f"/compatibility/subjects/{subject}/versions", {"schema": "{nope"})
    assert (status, refused["error_code"]) == (422, 42201)
    status, refused = registry.post(f"/compatibility/subjects/{subject}/versions/7", avro(RECORD))
    assert (status, refused["error_code"]) == (404, 40402)
