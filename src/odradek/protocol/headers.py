"""Request headers v0-v2 and response headers v0/v1.

Request header v0: api_key int16, api_version int16, correlation_id int32. v1 adds client_id, a nullable
string with an int16 length even in v2 (so any broker can read an ApiVersions header). v2 adds a tagged
field section. The version follows from the API: v2 when the API version is flexible, else v1 (v0 only for
ControlledShutdown v0).

Response header v0: correlation_id. v1 adds a tagged field section, used when the API version is flexible;
ApiVersions responses always use v0 so a client can read them whatever version it asked for (KIP-511).

For an API key Odradek does not declare, the header is parsed as v1: the caller only needs api_key,
api_version and correlation_id to answer or close, and the body offset is a best guess. A version outside a
declared API's range is still parsed by the flexible rule, so a newer client's ApiVersions header (v2)
parses.
"""

import struct
from typing import NamedTuple

from odradek.protocol.messages import API_BY_KEY
from odradek.protocol.types import INT16, INT32, MalformedMessage, read_uvarint, write_uvarint

__all__ = ["RequestHeader", "encode_request_header", "encode_response_header", "parse_request_header",
           "parse_response_header", "request_header_version", "response_header_version"]

_HEADER_FIXED = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_unpack_fixed = _HEADER_FIXED.unpack_from
_pack_fixed = _HEADER_FIXED.pack
_FIXED = _HEADER_FIXED.size
_API_VERSIONS = 18
_CONTROLLED_SHUTDOWN = 7


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


def request_header_version(api_key: int, api_version: int) -> int:
    api = API_BY_KEY.get(api_key)
    if api is None:
        return 0 if api_key == _CONTROLLED_SHUTDOWN and api_version == 0 else 1
    return api.request_header_version(api_version)


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == _API_VERSIONS:
        return 0
    api = API_BY_KEY.get(api_key)
    return 1 if api is not None and api.is_flexible(api_version) else 0


def _skip_tagged_fields(buf, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedMessage("request header tagged field exceeds the frame")
    return pos


def parse_request_header(buf) -> RequestHeader:
    """Parse the header at the start of a request frame (the bytes after the 4-byte size)."""
    if len(buf) < _FIXED:
        raise MalformedMessage(f"request header needs {_FIXED} bytes, frame has {len(buf)}")
    api_key, api_version, correlation_id = _unpack_fixed(buf, 0)
    version = request_header_version(api_key, api_version)
    if version == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, _FIXED)
    if len(buf) < _FIXED + 2:
        raise MalformedMessage("request header truncated before client_id")
    (length,) = INT16.unpack_from(buf, _FIXED)
    pos = _FIXED + 2
    if length < 0:
        client_id = None
    else:
        end = pos + length
        if end > len(buf):
            raise MalformedMessage("request header client_id exceeds the frame")
        try:
            client_id = str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMessage(f"request header client_id is not UTF-8: {exc}") from None
        pos = end
    if version == 2:
        pos = _skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None = None,
                          header_version: int | None = None) -> bytes:
    """The request header for this API version (or the given header version), without the frame size."""
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    out = bytearray(_pack_fixed(api_key, api_version, correlation_id))
    if header_version >= 1:
        if client_id is None:
            out += b"\xff\xff"
        else:
            raw = client_id.encode()
            out += INT16.pack(len(raw))
            out += raw
    if header_version >= 2:
        out += write_uvarint(0)
    return bytes(out)


_RESPONSE_V1_SUFFIX = b"\x00"  # empty tagged field section


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    if response_header_version(api_key, api_version):
        return INT32.pack(correlation_id) + _RESPONSE_V1_SUFFIX
    return INT32.pack(correlation_id)


def parse_response_header(buf, api_key: int, api_version: int) -> tuple[int, int]:
    """(correlation_id, body_offset) of a response frame, for clients and tests."""
    if len(buf) < 4:
        raise MalformedMessage("response header truncated")
    (correlation_id,) = INT32.unpack_from(buf, 0)
    pos = 4
    if response_header_version(api_key, api_version):
        pos = _skip_tagged_fields(buf, pos)
    return correlation_id, pos
