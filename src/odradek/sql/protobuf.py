"""ksqlDB's PROTOBUF and PROTOBUF_NOSR formats: rows as proto3 messages of a schema derived from the columns.

The schema is the one ksqlDB derives (Confluent's ProtobufData over the Connect schema of the columns): a
message `ConnectDefault1` (or the last part of KEY_/VALUE_SCHEMA_FULL_NAME, the rest its package) with the
columns as fields 1..n in order. A STRUCT is a nested message and a MAP (STRING keys) a nested entry message
`{key = 1; value = 2}` behind a repeated field, declared in the message that uses them and named
ConnectDefault2, ConnectDefault3Entry, ... depth first; an ARRAY is a repeated field. BOOLEAN is bool, INT
int32, BIGINT int64, DOUBLE double, STRING string, BYTES bytes, DECIMAL confluent.type.Decimal (its unscaled
value as two's-complement bytes, precision and scale), DATE google.type.Date, TIME google.type.TimeOfDay and
TIMESTAMP google.protobuf.Timestamp. PROTOBUF frames the message as the schema registry's serializers do
(magic byte 0, the schema id, the message indexes: a single 0 for the first message) and registers the
schema under `<topic>-key` or `<topic>-value`; PROTOBUF_NOSR is the bare message and needs no registry.
PROTOBUF wraps even a single key or value column in the message; PROTOBUF_NOSR writes a single key column,
or a value column with WRAP_SINGLE_VALUE=false, bare (a primitive as its google.protobuf wrapper message).

proto3 has no null for a scalar: by default a null is an absent field, and an absent scalar reads as its
default (0, 0.0, false, "", empty bytes), an absent ARRAY or MAP as empty and an absent message (STRUCT,
DECIMAL, DATE, TIME, TIMESTAMP) as null, as ksqlDB reads them. KEY_/VALUE_PROTOBUF_NULLABLE_REPRESENTATION
OPTIONAL labels the fields `optional` (proto3 presence) and WRAPPER makes every scalar a google.protobuf
wrapper message, so that null and the default differ.

Records are read by field number with the derived schema: the writer's schema id must be in the registry, but
its field names are not consulted (ksqlDB reads with the writer's schema and matches fields by name). Fields
of other numbers are skipped; a field with the wrong wire type is an error. Encoding and decoding are here;
the only I/O is the registry, through serde's RegistryClient.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Context, Decimal

from odradek.sql import ast
from odradek.sql.serde import (
    _FRAME,
    Column,
    RegistryClient,
    SerdeError,
    _at,
    _Bad,
    _bad,
    _date_of,
    _fit_decimal,
    _Registered,
    _row_type,
    _time_of,
    _timestamp_of,
    _wire,
)

NULLABLE_REPRESENTATIONS = ("OPTIONAL", "WRAPPER")
DEFAULT_NAME = "ConnectDefault"  # ProtobufData's name for an unnamed message, numbered from 1

_MASK64 = (1 << 64) - 1
_MAX_FIELD_NUMBER = (1 << 29) - 1
_MAX_GROUP_DEPTH = 100  # protobuf-java's recursion limit
# Beyond these no value fits a DECIMAL (precision at most 38): refused before the arithmetic, which they would
# make slow or overflow
_MAX_DECIMAL_BYTES, _MAX_DECIMAL_SCALE = 64, 1000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE_TYPES = ("BOOLEAN", "INT", "BIGINT", "DOUBLE", "STRING", "BYTES")  # have a google.protobuf wrapper

_TIMESTAMP_FILE = "google/protobuf/timestamp.proto"
_DATE_FILE = "google/type/date.proto"
_TIME_FILE = "google/type/timeofday.proto"
_DECIMAL_FILE = "confluent/type/decimal.proto"
_META_FILE = "confluent/meta.proto"
_WRAPPERS_FILE = "google/protobuf/wrappers.proto"


def codec(
    fmt: str,
    role: str,
    columns: tuple[Column, ...],
    wrapped: bool,
    properties: Mapping,
    registry: RegistryClient | None,
    subject: str,
) -> _Protobuf:
    """The PROTOBUF or PROTOBUF_NOSR codec of serde's `_codec` (which has checked the column types, the MAP
    keys and that PROTOBUF has a registry)."""
    nullable = _nullable(properties.get(f"{role}_PROTOBUF_NULLABLE_REPRESENTATION"), role)
    full_name = properties.get(f"{role}_SCHEMA_FULL_NAME")  # serde refuses it for PROTOBUF_NOSR
    wrapped = wrapped or fmt == "PROTOBUF"  # ksqlDB's PROTOBUF has no unwrapped keys or values
    package, name = _full_name(full_name, role)
    derivation = _Derivation(nullable, f"{role}_FORMAT {fmt}")
    column = columns[0]
    if wrapped or isinstance(column.type, ast.StructType):
        fields = _row_type(columns).fields if wrapped else column.type.fields
        root = derivation.message(name or f"{DEFAULT_NAME}{derivation.next_number()}", fields)
    elif isinstance(column.type, ast.PrimitiveType) and column.type.name in _BARE_TYPES:
        root = _WRAPPERS[column.type.name]  # ProtobufData's root for a bare primitive, whatever the nullables
    else:
        unwrap = (
            "a single key column" if role == "KEY" else "a single value column with WRAP_SINGLE_VALUE=false"
        )
        raise SerdeError(
            f"{role}_FORMAT {fmt} writes {unwrap} bare, and Protobuf has no bare "
            f"{ast.type_text(column.type, rest=True)} (column {column.name}): only a STRUCT or a BOOLEAN, INT, "
            "BIGINT, DOUBLE, STRING or BYTES"
        )
    registered = None
    if fmt == "PROTOBUF":
        text = derivation.schema_text(package, root)
        registered = _Registered(registry, subject, "PROTOBUF", text, None)
    return _Protobuf(columns, wrapped, root, registry, registered)


def _nullable(setting, role: str) -> str | None:
    if setting is None:
        return None
    if not isinstance(setting, str) or setting.upper() not in NULLABLE_REPRESENTATIONS:
        raise SerdeError(
            f"{role}_PROTOBUF_NULLABLE_REPRESENTATION must be OPTIONAL or WRAPPER, got {setting!r}"
        )
    return setting.upper()


def _full_name(setting, role: str) -> tuple[str | None, str | None]:
    """The package and message name of KEY_ or VALUE_SCHEMA_FULL_NAME; ksqlDB ignores a name starting with
    ConnectDefault (ProtobufSchemaTranslator: it would shift the numbering of the nested messages)."""
    text = str(setting).strip() if setting is not None else ""
    if not text or text.startswith(DEFAULT_NAME):
        return None, None
    if not all(_NAME.fullmatch(part) for part in text.split(".")):
        raise SerdeError(f"{role}_SCHEMA_FULL_NAME must be a dotted Protobuf name, got {setting!r}")
    package, _, name = text.rpartition(".")
    return package or None, name


# ------------------------------------------------------------------------------------- the codec


class _Protobuf:
    """A serde codec: rows to messages of `root`, framed for the registry when `registered` is given."""

    def __init__(
        self,
        columns: tuple[Column, ...],
        wrapped: bool,
        root: _Message,
        registry: RegistryClient | None,
        registered: _Registered | None,
    ):
        self.wrapped = wrapped
        self.names = [c.name for c in columns]
        self.type = _row_type(columns) if wrapped else columns[0].type
        self.root_path = "" if wrapped else columns[0].name
        self.root = root
        self.registry = registry
        self.registered = registered
        self._protobuf_ids: set[int] = set()  # ids the registry has answered with a Protobuf schema

    def decode(self, data: bytes) -> tuple | None:
        if self.registered is not None:
            data = self._unframe(data)
        value = self.root.decode(data, self.root_path)
        return tuple(value[name] for name in self.names) if self.wrapped else (value,)

    def encode(self, values: tuple) -> bytes | None:
        if self.wrapped:
            wire = _wire(dict(zip(self.names, values, strict=True)), self.type, "")
        else:
            wire = _wire(values[0], self.type, self.root_path)
            if wire is None:
                return None  # a null bare column is a null record, as ksqlDB writes it
        body = self.root.encode(wire, self.root_path)
        if self.registered is None:
            return body
        schema_id = self.registered.schema_id()
        self._protobuf_ids.add(schema_id)
        return _FRAME.pack(0, schema_id) + b"\x00" + body  # message indexes [0]: the first message

    def _unframe(self, data: bytes) -> bytes:
        if len(data) < _FRAME.size or data[0] != 0:
            raise _Bad("does not start with the schema registry's magic byte 0 and a schema id")
        schema_id = _FRAME.unpack_from(data)[1]
        if schema_id not in self._protobuf_ids:
            text = self.registry.schema_by_id(schema_id)
            if text.lstrip()[:1] in ("{", "[", '"'):
                raise _Bad(f"schema {schema_id} is not a Protobuf schema (is the record Avro or JSON_SR?)")
            self._protobuf_ids.add(schema_id)
        # The message indexes (Confluent's MessageIndexes): a zigzag varint count, 0 for [0], then the indexes.
        # They name the writer's message in its schema; the message is read by field number all the same.
        count, pos = _read_varint(data, _FRAME.size, "the message indexes")
        count = _unzigzag(count)
        if count < 0 or count > len(data) - pos:
            raise _Bad(f"the message indexes have a count of {count}")
        for _ in range(count):
            index, pos = _read_varint(data, pos, "the message indexes")
            if _unzigzag(index) < 0:
                raise _Bad(f"the message indexes have a negative index {_unzigzag(index)}")
        return data[pos:]


# ------------------------------------------------------------------------------------- wire format


def _varint(value: int) -> bytes:
    value &= _MASK64  # negative int32 and int64 are ten-byte two's complement, as Java writes them
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, pos: int, path: str) -> tuple[int, int]:
    result = shift = 0
    for _ in range(10):
        if pos >= len(data):
            raise _bad(path, "truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7
    raise _bad(path, "malformed varint (more than 10 bytes)")


def _unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "start group", 5: "32-bit"}


def _fields(data: bytes, path: str) -> dict[int, list[tuple[int, object]]]:
    """A message's fields by number: (wire type, value) in order, the value an int for a varint, else bytes
    (None for a group, which no field of these schemas is)."""
    found: dict[int, list[tuple[int, object]]] = {}
    pos = 0
    while pos < len(data):
        number, wire, raw, pos = _field(data, pos, path)
        if wire == 4:
            raise _bad(path, f"an end of group {number} outside a group")
        found.setdefault(number, []).append((wire, raw))
    return found


def _field(data: bytes, pos: int, path: str, depth: int = 0) -> tuple[int, int, object, int]:
    key, pos = _read_varint(data, pos, path)
    number, wire = key >> 3, key & 7
    if not 0 < number <= _MAX_FIELD_NUMBER:
        raise _bad(path, f"invalid field number {number}")
    if wire == 0:
        raw, pos = _read_varint(data, pos, path)
        return number, wire, raw, pos
    if wire == 3:
        if depth >= _MAX_GROUP_DEPTH:
            raise _bad(path, f"groups nested more than {_MAX_GROUP_DEPTH} deep")
        while True:  # to the matching end of group, past the fields and groups in it
            if pos >= len(data):
                raise _bad(path, f"truncated group {number}")
            inner, inner_wire, _, pos = _field(data, pos, path, depth + 1)
            if inner_wire == 4:
                if inner != number:
                    raise _bad(path, f"group {number} ends as group {inner}")
                return number, wire, None, pos
    if wire == 4:
        return number, wire, None, pos
    if wire == 2:
        size, pos = _read_varint(data, pos, path)
    elif wire in (1, 5):
        size = 8 if wire == 1 else 4
    else:
        raise _bad(path, f"field {number} has wire type {wire}, which is not one of Protobuf's")
    if size > len(data) - pos:
        raise _bad(path, f"truncated field {number}: {size} bytes, {len(data) - pos} left")
    return number, wire, bytes(data[pos : pos + size]), pos + size


# ------------------------------------------------------------------------------------- types


class _Scalar:
    """A proto3 scalar type: its wire type, default, and how a value is written and read."""

    def __init__(
        self,
        name: str,
        wire: int,
        default,
        write: Callable[[object, str], bytes],
        read: Callable[[object, str], object],
    ):
        self.name = name
        self.wire = wire
        self.default = default
        self.write = write  # the bytes after the tag
        self.read = read
        self.packable = wire in (0, 1)  # proto3 packs repeated numbers

    def is_default(self, value) -> bool:
        """Not written in a field without presence; -0.0 is not 0.0 there, as Java compares doubles."""
        if isinstance(value, float):
            return value == 0 and math.copysign(1.0, value) > 0
        return value == self.default

    def unpack(self, raw: bytes, path: str) -> list:
        if self.wire == 1:
            if len(raw) % 8:
                raise _bad(path, f"packed doubles of {len(raw)} bytes")
            return [value for (value,) in struct.iter_unpack("<d", raw)]
        values, pos = [], 0
        while pos < len(raw):
            value, pos = _read_varint(raw, pos, path)
            values.append(self.read(value, path))
        return values


def _write_text(value, path: str) -> bytes:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(path, "a string is not valid Unicode (a lone surrogate)") from None
    return _varint(len(data)) + data


def _read_text(raw, path: str) -> str:
    try:
        return raw.decode("utf-8")  # Java refuses malformed UTF-8 in a proto3 string
    except UnicodeDecodeError:
        raise _bad(path, "a string is not valid UTF-8") from None


_BOOL = _Scalar("bool", 0, False, lambda v, _: b"\x01" if v else b"\x00", lambda raw, _: raw != 0)
_INT32 = _Scalar("int32", 0, 0, lambda v, _: _varint(v), lambda raw, _: _signed(raw, 32))
_INT64 = _Scalar("int64", 0, 0, lambda v, _: _varint(v), lambda raw, _: _signed(raw, 64))
_UINT32 = _Scalar("uint32", 0, 0, lambda v, _: _varint(v), lambda raw, _: raw & 0xFFFFFFFF)
_DOUBLE = _Scalar(
    "double", 1, 0.0, lambda v, _: struct.pack("<d", v), lambda raw, _: struct.unpack("<d", raw)[0]
)
_STRING = _Scalar("string", 2, "", _write_text, _read_text)
_BYTES = _Scalar("bytes", 2, b"", lambda v, _: _varint(len(v)) + v, lambda raw, _: raw)
_SCALARS = {
    "BOOLEAN": _BOOL,
    "INT": _INT32,
    "BIGINT": _INT64,
    "DOUBLE": _DOUBLE,
    "STRING": _STRING,
    "BYTES": _BYTES,
}


@dataclass
class _Field:
    number: int
    name: str
    type: _Scalar | _Message
    label: str | None = None  # "optional" (proto3 presence) or "repeated"; None: presence only for messages
    is_map: bool = False  # repeated entry messages standing for a MAP
    in_entry: bool = False  # a map entry's key or value: read when absent as its type's default, as Java does
    options: tuple[str, ...] = ()  # as the schema text writes them

    def write(self, value, out: bytearray, path: str) -> None:
        if value is None:
            return
        path = _at(path, self.name)
        if self.label == "repeated":
            items = list(value.items()) if self.is_map else value
            if any(item is None for item in items):
                index = next(i for i, item in enumerate(items) if item is None)
                raise _bad(f"{path}[{index}]", "Protobuf cannot hold a null in an ARRAY")
            if self.type.packable and items:
                body = b"".join(self.type.write(item, path) for item in items)
                out += _tag(self.number, 2) + _varint(len(body)) + body
            else:
                for i, item in enumerate(items):
                    out += _tag(self.number, self.type.wire) + self.type.write(item, f"{path}[{i}]")
        elif self.label is not None or not isinstance(self.type, _Scalar) or not self.type.is_default(value):
            out += _tag(self.number, self.type.wire) + self.type.write(value, path)

    def read(self, found: list[tuple[int, object]] | None, path: str):
        path = _at(path, self.name)
        if not found:
            if self.label == "repeated":
                return {} if self.is_map else []
            if self.label == "optional":
                return None
            if isinstance(self.type, _Message):
                return self.type.decode(b"", path) if self.in_entry else None
            return self.type.default
        if self.label == "repeated":
            items = []
            for wire, raw in found:
                if wire == 2 and self.type.packable:
                    items += self.type.unpack(raw, path)
                else:
                    self._check(wire, path)
                    items.append(self.type.read(raw, f"{path}[{len(items)}]"))
            return dict(items) if self.is_map else items
        for wire, _ in found:
            self._check(wire, path)
        if isinstance(self.type, _Message):  # occurrences of a message merge: their bytes are concatenated
            return self.type.decode(b"".join(raw for _, raw in found), path)
        return self.type.read(found[-1][1], path)  # the last occurrence of a scalar wins

    def _check(self, wire: int, path: str) -> None:
        if wire != self.type.wire:
            raise _bad(
                path,
                f"field {self.number} has wire type {wire} ({_WIRE_NAMES.get(wire, '?')}), "
                f"expected {self.type.wire} ({_WIRE_NAMES[self.type.wire]}) for {self.type.name}",
            )


def _same(value, path: str):
    return value


class _Message:
    """A message type and the value it stands for: a STRUCT's dict by default, else what `to_fields` and
    `from_fields` convert (a DECIMAL, a map entry's (key, value), a wrapped scalar)."""

    wire = 2
    packable = False

    def __init__(
        self,
        name: str,
        fields: Sequence[_Field] = (),
        to_fields: Callable[[object, str], Mapping] = _same,
        from_fields: Callable[[dict, str], object] = _same,
    ):
        self.name = name  # as the schema text refers to it
        self.fields = list(fields)
        self.nested: list[_Message] = []  # the messages declared in it
        self.to_fields = to_fields
        self.from_fields = from_fields

    def encode(self, value, path: str) -> bytes:
        values = self.to_fields(value, path)
        out = bytearray()
        for f in self.fields:
            f.write(values.get(f.name), out, path)
        return bytes(out)

    def decode(self, data: bytes, path: str):
        found = _fields(data, path)
        return self.from_fields({f.name: f.read(found.get(f.number), path) for f in self.fields}, path)

    def write(self, value, path: str) -> bytes:
        body = self.encode(value, path)
        return _varint(len(body)) + body

    def read(self, raw: bytes, path: str):
        return self.decode(raw, path)


def _wrapper(scalar: _Scalar, name: str) -> _Message:
    return _Message(
        f"google.protobuf.{name}Value",
        [_Field(1, "value", scalar)],
        lambda value, _: {"value": value},
        lambda fields, _: fields["value"],
    )


_WRAPPERS = {
    "BOOLEAN": _wrapper(_BOOL, "Bool"),
    "INT": _wrapper(_INT32, "Int32"),
    "BIGINT": _wrapper(_INT64, "Int64"),
    "DOUBLE": _wrapper(_DOUBLE, "Double"),
    "STRING": _wrapper(_STRING, "String"),
    "BYTES": _wrapper(_BYTES, "Bytes"),
}


def _entry_fields(item, path: str) -> dict:
    return {"key": item[0], "value": item[1]}


def _entry_value(fields: dict, path: str) -> tuple:
    return fields["key"], fields["value"]


# --------------------------------------------------------------- the well-known messages of the logical types

# google.protobuf.Timestamp's range, as Java's Timestamps.toMillis checks it: 0001-01-01 to 9999-12-31
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799
_NANOS = 1_000_000_000
_EXACT = Context(prec=100, Emax=999_999_999_999, Emin=-999_999_999_999)  # more digits than a DECIMAL has


def _timestamp_fields(ms: int, path: str) -> dict:
    seconds, millis = divmod(ms, 1000)  # Timestamps.fromMillis: nanos are never negative
    return {"seconds": seconds, "nanos": millis * 1_000_000}


def _timestamp_value(fields: dict, path: str):
    seconds, nanos = fields["seconds"], fields["nanos"]
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS and 0 <= nanos < _NANOS):
        raise _bad(path, f"a Timestamp of {seconds} s and {nanos} ns is not valid")
    return _timestamp_of(seconds * 1000 + nanos // 1_000_000, path)


def _time_fields(ms: int, path: str) -> dict:
    seconds, millis = divmod(ms, 1000)
    minutes, second = divmod(seconds, 60)
    return {"hours": minutes // 60, "minutes": minutes % 60, "seconds": second, "nanos": millis * 1_000_000}


def _time_value(fields: dict, path: str):
    hours, minutes, seconds, nanos = fields["hours"], fields["minutes"], fields["seconds"], fields["nanos"]
    if not (0 <= hours < 24 and 0 <= minutes < 60 and 0 <= seconds < 60 and 0 <= nanos < _NANOS):
        raise _bad(path, f"a TimeOfDay of {hours}:{minutes}:{seconds} and {nanos} ns is not valid")
    return _time_of(((hours * 60 + minutes) * 60 + seconds) * 1000 + nanos // 1_000_000, path)


# ProtobufData reads and writes google.type.Date with java.util.Calendar, whose dates before the Gregorian
# calendar's start (1582-10-15) are Julian: ksqlDB writes the DATE 1000-01-01 (a count of days, proleptic
# Gregorian) as year 999, month 12, day 27, the Julian date of that day, and reads it back the same way.
_GREGORIAN_START = date(1582, 10, 15)
_JULIAN_END = (1582, 10, 5)  # the first of the ten days the change skipped: from it to 10-14 are no dates
_JDN = 1_721_425  # the Julian day number of date.toordinal()'s day 0
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _date_fields(days: int, path: str) -> dict:
    day = _date_of(days, path)
    if day >= _GREGORIAN_START:
        return {"year": day.year, "month": day.month, "day": day.day}
    c = day.toordinal() + _JDN + 32_082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return {"year": d - 4800 + m // 10, "month": m + 3 - 12 * (m // 10), "day": e - (153 * m + 2) // 5 + 1}


def _date_value(fields: dict, path: str) -> date:
    year, month, day = fields["year"], fields["month"], fields["day"]
    bad = _bad(path, f"a Date of year {year}, month {month}, day {day} is not valid")
    if (year, month, day) >= (1582, 10, 15):
        try:
            return date(year, month, day)
        except ValueError:
            raise bad from None
    if (year, month, day) >= _JULIAN_END or year < 1 or not 1 <= month <= 12:
        raise bad
    length = 29 if month == 2 and year % 4 == 0 else _MONTH_DAYS[month - 1]  # Julian: every fourth year leaps
    if not 1 <= day <= length:
        raise bad
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    ordinal = day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32_083 - _JDN
    if ordinal < 1:
        raise _bad(path, f"the Julian date {year}-{month}-{day} is out of range for DATE")
    return date.fromordinal(ordinal)


def _decimal(t: ast.DecimalType) -> _Message:
    """confluent.type.Decimal: as DecimalUtils writes a BigDecimal (BigInteger.toByteArray of the unscaled
    value, its precision, the scale) and reads it back (rounded to the precision it carries, then fitted to
    the column as ksqlDB fits decimals, without rounding)."""

    def to_fields(value: Decimal, path: str) -> dict:
        unscaled = int(value.scaleb(t.scale, _EXACT))
        size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
        precision = len(str(abs(unscaled)))
        return {
            "value": unscaled.to_bytes(size, "big", signed=True),
            "precision": precision,
            "scale": t.scale,
        }

    def from_fields(fields: dict, path: str) -> Decimal:
        raw, precision, scale = fields["value"], fields["precision"], fields["scale"]
        if not raw:
            raise _bad(path, "a Decimal without value bytes")  # Java's BigInteger has no zero-length form
        if precision >= 1 << 31:
            raise _bad(path, f"a Decimal of precision {precision}")
        if len(raw) > _MAX_DECIMAL_BYTES or not -_MAX_DECIMAL_SCALE <= scale <= _MAX_DECIMAL_SCALE:
            raise _bad(path, f"a Decimal of {len(raw)} value bytes and scale {scale} fits no DECIMAL column")
        value = Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale, _EXACT)
        if precision:  # Java's MathContext(precision): rounded half up to that many digits
            value = Context(prec=precision, rounding=ROUND_HALF_UP, Emax=_EXACT.Emax, Emin=_EXACT.Emin).plus(
                value
            )
        return _fit_decimal(value, t, path)

    fields = [_Field(1, "value", _BYTES), _Field(2, "precision", _UINT32), _Field(3, "scale", _INT32)]
    return _Message("confluent.type.Decimal", fields, to_fields, from_fields)


def _int32_fields(*names: str) -> list[_Field]:
    return [_Field(number, name, _INT32) for number, name in enumerate(names, 1)]


_TIMESTAMP = _Message(
    "google.protobuf.Timestamp",
    [_Field(1, "seconds", _INT64), _Field(2, "nanos", _INT32)],
    _timestamp_fields,
    _timestamp_value,
)
_DATE = _Message("google.type.Date", _int32_fields("year", "month", "day"), _date_fields, _date_value)
_TIME = _Message(
    "google.type.TimeOfDay", _int32_fields("hours", "minutes", "seconds", "nanos"), _time_fields, _time_value
)
_LOGICAL = {
    "TIMESTAMP": (_TIMESTAMP, _TIMESTAMP_FILE),
    "DATE": (_DATE, _DATE_FILE),
    "TIME": (_TIME, _TIME_FILE),
}


# ------------------------------------------------------------------------------------- the derived schema


class _Derivation:
    """The messages ProtobufData derives from a Connect schema, walked as it walks them: a message's fields
    in order, each nested STRUCT or MAP numbered when its field is reached, then its own fields."""

    def __init__(self, nullable: str | None, what: str):
        self.nullable = nullable
        self.what = what  # "VALUE_FORMAT PROTOBUF", for errors
        self.number = 0
        self.imports: list[str] = []

    def next_number(self) -> int:
        self.number += 1
        return self.number

    def message(self, name: str, fields: Sequence[ast.StructField]) -> _Message:
        message = _Message(name)
        for number, f in enumerate(fields, 1):
            message.fields.append(self.field(message, f.name, f.type, number, in_entry=False))
        return message

    def field(self, parent: _Message, name: str, t: ast.SqlType, number: int, in_entry: bool) -> _Field:
        if not _NAME.fullmatch(name):
            raise SerdeError(
                f"{self.what} cannot name the column or field {name!r}: Protobuf names are letters, digits and "
                "_, not starting with a digit"
            )
        element = t.element if isinstance(t, ast.ArrayType) else t
        if isinstance(t, ast.ArrayType) and isinstance(element, ast.ArrayType | ast.MapType):
            raise SerdeError(
                f"{self.what} does not support {ast.type_text(t, rest=True)} (field {name}): ksqlDB's "
                "Protobuf cannot nest an ARRAY or MAP directly in an ARRAY"
            )
        node = self.node(parent, name, element)
        options = []
        if isinstance(t, ast.ArrayType | ast.MapType):
            label = "repeated"
        elif self.nullable == "OPTIONAL" and not in_entry:
            # proto3 `optional`, which Confluent's MessageDefinition gives an explicit deprecated = false
            label = "optional"
            options.append("deprecated = false")
        else:
            label = None  # a map entry's fields are plain even with OPTIONAL: ProtobufData adds them as such
        if isinstance(element, ast.DecimalType):
            options.append(_decimal_meta(element))
        return _Field(number, name, node, label, isinstance(t, ast.MapType), in_entry, tuple(options))

    def node(self, parent: _Message, field_name: str, t: ast.SqlType) -> _Scalar | _Message:
        if isinstance(t, ast.StructType):
            name = f"{DEFAULT_NAME}{self.next_number()}"
            if name == field_name:
                name += "Message"  # ProtobufData's way out of a message named as its field
            message = self.message(name, t.fields)
            parent.nested.append(message)
            return message
        if isinstance(t, ast.MapType):
            entry = _Message(f"{DEFAULT_NAME}{self.next_number()}Entry", (), _entry_fields, _entry_value)
            entry.fields = [
                self.field(entry, "key", t.key, 1, True),
                self.field(entry, "value", t.value, 2, True),
            ]
            parent.nested.append(entry)
            return entry
        if isinstance(t, ast.DecimalType):
            self._import(_DECIMAL_FILE)
            # ProtobufData writes the precision and scale in a confluent.field_meta option without importing
            # the file that defines it; the import is added so that a registry compiling the text accepts it
            self._import(_META_FILE)
            return _decimal(t)
        if t.name in _LOGICAL:
            message, file = _LOGICAL[t.name]
            self._import(file)
            return message
        if self.nullable == "WRAPPER":
            self._import(_WRAPPERS_FILE)
            return _WRAPPERS[t.name]
        return _SCALARS[t.name]

    def _import(self, file: str) -> None:
        if file not in self.imports:
            self.imports.append(file)

    def schema_text(self, package: str | None, root: _Message) -> str:
        """The schema as Confluent's ProtobufSchema prints it (ProtobufSchemaUtils.toString), so the text
        registered is the text ksqlDB registers (but for the confluent/meta.proto import with a DECIMAL)."""
        text = 'syntax = "proto3";\n'
        if package:
            text += f"package {package};\n"
        if self.imports:
            text += "\n" + "".join(f'import "{file}";\n' for file in self.imports)
        return text + "\n" + _message_text(root)


def _message_text(message: _Message) -> str:
    text = f"message {message.name} {{"
    if message.fields:
        text += "\n" + "".join(_indented(_field_text(f)) for f in message.fields)
    if message.nested:
        text += "\n" + "".join(_indented(_message_text(m)) for m in message.nested)
    return text + "}\n"


def _field_text(f: _Field) -> str:
    text = f"{f.label} " if f.label else ""
    text += f"{f.type.name} {f.name} = {f.number}"
    if len(f.options) == 1:
        text += f" [{f.options[0]}]"
    elif f.options:
        last = len(f.options) - 1
        text += (
            " [\n" + "".join(_indented(o + ("," if i < last else "")) for i, o in enumerate(f.options)) + "]"
        )
    return text + ";\n"


def _decimal_meta(t: ast.DecimalType) -> str:
    """The confluent.field_meta option with the precision and scale, value before key as Confluent prints
    them."""
    entries = [
        "{\n" + _indented(f'value: "{value}",') + _indented(f'key: "{key}"') + "}"
        for key, value in (("precision", t.precision), ("scale", t.scale))
    ]
    params = "[\n" + _indented(entries[0] + ",") + _indented(entries[1]) + "]"
    return "(confluent.field_meta) = {\n" + _indented(f"params: {params}") + "}"


def _indented(text: str) -> str:
    """Every line of `text` two spaces in, empty ones too, as Confluent's appendIndented (Java's split drops
    the trailing empty lines)."""
    lines = text.split("\n")
    while lines and not lines[-1]:
        lines.pop()
    return "".join(f"  {line}\n" for line in lines)
