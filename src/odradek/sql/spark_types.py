"""Column types between the SQL dialect and Spark, and row values between Arrow and the serde's Python values."""

from __future__ import annotations

import datetime

from pyspark.sql import types as T

from odradek.sql import ast

_PRIMITIVE = {
    "BOOLEAN": T.BooleanType(),
    "INT": T.IntegerType(),
    "BIGINT": T.LongType(),
    "DOUBLE": T.DoubleType(),
    "STRING": T.StringType(),
    "BYTES": T.BinaryType(),
    "DATE": T.DateType(),
    "TIMESTAMP": T.TimestampType(),
}


class UnsupportedType(ValueError):
    pass


def to_spark(t: ast.SqlType) -> T.DataType:
    if isinstance(t, ast.PrimitiveType):
        if t.name not in _PRIMITIVE:
            raise UnsupportedType(f"columns of type {t.name} are not supported yet")
        return _PRIMITIVE[t.name]
    if isinstance(t, ast.DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, ast.ArrayType):
        return T.ArrayType(to_spark(t.element), True)
    if isinstance(t, ast.MapType):
        return T.MapType(to_spark(t.key), to_spark(t.value), True)
    if isinstance(t, ast.StructType):
        return T.StructType([T.StructField(f.name, to_spark(f.type), True) for f in t.fields])
    raise UnsupportedType(f"unknown column type {t!r}")


def from_spark(dt: T.DataType) -> ast.SqlType:
    """The SQL type of a Spark expression's type (narrow integers widen to INT, floats to DOUBLE)."""
    if isinstance(dt, T.BooleanType):
        return ast.PrimitiveType("BOOLEAN")
    if isinstance(dt, T.ByteType | T.ShortType | T.IntegerType):
        return ast.PrimitiveType("INT")
    if isinstance(dt, T.LongType):
        return ast.PrimitiveType("BIGINT")
    if isinstance(dt, T.FloatType | T.DoubleType):
        return ast.PrimitiveType("DOUBLE")
    if isinstance(dt, T.DecimalType):
        return ast.DecimalType(dt.precision, dt.scale)
    if isinstance(dt, T.StringType | T.VarcharType | T.CharType):
        return ast.PrimitiveType("STRING")
    if isinstance(dt, T.BinaryType):
        return ast.PrimitiveType("BYTES")
    if isinstance(dt, T.DateType):
        return ast.PrimitiveType("DATE")
    if isinstance(dt, T.TimestampType | T.TimestampNTZType):
        return ast.PrimitiveType("TIMESTAMP")
    if isinstance(dt, T.ArrayType):
        return ast.ArrayType(from_spark(dt.elementType))
    if isinstance(dt, T.MapType):
        return ast.MapType(from_spark(dt.keyType), from_spark(dt.valueType))
    if isinstance(dt, T.StructType):
        return ast.StructType(tuple(ast.StructField(f.name, from_spark(f.dataType)) for f in dt.fields))
    if isinstance(dt, T.NullType):
        return ast.PrimitiveType("STRING")
    raise UnsupportedType(f"the expression's type {dt.simpleString()} has no SQL column type")


def to_serde_value(value, t: ast.SqlType):
    """A value as Arrow's to_pylist gives it, as the serde takes it: maps as dicts, timestamps naive UTC."""
    if value is None:
        return None
    if isinstance(t, ast.PrimitiveType) and t.name == "TIMESTAMP" and isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value
    if isinstance(t, ast.ArrayType):
        return [to_serde_value(v, t.element) for v in value]
    if isinstance(t, ast.MapType):
        items = value.items() if isinstance(value, dict) else value
        return {k: to_serde_value(v, t.value) for k, v in items}
    if isinstance(t, ast.StructType):
        return {f.name: to_serde_value(value.get(f.name), f.type) for f in t.fields}
    return value


def to_arrow_value(value, t: ast.SqlType):
    """A serde value as pyarrow builds it for the Spark type: maps as (key, value) pairs."""
    if value is None:
        return None
    if isinstance(t, ast.ArrayType):
        return [to_arrow_value(v, t.element) for v in value]
    if isinstance(t, ast.MapType):
        return [(k, to_arrow_value(v, t.value)) for k, v in value.items()]
    if isinstance(t, ast.StructType):
        return {f.name: to_arrow_value(value.get(f.name), f.type) for f in t.fields}
    return value
