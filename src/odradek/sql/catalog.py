"""The SQL server's metastore: its streams, tables and persistent queries, rebuilt from the command topic.

Sans-I/O. A source is kept fully resolved (columns, key columns, topic, formats), so replaying the command
topic never needs to re-analyse a statement; a persistent query keeps its statement text and is planned
again when it starts. Every change is a `Command` with a key (`source/NAME` or `query/ID`): the command
topic is compacted, so the latest command per key is the state, and a deletion is a tombstone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from odradek.sql import ast, serde


class CatalogError(ValueError):
    """A name that the catalog does not hold."""


@dataclass(frozen=True)
class SourceColumn:
    name: str
    type: ast.SqlType
    key: bool = False


@dataclass(frozen=True)
class Windowing:
    """How a windowed table's keys are windowed (its key carries the window's bounds)."""

    kind: str  # TUMBLING, HOPPING or SESSION
    size_ms: int | None = None  # TUMBLING and HOPPING


@dataclass(frozen=True)
class DataSource:
    kind: ast.SourceKind
    name: str
    topic: str
    columns: tuple[SourceColumn, ...]
    key_format: str = "KAFKA"
    value_format: str = "JSON"
    timestamp_column: str | None = None
    timestamp_format: str | None = None
    windowing: Windowing | None = None
    properties: dict[str, Any] = field(default_factory=dict)  # the serde's: VALUE_DELIMITER, WRAP_SINGLE_VALUE
    statement: str = ""
    written_by: str | None = None  # the id of the persistent query that writes it (CREATE ... AS SELECT)

    @property
    def key_columns(self) -> tuple[SourceColumn, ...]:
        return tuple(c for c in self.columns if c.key)

    @property
    def value_columns(self) -> tuple[SourceColumn, ...]:
        return tuple(c for c in self.columns if not c.key)

    def column(self, name: str) -> SourceColumn | None:
        return next((c for c in self.columns if c.name == name), None)

    def formats(self, registry: serde.RegistryClient | None) -> tuple[serde.KeyFormat, serde.ValueFormat]:
        """The serde of its keys and values (SerdeError when its columns do not fit its formats)."""
        window = self.windowing.kind if self.windowing else None
        key = serde.key_format(self.key_format, [serde.Column(c.name, c.type) for c in self.key_columns], window,
                               self.properties, registry, self.topic)
        value = serde.value_format(self.value_format, [serde.Column(c.name, c.type) for c in self.value_columns],
                                   self.properties, registry, self.topic)
        return key, value


@dataclass(frozen=True)
class PersistentQuery:
    id: str
    sink: str
    sources: tuple[str, ...]
    statement: str
    offset_reset: str = "latest"  # where its first run starts reading (auto.offset.reset when it was created)


@dataclass(frozen=True)
class Command:
    """One record of the command topic: `value` None deletes the key."""

    key: str
    value: DataSource | PersistentQuery | None


class Catalog:
    def __init__(self) -> None:
        self.sources: dict[str, DataSource] = {}
        self.queries: dict[str, PersistentQuery] = {}
        # The command topic's next offset: numbers the query ids, as ksqlDB numbers them by command. Offsets
        # are never reused, so neither are ids, even after compaction has removed earlier commands.
        self.next_offset = 0

    def apply(self, command: Command, offset: int) -> None:
        self.next_offset = max(self.next_offset, offset + 1)
        kind, _, name = command.key.partition("/")
        table: dict = self.sources if kind == "source" else self.queries
        if command.value is None:
            table.pop(name, None)
        else:
            table[name] = command.value

    def source(self, name: str) -> DataSource:
        found = self.sources.get(name)
        if found is None:
            raise CatalogError(f"{name} does not exist")
        return found

    def readers_of(self, name: str) -> list[PersistentQuery]:
        return [q for q in self.queries.values() if name in q.sources]

    def next_query_id(self, prefix: str, sink: str | None = None) -> str:
        return "_".join(p for p in (prefix, sink, str(self.next_offset)) if p).upper()


# ---------------------------------------------------------------- the command topic's record format


def _type_to_json(t: ast.SqlType) -> Any:
    if isinstance(t, ast.PrimitiveType):
        return t.name
    if isinstance(t, ast.DecimalType):
        return {"decimal": [t.precision, t.scale]}
    if isinstance(t, ast.ArrayType):
        return {"array": _type_to_json(t.element)}
    if isinstance(t, ast.MapType):
        return {"map": [_type_to_json(t.key), _type_to_json(t.value)]}
    if isinstance(t, ast.StructType):
        return {"struct": [[f.name, _type_to_json(f.type)] for f in t.fields]}
    raise TypeError(f"not a column type: {t!r}")


def _type_from_json(data: Any) -> ast.SqlType:
    if isinstance(data, str):
        return ast.PrimitiveType(data)
    if "decimal" in data:
        return ast.DecimalType(*data["decimal"])
    if "array" in data:
        return ast.ArrayType(_type_from_json(data["array"]))
    if "map" in data:
        return ast.MapType(_type_from_json(data["map"][0]), _type_from_json(data["map"][1]))
    return ast.StructType(tuple(ast.StructField(n, _type_from_json(t)) for n, t in data["struct"]))


def encode_command(command: Command) -> tuple[bytes, bytes | None]:
    """The command as a record key and value (JSON)."""
    value = command.value
    if value is None:
        return command.key.encode(), None
    if isinstance(value, DataSource):
        data = asdict(value)
        data["columns"] = [{"name": c.name, "type": _type_to_json(c.type), "key": c.key} for c in value.columns]
        data["type"] = "source"
    else:
        data = asdict(value)
        data["type"] = "query"
    return command.key.encode(), json.dumps(data, separators=(",", ":")).encode()


def decode_command(key: bytes, value: bytes | None) -> Command:
    """The command of a record of the command topic; ValueError for one this version cannot read."""
    text = key.decode()
    if value is None:
        return Command(text, None)
    data = json.loads(value)
    kind = data.pop("type")
    if kind == "source":
        data["columns"] = tuple(SourceColumn(c["name"], _type_from_json(c["type"]), c["key"]) for c in data["columns"])
        if data.get("windowing"):
            data["windowing"] = Windowing(**data["windowing"])
        return Command(text, DataSource(**data))
    if kind == "query":
        data["sources"] = tuple(data["sources"])
        return Command(text, PersistentQuery(**data))
    raise ValueError(f"unknown command type {kind!r}")
