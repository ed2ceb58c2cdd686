"""Every declaration in odradek.protocol.messages matches Kafka's JSON message specs, field by field."""

import json
import re
from pathlib import Path

import pytest

from odradek.protocol.messages import API_BY_KEY, SUPPORTED_APIS, api_by_name
from odradek.protocol.schema import Array, Primitive, Struct, Versions, snake_case

SPECS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-protocol" / "message"

pytestmark = pytest.mark.skipif(not SPECS.is_dir(), reason=f"Kafka message specs not found at {SPECS}")

INTEGER_TYPES = {"int8", "int16", "uint16", "int32", "uint32", "int64"}


def load_spec(name: str) -> dict:
    """Kafka's specs are JSON with // comments (whole-line and trailing, never inside strings)."""
    text = (SPECS / f"{name}.json").read_text()
    text = "\n".join(re.sub(r'^((?:[^"/]|"(?:[^"\\]|\\.)*")*)//.*$', r"\1", line) for line in text.splitlines())
    return json.loads(text)


def kafka_type(t) -> str:
    if isinstance(t, Primitive):
        return t.name
    if isinstance(t, Array):
        return "[]" + kafka_type(t.elem)
    return t.name


def expected_default(spec_field: dict):
    value = str(spec_field["default"])
    if value == "null":
        return None
    if spec_field["type"] == "bool":
        return value.lower() == "true"
    if spec_field["type"] in INTEGER_TYPES:
        return int(value, 0)
    if spec_field["type"] == "float64":
        return float(value)
    return value


def compare_fields(declared: Struct, spec_fields: list[dict], common: dict[str, dict], path: str) -> None:
    assert [f.name for f in declared.fields] == [snake_case(f["name"]) for f in spec_fields], path
    for field, spec in zip(declared.fields, spec_fields, strict=True):
        where = f"{path}.{spec['name']}"
        assert kafka_type(field.type) == spec["type"], where
        assert field.versions == Versions(spec["versions"]), where
        assert field.nullable_versions == Versions(spec.get("nullableVersions")), where
        assert field.tagged_versions == Versions(spec.get("taggedVersions")), where
        assert field.tag == spec.get("tag"), where
        assert field.has_default == ("default" in spec), where
        if "default" in spec:
            assert field.default == expected_default(spec), where
            assert type(field.default) is type(expected_default(spec)), where
        struct_type = field.type.elem if isinstance(field.type, Array) else field.type
        if isinstance(struct_type, Struct):
            struct_name = spec["type"].removeprefix("[]")
            nested = spec["fields"] if "fields" in spec else common[struct_name]["fields"]
            compare_fields(struct_type, nested, common, where)
        else:
            assert "fields" not in spec, where


def version_range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


@pytest.mark.parametrize("api", SUPPORTED_APIS, ids=lambda api: api.name)
def test_declaration_matches_kafka_spec(api):
    for direction, declared in (("Request", api.request), ("Response", api.response)):
        spec = load_spec(f"{api.name}{direction}")
        assert spec["type"] == direction.lower()
        assert spec["name"] == f"{api.name}{direction}"
        assert spec["apiKey"] == api.key
        assert api.valid_versions == version_range(spec["validVersions"])
        flexible = spec["flexibleVersions"]
        assert api.flexible_from == (None if flexible == "none" else Versions(flexible).lo)
        assert Versions(flexible).hi in (0, 0x7FFF)  # flexible versions are always "N+" or "none"
        common = {s["name"]: s for s in spec.get("commonStructs", [])}
        compare_fields(declared, spec["fields"], common, f"{api.name}{direction}")


def test_registry_covers_the_apis_odradek_needs():
    needed = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
              32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 59, 60, 61, 62, 63,
              64, 65, 66, 67, 68, 69, 74, 75}
    assert set(API_BY_KEY) == needed
    assert all(API_BY_KEY[key].key == key for key in needed)
    assert api_by_name("Produce") is API_BY_KEY[0]
    assert api_by_name("ApiVersions").valid_versions == (0, 4)


def test_drift_is_detected():
    """The comparison is not vacuous: a declaration with a wrong version range fails it."""
    api = API_BY_KEY[0]
    spec = load_spec("ProduceRequest")
    spec["fields"][1] = dict(spec["fields"][1], versions="1+")
    with pytest.raises(AssertionError):
        compare_fields(api.request, spec["fields"], {}, "ProduceRequest")
