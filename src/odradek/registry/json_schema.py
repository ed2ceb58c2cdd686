"""The JSON Schema format: parsing, the stored forms, and Confluent's compatibility rules.

A document is checked against its draft's meta-schema (draft 4, 6, 7, 2019-09 or 2020-12, chosen by `$schema`,
draft 7 when it names none, as Confluent does), then read into a small model of typed schemas that follows how
Confluent's JSON Schema provider sees a document: each schema object splits into facets (a reference, an enum,
allOf/anyOf/oneOf, not, const, the schema of its `type`, and the object, array, number and string schemas its
other keywords imply); several facets make an allOf of them.

Compatibility compares two such models as Confluent's SchemaDiff does: comparing the writer's schema
(original) with the reader's (update) finds differences, each a change type of Confluent's at a JSON pointer,
and the reader can read the writer's data when every difference is one of the compatible types (Confluent's
default strict policy).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import best_match
from jsonschema_specifications import REGISTRY as META_SCHEMAS

from odradek.registry.schema_types import InvalidSchema, ParsedSchema


def parse(text: str, references: Mapping[str, str]) -> JsonSchema:
    """Read a JSON Schema document; `references` maps each `$ref` target name to that schema's text."""
    document = _load_json(text, "schema")
    if not isinstance(document, dict | bool):
        raise InvalidSchema(f"a JSON Schema is an object or a boolean, not {_json_type(document)}")
    dialect = _dialect_of(document, _DIALECTS[7])
    try:
        _check_against_meta_schema(document, dialect)
        resolver = _registry(document, dialect, references).resolver()
        root = _Reader().read_document(document, resolver, dialect)
    except RecursionError:
        raise InvalidSchema("the schema is nested too deeply") from None
    return JsonSchema(document, root)


class JsonSchema:
    """A parsed JSON Schema (a ParsedSchema)."""

    schema_type = "JSON"

    def __init__(self, document: dict | bool, root: _Schema):
        self._document = document
        self._root = root

    def canonical(self) -> str:
        return json.dumps(self._document, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(self._document, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        return [f"{path}: {kind}" for path, kind in self._differences(writer) if kind not in _COMPATIBLE]

    def differences(self, writer: ParsedSchema) -> list[str]:
        """Every difference from `writer` to this schema, compatible or not, as "<JSON pointer>: <type>"."""
        return [f"{path}: {kind}" for path, kind in self._differences(writer)]

    def _differences(self, writer: ParsedSchema) -> list[tuple[str, str]]:
        if not isinstance(writer, JsonSchema):
            return [("#/", f"TYPE_CHANGED (the writer's schema is {writer.schema_type}, not JSON)")]
        try:
            found = _compare(writer._root, self._root)
        except RecursionError:
            return [("#/", "TYPE_CHANGED (the schemas are nested too deeply to compare)")]
        return [(_pointer(path), kind) for path, kind in found]


# Confluent's change types that a reader can always take (SchemaDiff.COMPATIBLE_CHANGES_STRICT): anything
# else found between the writer's schema and the reader's means data the reader may reject.
_COMPATIBLE = frozenset(
    """
    ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
    MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
    MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED
    EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_REMOVED
    EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED
    MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED
    DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED
    MAX_PROPERTIES_INCREASED MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
    ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED
    UNEVALUATED_PROPERTIES_ADDED UNEVALUATED_PROPERTIES_EXTENDED
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED
    MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED
    UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED
    UNEVALUATED_ITEMS_ADDED UNEVALUATED_ITEMS_EXTENDED
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED
    """.split()
)


# ---------------------------------------------------------------------------------------------------------
# Dialects


@dataclass(frozen=True)
class _Dialect:
    name: str
    year: int  # 4, 6, 7, 2019 or 2020: which keywords mean what
    validator: Any  # the jsonschema validator class, whose META_SCHEMA checks documents
    specification: referencing.Specification

    @property
    def id_keyword(self) -> str:
        return "id" if self.year == 4 else "$id"

    @cached_property
    def family_keywords(self) -> dict[str, frozenset[str]]:
        """The keywords that make a schema an array, object, number or string schema without a `type`."""
        array = {"items", "minItems", "maxItems", "uniqueItems"}
        objects = {
            "properties",
            "required",
            "minProperties",
            "maxProperties",
            "patternProperties",
            "additionalProperties",
        }
        string = {"minLength", "maxLength", "pattern"}
        if self.year <= 7:
            string.add("format")  # Confluent ignores format from 2019-09 on
            objects.add("dependencies")
        if self.year <= 2019:
            array.add("additionalItems")
        if self.year >= 6:
            array.add("contains")
            objects.add("propertyNames")
        if self.year >= 2019:
            array.add("unevaluatedItems")
            objects |= {"dependentRequired", "dependentSchemas", "unevaluatedProperties"}
        if self.year == 2020:
            array.add("prefixItems")
        number = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
        return {
            "array": frozenset(array),
            "object": frozenset(objects),
            "number": frozenset(number),
            "string": frozenset(string),
        }


_DIALECTS = {
    4: _Dialect("draft-04", 4, jsonschema.Draft4Validator, referencing.jsonschema.DRAFT4),
    6: _Dialect("draft-06", 6, jsonschema.Draft6Validator, referencing.jsonschema.DRAFT6),
    7: _Dialect("draft-07", 7, jsonschema.Draft7Validator, referencing.jsonschema.DRAFT7),
    2019: _Dialect("2019-09", 2019, jsonschema.Draft201909Validator, referencing.jsonschema.DRAFT201909),
    2020: _Dialect("2020-12", 2020, jsonschema.Draft202012Validator, referencing.jsonschema.DRAFT202012),
}

# The `$schema` URLs Confluent knows (with or without a trailing "#"); any other value means draft 7.
_DIALECT_URLS = {
    f"{scheme}://json-schema.org/{path}": _DIALECTS[year]
    for scheme in ("http", "https")
    for path, year in (
        ("draft-04/schema", 4),
        ("schema", 4),
        ("draft-06/schema", 6),
        ("draft-07/schema", 7),
        ("draft/2019-09/schema", 2019),
        ("draft/2020-12/schema", 2020),
    )
}


def _dialect_of(document: object, default: _Dialect) -> _Dialect:
    declared = document.get("$schema") if isinstance(document, dict) else None
    if not isinstance(declared, str):
        return default
    return _DIALECT_URLS.get(declared.removesuffix("#"), default)


# ---------------------------------------------------------------------------------------------------------
# Parsing


def _load_json(text: str, what: str) -> Any:
    def refuse_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    def finite_float(literal: str) -> float:
        value = float(literal)
        if math.isinf(value):
            raise ValueError(f"{literal} is too large a number")
        return value

    try:
        return json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)
    except RecursionError:
        raise InvalidSchema(f"the {what} is nested too deeply") from None
    except ValueError as error:  # json.JSONDecodeError is a ValueError
        raise InvalidSchema(f"the {what} is not JSON: {error}") from None


def _json_type(value: object) -> str:
    return {list: "an array", str: "a string", type(None): "null"}.get(type(value), "a number")


def _check_against_meta_schema(document: dict | bool, dialect: _Dialect) -> None:
    meta = dialect.validator
    checker = jsonschema.validators.validator_for(meta.META_SCHEMA, default=meta)
    error = best_match(checker(meta.META_SCHEMA, format_checker=checker.FORMAT_CHECKER).iter_errors(document))
    if error is not None:
        message = " ".join(error.message.split())
        if len(message) > 200:
            message = message[:200] + "..."
        raise InvalidSchema(
            f"not a valid {dialect.name} JSON Schema at {_pointer(error.absolute_path)}: {message}"
        )


def _registry(
    document: dict | bool, dialect: _Dialect, references: Mapping[str, str]
) -> referencing.Registry:
    """The root document under "" (and its id), each reference under its name as given and as resolved
    against the root's id, and the meta-schemas, which Confluent also resolves without fetching them."""
    root = dialect.specification.create_resource(document)
    root_id = root.id() or ""
    resources = [("", root)]
    try:
        for name, text in references.items():
            referenced = _load_json(text, f"reference {name!r}")
            resource = _dialect_of(referenced, dialect).specification.create_resource(referenced)
            resources += [(name, resource), (urljoin(root_id, name), resource)]
        return META_SCHEMAS.with_resources(resources).crawl()
    except InvalidSchema:
        raise
    except ValueError as error:  # urljoin refusing a malformed id or reference name
        raise InvalidSchema(f"a malformed URI among the ids and reference names: {error}") from None
    except (TypeError, AttributeError) as error:  # a subschema with a $schema of its own that it breaks
        raise InvalidSchema(f"a subschema does not follow its own $schema: {error}") from None


# ---------------------------------------------------------------------------------------------------------
# The model: what Confluent's schema classes hold, as far as its comparison looks at it

_ABSENT = object()  # no `default` keyword


@dataclass(eq=False, kw_only=True)
class _Schema:
    # Annotations: a change to any of them is compatible.
    id: str | None = None
    title: str | None = None
    description: str | None = None
    default: object = _ABSENT  # the _frozen() value
    connect_type: object = None  # Kafka Connect's "connect.type", of which "bytes" on both sides matches

    @cached_property
    def fingerprint(self) -> object:
        """A structural key: combined schemas count equal subschemas once."""
        return (
            type(self).__name__,
            tuple(_key(getattr(self, each.name)) for each in dataclasses.fields(self)),
        )


def _key(value: object) -> object:
    if isinstance(value, _Schema):
        return value.fingerprint
    if isinstance(value, list | tuple):
        return tuple(_key(each) for each in value)
    if isinstance(value, dict):
        return tuple((name, _key(each)) for name, each in value.items())
    if isinstance(value, re.Pattern):
        return value.pattern
    return value


@dataclass(eq=False, kw_only=True)
class _Empty(_Schema):
    """`{}` or `true`: any value."""


@dataclass(eq=False, kw_only=True)
class _False(_Schema):
    """`false`: no value."""


@dataclass(eq=False, kw_only=True)
class _Boolean(_Schema):
    pass


@dataclass(eq=False, kw_only=True)
class _Null(_Schema):
    pass


@dataclass(eq=False, kw_only=True)
class _String(_Schema):
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None


@dataclass(eq=False, kw_only=True)
class _Number(_Schema):
    integer: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None  # draft 4's boolean flags are not limits, and Confluent skips them
    exclusive_maximum: float | None = None
    multiple_of: float | None = None


@dataclass(eq=False, kw_only=True)
class _Object(_Schema):
    properties: dict[str, _Schema] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    min_properties: int | None = None
    max_properties: int | None = None
    additional_allowed: bool = True  # additionalProperties is not false
    additional: _Schema | None = None  # additionalProperties as a schema
    pattern_properties: list[tuple[re.Pattern, _Schema]] = field(default_factory=list)
    property_dependencies: dict[str, frozenset[str]] = field(default_factory=dict)
    schema_dependencies: dict[str, _Schema] = field(default_factory=dict)
    unevaluated: _Schema | None = None
    property_names: _Schema | None = None  # not compared; read so that its $refs must resolve


@dataclass(eq=False, kw_only=True)
class _Array(_Schema):
    items: _Schema | None = None  # the schema of every item
    prefix_items: list[_Schema] = field(default_factory=list)  # a tuple's items
    additional_allowed: bool = True  # items after the tuple's are allowed
    additional: _Schema | None = None  # the schema of items after the tuple's
    unevaluated: _Schema | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_contains: int | None = None
    max_contains: int | None = None
    contains: _Schema | None = None  # not compared (as in Confluent); read so that its $refs must resolve


@dataclass(eq=False, kw_only=True)
class _Enum(_Schema):
    values: frozenset = frozenset()


@dataclass(eq=False, kw_only=True)
class _Const(_Schema):
    value: object = None


@dataclass(eq=False, kw_only=True)
class _Combined(_Schema):
    criterion: str  # "allOf", "anyOf" or "oneOf"
    subschemas: list[_Schema]


@dataclass(eq=False, kw_only=True)
class _Not(_Schema):
    negated: _Schema


@dataclass(eq=False, kw_only=True)
class _Conditional(_Schema):
    """if/then/else: compared by annotations only, as Confluent does."""

    if_schema: _Schema | None = None
    then_schema: _Schema | None = None
    else_schema: _Schema | None = None


@dataclass(eq=False, kw_only=True)
class _Ref(_Schema):
    ref: str
    target: _Schema | None = field(default=None, repr=False)  # set once the reader has read it

    @cached_property
    def fingerprint(self) -> object:
        return ("_Ref", self.ref)  # the target would recurse, and the text names it


def _frozen(value: object) -> object:
    """A hashable form of a JSON value that keeps true apart from 1 (Python's True == 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, list):
        return ("array", tuple(_frozen(each) for each in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, _frozen(each)) for name, each in value.items()))
    return value


# ---------------------------------------------------------------------------------------------------------
# Reading a document into the model


class _Reader:
    def __init__(self) -> None:
        self._read: dict[int, _Schema] = {}  # by id() of the JSON object: one model per schema object
        # References found but not yet read: reading their targets later (rather than when met) is what
        # lets a schema refer to itself.
        self._unread: list[tuple[_Ref, referencing.Resolved, _Dialect]] = []

    def read_document(
        self, document: dict | bool, resolver: referencing.Resolver, dialect: _Dialect
    ) -> _Schema:
        root = self.read(document, resolver, dialect)
        while self._unread:
            ref, resolved, target_dialect = self._unread.pop()
            ref.target = self.read(resolved.contents, resolved.resolver, target_dialect)
        return root

    def read(self, value: object, resolver: referencing.Resolver, dialect: _Dialect) -> _Schema:
        if value is True:
            return _Empty()
        if value is False:
            return _False()
        if not isinstance(value, dict):
            raise InvalidSchema(f"a schema is an object or a boolean, not {_json_type(value)}")
        if id(value) in self._read:
            return self._read[id(value)]
        try:
            resolver = resolver.in_subresource(dialect.specification.create_resource(value))
        except ValueError as error:  # urljoin refusing a malformed id
            raise InvalidSchema(f"a malformed {dialect.id_keyword}: {error}") from None
        schema = self._facets(value, resolver, dialect)
        identifier, title, description = (
            value.get(key) for key in (dialect.id_keyword, "title", "description")
        )
        schema.id = identifier if isinstance(identifier, str) else None
        schema.title = title if isinstance(title, str) else None
        schema.description = description if isinstance(description, str) else None
        schema.default = _frozen(value["default"]) if "default" in value else _ABSENT
        schema.connect_type = value.get("connect.type")
        self._read[id(value)] = schema
        return schema

    def _facets(self, value: dict, resolver: referencing.Resolver, dialect: _Dialect) -> _Schema:
        def read(child: object) -> _Schema:
            return self.read(child, resolver, dialect)

        if "$ref" in value and dialect.year <= 7:
            # Before 2019-09 a $ref hides its siblings.
            return self._reference(value["$ref"], resolver, dialect)
        facets: list[_Schema] = []
        if "$ref" in value:
            facets.append(self._reference(value["$ref"], resolver, dialect))
        if "enum" in value:
            facets.append(_Enum(values=frozenset(_frozen(each) for each in value["enum"])))
        for criterion in ("allOf", "anyOf", "oneOf"):
            if criterion in value:
                facets.append(
                    _Combined(criterion=criterion, subschemas=[read(each) for each in value[criterion]])
                )
        if "not" in value:
            facets.append(_Not(negated=read(value["not"])))
        if "const" in value and dialect.year >= 6:
            facets.append(_Const(value=_frozen(value["const"])))
        typed_families = set()
        if "type" in value:
            names = value["type"] if isinstance(value["type"], list) else [value["type"]]
            typed = [self._typed(name, value, resolver, dialect) for name in names]
            # A list of types is an anyOf of them, each with the keywords of its kind.
            facets.append(
                _Combined(criterion="anyOf", subschemas=typed)
                if isinstance(value["type"], list)
                else typed[0]
            )
            typed_families = {_FAMILY_OF_TYPE.get(name) for name in names}
        for family, keywords in dialect.family_keywords.items():
            if family not in typed_families and any(_constrains(key, value, dialect) for key in keywords):
                facets.append(self._typed(family, value, resolver, dialect))
        if dialect.year >= 7 and not {"if", "then", "else"}.isdisjoint(value):
            present = {key: read(value[key]) for key in ("if", "then", "else") if key in value}
            facets.append(
                _Conditional(
                    if_schema=present.get("if"),
                    then_schema=present.get("then"),
                    else_schema=present.get("else"),
                )
            )
        if not facets:
            return _Empty()
        return facets[0] if len(facets) == 1 else _Combined(criterion="allOf", subschemas=facets)

    def _reference(self, ref: object, resolver: referencing.Resolver, dialect: _Dialect) -> _Ref:
        if not isinstance(ref, str):
            raise InvalidSchema(f"$ref {ref!r} is not a string")
        try:
            resolved = resolver.lookup(ref)
        except (referencing.exceptions.Unresolvable, ValueError, TypeError):
            # ValueError: a malformed URI, or a pointer into an array by a name; TypeError: into a string
            raise InvalidSchema(f"unknown reference {ref!r}") from None
        node = _Ref(ref=ref)
        self._unread.append((node, resolved, _target_dialect(resolved, dialect)))
        return node

    def _typed(self, name: str, value: dict, resolver: referencing.Resolver, dialect: _Dialect) -> _Schema:
        """The schema of one type (or family of keywords), from the keywords of that kind."""
        if name == "string":
            return _String(
                min_length=value.get("minLength"),
                max_length=value.get("maxLength"),
                pattern=value.get("pattern"),
            )
        if name in ("number", "integer"):
            exclusive = {} if dialect.year == 4 else value  # draft 4's exclusive* are booleans, not limits
            return _Number(
                integer=name == "integer",
                minimum=value.get("minimum"),
                maximum=value.get("maximum"),
                exclusive_minimum=exclusive.get("exclusiveMinimum"),
                exclusive_maximum=exclusive.get("exclusiveMaximum"),
                multiple_of=value.get("multipleOf"),
            )
        if name == "array":
            return self._array(value, resolver, dialect)
        if name == "object":
            return self._object(value, resolver, dialect)
        return _Boolean() if name == "boolean" else _Null()

    def _object(self, value: dict, resolver: referencing.Resolver, dialect: _Dialect) -> _Object:
        def read(child: object) -> _Schema:
            return self.read(child, resolver, dialect)

        schema = _Object(
            properties={name: read(each) for name, each in value.get("properties", {}).items()},
            required=frozenset(value.get("required", ())),
            min_properties=value.get("minProperties"),
            max_properties=value.get("maxProperties"),
        )
        additional = value.get("additionalProperties", True)
        if isinstance(additional, bool):
            schema.additional_allowed = additional
        else:
            schema.additional = read(additional)
        for pattern, each in value.get("patternProperties", {}).items():
            schema.pattern_properties.append((_regex(pattern), read(each)))
        if dialect.year <= 7:
            for name, dependency in value.get("dependencies", {}).items():
                if isinstance(dependency, list):
                    schema.property_dependencies[name] = frozenset(dependency)
                else:
                    schema.schema_dependencies[name] = read(dependency)
        else:
            for name, dependency in value.get("dependentRequired", {}).items():
                schema.property_dependencies[name] = frozenset(dependency)
            for name, dependency in value.get("dependentSchemas", {}).items():
                schema.schema_dependencies[name] = read(dependency)
            if "unevaluatedProperties" in value:
                schema.unevaluated = read(value["unevaluatedProperties"])
        if "propertyNames" in value and dialect.year >= 6:
            schema.property_names = read(value["propertyNames"])
        return schema

    def _array(self, value: dict, resolver: referencing.Resolver, dialect: _Dialect) -> _Array:
        def read(child: object) -> _Schema:
            return self.read(child, resolver, dialect)

        schema = _Array(
            min_items=value.get("minItems"),
            max_items=value.get("maxItems"),
            unique_items=value.get("uniqueItems", False),
        )
        items = value.get("items")
        if isinstance(items, list):  # a tuple, before 2020-12
            schema.prefix_items = [read(each) for each in items]
        elif dialect.year == 2020 and "prefixItems" in value:
            schema.prefix_items = [read(each) for each in value["prefixItems"]]
        if dialect.year >= 2019 and isinstance(items, bool):
            # From 2019-09 on Confluent reads `items: false` as a closed tuple and `items: true` as nothing.
            schema.additional_allowed = items
        elif isinstance(items, dict | bool):
            if dialect.year == 2020 and schema.prefix_items:
                schema.additional = read(items)  # 2020-12's items after prefixItems
            else:
                schema.items = read(items)
        additional = value.get("additionalItems", True) if dialect.year <= 2019 else True
        if isinstance(additional, bool):
            schema.additional_allowed = schema.additional_allowed and additional
        else:
            schema.additional = read(additional)
        if dialect.year >= 2019 and "unevaluatedItems" in value:
            schema.unevaluated = read(value["unevaluatedItems"])
        if "contains" in value and dialect.year >= 6:
            schema.contains = read(value["contains"])
            if dialect.year >= 2019:  # minContains and maxContains only count beside contains
                schema.min_contains = value.get("minContains", 1)
                schema.max_contains = value.get("maxContains")
        return schema


_FAMILY_OF_TYPE = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "array": "array",
    "object": "object",
}


def _constrains(keyword: str, value: dict, dialect: _Dialect) -> bool:
    # From 2019-09 on Confluent reads properties and patternProperties entry by entry: empty, they say
    # nothing.
    if dialect.year >= 2019 and keyword in ("properties", "patternProperties"):
        return bool(value.get(keyword))
    return keyword in value


def _regex(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise InvalidSchema(f"patternProperties {pattern!r} is not a regular expression: {error}") from None


def _target_dialect(resolved: referencing.Resolved, inherited: _Dialect) -> _Dialect:
    """A referenced document is read in the dialect its own `$schema` names, else in the referrer's."""
    try:
        document = resolved.resolver.lookup("").contents
    except (referencing.exceptions.Unresolvable, ValueError):
        return inherited
    return _dialect_of(document, inherited)


# ---------------------------------------------------------------------------------------------------------
# Comparing two models: original (the writer's) against update (the reader's)

_Path = tuple[str, ...]
_Difference = tuple[_Path, str]
_Pair = tuple[_Schema, _Schema]


def _compare(original: _Schema, update: _Schema) -> list[_Difference]:
    # A recursive schema compares pairs that are already being compared: such a cycle is assumed compatible,
    # and pairs are memoized so schemas with many references stay polynomial. A memoized result may then
    # rest on an assumption that turned out false, so compare again, this time giving each pair found
    # incompatible its real differences in cycles, until the incompatible pairs no longer change.
    known_incompatible: dict[_Pair, list[_Difference]] = {}
    while True:
        comparison = _Comparison(known_incompatible)
        differences = comparison.schemas(original, update)
        incompatible = comparison.incompatible_pairs()
        if not comparison.assumed_compatible_cycle or incompatible.keys() == known_incompatible.keys():
            return differences
        known_incompatible = incompatible


def _compatible(differences: Iterable[_Difference]) -> bool:
    return all(kind in _COMPATIBLE for _, kind in differences)


def _under(prefix: _Path, differences: Iterable[_Difference]) -> list[_Difference]:
    return [(prefix + path, kind) for path, kind in differences]


def _pointer(path: Iterable[object]) -> str:
    return "#/" + "/".join(str(each).replace("~", "~0").replace("/", "~1") for each in path)


_ANYTHING = _Empty()


def _dereferenced(schema: _Schema) -> _Schema:
    seen = set()
    while isinstance(schema, _Ref):
        if id(schema) in seen:
            return _ANYTHING  # references that only refer to each other constrain nothing
        seen.add(id(schema))
        schema = schema.target
    return schema


class _Comparison:
    """One pass over two models; each method returns differences with paths relative to the pair given."""

    def __init__(self, known_incompatible: dict[_Pair, list[_Difference]]):
        self._known_incompatible = known_incompatible
        self._memo: dict[_Pair, list[_Difference]] = {}
        self._in_progress: set[_Pair] = set()
        self.assumed_compatible_cycle = False
        self._by_type: dict[type, Callable[[Any, Any], list[_Difference]]] = {
            _String: self._strings,
            _Number: self._numbers,
            _Const: self._consts,
            _Enum: self._enums,
            _Combined: self._combined,
            _Not: self._nots,
            _Object: self._objects,
            _Array: self._arrays,
        }

    def incompatible_pairs(self) -> dict[_Pair, list[_Difference]]:
        return {pair: found for pair, found in self._memo.items() if not _compatible(found)}

    def schemas(self, original: _Schema | None, update: _Schema | None) -> list[_Difference]:
        if original is None or update is None:
            if original is update:
                return []
            return [((), "SCHEMA_ADDED" if original is None else "SCHEMA_REMOVED")]
        pair = (_dereferenced(original), _dereferenced(update))
        if pair in self._memo:
            return self._memo[pair]
        if pair in self._in_progress:
            if pair in self._known_incompatible:
                return self._known_incompatible[pair]
            self.assumed_compatible_cycle = True
            return []
        self._in_progress.add(pair)
        try:
            found = self._types(*pair)
        finally:
            self._in_progress.discard(pair)
        self._memo[pair] = found
        return found

    def _types(self, original: _Schema, update: _Schema) -> list[_Difference]:
        # A plain schema against a combined one: the writer's values fit when they fit one branch of the
        # reader's anyOf/oneOf, and the reader takes all values of the writer's allOf when it takes one
        # branch's.
        if isinstance(update, _Combined) and not isinstance(original, _Combined):
            if len(update.subschemas) == 1:
                found = self.schemas(original, update.subschemas[0])
                if _compatible(found):
                    return found
            elif update.criterion != "allOf":
                for branch in update.subschemas:
                    found = self.schemas(original, branch)
                    if _compatible(found):
                        return [*found, ((), "SUM_TYPE_EXTENDED")]
        elif isinstance(original, _Combined) and not isinstance(update, _Combined):
            if len(original.subschemas) == 1:
                found = self.schemas(original.subschemas[0], update)
                if _compatible(found):
                    return found
            elif original.criterion == "allOf":
                for branch in original.subschemas:
                    found = self.schemas(branch, update)
                    if _compatible(found):
                        return [*found, ((), "PRODUCT_TYPE_NARROWED")]
        if type(original) is not type(update):
            if isinstance(original, _False) or isinstance(update, _Empty):
                return []
            if original.connect_type == update.connect_type == "bytes":
                return []  # Kafka Connect's two forms of bytes
            return [((), "TYPE_CHANGED")]
        found = []
        for kind, attribute in (
            ("ID_CHANGED", "id"),
            ("TITLE_CHANGED", "title"),
            ("DESCRIPTION_CHANGED", "description"),
            ("DEFAULT_CHANGED", "default"),
        ):
            if getattr(original, attribute) != getattr(update, attribute):
                found.append(((), kind))
        compare = self._by_type.get(type(original))
        return found + compare(original, update) if compare else found

    def _strings(self, original: _String, update: _String) -> list[_Difference]:
        found = _bound("maxLength", "MAX_LENGTH", original.max_length, update.max_length)
        found += _bound("minLength", "MIN_LENGTH", original.min_length, update.min_length)
        if original.pattern != update.pattern:
            if original.pattern is None:
                found.append((("pattern",), "PATTERN_ADDED"))
            else:
                found.append(
                    (("pattern",), "PATTERN_REMOVED" if update.pattern is None else "PATTERN_CHANGED")
                )
        return found

    def _numbers(self, original: _Number, update: _Number) -> list[_Difference]:
        found = _bound("maximum", "MAXIMUM", original.maximum, update.maximum)
        found += _bound("minimum", "MINIMUM", original.minimum, update.minimum)
        found += _bound(
            "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", original.exclusive_maximum, update.exclusive_maximum
        )
        found += _bound(
            "exclusiveMinimum", "EXCLUSIVE_MINIMUM", original.exclusive_minimum, update.exclusive_minimum
        )
        found += _multiple_of(original.multiple_of, update.multiple_of)
        if original.integer != update.integer:
            found.append(((), "TYPE_EXTENDED" if original.integer else "TYPE_NARROWED"))
        return found

    def _consts(self, original: _Const, update: _Const) -> list[_Difference]:
        return [] if original.value == update.value else [(("const",), "ENUM_ARRAY_CHANGED")]

    def _enums(self, original: _Enum, update: _Enum) -> list[_Difference]:
        if original.values == update.values:
            return []
        if update.values > original.values:
            return [(("enum",), "ENUM_ARRAY_EXTENDED")]
        return [
            (("enum",), "ENUM_ARRAY_NARROWED" if update.values < original.values else "ENUM_ARRAY_CHANGED")
        ]

    def _nots(self, original: _Not, update: _Not) -> list[_Difference]:
        # The reader's `not` takes all the writer's values when it excludes no more than the writer's did.
        reversed_ = self.schemas(update.negated, original.negated)
        return [(("not",), "NOT_TYPE_NARROWED" if _compatible(reversed_) else "NOT_TYPE_EXTENDED")]

    def _combined(self, original: _Combined, update: _Combined) -> list[_Difference]:
        found = []
        if original.criterion != update.criterion:
            single_original, single_update = len(original.subschemas) == 1, len(update.subschemas) == 1
            if (
                update.criterion == "anyOf"
                or (single_original and (single_update or update.criterion == "oneOf"))
                or (single_update and original.criterion == "allOf")
            ):
                found.append(((), "COMBINED_TYPE_EXTENDED"))
            else:
                return [((), "COMBINED_TYPE_CHANGED")]
        originals, updates = _distinct(original.subschemas), _distinct(update.subschemas)
        if len(originals) < len(updates):
            found.append(
                ((), "PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
            )
        elif len(originals) > len(updates):
            found.append(
                ((), "PRODUCT_TYPE_NARROWED" if original.criterion == "allOf" else "SUM_TYPE_NARROWED")
            )
        # Each writer branch needs its own compatible reader branch (or the other way round, whichever side
        # has fewer): a maximum matching over the compatible pairs says whether there are enough.
        compatible_pairs = {}
        for i, original_branch in enumerate(originals):
            for j, update_branch in enumerate(updates):
                pair_found = self.schemas(original_branch, update_branch)
                if _compatible(pair_found):
                    compatible_pairs[i, j] = _under((original.criterion, str(i)), pair_found)
        matching = _maximum_matching(compatible_pairs)
        for pair in matching:
            found += compatible_pairs[pair]
        if len(matching) < min(len(originals), len(updates)):
            found.append(((), "COMBINED_TYPE_SUBSCHEMAS_CHANGED"))
        return found

    def _objects(self, original: _Object, update: _Object) -> list[_Difference]:
        found = []
        for name in original.properties:
            if name not in update.properties:
                continue
            was, now = name in original.required, name in update.required
            if was and not now:
                found.append((("required", name), "REQUIRED_ATTRIBUTE_REMOVED"))
            elif now and not was:
                with_default = update.properties[name].default is not _ABSENT
                found.append(
                    (
                        ("required", name),
                        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                        if with_default
                        else "REQUIRED_ATTRIBUTE_ADDED",
                    )
                )
        for name in _union(original.properties, update.properties):
            found += _under(("properties", name), self._property(original, update, name))
        found += _under(("dependencies",), self._dependencies(original, update))
        found += _under(("additionalProperties",), self._additional(original, update, "PROPERTIES"))
        found += _under(("unevaluatedProperties",), self._unevaluated(original, update, "PROPERTIES"))
        found += _bound("maxProperties", "MAX_PROPERTIES", original.max_properties, update.max_properties)
        found += _bound("minProperties", "MIN_PROPERTIES", original.min_properties, update.min_properties)
        return found

    def _property(self, original: _Object, update: _Object, name: str) -> list[_Difference]:
        before, after = original.properties.get(name), update.properties.get(name)
        if before is not None and after is not None:
            return self.schemas(before, after)
        if after is None:
            # The writer's values of the property become the reader's extra properties.
            if _open(update):
                return [((), "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")]
            covering = _partially_open_schema(update, name)
            if covering is not None:
                return self._covered(before, covering, "PROPERTY_REMOVED")
            if isinstance(before, _False):
                return [((), "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")]
            return [((), "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")]
        # The writer may have written the new property as an extra property: of any value (open model), or
        # of the schema its extra properties have (partially open).
        required, with_default = name in update.required, after.default is not _ABSENT
        if _open(original):
            if isinstance(after, _Empty):
                return [((), "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")]
            if required:
                if with_default:
                    return [((), "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL")]
                return [((), "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")]
            return [((), "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")]
        covering = _partially_open_schema(original, name)
        found = [] if covering is None else self._covered(covering, after, "PROPERTY_ADDED")
        if required:
            if with_default:
                return [*found, ((), "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL")]
            return [*found, ((), "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")]
        return [*found, ((), "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")]

    def _covered(self, original: _Schema, update: _Schema, change: str) -> list[_Difference]:
        """A property or item on one side only, against the schema of the other side's extra ones."""
        found = self.schemas(original, update)
        verdict = "IS_COVERED" if _compatible(found) else "NOT_COVERED"
        return [*found, ((), f"{change}_{verdict}_BY_PARTIALLY_OPEN_CONTENT_MODEL")]

    def _dependencies(self, original: _Object, update: _Object) -> list[_Difference]:
        found = []
        for name in _union(original.property_dependencies, update.property_dependencies):
            before, after = original.property_dependencies.get(name), update.property_dependencies.get(name)
            if after is None:
                found.append(((name,), "DEPENDENCY_ARRAY_REMOVED"))
            elif before is None:
                found.append(((name,), "DEPENDENCY_ARRAY_ADDED"))
            elif before != after:
                change = "EXTENDED" if after > before else "NARROWED" if after < before else "CHANGED"
                found.append(((name,), f"DEPENDENCY_ARRAY_{change}"))
        for name in _union(original.schema_dependencies, update.schema_dependencies):
            before, after = original.schema_dependencies.get(name), update.schema_dependencies.get(name)
            if after is None:
                found.append(((name,), "DEPENDENCY_SCHEMA_REMOVED"))
            elif before is None:
                found.append(((name,), "DEPENDENCY_SCHEMA_ADDED"))
            else:
                found += _under((name,), self.schemas(before, after))
        return found

    def _additional(
        self, original: _Object | _Array, update: _Object | _Array, what: str
    ) -> list[_Difference]:
        """additionalProperties or additionalItems."""
        if original.additional_allowed != update.additional_allowed:
            return [
                (
                    (),
                    f"ADDITIONAL_{what}_ADDED" if update.additional_allowed else f"ADDITIONAL_{what}_REMOVED",
                )
            ]
        if original.additional is None and update.additional is not None:
            return [((), f"ADDITIONAL_{what}_NARROWED")]
        if original.additional is not None and update.additional is None:
            return [((), f"ADDITIONAL_{what}_EXTENDED")]
        return self.schemas(original.additional, update.additional)

    def _unevaluated(
        self, original: _Object | _Array, update: _Object | _Array, what: str
    ) -> list[_Difference]:
        """unevaluatedProperties or unevaluatedItems: none at all counts as true, and true as a schema."""
        before, after = original.unevaluated, update.unevaluated
        if before is None and after is None:
            return []
        if before is None:
            change = "REMOVED" if isinstance(after, _False) else "NARROWED"
        elif after is None:
            change = "ADDED" if isinstance(before, _False) else "EXTENDED"
        elif isinstance(before, _False) != isinstance(after, _False):
            change = "ADDED" if isinstance(before, _False) else "REMOVED"
        elif isinstance(before, _Empty) != isinstance(after, _Empty):
            change = "NARROWED" if isinstance(before, _Empty) else "EXTENDED"
        else:
            return self.schemas(before, after)
        return [((), f"UNEVALUATED_{what}_{change}")]

    def _arrays(self, original: _Array, update: _Array) -> list[_Difference]:
        found = _under(("items",), self.schemas(original.items, update.items))
        shared = min(len(original.prefix_items), len(update.prefix_items))
        for index, (before, after) in enumerate(
            zip(original.prefix_items, update.prefix_items, strict=False)
        ):
            found += _under(("items", str(index)), self.schemas(before, after))
        for index in range(shared, len(original.prefix_items)):
            found += _under(("items", str(index)), self._item_removed(original.prefix_items[index], update))
        for index in range(shared, len(update.prefix_items)):
            found += _under(("items", str(index)), self._item_added(original, update.prefix_items[index]))
        found += _under(("additionalItems",), self._additional(original, update, "ITEMS"))
        found += _under(("unevaluatedItems",), self._unevaluated(original, update, "ITEMS"))
        found += _bound("maxItems", "MAX_ITEMS", original.max_items, update.max_items)
        found += _bound("minItems", "MIN_ITEMS", original.min_items, update.min_items)
        if original.unique_items != update.unique_items:
            found.append(
                (("uniqueItems",), "UNIQUE_ITEMS_REMOVED" if original.unique_items else "UNIQUE_ITEMS_ADDED")
            )
        found += _bound("maxContains", "MAX_CONTAINS", original.max_contains, update.max_contains)
        found += _bound("minContains", "MIN_CONTAINS", original.min_contains, update.min_contains)
        return found

    def _item_removed(self, before: _Schema, update: _Array) -> list[_Difference]:
        if _open(update):
            return [((), "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")]
        covering = _partially_open_schema(update)
        if covering is not None:
            return self._covered(before, covering, "ITEM_REMOVED")
        if isinstance(before, _False):
            return [((), "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")]
        return [((), "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")]

    def _item_added(self, original: _Array, after: _Schema) -> list[_Difference]:
        if _open(original):
            if isinstance(after, _Empty):
                return [((), "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")]
            return [((), "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")]
        covering = _partially_open_schema(original)
        if covering is not None:
            return self._covered(covering, after, "ITEM_ADDED")
        return [((), "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")]


def _open(schema: _Object | _Array) -> bool:
    """An open content model takes extra properties (items) of any value."""
    if not schema.additional_allowed or schema.additional is not None:
        return False
    if isinstance(schema, _Object) and schema.pattern_properties:
        return False
    return schema.unevaluated is None or isinstance(schema.unevaluated, _Empty)


def _partially_open_schema(schema: _Object | _Array, name: str | None = None) -> _Schema | None:
    """The schema that extra property `name` (or extra items) must match, when one does."""
    if isinstance(schema, _Object):
        for pattern, each in schema.pattern_properties:
            if pattern.search(name):
                return each
    if schema.additional is not None:
        return schema.additional
    if schema.additional_allowed and not isinstance(schema.unevaluated, _False | _Empty):
        return schema.unevaluated
    return None


def _bound(keyword: str, kind: str, before: float | None, after: float | None) -> list[_Difference]:
    """A numeric keyword added, removed, increased or decreased: e.g. ("maxLength", "MAX_LENGTH_ADDED")."""
    if before == after:
        return []
    if before is None:
        change = "ADDED"
    elif after is None:
        change = "REMOVED"
    else:
        change = "INCREASED" if before < after else "DECREASED"
    return [((keyword,), f"{kind}_{change}")]


def _multiple_of(before: float | None, after: float | None) -> list[_Difference]:
    if before is None and after is None:
        return []
    if before is None or after is None:
        return [(("multipleOf",), "MULTIPLE_OF_ADDED" if before is None else "MULTIPLE_OF_REMOVED")]
    # Exact decimal arithmetic, so 0.1 divides 0.3 (the meta-schema makes both positive).
    before_exact, after_exact = Fraction(str(before)), Fraction(str(after))
    if before_exact == after_exact:
        return []
    if after_exact % before_exact == 0:
        return [(("multipleOf",), "MULTIPLE_OF_EXPANDED")]
    if before_exact % after_exact == 0:
        return [(("multipleOf",), "MULTIPLE_OF_REDUCED")]
    return [(("multipleOf",), "MULTIPLE_OF_CHANGED")]


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


def _distinct(schemas: list[_Schema]) -> list[_Schema]:
    by_fingerprint = {}
    for each in schemas:
        by_fingerprint.setdefault(each.fingerprint, each)
    return list(by_fingerprint.values())


def _maximum_matching(edges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """A maximum matching of a bipartite graph given by its (left, right) edges (augmenting paths)."""
    neighbours: dict[int, list[int]] = {}
    for left, right in edges:
        neighbours.setdefault(left, []).append(right)
    matched_to: dict[int, int] = {}  # right -> left

    def augment(left: int, visited: set[int]) -> bool:
        for right in neighbours[left]:
            if right not in visited:
                visited.add(right)
                if right not in matched_to or augment(matched_to[right], visited):
                    matched_to[right] = left
                    return True
        return False

    for left in neighbours:
        augment(left, set())
    return [(left, right) for right, left in matched_to.items()]
