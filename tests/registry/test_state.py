"""The registry's state machine, driven by `_schemas` records as Confluent's registry writes them."""

from __future__ import annotations

import json

import pytest

from odradek.registry import records as rec
from odradek.registry.errors import RegistryError
from odradek.registry.state import RegisterRequest, RegistryState

USER_V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
USER_NO_DEFAULT = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})


class Topic:
    """An in-memory `_schemas`: appends a write's records and feeds them to the states reading it."""

    def __init__(self):
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, state: RegistryState, write) -> None:
        for key, value in write.records:
            self.records.append((rec.encode(key), rec.encode(value)))
            state.apply(self.records[-1][0], self.records[-1][1], len(self.records) - 1)

    def compacted(self) -> list[tuple[bytes, bytes]]:
        """What compaction leaves once tombstones have expired: the latest value of each key, if not null."""
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for offset, (key, value) in enumerate(self.records):
            latest[key] = (offset, value)
        return [(key, value) for key, (_, value) in sorted(latest.items(), key=lambda kv: kv[1][0])
                if value is not None]


def register(state: RegistryState, topic: Topic, subject: str, schema: str, **options):
    write = state.plan_register(subject, RegisterRequest(schema, **options), normalize=False)
    topic.append(state, write)
    return write.answer


def test_confluent_records_are_read_as_they_are():
    state = RegistryState()
    records = [
        ({"keytype": "NOOP", "magic": 0}, None),
        ({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "SCHEMA", "subject": "users-value", "version": 1, "magic": 1},
         {"subject": "users-value", "version": 1, "id": 7, "schema": USER_V1, "deleted": False}),
        ({"keytype": "SCHEMA", "subject": "users-value", "version": 2, "magic": 1},
         {"subject": "users-value", "version": 2, "id": 9, "schema": USER_V2, "deleted": False,
          "metadata": {"properties": {"owner": "team-a"}}}),
        ({"keytype": "CONFIG", "subject": "users-value", "magic": 0}, {"compatibilityLevel": "NONE"}),
        ({"keytype": "MODE", "subject": "users-value", "magic": 0}, {"mode": "READONLY"}),
        ({"keytype": "CONTEXT", "tenant": "default", "context": ".", "magic": 0}, {"tenant": "default"}),
    ]
    for offset, (key, value) in enumerate(records):
        state.apply(rec.encode(key), rec.encode(value), offset)
    state.apply(b"not json", b"{}", len(records))  # skipped, as Confluent's reader skips it
    assert state.next_offset == len(records) + 1
    assert [r.id for r in state.versions("users-value")] == [7, 9]
    assert state.version("users-value", -1).metadata == {"properties": {"owner": "team-a"}}
    assert state.compatibility_level("users-value") == "NONE"
    assert state.compatibility_level("orders-value") == "FULL"
    assert state.mode("users-value") == "READONLY" and state.mode(None) == "READWRITE"
    assert state.max_id == 9


def test_delete_subject_and_clear_subject_records():
    state, topic = RegistryState(), Topic()
    register(state, topic, "s", USER_V1)
    register(state, topic, "s", USER_V2)
    topic.append(state, state.plan_delete_subject("s", permanent=False))
    assert state.versions("s") == [] and len(state.versions("s", deleted=True)) == 2
    state.apply(rec.encode(rec.subject_key(rec.CLEAR_SUBJECT, "s")), rec.encode({"subject": "s"}), 99)
    assert state.versions("s", deleted=True) == []


def test_one_schema_gets_one_id_and_reregistering_writes_nothing():
    state, topic = RegistryState(), Topic()
    first = register(state, topic, "a-value", USER_V1)
    assert (first["id"], first["version"]) == (1, 1)
    assert register(state, topic, "b-value", USER_V1)["id"] == 1
    again = state.plan_register("a-value", RegisterRequest(USER_V1), normalize=False)
    assert again.records == [] and again.answer["id"] == 1
    assert register(state, topic, "a-value", USER_V2)["id"] == 2


def test_an_incompatible_schema_is_refused_with_confluents_conflict():
    state, topic = RegistryState(), Topic()
    register(state, topic, "s", USER_V1)
    with pytest.raises(RegistryError) as refused:
        state.plan_register("s", RegisterRequest(USER_NO_DEFAULT), normalize=False)
    assert (refused.value.status, refused.value.error_code) == (409, 40901)
    assert "incompatible with an earlier schema" in refused.value.message
    topic.append(state, state.plan_config("s", {"compatibility": "NONE"}))
    assert register(state, topic, "s", USER_NO_DEFAULT)["version"] == 2


def test_an_id_is_never_given_again_after_a_permanent_delete_and_compaction():
    state, topic = RegistryState(), Topic()
    register(state, topic, "keep", USER_V1)
    dropped = register(state, topic, "drop", USER_NO_DEFAULT)
    topic.append(state, state.plan_delete_subject("drop", permanent=False))
    topic.append(state, state.plan_delete_subject("drop", permanent=True))
    replayed = RegistryState()
    for offset, (key, value) in enumerate(topic.compacted()):
        replayed.apply(key, value, offset)
    assert replayed.subject_names(deleted=True) == ["keep"]
    later = replayed.plan_register("new", RegisterRequest(USER_V2), normalize=False)
    assert later.answer["id"] == dropped["id"] + 1


def test_a_permanent_delete_needs_a_soft_delete_first():
    state, topic = RegistryState(), Topic()
    register(state, topic, "s", USER_V1)
    with pytest.raises(RegistryError) as refused:
        state.plan_delete_version("s", 1, permanent=True)
    assert refused.value.error_code == 40407
    with pytest.raises(RegistryError) as refused:
        state.plan_delete_subject("s", permanent=True)
    assert refused.value.error_code == 40405
    topic.append(state, state.plan_delete_version("s", 1, permanent=False))
    with pytest.raises(RegistryError) as refused:
        state.plan_delete_version("s", 1, permanent=False)
    assert refused.value.error_code == 40406


def test_import_mode_keeps_the_given_ids_and_versions():
    state, topic = RegistryState(), Topic()
    topic.append(state, state.plan_mode(None, {"mode": "IMPORT"}, force=False))
    answer = register(state, topic, "s", USER_V1, id=100, version=5)
    assert (answer["id"], answer["version"]) == (100, 5)
    with pytest.raises(RegistryError) as refused:
        state.plan_register("t", RegisterRequest(USER_V2), normalize=False)
    assert refused.value.error_code == 42205  # no id given in IMPORT mode
    with pytest.raises(RegistryError) as refused:
        state.plan_register("t", RegisterRequest(USER_V2, id=100), normalize=False)
    assert refused.value.error_code == 42207  # id 100 is another schema
    topic.append(state, state.plan_mode(None, {"mode": "READWRITE"}, force=False))
    assert register(state, topic, "t", USER_V2)["id"] == 101


def test_import_mode_is_refused_on_a_registry_with_subjects_unless_forced():
    state, topic = RegistryState(), Topic()
    register(state, topic, "s", USER_V1)
    with pytest.raises(RegistryError) as refused:
        state.plan_mode(None, {"mode": "IMPORT"}, force=False)
    assert refused.value.error_code == 42205
    assert state.plan_mode(None, {"mode": "IMPORT"}, force=True).answer == {"mode": "IMPORT"}


def test_read_only_mode_refuses_writes():
    state, topic = RegistryState(), Topic()
    topic.append(state, state.plan_mode("s", {"mode": "READONLY"}, force=False))
    with pytest.raises(RegistryError) as refused:
        state.plan_register("s", RegisterRequest(USER_V1), normalize=False)
    assert refused.value.error_code == 42205
    assert register(state, topic, "other", USER_V1)["id"] == 1


ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "acme",
                      "fields": [{"name": "city", "type": "string"}]})
PERSON = json.dumps({"type": "record", "name": "Person", "namespace": "acme",
                     "fields": [{"name": "home", "type": "acme.Address"}]})


def person_referencing_address(version: int) -> tuple[RegistryState, dict]:
    """Subject "address" holds Address; "person" holds Person, which references it at `version`."""
    state, topic = RegistryState(), Topic()
    register(state, topic, "address", ADDRESS)
    return state, register(state, topic, "person", PERSON,
                           references=(rec.Reference("acme.Address", "address", version),))


def test_a_referenced_version_cannot_be_deleted():
    state, answer = person_referencing_address(1)
    assert state.referenced_by("address", 1) == [answer["id"]]
    with pytest.raises(RegistryError) as refused:
        state.plan_delete_version("address", 1, permanent=False)
    assert refused.value.error_code == 42206


def test_an_unknown_reference_is_an_invalid_schema():
    state = RegistryState()
    person = json.dumps({"type": "record", "name": "Person", "fields": [{"name": "home", "type": "acme.Address"}]})
    with pytest.raises(RegistryError) as refused:
        state.plan_register("person", RegisterRequest(person, references=(rec.Reference("acme.Address", "nope", 1),)),
                            normalize=False)
    assert refused.value.error_code == 42201


def test_config_levels_and_their_errors():
    state, topic = RegistryState(), Topic()
    with pytest.raises(RegistryError) as refused:
        state.plan_config(None, {"compatibility": "SIDEWAYS"})
    assert refused.value.error_code == 42203
    topic.append(state, state.plan_config(None, {"compatibility": "forward_transitive"}))
    assert state.config_json(None) == {"compatibilityLevel": "FORWARD_TRANSITIVE"}
    with pytest.raises(RegistryError) as refused:
        state.config_json("s")
    assert refused.value.error_code == 40408
    assert state.config_json("s", default_to_global=True) == {"compatibilityLevel": "FORWARD_TRANSITIVE"}


def test_records_that_cannot_be_read_are_skipped_and_reading_goes_on():
    state = RegistryState()
    bad = [
        ({"keytype": "ID_WATERMARK", "magic": 0}, b'{"maxId": 1e999}'),
        (rec.schema_key("s", 1), b'{"subject": 5, "version": 1, "id": 1, "schema": "\\"string\\""}'),
        (rec.schema_key("s", 1), b'{"subject": "s", "version": 1, "id": 1099511627776, "schema": "\\"int\\""}'),
        (rec.subject_key(rec.MODE, None), b'{"mode": "SIDEWAYS"}'),
        (rec.subject_key(rec.CONFIG, None), b'{"compatibilityLevel": 3}'),
    ]
    for offset, (key, value) in enumerate(bad):
        state.apply(rec.encode(key), value, offset)
    state.apply(rec.encode(rec.schema_key("s", 1)),
                rec.encode(schema_value("s", 1, 1, USER_V1)), len(bad))
    assert state.next_offset == len(bad) + 1
    assert state.subject_names() == ["s"] and state.max_id == 1
    assert state.mode(None) == "READWRITE" and state.compatibility_level(None) == "BACKWARD"


def schema_value(subject: str, version: int, schema_id: int, schema: str) -> dict:
    return rec.SchemaRecord(subject, version, schema_id, schema).value()


def test_an_imported_id_must_fit_confluents_four_bytes():
    state, topic = RegistryState(), Topic()
    topic.append(state, state.plan_mode(None, {"mode": "IMPORT"}, force=False))
    for schema_id in (0, 2**31, 2**40):
        with pytest.raises(RegistryError) as refused:
            state.plan_register("s", RegisterRequest(USER_V1, id=schema_id), normalize=False)
        assert refused.value.status == 422


def test_import_mode_removes_soft_deleted_versions_so_imports_can_take_their_place():
    state, topic = RegistryState(), Topic()
    register(state, topic, "s", USER_V1)
    topic.append(state, state.plan_delete_subject("s", permanent=False))
    topic.append(state, state.plan_mode(None, {"mode": "IMPORT"}, force=False))
    assert state.versions("s", deleted=True) == []
    assert register(state, topic, "s", USER_V2, id=50, version=1)["version"] == 1


def test_a_reference_to_the_latest_version_is_stored_with_its_number():
    state, answer = person_referencing_address(-1)
    assert state.version("person", 1).references == (rec.Reference("acme.Address", "address", 1),)
    assert state.referenced_by("address", 1) == [answer["id"]]


def test_a_subject_config_without_a_level_reports_the_level_in_force():
    state, topic = RegistryState(), Topic()
    topic.append(state, state.plan_config(None, {"compatibility": "FULL"}))
    topic.append(state, state.plan_config("s", {"normalize": True}))
    assert state.config_json("s") == {"compatibilityLevel": "FULL", "normalize": True}
