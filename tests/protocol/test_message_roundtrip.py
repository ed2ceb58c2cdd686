"""Every declared message survives encode -> decode in every version; hand-written wire vectors pin the format."""

import functools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.file_region import FileRegion
from odradek.protocol.messages import API_BY_KEY, SUPPORTED_APIS, api_by_name
from odradek.protocol.schema import (
    Array,
    Bool,
    Bytes,
    EncodeError,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    MalformedMessage,
    Primitive,
    Records,
    String,
    Struct,
    UInt16,
    UInt32,
    UnsupportedVersion,
    Uuid,
)
from odradek.protocol.types import write_uvarint

INT_RANGES = {Int8: 8, Int16: 16, Int32: 32, Int64: 64}


def primitive_strategy(t: Primitive) -> st.SearchStrategy:
    if t in INT_RANGES:
        bits = INT_RANGES[t]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if t is UInt16:
        return st.integers(0, 0xFFFF)
    if t is UInt32:
        return st.integers(0, 0xFFFFFFFF)
    if t is Bool:
        return st.booleans()
    if t is Float64:
        return st.floats(allow_nan=False)
    if t is Uuid:
        return st.binary(min_size=16, max_size=16)
    if t is String:
        return st.text(max_size=12)
    if t in (Bytes, Records):
        return st.binary(max_size=24)
    raise AssertionError(t)


def type_strategy(t, version: int, flexible: bool) -> st.SearchStrategy:
    if isinstance(t, Primitive):
        return primitive_strategy(t)
    if isinstance(t, Array):
        return st.lists(type_strategy(t.elem, version, flexible), max_size=3)
    return struct_strategy(t, version, flexible)


def struct_strategy(s: Struct, version: int, flexible: bool) -> st.SearchStrategy:
    fields = {}
    for f in s.fields:
        if version not in f.versions:
            continue
        strategy = type_strategy(f.type, version, flexible)
        if version in f.nullable_versions:
            strategy = st.none() | strategy
        fields[f.name] = strategy
    return st.fixed_dictionaries(fields)


def normalise(value):
    """Decoded records are memoryviews; compare them as bytes."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


CASES = [
    pytest.param(api, direction, version, id=f"{api.name}-{direction}-v{version}")
    for api in SUPPORTED_APIS
    for direction in ("request", "response")
    for version in range(api.valid_versions[0], api.valid_versions[1] + 1)
]


@pytest.mark.parametrize(("api", "direction", "version"), CASES)
def test_encode_then_decode_gives_the_same_message(api, direction, version):
    root = api.request if direction == "request" else api.response
    encode = api.encode_request if direction == "request" else lambda v, b: b"".join(api.encode_response(v, b))
    decode = api.decode_request if direction == "request" else api.decode_response

    @settings(max_examples=8, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(struct_strategy(root, version, api.is_flexible(version)))
    def roundtrip(message):
        raw = encode(version, message)
        assert normalise(decode(version, memoryview(raw), 0)) == message
        # a prefix before the body (the request header) is skipped by pos
        assert normalise(decode(version, memoryview(b"\x07" * 5 + raw), 5)) == message

    roundtrip()


def test_missing_fields_take_their_declared_defaults():
    metadata = API_BY_KEY[3]
    decoded = metadata.decode_response(12, metadata.encode_response(12, {})[0])
    assert decoded == {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
                       "topics": []}


def test_fields_outside_the_version_are_ignored_on_encode_and_absent_on_decode():
    produce = api_by_name("Produce")
    raw = produce.encode_request(3, {"acks": 1, "timeout_ms": 5, "topic_data": [], "not_a_field": 1})
    assert produce.decode_request(3, raw) == {"transactional_id": None, "acks": 1, "timeout_ms": 5,
                                               "topic_data": []}


# ------------------------------------------------------------------------------------------- golden bytes

def test_api_versions_v0_request_body_is_empty_and_v3_carries_client_software():
    api = API_BY_KEY[18]
    assert api.encode_request(0, {}) == b""
    raw = api.encode_request(3, {"client_software_name": "librdkafka", "client_software_version": "2.4.0"})
    assert raw == b"\x0blibrdkafka" + b"\x062.4.0" + b"\x00"
    assert api.decode_request(3, raw) == {"client_software_name": "librdkafka", "client_software_version": "2.4.0"}


def test_api_versions_v3_response_bytes():
    api = API_BY_KEY[18]
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12}],
            "throttle_time_ms": 0}
    expected = (b"\x00\x00"                                 # error_code
                b"\x02" + b"\x00\x00\x00\x03\x00\x0c\x00"   # compact array of 1: key, min, max, no tags
                b"\x00\x00\x00\x00"                         # throttle_time_ms
                b"\x00")                                    # no tagged fields (all at their defaults)
    assert api.encode_response(3, body) == [expected]
    with_features = dict(body, finalized_features_epoch=7)
    raw = api.encode_response(3, with_features)[0]
    assert raw == expected[:-1] + b"\x01" + b"\x01\x08" + struct.pack(">q", 7)  # tag 1, 8 bytes


def test_metadata_v1_request_bytes():
    api = API_BY_KEY[3]
    raw = api.encode_request(1, {"topics": [{"name": "foo"}, {"name": "bar"}]})
    assert raw == b"\x00\x00\x00\x02" + b"\x00\x03foo" + b"\x00\x03bar"
    assert api.decode_request(1, raw) == {"topics": [{"name": "foo"}, {"name": "bar"}]}
    assert api.encode_request(1, {"topics": None}) == b"\xff\xff\xff\xff"  # null: all topics
    assert api.decode_request(1, b"\xff\xff\xff\xff") == {"topics": None}


def test_metadata_v12_request_uses_compact_arrays_uuids_and_tagged_sections():
    api = API_BY_KEY[3]
    topic_id = bytes(range(16))
    raw = api.encode_request(12, {"topics": [{"topic_id": topic_id, "name": "foo"}],
                                  "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    assert raw == b"\x02" + topic_id + b"\x04foo" + b"\x00" + b"\x01" + b"\x00" + b"\x00"


def test_produce_v3_request_records_stay_a_view_of_the_frame():
    api = API_BY_KEY[0]
    frame = bytearray(b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01" + b"\x00\x01t"
                      + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x03abc")
    request = api.decode_request(3, memoryview(frame), 0)
    records = request["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and bytes(records) == b"abc"
    frame[-1] = ord("z")  # zero copy: the view sees the frame
    assert bytes(records) == b"abz"
    assert request["transactional_id"] is None and request["acks"] == 1 and request["timeout_ms"] == 1000


def test_fetch_response_file_region_becomes_a_separate_part_after_its_length():
    api = API_BY_KEY[1]
    region = FileRegion(fd=9, position=4096, size=300)
    body = {"responses": [{"topic_id": bytes(16), "partitions": [
        {"partition_index": 0, "high_watermark": 10, "records": region},
        {"partition_index": 1, "records": None}]}]}
    parts = api.encode_response(16, body)
    assert len(parts) == 3 and parts[1] is region
    assert parts[0].endswith(write_uvarint(301))
    assert all(type(p) is bytes for p in (parts[0], parts[2]))
    stitched = parts[0] + b"r" * 300 + parts[2]
    decoded = api.decode_response(16, stitched)
    partitions = decoded["responses"][0]["partitions"]
    assert bytes(partitions[0]["records"]) == b"r" * 300 and partitions[1]["records"] is None


def test_records_accept_bytes_bytearray_and_memoryview():
    api = API_BY_KEY[0]
    for records in (b"xyz", bytearray(b"xyz"), memoryview(b"__xyz")[2:]):
        body = {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [
            {"index": 0, "records": records}]}]}
        decoded = api.decode_request(9, api.encode_request(9, body))
        assert bytes(decoded["topic_data"][0]["partition_data"][0]["records"]) == b"xyz"


# ------------------------------------------------------------------------------------------- tagged fields

def test_unknown_tagged_fields_are_skipped():
    api = API_BY_KEY[18]
    body = b"\x02a" + b"\x021"  # client_software_name "a", version "1"
    unknown = b"\x02" + b"\x05\x03xyz" + b"\x2a\x00"  # two unknown tags: 5 (3 bytes), 42 (empty)
    assert api.decode_request(3, body + unknown) == {"client_software_name": "a", "client_software_version": "1"}


def test_unknown_tagged_fields_inside_nested_structs_are_skipped():
    api = API_BY_KEY[0]
    raw = api.encode_request(9, {"acks": 1, "timeout_ms": 2, "topic_data": [
        {"name": "t", "partition_data": [{"index": 7, "records": b"rec"}]}]})
    partition_end = raw.index(b"rec") + 3  # the partition's empty tagged section follows its records
    assert raw[partition_end] == 0
    patched = raw[:partition_end] + b"\x01" + b"\x63\x02hi" + raw[partition_end + 1:]
    decoded = api.decode_request(9, patched)
    assert normalise(decoded["topic_data"]) == [{"name": "t", "partition_data": [{"index": 7, "records": b"rec"}]}]


def test_known_and_unknown_tagged_fields_mix_and_absent_known_tags_take_defaults():
    api = API_BY_KEY[18]
    body = api.encode_response(3, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})[0][:-1]
    tags = b"\x02" + b"\x01\x08" + struct.pack(">q", 3) + b"\x09\x01\xff"
    decoded = api.decode_response(3, body + tags)
    assert decoded["finalized_features_epoch"] == 3
    assert decoded["supported_features"] == [] and decoded["zk_migration_ready"] is False


def test_tagged_struct_is_written_only_when_it_differs_from_its_default():
    api = API_BY_KEY[0]

    def partition(**fields):
        return {"responses": [{"name": "t", "partition_responses": [{"index": 0, **fields}]}]}

    default = api.encode_response(10, partition())[0]
    assert api.encode_response(10, partition(current_leader={"leader_id": -1, "leader_epoch": -1}))[0] == default
    moved = api.encode_response(10, partition(current_leader={"leader_id": 2, "leader_epoch": 5}))[0]
    assert len(moved) == len(default) + 2 + 8 + 1
    decoded = api.decode_response(10, moved)
    assert decoded["responses"][0]["partition_responses"][0]["current_leader"] == {"leader_id": 2, "leader_epoch": 5}


def test_nullable_struct_round_trips_as_none():
    api = API_BY_KEY[75]
    raw = api.encode_request(0, {"topics": [{"name": "a"}], "response_partition_limit": 10})
    assert raw.endswith(b"\xff\x00")  # cursor null, no tags
    assert api.decode_request(0, raw)["cursor"] is None
    raw = api.encode_request(0, {"topics": [], "cursor": {"topic_name": "a", "partition_index": 3}})
    assert api.decode_request(0, raw)["cursor"] == {"topic_name": "a", "partition_index": 3}


# ------------------------------------------------------------------------------------------- bad input

def test_truncated_input_raises_malformed_message():
    api = API_BY_KEY[0]
    body = {"transactional_id": "tx", "acks": 1, "timeout_ms": 1, "topic_data": [
        {"name": "topic", "partition_data": [{"index": 0, "records": b"0123456789"}]}]}
    for version in (3, 9):
        raw = api.encode_request(version, body)
        for cut in range(len(raw)):
            with pytest.raises(MalformedMessage):
                api.decode_request(version, raw[:cut])


def test_bogus_lengths_are_rejected_before_allocating():
    metadata = API_BY_KEY[3]
    with pytest.raises(MalformedMessage, match="exceeds"):
        metadata.decode_request(1, b"\x7f\xff\xff\xff")  # 2^31 - 1 topics in a 4-byte frame
    with pytest.raises(MalformedMessage, match="exceeds"):
        metadata.decode_request(9, b"\xff\xff\xff\xff\x07")  # compact count 2^31 - 2
    with pytest.raises(MalformedMessage):
        metadata.decode_request(1, b"\x00\x00\x00\x01\x7f\xff")  # string longer than the frame
    with pytest.raises(MalformedMessage):
        metadata.decode_request(9, b"\x02\x00" + b"\x05" + b"\xff" * 5)  # overlong uvarint tag count
    with pytest.raises(MalformedMessage):
        API_BY_KEY[18].decode_request(3, b"\x01\x01" + b"\x01\x05\x20xyz")  # tagged field larger than frame


def test_null_for_a_non_nullable_field_is_malformed():
    with pytest.raises(MalformedMessage, match="non-nullable"):
        API_BY_KEY[3].decode_request(1, b"\x00\x00\x00\x01\xff\xff")  # topic name null


def test_invalid_utf8_is_malformed():
    with pytest.raises(MalformedMessage):
        API_BY_KEY[3].decode_request(1, b"\x00\x00\x00\x01\x00\x02\xff\xfe")


def test_random_garbage_never_hangs_or_escapes_with_another_exception():
    import random

    rng = random.Random(1234)
    for api in SUPPORTED_APIS:
        for version in (api.valid_versions[0], api.valid_versions[1]):
            for _ in range(30):
                garbage = rng.randbytes(rng.randrange(0, 64))
                for decode in (api.decode_request, api.decode_response):
                    try:
                        decode(version, garbage)
                    except MalformedMessage:
                        pass


def test_unsupported_version_and_bad_values_raise_clear_errors():
    api = API_BY_KEY[0]
    with pytest.raises(UnsupportedVersion):
        api.decode_request(2, b"")
    with pytest.raises(UnsupportedVersion):
        api.encode_response(13, {})
    with pytest.raises(EncodeError, match="Produce v3 request"):
        api.encode_request(3, {"acks": "one"})


# ------------------------------------------------------------------------------------------- other codec

@functools.cache
def kafka_python_classes() -> dict:
    """kafka-python >= 3 generates its protocol classes from the same JSON specs: an independent codec."""
    api_message = pytest.importorskip("kafka.protocol.api_message", reason="needs kafka-python >= 3")
    import importlib
    import pkgutil

    import kafka.protocol

    for module in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" not in module.name and "generate" not in module.name:
            try:
                importlib.import_module(module.name)
            except Exception:  # noqa: BLE001 - optional modules of the other library
                pass
    found, todo = {}, [api_message.ApiMessage]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None:
            found[cls.__name__] = cls
    return found


def same_as_kafka_python(ours, theirs) -> bool:
    """Equality up to kafka-python's representations: uuids are UUID (zero -> None), operations are sets."""
    if isinstance(ours, dict):
        # kafka-python calls (cluster|topic)_authorized_operations just authorized_operations
        renamed = {k if k in theirs else "authorized_operations": v for k, v in ours.items()}
        return isinstance(theirs, dict) and renamed.keys() == theirs.keys() and all(
            same_as_kafka_python(v, theirs[k]) for k, v in renamed.items())
    if isinstance(ours, list):
        return isinstance(theirs, list) and len(ours) == len(theirs) and all(
            same_as_kafka_python(a, b) for a, b in zip(ours, theirs, strict=True))
    if isinstance(theirs, set):
        return ours == 0 and not theirs
    if hasattr(theirs, "bytes") and len(ours) == 16:
        return theirs.bytes == ours
    if theirs is None and ours == bytes(16):
        return True
    return ours == theirs


def zero_operations(message):
    if isinstance(message, dict):
        return {k: 0 if k.endswith("authorized_operations") else zero_operations(v) for k, v in message.items()}
    if isinstance(message, list):
        return [zero_operations(v) for v in message]
    return message


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's importlib.resources use
@pytest.mark.parametrize(("api", "direction", "version"), CASES)
def test_bytes_we_encode_decode_identically_with_kafka_python(api, direction, version):
    other = kafka_python_classes().get(f"{api.name}{direction.title()}")
    if other is None or version > other.max_version:
        pytest.skip(f"kafka-python has no {api.name} {direction} v{version}")
    root = api.request if direction == "request" else api.response

    @settings(max_examples=4, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(struct_strategy(root, version, api.is_flexible(version)))
    def agree(message):
        message = zero_operations(message)
        if api.key == 18 and direction == "response":
            message["error_code"] = 0  # kafka-python re-reads errored ApiVersions responses as v0
        if direction == "request":
            raw = api.encode_request(version, message)
        else:
            raw = b"".join(api.encode_response(version, message))
        theirs = other[version].decode(raw).to_dict(json=False)
        assert same_as_kafka_python(normalise(message), normalise(theirs)), (message, theirs)

    agree()
