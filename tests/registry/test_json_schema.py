"""The JSON Schema format: parsing, stored forms, and a corpus of Confluent's compatibility rules.

Each corpus case names a writer's schema, a reader's schema, whether the reader can read what the writer wrote
(Confluent's BACKWARD check with the reader as the new schema), and every difference Confluent's SchemaDiff
finds between them, compatible ones included. Cases run in draft 7 and, where marked, also in 2020-12, draft 4
and others: the dialect is set by adding `$schema` to both documents.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.registry.json_schema import parse
from odradek.registry.schema_types import InvalidSchema

DRAFT_4 = "http://json-schema.org/draft-04/schema#"
DRAFT_6 = "http://json-schema.org/draft-06/schema#"
DRAFT_7 = "http://json-schema.org/draft-07/schema#"
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"
_DIALECT_URLS = {4: DRAFT_4, 6: DRAFT_6, 7: DRAFT_7, 2019: DRAFT_2019, 2020: DRAFT_2020}

ALL = (7, 2020, 4)
MODERN = (7, 2020)


def case(name, writer, reader, compatible, *differences, dialects=(7,)):
    return [
        pytest.param(dialect, writer, reader, compatible, set(differences), id=f"{name}-{dialect}")
        for dialect in dialects
    ]


def obj(properties, **keywords):
    return {"type": "object", "properties": properties, **keywords}


STRING, NUMBER, INTEGER = {"type": "string"}, {"type": "number"}, {"type": "integer"}

CORPUS = [
    # Types
    *case(
        "same schema",
        obj({"a": STRING}, required=["a"]),
        obj({"a": STRING}, required=["a"]),
        True,
        dialects=ALL,
    ),
    *case("string to integer", STRING, INTEGER, False, "#/: TYPE_CHANGED", dialects=ALL),
    *case("integer widened to number", INTEGER, NUMBER, True, "#/: TYPE_EXTENDED", dialects=ALL),
    *case("number narrowed to integer", NUMBER, INTEGER, False, "#/: TYPE_NARROWED", dialects=ALL),
    *case(
        "nested integer widened",
        obj({"age": INTEGER}),
        obj({"age": NUMBER}),
        True,
        "#/properties/age: TYPE_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "nested number narrowed",
        obj({"age": NUMBER}),
        obj({"age": INTEGER}),
        False,
        "#/properties/age: TYPE_NARROWED",
        dialects=ALL,
    ),
    *case(
        "type list widened",
        STRING,
        {"type": ["string", "null"]},
        True,
        "#/: SUM_TYPE_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "type list narrowed",
        {"type": ["string", "null"]},
        STRING,
        False,
        "#/: TYPE_CHANGED",
        dialects=MODERN,
    ),
    *case("anything read by the empty schema", obj({"a": STRING}), {}, True, dialects=ALL),
    *case("the empty schema read by a typed one", {}, STRING, False, "#/: TYPE_CHANGED", dialects=ALL),
    *case("false read by anything", False, STRING, True),
    *case("true read by false", True, False, False, "#/: TYPE_CHANGED"),
    *case(
        "annotations change freely",
        {"type": "string", "title": "a", "description": "b", "default": "x", "$id": "urn:one"},
        {"type": "string", "title": "c", "description": "d", "default": "y", "$id": "urn:two"},
        True,
        "#/: TITLE_CHANGED",
        "#/: DESCRIPTION_CHANGED",
        "#/: DEFAULT_CHANGED",
        "#/: ID_CHANGED",
    ),
    *case(
        "Kafka Connect bytes in either form",
        {"type": "string", "connect.type": "bytes"},
        {"type": "array", "connect.type": "bytes"},
        True,
        dialects=MODERN,
    ),
    # Properties and content models
    *case(
        "optional property added to an open model",
        obj({"a": STRING}),
        obj({"a": STRING, "b": NUMBER}),
        False,
        "#/properties/b: OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "required property added to an open model",
        obj({"a": STRING}),
        obj({"a": STRING, "b": NUMBER}, required=["b"]),
        False,
        "#/properties/b: REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
        dialects=MODERN,
    ),
    *case(
        "property with an empty schema added to an open model",
        obj({"a": STRING}),
        obj({"a": STRING, "b": {}}),
        True,
        "#/properties/b: PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "property removed from an open model",
        obj({"a": STRING, "b": NUMBER}),
        obj({"a": STRING}),
        True,
        "#/properties/b: PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "optional property added to a closed model",
        obj({"a": STRING}, additionalProperties=False),
        obj({"a": STRING, "b": NUMBER}, additionalProperties=False),
        True,
        "#/properties/b: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "required property added to a closed model",
        obj({"a": STRING}, additionalProperties=False),
        obj({"a": STRING, "b": NUMBER}, additionalProperties=False, required=["b"]),
        False,
        "#/properties/b: REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "required property with a default added to a closed model",
        obj({"a": STRING}, additionalProperties=False),
        obj({"a": STRING, "b": {"type": "number", "default": 0}}, additionalProperties=False, required=["b"]),
        True,
        "#/properties/b: REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "property removed from a closed model",
        obj({"a": STRING, "b": NUMBER}, additionalProperties=False),
        obj({"a": STRING}, additionalProperties=False),
        False,
        "#/properties/b: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "property false removed from a closed model",
        obj({"a": STRING, "b": False}, additionalProperties=False),
        obj({"a": STRING}, additionalProperties=False),
        True,
        "#/properties/b: PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        dialects=MODERN,
    ),
    *case(
        "property added, covered by additionalProperties",
        obj({"a": STRING}, additionalProperties=STRING),
        obj({"a": STRING, "b": STRING}, additionalProperties=STRING),
        True,
        "#/properties/b: PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "#/properties/b: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "property added, not covered by additionalProperties",
        obj({"a": STRING}, additionalProperties=STRING),
        obj({"a": STRING, "b": NUMBER}, additionalProperties=STRING),
        False,
        "#/properties/b: TYPE_CHANGED",
        "#/properties/b: PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "#/properties/b: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        dialects=MODERN,
    ),
    *case(
        "property removed, covered by patternProperties",
        obj({"a": STRING, "I_1": INTEGER}, additionalProperties=False),
        obj({"a": STRING}, additionalProperties=False, patternProperties={"^S_": STRING, "^I_": NUMBER}),
        True,
        "#/properties/I_1: TYPE_EXTENDED",
        "#/properties/I_1: PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        dialects=ALL,
    ),
    *case(
        "property removed, not covered by additionalProperties",
        obj({"a": STRING, "b": NUMBER}, additionalProperties=False),
        obj({"a": STRING}, additionalProperties=STRING),
        False,
        "#/properties/b: TYPE_CHANGED",
        "#/properties/b: PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "#/additionalProperties: ADDITIONAL_PROPERTIES_ADDED",
    ),
    *case(
        "property type changed",
        obj({"a": STRING}),
        obj({"a": {"type": "boolean"}}),
        False,
        "#/properties/a: TYPE_CHANGED",
        dialects=ALL,
    ),
    *case(
        "property name that needs escaping",
        obj({"a/b~c": STRING}),
        obj({"a/b~c": NUMBER}),
        False,
        "#/properties/a~1b~0c: TYPE_CHANGED",
    ),
    *case(
        "required added",
        obj({"a": STRING}),
        obj({"a": STRING}, required=["a"]),
        False,
        "#/required/a: REQUIRED_ATTRIBUTE_ADDED",
        dialects=ALL,
    ),
    *case(
        "required added with a default",
        obj({"a": STRING}),
        obj({"a": {"type": "string", "default": ""}}, required=["a"]),
        True,
        "#/required/a: REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
        "#/properties/a: DEFAULT_CHANGED",
        dialects=ALL,
    ),
    *case(
        "required removed",
        obj({"a": STRING}, required=["a"]),
        obj({"a": STRING}),
        True,
        "#/required/a: REQUIRED_ATTRIBUTE_REMOVED",
        dialects=ALL,
    ),
    *case(
        "additionalProperties false dropped",
        obj({"a": STRING}, additionalProperties=False),
        obj({"a": STRING}),
        True,
        "#/additionalProperties: ADDITIONAL_PROPERTIES_ADDED",
        dialects=ALL,
    ),
    *case(
        "additionalProperties made false",
        obj({"a": STRING}, additionalProperties=True),
        obj({"a": STRING}, additionalProperties=False),
        False,
        "#/additionalProperties: ADDITIONAL_PROPERTIES_REMOVED",
        dialects=ALL,
    ),
    *case(
        "additionalProperties given a schema",
        obj({"a": STRING}),
        obj({"a": STRING}, additionalProperties=NUMBER),
        False,
        "#/additionalProperties: ADDITIONAL_PROPERTIES_NARROWED",
        dialects=ALL,
    ),
    *case(
        "additionalProperties schema dropped",
        obj({"a": STRING}, additionalProperties=NUMBER),
        obj({"a": STRING}),
        True,
        "#/additionalProperties: ADDITIONAL_PROPERTIES_EXTENDED",
        dialects=MODERN,
    ),
    *case(
        "additionalProperties schema changed",
        {"type": "object", "additionalProperties": STRING},
        {"type": "object", "additionalProperties": NUMBER},
        False,
        "#/additionalProperties: TYPE_CHANGED",
        dialects=MODERN,
    ),
    *case(
        "maxProperties decreased, minProperties decreased",
        {"type": "object", "maxProperties": 5, "minProperties": 2},
        {"type": "object", "maxProperties": 4, "minProperties": 1},
        False,
        "#/maxProperties: MAX_PROPERTIES_DECREASED",
        "#/minProperties: MIN_PROPERTIES_DECREASED",
        dialects=ALL,
    ),
    *case(
        "dependency array extended",
        {"dependencies": {"a": ["b"]}},
        {"dependencies": {"a": ["b", "c"]}},
        False,
        "#/dependencies/a: DEPENDENCY_ARRAY_EXTENDED",
        dialects=(7, 4),
    ),
    *case(
        "dependency array narrowed",
        {"dependencies": {"a": ["b", "c"]}},
        {"dependencies": {"a": ["b"]}},
        True,
        "#/dependencies/a: DEPENDENCY_ARRAY_NARROWED",
        dialects=(7, 4),
    ),
    *case(
        "dependentRequired added",
        obj({"a": STRING, "b": STRING}),
        obj({"a": STRING, "b": STRING}, dependentRequired={"a": ["b"]}),
        False,
        "#/dependencies/a: DEPENDENCY_ARRAY_ADDED",
        dialects=(2020, 2019),
    ),
    *case(
        "dependentSchemas removed",
        {"dependentSchemas": {"a": {"required": ["b"]}}},
        {"dependentSchemas": {}},
        True,
        "#/dependencies/a: DEPENDENCY_SCHEMA_REMOVED",
        dialects=(2020,),
    ),
    *case(
        "optional property added under unevaluatedProperties false",
        obj({"a": STRING}, unevaluatedProperties=False),
        obj({"a": STRING, "b": NUMBER}, unevaluatedProperties=False),
        True,
        "#/properties/b: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        dialects=(2020,),
    ),
    *case(
        "unevaluatedProperties false added",
        obj({"a": STRING}),
        obj({"a": STRING}, unevaluatedProperties=False),
        False,
        "#/unevaluatedProperties: UNEVALUATED_PROPERTIES_REMOVED",
        dialects=(2020, 2019),
    ),
    # Enums and consts
    *case(
        "enum extended",
        {"enum": ["red", "green"]},
        {"enum": ["red", "green", "blue"]},
        True,
        "#/enum: ENUM_ARRAY_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "enum narrowed",
        {"enum": ["red", "green"]},
        {"enum": ["red"]},
        False,
        "#/enum: ENUM_ARRAY_NARROWED",
        dialects=ALL,
    ),
    *case("enum changed", {"enum": ["red", 1]}, {"enum": ["red", True]}, False, "#/enum: ENUM_ARRAY_CHANGED"),
    *case(
        "enum dropped from a string",
        {"type": "string", "enum": ["red"]},
        STRING,
        True,
        "#/: PRODUCT_TYPE_NARROWED",
        dialects=ALL,
    ),
    *case(
        "const changed",
        obj({"kind": {"const": "a"}}),
        obj({"kind": {"const": "b"}}),
        False,
        "#/properties/kind/const: ENUM_ARRAY_CHANGED",
        dialects=MODERN,
    ),
    # Numbers
    *case(
        "maximum increased, minimum decreased",
        {"type": "number", "maximum": 10, "minimum": 5},
        {"type": "number", "maximum": 11, "minimum": 4},
        True,
        "#/maximum: MAXIMUM_INCREASED",
        "#/minimum: MINIMUM_DECREASED",
        dialects=ALL,
    ),
    *case(
        "maximum decreased",
        {"type": "number", "maximum": 10},
        {"type": "number", "maximum": 9.5},
        False,
        "#/maximum: MAXIMUM_DECREASED",
        dialects=ALL,
    ),
    *case(
        "minimum added",
        {"type": "integer"},
        {"type": "integer", "minimum": 0},
        False,
        "#/minimum: MINIMUM_ADDED",
        dialects=ALL,
    ),
    *case(
        "bounds removed",
        {"type": "number", "minimum": 0, "maximum": 1},
        {"type": "number"},
        True,
        "#/minimum: MINIMUM_REMOVED",
        "#/maximum: MAXIMUM_REMOVED",
        dialects=ALL,
    ),
    *case(
        "exclusiveMinimum increased",
        {"type": "number", "exclusiveMinimum": 0},
        {"type": "number", "exclusiveMinimum": 1},
        False,
        "#/exclusiveMinimum: EXCLUSIVE_MINIMUM_INCREASED",
        dialects=(*MODERN, 6, 2019),
    ),
    *case(
        "exclusiveMaximum removed",
        {"type": "number", "exclusiveMaximum": 100},
        {"type": "number"},
        True,
        "#/exclusiveMaximum: EXCLUSIVE_MAXIMUM_REMOVED",
        dialects=MODERN,
    ),
    *case(
        "exclusiveMaximum decreased",
        {"type": "number", "exclusiveMaximum": 100},
        {"type": "number", "exclusiveMaximum": 50},
        False,
        "#/exclusiveMaximum: EXCLUSIVE_MAXIMUM_DECREASED",
        dialects=MODERN,
    ),
    # Draft 4's exclusive* are flags on minimum/maximum, which Confluent does not compare.
    *case(
        "draft 4 exclusiveMinimum flag set",
        {"type": "number", "minimum": 0},
        {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        True,
        dialects=(4,),
    ),
    *case(
        "multipleOf reduced",
        {"type": "number", "multipleOf": 10},
        {"type": "number", "multipleOf": 2},
        True,
        "#/multipleOf: MULTIPLE_OF_REDUCED",
        dialects=ALL,
    ),
    *case(
        "multipleOf expanded, exactly in decimals",
        {"type": "number", "multipleOf": 0.1},
        {"type": "number", "multipleOf": 0.3},
        False,
        "#/multipleOf: MULTIPLE_OF_EXPANDED",
        dialects=ALL,
    ),
    *case(
        "multipleOf changed",
        {"type": "number", "multipleOf": 10},
        {"type": "number", "multipleOf": 3},
        False,
        "#/multipleOf: MULTIPLE_OF_CHANGED",
        dialects=ALL,
    ),
    *case(
        "multipleOf equal at another scale",
        {"type": "number", "multipleOf": 0.5},
        {"type": "number", "multipleOf": 0.50},
        True,
    ),
    # Strings
    *case(
        "maxLength decreased, minLength increased",
        {"type": "string", "maxLength": 10, "minLength": 1},
        {"type": "string", "maxLength": 9, "minLength": 2},
        False,
        "#/maxLength: MAX_LENGTH_DECREASED",
        "#/minLength: MIN_LENGTH_INCREASED",
        dialects=ALL,
    ),
    *case(
        "maxLength increased, minLength removed",
        {"type": "string", "maxLength": 10, "minLength": 1},
        {"type": "string", "maxLength": 11},
        True,
        "#/maxLength: MAX_LENGTH_INCREASED",
        "#/minLength: MIN_LENGTH_REMOVED",
        dialects=ALL,
    ),
    *case(
        "maxLength added",
        STRING,
        {"type": "string", "maxLength": 3},
        False,
        "#/maxLength: MAX_LENGTH_ADDED",
        dialects=ALL,
    ),
    *case(
        "pattern added",
        STRING,
        {"type": "string", "pattern": "^[a-z]+$"},
        False,
        "#/pattern: PATTERN_ADDED",
        dialects=ALL,
    ),
    *case(
        "pattern removed",
        {"type": "string", "pattern": "^[a-z]+$"},
        STRING,
        True,
        "#/pattern: PATTERN_REMOVED",
        dialects=ALL,
    ),
    *case(
        "pattern changed",
        {"type": "string", "pattern": "^[a-z]+$"},
        {"type": "string", "pattern": "^[a-z]*$"},
        False,
        "#/pattern: PATTERN_CHANGED",
        dialects=ALL,
    ),
    # Arrays
    *case(
        "items type changed",
        {"type": "array", "items": STRING},
        {"type": "array", "items": NUMBER},
        False,
        "#/items: TYPE_CHANGED",
        dialects=ALL,
    ),
    *case(
        "items schema added",
        {"type": "array"},
        {"type": "array", "items": STRING},
        False,
        "#/items: SCHEMA_ADDED",
        dialects=ALL,
    ),
    *case(
        "items schema removed",
        {"type": "array", "items": STRING},
        {"type": "array"},
        True,
        "#/items: SCHEMA_REMOVED",
        dialects=ALL,
    ),
    *case(
        "minItems increased, maxItems increased",
        {"type": "array", "minItems": 1, "maxItems": 5},
        {"type": "array", "minItems": 2, "maxItems": 6},
        False,
        "#/minItems: MIN_ITEMS_INCREASED",
        "#/maxItems: MAX_ITEMS_INCREASED",
        dialects=ALL,
    ),
    *case(
        "uniqueItems added",
        {"type": "array"},
        {"type": "array", "uniqueItems": True},
        False,
        "#/uniqueItems: UNIQUE_ITEMS_ADDED",
        dialects=ALL,
    ),
    *case(
        "uniqueItems removed",
        {"type": "array", "uniqueItems": True},
        {"type": "array"},
        True,
        "#/uniqueItems: UNIQUE_ITEMS_REMOVED",
        dialects=ALL,
    ),
    *case(
        "tuple item added to a closed tuple",
        {"type": "array", "items": [STRING], "additionalItems": False},
        {"type": "array", "items": [STRING, NUMBER], "additionalItems": False},
        True,
        "#/items/1: ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        dialects=(7, 4, 6, 2019),
    ),
    *case(
        "tuple item added to an open tuple",
        {"type": "array", "items": [STRING]},
        {"type": "array", "items": [STRING, NUMBER]},
        False,
        "#/items/1: ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
        dialects=(7, 4),
    ),
    *case(
        "tuple item removed from a closed tuple",
        {"type": "array", "items": [STRING, NUMBER], "additionalItems": False},
        {"type": "array", "items": [STRING], "additionalItems": False},
        False,
        "#/items/1: ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        dialects=(7, 4),
    ),
    *case(
        "tuple opened",
        {"type": "array", "items": [STRING], "additionalItems": False},
        {"type": "array", "items": [STRING], "additionalItems": True},
        True,
        "#/additionalItems: ADDITIONAL_ITEMS_ADDED",
        dialects=(7, 4),
    ),
    *case(
        "prefix item removed, covered by items",
        {"type": "array", "prefixItems": [STRING, NUMBER], "items": NUMBER},
        {"type": "array", "prefixItems": [STRING], "items": NUMBER},
        True,
        "#/items/1: ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        dialects=(2020,),
    ),
    *case(
        "prefix item added, not covered by items",
        {"type": "array", "prefixItems": [STRING], "items": STRING},
        {"type": "array", "prefixItems": [STRING, NUMBER], "items": STRING},
        False,
        "#/items/1: TYPE_CHANGED",
        "#/items/1: ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        dialects=(2020,),
    ),
    *case(
        "prefix items closed with items false",
        {"type": "array", "prefixItems": [STRING]},
        {"type": "array", "prefixItems": [STRING], "items": False},
        False,
        "#/additionalItems: ADDITIONAL_ITEMS_REMOVED",
        dialects=(2020,),
    ),
    *case(
        "minContains increased",
        {"type": "array", "contains": NUMBER},
        {"type": "array", "contains": NUMBER, "minContains": 2},
        False,
        "#/minContains: MIN_CONTAINS_INCREASED",
        dialects=(2020, 2019),
    ),
    # Combined schemas
    *case(
        "oneOf branch added",
        {"oneOf": [STRING, NUMBER]},
        {"oneOf": [STRING, NUMBER, {"type": "boolean"}]},
        True,
        "#/: SUM_TYPE_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "anyOf branch removed",
        {"anyOf": [STRING, NUMBER]},
        {"anyOf": [STRING]},
        False,
        "#/: SUM_TYPE_NARROWED",
        dialects=ALL,
    ),
    *case(
        "allOf branch added",
        {"allOf": [STRING]},
        {"allOf": [STRING, {"maxLength": 5}]},
        False,
        "#/: PRODUCT_TYPE_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "allOf branch removed",
        {"allOf": [STRING, {"maxLength": 5}]},
        {"allOf": [STRING]},
        True,
        "#/: PRODUCT_TYPE_NARROWED",
        dialects=ALL,
    ),
    *case(
        "oneOf branches reordered",
        {"oneOf": [STRING, NUMBER]},
        {"oneOf": [NUMBER, STRING]},
        True,
        dialects=ALL,
    ),
    *case(
        "oneOf branch changed",
        {"oneOf": [STRING, NUMBER]},
        {"oneOf": [STRING, {"type": "boolean"}]},
        False,
        "#/: COMBINED_TYPE_SUBSCHEMAS_CHANGED",
        dialects=ALL,
    ),
    *case(
        "compatible change inside a oneOf branch",
        {"oneOf": [{"type": "string", "maxLength": 5}, NUMBER]},
        {"oneOf": [{"type": "string", "maxLength": 8}, NUMBER]},
        True,
        "#/oneOf/0/maxLength: MAX_LENGTH_INCREASED",
        dialects=ALL,
    ),
    *case(
        "oneOf to anyOf",
        {"oneOf": [STRING, NUMBER]},
        {"anyOf": [STRING, NUMBER]},
        True,
        "#/: COMBINED_TYPE_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "anyOf to allOf",
        {"anyOf": [STRING, NUMBER]},
        {"allOf": [STRING, NUMBER]},
        False,
        "#/: COMBINED_TYPE_CHANGED",
        dialects=ALL,
    ),
    *case(
        "plain schema into a oneOf",
        {"type": "string", "maxLength": 3},
        {"oneOf": [NUMBER, STRING]},
        True,
        "#/maxLength: MAX_LENGTH_REMOVED",
        "#/: SUM_TYPE_EXTENDED",
        dialects=ALL,
    ),
    *case(
        "plain schema into an allOf of two",
        STRING,
        {"allOf": [STRING, {"maxLength": 3}]},
        False,
        "#/: TYPE_CHANGED",
        dialects=ALL,
    ),
    *case(
        "duplicate branches count once",
        {"allOf": [STRING, STRING]},
        {"allOf": [STRING]},
        True,
        dialects=ALL,
    ),
    *case(
        "not narrowed",
        {"not": NUMBER},
        {"not": INTEGER},
        True,
        "#/not: NOT_TYPE_NARROWED",
        dialects=ALL,
    ),
    *case(
        "not extended",
        {"not": INTEGER},
        {"not": NUMBER},
        False,
        "#/not: NOT_TYPE_EXTENDED",
        dialects=ALL,
    ),
    # References within the document
    *case(
        "moved behind a $ref",
        obj({"home": obj({"street": STRING})}),
        {
            **obj({"home": {"$ref": "#/definitions/address"}}),
            "definitions": {"address": obj({"street": STRING})},
        },
        True,
        dialects=ALL,
    ),
    *case(
        "change behind a $ref",
        {**obj({"home": {"$ref": "#/definitions/address"}}), "definitions": {"address": obj({"n": INTEGER})}},
        {**obj({"home": {"$ref": "#/definitions/address"}}), "definitions": {"address": obj({"n": STRING})}},
        False,
        "#/properties/home/properties/n: TYPE_CHANGED",
        dialects=ALL,
    ),
    # Before 2019-09 keywords beside a $ref are ignored; from 2019-09 on they apply as well (an allOf).
    *case(
        "keyword beside a $ref, ignored",
        {"$ref": "#/definitions/s", "definitions": {"s": STRING}},
        {"$ref": "#/definitions/s", "maxLength": 3, "definitions": {"s": STRING}},
        True,
    ),
    *case(
        "keyword beside a $ref, applied",
        {"$ref": "#/$defs/s", "$defs": {"s": STRING}},
        {"$ref": "#/$defs/s", "maxLength": 3, "$defs": {"s": STRING}},
        False,
        "#/: TYPE_CHANGED",
        dialects=(2020,),
    ),
]


@pytest.mark.parametrize(("dialect", "writer", "reader", "compatible", "differences"), CORPUS)
def test_compatibility(dialect, writer, reader, compatible, differences):
    writer_schema, reader_schema = parse_in(dialect, writer), parse_in(dialect, reader)
    found = reader_schema.differences(writer_schema)
    errors = reader_schema.read_errors(writer_schema)
    assert set(found) == differences
    assert set(errors) <= set(found)
    assert (errors == []) is compatible, errors


def parse_in(dialect, document, references=None):
    if isinstance(document, dict):
        document = {"$schema": _DIALECT_URLS[dialect], **document}
    return parse(json.dumps(document), references or {})


# ---------------------------------------------------------------------------------------------------------
# References to other schemas

ADDRESS = {"type": "object", "properties": {"street": STRING, "number": INTEGER}}


def test_reference_by_its_registered_name():
    schema = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    before = parse(json.dumps(schema), {"address.json": json.dumps(ADDRESS)})
    changed = {**ADDRESS, "properties": {**ADDRESS["properties"], "number": STRING}}
    after = parse(json.dumps(schema), {"address.json": json.dumps(changed)})
    assert after.read_errors(before) == ["#/properties/home/properties/number: TYPE_CHANGED"]
    assert before.read_errors(parse(json.dumps(schema), {"address.json": json.dumps(ADDRESS)})) == []


def test_reference_relative_to_the_root_id_and_into_the_referenced_document():
    schema = {
        "$id": "http://example.com/schemas/person.json",
        "type": "object",
        "properties": {"street": {"$ref": "address.json#/properties/street"}},
    }
    for name in ("address.json", "http://example.com/schemas/address.json"):
        parsed = parse(json.dumps(schema), {name: json.dumps(ADDRESS)})
        assert parsed.read_errors(parse(json.dumps(schema), {name: json.dumps(ADDRESS)})) == []


def test_references_of_references():
    schema = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    address = {"type": "object", "properties": {"country": {"$ref": "country.json"}}}
    references = {"address.json": json.dumps(address), "country.json": json.dumps({"enum": ["FR", "NL"]})}
    before = parse(json.dumps(schema), references)
    after = parse(json.dumps(schema), {**references, "country.json": json.dumps({"enum": ["FR"]})})
    assert after.read_errors(before) == ["#/properties/home/properties/country/enum: ENUM_ARRAY_NARROWED"]


def test_a_referenced_document_is_read_in_its_own_dialect():
    # In draft 7 the maxLength beside the $ref would be ignored; the referenced 2020-12 document applies it.
    schema = {"type": "object", "properties": {"code": {"$ref": "code.json"}}}
    code = {"$schema": DRAFT_2020, "$ref": "#/$defs/text", "maxLength": 3, "$defs": {"text": STRING}}
    before = parse(json.dumps({"type": "object", "properties": {"code": STRING}}), {})
    after = parse(json.dumps(schema), {"code.json": json.dumps(code)})
    assert after.read_errors(before) == ["#/properties/code: TYPE_CHANGED"]


def test_a_reference_to_a_meta_schema_resolves_without_fetching():
    schema = parse(
        json.dumps({"properties": {"inner": {"$ref": "http://json-schema.org/draft-07/schema#"}}}), {}
    )
    assert schema.read_errors(schema) == []


# ---------------------------------------------------------------------------------------------------------
# Recursive schemas

CATEGORY_TREE = {
    "$schema": DRAFT_4,
    "type": "object",
    "properties": {"categories": {"type": "array", "items": {"$ref": "#/definitions/Category"}}},
    "required": ["categories"],
    "definitions": {
        "Category": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/definitions/Category"}},
            },
            "required": ["id", "children"],
        }
    },
}


def test_recursive_schema_against_itself():
    assert parse(json.dumps(CATEGORY_TREE), {}).read_errors(parse(json.dumps(CATEGORY_TREE), {})) == []


def test_change_inside_a_recursive_schema():
    changed = json.loads(json.dumps(CATEGORY_TREE))
    changed["definitions"]["Category"]["properties"]["id"]["type"] = "string"
    errors = parse(json.dumps(changed), {}).read_errors(parse(json.dumps(CATEGORY_TREE), {}))
    assert "#/properties/categories/items/properties/id: TYPE_CHANGED" in errors


def test_self_reference_at_the_root():
    schema = {"type": "object", "properties": {"next": {"$ref": "#"}, "value": INTEGER}}
    widened = {"type": "object", "properties": {"next": {"$ref": "#"}, "value": NUMBER}}
    assert parse(json.dumps(schema), {}).read_errors(parse(json.dumps(schema), {})) == []
    assert parse(json.dumps(widened), {}).read_errors(parse(json.dumps(schema), {})) == []
    # The narrowed value is found again through the cycle, one level down.
    assert parse(json.dumps(schema), {}).read_errors(parse(json.dumps(widened), {})) == [
        "#/properties/next/properties/value: TYPE_NARROWED",
        "#/properties/value: TYPE_NARROWED",
    ]


def test_references_that_only_refer_to_each_other():
    schema = {
        "$ref": "#/definitions/a",
        "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},
    }
    assert parse(json.dumps(schema), {}).read_errors(parse(json.dumps(STRING), {})) == []


def product_catalogue(branches: int, circular_properties: int) -> dict:
    """Products are a oneOf of types whose properties refer back to products: many cycles through oneOf."""
    definitions = {
        "Id": {"type": "object", "properties": {"id": STRING}, "required": ["id"]},
        "Base": {"type": "object", "properties": {"name": STRING}},
        "ProductOrId": {"oneOf": [{"$ref": "#/$defs/Id"}, {"$ref": "#/$defs/Product"}]},
        "Product": {"oneOf": [{"$ref": f"#/$defs/Type{i}"} for i in range(branches)]},
    }
    for i in range(branches):
        properties = {f"ref{p}": {"$ref": "#/$defs/ProductOrId"} for p in range(circular_properties)}
        properties["tag"] = {"type": "string", "const": f"type{i}"}
        definitions[f"Type{i}"] = {
            "$ref": "#/$defs/Base",
            "type": "object",
            "properties": properties,
            "required": ["ref0", "tag"],
        }
    return {"$schema": DRAFT_2020, "$defs": definitions, "$ref": "#/$defs/Product"}


@pytest.mark.timeout(30)
def test_many_cycles_through_oneof_stay_fast():
    catalogue = json.dumps(product_catalogue(12, 5))
    assert parse(catalogue, {}).read_errors(parse(catalogue, {})) == []
    changed = product_catalogue(12, 5)
    changed["$defs"]["Id"]["properties"]["id"] = INTEGER
    assert parse(json.dumps(changed), {}).read_errors(parse(catalogue, {}))


def two_linked_types(first_id: str, second_id: str) -> dict:
    """The root is oneOf[T0, T1]; T0 and T1 link to T2, which links back to T0."""

    def linked(id_type: str, target: str) -> dict:
        return obj({"id": {"type": id_type}, "link": {"oneOf": [{"$ref": f"#/definitions/{target}"}]}})

    return {
        "definitions": {
            "T0": linked(first_id, "T2"),
            "T1": linked(second_id, "T2"),
            "T2": linked("string", "T0"),
        },
        "oneOf": [{"$ref": "#/definitions/T0"}, {"$ref": "#/definitions/T1"}],
    }


def test_a_cycle_assumed_compatible_does_not_hide_an_incompatible_change():
    # Matching T0 to the new T1 looks fine until the cycle through T2 brings back the (T0, T0) pair, whose
    # id changed incompatibly: the writer's T0 values fit neither new branch.
    writer = parse(json.dumps(two_linked_types("integer", "boolean")), {})
    reader = parse(json.dumps(two_linked_types("boolean", "number")), {})
    assert reader.read_errors(writer) == ["#/: COMBINED_TYPE_SUBSCHEMAS_CHANGED"]


# ---------------------------------------------------------------------------------------------------------
# Parsing and the stored forms


def test_schema_type():
    assert parse("{}", {}).schema_type == "JSON"


def test_canonical_is_compact_in_the_given_key_order():
    text = '{\n  "type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"title": "é"}}\n}'
    assert (
        parse(text, {}).canonical()
        == '{"type":"object","properties":{"b":{"type":"string"},"a":{"title":"é"}}}'
    )


def test_canonical_of_boolean_schemas():
    assert parse(" true ", {}).canonical() == "true"
    assert parse("false", {}).canonical() == "false"


def test_normalized_ignores_whitespace_and_key_order():
    first = parse('{"type": "object", "properties": {"b": {"type": "string"}, "a": {"minimum": 1.5}}}', {})
    second = parse('{"properties":{"a":{"minimum":1.5},"b":{"type":"string"}},\n"type":"object"}', {})
    third = parse('{"type": "object", "properties": {"b": {"type": "string"}, "a": {"minimum": 2}}}', {})
    assert first.normalized() == second.normalized()
    assert first.canonical() != second.canonical()
    assert first.normalized() != third.normalized()
    assert first.normalized() == '{"properties":{"a":{"minimum":1.5},"b":{"type":"string"}},"type":"object"}'


def test_the_dialect_is_chosen_by_schema():
    draft_4_exclusive = {"minimum": 0, "exclusiveMinimum": True}
    parse(json.dumps({"$schema": DRAFT_4, **draft_4_exclusive}), {})
    with pytest.raises(InvalidSchema, match="draft-07"):
        parse(json.dumps(draft_4_exclusive), {})  # draft 7 when $schema names none
    parse(json.dumps({"prefixItems": 5}), {})  # not a draft 7 keyword
    with pytest.raises(InvalidSchema, match="2020-12 JSON Schema at #/prefixItems"):
        parse(json.dumps({"$schema": DRAFT_2020, "prefixItems": 5}), {})
    parse(json.dumps({"$schema": "http://example.com/my-own-meta-schema", "type": "string"}), {})


INVALID = [
    pytest.param("{", {}, "not JSON", id="bad JSON"),
    pytest.param('{"type": "string"} x', {}, "not JSON", id="trailing garbage"),
    pytest.param("", {}, "not JSON", id="empty text"),
    pytest.param("NaN", {}, "not JSON", id="NaN"),
    pytest.param('{"maximum": 1e400}', {}, "too large", id="infinite number"),
    pytest.param("[]", {}, "not an array", id="array"),
    pytest.param("123", {}, "not a number", id="number"),
    pytest.param('"string"', {}, "not a string", id="string"),
    pytest.param("null", {}, "not null", id="null"),
    pytest.param('{"type": "nosuch"}', {}, "#/type", id="unknown type"),
    pytest.param('{"minimum": "x"}', {}, "#/minimum", id="non-numeric minimum"),
    pytest.param(
        '{"properties": {"a": {"maxLength": -1}}}', {}, "#/properties/a/maxLength", id="negative maxLength"
    ),
    pytest.param('{"pattern": "("}', {}, "#/pattern", id="bad pattern"),
    pytest.param(
        '{"$ref": "address.json"}', {}, "unknown reference 'address.json'", id="unknown external $ref"
    ),
    pytest.param(
        '{"$ref": "address.json"}', {"other.json": "{}"}, "unknown reference", id="other reference given"
    ),
    pytest.param('{"$ref": "#/definitions/missing"}', {}, "unknown reference", id="pointer to nowhere"),
    pytest.param('{"items": {"$ref": "#nowhere"}}', {}, "unknown reference", id="unknown anchor"),
    pytest.param(
        json.dumps({"$schema": DRAFT_4, "$ref": 5}), {}, "not a string", id="draft 4 non-string $ref"
    ),
    pytest.param(
        '{"$ref": "address.json"}', {"address.json": "{nope"}, "reference 'address.json'", id="bad reference"
    ),
    pytest.param('{"$ref": "a.json"}', {"a.json": '{"$id": "http://[bad"}'}, "malformed", id="malformed $id"),
    pytest.param("[" * 100_000 + "]" * 100_000, {}, "nested too deeply", id="deep JSON"),
    pytest.param('{"items":' * 2000 + "{}" + "}" * 2000, {}, "nested too deeply", id="deep schema"),
]


@pytest.mark.parametrize(("text", "references", "reason"), INVALID)
def test_invalid_schemas(text, references, reason):
    with pytest.raises(InvalidSchema) as raised:
        parse(text, references)
    message = str(raised.value)
    assert reason in message
    assert "\n" not in message


class AvroLike:
    schema_type = "AVRO"


def test_a_writer_of_another_format_cannot_be_read():
    assert parse("{}", {}).read_errors(AvroLike())


# ---------------------------------------------------------------------------------------------------------
# Any document: parse says InvalidSchema or parses, and a parsed schema reads its own data

_KEYWORD_VALUES = {
    "type": st.sampled_from(
        ["string", "integer", "number", "object", "array", "boolean", "null", ["string", "null"], 3]
    ),
    "minimum": st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.text(max_size=2)),
    "maxLength": st.integers(-1, 5),
    "multipleOf": st.sampled_from([0.1, 2, 0, -1]),
    "pattern": st.sampled_from(["^a", "(", "[0-9]+"]),
    "enum": st.lists(st.one_of(st.integers(0, 3), st.booleans(), st.none(), st.text(max_size=2)), max_size=3),
    "const": st.one_of(st.integers(0, 3), st.booleans()),
    "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
    "uniqueItems": st.booleans(),
    "additionalProperties": st.booleans(),
    "$ref": st.sampled_from(["#", "#/definitions/x", "#/properties/a", "other.json", 5]),
    "$schema": st.sampled_from([DRAFT_4, DRAFT_7, DRAFT_2020]),
}


def _schemas(children):
    keywords = st.dictionaries(st.sampled_from(sorted(_KEYWORD_VALUES)), st.none(), max_size=4).flatmap(
        lambda chosen: st.fixed_dictionaries({key: _KEYWORD_VALUES[key] for key in chosen})
    )
    nested = st.fixed_dictionaries(
        {},
        optional={
            "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
            "items": st.one_of(children, st.lists(children, max_size=2)),
            "prefixItems": st.lists(children, max_size=2),
            "anyOf": st.lists(children, max_size=3),
            "allOf": st.lists(children, max_size=2),
            "not": children,
            "definitions": st.fixed_dictionaries({"x": children}),
            "additionalProperties": children,
        },
    )
    return st.tuples(keywords, nested).map(lambda parts: {**parts[0], **parts[1]})


_SCHEMAS = st.recursive(st.one_of(st.booleans(), st.just({})), _schemas, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(_SCHEMAS)
def test_any_document_parses_or_is_invalid_and_reads_itself(document):
    text = json.dumps(document)
    try:
        schema = parse(text, {})
    except InvalidSchema:
        return
    assert schema.read_errors(parse(text, {})) == []
