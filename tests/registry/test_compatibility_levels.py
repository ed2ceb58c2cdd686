"""Each compatibility level with each format: a subject holds v1 and v2 (registered under NONE, so they need
not be compatible with each other), and v3 is compatible with v2 only; whether v3 may follow decides between
the plain levels (the latest version) and the transitive ones (every version), and between BACKWARD
(v3 reads the old data), FORWARD (the old versions read v3's data) and FULL (both)."""

from __future__ import annotations

import json

import pytest

from odradek.registry.errors import RegistryError
from odradek.registry.state import RegisterRequest, RegistryState
from tests.registry.test_state import Topic


def avro(field_type: str) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": field_type}]})


def json_schema(field_type: str) -> str:
    return json.dumps({"type": "object", "properties": {"a": {"type": field_type}}})


def proto(field_type: str) -> str:
    return f'syntax = "proto3";\npackage levels;\nmessage R {{\n  {field_type} a = 1;\n}}\n'


# (v1, v2, v3) per format: v3 is compatible with v2 as the table below says, and not with v1 at all
CHAINS = {
    # string, int, long: long reads int (a promotion), int cannot read long, nothing numeric reads string
    "AVRO": (avro("string"), avro("int"), avro("long")),
    # string, integer, number: number widens integer, integer narrows number, string is another type
    "JSON": (json_schema("string"), json_schema("integer"), json_schema("number")),
    # string, int32, int64: int32 and int64 are one wire-compatible group in Confluent's rules, string is not
    "PROTOBUF": (proto("string"), proto("int32"), proto("int64")),
}
ACCEPTED = {  # may v3 follow, at each level
    "AVRO": {"NONE", "BACKWARD"},
    "JSON": {"NONE", "BACKWARD"},
    "PROTOBUF": {"NONE", "BACKWARD", "FORWARD", "FULL"},
}
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


@pytest.mark.parametrize("schema_type", sorted(CHAINS))
@pytest.mark.parametrize("level", LEVELS)
def test_a_level_accepts_or_refuses_the_third_version(schema_type, level):
    state, topic = RegistryState(), Topic()
    v1, v2, v3 = CHAINS[schema_type]
    topic.append(state, state.plan_config("s", {"compatibility": "NONE"}))
    for schema in (v1, v2):
        topic.append(state, state.plan_register("s", RegisterRequest(schema, schema_type), normalize=False))
    topic.append(state, state.plan_config("s", {"compatibility": level}))
    reasons = state.compatibility_errors("s", RegisterRequest(v3, schema_type), None)
    if level in ACCEPTED[schema_type]:
        assert reasons == []
        write = state.plan_register("s", RegisterRequest(v3, schema_type), normalize=False)
        assert write.answer["version"] == 3
    else:
        assert reasons, "a refusal names its reasons"
        with pytest.raises(RegistryError) as refused:
            state.plan_register("s", RegisterRequest(v3, schema_type), normalize=False)
        assert (refused.value.status, refused.value.error_code) == (409, 40901)


@pytest.mark.parametrize("schema_type", sorted(CHAINS))
def test_checking_one_version_uses_the_plain_level(schema_type):
    """POST /compatibility/subjects/s/versions/1 checks against version 1 alone, even at a transitive level."""
    state, topic = RegistryState(), Topic()
    v1, v2, v3 = CHAINS[schema_type]
    topic.append(state, state.plan_config("s", {"compatibility": "NONE"}))
    for schema in (v1, v2):
        topic.append(state, state.plan_register("s", RegisterRequest(schema, schema_type), normalize=False))
    topic.append(state, state.plan_config("s", {"compatibility": "BACKWARD_TRANSITIVE"}))
    assert state.compatibility_errors("s", RegisterRequest(v3, schema_type), 2) == []
    assert state.compatibility_errors("s", RegisterRequest(v3, schema_type), 1) != []
