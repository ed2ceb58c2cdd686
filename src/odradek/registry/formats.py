"""The schema formats by Confluent's schemaType name: parse a schema text into a ParsedSchema."""

from __future__ import annotations

from collections.abc import Mapping

from odradek.registry.schema_types import InvalidSchema, ParsedSchema

SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")  # the order GET /schemas/types answers


def parse(schema_type: str, text: str, references: Mapping[str, str]) -> ParsedSchema:
    """The schema, or InvalidSchema with a one-line reason."""
    if schema_type == "AVRO":
        from odradek.registry import avro as module
    elif schema_type == "JSON":
        from odradek.registry import json_schema as module
    elif schema_type == "PROTOBUF":
        from odradek.registry import protobuf as module
    else:
        raise InvalidSchema(f"unknown schemaType {schema_type!r}: expected one of {', '.join(SCHEMA_TYPES)}")
    return module.parse(text, references)
