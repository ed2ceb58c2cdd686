"""What every schema format (Avro, JSON Schema, Protobuf) offers the registry.

A format module has `parse(text, references) -> ParsedSchema`, raising InvalidSchema with a one-line reason.
`references` maps each reference name (an Avro full name, a JSON Schema `$ref` URL, a Protobuf import path)
to the referenced schema's text, for every reference the schema needs, transitively.

Compatibility is always asked as "can `reader` read what `writer` wrote?": BACKWARD checks the new schema
as reader of each old one, FORWARD the old ones as readers of the new, FULL both (compatibility.py).
"""

from __future__ import annotations

from typing import Protocol


class InvalidSchema(ValueError):
    """The schema text does not parse, is not a valid schema, or needs a reference it was not given."""


class ParsedSchema(Protocol):
    schema_type: str  # "AVRO", "JSON" or "PROTOBUF", as Confluent names them

    def canonical(self) -> str:
        """The text stored in `_schemas` and answered by the API (Confluent's canonical string of the schema)."""

    def normalized(self) -> str:
        """A text equal for schemas that differ only in form (whitespace, key order, shorthand): what
        `?normalize=true` registers and looks up."""

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with this schema; empty when it can."""
