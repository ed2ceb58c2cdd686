"""Request headers v0-v2 and response headers v0/v1, byte for byte."""

import pytest

from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from odradek.protocol.schema import MalformedMessage


def test_request_header_v1_for_a_non_flexible_version():
    frame = b"\x00\x03" + b"\x00\x01" + b"\x00\x00\x00\x07" + b"\x00\x03abc" + b"BODY"
    header = parse_request_header(memoryview(frame))
    assert header == RequestHeader(api_key=3, api_version=1, correlation_id=7, client_id="abc", body_offset=13)
    assert frame[header.body_offset:] == b"BODY"
    assert encode_request_header(3, 1, 7, "abc") == frame[:13]


def test_request_header_v2_keeps_the_int16_client_id_and_adds_tagged_fields():
    frame = b"\x00\x12" + b"\x00\x03" + b"\x00\x00\x00\x01" + b"\x00\x07rdkafka" + b"\x00" + b"BODY"
    header = parse_request_header(memoryview(frame))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 1, "rdkafka")
    assert frame[header.body_offset:] == b"BODY"
    assert encode_request_header(18, 3, 1, "rdkafka") == frame[:-4]


def test_request_header_v2_skips_unknown_tagged_fields():
    frame = b"\x00\x00\x00\x09\x00\x00\x00\x05\xff\xff" + b"\x01" + b"\x03\x02xy" + b"BODY"
    header = parse_request_header(frame)
    assert header.client_id is None and frame[header.body_offset:] == b"BODY"


def test_null_client_id():
    raw = encode_request_header(0, 3, 99, None)
    assert raw == b"\x00\x00\x00\x03\x00\x00\x00\x63\xff\xff"
    assert parse_request_header(raw).client_id is None


def test_newer_api_versions_request_still_parses_so_the_broker_can_answer_unsupported_version():
    raw = encode_request_header(18, 99, 5, "future-client") + b"\x00"
    header = parse_request_header(raw)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 99, 5)
    assert header.client_id == "future-client" and header.body_offset == len(raw) - 1


def test_unknown_api_key_is_parsed_as_header_v1():
    raw = encode_request_header(1000, 0, 42, "x", header_version=1)
    header = parse_request_header(raw)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (1000, 0, 42, "x")
    assert request_header_version(1000, 0) == 1


def test_header_versions_follow_flexibility():
    assert request_header_version(0, 8) == 1 and request_header_version(0, 9) == 2
    assert request_header_version(7, 0) == 0
    assert response_header_version(3, 8) == 0 and response_header_version(3, 9) == 1
    assert response_header_version(18, 4) == 0  # ApiVersions: always v0
    assert response_header_version(17, 1) == 0  # SaslHandshake is never flexible


def test_response_headers():
    assert encode_response_header(3, 1, 7) == b"\x00\x00\x00\x07"
    assert encode_response_header(3, 12, 7) == b"\x00\x00\x00\x07\x00"
    assert encode_response_header(18, 4, 7) == b"\x00\x00\x00\x07"
    assert parse_response_header(b"\x00\x00\x00\x07\x00BODY", 3, 12) == (7, 5)
    assert parse_response_header(b"\x00\x00\x00\x07BODY", 18, 3) == (7, 4)


@pytest.mark.parametrize("frame", [
    b"",
    b"\x00\x03\x00\x01\x00\x00",                       # shorter than the fixed part
    b"\x00\x03\x00\x01\x00\x00\x00\x07",               # v1 without client_id
    b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x09ab",     # client_id longer than the frame
    b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x02\xff\xfe",  # client_id not UTF-8
    b"\x00\x03\x00\x0c\x00\x00\x00\x07\xff\xff",       # v2 without tagged field section
    b"\x00\x03\x00\x0c\x00\x00\x00\x07\xff\xff\x01\x00\x30",  # tagged field longer than the frame
])
def test_malformed_request_headers_raise(frame):
    with pytest.raises(MalformedMessage):
        parse_request_header(memoryview(frame))
