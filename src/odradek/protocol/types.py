"""Primitive wire types of the Kafka protocol: fixed-width integers, varints and the malformed-input error.

Fixed-width values use precompiled big-endian `struct.Struct`s (`INT32.unpack_from(buf, pos)`,
`INT32.pack(v)`). Variable-length integers follow Kafka's `ByteUtils`:

- uvarint: unsigned LEB128, at most 5 bytes (32-bit), used for compact lengths and tagged fields;
- varint: zigzag-encoded signed 32-bit value in a uvarint (record lengths, deltas, header counts);
- varlong: zigzag-encoded signed 64-bit value, at most 10 bytes (record timestamp deltas).

Readers take `(buf, pos)` and return `(value, new_pos)`; writers return `bytes`. Truncated or overlong
input raises `MalformedMessage`.
"""

import struct

__all__ = [
    "BOOL", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "UUID_ZERO", "MalformedMessage",
    "read_uvarint", "read_varint", "read_varlong", "read_uvarlong", "uvarint_size", "varint_size",
    "write_uvarint", "write_varint", "write_varlong", "write_uvarlong",
]


class MalformedMessage(ValueError):
    """The bytes on the wire do not form a valid message: truncated, overlong varint, bogus length, ..."""


BOOL = struct.Struct(">?")
INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

UUID_ZERO = bytes(16)

_SMALL = tuple(bytes((i,)) for i in range(128))


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7
            if shift > 28:
                raise MalformedMessage("varint is longer than 5 bytes")
    except IndexError:
        raise MalformedMessage("truncated varint") from None


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 10 bytes."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7
            if shift > 63:
                raise MalformedMessage("varlong is longer than 10 bytes")
    except IndexError:
        raise MalformedMessage("truncated varlong") from None


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed 32-bit varint."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed 64-bit varint."""
    v, pos = read_uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def write_uvarint(value: int) -> bytes:
    """Unsigned varint; negative values are written as their 32-bit two's complement, like Kafka."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    value &= 0xFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarlong(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL[value]
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_varint(value: int) -> bytes:
    return write_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    return write_uvarlong(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def varint_size(value: int) -> int:
    return uvarint_size(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
