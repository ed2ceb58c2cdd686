"""Serialization formats of the streaming SQL layer: Kafka record keys and values to rows and back, as ksqlDB.

`key_format` and `value_format` check a statement's format, columns and WITH properties once and return a
`KeyFormat` or `ValueFormat` whose `decode` and `encode` do one record. The formats are ksqlDB's: KAFKA
(Kafka's primitive serializers), JSON, DELIMITED (one CSV line), JSON_SR, AVRO and PROTOBUF (in the schema
registry's wire format: magic byte 0, a 4-byte schema id, then the payload), PROTOBUF_NOSR (both Protobuf
formats are in the module `protobuf`) and NONE (no key). Where ksqlDB's choice is not the obvious one (how a
CSV field is quoted, how a double is written, which JSON property matches a column) the comment says so: the
reference is ksqlDB's code (`ksqldb-serde`), not its docs.

Row values are plain Python: BOOLEAN bool, INT and BIGINT int, DOUBLE float, DECIMAL Decimal, STRING str,
BYTES bytes, DATE date, TIME time, TIMESTAMP a naive datetime in UTC, ARRAY list, MAP dict, STRUCT a dict
of the declared field names. A record that cannot be read or a row that cannot be written raises
`SerdeError` with a one-line reason (callers skip and count such records, as ksqlDB's processing log does);
the only I/O is the schema registry, through a `RegistryClient`.
"""

from __future__ import annotations

import base64
import binascii
import csv
import http.client
import io
import json
import math
import re
import struct
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Context, Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any, Literal, Protocol
from urllib.parse import quote

import fastavro

from odradek.sql import ast

__all__ = [
    "Column",
    "HttpRegistryClient",
    "KeyFormat",
    "KeyRow",
    "RegistryClient",
    "SerdeError",
    "ValueFormat",
    "WindowKind",
    "key_format",
    "value_format",
]

WindowKind = Literal["TUMBLING", "HOPPING", "SESSION"] | None

FORMATS = ("AVRO", "DELIMITED", "JSON", "JSON_SR", "KAFKA", "NONE", "PROTOBUF", "PROTOBUF_NOSR")
REGISTRY_TIMEOUT_S = 30.0
AVRO_NAMESPACE = "io.confluent.ksql.avro_schemas"
AVRO_FULL_NAME = AVRO_NAMESPACE + ".KsqlDataSourceSchema"  # what ksqlDB names the records it registers

_NO_PROPERTIES: Mapping[str, Any] = MappingProxyType({})
_PRIMITIVES = ("BOOLEAN", "INT", "BIGINT", "DOUBLE", "STRING", "BYTES", "DATE", "TIME", "TIMESTAMP")
_KAFKA_TYPES = ("INT", "BIGINT", "DOUBLE", "STRING", "BYTES")  # the types Kafka has a serializer for
_KAFKA_NUMBERS = {"INT": struct.Struct(">i"), "BIGINT": struct.Struct(">q"), "DOUBLE": struct.Struct(">d")}
_BITS = {"INT": 32, "BIGINT": 64, "DATE": 32, "TIME": 32, "TIMESTAMP": 64}
_EPOCH = datetime(1970, 1, 1)
_DAY_MS = 86_400_000
_MS = timedelta(milliseconds=1)
_FRAME = struct.Struct(">bi")  # the schema registry's wire format: magic byte 0, then the schema id


class SerdeError(ValueError):
    """A format that cannot be used as asked, or a record that cannot be read or written; one line."""


@dataclass(frozen=True)
class Column:
    name: str
    type: ast.SqlType


@dataclass(frozen=True)
class KeyRow:
    """A decoded key: one value per key column, and the window's bounds in ms for a windowed key (the end
    is only in a SESSION key; a TUMBLING or HOPPING key carries its start, the window size is the query's)."""

    values: tuple
    window_start: int | None = None
    window_end: int | None = None


class RegistryClient(Protocol):
    def schema_by_id(self, schema_id: int) -> str: ...

    def register(self, subject: str, schema: str, schema_type: str) -> int: ...


class HttpRegistryClient:
    """A schema registry's REST API (Confluent's, which Odradek's registry serves too) at `url`, over urllib.
    Every failure is a SerdeError, so a record that needs an unreachable registry is skipped like any
    other that cannot be read."""

    CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

    def __init__(self, url: str, timeout_s: float = REGISTRY_TIMEOUT_S):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def schema_by_id(self, schema_id: int) -> str:
        answer = self._call("GET", f"/schemas/ids/{int(schema_id)}")
        if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
            raise SerdeError(
                f"the schema registry at {self.url} answered schema {schema_id} without its text"
            )
        return answer["schema"]

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        path = f"/subjects/{quote(subject, safe='')}/versions"
        answer = self._call("POST", path, {"schema": schema, "schemaType": schema_type})
        if (
            not isinstance(answer, dict)
            or isinstance(answer.get("id"), bool)
            or not isinstance(answer.get("id"), int)
        ):
            raise SerdeError(f"the schema registry at {self.url} registered {subject} without an id")
        return answer["id"]

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": f"{self.CONTENT_TYPE}, application/json"}
        if data is not None:
            headers["Content-Type"] = self.CONTENT_TYPE
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
                reason = f"{answer['message']} (error {answer.get('error_code')})"
            except (ValueError, TypeError, KeyError, OSError):
                reason = f"HTTP {exc.code}"
            raise SerdeError(
                f"the schema registry at {self.url} refused {method} {path}: {_one_line(reason)}"
            ) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError and timeouts are OSErrors
            reason = getattr(exc, "reason", None) or exc or type(exc).__name__
            raise SerdeError(
                f"cannot reach the schema registry at {self.url}: {_one_line(str(reason))}"
            ) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise SerdeError(
                f"the schema registry at {self.url} answered {method} {path} with no JSON"
            ) from None


class _Bad(Exception):
    """A record that cannot be read or a row that cannot be written; KeyFormat and ValueFormat add which."""


# ------------------------------------------------------------------------------------- the two formats


@dataclass(frozen=True)
class KeyFormat:
    """How a source's record keys are read and written. Windowed keys are laid out as Kafka Streams does:
    the key's bytes, then the window start (TUMBLING, HOPPING) or the window end and start (SESSION), each
    8 bytes big-endian."""

    format: str
    columns: tuple[Column, ...]
    window: WindowKind
    codec: _Codec = field(repr=False, compare=False)

    def decode(self, data: bytes | None) -> KeyRow:
        if data is None:
            return KeyRow((None,) * len(self.columns))
        try:
            start = end = None
            if self.window == "SESSION":
                data, end, start = _take_longs(data, 2)
            elif self.window is not None:
                data, start = _take_longs(data, 1)
            values = self.codec.decode(data)
        except _Bad as exc:
            raise SerdeError(f"{self.format} key: {exc}") from None
        return KeyRow(values if values is not None else (None,) * len(self.columns), start, end)

    def encode(
        self, values: Sequence, window_start: int | None = None, window_end: int | None = None
    ) -> bytes | None:
        try:
            data = self.codec.encode(_row(values, self.columns))
            if self.window is None:
                return data
            if window_start is None or (self.window == "SESSION" and window_end is None):
                bounds = "window_start and window_end" if self.window == "SESSION" else "window_start"
                raise _Bad(f"a {self.window} key needs its {bounds}")
            bounds = (window_end, window_start) if self.window == "SESSION" else (window_start,)
            return (data or b"") + b"".join(_long(bound) for bound in bounds)
        except _Bad as exc:
            raise SerdeError(f"{self.format} key: {exc}") from None


@dataclass(frozen=True)
class ValueFormat:
    """How a source's record values are read and written; a null value (a tombstone) is None both ways."""

    format: str
    columns: tuple[Column, ...]
    codec: _Codec = field(repr=False, compare=False)

    def decode(self, data: bytes | None) -> tuple | None:
        if data is None:
            return None
        try:
            return self.codec.decode(data)
        except _Bad as exc:
            raise SerdeError(f"{self.format} value: {exc}") from None

    def encode(self, values: Sequence | None) -> bytes | None:
        if values is None:
            return None
        try:
            return self.codec.encode(_row(values, self.columns))
        except _Bad as exc:
            raise SerdeError(f"{self.format} value: {exc}") from None


def key_format(
    name: str,
    columns: Sequence[Column],
    window: WindowKind = None,
    properties: Mapping[str, Any] = _NO_PROPERTIES,
    registry: RegistryClient | None = None,
    topic: str = "",
) -> KeyFormat:
    """The KEY_FORMAT `name` over the key `columns`; a single key column is written bare (unwrapped), several
    as one object or record, as ksqlDB does."""
    fmt = _format_name(name, "KEY")
    columns = tuple(columns)
    if window not in (None, "TUMBLING", "HOPPING", "SESSION"):
        raise SerdeError(f"unknown window kind {window!r} (TUMBLING, HOPPING or SESSION)")
    for column in columns:
        if any(isinstance(t, ast.MapType) for t in _types_in(column.type)):
            # ksqlDB refuses them: a map's entries have no fixed order, so equal keys could differ in bytes
            raise SerdeError(
                f"KEY_FORMAT {fmt} does not support MAP in key columns: column {column.name} is "
                f"{ast.type_text(column.type, rest=True)}"
            )
    codec = _codec(fmt, "KEY", columns, len(columns) != 1, properties, registry, f"{topic}-key")
    return KeyFormat(fmt, columns, window, codec)


def value_format(
    name: str,
    columns: Sequence[Column],
    properties: Mapping[str, Any] = _NO_PROPERTIES,
    registry: RegistryClient | None = None,
    topic: str = "",
) -> ValueFormat:
    """The VALUE_FORMAT `name` over the value `columns`; WRAP_SINGLE_VALUE=false writes one column bare."""
    fmt = _format_name(name, "VALUE")
    columns = tuple(columns)
    if fmt == "NONE":
        raise SerdeError("VALUE_FORMAT NONE is not supported: NONE is only a key format")
    codec = _codec(
        fmt,
        "VALUE",
        columns,
        _value_wrapped(fmt, columns, properties),
        properties,
        registry,
        f"{topic}-value",
    )
    return ValueFormat(fmt, columns, codec)


def _format_name(name: str, role: str) -> str:
    fmt = name.upper()
    if fmt not in FORMATS:
        raise SerdeError(f"unknown {role}_FORMAT {name!r} (one of {', '.join(FORMATS)})")
    return fmt


def _value_wrapped(fmt: str, columns: tuple[Column, ...], properties: Mapping[str, Any]) -> bool:
    """Whether the value is an object or record of its columns. ksqlDB wraps by default, but KAFKA and
    DELIMITED never wrap, PROTOBUF always does, and WRAP_SINGLE_VALUE=false unwraps a single JSON, JSON_SR,
    AVRO or PROTOBUF_NOSR column."""
    setting = properties.get("WRAP_SINGLE_VALUE")
    if setting is None:
        return fmt not in ("KAFKA", "DELIMITED") or len(columns) != 1
    wrap = _boolean(setting, "WRAP_SINGLE_VALUE")
    if len(columns) != 1:
        raise SerdeError(f"WRAP_SINGLE_VALUE is only valid for a single value column, got {len(columns)}")
    if wrap and fmt in ("KAFKA", "DELIMITED"):
        raise SerdeError(f"VALUE_FORMAT {fmt} does not support WRAP_SINGLE_VALUE=true")
    if not wrap and fmt == "PROTOBUF":
        raise SerdeError("VALUE_FORMAT PROTOBUF does not support WRAP_SINGLE_VALUE=false")
    return wrap


def _codec(
    fmt: str,
    role: str,
    columns: tuple[Column, ...],
    wrapped: bool,
    properties: Mapping[str, Any],
    registry: RegistryClient | None,
    subject: str,
) -> _Codec:
    delimiter = properties.get(f"{role}_DELIMITER")
    if delimiter is not None and fmt != "DELIMITED":
        raise SerdeError(f"{role}_DELIMITER is only for {role}_FORMAT DELIMITED, not {fmt}")
    nullable = f"{role}_PROTOBUF_NULLABLE_REPRESENTATION"
    if properties.get(nullable) is not None and not fmt.startswith("PROTOBUF"):
        raise SerdeError(f"{nullable} is only for {role}_FORMAT PROTOBUF or PROTOBUF_NOSR, not {fmt}")
    if properties.get(f"{role}_SCHEMA_FULL_NAME") is not None and fmt not in ("AVRO", "PROTOBUF"):
        raise SerdeError(f"{role}_SCHEMA_FULL_NAME is only for {role}_FORMAT AVRO or PROTOBUF, not {fmt}")
    if properties.get(f"{role}_AVRO_SCHEMA_FULL_NAME") is not None and fmt != "AVRO":
        raise SerdeError(f"{role}_AVRO_SCHEMA_FULL_NAME is only for {role}_FORMAT AVRO, not {fmt}")
    schema_id = properties.get(f"{role}_SCHEMA_ID")
    if schema_id is not None and fmt not in ("AVRO", "JSON_SR"):
        raise SerdeError(f"{role}_SCHEMA_ID is only for {role}_FORMAT AVRO or JSON_SR, not {fmt}")
    for column in columns:
        if not all(isinstance(t, _KNOWN_TYPES) for t in _types_in(column.type)):
            raise SerdeError(f"column {column.name} has a type the formats do not know: {column.type!r}")
    if not columns:
        return _NoColumns()
    if fmt == "NONE":
        raise SerdeError(f"KEY_FORMAT NONE is only for streams without key columns, got {len(columns)}")
    if fmt == "KAFKA":
        if len(columns) != 1:
            raise SerdeError(f"{role}_FORMAT KAFKA supports one {role.lower()} column, got {len(columns)}")
        _refuse_types(
            fmt, role, columns, lambda t: isinstance(t, ast.PrimitiveType) and t.name in _KAFKA_TYPES
        )
        return _Kafka(columns[0])
    if fmt == "DELIMITED":
        _refuse_types(fmt, role, columns, lambda t: isinstance(t, ast.PrimitiveType | ast.DecimalType))
        return _Delimited(columns, _delimiter(delimiter, role))
    for column in columns:
        for t in _types_in(column.type):
            if isinstance(t, ast.MapType) and t.key != ast.PrimitiveType("STRING"):
                raise SerdeError(
                    f"{role}_FORMAT {fmt} supports only MAPs with STRING keys: column {column.name} is "
                    f"{ast.type_text(column.type, rest=True)}"
                )
    if fmt == "JSON":
        return _Json(columns, wrapped, None)
    if registry is None and fmt != "PROTOBUF_NOSR":
        raise SerdeError(
            f"{role}_FORMAT {fmt} needs a schema registry (set the SQL server's schema registry URL)"
        )
    if fmt.startswith("PROTOBUF"):
        from odradek.sql import protobuf  # here: it imports this module

        return protobuf.codec(fmt, role, columns, wrapped, properties, registry, subject)
    fixed_id = None if schema_id is None else _schema_id(schema_id, f"{role}_SCHEMA_ID")
    if fmt == "JSON_SR":
        schema = _json_schema(_row_type(columns) if wrapped else columns[0].type, wrapped)
        return _Json(columns, wrapped, _Registered(registry, subject, "JSON", _compact(schema), fixed_id))
    return _avro(role, columns, wrapped, properties, registry, subject, fixed_id)


def _avro(
    role: str,
    columns: tuple[Column, ...],
    wrapped: bool,
    properties: Mapping[str, Any],
    registry: RegistryClient,
    subject: str,
    fixed_id: int | None,
) -> _Avro:
    names = [c.name for c in columns] if wrapped else []
    names += [
        f.name for c in columns for t in _types_in(c.type) if isinstance(t, ast.StructType) for f in t.fields
    ]
    for name in names:
        if not _AVRO_NAME.fullmatch(_avro_name(name)):
            raise SerdeError(
                f"{role}_FORMAT AVRO cannot name the column or field {name!r}: Avro names are letters, "
                "digits and _, not starting with a digit"
            )
    full_name = properties.get(f"{role}_SCHEMA_FULL_NAME") or properties.get(f"{role}_AVRO_SCHEMA_FULL_NAME")
    schema = _avro_schema(
        _row_type(columns) if wrapped else columns[0].type, str(full_name or AVRO_FULL_NAME), True
    )
    derived = None
    if fixed_id is None:
        named: dict = {}
        try:
            derived = (fastavro.parse_schema(schema, named_schemas=named), named)
        except Exception as exc:  # fastavro has no single error type for a bad schema
            raise SerdeError(f"{role}_FORMAT AVRO cannot derive a schema: {_one_line(exc)}") from None
    return _Avro(
        columns,
        wrapped,
        registry,
        _Registered(registry, subject, "AVRO", _compact(schema), fixed_id),
        derived,
    )


def _refuse_types(fmt: str, role: str, columns: tuple[Column, ...], supported: Callable[[Any], bool]) -> None:
    for column in columns:
        if not supported(column.type):
            raise SerdeError(
                f"{role}_FORMAT {fmt} does not support column {column.name} of type {ast.type_text(column.type, rest=True)}"
            )


def _boolean(setting: Any, what: str) -> bool:
    if isinstance(setting, bool):
        return setting
    if isinstance(setting, str) and setting.lower() in ("true", "false"):
        return setting.lower() == "true"
    raise SerdeError(f"{what} must be true or false, got {setting!r}")


def _schema_id(setting: Any, what: str) -> int:
    try:
        schema_id = int(setting)
    except (TypeError, ValueError):
        schema_id = 0
    if isinstance(setting, bool) or schema_id <= 0:
        raise SerdeError(f"{what} must be a schema id (a positive integer), got {setting!r}")
    return schema_id


def _delimiter(setting: Any, role: str) -> str:
    """A single character, or TAB or SPACE; ksqlDB refuses a bare whitespace character (write TAB or SPACE)
    and commons-csv a quote."""
    if setting is None:
        return ","
    text = str(setting)
    named = {"TAB": "\t", "SPACE": " "}.get(text.upper())
    if named is not None:
        return named
    if len(text) != 1 or text.isspace() or text <= " " or text == '"':
        raise SerdeError(
            f"{role}_DELIMITER must be a single character other than a quote or whitespace, or TAB or SPACE; "
            f"got {text!r}"
        )
    return text


# ------------------------------------------------------------------------------------- types


_KNOWN_TYPES = (ast.PrimitiveType, ast.DecimalType, ast.ArrayType, ast.MapType, ast.StructType)


def _types_in(t: ast.SqlType):
    """`t` and every type nested in it."""
    yield t
    if isinstance(t, ast.ArrayType):
        yield from _types_in(t.element)
    elif isinstance(t, ast.MapType):
        yield from _types_in(t.key)
        yield from _types_in(t.value)
    elif isinstance(t, ast.StructType):
        for f in t.fields:
            yield from _types_in(f.type)
    elif isinstance(t, ast.PrimitiveType) and t.name not in _PRIMITIVES:
        yield None  # not a known type: _codec refuses the column


def _row_type(columns: tuple[Column, ...]) -> ast.StructType:
    """A wrapped row is read and written as the struct of its columns."""
    return ast.StructType(tuple(ast.StructField(c.name, c.type) for c in columns))


def _row(values: Sequence, columns: tuple[Column, ...]) -> tuple:
    values = tuple(values)
    if len(values) != len(columns):
        raise _Bad(f"got {len(values)} values for {len(columns)} columns")
    return values


def _at(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _bad(path: str, reason: str) -> _Bad:
    return _Bad(f"{path}: {reason}" if path else reason)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# ------------------------------------------------------------------------------------- values


def _fit_decimal(value: Decimal, t: ast.DecimalType, path: str) -> Decimal:
    """`value` at the column's scale, as ksqlDB's DecimalUtil.ensureFit: no rounding, no overflow."""
    if not value.is_finite():
        raise _bad(path, f"{value} is not a DECIMAL")
    if value.copy_abs() >= Decimal(10) ** (t.precision - t.scale):
        raise _bad(path, f"{value} does not fit {ast.type_text(t, rest=True)}")
    try:
        fitted = value.quantize(Decimal(1).scaleb(-t.scale), context=Context(prec=max(t.precision, 1)))
    except InvalidOperation:
        raise _bad(path, f"{value} does not fit {ast.type_text(t, rest=True)}") from None
    if fitted != value:
        raise _bad(path, f"{value} does not fit {ast.type_text(t, rest=True)} without rounding")
    return fitted.copy_abs() if fitted == 0 else fitted  # Java's BigDecimal has no negative zero


def _decimal_text(value: Decimal) -> str:
    """Java's BigDecimal.toString, which Python's str of a Decimal follows but for the sign of zero."""
    return str(value.copy_abs() if value == 0 else value)


def _in_range(value: int, bits: int, name: str, path: str) -> int:
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise _bad(path, f"{value} is out of range for {name}")
    return value


def _date_of(days: int, path: str) -> date:
    try:
        return date(1970, 1, 1) + timedelta(days=days)
    except OverflowError:
        raise _bad(path, f"{days} days from 1970-01-01 is out of range for DATE") from None


def _time_of(ms: int, path: str) -> time:
    # ksqlDB allows 0 to 86400000 ms inclusive; 24:00 has no datetime.time, so 86400000 is refused here
    if not 0 <= ms < _DAY_MS:
        raise _bad(path, f"{ms} ms is not a TIME (0 to 86399999 ms of the day)")
    seconds, millis = divmod(ms, 1000)
    minutes, second = divmod(seconds, 60)
    return time(minutes // 60, minutes % 60, second, millis * 1000)


def _timestamp_of(ms: int, path: str) -> datetime:
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise _bad(path, f"{ms} ms from the epoch is out of range for TIMESTAMP") from None


def _java_double(value: float) -> str:
    """Java's Double.toString, as Jackson writes doubles in JSON and commons-csv in CSV: plain between 10^-3
    and 10^7, else computerized scientific notation such as 1.0E10. The digits are the shortest that read
    back as the same double, as specified since JDK 19; older JDKs (ksqlDB runs on 11 or 17) write one more
    digit for a few doubles in a thousand, 1.37342863480957901E18 for 1.373428634809579E18."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    shortest = Decimal(repr(abs(value)))  # repr has the shortest digits that read back as the same double
    if len(shortest.normalize().as_tuple().digits) == 1:
        # Java takes the closest of the one- and two-digit decimals: Double.MIN_VALUE is 4.9E-324, not 5E-324
        exact = Decimal(abs(value))
        shortest = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1))
    digits = "".join(map(str, shortest.as_tuple().digits)).rstrip("0")
    exponent = shortest.adjusted()
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# What Java's parsers accept: Integer.parseInt and Long.parseLong, BigDecimal(String), Double.parseDouble
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))  # Double.parseDouble trims what String.trim does: up to ' '
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")


def _parse_integer(text: str, name: str, path: str) -> int:
    if not _JAVA_INTEGER.fullmatch(text):
        raise _bad(path, f"cannot read the text as {name}")
    return _in_range(int(text), _BITS[name], name, path)


def _parse_decimal(text: str, t: ast.DecimalType, path: str) -> Decimal:
    if not _JAVA_DECIMAL.fullmatch(text):
        raise _bad(path, f"cannot read the text as {ast.type_text(t, rest=True)}")
    return _fit_decimal(Decimal(text), t, path)


def _parse_double(text: str, path: str) -> float:
    text = text.strip(_JAVA_TRIMMED)
    if not _JAVA_DOUBLE.fullmatch(text):
        raise _bad(path, "cannot read the text as DOUBLE")
    return float(text.rstrip("fFdD"))


def _base64(text: str, path: str) -> bytes:
    """Base64 as Java's decoder reads it: the standard alphabet, padding optional."""
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise _bad(path, "cannot read the text as Base64") from None


def _wire(value: Any, t: ast.SqlType, path: str) -> Any:
    """A row value to write, checked against its type, in the form every format writes it from: DECIMAL at
    its scale, DATE as days, TIME and TIMESTAMP as ms, STRUCT as a dict in declared order."""
    if value is None:
        return None
    if isinstance(t, ast.DecimalType):
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise _bad(path, f"expected a Decimal for {ast.type_text(t, rest=True)}, got {type(value).__name__}")
        return _fit_decimal(Decimal(value), t, path)
    if isinstance(t, ast.ArrayType):
        if not isinstance(value, list | tuple):
            raise _bad(path, f"expected a list for {ast.type_text(t, rest=True)}, got {type(value).__name__}")
        return [_wire(item, t.element, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(t, ast.MapType):
        if not isinstance(value, Mapping):
            raise _bad(path, f"expected a dict for {ast.type_text(t, rest=True)}, got {type(value).__name__}")
        return {
            _wire(k, t.key, f"{path}[{k!r}]"): _wire(v, t.value, f"{path}[{k!r}]") for k, v in value.items()
        }
    if isinstance(t, ast.StructType):
        if not isinstance(value, Mapping):
            raise _bad(path, f"expected a dict for {ast.type_text(t, rest=True)}, got {type(value).__name__}")
        unknown = set(value) - {f.name for f in t.fields}
        if unknown:
            raise _bad(path, f"{ast.type_text(t, rest=True)} has no field {sorted(map(str, unknown))[0]!r}")
        return {f.name: _wire(value.get(f.name), f.type, _at(path, f.name)) for f in t.fields}
    return _WIRE_PRIMITIVES[t.name](value, path)


def _wire_integer(name: str) -> Callable[[Any, str], int]:
    def wire(value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(path, f"expected an int for {name}, got {type(value).__name__}")
        return _in_range(value, _BITS[name], name, path)

    return wire


def _wire_of(name: str, noun: str, kinds: type | tuple[type, ...], convert: Callable[[Any], Any]):
    def wire(value: Any, path: str) -> Any:
        if isinstance(value, bool) != (name == "BOOLEAN") or not isinstance(value, kinds):
            raise _bad(path, f"expected {noun} for {name}, got {type(value).__name__}")
        return convert(value)

    return wire


def _wire_date(value: Any, path: str) -> int:
    if isinstance(value, date) and not isinstance(value, datetime):
        return (value - date(1970, 1, 1)).days
    return _wire_integer("DATE")(value, path)


def _wire_time(value: Any, path: str) -> int:
    if isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    ms = _wire_integer("TIME")(value, path)
    _time_of(ms, path)
    return ms


def _wire_timestamp(value: Any, path: str) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return (value - _EPOCH) // _MS
    return _wire_integer("TIMESTAMP")(value, path)


_WIRE_PRIMITIVES: dict[str, Callable[[Any, str], Any]] = {
    "BOOLEAN": _wire_of("BOOLEAN", "a bool", bool, bool),
    "INT": _wire_integer("INT"),
    "BIGINT": _wire_integer("BIGINT"),
    "DOUBLE": _wire_of("DOUBLE", "a float", (float, int), float),
    "STRING": _wire_of("STRING", "a str", str, str),
    "BYTES": _wire_of("BYTES", "bytes", (bytes, bytearray, memoryview), bytes),
    "DATE": _wire_date,
    "TIME": _wire_time,
    "TIMESTAMP": _wire_timestamp,
}


# ------------------------------------------------------------------------------------- codecs


class _Codec(Protocol):
    def decode(self, data: bytes) -> tuple | None: ...  # None: the bytes say null (JSON null, an Avro null)

    def encode(self, values: tuple) -> bytes | None: ...


class _NoColumns:
    """No columns (NONE, or a key-less stream in another format): the bytes are ignored, and none written."""

    def decode(self, data: bytes) -> tuple | None:
        return ()

    def encode(self, values: tuple) -> bytes | None:
        return None


class _Kafka:
    """Kafka's own serializers (IntegerSerializer, LongSerializer, DoubleSerializer, StringSerializer,
    ByteBufferSerializer) for one column; ksqlDB does no coercion here."""

    def __init__(self, column: Column):
        self.type = column.type
        self.name = column.name

    def decode(self, data: bytes) -> tuple | None:
        name = self.type.name
        number = _KAFKA_NUMBERS.get(name)
        if number is not None:
            if len(data) != number.size:
                raise _Bad(f"{name} needs {number.size} bytes, got {len(data)}")
            return (number.unpack(data)[0],)
        if name == "STRING":
            return (data.decode("utf-8", "replace"),)  # Java's String(bytes, UTF_8) replaces malformed input
        return (bytes(data),)

    def encode(self, values: tuple) -> bytes | None:
        value = _wire(values[0], self.type, self.name)
        if value is None:
            return None
        number = _KAFKA_NUMBERS.get(self.type.name)
        if number is not None:
            return number.pack(value)
        # Java's getBytes(UTF_8) writes a lone surrogate as '?', as "replace" does
        return value.encode("utf-8", "replace") if self.type.name == "STRING" else value


def _take_longs(data: bytes, count: int) -> tuple:
    """The key's bytes before `count` trailing 8-byte big-endian longs, then the longs."""
    if len(data) < 8 * count:
        raise _Bad(f"a windowed key needs at least {8 * count} bytes, got {len(data)}")
    head = len(data) - 8 * count
    longs = struct.unpack(f">{count}q", data[head:])
    return (data[:head], *longs)


def _long(value: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < 1 << 63:
        raise _Bad(f"a window bound must be an int of ms, got {value!r}")
    return struct.pack(">q", value)


# --------------------------------------------------------------------- JSON and JSON_SR


class _Json:
    """JSON as ksqlDB reads it (KsqlJsonDeserializer: Jackson, decimals kept exact, lenient coercions) and
    writes it (Kafka Connect's JsonConverter without schemas, decimals as numbers). JSON_SR is the same
    text behind the schema registry's framing; the schema id is not needed to read it."""

    def __init__(self, columns: tuple[Column, ...], wrapped: bool, registered: _Registered | None):
        self.wrapped = wrapped
        self.type = _row_type(columns) if wrapped else columns[0].type
        self.root = "" if wrapped else columns[0].name
        self.registered = registered

    def decode(self, data: bytes) -> tuple | None:
        if self.registered is not None:
            if len(data) < _FRAME.size or data[0] != 0:
                raise _Bad("does not start with the schema registry's magic byte 0 (is it plain JSON?)")
            data = data[_FRAME.size :]
        node = _parse_json(data)
        if self.wrapped:
            # ksqlDB reads a JSON null for a wrapped row as a null row, the same as a tombstone
            row = _from_json(node, self.type, self.root)
            return None if row is None else tuple(row.values())
        return (_from_json(node, self.type, self.root),)

    def encode(self, values: tuple) -> bytes | None:
        if self.wrapped:
            names = [f.name for f in self.type.fields]
            node = _wire(dict(zip(names, values, strict=True)), self.type, "")
        else:
            node = _wire(values[0], self.type, self.root)
            if node is None:
                return None  # ksqlDB writes a null single unwrapped column as a null record
        try:
            text = _json_text(node).encode("utf-8")
        except UnicodeEncodeError:
            raise _Bad("a string is not valid Unicode (a lone surrogate)") from None
        if self.registered is None:
            return text
        return _FRAME.pack(0, self.registered.schema_id()) + text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Jackson keeps floats exact (USE_BIG_DECIMAL_FOR_FLOATS) and refuses NaN and Infinity
_JSON_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_reject_constant)


def _parse_json(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
        start = len(text) - len(text.lstrip(" \t\r\n"))
        # Jackson's readTree reads the first value and ignores what follows it
        return _JSON_DECODER.raw_decode(text, start)[0]
    except UnicodeDecodeError:
        raise _Bad("not UTF-8 text") from None
    except ValueError as exc:
        raise _Bad(f"not valid JSON: {_one_line(exc)}") from None


def _json_kind(node: Any) -> str:
    if isinstance(node, bool):
        return "a boolean"
    if isinstance(node, int | Decimal):
        return "a number"
    if isinstance(node, str):
        return "a string"
    return "an array" if isinstance(node, list) else "an object"


def _from_json(node: Any, t: ast.SqlType, path: str) -> Any:
    """A JSON value read as type `t` with ksqlDB's coercions: numbers and numeric text to the number types
    (a fraction truncated toward zero for INT and BIGINT, as Jackson's intValue), anything to STRING,
    DATE from days, TIME from ms of the day and TIMESTAMP from epoch ms (numbers or numeric text), BYTES
    from Base64 text. BOOLEAN only from true and false: ksqlDB does not read the text "true"."""
    if node is None:
        return None
    if isinstance(t, ast.PrimitiveType):
        return _JSON_READERS[t.name](node, t.name, path)
    if isinstance(t, ast.DecimalType):
        if isinstance(node, int | Decimal) and not isinstance(node, bool):
            return _fit_decimal(Decimal(node), t, path)
        if isinstance(node, str):
            return _parse_decimal(node, t, path)
    elif isinstance(t, ast.ArrayType):
        if isinstance(node, list):
            return [_from_json(item, t.element, f"{path}[{i}]") for i, item in enumerate(node)]
    elif isinstance(t, ast.MapType):
        if isinstance(node, dict):
            return {k: _from_json(v, t.value, f"{path}[{k!r}]") for k, v in node.items()}
        if isinstance(node, list) and all(isinstance(e, dict) and set(e) == {"key", "value"} for e in node):
            # ksqlDB writes JSON_SR maps as arrays of key/value objects (its issue 6049): read those too
            return {str(e["key"]): _from_json(e["value"], t.value, f"{path}[{e['key']!r}]") for e in node}
    elif isinstance(node, dict):
        fields = _match_fields(node, [f.name for f in t.fields])
        return {f.name: _from_json(fields.get(f.name), f.type, _at(path, f.name)) for f in t.fields}
    raise _bad(path, f"expected {ast.type_text(t, rest=True)}, got {_json_kind(node)}")


def _match_fields(source: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    """The entries of `source` for the fields or columns `names`, as ksqlDB matches them: the same name,
    else a name that upper-cased is it (so unquoted names, which are upper case, match in any case)."""
    upper: dict[str, Any] = {}
    for key, value in source.items():
        upper.setdefault(key.upper(), value)  # the first match wins, as ksqlDB's docs say
    return {name: source[name] if name in source else upper.get(name) for name in names}


def _json_integer(node: Any, name: str, path: str) -> int:
    if isinstance(node, str):
        return _parse_integer(node, name, path)
    if isinstance(node, bool) or not isinstance(node, int | Decimal):
        raise _bad(path, f"expected {name}, got {_json_kind(node)}")
    # Jackson truncates a fraction; where it would wrap around an overflowing number, it is refused here
    return _in_range(int(node), _BITS[name], name, path)


def _json_double(node: Any, name: str, path: str) -> float:
    if isinstance(node, str):
        return _parse_double(node, path)
    if isinstance(node, bool) or not isinstance(node, int | Decimal):
        raise _bad(path, f"expected DOUBLE, got {_json_kind(node)}")
    return float(Decimal(node))


def _json_string(node: Any, name: str, path: str) -> str:
    """Any JSON as text as ksqlDB does: objects as their compact JSON, arrays as "[a, b]" of their
    elements as text, numbers as Java's BigDecimal.toString writes them."""
    if isinstance(node, str):
        return node
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, Decimal):
        return _decimal_text(node)
    if isinstance(node, int):
        return str(node)
    if isinstance(node, list):
        items = (_json_string(item, name, path) if item is not None else "null" for item in node)
        return "[" + ", ".join(items) + "]"
    return _json_text(node)


def _json_boolean(node: Any, name: str, path: str) -> bool:
    if not isinstance(node, bool):
        raise _bad(path, f"expected BOOLEAN, got {_json_kind(node)}")
    return node


def _json_bytes(node: Any, name: str, path: str) -> bytes:
    if not isinstance(node, str):
        raise _bad(path, f"expected BYTES (Base64 text), got {_json_kind(node)}")
    return _base64(node, path)


def _json_temporal(convert: Callable[[int, str], Any]) -> Callable[[Any, str, str], Any]:
    def read(node: Any, name: str, path: str) -> Any:
        if isinstance(node, str):
            return convert(_parse_integer(node, "BIGINT", path), path)
        if isinstance(node, bool) or not isinstance(node, int | Decimal):
            raise _bad(path, f"expected {name}, got {_json_kind(node)}")
        return convert(int(node), path)

    return read


_JSON_READERS: dict[str, Callable[[Any, str, str], Any]] = {
    "BOOLEAN": _json_boolean,
    "INT": _json_integer,
    "BIGINT": _json_integer,
    "DOUBLE": _json_double,
    "STRING": _json_string,
    "BYTES": _json_bytes,
    "DATE": _json_temporal(_date_of),
    "TIME": _json_temporal(_time_of),
    "TIMESTAMP": _json_temporal(_timestamp_of),
}

# Jackson's escapes: the short ones, other control characters as \u00XX in upper-case hex, and (as its
# UTF-8 writer does by default) a character beyond the BMP as its escaped UTF-16 surrogate pair
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f\U00010000-\U0010ffff]')


def _json_escape(match: re.Match) -> str:
    char = match[0]
    if char in _JSON_ESCAPES:
        return _JSON_ESCAPES[char]
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"


def _json_text(node: Any) -> str:
    """Compact JSON as Jackson writes it: doubles as Java's Double.toString (NaN and the infinities as
    strings), decimals as BigDecimal.toString, bytes as Base64, other non-ASCII text as it is."""
    if node is None:
        return "null"
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, float):
        text = _java_double(node)
        return text if math.isfinite(node) else f'"{text}"'
    if isinstance(node, Decimal):
        return _decimal_text(node)
    if isinstance(node, bytes):
        return '"' + base64.b64encode(node).decode("ascii") + '"'
    if isinstance(node, str):
        return '"' + _JSON_ESCAPED.sub(_json_escape, node) + '"'
    if isinstance(node, list):
        return "[" + ",".join(map(_json_text, node)) + "]"
    return "{" + ",".join(f"{_json_text(str(k))}:{_json_text(v)}" for k, v in node.items()) + "}"


def _json_schema(t: ast.SqlType, wrapped: bool) -> dict:
    """The JSON Schema of what JSON_SR writes, in the shape ksqlDB registers (Connect's JsonSchemaData):
    every value nullable through oneOf, connect.type and connect.index kept so Connect reads it back. Maps
    are objects here: ksqlDB's arrays of key/value objects are its bug 6049."""
    if wrapped:
        return _json_schema_of(t)
    return _nullable(_json_schema_of(t))


def _nullable(schema: dict, index: int | None = None) -> dict:
    head = {} if index is None else {"connect.index": index}
    return {**head, "oneOf": [{"type": "null"}, schema]}


def _json_schema_of(t: ast.SqlType) -> dict:
    if isinstance(t, ast.DecimalType):
        return {
            "type": "number",
            "title": "org.apache.kafka.connect.data.Decimal",
            "connect.version": 1,
            "connect.type": "bytes",
            "connect.parameters": {"scale": str(t.scale), "connect.decimal.precision": str(t.precision)},
        }
    if isinstance(t, ast.ArrayType):
        return {"type": "array", "items": _nullable(_json_schema_of(t.element))}
    if isinstance(t, ast.MapType):
        return {
            "type": "object",
            "additionalProperties": _nullable(_json_schema_of(t.value)),
            "connect.type": "map",
        }
    if isinstance(t, ast.StructType):
        properties = {f.name: _nullable(_json_schema_of(f.type), i) for i, f in enumerate(t.fields)}
        return {"type": "object", "properties": properties}
    return dict(_JSON_SCHEMA_PRIMITIVES[t.name])


def _connect_logical(json_type: str, name: str, connect_type: str) -> dict:
    return {
        "type": json_type,
        "title": f"org.apache.kafka.connect.data.{name}",
        "connect.version": 1,
        "connect.type": connect_type,
    }


_JSON_SCHEMA_PRIMITIVES: dict[str, dict] = {
    "BOOLEAN": {"type": "boolean"},
    "INT": {"type": "integer", "connect.type": "int32"},
    "BIGINT": {"type": "integer", "connect.type": "int64"},
    "DOUBLE": {"type": "number", "connect.type": "float64"},
    "STRING": {"type": "string"},
    "BYTES": {"type": "string", "connect.type": "bytes"},
    "DATE": _connect_logical("integer", "Date", "int32"),
    "TIME": _connect_logical("integer", "Time", "int32"),
    "TIMESTAMP": _connect_logical("integer", "Timestamp", "int64"),
}


def _compact(schema: Any) -> str:
    return json.dumps(schema, separators=(",", ":"))


# --------------------------------------------------------------------- DELIMITED


class _Delimited:
    """One CSV line as ksqlDB reads and writes it with commons-csv 1.4 (CSVFormat.DEFAULT with its own
    delimiter): fields in column order, an empty field is null, only the first line is read."""

    def __init__(self, columns: tuple[Column, ...], delimiter: str):
        self.columns = columns
        self.delimiter = delimiter

    def decode(self, data: bytes) -> tuple | None:
        text = data.decode("utf-8", "replace")  # Java's String(bytes, UTF_8) replaces malformed input
        try:
            reader = csv.reader(
                io.StringIO(text, newline=""),
                delimiter=self.delimiter,
                quotechar='"',
                doublequote=True,
                skipinitialspace=False,
                strict=True,
            )
            fields = next((row for row in reader if row), None)  # commons-csv skips empty lines
        except csv.Error as exc:
            raise _Bad(f"not a valid delimited line: {_one_line(exc)}") from None
        if fields is None:
            if len(self.columns) == 1:
                # what ksqlDB writes for a single null column; it cannot read it back, this reads it as null
                return (None,)
            raise _Bad(f"expected {len(self.columns)} fields, got an empty record")
        if len(fields) != len(self.columns):
            raise _Bad(f"expected {len(self.columns)} fields, got {len(fields)}")
        return tuple(
            _from_text(cell, column.type, column.name) if cell else None
            for cell, column in zip(fields, self.columns, strict=True)
        )

    def encode(self, values: tuple) -> bytes | None:
        texts = (_to_text(_wire(v, c.type, c.name)) for v, c in zip(values, self.columns, strict=True))
        line = self.delimiter.join(self._field(text, i == 0) for i, text in enumerate(texts))
        try:
            return line.encode("utf-8")
        except UnicodeEncodeError:
            raise _Bad("a string is not valid Unicode (a lone surrogate)") from None

    def _field(self, text: str | None, first: bool) -> str:
        """commons-csv 1.4's QuoteMode.MINIMAL: besides a delimiter, quote, CR or LF anywhere, it quotes an
        empty first field, a first field not starting with an ASCII letter or digit (so "-1" when first),
        any field starting with a character up to '#', and any ending with one up to ' '. Null is empty."""
        if text is None:
            return ""
        if not text:
            return '""' if first else ""
        head = text[0]
        quote = (
            (first and not ("0" <= head <= "9" or "A" <= head <= "Z" or "a" <= head <= "z"))
            or head <= "#"
            or text[-1] <= " "
            or any(c in '\r\n"' or c == self.delimiter for c in text)
        )
        return '"' + text.replace('"', '""') + '"' if quote else text


def _to_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, Decimal):
        return f"{value:f}"  # ksqlDB writes BigDecimal.toPlainString
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _from_text(text: str, t: ast.SqlType, path: str) -> Any:
    if isinstance(t, ast.DecimalType):
        return _parse_decimal(text, t, path)
    name = t.name
    if name == "BOOLEAN":
        return text.lower() == "true"  # Boolean.parseBoolean: anything else is false
    if name in ("INT", "BIGINT"):
        return _parse_integer(text, name, path)
    if name == "DOUBLE":
        return _parse_double(text, path)
    if name == "BYTES":
        return _base64(text, path)
    if name == "DATE":
        return _date_of(_parse_integer(text, "INT", path), path)
    if name == "TIME":
        return _time_of(_parse_integer(text, "BIGINT", path), path)
    if name == "TIMESTAMP":
        return _timestamp_of(_parse_integer(text, "BIGINT", path), path)
    return text


# --------------------------------------------------------------------- AVRO


class _Registered:
    """The schema this side writes with: registered under `subject` on first use, or the id the statement
    named (KEY_SCHEMA_ID or VALUE_SCHEMA_ID)."""

    def __init__(
        self, registry: RegistryClient, subject: str, schema_type: str, schema: str, fixed_id: int | None
    ):
        self.registry = registry
        self.subject = subject
        self.schema_type = schema_type
        self.schema = schema
        self._id = fixed_id

    def schema_id(self) -> int:
        if self._id is None:
            self._id = self.registry.register(self.subject, self.schema, self.schema_type)
        return self._id


class _Avro:
    """Avro in the schema registry's wire format. Reading takes the writer's schema by its id from the
    registry (cached) and maps the datum to the columns as ksqlDB's ConnectDataTranslator does. Writing uses
    the schema ksqlDB derives from the columns (Connect's AvroData with its metadata: every field an
    optional union with default null, MAPs as arrays of key/value MapEntry records), registered once; or
    the schema of KEY_SCHEMA_ID or VALUE_SCHEMA_ID when the statement names one."""

    def __init__(
        self,
        columns: tuple[Column, ...],
        wrapped: bool,
        registry: RegistryClient,
        registered: _Registered,
        derived: tuple[Any, dict] | None,
    ):
        self.wrapped = wrapped
        self.type = _row_type(columns) if wrapped else columns[0].type
        self.root = "" if wrapped else columns[0].name
        self.registry = registry
        self.registered = registered
        self.derived = derived  # the parsed schema and its named types, unless the statement named one
        self._writers: dict[int, tuple[Any, dict]] = {}

    def decode(self, data: bytes) -> tuple | None:
        if len(data) < _FRAME.size or data[0] != 0:
            raise _Bad("does not start with the schema registry's magic byte 0 and a schema id")
        schema_id = _FRAME.unpack_from(data)[1]
        writer, _ = self._writer(schema_id)
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(data[_FRAME.size :]), writer, None)
        except Exception as exc:  # corrupt input makes fastavro raise many kinds of errors
            raise _Bad(
                f"cannot read Avro with schema {schema_id}: {type(exc).__name__} {_one_line(exc)}"
            ) from None
        if not self.wrapped:
            return (_from_avro(datum, self.type, self.root),)
        if datum is None:
            return None  # a null record, as a tombstone
        if not isinstance(datum, dict):
            raise _Bad(f"expected an Avro record of the columns, got Avro {_avro_kind(datum)}")
        return tuple(_from_avro(datum, self.type, self.root).values())

    def encode(self, values: tuple) -> bytes | None:
        if self.wrapped:
            wire = _wire(dict(zip([f.name for f in self.type.fields], values, strict=True)), self.type, "")
        else:
            wire = _wire(values[0], self.type, self.root)
            if wire is None:
                return None  # ksqlDB writes a null single unwrapped column as a null record
        schema_id = self.registered.schema_id()
        schema, named = self.derived or self._writer(schema_id)
        buffer = io.BytesIO(_FRAME.pack(0, schema_id))
        buffer.seek(0, io.SEEK_END)
        datum = _avro_datum(wire, self.type, schema, named, self.root)
        try:
            fastavro.schemaless_writer(buffer, schema, datum)
        except Exception as exc:  # fastavro's own checks of the datum against the schema
            raise _Bad(
                f"cannot write Avro with schema {schema_id}: {type(exc).__name__} {_one_line(exc)}"
            ) from None
        return buffer.getvalue()

    def _writer(self, schema_id: int) -> tuple[Any, dict]:
        writer = self._writers.get(schema_id)
        if writer is None:
            text = self.registry.schema_by_id(schema_id)
            named: dict = {}
            try:
                writer = (fastavro.parse_schema(json.loads(text), named_schemas=named), named)
            except Exception as exc:  # not JSON, or not an Avro schema fastavro can parse
                raise _Bad(f"schema {schema_id} is not an Avro schema: {_one_line(exc)}") from None
            self._writers[schema_id] = writer
        return writer


def _avro_kind(value: Any) -> str:
    return _AVRO_KINDS.get(type(value), type(value).__name__)


_AVRO_KINDS = {
    bool: "boolean",
    int: "int",
    float: "double",
    str: "string",
    bytes: "bytes",
    list: "array",
    dict: "record",
    Decimal: "decimal",
    date: "date",
    time: "time",
    datetime: "timestamp",
}


def _from_avro(value: Any, t: ast.SqlType, path: str) -> Any:
    """A datum as fastavro reads it (logical types converted) as type `t`, as ksqlDB's ConnectDataTranslator
    takes it: INT from int, BIGINT from int or long, DOUBLE from float or double, STRING from any primitive
    as Java prints it, DATE, TIME and TIMESTAMP from their logical types or plain numbers, DECIMAL from a
    decimal, MAP from an Avro map or an array of MapEntry records, STRUCT from a record (fields matched by
    name as in JSON)."""
    if value is None:
        return None
    if isinstance(t, ast.PrimitiveType):
        return _AVRO_READERS[t.name](value, path)
    if isinstance(t, ast.DecimalType):
        if isinstance(value, Decimal):
            return _fit_decimal(value, t, path)
    elif isinstance(t, ast.ArrayType):
        if isinstance(value, list):
            return [_from_avro(item, t.element, f"{path}[{i}]") for i, item in enumerate(value)]
    elif isinstance(t, ast.MapType):
        if isinstance(value, dict):
            return {k: _from_avro(v, t.value, f"{path}[{k!r}]") for k, v in value.items()}
        if isinstance(value, list) and all(isinstance(e, dict) and set(e) == {"key", "value"} for e in value):
            return {e["key"]: _from_avro(e["value"], t.value, f"{path}[{e['key']!r}]") for e in value}
    elif isinstance(value, dict):
        fields = _match_fields(value, [f.name for f in t.fields])
        return {f.name: _from_avro(fields.get(f.name), f.type, _at(path, f.name)) for f in t.fields}
    raise _bad(path, f"expected {ast.type_text(t, rest=True)}, got Avro {_avro_kind(value)}")


def _avro_mismatch(value: Any, name: str, path: str) -> _Bad:
    return _bad(path, f"expected {name}, got Avro {_avro_kind(value)}")


def _avro_int(value: Any, path: str) -> int:
    if isinstance(value, date | time) and not isinstance(value, datetime):
        return _wire_date(value, path) if isinstance(value, date) else _wire_time(value, path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _avro_mismatch(value, "INT", path)
    return _in_range(value, 32, "INT", path)


def _avro_bigint(value: Any, path: str) -> int:
    if isinstance(value, datetime):
        return _wire_timestamp(value, path)
    if isinstance(value, date | time):
        return _avro_int(value, path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _avro_mismatch(value, "BIGINT", path)
    return _in_range(value, 64, "BIGINT", path)


def _avro_string(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return _to_text(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    raise _avro_mismatch(value, "STRING", path)


def _avro_of(name: str, kind: type, convert: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def read(value: Any, path: str) -> Any:
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise _avro_mismatch(value, name, path)
        return convert(value, path)

    return read


def _avro_date(value: Any, path: str) -> date:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise _avro_mismatch(value, "DATE", path)
    return _date_of(value, path)


def _avro_time(value: Any, path: str) -> time:
    if isinstance(value, time):
        return _time_of(_wire_time(value, path), path)  # at ms, as ksqlDB keeps it
    if isinstance(value, bool) or not isinstance(value, int):
        raise _avro_mismatch(value, "TIME", path)
    return _time_of(value, path)


def _avro_timestamp(value: Any, path: str) -> datetime:
    if isinstance(value, datetime):
        return _timestamp_of(_wire_timestamp(value, path), path)  # naive UTC at ms, as ksqlDB keeps it
    if isinstance(value, bool) or not isinstance(value, int):
        raise _avro_mismatch(value, "TIMESTAMP", path)
    return _timestamp_of(value, path)


_AVRO_READERS: dict[str, Callable[[Any, str], Any]] = {
    "BOOLEAN": _avro_of("BOOLEAN", bool, lambda v, _: v),
    "INT": _avro_int,
    "BIGINT": _avro_bigint,
    "DOUBLE": _avro_of("DOUBLE", float, lambda v, _: v),
    "STRING": _avro_string,
    "BYTES": _avro_of("BYTES", bytes, lambda v, _: v),
    "DATE": _avro_date,
    "TIME": _avro_time,
    "TIMESTAMP": _avro_timestamp,
}


# The Avro types a union branch may have for the SQL types whose datum fastavro cannot place by itself
_AVRO_COMPLEX = {ast.StructType: ("record",), ast.ArrayType: ("array",), ast.MapType: ("map", "array")}


def _avro_datum(wire: Any, t: ast.SqlType, schema: Any, named: dict, path: str) -> Any:
    """A value from `_wire` in the shape fastavro writes with `schema`: records keyed by the schema's field
    names, maps as Avro maps or MapEntry arrays, whichever the schema has; fastavro picks among a union's
    primitive branches itself."""
    if wire is None:
        return None
    schema = named.get(schema, schema) if isinstance(schema, str) else schema
    if isinstance(schema, list):
        kinds = _AVRO_COMPLEX.get(type(t))
        if kinds is None:
            return wire
        branches = [named.get(b, b) if isinstance(b, str) else b for b in schema]
        schema = next((b for b in branches if isinstance(b, dict) and b.get("type") in kinds), None)
        if schema is None:
            raise _bad(path, f"the Avro schema has no branch for {ast.type_text(t, rest=True)}")
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(t, ast.StructType) and kind == "record":
        by_avro_name = {_avro_name(f.name): f for f in t.fields}
        record = {}
        for avro_field in schema["fields"]:
            f = by_avro_name.get(avro_field["name"]) or by_avro_name.get(avro_field["name"].upper())
            if f is not None:
                record[avro_field["name"]] = _avro_datum(
                    wire[f.name], f.type, avro_field["type"], named, _at(path, f.name)
                )
        return record
    if isinstance(t, ast.MapType) and kind == "map":
        return {
            k: _avro_datum(v, t.value, schema["values"], named, f"{path}[{k!r}]") for k, v in wire.items()
        }
    if isinstance(t, ast.MapType) and kind == "array":
        items = schema["items"]
        items = named.get(items, items) if isinstance(items, str) else items
        value = next((f["type"] for f in items.get("fields", ()) if f["name"] == "value"), None)
        return [
            {"key": k, "value": _avro_datum(v, t.value, value, named, f"{path}[{k!r}]")}
            for k, v in wire.items()
        ]
    if isinstance(t, ast.ArrayType) and kind == "array":
        return [
            _avro_datum(item, t.element, schema["items"], named, f"{path}[{i}]")
            for i, item in enumerate(wire)
        ]
    return wire


_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONNECT = "org.apache.kafka.connect.data."


def _avro_name(name: str) -> str:
    return name.replace(".", "_")  # what ksqlDB's AvroSchemas does to a qualified column name


def _avro_schema(t: ast.SqlType, name: str, outermost: bool) -> Any:
    """The Avro schema ksqlDB registers for `t`, in the key order Avro writes: `name` is the full name of a
    record at this place (nested ones are the parent's name, _ and the field name; a map's entry record is
    the map's name, its value _MapValue), `outermost` whether it still has to carry the namespace."""
    if isinstance(t, ast.PrimitiveType):
        return _AVRO_PRIMITIVES[t.name]()
    if isinstance(t, ast.DecimalType):
        return {
            "type": "bytes",
            "scale": t.scale,
            "precision": t.precision,
            "connect.version": 1,
            "connect.parameters": {"scale": str(t.scale), "connect.decimal.precision": str(t.precision)},
            "connect.name": _CONNECT + "Decimal",
            "logicalType": "decimal",
        }
    if isinstance(t, ast.ArrayType):
        return {"type": "array", "items": _optional(_avro_schema(t.element, name, outermost))}
    if isinstance(t, ast.MapType):
        entry = {
            "type": "record",
            **_avro_names(name, outermost),
            "fields": [
                {"name": "key", "type": ["null", "string"], "default": None},
                {
                    "name": "value",
                    "type": _optional(_avro_schema(t.value, f"{name}_MapValue", False)),
                    "default": None,
                },
            ],
            "connect.internal.type": "MapEntry",
        }
        return {"type": "array", "items": entry, "connect.name": name}
    fields = [
        {
            "name": _avro_name(f.name),
            "type": _optional(_avro_schema(f.type, f"{name}_{_avro_name(f.name)}", False)),
            "default": None,
        }
        for f in t.fields
    ]
    return {"type": "record", **_avro_names(name, outermost), "fields": fields, "connect.name": name}


def _avro_names(full_name: str, outermost: bool) -> dict:
    namespace, _, name = full_name.rpartition(".")
    return {"name": name, "namespace": namespace} if outermost and namespace else {"name": name}


def _optional(schema: Any) -> list:
    return ["null", schema]


def _avro_logical(avro_type: str, name: str, logical: str) -> Callable[[], dict]:
    return lambda: {
        "type": avro_type,
        "connect.version": 1,
        "connect.name": _CONNECT + name,
        "logicalType": logical,
    }


_AVRO_PRIMITIVES: dict[str, Callable[[], Any]] = {
    "BOOLEAN": lambda: "boolean",
    "INT": lambda: "int",
    "BIGINT": lambda: "long",
    "DOUBLE": lambda: "double",
    "STRING": lambda: "string",
    "BYTES": lambda: "bytes",
    "DATE": _avro_logical("int", "Date", "date"),
    "TIME": _avro_logical("int", "Time", "time-millis"),
    "TIMESTAMP": _avro_logical("long", "Timestamp", "timestamp-millis"),
}
