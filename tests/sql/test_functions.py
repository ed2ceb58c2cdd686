"""ksqlDB's scalar functions on Spark (odradek.sql.functions), against ksqlDB's documented and tested results.

Every case of the table is one call over a one-row DataFrame of typed columns (or over literals). All cases
are evaluated by ONE select, once per module, so the whole table costs a single Spark job; each case then
compares its own value. Expected values come from ksqlDB's docs and its query-validation tests.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyspark.errors.utils  # noqa: E402
from pyspark.sql import Row  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from odradek.sql.functions import (  # noqa: E402
    AGGREGATE_NAMES,
    FUNCTION_NAMES,
    TIME_UNIT_ARGUMENT,
    FunctionError,
    is_aggregate,
    scalar,
)

MILLIS = 1526075913000  # 2018-05-11T21:58:33Z
DAY = dt.date(2018, 5, 11)
DAYS = (DAY - dt.date(1970, 1, 1)).days  # 17662

# The input row: typed columns, the ...N ones NULL.
SCHEMA = T.StructType([
    T.StructField("S", T.StringType()),
    T.StructField("SN", T.StringType()),
    T.StructField("DELIM", T.StringType()),
    T.StructField("ENC", T.StringType()),
    T.StructField("I", T.IntegerType()),
    T.StructField("IN", T.IntegerType()),
    T.StructField("NEG", T.IntegerType()),
    T.StructField("L", T.LongType()),
    T.StructField("LN", T.LongType()),
    T.StructField("D", T.DoubleType()),
    T.StructField("DN", T.DoubleType()),
    T.StructField("DNULL", T.DoubleType()),
    T.StructField("DEC", T.DecimalType(10, 3)),
    T.StructField("DECN", T.DecimalType(4, 1)),
    T.StructField("B", T.BinaryType()),
    T.StructField("BN", T.BinaryType()),
    T.StructField("ARR", T.ArrayType(T.IntegerType())),
    T.StructField("ARRN", T.ArrayType(T.IntegerType())),
    T.StructField("SARR", T.ArrayType(T.StringType())),
    T.StructField("SARRN", T.ArrayType(T.StringType())),
    T.StructField("M", T.MapType(T.StringType(), T.IntegerType())),
    T.StructField("MN", T.MapType(T.StringType(), T.IntegerType())),
    T.StructField("ST", T.StructType([T.StructField("B", T.IntegerType()), T.StructField("A", T.StringType())])),
    T.StructField("J", T.StringType()),
])
ROW = ("some_string", None, ".", "BASE64", 7, None, -3, MILLIS, None, 1.5, -1.5, None,
       Decimal("12345.678"), Decimal("-1.5"), b"abc", None, [1, 2, 3, 2], None, ["b", None, "a"], None,
       {"a": 1, "b": 2}, None, (1, "x"),
       '{"log": {"cloud": "gcp", "instance": 4}, "arr": [1, {"x": 2}], "nul": null}')
# Columns computed from the others (TIMESTAMP and DATE): name -> (function, column).
DERIVED = {"TS": (F.timestamp_millis, "L"), "TSN": (F.timestamp_millis, "LN"),
           "DT": (F.date_from_unix_date, "DAYS"), "DTN": (F.date_from_unix_date, "IN")}


@dataclass(frozen=True)
class Ref:
    """A column of the input row (or, if there is no such column, a bare identifier like DAYS)."""
    name: str


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple


def call(name: str, *args: Any) -> Call:
    return Call(name, args)


def sql(expr: Any) -> str:
    """The expression as ksqlDB text, for test ids."""
    if isinstance(expr, Ref):
        return expr.name
    if isinstance(expr, Call):
        return f"{expr.name}({', '.join(sql(a) for a in expr.args)})"
    if expr is None:
        return "NULL"
    if isinstance(expr, bool):
        return str(expr).upper()
    if isinstance(expr, str):
        return "'" + expr.replace("'", "''") + "'"
    return repr(expr) if isinstance(expr, float) else str(expr)


class Approx(float):
    """A DOUBLE expected to within a relative 1e-12 (NaN equals NaN)."""


@dataclass(frozen=True)
class Matches:
    """A result satisfying a predicate (random and clock-dependent functions)."""
    what: str
    check: Any

    def __repr__(self) -> str:
        return self.what


def case(name: str, *args: Any, expect: Any, type: str | None = None):  # noqa: A002
    return pytest.param(Call(name, args), expect, type, id=sql(Call(name, args)))


NAN = float("nan")
INF = float("inf")
X = Ref
now_ms = time.time() * 1000

CASES = [
    # ------------------------------------------------------------ strings
    case("CONCAT", X("S"), "_x", X("SN"), expect="some_string_x"),
    case("CONCAT", X("SN"), X("SN"), expect=""),
    case("CONCAT", X("B"), X("B"), expect=b"abcabc"),
    case("CONCAT", X("B"), X("BN"), expect=b"abc"),
    case("CONCAT_WS", ", ", "apple", "banana", X("SN"), "date", expect="apple, banana, date"),
    case("CONCAT_WS", X("SN"), "a", "b", expect=None),
    case("CONCAT_WS", X("B"), X("B"), X("BN"), X("B"), expect=b"abcabcabc"),
    case("CONCAT_WS", X("BN"), X("B"), expect=None),
    case("SUBSTRING", X("S"), 6, expect="string"),
    case("SUBSTRING", "another", 6, expect="er"),
    case("SUBSTRING", "short", 6, expect=""),
    case("SUBSTRING", X("S"), 6, 3, expect="str"),
    case("SUBSTRING", X("S"), -6, expect="string"),
    case("SUBSTRING", X("S"), -20, 4, expect="some"),
    case("SUBSTRING", X("S"), 0, 2, expect="so"),
    case("SUBSTRING", X("S"), 3, -1, expect=""),
    case("SUBSTRING", X("S"), 30, expect=""),
    case("SUBSTRING", X("SN"), 1, expect=None),
    case("SUBSTRING", X("S"), X("IN"), expect=None),
    case("SUBSTRING", X("S"), 6, X("IN"), expect=None),
    case("SUBSTRING", X("B"), 2, expect=b"bc"),
    case("UCASE", X("S"), expect="SOME_STRING"),
    case("UCASE", X("SN"), expect=None),
    case("LCASE", "AbC", expect="abc"),
    case("LCASE", X("SN"), expect=None),
    case("TRIM", "\t x y \n", expect="x y"),
    case("TRIM", X("SN"), expect=None),
    case("LTRIM", "  x ", expect="x "),
    case("RTRIM", "  x ", expect="  x"),
    case("LTRIM", X("SN"), expect=None),
    case("RTRIM", X("SN"), expect=None),
    case("LEN", X("S"), expect=11, type="int"),
    case("LEN", X("B"), expect=3),
    case("LEN", X("SN"), expect=None),
    case("REPLACE", X("S"), "_", "-", expect="some-string"),
    case("REPLACE", X("S"), X("SN"), "-", expect=None),
    case("REGEXP_REPLACE", X("S"), "s.m", "X", expect="Xe_string"),
    case("REGEXP_REPLACE", X("SN"), "a", "b", expect=None),
    case("REGEXP_EXTRACT", "(.*) (.*)", "hello there", 2, expect="there"),
    case("REGEXP_EXTRACT", ".*", X("S"), expect="some_string"),
    case("REGEXP_EXTRACT", "x+", X("S"), expect=None),
    case("REGEXP_EXTRACT", "(s)", X("S"), 3, expect=None),
    case("REGEXP_EXTRACT", "s", X("SN"), expect=None),
    case("REGEXP_EXTRACT_ALL", r"(\w+) (\w+)", "hello there nice day", 2, expect=["there", "day"]),
    case("REGEXP_EXTRACT_ALL", "x", X("S"), expect=[]),
    case("REGEXP_EXTRACT_ALL", "a", X("SN"), expect=None),
    case("REGEXP_SPLIT_TO_ARRAY", "a.b+c", "[.+]", expect=["a", "b", "c"]),
    case("REGEXP_SPLIT_TO_ARRAY", X("SN"), ",", expect=None),
    case("SPLIT", "a.b..c.", ".", expect=["a", "b", "", "c", ""]),
    case("SPLIT", "a|b", "|", expect=["a", "b"]),
    case("SPLIT", "abc", "", expect=["a", "b", "c"]),
    case("SPLIT", "abc", "x", expect=["abc"]),
    case("SPLIT", "a.b", X("DELIM"), expect=["a", "b"]),
    case("SPLIT", X("SN"), ",", expect=None),
    case("SPLIT", "a,b", X("SN"), expect=None),
    case("INSTR", "CORPORATE FLOOR", "OR", expect=2, type="int"),
    case("INSTR", "CORPORATE FLOOR", "OR", 3, expect=5),
    case("INSTR", "CORPORATE FLOOR", "OR", 3, 2, expect=14),
    case("INSTR", "CORPORATE FLOOR", "OR", -3, expect=5),
    case("INSTR", "CORPORATE FLOOR", "OR", -3, 2, expect=2),
    case("INSTR", "CORPORATE FLOOR", "MISSING", expect=0),
    case("INSTR", "corporate floor", "or", -4, 2, expect=2),
    case("INSTR", "short", "or", 4, 2, expect=0),
    case("INSTR", "short", "or", -4, expect=0),
    case("INSTR", X("SN"), "or", expect=0),
    case("LPAD", "Foo", 7, "Bar", expect="BarBFoo"),
    case("LPAD", "Foo", 2, "Bar", expect="Fo"),
    case("LPAD", "", 2, "Bar", expect="Ba"),
    case("LPAD", "123", 5, "0", expect="00123"),
    case("LPAD", "Foo", 7, "", expect=None),
    case("LPAD", "Foo", -1, "x", expect=None),
    case("LPAD", X("SN"), 3, "x", expect=None),
    case("RPAD", "Foo", 7, "Bar", expect="FooBarB"),
    case("RPAD", "Foo", 2, "Bar", expect="Fo"),
    case("RPAD", X("B"), 5, X("B"), expect=b"abcab"),
    case("RPAD", "Foo", 5, X("SN"), expect=None),
    case("INITCAP", "  heLLo\tworld  foo ", expect="Hello\tWorld  Foo "),
    case("INITCAP", "the   Quick br0wn fOx", expect="The   Quick Br0wn Fox"),
    case("INITCAP", X("S"), expect="Some_string"),
    case("INITCAP", X("SN"), expect=None),
    case("MASK", "My Test $123", expect="Xx-Xxxx--nnn"),
    case("MASK", "My Test $123", "*", None, "1", None, expect="*y *est $111"),
    case("MASK", X("SN"), expect=None),
    case("MASK_KEEP_LEFT", "My Test $123", 4, expect="My Txxx--nnn"),
    case("MASK_KEEP_RIGHT", "My Test $123", 4, expect="Xx-Xxxx-$123"),
    case("MASK_LEFT", "My Test $123", 4, expect="Xx-Xest $123"),
    case("MASK_RIGHT", "My Test $123", 4, expect="My Test -nnn"),
    case("MASK_RIGHT", "My Test $123", 40, "A", "a", "9", "#", expect="Aa#Aaaa##999"),
    case("MASK_KEEP_LEFT", X("SN"), 4, expect=None),
    case("MASK_KEEP_RIGHT", X("SN"), 4, expect=None),
    case("MASK_LEFT", X("SN"), 4, expect=None),
    case("MASK_RIGHT", X("SN"), 4, expect=None),
    case("CHR", 75, expect="K"),
    case("CHR", 22909, expect="\u597d"),
    case("CHR", 99000, expect="\U000182b8"),
    case("CHR", -1, expect=None),
    case("CHR", X("IN"), expect=None),
    case("CHR", "\\u004b", expect="K"),
    case("CHR", "\\ud820\\udeb8", expect="\U000182b8"),
    case("CHR", "75", expect=None),
    case("CHR", "", expect=None),
    case("TO_BYTES", "4b4c", "hex", expect=b"KL"),
    case("TO_BYTES", "abc", "utf8", expect=b"abc"),
    case("TO_BYTES", "abc", "ascii", expect=b"abc"),
    case("TO_BYTES", "YWJj", "base64", expect=b"abc"),
    case("TO_BYTES", "zz", "hex", expect=None),
    case("TO_BYTES", X("SN"), "hex", expect=None),
    case("FROM_BYTES", X("B"), "hex", expect="616263"),
    case("FROM_BYTES", X("B"), "UTF8", expect="abc"),
    case("FROM_BYTES", X("B"), "ascii", expect="abc"),
    case("FROM_BYTES", X("B"), "base64", expect="YWJj"),
    case("FROM_BYTES", X("B"), X("ENC"), expect="YWJj"),
    case("FROM_BYTES", X("B"), X("SN"), expect=None),
    case("FROM_BYTES", X("BN"), "utf8", expect=None),
    case("FROM_BYTES", call("TO_BYTES", "41FF42E9", "hex"), "ascii", expect="A\ufffdB\ufffd"),
    case("FROM_BYTES", call("TO_BYTES", "41C3A9FF", "hex"), "utf8", expect="A\u00e9\ufffd"),
    case("TO_BYTES", "a\u00e9b", "ascii", expect=b"a?b"),
    case("ENCODE", "4b4c", "hex", "utf8", expect="KL"),
    case("ENCODE", "abc", "utf8", "base64", expect="YWJj"),
    case("ENCODE", X("SN"), "hex", "utf8", expect=None),
    case("MD5", "hash me", expect=hashlib.md5(b"hash me").hexdigest()),
    case("MD5", X("SN"), expect=None),
    case("UUID", expect=Matches("a UUID", lambda v: re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", v))),
    # ------------------------------------------------------------ JSON
    case("EXTRACTJSONFIELD", X("J"), "$.log.cloud", expect="gcp"),
    case("EXTRACTJSONFIELD", X("J"), "$.log.instance", expect="4"),
    case("EXTRACTJSONFIELD", X("J"), "$.log", expect='{"cloud":"gcp","instance":4}'),
    case("EXTRACTJSONFIELD", X("J"), "$.arr[1].x", expect="2"),
    case("EXTRACTJSONFIELD", X("J"), "$.arr[-1]", expect=None),
    case("EXTRACTJSONFIELD", X("J"), "$.missing", expect=None),
    case("EXTRACTJSONFIELD", '{"name": "cdd"}}', "$.name", expect="cdd"),
    case("EXTRACTJSONFIELD", "{bad", "$.a", expect=None),
    case("EXTRACTJSONFIELD", X("SN"), "$.a", expect=None),
    case("IS_JSON_STRING", "[1, 2, 3]", expect=True),
    case("IS_JSON_STRING", '"abc"', expect=True),
    case("IS_JSON_STRING", "null", expect=True),
    case("IS_JSON_STRING", "", expect=False),
    case("IS_JSON_STRING", "abc", expect=False),
    case("IS_JSON_STRING", X("SN"), expect=False),
    case("JSON_ARRAY_LENGTH", "[1, [1, [2]], 3]", expect=3),
    case("JSON_ARRAY_LENGTH", "[]", expect=0),
    case("JSON_ARRAY_LENGTH", "{}", expect=None),
    case("JSON_ARRAY_LENGTH", "abc", expect=None),
    case("JSON_ARRAY_LENGTH", X("SN"), expect=None),
    case("JSON_KEYS", '{"a": "abc", "b": { "c": "a" }, "d": 1}', expect=["a", "b", "d"]),
    case("JSON_KEYS", "[]", expect=None),
    case("JSON_KEYS", X("SN"), expect=None),
    case("TO_JSON_STRING", 1, expect="1"),
    case("TO_JSON_STRING", 123.456, expect="123.456"),
    case("TO_JSON_STRING", X("DEC"), expect="12345.678"),
    case("TO_JSON_STRING", "abc", expect='"abc"'),
    case("TO_JSON_STRING", True, expect="true"),
    case("TO_JSON_STRING", None, expect="null"),
    case("TO_JSON_STRING", X("SN"), expect="null"),
    case("TO_JSON_STRING", X("B"), expect='"YWJj"'),
    case("TO_JSON_STRING", X("ARR"), expect="[1,2,3,2]"),
    case("TO_JSON_STRING", X("M"), expect='{"a":1,"b":2}'),
    case("TO_JSON_STRING", call("MAP", "d", 4, "c", 2), expect='{"c":2,"d":4}'),
    case("TO_JSON_STRING", X("ST"), expect='{"A":"x","B":1}'),
    case("TO_JSON_STRING", X("TS"), expect='"2018-05-11T21:58:33.000"'),
    case("TO_JSON_STRING", X("DT"), expect='"2018-05-11"'),
    # ------------------------------------------------------------ numbers
    case("ABS", X("NEG"), expect=3, type="int"),
    case("ABS", X("DN"), expect=1.5),
    case("ABS", X("DECN"), expect=Decimal("1.5")),
    case("ABS", X("IN"), expect=None),
    case("CEIL", X("D"), expect=2.0, type="double"),
    case("CEIL", X("DN"), expect=-1.0),
    case("CEIL", X("I"), expect=7, type="int"),
    case("CEIL", X("DECN"), expect=Decimal("-1.0"), type="decimal(4,1)"),
    case("CEIL", X("DNULL"), expect=None),
    case("FLOOR", X("D"), expect=1.0, type="double"),
    case("FLOOR", X("DN"), expect=-2.0),
    case("FLOOR", X("DEC"), expect=Decimal("12345.000"), type="decimal(10,3)"),
    case("FLOOR", 1e300, expect=1e300),
    case("FLOOR", X("DNULL"), expect=None),
    case("ROUND", X("D"), expect=2, type="bigint"),
    case("ROUND", X("DN"), expect=-1),
    case("ROUND", -1.7, expect=-2),
    case("ROUND", X("I"), expect=7, type="bigint"),
    case("ROUND", X("DNULL"), expect=None),
    case("ROUND", 12345.678, 0, expect=12346.0, type="double"),
    case("ROUND", 12345.678, 1, expect=12345.7),
    case("ROUND", 12345.678, 2, expect=12345.68),
    case("ROUND", 1.234567, 10, expect=1.234567),
    case("ROUND", -12345.678, -1, expect=-12350.0),
    case("ROUND", 111.0, -2, expect=100.0),
    case("ROUND", 2.5, 0, expect=3.0),
    case("ROUND", -2.5, 0, expect=-2.0),
    case("ROUND", 1.005, 2, expect=1.01),
    case("ROUND", -1.005, 2, expect=-1.0),
    case("ROUND", X("D"), None, expect=None),
    case("ROUND", X("DEC"), expect=Decimal("12346")),
    case("ROUND", X("DECN"), expect=Decimal("-1")),
    case("ROUND", X("DEC"), 1, expect=Decimal("12345.700"), type="decimal(10,3)"),
    case("ROUND", X("DEC"), -2, expect=Decimal("12300.000")),
    case("TRUNC", 12345.678, expect=12345, type="bigint"),
    case("TRUNC", -12345.678, expect=-12345),
    case("TRUNC", -12345.678, 2, expect=-12345.67),
    case("TRUNC", -12345.678, -1, expect=-12340.0),
    case("TRUNC", X("I"), expect=7),
    case("TRUNC", X("DEC"), expect=Decimal("12345"), type="decimal(7,0)"),
    case("TRUNC", X("DECN"), expect=Decimal("-1")),
    case("TRUNC", X("DEC"), 2, expect=Decimal("12345.670")),
    case("TRUNC", X("DNULL"), 2, expect=None),
    case("SQRT", 4, expect=2.0),
    case("SQRT", -1, expect=NAN),
    case("SQRT", X("IN"), expect=None),
    case("CBRT", -8, expect=-2.0),
    case("CBRT", X("IN"), expect=None),
    case("EXP", 1, expect=Approx(math.e)),
    case("EXP", X("IN"), expect=None),
    case("LN", 1, expect=0.0),
    case("LN", 0, expect=-INF),
    case("LN", -1, expect=NAN),
    case("LN", X("D"), expect=Approx(math.log(1.5))),
    case("LN", X("IN"), expect=None),
    case("LOG", 13, expect=Approx(2.5649493574615367)),
    case("LOG", 0.0, expect=-INF),
    case("LOG", 15, 13, expect=Approx(0.9471572411831843)),
    case("LOG", 15, 0, expect=-INF),
    case("LOG", 15, -13, expect=NAN),
    case("LOG", -15, 13, expect=NAN),
    case("LOG", 1, 13, expect=NAN),
    case("LOG", 0, 13, expect=NAN),
    case("LOG", X("IN"), 13, expect=None),
    case("POWER", 15, -1, expect=Approx(0.06666666666666667)),
    case("POWER", 0, 0, expect=1.0),
    case("POWER", X("IN"), 2, expect=None),
    case("SIGN", X("NEG"), expect=-1, type="int"),
    case("SIGN", 0.0, expect=0),
    case("SIGN", X("DEC"), expect=1),
    case("SIGN", X("IN"), expect=None),
    case("GREATEST", 1, X("IN"), 3, expect=3),
    case("GREATEST", X("I"), 2.5, expect=7.0),
    case("GREATEST", "a", "b", X("SN"), expect="b"),
    case("GREATEST", X("IN"), expect=None),
    case("LEAST", 1, X("IN"), 3, expect=1),
    case("LEAST", X("IN"), X("IN"), expect=None),
    case("PI", expect=Approx(math.pi)),
    case("RANDOM", expect=Matches("a DOUBLE in [0, 1)", lambda v: 0.0 <= v < 1.0)),
    case("RADIANS", 180, expect=Approx(math.pi)),
    case("DEGREES", math.pi, expect=Approx(180.0)),
    case("ACOS", 1, expect=0.0),
    case("ACOS", 2, expect=NAN),
    case("ASIN", 0, expect=0.0),
    case("ATAN", 1, expect=Approx(math.pi / 4)),
    case("ATAN2", 0, -3, expect=Approx(math.pi)),
    case("COS", 0, expect=1.0),
    case("COSH", 0, expect=1.0),
    case("COT", 1.0, expect=Approx(1 / math.tan(1.0))),
    case("SIN", X("IN"), expect=None),
    case("SINH", 0, expect=0.0),
    case("TAN", 0, expect=0.0),
    case("TANH", 0, expect=0.0),
    case("ACOS", X("IN"), expect=None),
    case("ASIN", X("DNULL"), expect=None),
    case("ATAN", X("IN"), expect=None),
    case("ATAN2", X("IN"), 1, expect=None),
    case("COS", X("IN"), expect=None),
    case("COSH", X("IN"), expect=None),
    case("COT", X("IN"), expect=None),
    case("SINH", X("IN"), expect=None),
    case("TAN", X("IN"), expect=None),
    case("TANH", X("IN"), expect=None),
    case("RADIANS", X("IN"), expect=None),
    case("DEGREES", X("IN"), expect=None),
    # ------------------------------------------------------------ dates and times
    case("TIMESTAMPTOSTRING", X("L"), "yyyy-MM-dd HH:mm:ss", expect="2018-05-11 21:58:33"),
    case("TIMESTAMPTOSTRING", X("L"), "yyyy-MM-dd'T'HH:mm:ss.SSS", expect="2018-05-11T21:58:33.000"),
    case("TIMESTAMPTOSTRING", X("L"), "yyyy-MM-dd HH:mm:ss", "America/Los_Angeles", expect="2018-05-11 14:58:33"),
    case("TIMESTAMPTOSTRING", X("LN"), "yyyy-MM-dd", expect=None),
    case("TIMESTAMPTOSTRING", X("L"), "yyyy-MM-dd", X("SN"), expect=None),
    case("STRINGTOTIMESTAMP", "2018-05-11T21:58:33Z", "yyyy-MM-dd'T'HH:mm:ssX", expect=MILLIS, type="bigint"),
    case("STRINGTOTIMESTAMP", "2019-08-27T13:31:09.2+0000", "yyyy-MM-dd'T'HH:mm:ss.SX", expect=1566912669200),
    case("STRINGTOTIMESTAMP", "2018-05-11 14:58:33", "yyyy-MM-dd HH:mm:ss", "America/Los_Angeles",
         expect=MILLIS),
    case("STRINGTOTIMESTAMP", "garbage", "yyyy-MM-dd", expect=None),
    case("STRINGTOTIMESTAMP", X("SN"), "yyyy-MM-dd", expect=None),
    case("FORMAT_TIMESTAMP", X("TS"), "yyyy-MM-dd HH:mm:ss", expect="2018-05-11 21:58:33"),
    case("FORMAT_TIMESTAMP", X("TS"), "yyyy-MM-dd HH:mm:ss", "America/Los_Angeles", expect="2018-05-11 14:58:33"),
    case("FORMAT_TIMESTAMP", X("TSN"), "yyyy-MM-dd", expect=None),
    case("PARSE_TIMESTAMP", "2018-05-11T21:58:33", "yyyy-MM-dd'T'HH:mm:ss", expect=MILLIS, type="timestamp"),
    case("PARSE_TIMESTAMP", "2018-05-11T21:58:33 PST", "yyyy-MM-dd'T'HH:mm:ss zzz", expect=1526101113000),
    case("PARSE_TIMESTAMP", "2018-05-11 14:58:33", "yyyy-MM-dd HH:mm:ss", "America/Los_Angeles", expect=MILLIS),
    case("PARSE_TIMESTAMP", "2018", "yyyy-MM-dd", expect=None),
    case("PARSE_TIMESTAMP", X("SN"), "yyyy", expect=None),
    case("PARSE_TIMESTAMP", "2018", "yyyy", X("SN"), expect=None),
    case("FORMAT_DATE", X("DT"), "dd/MM/yyyy", expect="11/05/2018"),
    case("FORMAT_DATE", X("DTN"), "yyyy", expect=None),
    case("PARSE_DATE", "11/05/2018", "dd/MM/yyyy", expect=DAY),
    case("PARSE_DATE", "11/05", "dd/MM/yyyy", expect=None),
    case("PARSE_DATE", X("SN"), "yyyy", expect=None),
    case("DATETOSTRING", DAYS, "yyyy-MM-dd", expect="2018-05-11"),
    case("DATETOSTRING", X("IN"), "yyyy-MM-dd", expect=None),
    case("STRINGTODATE", "2018-05-11", "yyyy-MM-dd", expect=DAYS),
    case("STRINGTODATE", X("SN"), "yyyy-MM-dd", expect=None),
    case("UNIX_TIMESTAMP", X("TS"), expect=MILLIS, type="bigint"),
    case("UNIX_TIMESTAMP", X("TSN"), expect=None),
    case("UNIX_TIMESTAMP", expect=Matches("now in ms", lambda v: abs(v - now_ms) < 3_600_000)),
    case("UNIX_DATE", X("DT"), expect=DAYS, type="int"),
    case("UNIX_DATE", X("DTN"), expect=None),
    case("UNIX_DATE", expect=Matches("today", lambda v: abs(v - now_ms / 86_400_000) < 2)),
    case("FROM_UNIXTIME", X("L"), expect=MILLIS, type="timestamp"),
    case("FROM_UNIXTIME", X("LN"), expect=None),
    case("FROM_DAYS", DAYS, expect=DAY),
    case("FROM_DAYS", X("IN"), expect=None),
    case("DATEADD", X("DAYS"), 10, X("DT"), expect=dt.date(2018, 5, 21)),
    case("DATEADD", "HOURS", 47, X("DT"), expect=dt.date(2018, 5, 12)),
    case("DATEADD", X("DAYS"), -5, call("FROM_DAYS", 2), expect=dt.date(1969, 12, 29)),
    case("DATEADD", X("HOURS"), -1, call("FROM_DAYS", 0), expect=dt.date(1970, 1, 1)),
    case("DATEADD", X("DAYS"), X("IN"), X("DT"), expect=None),
    case("DATESUB", X("DAYS"), 5, X("DT"), expect=dt.date(2018, 5, 6)),
    case("DATESUB", X("DAYS"), 5, X("DTN"), expect=None),
    case("TIMESTAMPADD", X("MILLISECONDS"), 10, X("TS"), expect=MILLIS + 10),
    case("TIMESTAMPADD", X("SECONDS"), X("IN"), X("TS"), expect=None),
    case("TIMESTAMPSUB", X("HOURS"), 1, X("TS"), expect=MILLIS - 3_600_000),
    case("TIMESTAMPSUB", X("HOURS"), 1, X("TSN"), expect=None),
    case("CONVERT_TZ", X("TS"), "+0200", "+0500", expect=MILLIS + 10_800_000),
    case("CONVERT_TZ", call("FROM_UNIXTIME", 100), "America/Los_Angeles", "America/New_York", expect=10_800_100),
    case("CONVERT_TZ", X("TSN"), "UTC", "UTC", expect=None),
    # ------------------------------------------------------------ collections
    case("ARRAY", 1, 2, 3, expect=[1, 2, 3]),
    case("ARRAY", "a", X("SN"), expect=["a", None]),
    case("MAP", "a", 1, "b", 2, expect={"a": 1, "b": 2}),
    case("MAP", "a", 1, "a", 2, expect={"a": 2}),
    case("MAP", "a", X("IN"), expect={"a": None}),
    case("AS_MAP", call("ARRAY", "a", "b"), call("ARRAY", 1, 2), expect={"a": 1, "b": 2}),
    case("AS_MAP", call("ARRAY", "a", "b", "a"), call("ARRAY", 1), expect={"a": None, "b": None}),
    case("AS_MAP", X("SARRN"), call("ARRAY", 1), expect=None),
    case("MAP_KEYS", X("M"), expect=["a", "b"]),
    case("MAP_KEYS", X("MN"), expect=None),
    case("MAP_VALUES", X("M"), expect=[1, 2]),
    case("MAP_VALUES", X("MN"), expect=None),
    case("MAP_UNION", X("M"), call("MAP", "a", 10, "c", 3), expect={"a": 10, "b": 2, "c": 3}),
    case("MAP_UNION", X("MN"), X("M"), expect={"a": 1, "b": 2}),
    case("MAP_UNION", X("MN"), X("MN"), expect=None),
    case("ENTRIES", call("MAP", "b", 1, "a", 2), True, expect=[("a", 2), ("b", 1)]),
    case("ENTRIES", call("MAP", "b", 1, "a", 2), False, expect=[("b", 1), ("a", 2)]),
    case("ENTRIES", X("MN"), True, expect=None),
    case("ARRAY_CONTAINS", X("ARR"), 3, expect=True),
    case("ARRAY_CONTAINS", X("ARR"), 5, expect=False),
    case("ARRAY_CONTAINS", X("ARRN"), 1, expect=False),
    case("ARRAY_CONTAINS", X("SARR"), X("SN"), expect=True),
    case("ARRAY_CONTAINS", X("ARR"), X("IN"), expect=False),
    case("ARRAY_LENGTH", X("ARR"), expect=4, type="int"),
    case("ARRAY_LENGTH", X("ARRN"), expect=None),
    case("ARRAY_DISTINCT", X("ARR"), expect=[1, 2, 3]),
    case("ARRAY_DISTINCT", call("ARRAY", "apple", "apple", X("SN"), "cherry"), expect=["apple", None, "cherry"]),
    case("ARRAY_DISTINCT", X("ARRN"), expect=None),
    case("ARRAY_MAX", call("ARRAY", -1, 2, X("IN"), 0), expect=2),
    case("ARRAY_MAX", call("ARRAY", "Foo", "Bar", X("SN"), "baz"), expect="baz"),
    case("ARRAY_MAX", call("ARRAY", X("IN")), expect=None),
    case("ARRAY_MIN", call("ARRAY", -1, 2, X("IN"), 0), expect=-1),
    case("ARRAY_MIN", call("ARRAY", False, None, True), expect=False),
    case("ARRAY_SORT", call("ARRAY", -1, 2, X("IN"), 0), expect=[-1, 0, 2, None]),
    case("ARRAY_SORT", call("ARRAY", "Foo", "Bar", X("SN"), "baz"), "desc", expect=["baz", "Foo", "Bar", None]),
    case("ARRAY_SORT", X("ARR"), "sideways", expect=None),
    case("ARRAY_SORT", X("ARRN"), expect=None),
    case("ARRAY_JOIN", X("ARR"), expect="1,2,3,2"),
    case("ARRAY_JOIN", X("SARR"), "|", expect="b|null|a"),
    case("ARRAY_JOIN", call("ARRAY", True, False), X("SN"), expect="truefalse"),
    case("ARRAY_JOIN", call("ARRAY", 1.5, 2.0), "-", expect="1.5-2.0"),
    case("ARRAY_JOIN", X("ARRN"), expect=None),
    case("ARRAY_CONCAT", call("ARRAY", 1, 2), call("ARRAY", 3), expect=[1, 2, 3]),
    case("ARRAY_CONCAT", X("ARRN"), call("ARRAY", 4, 1), expect=[4, 1]),
    case("ARRAY_CONCAT", X("ARRN"), X("ARRN"), expect=None),
    case("ARRAY_UNION", call("ARRAY", 1, 2, 3, 1, 2), call("ARRAY", 4, 1), expect=[1, 2, 3, 4]),
    case("ARRAY_UNION", X("ARRN"), X("ARR"), expect=None),
    case("ARRAY_INTERSECT", call("ARRAY", 1, 2, 3, 1, 2), call("ARRAY", 2, 1), expect=[1, 2]),
    case("ARRAY_INTERSECT", X("ARRN"), X("ARR"), expect=None),
    case("ARRAY_EXCEPT", call("ARRAY", "apple", "apple", X("SN"), "cherry"), call("ARRAY", "cherry"),
         expect=["apple", None]),
    case("ARRAY_REMOVE", call("ARRAY", 1, 2, 3, 2, 1), 2, expect=[1, 3, 1]),
    case("ARRAY_REMOVE", X("SARR"), X("SN"), expect=["b", "a"]),
    case("ARRAY_REMOVE", X("ARRN"), 1, expect=None),
    case("SLICE", X("ARR"), 2, 3, expect=[2, 3]),
    case("SLICE", X("ARR"), X("IN"), 2, expect=[1, 2]),
    case("SLICE", X("ARR"), 2, X("IN"), expect=[2, 3, 2]),
    case("SLICE", X("ARR"), 3, 2, expect=[]),
    case("SLICE", X("ARR"), 0, 2, expect=None),
    case("SLICE", X("ARR"), 2, 9, expect=None),
    case("SLICE", X("ARR"), 4, 2, expect=None),
    case("SLICE", X("ARRN"), 1, 2, expect=None),
    case("ELT", 2, "ignored", X("S"), expect="some_string"),
    case("ELT", 0, "a", expect=None),
    case("ELT", 3, "a", "b", expect=None),
    case("ELT", X("IN"), "a", expect=None),
    case("FIELD", "b", "a", "b", expect=2, type="int"),
    case("FIELD", "c", "a", "b", expect=0),
    case("FIELD", X("SN"), "a", X("SN"), expect=0),
    case("GENERATE_SERIES", 1, 3, expect=[1, 2, 3]),
    case("GENERATE_SERIES", 3, 1, expect=[3, 2, 1]),
    case("GENERATE_SERIES", 0, 10, 5, expect=[0, 5, 10]),
    case("GENERATE_SERIES", X("IN"), 3, expect=None),
    # ------------------------------------------------------------ NULL handling
    case("COALESCE", X("SN"), "x", "y", expect="x"),
    case("COALESCE", X("SN"), expect=None),
    case("IFNULL", X("IN"), 5, expect=5),
    case("IFNULL", X("I"), 5, expect=7),
    case("NULLIF", X("I"), 7, expect=None),
    case("NULLIF", X("I"), 5, expect=7),
    case("NULLIF", X("IN"), 5, expect=None),
]


# ---------------------------------------------------------------- evaluation


def _literal_type(value: Any) -> T.DataType:
    if value is None:
        return T.NullType()
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        return T.IntegerType() if -2**31 <= value < 2**31 else T.LongType()
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, str):
        return T.StringType()
    raise TypeError(f"no literal for {value!r}")


def build(expr: Any, df, types: dict[Call, T.DataType] | None = None) -> tuple:
    """(Column, Spark type) of a test expression over df; the types of calls come from `types`, or are
    found by analysing them (one by one: slow)."""
    if isinstance(expr, Ref):
        if expr.name in df.columns:
            return F.col(expr.name), df.schema[expr.name].dataType
        return F.col(expr.name), T.NullType()  # a bare keyword such as DAYS
    if isinstance(expr, Call):
        built = [build(a, df, types) for a in expr.args]
        column = scalar(expr.name, [c for c, _ in built], [t for _, t in built])
        if types is None:
            return column, df.select(column).schema[0].dataType
        return column, types.get(expr)
    return F.lit(expr), _literal_type(expr)


@pytest.fixture(scope="module")
def df(spark):
    frame = spark.createDataFrame([ROW], SCHEMA).withColumn("DAYS", F.lit(DAYS))
    for name, (function, source) in DERIVED.items():
        frame = frame.withColumn(name, function(F.col(source)))
    return frame.drop("DAYS")


@pytest.fixture(scope="module")
def results(df) -> dict[str, tuple]:
    """Every case's (value, Spark type) by its text, from one select; a case that fails holds its exception."""
    with pytest.MonkeyPatch.context() as patch:
        # pyspark records the Python call site of every functions.* call in the JVM ("DataFrame debugging"),
        # which more than doubles the py4j traffic of building these hundreds of expressions.
        patch.setattr(pyspark.errors.utils, "_enable_debugging_cache", False, raising=False)
        # The calls nested in arguments first, typed by one analysis; then every case.
        nested = list(dict.fromkeys(a for p in CASES for a in p.values[0].args if isinstance(a, Call)))
        typed = df.select(*(build(call, df, {})[0].alias(f"n{i}") for i, call in enumerate(nested))).schema
        types = {call: field.dataType for call, field in zip(nested, typed.fields, strict=True)}
        columns = {sql(p.values[0]): build(p.values[0], df, types)[0] for p in CASES}
    selected = df.select(*(c.alias(f"c{i}") for i, c in enumerate(columns.values())))
    types = [f.dataType for f in selected.schema.fields]
    try:
        values = list(selected.collect()[0])
    except Exception:  # noqa: BLE001 - find the failing cases one by one
        values = []
        for name in selected.columns:
            try:
                values.append(selected.select(name).collect()[0][0])
            except Exception as error:  # noqa: BLE001
                values.append(error)
    return {text: (readable(v), t) for text, v, t in zip(columns, values, types, strict=True)}


def readable(value: Any) -> Any:
    """Timestamps as epoch milliseconds (pyspark hands them over as naive datetimes in the local time zone)."""
    if isinstance(value, dt.datetime):
        return round(value.timestamp() * 1000)
    return value


def same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Matches):
        return actual is not None and bool(expected.check(actual))
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, float):
        if not isinstance(actual, float):
            return False
        if math.isnan(expected):
            return math.isnan(actual)
        return math.isclose(actual, expected, rel_tol=1e-12) if isinstance(expected, Approx) else actual == expected
    if isinstance(expected, bool):
        return isinstance(actual, bool) and actual == expected
    if isinstance(expected, int):
        return isinstance(actual, int) and not isinstance(actual, bool) and actual == expected
    if isinstance(expected, bytes):
        return isinstance(actual, bytes | bytearray) and bytes(actual) == expected
    if isinstance(expected, Decimal):
        return isinstance(actual, Decimal) and actual == expected
    if isinstance(expected, tuple):
        return isinstance(actual, tuple | Row) and len(actual) == len(expected) and all(
            same(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            same(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, dict):
        return isinstance(actual, dict) and actual.keys() == expected.keys() and all(
            same(actual[k], v) for k, v in expected.items())
    return type(actual) is type(expected) and actual == expected


@pytest.mark.parametrize(("expr", "expected", "spark_type"), CASES)
def test_function(results, expr, expected, spark_type):
    actual, result_type = results[sql(expr)]
    if isinstance(actual, Exception):
        raise actual
    assert same(actual, expected), f"{sql(expr)} = {actual!r}, expected {expected!r}"
    if spark_type is not None:
        assert result_type.simpleString() == spark_type


def test_every_function_is_covered():
    assert FUNCTION_NAMES - {param.values[0].name for param in CASES} == set()


def test_cases_are_unique():
    texts = [sql(param.values[0]) for param in CASES]
    assert len(texts) == len(set(texts))


# ---------------------------------------------------------------- errors and names


ERRORS = [
    (call("FOO", 1), "unknown function FOO"),
    (call("COUNT", X("S")), "COUNT is an aggregate function, not a scalar one"),
    (call("EXPLODE", X("ARR")), "EXPLODE is a table function, not a scalar one"),
    (call("SUBSTRING", X("S")), "SUBSTRING takes 2 or 3 arguments, got 1"),
    (call("UCASE", X("S"), X("S")), "UCASE takes 1 argument, got 2"),
    (call("PI", 1), "PI takes no arguments, got 1"),
    (call("CONCAT"), "CONCAT takes at least 1 argument, got 0"),
    (call("INSTR", X("S")), "INSTR takes 2 to 4 arguments, got 1"),
    (call("MASK", X("S"), "a"), "MASK takes 1 or 5 arguments, got 2"),
    (call("MASK_LEFT", X("S"), 1, "a"), "MASK_LEFT takes 2 or 6 arguments, got 3"),
    (call("MAP", "a", 1, "b"), "MAP takes an even number of arguments (key, value, ...), got 3"),
    (call("UCASE", X("I")), "UCASE expects a STRING argument, got INT"),
    (call("ABS", X("S")), "ABS expects a numeric argument, got STRING"),
    (call("LEN", X("ARR")), "LEN expects a STRING or BYTES argument, got ARRAY<INT>"),
    (call("CHR", X("D")), "CHR expects an INT, BIGINT or STRING argument, got DOUBLE"),
    (call("SUBSTRING", X("S"), "x"), "SUBSTRING expects an INT or BIGINT as argument 2, got STRING"),
    (call("FORMAT_TIMESTAMP", X("L"), "yyyy"), "FORMAT_TIMESTAMP expects a TIMESTAMP as argument 1, got BIGINT"),
    (call("MAP_KEYS", X("ST")), "MAP_KEYS expects a MAP argument, got STRUCT<B INT, A STRING>"),
    (call("MAP", 1, 2), "MAP expects a STRING as argument 1, got INT"),
    (call("CONCAT", X("S"), X("B")), "CONCAT arguments must all have the same type, got BYTES and STRING"),
    (call("GREATEST", X("S"), X("I")), "GREATEST arguments must all have the same type, got INT and STRING"),
    (call("GREATEST", X("ARR"), X("ARR")), "GREATEST cannot compare ARRAY<INT> values"),
    (call("ROUND", X("D"), X("I")), "ROUND expects a literal number of decimal places as argument 2"),
    (call("ROUND", X("D"), 1.5), "ROUND expects an INT or BIGINT as argument 2, got DOUBLE"),
    (call("DATEADD", X("WEEKS"), 1, X("DT")),
     "DATEADD expects a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS) as argument 1"),
    (call("TIMESTAMPADD", X("S"), 1, X("TS")),
     "TIMESTAMPADD expects a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS) as argument 1"),
    (call("TO_BYTES", X("S"), "utf16"), "TO_BYTES does not support encoding 'utf16' (hex, utf8, ascii or base64)"),
    (call("ARRAY_JOIN", call("ARRAY", X("ARR"))),
     "ARRAY_JOIN only joins arrays of primitive values, got ARRAY<ARRAY<INT>>"),
    (call("ARRAY_MAX", call("ARRAY", X("M"))),
     "ARRAY_MAX only compares arrays of primitive values, got ARRAY<MAP<STRING, INT>>"),
]


@pytest.mark.parametrize(("expr", "message"), [pytest.param(*error, id=sql(error[0])) for error in ERRORS])
def test_function_error(df, expr, message):
    with pytest.raises(FunctionError) as raised:
        build(expr, df)
    assert str(raised.value) == message
    assert isinstance(raised.value, ValueError)


def test_null_arguments_pass_the_type_checks(df):
    column, _ = build(call("UCASE", None), df)
    assert df.select(column).collect()[0][0] is None


def test_aggregates_are_told_apart():
    for name in ("COUNT", "SUM", "AVG", "MIN", "MAX", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET", "COLLECT_LIST",
                 "COLLECT_SET", "COUNT_DISTINCT", "TOPK", "TOPKDISTINCT", "HISTOGRAM"):
        assert is_aggregate(name)
    assert is_aggregate("count")
    assert not is_aggregate("UCASE") and not is_aggregate("FOO")
    assert not AGGREGATE_NAMES & FUNCTION_NAMES
    assert set(TIME_UNIT_ARGUMENT) <= FUNCTION_NAMES
