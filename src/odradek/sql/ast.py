"""The typed AST of the ksqlDB-compatible SQL dialect: frozen dataclasses for statements and expressions.

Names are upper-cased unless they were back-quoted; durations are in milliseconds; sequences are tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

SourceKind = Literal["STREAM", "TABLE"]
PSEUDO_COLUMNS = frozenset({"ROWTIME", "ROWPARTITION", "ROWOFFSET", "WINDOWSTART", "WINDOWEND"})


# ---------------------------------------------------------------- types


class SqlType:
    """Base of the column types."""


@dataclass(frozen=True)
class PrimitiveType(SqlType):
    name: str  # BOOLEAN, INT, BIGINT, DOUBLE, STRING, BYTES, DATE, TIME, TIMESTAMP


@dataclass(frozen=True)
class DecimalType(SqlType):
    precision: int
    scale: int


@dataclass(frozen=True)
class ArrayType(SqlType):
    element: SqlType


@dataclass(frozen=True)
class MapType(SqlType):
    key: SqlType
    value: SqlType


@dataclass(frozen=True)
class StructField:
    name: str
    type: SqlType


@dataclass(frozen=True)
class StructType(SqlType):
    fields: tuple[StructField, ...]


_REST_NAMES = {"STRING": "STRING", "INT": "INTEGER"}
_SQL_NAMES = {"STRING": "VARCHAR"}


def type_text(t: SqlType, rest: bool = False) -> str:
    """A column type as text: as SQL writes it (VARCHAR, INT; DESCRIBE, errors), or with `rest` as ksqlDB's REST
    API names it (STRING, INTEGER, struct fields back-quoted), which ksqlDB's clients parse."""
    names = _REST_NAMES if rest else _SQL_NAMES
    if isinstance(t, PrimitiveType):
        return names.get(t.name, t.name)
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision}, {t.scale})"
    if isinstance(t, ArrayType):
        return f"ARRAY<{type_text(t.element, rest)}>"
    if isinstance(t, MapType):
        return f"MAP<{type_text(t.key, rest)}, {type_text(t.value, rest)}>"
    if isinstance(t, StructType):
        quote = "`" if rest else ""
        return "STRUCT<" + ", ".join(f"{quote}{f.name}{quote} {type_text(f.type, rest)}" for f in t.fields) + ">"
    return repr(t)


# ---------------------------------------------------------------- expressions


class Expression:
    """Base of the expressions."""


@dataclass(frozen=True)
class IntegerLiteral(Expression):
    value: int


@dataclass(frozen=True)
class DecimalLiteral(Expression):
    value: Decimal


@dataclass(frozen=True)
class StringLiteral(Expression):
    value: str


@dataclass(frozen=True)
class BooleanLiteral(Expression):
    value: bool


@dataclass(frozen=True)
class NullLiteral(Expression):
    pass


@dataclass(frozen=True)
class ColumnRef(Expression):
    name: str
    qualifier: str | None = None


@dataclass(frozen=True)
class PseudoColumn(Expression):
    """ROWTIME, ROWPARTITION, ROWOFFSET, WINDOWSTART or WINDOWEND."""

    name: str
    qualifier: str | None = None


@dataclass(frozen=True)
class BinaryArithmetic(Expression):
    op: Literal["+", "-", "*", "/", "%"]
    left: Expression
    right: Expression


@dataclass(frozen=True)
class Negate(Expression):
    operand: Expression


@dataclass(frozen=True)
class Comparison(Expression):
    op: Literal["=", "!=", "<", "<=", ">", ">="]  # <> is normalised to !=
    left: Expression
    right: Expression


@dataclass(frozen=True)
class And(Expression):
    left: Expression
    right: Expression


@dataclass(frozen=True)
class Or(Expression):
    left: Expression
    right: Expression


@dataclass(frozen=True)
class Not(Expression):
    operand: Expression


@dataclass(frozen=True)
class IsNull(Expression):
    operand: Expression
    negated: bool = False


@dataclass(frozen=True)
class Between(Expression):
    operand: Expression
    low: Expression
    high: Expression
    negated: bool = False


@dataclass(frozen=True)
class InList(Expression):
    operand: Expression
    items: tuple[Expression, ...]
    negated: bool = False


@dataclass(frozen=True)
class Like(Expression):
    operand: Expression
    pattern: Expression
    negated: bool = False


@dataclass(frozen=True)
class WhenClause:
    condition: Expression
    result: Expression


@dataclass(frozen=True)
class Case(Expression):
    """CASE [operand] WHEN ... THEN ... [ELSE ...] END; operand is None for the searched form."""

    operand: Expression | None
    whens: tuple[WhenClause, ...]
    else_: Expression | None = None


@dataclass(frozen=True)
class Cast(Expression):
    operand: Expression
    type: SqlType


@dataclass(frozen=True)
class FunctionCall(Expression):
    """name(args); star is True for COUNT(*) (args is then empty)."""

    name: str
    args: tuple[Expression, ...] = ()
    star: bool = False


@dataclass(frozen=True)
class FieldAccess(Expression):
    """operand->field (struct dereference)."""

    operand: Expression
    field: str


@dataclass(frozen=True)
class Subscript(Expression):
    """operand[index] (array index or map key)."""

    operand: Expression
    index: Expression


# ---------------------------------------------------------------- queries


@dataclass(frozen=True)
class AllColumns:
    """`*` or `qualifier.*` in a projection."""

    qualifier: str | None = None


@dataclass(frozen=True)
class SelectItem:
    expression: Expression
    alias: str | None = None


@dataclass(frozen=True)
class SourceRef:
    name: str
    alias: str | None = None


@dataclass(frozen=True)
class Within:
    """A stream-stream join window: records join if other.time is in [time - before, time + after]."""

    before_ms: int
    after_ms: int
    grace_ms: int | None = None


@dataclass(frozen=True)
class Join:
    type: Literal["INNER", "LEFT", "FULL"]
    source: SourceRef
    on: Expression
    within: Within | None = None


class Window:
    """Base of the window specifications."""


@dataclass(frozen=True)
class TumblingWindow(Window):
    size_ms: int
    grace_ms: int | None = None


@dataclass(frozen=True)
class HoppingWindow(Window):
    size_ms: int
    advance_ms: int
    grace_ms: int | None = None


@dataclass(frozen=True)
class SessionWindow(Window):
    gap_ms: int
    grace_ms: int | None = None


class Statement:
    """Base of the statements."""


@dataclass(frozen=True)
class Select(Statement):
    """A query; as a statement of its own it is a push query (EMIT CHANGES) or a pull query (no EMIT)."""

    items: tuple[SelectItem | AllColumns, ...]
    source: SourceRef
    joins: tuple[Join, ...] = ()
    window: Window | None = None
    where: Expression | None = None
    group_by: tuple[Expression, ...] = ()
    partition_by: tuple[Expression, ...] = ()
    having: Expression | None = None
    emit: Literal["CHANGES", "FINAL"] | None = None
    limit: int | None = None


# ---------------------------------------------------------------- statements


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: SqlType
    key: bool = False  # KEY (streams)
    primary_key: bool = False  # PRIMARY KEY (tables)


@dataclass(frozen=True)
class CreateSource(Statement):
    kind: SourceKind
    name: str
    columns: tuple[ColumnDef, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)  # keys upper-cased
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateAsSelect(Statement):
    kind: SourceKind
    name: str
    query: Select
    properties: dict[str, Any] = field(default_factory=dict)
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class InsertIntoSelect(Statement):
    target: str
    query: Select


@dataclass(frozen=True)
class InsertValues(Statement):
    target: str
    columns: tuple[str, ...]  # empty when the statement names no columns
    values: tuple[Expression, ...]


@dataclass(frozen=True)
class Drop(Statement):
    kind: SourceKind
    name: str
    delete_topic: bool = False
    if_exists: bool = False


@dataclass(frozen=True)
class Show(Statement):
    what: Literal["STREAMS", "TABLES", "TOPICS", "QUERIES"]


@dataclass(frozen=True)
class Describe(Statement):
    name: str
    extended: bool = False


@dataclass(frozen=True)
class Explain(Statement):
    """EXPLAIN query_id or EXPLAIN <query>: exactly one of the two is set."""

    query_id: str | None = None
    query: Select | None = None


@dataclass(frozen=True)
class Terminate(Statement):
    """TERMINATE query_id, or TERMINATE ALL (query_id None)."""

    query_id: str | None
    all: bool = False


@dataclass(frozen=True)
class Print(Statement):
    topic: str  # as written (topic names are case-sensitive)
    from_beginning: bool = False
    limit: int | None = None
