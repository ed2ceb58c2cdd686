"""Pull queries: `SELECT ... FROM table [WHERE ...]` answered from the table's materialized view.

No Spark job runs: the WHERE clause and the projection are evaluated here, in Python, over the view's
rows (a key equality is a dictionary-sized scan of memory, answered in milliseconds). They may use
columns, ROWTIME, WINDOWSTART, WINDOWEND, literals, comparisons, IN, BETWEEN, IS NULL, AND, OR and NOT;
anything else is a push query's job.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from odradek.sql import ast
from odradek.sql.catalog import DataSource, SourceColumn
from odradek.sql.materialized import MaterializedTable, TableRow
from odradek.sql.planner import PlanError
from odradek.sql.values import LiteralError, coerce, literal, to_json

_VIEW_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PullResult:
    columns: tuple[SourceColumn, ...]
    rows: list[list[Any]]


def check_pull(select: ast.Select, source: DataSource) -> None:
    if source.kind != "TABLE":
        raise PlanError(f"pull queries read tables; {source.name} is a stream: add EMIT CHANGES for a push query")
    unsupported = [("a join", select.joins), ("WINDOW", select.window), ("GROUP BY", select.group_by),
                   ("PARTITION BY", select.partition_by), ("HAVING", select.having)]
    for what, present in unsupported:
        if present:
            raise PlanError(f"pull queries do not support {what}: add EMIT CHANGES for a push query")


def pull(select: ast.Select, source: DataSource, view: MaterializedTable) -> PullResult:
    check_pull(select, source)
    row_columns = _row_columns(source)
    items: list[tuple[str, ast.Expression]] = []
    for index, item in enumerate(select.items):
        if isinstance(item, ast.AllColumns):
            items += [(c.name, ast.ColumnRef(c.name)) for c in row_columns]
        else:
            expression = item.expression
            name = item.alias or (expression.name if isinstance(expression, ast.ColumnRef | ast.PseudoColumn)
                                  else f"KSQL_COL_{index}")
            items.append((str(name), expression))
    types = {c.name: c.type for c in row_columns}
    evaluate = _Evaluator(types)
    for _, expression in items:
        evaluate.check(expression)
    if select.where is not None:
        evaluate.check(select.where)
    columns = tuple(SourceColumn(name, evaluate.type_of(e), name in {c.name for c in source.key_columns})
                    for name, e in items)
    view.wait_caught_up(_VIEW_TIMEOUT_S)
    rows = []
    for table_row in view.snapshot():
        values = _row_values(source, table_row)
        if select.where is not None and evaluate.value(select.where, values) is not True:
            continue
        rows.append([to_json(evaluate.value(e, values)) for _, e in items])  # as push queries render them
        if select.limit is not None and len(rows) >= select.limit:
            break
    return PullResult(columns, rows)


def _row_columns(source: DataSource) -> list[SourceColumn]:
    columns = list(source.key_columns)
    if source.windowing is not None:
        columns += [SourceColumn("WINDOWSTART", ast.PrimitiveType("BIGINT"), True),
                    SourceColumn("WINDOWEND", ast.PrimitiveType("BIGINT"), True)]
    return columns + list(source.value_columns)


def _row_values(source: DataSource, row: TableRow) -> dict[str, Any]:
    values = dict(zip((c.name for c in source.key_columns), row.key, strict=False))
    values.update(zip((c.name for c in source.value_columns), row.values, strict=False))
    end = row.window_end
    if end is None and row.window_start is not None and source.windowing and source.windowing.size_ms:
        end = row.window_start + source.windowing.size_ms
    values.update(ROWTIME=row.rowtime, WINDOWSTART=row.window_start, WINDOWEND=end)
    return values


_BIGINT = ast.PrimitiveType("BIGINT")
_BOOLEAN = ast.PrimitiveType("BOOLEAN")


class _Evaluator:
    def __init__(self, types: dict[str, ast.SqlType]):
        self.types = {**types, "ROWTIME": _BIGINT}

    def check(self, e: ast.Expression) -> None:
        self.type_of(e)
        for child in _children(e):
            self.check(child)

    def type_of(self, e: ast.Expression) -> ast.SqlType:
        if isinstance(e, ast.ColumnRef | ast.PseudoColumn):
            found = self.types.get(e.name)
            if found is None:
                raise PlanError(f"column '{e.name}' cannot be resolved", e.name)
            return found
        if isinstance(e, ast.Comparison | ast.And | ast.Or | ast.Not | ast.IsNull | ast.InList | ast.Between):
            return _BOOLEAN
        if isinstance(e, ast.NullLiteral | ast.IntegerLiteral | ast.DecimalLiteral | ast.StringLiteral
                      | ast.BooleanLiteral | ast.Negate | ast.Cast):
            try:
                value = literal(e)
            except LiteralError:
                raise PlanError(_UNSUPPORTED) from None
            return {bool: _BOOLEAN, int: _BIGINT, str: ast.PrimitiveType("STRING")}.get(
                type(value), ast.PrimitiveType("DOUBLE"))
        raise PlanError(_UNSUPPORTED, getattr(e, "name", None))

    def value(self, e: ast.Expression, row: dict[str, Any]) -> Any:
        if isinstance(e, ast.ColumnRef | ast.PseudoColumn):
            return row.get(e.name)
        if isinstance(e, ast.And):
            left, right = self.value(e.left, row), self.value(e.right, row)
            return False if left is False or right is False else None if None in (left, right) else True
        if isinstance(e, ast.Or):
            left, right = self.value(e.left, row), self.value(e.right, row)
            return True if left is True or right is True else None if None in (left, right) else False
        if isinstance(e, ast.Not):
            operand = self.value(e.operand, row)
            return None if operand is None else not operand
        if isinstance(e, ast.IsNull):
            return (self.value(e.operand, row) is None) != e.negated
        if isinstance(e, ast.Comparison):
            return _compare(e.op, self.value(e.left, row), self._like(e.right, e.left, row))
        if isinstance(e, ast.InList):
            operand = self.value(e.operand, row)
            if operand is None:
                return None
            found = any(_compare("=", operand, self._like(i, e.operand, row)) for i in e.items)
            return found != e.negated
        if isinstance(e, ast.Between):
            operand = self.value(e.operand, row)
            low, high = self._like(e.low, e.operand, row), self._like(e.high, e.operand, row)
            inside = _compare(">=", operand, low) and _compare("<=", operand, high)
            return None if operand is None else bool(inside) != e.negated
        return literal(e)

    def _like(self, e: ast.Expression, other: ast.Expression, row: dict[str, Any]) -> Any:
        """A literal compared with a column takes the column's type (so '2024-01-01' compares with a DATE)."""
        if isinstance(other, ast.ColumnRef | ast.PseudoColumn) and not isinstance(e, ast.ColumnRef | ast.PseudoColumn):
            try:
                return coerce(literal(e), self.types[other.name], other.name)
            except LiteralError as error:
                raise PlanError(str(error)) from None
        return self.value(e, row)


_UNSUPPORTED = ("pull queries support columns, literals, comparisons, IN, BETWEEN, IS NULL, AND, OR and NOT: "
                "use a push query (EMIT CHANGES) for other expressions")


def _children(e: ast.Expression) -> list[ast.Expression]:
    if isinstance(e, ast.Comparison | ast.And | ast.Or):
        return [e.left, e.right]
    if isinstance(e, ast.Not | ast.IsNull):
        return [e.operand]
    if isinstance(e, ast.InList):
        return [e.operand, *e.items]
    if isinstance(e, ast.Between):
        return [e.operand, e.low, e.high]
    return []


_OPERATORS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
              ">=": operator.ge}


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    try:
        return _OPERATORS[op](left, right)
    except TypeError:
        raise PlanError(f"cannot compare {type(left).__name__} with {type(right).__name__}") from None
