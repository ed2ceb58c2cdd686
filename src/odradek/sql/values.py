"""Literal values of INSERT INTO ... VALUES and of pull-query keys, coerced to a column's type, and row
values rendered as JSON for the REST API."""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

from odradek.sql import ast


class LiteralError(ValueError):
    pass


def literal(e: ast.Expression) -> Any:
    """The Python value of a literal expression (a negative number parses as Negate of a literal)."""
    if isinstance(e, ast.NullLiteral):
        return None
    if isinstance(e, ast.IntegerLiteral | ast.DecimalLiteral | ast.StringLiteral | ast.BooleanLiteral):
        return e.value
    if isinstance(e, ast.Negate) and isinstance(e.operand, ast.IntegerLiteral | ast.DecimalLiteral):
        return -e.operand.value
    if isinstance(e, ast.Cast):
        return coerce(literal(e.operand), e.type, "CAST")
    raise LiteralError("only literal values are supported here")


def coerce(value: Any, t: ast.SqlType, column: str) -> Any:
    """The value as the column's type takes it, or LiteralError naming the column."""
    if value is None:
        return None
    try:
        if isinstance(t, ast.DecimalType):
            return decimal.Decimal(str(value))
        if not isinstance(t, ast.PrimitiveType):
            raise LiteralError(f"column {column}: {t.__class__.__name__} values cannot be written as literals")
        name = t.name
        if name == "BOOLEAN":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
        elif name in ("INT", "BIGINT"):
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, int) or (isinstance(value, decimal.Decimal) and value == value.to_integral()):
                number = int(value)
            else:
                number = int(str(value))
            limit = 2**31 if name == "INT" else 2**63
            if not -limit <= number < limit:
                raise LiteralError(f"column {column}: {number} does not fit {name}")
            return number
        elif name == "DOUBLE":
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        elif name == "STRING":
            return value if isinstance(value, str) else str(value)
        elif name == "BYTES":
            return base64.b64decode(value) if isinstance(value, str) else bytes(value)
        elif name == "TIMESTAMP":
            if isinstance(value, int):
                return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC).replace(tzinfo=None)
            return datetime.datetime.fromisoformat(str(value))
        elif name == "DATE":
            return datetime.date.fromisoformat(str(value))
        elif name == "TIME":
            return datetime.time.fromisoformat(str(value))
    except (TypeError, ValueError, decimal.InvalidOperation) as e:
        if isinstance(e, LiteralError):
            raise
    raise LiteralError(f"column {column}: {value!r} is not a valid {_type_name(t)}")


def _type_name(t: ast.SqlType) -> str:
    return t.name if isinstance(t, ast.PrimitiveType) else type(t).__name__


def to_json(value: Any) -> Any:
    """A row value as ksqlDB's REST API shows it: timestamps and dates in ISO-8601, bytes in base64."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value) if value != value.to_integral() else int(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if hasattr(value, "asDict"):  # a Spark Row (a struct): before tuple, which Row is
        return {k: to_json(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value
