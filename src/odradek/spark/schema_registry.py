"""Avro with a Confluent schema registry for the "odradek" data source: Spark's from_avro/to_avro, built in.

The source option `valueSchemaRegistry.url` (and `keySchemaRegistry.url`) turns the column into a typed one:
the driver fetches the latest version of the subject when the query is planned, and its Avro schema, the
reader schema, decides the column's Spark type (`spark_type`, as Spark's SchemaConverters). Each record is
in Confluent's framing, magic byte 0, a 4-byte big-endian schema id, then Avro binary; an executor fetches
the writer schema by id (`GET /schemas/ids/{id}`, cached per process) and fastavro resolves it to the reader
schema, so records written with older compatible versions decode too. The sink encodes with the subject's
latest version (confluent-kafka's use.latest.version), after checking on the driver that the column fits it.

The registry is reached with urllib (a timeout, no new dependency); `url` may list several, comma-separated,
tried in order.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import fastavro
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odradek.spark.options import RegistryOptions

MAGIC_BYTE = 0
HEADER_SIZE = 5  # the magic byte and a 4-byte big-endian schema id
_TIMEOUT_S = 30.0
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
# Confluent's error code for "Schema not found" (HTTP 404)
_SCHEMA_NOT_FOUND = 40403


class RegistryError(RuntimeError):
    """The schema registry cannot be reached, or does not have what the query needs."""


class SchemaMismatchError(ValueError):
    """An Avro schema has no Spark equivalent, or a Spark column does not fit a subject's schema."""


class MalformedRecordError(RuntimeError):
    """A record is not in Confluent's framing, names an unknown schema id, or does not decode (FAILFAST)."""


# --- the registry's REST API ---

@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry answers it, with the texts of the schemas it references (dependencies
    first), so an executor can parse it without asking again."""

    id: int
    text: str
    schema_type: str = "AVRO"
    subject: str | None = None
    version: int | None = None
    references: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.subject is None:
            return f"schema id {self.id}"
        return f"schema id {self.id} (subject {self.subject!r} version {self.version})"


class RegistryClient:
    def __init__(self, urls: tuple[str, ...], timeout_s: float = _TIMEOUT_S):
        self.urls = urls
        self.timeout_s = timeout_s

    @property
    def where(self) -> str:
        return ", ".join(self.urls)

    def _get(self, path: str) -> dict | None:
        """The JSON answer, or None for a 404; the next URL when one cannot be reached."""
        failures = []
        for url in self.urls:
            request = urllib.request.Request(url.rstrip("/") + path, headers={"Accept": _ACCEPT})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return None
                try:
                    message = json.loads(e.read()).get("message", "")
                except (ValueError, AttributeError):
                    message = ""
                raise RegistryError(f"the schema registry at {url} answered GET {path} with HTTP {e.code}"
                                    f"{': ' + message if message else ''}") from None
            except (urllib.error.URLError, OSError, ValueError) as e:
                failures.append(f"{url}: {getattr(e, 'reason', e)}")
        raise RegistryError(f"cannot reach the schema registry for GET {path}: {'; '.join(failures)}")

    def _registered(self, answer: dict, schema_id: int | None = None) -> RegisteredSchema:
        references = []
        for ref in answer.get("references") or []:
            dependency = self.version(ref["subject"], int(ref["version"]))
            references += [*dependency.references, dependency.text]
        return RegisteredSchema(
            id=int(answer["id"]) if schema_id is None else schema_id, text=answer["schema"],
            schema_type=answer.get("schemaType") or "AVRO", subject=answer.get("subject"),
            version=answer.get("version"), references=tuple(dict.fromkeys(references)))

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        answer = self._get(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}")
        if answer is None:
            what = "no registered version" if version == "latest" else f"no version {version}"
            raise RegistryError(f"subject {subject!r} has {what} in the schema registry at {self.where}: "
                                "register its schema first")
        return self._registered(answer)

    def latest(self, subject: str) -> RegisteredSchema:
        return self.version(subject, "latest")

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        answer = self._get(f"/schemas/ids/{schema_id}")
        return None if answer is None else self._registered(answer, schema_id)


def parse_avro(schema: RegisteredSchema) -> tuple[object, dict]:
    """The fastavro-parsed schema and its named types (full name -> parsed schema)."""
    if schema.schema_type.upper() != "AVRO":
        raise SchemaMismatchError(f"{schema.describe()} is a {schema.schema_type} schema, not Avro")
    named: dict = {}
    try:
        for text in schema.references:
            fastavro.parse_schema(json.loads(text), named)
        return fastavro.parse_schema(json.loads(schema.text), named), named
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException, fastavro.schema.UnknownType) as e:
        raise SchemaMismatchError(f"{schema.describe()} is not a valid Avro schema: {e}") from None


def subject_schema(options: RegistryOptions) -> RegisteredSchema:
    """The latest version of the option's subject, fetched now (on the driver)."""
    schema = RegistryClient(options.urls).latest(options.subject)
    parse_avro(schema)
    return schema


# --- Avro schemas as Spark types ---

_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
_LOGICAL: dict[str, DataType] = {
    "int-date": DateType(), "long-timestamp-millis": TimestampType(), "long-timestamp-micros": TimestampType(),
    "long-local-timestamp-millis": TimestampNTZType(), "long-local-timestamp-micros": TimestampNTZType(),
}
_MAX_PRECISION = 38


def _logical(schema: dict) -> str | None:
    """fastavro's key of a schema's logical type ("long-timestamp-millis"), or None."""
    logical = schema.get("logicalType")
    return f"{schema['type']}-{logical}" if isinstance(schema["type"], str) and logical else None


class _Schemas:
    """Walks a parsed schema: resolves named references and refuses recursive types, which Spark cannot
    represent."""

    def __init__(self, named: dict):
        self.named = named

    def resolve(self, schema, seen: tuple[str, ...]) -> tuple[object, tuple[str, ...]]:
        while True:
            if isinstance(schema, dict) and (isinstance(schema["type"], dict | list) or schema["type"] in self.named):
                schema = schema["type"]  # {"type": <a schema>}, or a reference to a named type
            elif isinstance(schema, str) and schema not in _PRIMITIVES:
                if schema not in self.named:
                    raise SchemaMismatchError(f"unknown Avro type {schema!r}")
                schema = self.named[schema]
            else:
                break
        if isinstance(schema, dict) and schema["type"] == "record":
            if schema["name"] in seen:
                raise SchemaMismatchError(f"the Avro record {schema['name']} is recursive, which Spark cannot "
                                          "represent")
            seen = (*seen, schema["name"])
        return schema, seen

    def spark(self, schema, seen: tuple[str, ...] = ()) -> tuple[DataType, bool]:
        """(Spark type, nullable), as Spark's SchemaConverters.toSqlType."""
        schema, seen = self.resolve(schema, seen)
        if isinstance(schema, list):
            return self.spark_union(schema, seen)
        if isinstance(schema, str):
            return _PRIMITIVES[schema], schema == "null"
        kind = schema["type"]
        logical = _logical(schema)
        if logical in _LOGICAL:
            return _LOGICAL[logical], False
        if logical in ("bytes-decimal", "fixed-decimal"):
            precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
            if precision > _MAX_PRECISION:
                raise SchemaMismatchError(f"decimal precision {precision} exceeds Spark's maximum "
                                          f"{_MAX_PRECISION}")
            return DecimalType(precision, scale), False
        if kind == "record":
            fields = []
            for f in schema["fields"]:
                data_type, nullable = self.spark(f["type"], seen)
                fields.append(StructField(f["name"], data_type, nullable))
            return StructType(fields), False
        if kind == "enum":
            return StringType(), False
        if kind == "fixed":
            return BinaryType(), False
        if kind == "array":
            data_type, nullable = self.spark(schema["items"], seen)
            return ArrayType(data_type, nullable), False
        if kind == "map":
            data_type, nullable = self.spark(schema["values"], seen)
            return MapType(StringType(), data_type, nullable), False
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind], kind == "null"
        raise SchemaMismatchError(f"unsupported Avro type {kind!r}")

    def spark_union(self, union: list, seen: tuple[str, ...]) -> tuple[DataType, bool]:
        members = [m for m in union if m != "null"]
        nullable = len(members) < len(union)
        if not members:
            return NullType(), True
        if len(members) == 1:
            data_type, member_nullable = self.spark(members[0], seen)
            return data_type, nullable or member_nullable
        kinds = {self.base(m) for m in members}
        if len(members) == 2 and kinds == {"int", "long"}:
            return LongType(), nullable
        if len(members) == 2 and kinds == {"float", "double"}:
            return DoubleType(), nullable
        return StructType([StructField(f"member{i}", self.spark(m, seen)[0], True)
                           for i, m in enumerate(members)]), nullable

    def base(self, schema) -> str:
        schema, _ = self.resolve(schema, ())
        if isinstance(schema, list):
            return "union"
        return schema if isinstance(schema, str) else schema["type"]


def spark_type(schema: RegisteredSchema) -> DataType:
    """The Spark type of a registered Avro schema, as Spark's from_avro gives it."""
    parsed, named = parse_avro(schema)
    try:
        return _Schemas(named).spark(parsed)[0]
    except SchemaMismatchError as e:
        raise SchemaMismatchError(f"{schema.describe()} has no Spark equivalent: {e}") from None


# --- decoding: fastavro's values as pyarrow takes them for the Spark type ---

Converter = Callable[[object], object]


def _identity(value):
    return value


def _untagged(value):
    """fastavro tags a named type read from a union (return_named_type) as (name, value)."""
    return value[1] if isinstance(value, tuple) else value


def _time_millis(value):
    value = _untagged(value)
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return value


def _time_micros(value):
    value = _untagged(value)
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return value


def _uuid_text(value):
    value = _untagged(value)
    return str(value) if isinstance(value, uuid.UUID) else value


# Python types fastavro reads for each Avro type, to tell the branches of a union of primitives apart.
_READ_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (float,), "double": (float,),
    "bytes": (bytes,), "string": (str,), "fixed": (bytes,), "enum": (str,), "array": (list,), "map": (dict,),
    "record": (dict,), "int-date": (datetime.date,), "long-timestamp-millis": (datetime.datetime,),
    "long-timestamp-micros": (datetime.datetime,), "long-local-timestamp-millis": (datetime.datetime,),
    "long-local-timestamp-micros": (datetime.datetime,), "bytes-decimal": (decimal.Decimal,),
    "fixed-decimal": (decimal.Decimal,), "string-uuid": (uuid.UUID, str), "int-time-millis": (datetime.time, int),
    "long-time-micros": (datetime.time, int),
}


class _Decoders(_Schemas):
    def converter(self, schema, seen: tuple[str, ...] = ()) -> Converter:
        schema, seen = self.resolve(schema, seen)
        if isinstance(schema, list):
            return self.union(schema, seen)
        if isinstance(schema, str):
            return _identity
        kind, logical = schema["type"], _logical(schema)
        if logical == "int-time-millis":
            return _time_millis
        if logical == "long-time-micros":
            return _time_micros
        if logical == "string-uuid":
            return _uuid_text
        if logical is not None and logical in _READ_TYPES or kind in ("enum", "fixed"):
            return _untagged
        if kind == "record":
            fields = [(f["name"], self.converter(f["type"], seen)) for f in schema["fields"]]
            if all(c is _identity for _, c in fields):
                return _untagged

            def convert_record(value):
                if value is None:
                    return None
                value = _untagged(value)
                return {name: convert(value[name]) for name, convert in fields}

            return convert_record
        if kind == "array":
            item = self.converter(schema["items"], seen)
            return _identity if item is _identity else lambda value: [item(v) for v in value]
        if kind == "map":
            item = self.converter(schema["values"], seen)
            return _identity if item is _identity else lambda value: {k: item(v) for k, v in value.items()}
        return _identity

    def union(self, union: list, seen: tuple[str, ...]) -> Converter:
        members = [m for m in union if m != "null"]
        if len(members) == 1:
            convert = self.converter(members[0], seen)
            return lambda value: None if value is None else convert(value)
        data_type, _ = self.spark_union(union, seen)
        if not isinstance(data_type, StructType):  # int|long or float|double, widened
            return _identity
        names = [f"member{i}" for i in range(len(members))]
        branches = []
        for i, member in enumerate(members):
            resolved, _ = self.resolve(member, seen)
            name = resolved.get("name") if isinstance(resolved, dict) else None
            key = resolved if isinstance(resolved, str) else _logical(resolved) or resolved["type"]
            branches.append((names[i], name, _READ_TYPES.get(key, ()), self.converter(member, seen)))

        def convert(value):
            if value is None:
                return None
            tag = value[0] if isinstance(value, tuple) else None
            for member, name, types, convert_member in branches:
                if tag is not None and tag == name or tag is None and name is None and isinstance(value, types) \
                        and not (isinstance(value, bool) and bool not in types):
                    return {n: convert_member(value) if n == member else None for n in names}
            raise ValueError(f"no branch of the union {union} holds {value!r}")

        return convert


@dataclass
class ColumnDecoder:
    """Decodes one column (key or value) of consumed records with the reader schema fetched on the driver.
    Pickled to the executors; each parses the schemas itself and caches writer schemas by id."""

    column: str
    options: RegistryOptions
    reader: RegisteredSchema
    _state: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self):
        return {**self.__dict__, "_state": {}}

    @property
    def spark_type(self) -> DataType:
        return spark_type(self.reader)

    @property
    def arrow_type(self) -> pa.DataType:
        return to_arrow_type(self.spark_type, timezone="UTC")

    def _prepare(self) -> dict:
        if not self._state:
            parsed, named = parse_avro(self.reader)
            self._state.update(reader=parsed, convert=_Decoders(named).converter(parsed),
                               client=RegistryClient(self.options.urls), arrow_type=self.arrow_type)
        return self._state

    def _writer(self, state: dict, schema_id: int):
        """The parsed writer schema of an id, or why a record with it cannot be read; ids are immutable, so
        each process caches the answer."""
        key = (self.options.urls, schema_id)
        if key not in _WRITER_SCHEMAS:
            registered = state["client"].by_id(schema_id)
            if registered is None:
                _WRITER_SCHEMAS[key] = _Unreadable(f"has schema id {schema_id}, which the schema registry at "
                                                   f"{', '.join(self.options.urls)} does not know")
            else:
                try:
                    _WRITER_SCHEMAS[key] = parse_avro(registered)[0]
                except SchemaMismatchError as e:
                    _WRITER_SCHEMAS[key] = _Unreadable(f"cannot be read: {e}")
        return _WRITER_SCHEMAS[key]

    def column_of(self, raw: list, topic: str, partition: int, offsets: list[int]) -> pa.Array:
        state = self._prepare()
        convert, reader = state["convert"], state["reader"]
        values = []
        for data, offset in zip(raw, offsets, strict=True):
            if data is None:
                values.append(None)
                continue
            if len(data) < HEADER_SIZE or data[0] != MAGIC_BYTE:
                values.append(self._malformed(topic, partition, offset, "is not in Confluent's framing (magic "
                                              f"byte 0, 4-byte schema id, Avro): it starts with {data[:5]!r}"))
                continue
            schema_id = int.from_bytes(data[1:HEADER_SIZE], "big")
            writer = self._writer(state, schema_id)
            if isinstance(writer, _Unreadable):
                values.append(self._malformed(topic, partition, offset, writer.reason))
                continue
            try:
                decoded = fastavro.schemaless_reader(io.BytesIO(data[HEADER_SIZE:]), writer,
                                                     None if schema_id == self.reader.id else reader,
                                                     return_named_type=True)
                values.append(convert(decoded))
            except Exception as e:  # fastavro raises many kinds for bad data
                values.append(self._malformed(
                    topic, partition, offset, f"with schema id {schema_id} cannot be decoded to "
                    f"{self.reader.describe()}: {type(e).__name__}: {e}"))
        try:
            return pa.array(values, type=state["arrow_type"])
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise MalformedRecordError(f"the decoded {self.column}s of {topic}-{partition} from offset "
                                       f"{offsets[0]} do not fit {self.spark_type.simpleString()}: {e}") from None

    def _malformed(self, topic: str, partition: int, offset: int, what: str) -> None:
        if self.options.permissive:
            return None
        raise MalformedRecordError(
            f"the {self.column} of {topic}-{partition} at offset {offset} {what}. Set the option "
            f"'{self.column}SchemaRegistry.mode' to 'PERMISSIVE' to read such {self.column}s as null.")


@dataclass(frozen=True)
class _Unreadable:
    reason: str


# (registry URLs, schema id) -> the parsed writer schema, or why records with the id cannot be read.
_WRITER_SCHEMAS: dict[tuple[tuple[str, ...], int], object] = {}


@dataclass
class SourceDecoders:
    """The registry-decoded columns of a source; a column without a decoder stays binary."""

    key: ColumnDecoder | None = None
    value: ColumnDecoder | None = None

    @classmethod
    def fetch(cls, key: RegistryOptions | None, value: RegistryOptions | None) -> SourceDecoders:
        """Fetch each subject's latest version, on the driver."""
        return cls(key=key and ColumnDecoder("key", key, subject_schema(key)),
                   value=value and ColumnDecoder("value", value, subject_schema(value)))

    def column_types(self) -> dict[str, DataType]:
        return {d.column: d.spark_type for d in (self.key, self.value) if d is not None}

    def matches(self, key: RegistryOptions | None, value: RegistryOptions | None) -> bool:
        return (self.key and self.key.options) == key and (self.value and self.value.options) == value


# --- encoding: Spark rows into Confluent's framing ---

_WRITABLE: dict[str, tuple[type, ...]] = {
    "null": (NullType,), "boolean": (BooleanType,), "int": (ByteType, ShortType, IntegerType),
    "long": (ByteType, ShortType, IntegerType, LongType), "float": (FloatType,), "double": (FloatType, DoubleType),
    "bytes": (BinaryType,), "string": (StringType,), "enum": (StringType,), "fixed": (BinaryType,),
    "int-date": (DateType,), "int-time-millis": (IntegerType,), "long-time-micros": (LongType,),
    "long-timestamp-millis": (TimestampType, LongType), "long-timestamp-micros": (TimestampType, LongType),
    "long-local-timestamp-millis": (TimestampNTZType, LongType),
    "long-local-timestamp-micros": (TimestampNTZType, LongType),
    "bytes-decimal": (DecimalType,), "fixed-decimal": (DecimalType,), "string-uuid": (StringType,),
}


def _as_bytes(value):
    return bytes(value) if isinstance(value, bytearray | memoryview) else value


def _utc(value):
    """PySpark hands TimestampType values to Python as naive local datetimes: make them aware."""
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        return value.astimezone(datetime.UTC)
    return value


def _fields_of(value) -> dict:
    if hasattr(value, "asDict"):
        return value.asDict()
    return dict(value)


class _Encoders(_Schemas):
    """Checks that a Spark type fits an Avro schema and builds the converter of its values, or raises
    SchemaMismatchError naming the first field that does not fit."""

    def encoder(self, data_type: DataType, schema, path: str, seen: tuple[str, ...] = ()) -> Converter:
        schema, seen = self.resolve(schema, seen)
        if isinstance(schema, list):
            return self.union(data_type, schema, path, seen)
        key = schema if isinstance(schema, str) else _logical(schema) or schema["type"]
        if key in _WRITABLE:
            if not isinstance(data_type, _WRITABLE[key]):
                raise SchemaMismatchError(f"{path} is {data_type.simpleString()}, which cannot be written as "
                                          f"Avro {_describe(schema)}")
            if isinstance(data_type, BinaryType):
                return _as_bytes
            if isinstance(data_type, TimestampType):
                return _utc
            return _identity
        kind = schema["type"]
        if kind == "record":
            return self.record(data_type, schema, path, seen)
        if kind == "array":
            if not isinstance(data_type, ArrayType):
                raise SchemaMismatchError(f"{path} is {data_type.simpleString()}, not an array as Avro "
                                          f"{_describe(schema)}")
            item = self.encoder(data_type.elementType, schema["items"], f"{path}[]", seen)
            return lambda value: None if value is None else [item(v) for v in value]
        if kind == "map":
            if not isinstance(data_type, MapType) or not isinstance(data_type.keyType, StringType):
                raise SchemaMismatchError(f"{path} is {data_type.simpleString()}, not a map with string keys as "
                                          f"Avro {_describe(schema)}")
            item = self.encoder(data_type.valueType, schema["values"], f"{path}{{}}", seen)
            # a dict from Spark rows, (key, value) pairs from Arrow batches
            return lambda value: None if value is None else {k: item(v) for k, v in dict(value).items()}
        raise SchemaMismatchError(f"{path}: unsupported Avro type {kind!r}")

    def record(self, data_type: DataType, schema: dict, path: str, seen: tuple[str, ...]) -> Converter:
        if not isinstance(data_type, StructType):
            raise SchemaMismatchError(f"{path} is {data_type.simpleString()}, not a struct as the Avro record "
                                      f"{schema['name']}")
        avro_fields = {f["name"]: f for f in schema["fields"]}
        extra = [f.name for f in data_type.fields if f.name not in avro_fields]
        if extra:
            raise SchemaMismatchError(f"{path} has the field {extra[0]!r}, which the Avro record {schema['name']} "
                                      f"does not have (its fields: {', '.join(avro_fields)})")
        given = {f.name for f in data_type.fields}
        for name, f in avro_fields.items():
            if name not in given and "default" not in f:
                raise SchemaMismatchError(f"{path} has no field {name!r}, which the Avro record {schema['name']} "
                                          "needs (it has no default)")
        fields = [(f.name, self.encoder(f.dataType, avro_fields[f.name]["type"], f"{path}.{f.name}", seen))
                  for f in data_type.fields]

        def convert(value):
            if value is None:
                return None
            values = _fields_of(value)
            return {name: encode(values[name]) for name, encode in fields}

        return convert

    def union(self, data_type: DataType, union: list, path: str, seen: tuple[str, ...]) -> Converter:
        members = [m for m in union if m != "null"]
        if isinstance(data_type, NullType) and len(members) < len(union):
            return _identity
        if len(members) == 1:
            encode = self.encoder(data_type, members[0], path, seen)
            return lambda value: None if value is None else encode(value)
        names = [f"member{i}" for i in range(len(members))]
        if isinstance(data_type, StructType) and data_type.names == names:  # the struct from_avro reads
            branches = []
            for i, member in enumerate(members):
                resolved, _ = self.resolve(member, seen)
                name = resolved.get("name") if isinstance(resolved, dict) else None
                branches.append((names[i], name, self.encoder(data_type.fields[i].dataType, member,
                                                              f"{path}.{names[i]}", seen)))

            def convert(value):
                if value is None:
                    return None
                values = _fields_of(value)
                for member, name, encode in branches:
                    if values[member] is not None:
                        encoded = encode(values[member])
                        return (name, encoded) if name else encoded
                return None

            return convert
        for member in members:  # the first branch the Spark type fits
            try:
                encode = self.encoder(data_type, member, path, seen)
            except SchemaMismatchError:
                continue
            resolved, _ = self.resolve(member, seen)
            name = resolved.get("name") if isinstance(resolved, dict) else None
            return lambda value: None if value is None else (name, encode(value)) if name else encode(value)
        raise SchemaMismatchError(f"{path} is {data_type.simpleString()}, which fits no branch of the Avro union "
                                  f"{_describe(union)}")


def _describe(schema) -> str:
    text = json.dumps(schema if not isinstance(schema, dict) else
                      {k: v for k, v in schema.items() if not k.startswith("__")})
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass
class ColumnEncoder:
    """Encodes one column (key or value) with the subject's latest schema, fetched and checked on the
    driver; pickled to the executors."""

    column: str
    options: RegistryOptions
    schema: RegisteredSchema
    data_type: DataType
    _state: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def fetch(cls, column: str, options: RegistryOptions, data_type: DataType) -> ColumnEncoder:
        encoder = cls(column, options, subject_schema(options), data_type)
        encoder._prepare()  # the column must fit the schema: fail on the driver, not in a task
        return encoder

    def __getstate__(self):
        return {**self.__dict__, "_state": {}}

    def _prepare(self) -> dict:
        if not self._state:
            parsed, named = parse_avro(self.schema)
            try:
                convert = _Encoders(named).encoder(self.data_type, parsed, self.column)
            except SchemaMismatchError as e:
                raise SchemaMismatchError(f"the {self.column} column does not fit {self.schema.describe()}: "
                                          f"{e}") from None
            self._state.update(schema=parsed, convert=convert,
                               header=bytes([MAGIC_BYTE]) + self.schema.id.to_bytes(4, "big"))
        return self._state

    def encode(self, value) -> bytes | None:
        if value is None:
            return None
        state = self._prepare()
        out = io.BytesIO()
        out.write(state["header"])
        try:
            fastavro.schemaless_writer(out, state["schema"], state["convert"](value))
        except Exception as e:  # fastavro raises many kinds for values that do not fit
            raise SchemaMismatchError(f"a {self.column} cannot be written with {self.schema.describe()}: "
                                      f"{type(e).__name__}: {e}; the {self.column}: {value!r}") from None
        return out.getvalue()


@dataclass
class SinkEncoders:
    key: ColumnEncoder | None = None
    value: ColumnEncoder | None = None

    @classmethod
    def fetch(cls, schema: StructType, key: RegistryOptions | None,
              value: RegistryOptions | None) -> SinkEncoders | None:
        if key is None and value is None:
            return None
        types = {f.name.lower(): f.dataType for f in schema.fields}
        if key is not None and "key" not in types:
            raise SchemaMismatchError("option 'keySchemaRegistry.url' is set, but there is no 'key' column")
        return cls(key=key and ColumnEncoder.fetch("key", key, types["key"]),
                   value=value and ColumnEncoder.fetch("value", value, types["value"]))
