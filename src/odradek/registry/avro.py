"""Avro schemas for the registry: parsing and validation, the stored and normalized texts, and whether one
schema can read data written with another.

Validation follows Java Avro's parser as Confluent runs it for new schemas (strict names, defaults checked),
and compatibility follows Java Avro's SchemaCompatibility, which Confluent's AvroSchema uses: the Avro
specification's schema resolution rules, with Confluent's incompatibility type names in the messages.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from odradek.registry.schema_types import InvalidSchema, ParsedSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

# Attributes with a meaning to Avro; every other attribute is a property, kept as given (logicalType is one).
_SCHEMA_RESERVED = frozenset(
    {"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"}
)
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset({"default", "doc", "name", "order", "type", "aliases"})

_FIELD_ORDERS = ("ascending", "descending", "ignore")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTEGER_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
# Writer types each reader type can also read (the specification's promotions).
_PROMOTIONS = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}

# Confluent's (Java Avro's) names for the ways a reader cannot read a writer.
TYPE_MISMATCH = "TYPE_MISMATCH"
NAME_MISMATCH = "NAME_MISMATCH"
FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"
READER_FIELD_MISSING_DEFAULT_VALUE = "READER_FIELD_MISSING_DEFAULT_VALUE"

_NO_DEFAULT = object()
# Issues kept for a reader/writer pair: enough to explain, and bounded, because a type used at many places
# (each using another many times) would otherwise report the same issue at exponentially many paths.
_MAX_ISSUES = 100


@dataclass(eq=False)
class _Primitive:
    kind: str
    props: dict[str, Any]


@dataclass(eq=False)
class _Array:
    kind: ClassVar[str] = "array"
    items: _Schema
    props: dict[str, Any]


@dataclass(eq=False)
class _Map:
    kind: ClassVar[str] = "map"
    values: _Schema
    props: dict[str, Any]


@dataclass(eq=False)
class _Union:
    kind: ClassVar[str] = "union"
    branches: list[_Schema]


@dataclass(eq=False)
class _Field:
    name: str
    type: _Schema
    default: Any  # the JSON value as given, or _NO_DEFAULT
    aliases: tuple[str, ...]
    order: str
    doc: str | None
    props: dict[str, Any]


@dataclass(eq=False)
class _Named:
    """A record, enum or fixed. A record's fields are filled in after it is defined, so they may refer to it."""

    kind: str
    full_name: str
    aliases: tuple[str, ...]  # full names
    doc: str | None
    props: dict[str, Any]
    is_error: bool = False  # declared as "error", Avro's other spelling of a record
    fields: list[_Field] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0


_Schema = _Primitive | _Array | _Map | _Union | _Named


class _UnknownName(InvalidSchema):
    """A type name not defined (yet): a reference is parsed again once the others that may define it are."""


def _pointer(path: tuple[str, ...]) -> str:
    return "/" + "/".join(path)


def _invalid(path: tuple[str, ...], reason: str, error: type[InvalidSchema] = InvalidSchema) -> InvalidSchema:
    return error(f"{reason} (at {_pointer(path)})" if path else reason)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(schema: _Schema) -> str:
    if isinstance(schema, _Named):
        return f"{schema.kind} {schema.full_name}"
    if isinstance(schema, _Union):
        return "union of " + ", ".join(_describe(branch) for branch in schema.branches)
    return schema.kind


def _load_json(text: str) -> Any:
    def reject_constant(name: str) -> Any:
        raise InvalidSchema(f"not valid JSON: {name} is not a JSON number")

    def finite_float(literal: str) -> float:
        number = float(literal)
        if not math.isfinite(number):
            raise InvalidSchema(f"not valid JSON: number {literal} is out of range")
        return number

    if not isinstance(text, str):
        raise InvalidSchema("the schema must be a string of JSON")
    try:
        return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)
    except json.JSONDecodeError as exc:
        raise InvalidSchema(f"not valid JSON: {exc}") from None
    except InvalidSchema:
        raise
    except ValueError:  # Python declines to convert integers of thousands of digits
        raise InvalidSchema("not valid JSON: a number has too many digits") from None


class _Parser:
    """Parses one schema document, given the named types its references define."""

    def __init__(self, known: Mapping[str, _Named]):
        self._known = known
        self.defined: dict[str, _Named] = {}
        self._redefinitions: list[tuple[_Named, _Named, tuple[str, ...]]] = []
        self._defaults: list[tuple[_Field, tuple[str, ...]]] = []

    def document(self, node: Any) -> _Schema:
        root = self._schema(node, None, ())
        # Checked once every record is complete: a default may hold a record whose fields were still being read.
        for schema_field, path in self._defaults:
            if not _field_default_ok(schema_field):
                default = _show(schema_field.default)
                if isinstance(schema_field.type, _Union):
                    first = _describe(schema_field.type.branches[0])
                    reason = (
                        f"default {default} does not match {first}, the first branch of the field's union"
                    )
                else:
                    reason = (
                        f"default {default} does not match the field's type {_describe(schema_field.type)}"
                    )
                raise _invalid(path, reason)
        # Defining a name again is allowed only with the same definition (as Avro's parser allows).
        for existing, again, path in self._redefinitions:
            if _normalized_text(existing, set()) != _normalized_text(again, set()):
                raise _invalid(path, f"{again.full_name} is already defined differently")
        return root

    def _schema(self, node: Any, namespace: str | None, path: tuple[str, ...]) -> _Schema:
        if isinstance(node, str):
            return self._lookup(node, namespace, path)
        if isinstance(node, list):
            return self._union(node, namespace, path)
        if isinstance(node, dict):
            return self._object(node, namespace, path)
        raise _invalid(path, f"a schema is a type name, an object or a union array, not {_show(node)}")

    def _lookup(self, name: str, namespace: str | None, path: tuple[str, ...]) -> _Schema:
        if name in PRIMITIVES:
            return _Primitive(name, {})
        full_name = name if "." in name or not namespace else f"{namespace}.{name}"
        # A simple name not found in the enclosing namespace may name a type of the null namespace.
        found = self.defined.get(full_name) or self._known.get(full_name)
        found = found or self.defined.get(name) or self._known.get(name)
        if found is None:
            raise _invalid(path, f"unknown type name {name!r}", _UnknownName)
        return found

    def _union(self, node: list[Any], namespace: str | None, path: tuple[str, ...]) -> _Union:
        if not node:
            raise _invalid(path, "a union needs at least one branch")
        branches: list[_Schema] = []
        seen: set[str] = set()
        for index, branch_node in enumerate(node):
            branch = self._schema(branch_node, namespace, (*path, str(index)))
            if isinstance(branch, _Union):
                raise _invalid((*path, str(index)), "a union may not directly contain another union")
            key = branch.full_name if isinstance(branch, _Named) else branch.kind
            if key in seen:
                raise _invalid((*path, str(index)), f"the union has two branches of type {key}")
            seen.add(key)
            branches.append(branch)
        return _Union(branches)

    def _object(self, node: dict[str, Any], namespace: str | None, path: tuple[str, ...]) -> _Schema:
        if "type" not in node:
            raise _invalid(path, "a schema object needs a 'type'")
        kind = node["type"]
        if not isinstance(kind, str):
            raise _invalid((*path, "type"), f"a schema object's 'type' must be a string, not {_show(kind)}")
        if kind in PRIMITIVES:
            return _Primitive(kind, _props(node, _SCHEMA_RESERVED))
        if kind in ("record", "error"):
            return self._record(node, namespace, path)
        if kind == "enum":
            return self._enum(node, namespace, path)
        if kind == "fixed":
            return self._fixed(node, namespace, path)
        if kind == "array":
            if "items" not in node:
                raise _invalid(path, "an array needs 'items'")
            return _Array(
                self._schema(node["items"], namespace, (*path, "items")), _props(node, _SCHEMA_RESERVED)
            )
        if kind == "map":
            if "values" not in node:
                raise _invalid(path, "a map needs 'values'")
            return _Map(
                self._schema(node["values"], namespace, (*path, "values")), _props(node, _SCHEMA_RESERVED)
            )
        # {"type": "com.acme.Address"} names a defined type, as Avro 1.11's parser accepted.
        return self._lookup(kind, namespace, (*path, "type"))

    def _name(
        self, node: dict[str, Any], namespace: str | None, path: tuple[str, ...]
    ) -> tuple[str, str | None]:
        """The full name a named type defines, and the namespace it gives the types inside it."""
        name = node.get("name")
        if not isinstance(name, str):
            raise _invalid(path, f"a {node['type']} needs a string 'name'")
        declared = node.get("namespace")
        if declared is not None and not isinstance(declared, str):
            raise _invalid((*path, "namespace"), "'namespace' must be a string")
        if "." in name:
            space, simple = name.rsplit(".", 1)
        else:
            space, simple = (namespace if declared is None else declared), name
        _check_name(simple, "name", (*path, "name"))
        for part in space.split(".") if space else ():
            _check_name(part, "namespace part", (*path, "name" if "." in name else "namespace"))
        full_name = f"{space}.{simple}" if space else simple
        if full_name in PRIMITIVES:
            raise _invalid((*path, "name"), f"a named type may not be called {full_name!r}, a primitive type")
        return full_name, space or None

    def _named(self, node: dict[str, Any], namespace: str | None, path: tuple[str, ...], kind: str) -> _Named:
        full_name, space = self._name(node, namespace, path)
        aliases = _string_list(node, "aliases", path)
        for alias in aliases:
            _check_name(alias.rsplit(".", 1)[-1], "alias", (*path, "aliases"))
        named = _Named(
            kind=kind,
            full_name=full_name,
            aliases=tuple(alias if "." in alias or not space else f"{space}.{alias}" for alias in aliases),
            doc=_optional_string(node, "doc", path),
            props=_props(node, _ENUM_RESERVED if kind == "enum" else _SCHEMA_RESERVED),
            is_error=node["type"] == "error",
        )
        if full_name in self.defined or full_name in self._known:
            existing = self.defined.get(full_name) or self._known[full_name]
            self._redefinitions.append((existing, named, path))
        else:
            self.defined[full_name] = named
        return named

    def _record(self, node: dict[str, Any], namespace: str | None, path: tuple[str, ...]) -> _Named:
        record = self._named(node, namespace, path, "record")
        fields_node = node.get("fields")
        if not isinstance(fields_node, list):
            raise _invalid(path, f"record {record.full_name} needs a 'fields' array")
        space = record.full_name.rpartition(".")[0] or None
        names: set[str] = set()
        for index, field_node in enumerate(fields_node):
            schema_field = self._field(field_node, space, (*path, "fields", str(index)))
            if schema_field.name in names:
                raise _invalid(
                    (*path, "fields", str(index)),
                    f"record {record.full_name} has two fields named {schema_field.name!r}",
                )
            names.add(schema_field.name)
            record.fields.append(schema_field)
        return record

    def _field(self, node: Any, namespace: str | None, path: tuple[str, ...]) -> _Field:
        if not isinstance(node, dict):
            raise _invalid(path, f"a field is an object, not {_show(node)}")
        name = node.get("name")
        if not isinstance(name, str):
            raise _invalid(path, "a field needs a string 'name'")
        _check_name(name, "field name", (*path, "name"))
        if "type" not in node:
            raise _invalid(path, f"field {name!r} needs a 'type'")
        order = node.get("order", "ascending")
        if not isinstance(order, str) or order.lower() not in _FIELD_ORDERS:
            raise _invalid((*path, "order"), f"'order' must be one of {', '.join(_FIELD_ORDERS)}")
        schema_field = _Field(
            name=name,
            type=self._schema(node["type"], namespace, (*path, "type")),
            default=node.get("default", _NO_DEFAULT),
            aliases=tuple(_string_list(node, "aliases", path)),
            order=order.lower(),
            doc=_optional_string(node, "doc", path),
            props=_props(node, _FIELD_RESERVED),
        )
        if schema_field.default is not _NO_DEFAULT:
            self._defaults.append((schema_field, (*path, "default")))
        return schema_field

    def _enum(self, node: dict[str, Any], namespace: str | None, path: tuple[str, ...]) -> _Named:
        enum = self._named(node, namespace, path, "enum")
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            raise _invalid(path, f"enum {enum.full_name} needs a 'symbols' array")
        seen: set[str] = set()
        for index, symbol in enumerate(symbols):
            if not isinstance(symbol, str):
                raise _invalid(
                    (*path, "symbols", str(index)), f"an enum symbol is a string, not {_show(symbol)}"
                )
            _check_name(symbol, "enum symbol", (*path, "symbols", str(index)))
            if symbol in seen:
                raise _invalid(
                    (*path, "symbols", str(index)), f"enum {enum.full_name} repeats symbol {symbol!r}"
                )
            seen.add(symbol)
        default = node.get("default")
        if default is not None and default not in symbols:
            raise _invalid(
                (*path, "default"), f"the default {_show(default)} is not one of the enum's symbols"
            )
        enum.symbols, enum.enum_default = tuple(symbols), default
        return enum

    def _fixed(self, node: dict[str, Any], namespace: str | None, path: tuple[str, ...]) -> _Named:
        fixed = self._named(node, namespace, path, "fixed")
        size = node.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= _INTEGER_RANGES["int"][1]:
            raise _invalid(path, f"fixed {fixed.full_name} needs a 'size' that is a non-negative int")
        fixed.size = size
        return fixed


def _check_name(name: str, what: str, path: tuple[str, ...]) -> None:
    if not _NAME.fullmatch(name):
        raise _invalid(path, f"{what} {name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*)")


def _props(node: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in node.items() if key not in reserved}


def _optional_string(node: dict[str, Any], key: str, path: tuple[str, ...]) -> str | None:
    value = node.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid((*path, key), f"'{key}' must be a string")
    return value


def _string_list(node: dict[str, Any], key: str, path: tuple[str, ...]) -> list[str]:
    value = node.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid((*path, key), f"'{key}' must be an array of strings")
    return value


def _field_default_ok(schema_field: _Field) -> bool:
    # Avro's parser reads a float or double field's string default as a number ("NaN", "Infinity", "1.5").
    if schema_field.type.kind in ("float", "double") and isinstance(schema_field.default, str):
        try:
            float(schema_field.default)
        except ValueError:
            return False
        return True
    return _default_ok(schema_field.type, schema_field.default)


def _default_ok(schema: _Schema, value: Any) -> bool:
    """Whether a JSON default value is a value of the schema (a union's default is one of its first branch)."""
    kind = schema.kind
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[kind]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if kind in ("float", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind in ("string", "bytes", "fixed"):
        return isinstance(value, str)
    if kind == "enum":
        return isinstance(value, str) and value in schema.symbols
    if isinstance(schema, _Array):
        return isinstance(value, list) and all(_default_ok(schema.items, item) for item in value)
    if isinstance(schema, _Map):
        return isinstance(value, dict) and all(_default_ok(schema.values, item) for item in value.values())
    if isinstance(schema, _Union):
        return _default_ok(schema.branches[0], value)
    # A record: each field is given, or has a default of its own.
    return isinstance(value, dict) and all(
        _default_ok(record_field.type, value[record_field.name])
        if record_field.name in value
        else record_field.default is not _NO_DEFAULT
        for record_field in schema.fields
    )


def _parse_references(references: Mapping[str, str]) -> dict[str, _Named]:
    """The named types the references define, parsed in whatever order lets each find the types it uses."""
    known: dict[str, _Named] = {}
    pending = dict(references)
    while pending:
        waiting: dict[str, str] = {}
        first_unknown: tuple[str, _UnknownName] | None = None
        for name, text in pending.items():
            try:
                parser = _Parser(known)
                parser.document(_load_json(text))
            except _UnknownName as exc:
                waiting[name] = text
                first_unknown = first_unknown or (name, exc)
                continue
            except InvalidSchema as exc:
                raise InvalidSchema(f"reference {name!r}: {exc}") from None
            known.update(parser.defined)
        if first_unknown is not None and len(waiting) == len(pending):
            name, exc = first_unknown
            raise InvalidSchema(f"reference {name!r}: {exc}") from None
        pending = waiting
    return known


# The attribute order of Java Avro's Schema.toString, which Confluent stores: the given order does not
# change the stored text (so the same schema gets one id, whatever order its keys came in). Custom properties
# keep their given order, between these and the aliases, as Java writes them.
_JAVA_ORDER = {
    "record": ("type", "name", "namespace", "doc", "fields"),
    "enum": ("type", "name", "namespace", "doc", "symbols", "default"),
    "fixed": ("type", "name", "namespace", "doc", "size"),
    "array": ("type", "items"),
    "map": ("type", "values"),
}
_JAVA_FIELD_ORDER = ("name", "type", "doc", "default", "order")


def _java_ordered(node: dict, first: tuple[str, ...]) -> dict:
    ordered = {key: node[key] for key in first if key in node}
    ordered.update((key, value) for key, value in node.items() if key not in ordered and key != "aliases")
    if "aliases" in node:
        ordered["aliases"] = node["aliases"]
    return ordered


def _canonical_json(node: Any) -> Any:
    """The schema as Java Avro writes it: its attributes in Java's order, {"type": name} alone as the name."""
    if isinstance(node, list):
        return [_canonical_json(branch) for branch in node]
    if not isinstance(node, dict):
        return node
    kind = node["type"]
    if len(node) == 1:
        return _canonical_json(kind)
    canonical = _java_ordered(node, _JAVA_ORDER.get("record" if kind == "error" else kind, ("type",)))
    if isinstance(kind, dict | list):
        canonical["type"] = _canonical_json(kind)
    if kind == "array":
        canonical["items"] = _canonical_json(node["items"])
    elif kind == "map":
        canonical["values"] = _canonical_json(node["values"])
    elif kind in ("record", "error"):
        canonical["fields"] = [
            {**_java_ordered(field_node, _JAVA_FIELD_ORDER), "type": _canonical_json(field_node["type"])}
            for field_node in node["fields"]
        ]
    return canonical


def _normal_form(schema: _Schema, written: set[str]) -> Any:
    """Parsing Canonical Form's shape (full names, each named type defined where first used), keeping what
    Confluent's normalization keeps: docs, aliases, defaults, orders and properties (sorted)."""
    if isinstance(schema, _Primitive):
        props = _normal_props(schema.props)
        return {"type": schema.kind, **props} if props else schema.kind
    if isinstance(schema, _Array):
        return {"type": "array", "items": _normal_form(schema.items, written), **_normal_props(schema.props)}
    if isinstance(schema, _Map):
        return {"type": "map", "values": _normal_form(schema.values, written), **_normal_props(schema.props)}
    if isinstance(schema, _Union):
        return [_normal_form(branch, written) for branch in schema.branches]
    if schema.full_name in written:
        return schema.full_name
    written.add(schema.full_name)
    normal: dict[str, Any] = {"name": schema.full_name, "type": "error" if schema.is_error else schema.kind}
    if schema.kind == "record":
        normal["fields"] = [_normal_field(record_field, written) for record_field in schema.fields]
    elif schema.kind == "enum":
        normal["symbols"] = list(schema.symbols)
    else:
        normal["size"] = schema.size
    if schema.doc is not None:
        normal["doc"] = schema.doc
    if schema.aliases:
        normal["aliases"] = sorted(set(schema.aliases))
    if schema.enum_default is not None:
        normal["default"] = schema.enum_default
    normal.update(_normal_props(schema.props))
    return normal


def _normal_field(schema_field: _Field, written: set[str]) -> dict[str, Any]:
    normal = {"name": schema_field.name, "type": _normal_form(schema_field.type, written)}
    if schema_field.order != "ascending":
        normal["order"] = schema_field.order
    if schema_field.doc is not None:
        normal["doc"] = schema_field.doc
    if schema_field.aliases:
        normal["aliases"] = sorted(set(schema_field.aliases))
    if schema_field.default is not _NO_DEFAULT:
        normal["default"] = _normal_default(schema_field.type, schema_field.default)
    normal.update(_normal_props(schema_field.props))
    return normal


def _normal_props(props: dict[str, Any]) -> dict[str, Any]:
    normal = {key: _sorted_json(props[key]) for key in sorted(props)}
    # A decimal's scale is 0 unless given.
    if normal.get("logicalType") == "decimal" and normal.get("scale") == 0 and type(normal["scale"]) is int:
        del normal["scale"]
    return normal


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_json(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(item) for item in value]
    return value


def _normal_default(schema: _Schema, value: Any) -> Any:
    """A valid default written one way: floating-point numbers as such, map keys sorted, record fields in order."""
    if schema.kind in ("float", "double"):
        number = float(value)
        if math.isfinite(number):
            return number
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    if isinstance(schema, _Array):
        return [_normal_default(schema.items, item) for item in value]
    if isinstance(schema, _Map):
        return {key: _normal_default(schema.values, value[key]) for key in sorted(value)}
    if isinstance(schema, _Union):
        return _normal_default(schema.branches[0], value)
    if schema.kind == "record":
        return {
            record_field.name: _normal_default(record_field.type, value[record_field.name])
            for record_field in schema.fields
            if record_field.name in value
        }
    return value


def _normalized_text(schema: _Schema, written: set[str]) -> str:
    """The normal form with its attributes in Java's order, as canonical() writes them."""
    return json.dumps(_canonical_json(_normal_form(schema, written)), separators=(",", ":"), ensure_ascii=False)


class _Issue(NamedTuple):
    path: tuple[str, ...]  # where in the reader schema, as Java Avro's SchemaCompatibility locates it
    kind: str
    detail: str

    def under(self, *prefix: str) -> _Issue:
        return self._replace(path=(*prefix, *self.path))

    def message(self) -> str:
        return f"{_pointer(self.path)}: {self.detail} ({self.kind})"


class _Resolver:
    """Avro's schema resolution, asked of a reader and a writer schema; each issue's path is relative to the pair
    it was found in, so a pair's result can be reused wherever the same pair comes up again."""

    def __init__(self) -> None:
        self._results: dict[tuple[int, int], list[_Issue] | None] = {}

    def issues(self, reader: _Schema, writer: _Schema) -> list[_Issue]:
        key = (id(reader), id(writer))
        if key in self._results:
            # None: this pair is being checked further up (recursive types), and holds unless shown otherwise there.
            return self._results[key] or []
        self._results[key] = None
        issues = self._compare(reader, writer)[:_MAX_ISSUES]
        self._results[key] = issues
        return issues

    def _compare(self, reader: _Schema, writer: _Schema) -> list[_Issue]:
        if isinstance(writer, _Union):
            return self._writer_union(reader, writer)
        if isinstance(reader, _Union):
            if any(not self.issues(branch, writer) for branch in reader.branches):
                return []
            detail = f"reader {_describe(reader)} has no branch that can read writer type {_describe(writer)}"
            return [_Issue((), MISSING_UNION_BRANCH, detail)]
        if reader.kind != writer.kind:
            if writer.kind in _PROMOTIONS.get(reader.kind, ()):
                return []
            detail = f"reader type {_describe(reader)} cannot read writer type {_describe(writer)}"
            return [_Issue((), TYPE_MISMATCH, detail)]
        # Logical types (decimal's precision and scale among them) play no part, as in Java Avro's check.
        if isinstance(reader, _Array):
            return [issue.under("items") for issue in self.issues(reader.items, writer.items)]
        if isinstance(reader, _Map):
            return [issue.under("values") for issue in self.issues(reader.values, writer.values)]
        if isinstance(reader, _Named):
            return self._named(reader, writer)
        return []

    def _writer_union(self, reader: _Schema, writer: _Union) -> list[_Issue]:
        """Every branch the writer may have written must be readable."""
        if not isinstance(reader, _Union):
            return [
                issue.under(str(index))
                for index, branch in enumerate(writer.branches)
                for issue in self.issues(reader, branch)
            ]
        issues = []
        for index, branch in enumerate(writer.branches):
            if self.issues(reader, branch):
                detail = (
                    f"reader {_describe(reader)} has no branch that can read writer type {_describe(branch)}"
                )
                issues.append(_Issue((str(index),), MISSING_UNION_BRANCH, detail))
        return issues

    def _named(self, reader: _Named, writer: _Named) -> list[_Issue]:
        issues = []
        if reader.full_name != writer.full_name and writer.full_name not in reader.aliases:
            detail = (
                f"reader name {reader.full_name} is not writer name {writer.full_name} nor one of its aliases"
            )
            issues.append(_Issue(("name",), NAME_MISMATCH, detail))
        if reader.kind == "record":
            issues += self._record_fields(reader, writer)
        elif reader.kind == "enum":
            missing = sorted(set(writer.symbols) - set(reader.symbols))
            if missing and reader.enum_default is None:
                detail = f"reader enum lacks writer symbols {', '.join(missing)} and has no default"
                issues.append(_Issue(("symbols",), MISSING_ENUM_SYMBOLS, detail))
        elif reader.size != writer.size:
            detail = f"reader size {reader.size} differs from writer size {writer.size}"
            issues.append(_Issue(("size",), FIXED_SIZE_MISMATCH, detail))
        return issues

    def _record_fields(self, reader: _Named, writer: _Named) -> list[_Issue]:
        issues = []
        writer_fields = {writer_field.name: writer_field for writer_field in writer.fields}
        for position, reader_field in enumerate(reader.fields):
            at = ("fields", str(position))
            # A reader field takes the writer field of its name or of one of its aliases.
            names = dict.fromkeys((reader_field.name, *reader_field.aliases))
            matches = [writer_fields[name] for name in names if name in writer_fields]
            if len(matches) == 1:
                issues += [
                    issue.under(*at, "type") for issue in self.issues(reader_field.type, matches[0].type)
                ]
            elif matches:
                detail = (
                    f"reader field {reader_field.name} matches several writer fields by name or alias: "
                    + ", ".join(writer_field.name for writer_field in matches)
                )
                issues.append(_Issue(at, NAME_MISMATCH, detail))
            elif reader_field.default is _NO_DEFAULT:
                # Writer fields the reader lacks are skipped; reader fields the writer lacks take their default.
                detail = f"reader field {reader_field.name} is missing from the writer and has no default"
                issues.append(_Issue(at, READER_FIELD_MISSING_DEFAULT_VALUE, detail))
        return issues


class AvroSchema:
    """A parsed, valid Avro schema (see parse)."""

    schema_type = "AVRO"

    def __init__(self, root: _Schema, canonical: str, normalized: str):
        self._root = root
        self._canonical = canonical
        self._normalized = normalized

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._normalized

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [
                f"/: reader schema type AVRO cannot read writer schema type {writer.schema_type} (TYPE_MISMATCH)"
            ]
        try:
            issues = _Resolver().issues(self._root, writer._root)
        except RecursionError:
            return ["/: the schemas nest too deeply to compare"]
        return [issue.message() for issue in issues]

    def __repr__(self) -> str:
        return f"AvroSchema({self._canonical})"


def parse(text: str, references: Mapping[str, str]) -> AvroSchema:
    """Parse and validate Avro schema text. `references` maps the full names of named types the schema uses
    without defining them to the schema texts that define them (and the types those use, transitively)."""
    try:
        known = _parse_references(references)
        node = _load_json(text)
        root = _Parser(known).document(node)
        canonical = json.dumps(_canonical_json(node), separators=(",", ":"), ensure_ascii=False)
        # Types the references define are written by name, as Confluent's normalization does.
        return AvroSchema(root, canonical, _normalized_text(root, set(known)))
    except RecursionError:
        raise InvalidSchema("the schema nests too deeply") from None
