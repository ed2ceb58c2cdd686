"""ksqlDB's scalar functions as pyspark Column expressions, with ksqlDB's semantics.

`scalar(name, args, arg_types)` turns a call of a ksqlDB scalar function into a Column built only from
Spark's built-in expressions (no Python UDFs: everything runs in the JVM, in batch and streaming plans
alike). The semantics follow ksqlDB's own implementations (io.confluent.ksql.function.udf.*): NULL
arguments, 1-based positions, SUBSTRING's clamping, CONCAT skipping NULLs, ROUND's ties towards
+infinity, LN(0) = -Infinity, ARRAY_CONTAINS never NULL, and so on. Every function is a few lines in a
table keyed by name (`_SCALARS`), with its arity and the kinds of arguments it accepts.

Some arguments must be literals because Spark needs them at planning time (ROUND's and TRUNC's number of
decimal places, the time unit of DATEADD and friends); they are read back from the argument Columns.
A time unit may arrive as a bare identifier column (`DATEADD(DAYS, 1, d)` parses DAYS as a column
reference) or as a string literal; `TIME_UNIT_ARGUMENT` tells the caller which argument that is.

Known deviations from ksqlDB, beyond those noted at the functions:
- Date-time patterns are Spark's (java.time based, like ksqlDB's), except that Spark rejects the week-based
  letters (Y, w, W, u, e, c). With an explicit time zone argument, zone-name letters (z, zzz, VV, O, X, x, Z)
  in a *format* pattern print the session time zone, not the requested one; the wall-clock fields are right.
- TIMESTAMPTOSTRING / STRINGTOTIMESTAMP without a time zone use the session time zone (ksqlDB: the server's
  default zone); FORMAT_TIMESTAMP / PARSE_TIMESTAMP without one use UTC, as ksqlDB does.
- UNIX_TIMESTAMP() and UNIX_DATE() are evaluated once per query (per micro-batch when streaming), not per row.
- A function that would throw in ksqlDB for a bad value (unparseable timestamp, bad hex) returns NULL here,
  which is what ksqlDB then writes to the row; a few Spark checks still raise at run time instead (a
  REGEXP_EXTRACT group number beyond the groups of a pattern that is not a literal, an unknown time zone).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = [
    "AGGREGATE_NAMES",
    "FUNCTION_NAMES",
    "TABLE_FUNCTION_NAMES",
    "TIME_UNIT_ARGUMENT",
    "FunctionError",
    "is_aggregate",
    "scalar",
    "sql_type_name",
]


class FunctionError(ValueError):
    """An unknown function, a wrong number of arguments or an argument of the wrong type (one-line message)."""


AGGREGATE_NAMES = frozenset({
    "AVG", "COLLECT_LIST", "COLLECT_SET", "CORRELATION", "COUNT", "COUNT_DISTINCT", "EARLIEST_BY_OFFSET",
    "HISTOGRAM", "LATEST_BY_OFFSET", "MAX", "MIN", "STDDEV_SAMP", "STDDEV_SAMPLE", "SUM", "TOPK",
    "TOPKDISTINCT", "ATTR",
})
TABLE_FUNCTION_NAMES = frozenset({"EXPLODE", "CUBE_EXPLODE"})

# The argument of these functions that is a time unit keyword (DAYS, HOURS, ...), not an expression.
TIME_UNIT_ARGUMENT = {"DATEADD": 0, "DATESUB": 0, "TIMESTAMPADD": 0, "TIMESTAMPSUB": 0}


def is_aggregate(name: str) -> bool:
    return name.upper() in AGGREGATE_NAMES


def scalar(name: str, args: Sequence[Column], arg_types: Sequence[T.DataType]) -> Column:
    """The Column computing ksqlDB's scalar function `name` over `args` (whose Spark types are `arg_types`)."""
    name = name.upper()
    spec = _SCALARS.get(name)
    if spec is None:
        if name in AGGREGATE_NAMES:
            raise FunctionError(f"{name} is an aggregate function, not a scalar one")
        if name in TABLE_FUNCTION_NAMES:
            raise FunctionError(f"{name} is a table function, not a scalar one")
        raise FunctionError(f"unknown function {name}")
    if len(args) != len(arg_types):
        raise ValueError(f"{len(args)} arguments but {len(arg_types)} argument types")
    n = len(args)
    if not spec.accepts(n):
        raise FunctionError(f"{name} takes {_arity_text(spec.arity)}, got {n}")
    call = _Call(name, list(args), list(arg_types))
    for i in range(n):
        kind = spec.kinds[min(i, len(spec.kinds) - 1)] if spec.kinds else "ANY"
        call.check(i, kind)
    return spec.build(call)


# ---------------------------------------------------------------- types


def sql_type_name(t: T.DataType) -> str:
    """ksqlDB's name of a Spark type, for messages: INT, BIGINT, ARRAY<STRING>, DECIMAL(10, 2), ..."""
    if isinstance(t, T.StringType | T.VarcharType | T.CharType):
        return "STRING"
    if isinstance(t, T.ByteType | T.ShortType | T.IntegerType):
        return "INT"
    if isinstance(t, T.LongType):
        return "BIGINT"
    if isinstance(t, T.FloatType | T.DoubleType):
        return "DOUBLE"
    if isinstance(t, T.DecimalType):
        return f"DECIMAL({t.precision}, {t.scale})"
    if isinstance(t, T.BinaryType):
        return "BYTES"
    if isinstance(t, T.TimestampType | T.TimestampNTZType):
        return "TIMESTAMP"
    if isinstance(t, T.ArrayType):
        return f"ARRAY<{sql_type_name(t.elementType)}>"
    if isinstance(t, T.MapType):
        return f"MAP<{sql_type_name(t.keyType)}, {sql_type_name(t.valueType)}>"
    if isinstance(t, T.StructType):
        return "STRUCT<" + ", ".join(f"{f.name} {sql_type_name(f.dataType)}" for f in t.fields) + ">"
    if isinstance(t, T.NullType):
        return "NULL"
    return t.simpleString().upper()  # BOOLEAN, DATE, ...


def _family(t: T.DataType) -> str:
    if isinstance(t, T.StringType | T.VarcharType | T.CharType):
        return "STRING"
    if isinstance(t, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "INT"
    if isinstance(t, T.FloatType | T.DoubleType):
        return "DOUBLE"
    if isinstance(t, T.TimestampType | T.TimestampNTZType):
        return "TIMESTAMP"
    for cls, family in ((T.DecimalType, "DECIMAL"), (T.BinaryType, "BYTES"), (T.BooleanType, "BOOLEAN"),
                        (T.DateType, "DATE"), (T.ArrayType, "ARRAY"), (T.MapType, "MAP"),
                        (T.StructType, "STRUCT"), (T.NullType, "NULL")):
        if isinstance(t, cls):
            return family
    return "OTHER"


# What each kind of parameter accepts (NULL is always accepted), and how messages name it.
_KINDS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "STRING": (frozenset({"STRING"}), ("STRING",)),
    "BYTES": (frozenset({"BYTES"}), ("BYTES",)),
    "INT": (frozenset({"INT"}), ("INT", "BIGINT")),
    "NUMBER": (frozenset({"INT", "DOUBLE", "DECIMAL"}), ("numeric",)),
    "BOOLEAN": (frozenset({"BOOLEAN"}), ("BOOLEAN",)),
    "DATE": (frozenset({"DATE"}), ("DATE",)),
    "TIMESTAMP": (frozenset({"TIMESTAMP"}), ("TIMESTAMP",)),
    "ARRAY": (frozenset({"ARRAY"}), ("ARRAY",)),
    "MAP": (frozenset({"MAP"}), ("MAP",)),
}


def _kind(spec: str) -> tuple[frozenset[str], str] | None:
    """The accepted families and description ("a STRING or BYTES") of a kind like "STRING|BYTES";
    None for ANY and UNIT."""
    if spec in ("ANY", "UNIT"):
        return None
    parts = [_KINDS[p] for p in spec.split("|")]
    names = [name for part in parts for name in part[1]]
    text = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return frozenset().union(*(p[0] for p in parts)), ("an " if text[0] in "AEIOU" else "a ") + text


# ---------------------------------------------------------------- calls and literals

_NOT_LITERAL = object()


class _Identifier(str):
    """A bare name in argument position (a column reference), e.g. the DAYS of DATEADD(DAYS, 1, d)."""


def _literal_of(column: Column) -> Any:
    """The Python value of a literal Column (a str subclass `_Identifier` for a bare column name);
    `_NOT_LITERAL` for anything else."""
    jc = getattr(column, "_jc", None)
    if jc is not None:  # classic pyspark: the JVM Column's ColumnNode
        try:
            node = jc.node()
            kind = node.getClass().getSimpleName()
            if kind == "Literal":
                return node.value()
            if kind == "UnresolvedAttribute":
                parts = node.nameParts()  # a Scala Seq
                return _Identifier(parts.apply(0)) if parts.size() == 1 else _NOT_LITERAL
        except Exception:  # noqa: BLE001 - an unexpected node shape just means "not a literal"
            return _NOT_LITERAL
        return _NOT_LITERAL
    expr = getattr(column, "_expr", None)  # Spark Connect
    kind = type(expr).__name__
    if kind == "LiteralExpression":
        return expr._value
    if kind == "ColumnReference":
        return _Identifier(expr._unparsed_identifier)
    return _NOT_LITERAL


class _Call:
    def __init__(self, name: str, args: list[Column], types: list[T.DataType]):
        self.name = name
        self.args = args
        self.types = types
        self.families = [_family(t) for t in types]

    def error(self, message: str) -> FunctionError:
        return FunctionError(f"{self.name} {message}")

    def check(self, i: int, spec: str) -> None:
        kind = _kind(spec)
        if kind is None or self.families[i] == "NULL" or self.families[i] in kind[0]:
            return
        where = "argument" if len(self.args) == 1 else f"as argument {i + 1}"
        raise self.error(f"expects {kind[1]} {where}, got {sql_type_name(self.types[i])}")

    def same_family(self, positions: Sequence[int]) -> str:
        """The one family of the arguments at `positions` (NULLs aside), or a FunctionError."""
        families = {self.families[i] for i in positions} - {"NULL"}
        if families <= {"INT", "DOUBLE", "DECIMAL"} and families:
            return "NUMBER"
        if len(families) > 1:
            names = " and ".join(sorted(sql_type_name(self.types[i]) for i in positions
                                        if self.families[i] != "NULL"))
            raise self.error(f"arguments must all have the same type, got {names}")
        return families.pop() if families else "NULL"

    def literal(self, i: int, what: str) -> Any:
        """The literal value of argument i (None for NULL), or a FunctionError if it is an expression."""
        value = _literal_of(self.args[i])
        if value is _NOT_LITERAL or isinstance(value, _Identifier):
            raise self.error(f"expects a literal {what} as argument {i + 1}")
        return value

    def literal_int(self, i: int, what: str) -> int | None:
        value = self.literal(i, what)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.error(f"expects an integer literal {what} as argument {i + 1}")
        return value


# An arity: a number of arguments, a (min, max) range with max None for "any number", or a set of numbers.
Arity = int | tuple[int, int | None] | frozenset[int]


@dataclass(frozen=True)
class _Spec:
    arity: Arity
    kinds: tuple[str, ...]  # per position; the last one repeats
    build: Callable[[_Call], Column]

    def accepts(self, n: int) -> bool:
        if isinstance(self.arity, int):
            return n == self.arity
        if isinstance(self.arity, frozenset):
            return n in self.arity
        low, high = self.arity
        return n >= low and (high is None or n <= high)


_SCALARS: dict[str, _Spec] = {}


def _register(*names: str, arity: Arity, kinds: str = "") -> Callable:
    def register(build: Callable[[_Call], Column]) -> Callable[[_Call], Column]:
        for name in names:
            _SCALARS[name] = _Spec(arity, tuple(kinds.split()), build)
        return build

    return register


def _simple(name: str, arity: Arity, kinds: str, fn: Callable[..., Column]) -> None:
    """A function whose Column is fn(*args)."""
    _register(name, arity=arity, kinds=kinds)(lambda c: fn(*c.args))


def _arity_text(arity: Arity) -> str:
    if isinstance(arity, int):
        return "no arguments" if arity == 0 else f"{arity} argument{'s' if arity != 1 else ''}"
    if isinstance(arity, frozenset):
        *rest, last = sorted(arity)
        return f"{', '.join(map(str, rest))} or {last} arguments"
    low, high = arity
    if high is None:
        return f"at least {low} argument{'s' if low != 1 else ''}"
    if high == low + 1:
        return f"{low} or {high} arguments"
    return f"{low} to {high} arguments"


def _null(type_name: str) -> Column:
    return F.lit(None).cast(type_name)


def _substr(s: Column, pos: Column | int, length: Column | int | None = None) -> Column:
    if length is None:
        return F.call_function("substr", s, _as_col(pos))
    return F.call_function("substr", s, _as_col(pos), _as_col(length))


def _as_col(value: Column | Any) -> Column:
    return value if isinstance(value, Column) else F.lit(value)


# ---------------------------------------------------------------- strings


@_register("CONCAT", arity=(1, None), kinds="STRING|BYTES")
def _concat(c: _Call) -> Column:
    # NULL arguments count as empty strings (bytes); CONCAT of only NULLs is '' (ksqlDB's Concat).
    if c.same_family(range(len(c.args))) == "BYTES":
        return F.concat(*(F.coalesce(a, F.lit(bytearray())) for a in c.args))
    return F.concat_ws("", *c.args)


@_register("CONCAT_WS", arity=(2, None), kinds="STRING|BYTES")
def _concat_ws(c: _Call) -> Column:
    # A NULL separator gives NULL; NULL values are skipped.
    sep, values = c.args[0], c.args[1:]
    if c.same_family(range(len(c.args))) != "BYTES":
        return F.call_function("concat_ws", sep, *values)
    present = F.filter(F.array(*values), lambda v: v.isNotNull())
    joined = F.aggregate(present, _null("binary"),
                         lambda acc, v: F.when(acc.isNull(), v).otherwise(F.concat(acc, sep, v)))
    return F.when(sep.isNotNull(), F.coalesce(joined, F.lit(bytearray())))


@_register("SUBSTRING", arity=(2, 3), kinds="STRING|BYTES INT INT")
def _substring(c: _Call) -> Column:
    # ksqlDB's Substring: 1-based; a negative position counts from the end; positions out of range clamp.
    s, pos = c.args[0], c.args[1]
    n = F.length(s)
    start = (F.when(pos.isNull(), None)
             .when(pos < 0, F.greatest(n + pos, F.lit(0)))
             .otherwise(F.greatest(F.least(pos - 1, n), F.lit(0))))  # 0-based
    if len(c.args) == 2:
        return _substr(s, start + 1)
    length = c.args[2]
    return F.when(length.isNotNull(), _substr(s, start + 1, F.greatest(length, F.lit(0))))


_simple("UCASE", 1, "STRING", F.upper)
_simple("LCASE", 1, "STRING", F.lower)
# Java's String.trim() strips every character up to U+0020 (control characters too), Spark's trim only spaces.
# LTRIM and RTRIM are not ksqlDB functions; they are kept for convenience with the same character set.
_simple("TRIM", 1, "STRING", lambda s: F.regexp_replace(s, r"^[\x00-\x20]+|[\x00-\x20]+\z", ""))
_simple("LTRIM", 1, "STRING", lambda s: F.regexp_replace(s, r"^[\x00-\x20]+", ""))
_simple("RTRIM", 1, "STRING", lambda s: F.regexp_replace(s, r"[\x00-\x20]+\z", ""))
# LEN counts characters (Spark: code points; Java: UTF-16 units, so characters outside the BMP count 2 in
# ksqlDB) or bytes.
_simple("LEN", 1, "STRING|BYTES", F.length)
# REPLACE of an empty search string returns the input unchanged (Java's String.replace inserts between chars).
_simple("REPLACE", 3, "STRING STRING STRING", F.replace)
_simple("REGEXP_REPLACE", 3, "STRING STRING STRING", F.regexp_replace)
_simple("REGEXP_SPLIT_TO_ARRAY", 2, "STRING STRING", lambda s, regex: F.split(s, regex, -1))
_simple("MD5", 1, "STRING", F.md5)
_simple("UUID", 0, "", lambda: F.call_function("uuid"))  # UUID(bytes) is not supported


@_register("REGEXP_EXTRACT", arity=(2, 3), kinds="STRING STRING INT")
def _regexp_extract(c: _Call) -> Column:
    # Note ksqlDB's argument order: the pattern first. No match gives NULL (Spark's would give '').
    pattern, text = c.args[0], c.args[1]
    group = c.args[2] if len(c.args) == 3 else F.lit(0)
    if _group_beyond_pattern(c):
        return _null("string")
    return F.when(F.call_function("regexp_like", text, pattern),
                  F.call_function("regexp_extract", text, pattern, group))


def _group_beyond_pattern(c: _Call) -> bool:
    """Whether a literal group number exceeds the group count of a literal pattern: NULL in ksqlDB, an error
    at run time in Spark (which is still what a non-literal pattern or group gets)."""
    pattern = _literal_of(c.args[0])
    group = _literal_of(c.args[2]) if len(c.args) == 3 else 0
    if not isinstance(pattern, str) or isinstance(pattern, _Identifier) or not isinstance(group, int):
        return False
    try:
        return group > re.compile(pattern).groups  # Python's count; Java's syntax is close enough here
    except re.error:
        return False


@_register("REGEXP_EXTRACT_ALL", arity=(2, 3), kinds="STRING STRING INT")
def _regexp_extract_all(c: _Call) -> Column:
    group = c.args[2] if len(c.args) == 3 else F.lit(0)
    if _group_beyond_pattern(c):
        return _null("array<string>")
    return F.regexp_extract_all(c.args[1], c.args[0], group)


def _java_quote(text: str) -> str:
    """java.util.regex.Pattern.quote: the regular expression matching `text` literally."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


@_register("SPLIT", arity=2, kinds="STRING STRING")
def _split(c: _Call) -> Column:
    # The delimiter is literal text (not a regular expression); '' splits into characters; leading,
    # trailing and repeated delimiters give empty strings. SPLIT of BYTES is not supported.
    s, delimiter = c.args
    value = _literal_of(delimiter)
    if isinstance(value, str) and not isinstance(value, _Identifier):
        pattern = F.lit(_java_quote(value) if value else "")
    else:
        quoted = F.concat(F.lit("\\Q"), F.replace(delimiter, F.lit("\\E"), F.lit("\\E\\\\E\\Q")), F.lit("\\E"))
        pattern = F.when(delimiter == "", F.lit("")).otherwise(quoted)
    return F.split(s, pattern, -1)


def _nth_locate(sub: Column, s: Column, start: Column, occurrence: Column) -> Column:
    """The 1-based position of the occurrence-th match of sub in s at or after start (overlapping
    matches count, as in StringUtils.ordinalIndexOf), or 0."""
    def step(found: Column, _: Column) -> Column:
        at = F.call_function("locate", sub, s, found + 1)
        return F.when(found < 0, found).when(at == 0, F.lit(-1)).otherwise(at)

    times = F.array_repeat(F.lit(0), F.greatest(occurrence, F.lit(1)))
    found = F.aggregate(times, (start - 1).cast("int"), step)
    return F.when(found < 0, F.lit(0)).otherwise(found)


@_register("INSTR", arity=(2, 4), kinds="STRING STRING INT INT")
def _instr(c: _Call) -> Column:
    # ksqlDB's Instr: a NULL string or substring gives 0; a negative position searches backwards from
    # that many characters before the end; the occurrence-th match is reported.
    s, sub = c.args[0], c.args[1]
    if len(c.args) == 2:
        found = F.call_function("instr", s, sub)
    else:
        position = c.args[2]
        occurrence = c.args[3] if len(c.args) == 4 else F.lit(1)
        n = F.length(s)
        backwards = _nth_locate(F.reverse(sub), F.reverse(s), -position, occurrence)
        found = (F.when(F.abs(position) > n, F.lit(0))
                 .when(position < 0, F.when(backwards == 0, F.lit(0))
                       .otherwise(n - backwards - F.length(sub) + 2))
                 .otherwise(_nth_locate(sub, s, position, occurrence)))
    return F.when(s.isNull() | sub.isNull(), F.lit(0)).otherwise(found).cast("int")


def _pad(function: str) -> Callable[[_Call], Column]:
    def build(c: _Call) -> Column:
        # NULL when the padding is empty or NULL or the length negative; a longer input is truncated.
        c.same_family([0, 2])
        s, length, padding = c.args
        return F.when((F.length(padding) > 0) & (length >= 0), F.call_function(function, s, length, padding))
    return build


_register("LPAD", arity=3, kinds="STRING|BYTES INT STRING|BYTES")(_pad("lpad"))
_register("RPAD", arity=3, kinds="STRING|BYTES INT STRING|BYTES")(_pad("rpad"))


@_register("INITCAP", arity=1, kinds="STRING")
def _initcap(c: _Call) -> Column:
    # ksqlDB's InitCap: words are delimited by any whitespace (Spark's initcap: spaces only), the rest is
    # lower-cased, and leading whitespace is dropped.
    words = F.split(F.lower(F.regexp_replace(c.args[0], r"^\s+", "")), r"(?<=\s)", -1)
    capitalized = F.transform(words, lambda w: F.concat(F.upper(_substr(w, 1, 1)), _substr(w, 2)))
    return F.array_join(capitalized, "")


def _mask_of(c: _Call, first: int) -> Callable[[Column], Column]:
    """MASK's character substitution; the mask characters (upper, lower, digit, other) are the
    arguments from `first` on, if given (NULL: leave that class unmasked), else X, x, n and -."""
    if len(c.args) > first:
        chars = [a.cast("string") for a in c.args[first:first + 4]]
    else:
        chars = [F.lit("X"), F.lit("x"), F.lit("n"), F.lit("-")]
    return lambda s: F.mask(s, *chars)


_register("MASK", arity=frozenset({1, 5}), kinds="STRING")(lambda c: _mask_of(c, 1)(c.args[0]))


def _mask_part(which: str) -> Callable[[_Call], Column]:
    def build(c: _Call) -> Column:
        mask = _mask_of(c, 2)
        s, n = c.args[0], c.args[1]
        rest = F.greatest(F.length(s) - n, F.lit(0))  # characters before the last n
        if which == "LEFT":
            return F.concat(mask(_substr(s, 1, n)), _substr(s, n + 1))
        if which == "KEEP_LEFT":
            return F.concat(_substr(s, 1, n), mask(_substr(s, n + 1)))
        if which == "RIGHT":
            return F.concat(_substr(s, 1, rest), mask(_substr(s, rest + 1)))
        return F.concat(mask(_substr(s, 1, rest)), _substr(s, rest + 1))
    return build


for _which in ("LEFT", "RIGHT", "KEEP_LEFT", "KEEP_RIGHT"):
    _register(f"MASK_{_which}", arity=frozenset({2, 6}), kinds="STRING INT STRING")(_mask_part(_which))


@_register("CHR", arity=1, kinds="INT|STRING")
def _chr(c: _Call) -> Column:
    # A code point, or a string of \uXXXX escapes (ksqlDB unescapes any Java escapes; only \u ones here).
    x = c.args[0]
    if c.families[0] == "STRING":
        utf16 = F.unhex(F.regexp_replace(x, r"\\u", ""))
        return F.when(F.call_function("regexp_like", x, F.lit(r"^(\\u[0-9A-Fa-f]{4})+$")),
                      F.decode(utf16, "UTF-16BE"))
    return F.when((x >= 0) & (x <= 0x10FFFF), F.format_string("%c", x))


_ENCODINGS = ("hex", "utf8", "ascii", "base64")


# Java's charsets replace what they cannot encode or decode ('?', U+FFFD) where Spark's encode and decode
# fail the query; hence the casts and replacements below.
def _to_bytes(s: Column, encoding: str) -> Column:
    if encoding in ("hex", "base64"):
        return F.try_to_binary(s, F.lit(encoding))  # NULL if malformed (ksqlDB: an error, so NULL too)
    if encoding == "ascii":
        s = F.regexp_replace(s, r"[^\x00-\x7F]", "?")
    return s.cast("binary")  # Spark's strings are UTF-8


def _from_bytes(b: Column, encoding: str) -> Column:
    if encoding == "hex":
        return F.hex(b)  # upper case, as DatatypeConverter.printHexBinary
    if encoding == "base64":
        return F.regexp_replace(F.base64(b), r"[\r\n]", "")  # Spark chunks long base64 output in lines
    if encoding == "ascii":  # every byte above 0x7F becomes U+FFFD (EF BF BD in UTF-8)
        b = F.unhex(F.regexp_replace(F.hex(b), r"\G((?:[0-7][0-9A-F])*)[89A-F][0-9A-F]", "$1EFBFBD"))
    return F.make_valid_utf8(b.cast("string"))


def _by_encoding(c: _Call, i: int, result_type: str, convert: Callable[[str], Column]) -> Column:
    """convert(encoding) for the encoding named by argument i (hex, utf8, ascii or base64)."""
    value = _literal_of(c.args[i])
    if value is None:
        return _null(result_type)
    if isinstance(value, str) and not isinstance(value, _Identifier):
        if value.lower() not in _ENCODINGS:
            raise c.error(f"does not support encoding '{value}' (hex, utf8, ascii or base64)")
        return convert(value.lower())
    encoding = F.lower(c.args[i])
    result = F.when(encoding == _ENCODINGS[0], convert(_ENCODINGS[0]))
    for name in _ENCODINGS[1:]:
        result = result.when(encoding == name, convert(name))
    return result


_register("TO_BYTES", arity=2, kinds="STRING STRING")(
    lambda c: _by_encoding(c, 1, "binary", lambda e: _to_bytes(c.args[0], e)))
_register("FROM_BYTES", arity=2, kinds="BYTES STRING")(
    lambda c: _by_encoding(c, 1, "string", lambda e: _from_bytes(c.args[0], e)))
_register("ENCODE", arity=3, kinds="STRING STRING STRING")(
    lambda c: _by_encoding(c, 2, "string", lambda out: _from_bytes(
        _by_encoding(c, 1, "binary", lambda into: _to_bytes(c.args[0], into)), out)))


# ---------------------------------------------------------------- JSON

# EXTRACTJSONFIELD: scalars come back as their text, objects and arrays as (compact) JSON text, a missing
# path as NULL. Deviations: an explicit JSON null gives NULL (ksqlDB: the string 'null'), and numbers are
# re-printed by Spark (1.23450 -> 1.2345, 1e3 -> 1000.0; ksqlDB keeps the source digits).
_simple("EXTRACTJSONFIELD", 2, "STRING STRING", lambda js, path: F.call_function("get_json_object", js, path))
_simple("IS_JSON_STRING", 1, "STRING", lambda s: F.try_parse_json(s).isNotNull())
_simple("JSON_ARRAY_LENGTH", 1, "STRING", F.json_array_length)
_simple("JSON_KEYS", 1, "STRING", F.json_object_keys)

_JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS", "dateFormat": "yyyy-MM-dd", "timeZone": "UTC"}


def _sorted_for_json(x: Column, t: T.DataType) -> Column:
    """x with struct fields and map keys in ksqlDB's TO_JSON_STRING order (sorted by name), recursively."""
    if isinstance(t, T.StructType):
        fields = sorted(t.fields, key=lambda f: f.name)
        return F.when(x.isNotNull(), F.struct(*(_sorted_for_json(x[f.name], f.dataType).alias(f.name)
                                                 for f in fields)))
    if isinstance(t, T.MapType):
        entries = F.array_sort(F.map_entries(x), lambda a, b: F.when(a["key"] < b["key"], -1)
                               .when(a["key"] > b["key"], 1).otherwise(0))
        if _needs_sorting(t.valueType):
            entries = F.transform(entries, lambda e: F.struct(
                e["key"].alias("key"), _sorted_for_json(e["value"], t.valueType).alias("value")))
        return F.map_from_entries(entries)
    if isinstance(t, T.ArrayType) and _needs_sorting(t.elementType):
        return F.transform(x, lambda e: _sorted_for_json(e, t.elementType))
    return x


def _needs_sorting(t: T.DataType) -> bool:
    if isinstance(t, T.StructType | T.MapType):
        return True
    return isinstance(t, T.ArrayType) and _needs_sorting(t.elementType)


@_register("TO_JSON_STRING", arity=1, kinds="ANY")
def _to_json_string(c: _Call) -> Column:
    # Any value as JSON text: NULL -> 'null', strings quoted, BYTES as base64, TIMESTAMP as
    # "yyyy-MM-ddTHH:mm:ss.SSS" (UTC), struct fields and map keys sorted.
    if c.families[0] == "NULL":
        return F.lit("null")
    wrapped = F.to_json(F.array(_sorted_for_json(c.args[0], c.types[0])), _JSON_OPTIONS)
    return _substr(wrapped, 2, F.length(wrapped) - 2)  # strip the array's brackets


# ---------------------------------------------------------------- numbers

_INFINITY = float("inf")


def _half(scale: int) -> Decimal:
    """Half a unit in the last place kept by rounding to `scale` decimal places (exactly)."""
    return Decimal("0." + "0" * scale + "5") if scale >= 0 else Decimal("5" + "0" * (-scale - 1))


def _round_decimal(x: Column, scale: int) -> Column:
    # ksqlDB rounds HALF_UP above zero and HALF_DOWN below it: ties go towards +infinity.
    return F.floor(x + F.lit(_half(scale)), scale)


def _trunc_decimal(x: Column, scale: int) -> Column:
    return F.when(x >= 0, F.floor(x, scale)).otherwise(F.ceil(x, scale))


def _on_double_as_decimal(x: Column, scale: int, rounding: Callable[[Column, int], Column],
                          fallback: Callable[[Column, int], Column]) -> Column:
    # ksqlDB rounds BigDecimal.valueOf(double), the shortest decimal text of the double; a cast to DECIMAL
    # reads the same digits (to 16 decimal places). Beyond 1e20 (and for NaN and infinities) Spark's own.
    exact = rounding(x.cast(T.DecimalType(37, 16)), scale).cast("double")
    return F.when(F.abs(x) < 1e20, exact).otherwise(fallback(x, scale))


def _rounding(name: str) -> Callable[[_Call], Column]:
    by_decimal = _round_decimal if name == "ROUND" else _trunc_decimal
    on_double = F.round if name == "ROUND" else (lambda x, _scale: x)  # for NaN, infinities and |x| >= 1e20

    def build(c: _Call) -> Column:
        x, t, family = c.args[0], c.types[0], c.families[0]
        if len(c.args) == 1:
            # ROUND/TRUNC(x): BIGINT for INT, BIGINT and DOUBLE; DECIMAL(p - s, 0) for DECIMAL(p, s)
            # (ROUND's is DECIMAL(p - s + 1, 0) here: 9.5 rounds to 10).
            if family in ("INT", "NULL"):
                return x.cast("long")
            if family == "DOUBLE":
                if name == "TRUNC":
                    return x.try_cast("long")
                return _on_double_as_decimal(x, 0, by_decimal, on_double).try_cast("long")
            rounded = by_decimal(x, 0)
            return rounded if name == "ROUND" else rounded.cast(T.DecimalType(max(t.precision - t.scale, 1), 0))
        scale = c.literal_int(1, "number of decimal places")
        if scale is None or family == "NULL":
            return _null(t.simpleString() if family == "DECIMAL" else "double")
        if family == "DECIMAL":  # the result keeps the argument's type (NULL if it overflows it)
            return by_decimal(x, scale).try_cast(t)
        return _on_double_as_decimal(x.cast("double"), scale, by_decimal, on_double)
    return build


_register("ROUND", arity=(1, 2), kinds="NUMBER INT")(_rounding("ROUND"))
_register("TRUNC", arity=(1, 2), kinds="NUMBER INT")(_rounding("TRUNC"))


def _ceil_floor(fn: Callable[[Column], Column]) -> Callable[[_Call], Column]:
    def build(c: _Call) -> Column:
        # The result has the argument's type (Spark's CEIL and FLOOR return BIGINT for DOUBLE).
        x, family = c.args[0], c.families[0]
        if family in ("INT", "NULL"):
            return x
        if family == "DOUBLE":  # doubles from 2^52 on are integers already (and NaN, infinities stay)
            return F.when(F.abs(x) < 2.0 ** 52, fn(x).cast("double")).otherwise(x.cast("double"))
        return fn(x).try_cast(c.types[0])
    return build


_register("CEIL", arity=1, kinds="NUMBER")(_ceil_floor(F.ceil))
_register("FLOOR", arity=1, kinds="NUMBER")(_ceil_floor(F.floor))


def _java_log(fn: Callable[[Column], Column]) -> Callable[[Column], Column]:
    # Java's Math.log: -Infinity at 0, NaN below (Spark's logarithms give NULL for both).
    return lambda x: (F.when(x == 0, F.lit(-_INFINITY)).when(x < 0, F.lit(float("nan")))
                      .otherwise(fn(x)))


@_register("LOG", arity=(1, 2), kinds="NUMBER NUMBER")
def _log(c: _Call) -> Column:
    # LOG(x) is the natural logarithm, as ksqlDB's implementation and tests have it (its docs say base 10).
    if len(c.args) == 1:
        return _java_log(F.ln)(c.args[0])
    base, value = c.args
    return (F.when(base.isNull() | value.isNull(), _null("double"))
            .when((base <= 0) | (base == 1), F.lit(float("nan")))
            .otherwise(_java_log(F.ln)(value) / F.ln(base)))


_simple("ABS", 1, "NUMBER", F.abs)
_simple("LN", 1, "NUMBER", _java_log(F.ln))
_simple("SQRT", 1, "NUMBER", F.sqrt)
_simple("CBRT", 1, "NUMBER", F.cbrt)
_simple("EXP", 1, "NUMBER", F.exp)
_simple("POWER", 2, "NUMBER NUMBER", F.pow)
_simple("SIGN", 1, "NUMBER", lambda x: F.signum(x).try_cast("int"))  # SIGN(NaN) is NULL (ksqlDB: 0)
_simple("PI", 0, "", F.pi)
_simple("RANDOM", 0, "", F.rand)
_simple("RADIANS", 1, "NUMBER", F.radians)
_simple("DEGREES", 1, "NUMBER", F.degrees)
for _name in ("ACOS", "ASIN", "ATAN", "COS", "COSH", "COT", "SIN", "SINH", "TAN", "TANH"):
    _simple(_name, 1, "NUMBER", getattr(F, _name.lower()))
_simple("ATAN2", 2, "NUMBER NUMBER", F.atan2)


def _extreme(fn: Callable[..., Column]) -> Callable[[_Call], Column]:
    def build(c: _Call) -> Column:
        # The greatest (least) non-NULL argument; NULL if all are NULL.
        if c.same_family(range(len(c.args))) in ("ARRAY", "MAP", "STRUCT", "BOOLEAN"):
            raise c.error(f"cannot compare {sql_type_name(c.types[0])} values")
        return c.args[0] if len(c.args) == 1 else fn(*c.args)
    return build


_register("GREATEST", arity=(1, None), kinds="ANY")(_extreme(F.greatest))
_register("LEAST", arity=(1, None), kinds="ANY")(_extreme(F.least))


# ---------------------------------------------------------------- dates and times

_ZONE_LETTERS = r"[zZXxOV]"


def _has_zone(pattern: Column) -> Column:
    """Whether a date-time pattern has a time-zone field (outside quoted text)."""
    return F.call_function("regexp_like", F.regexp_replace(pattern, r"'[^']*'", ""), F.lit(_ZONE_LETTERS))


def _format_timestamp(ts: Column, pattern: Column, zone: Column | None) -> Column:
    """ts formatted in `zone` (None: the session time zone)."""
    if zone is not None:  # the instant whose session-zone wall clock is ts's wall clock in `zone`
        ts = F.to_utc_timestamp(F.from_utc_timestamp(ts, zone), F.current_timezone())
    return F.call_function("date_format", ts, pattern)


def _parse_timestamp(text: Column, pattern: Column, zone: Column | None) -> Column:
    """text parsed as a wall-clock time in `zone` (None: the session time zone) unless the pattern
    has a zone field; NULL if it does not parse."""
    parsed = F.try_to_timestamp(text, pattern)
    if zone is None:
        return parsed
    in_zone = F.to_utc_timestamp(F.from_utc_timestamp(parsed, F.current_timezone()), zone)
    return F.when(zone.isNull(), None).when(_has_zone(pattern), parsed).otherwise(in_zone)


def _zone_arg(c: _Call, i: int, default: str | None) -> Column | None:
    return c.args[i] if len(c.args) > i else (F.lit(default) if default else None)


_register("TIMESTAMPTOSTRING", arity=(2, 3), kinds="INT STRING STRING")(
    lambda c: _format_timestamp(F.timestamp_millis(c.args[0]), c.args[1], _zone_arg(c, 2, None)))
_register("STRINGTOTIMESTAMP", arity=(2, 3), kinds="STRING STRING STRING")(
    lambda c: F.unix_millis(_parse_timestamp(c.args[0], c.args[1], _zone_arg(c, 2, None))))
_register("FORMAT_TIMESTAMP", arity=(2, 3), kinds="TIMESTAMP STRING STRING")(
    lambda c: _format_timestamp(c.args[0], c.args[1], _zone_arg(c, 2, "UTC")))
_register("PARSE_TIMESTAMP", arity=(2, 3), kinds="STRING STRING STRING")(
    lambda c: _parse_timestamp(c.args[0], c.args[1], _zone_arg(c, 2, "UTC")))
_simple("FORMAT_DATE", 2, "DATE STRING", lambda d, pattern: F.call_function("date_format", d, pattern))
_simple("PARSE_DATE", 2, "STRING STRING", lambda s, pattern: F.call_function("try_to_date", s, pattern))
_simple("DATETOSTRING", 2, "INT STRING",
        lambda days, pattern: F.call_function("date_format", F.date_from_unix_date(days), pattern))
_simple("STRINGTODATE", 2, "STRING STRING",
        lambda s, pattern: F.unix_date(F.call_function("try_to_date", s, pattern)))
_simple("FROM_UNIXTIME", 1, "INT", F.timestamp_millis)
_simple("FROM_DAYS", 1, "INT", F.date_from_unix_date)
_simple("CONVERT_TZ", 3, "TIMESTAMP STRING STRING",
        lambda ts, from_zone, to_zone: F.to_utc_timestamp(F.from_utc_timestamp(ts, to_zone), from_zone))
_register("UNIX_TIMESTAMP", arity=(0, 1), kinds="TIMESTAMP")(
    lambda c: F.unix_millis(c.args[0] if c.args else F.current_timestamp()))
_register("UNIX_DATE", arity=(0, 1), kinds="DATE")(
    lambda c: F.unix_date(c.args[0] if c.args else F.current_date()))

_UNIT_MS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
_DAY_MS = _UNIT_MS["DAY"]


def _unit_ms(c: _Call) -> int:
    value = _literal_of(c.args[0])
    unit = value.upper().removesuffix("S") if isinstance(value, str) else None
    if unit not in _UNIT_MS:
        raise c.error("expects a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS) as argument 1")
    return _UNIT_MS[unit]


def _date_shift(sign: int) -> Callable[[_Call], Column]:
    def build(c: _Call) -> Column:
        # ksqlDB: the date's epoch milliseconds plus the interval, truncated (towards zero) to whole days.
        delta = F.lit(sign * _unit_ms(c)) * c.args[1].cast("long")
        millis = F.unix_date(c.args[2]).cast("long") * _DAY_MS + delta
        return F.date_from_unix_date(F.call_function("div", millis, F.lit(_DAY_MS)).cast("int"))
    return build


def _timestamp_shift(sign: int) -> Callable[[_Call], Column]:
    def build(c: _Call) -> Column:
        delta = F.lit(sign * _unit_ms(c) * 1000) * c.args[1].cast("long")
        return F.timestamp_micros(F.unix_micros(c.args[2]) + delta)
    return build


_register("DATEADD", arity=3, kinds="UNIT INT DATE")(_date_shift(1))
_register("DATESUB", arity=3, kinds="UNIT INT DATE")(_date_shift(-1))
_register("TIMESTAMPADD", arity=3, kinds="UNIT INT TIMESTAMP")(_timestamp_shift(1))
_register("TIMESTAMPSUB", arity=3, kinds="UNIT INT TIMESTAMP")(_timestamp_shift(-1))


# ---------------------------------------------------------------- collections


def _map_last_wins(keys: Column, values: Column) -> Column:
    """The map of keys[i] -> values[i] where a repeated key keeps its last value (a Java HashMap's
    put), a missing value is NULL and NULL keys are dropped (Spark's maps cannot hold them; ksqlDB's can)."""
    n = F.size(keys)
    entries = F.transform(keys, lambda k, i: F.struct(
        k.alias("k"), F.try_element_at(values, i + 1).alias("v"),
        (n - F.array_position(F.reverse(keys), k) == i).alias("last")))
    kept = F.filter(entries, lambda e: e["last"])
    return F.when(keys.isNotNull() & values.isNotNull(),
                  F.map_from_entries(F.transform(kept, lambda e: F.struct(e["k"], e["v"]))))


@_register("MAP", arity=(2, None), kinds="ANY")
def _map(c: _Call) -> Column:
    # MAP(k1, v1, k2, v2, ...); the keys are strings.
    if len(c.args) % 2:
        raise c.error(f"takes an even number of arguments (key, value, ...), got {len(c.args)}")
    for i in range(0, len(c.args), 2):
        c.check(i, "STRING")
    return _map_last_wins(F.array(*c.args[0::2]), F.array(*c.args[1::2]))


@_register("MAP_UNION", arity=2, kinds="MAP MAP")
def _map_union(c: _Call) -> Column:
    # The second map's value wins; NULL only if both maps are.
    a, b = c.args
    merged = _map_last_wins(F.concat(F.map_keys(a), F.map_keys(b)), F.concat(F.map_values(a), F.map_values(b)))
    return F.when(a.isNull(), b).when(b.isNull(), a).otherwise(merged)


@_register("ENTRIES", arity=2, kinds="MAP BOOLEAN")
def _entries(c: _Call) -> Column:
    m, sort = c.args
    entries = F.transform(F.map_entries(m), lambda e: F.struct(e["key"].alias("K"), e["value"].alias("V")))
    by_key = F.array_sort(entries, lambda a, b: F.when(a["K"] < b["K"], -1).when(a["K"] > b["K"], 1).otherwise(0))
    return F.when(sort, by_key).otherwise(entries)


def _primitive_elements(c: _Call, verb: str) -> None:
    """ARRAY_JOIN, ARRAY_MAX, ARRAY_MIN and ARRAY_SORT only take arrays of primitive values."""
    element = c.types[0].elementType if isinstance(c.types[0], T.ArrayType) else T.NullType()
    if _family(element) in ("ARRAY", "MAP", "STRUCT"):
        raise c.error(f"only {verb} arrays of primitive values, got {sql_type_name(c.types[0])}")


@_register("ARRAY_JOIN", arity=(1, 2), kinds="ARRAY STRING")
def _array_join(c: _Call) -> Column:
    # Elements as their string form (NULL -> 'null'); delimiter ',' by default, '' if NULL.
    _primitive_elements(c, "joins")
    delimiter = F.coalesce(c.args[1], F.lit("")) if len(c.args) == 2 else F.lit(",")
    as_strings = F.transform(c.args[0], lambda e: e.cast("string"))
    return F.call_function("array_join", as_strings, delimiter, F.lit("null"))


@_register("ARRAY_SORT", arity=(1, 2), kinds="ARRAY STRING")
def _array_sort(c: _Call) -> Column:
    # NULLs last in either direction; a direction other than ASC(ENDING)/DESC(ENDING) gives NULL.
    _primitive_elements(c, "sorts")
    array = c.args[0]
    if len(c.args) == 1:
        return F.array_sort(array)
    direction = F.upper(c.args[1])
    return (F.when(direction.isin("ASC", "ASCENDING"), F.array_sort(array))
            .when(direction.isin("DESC", "DESCENDING"), F.sort_array(array, asc=False)))


@_register("SLICE", arity=3, kinds="ARRAY INT INT")
def _slice(c: _Call) -> Column:
    # 1-based, both ends included, NULL bounds mean the array's ends; NULL if out of range (List.subList).
    array, start, end = c.args
    size = F.array_size(array)
    first = F.coalesce(start - 1, F.lit(0))  # 0-based, inclusive
    last = F.coalesce(end, size)  # 0-based, exclusive
    return F.when(array.isNotNull() & (first >= 0) & (last <= size) & (first <= last),
                  F.slice(array, first + 1, last - first))


@_register("ELT", arity=(2, None), kinds="INT STRING")
def _elt(c: _Call) -> Column:
    n, values = c.args[0], c.args[1:]
    return F.when((n >= 1) & (n <= len(values)), F.try_element_at(F.array(*values), n))


@_register("FIELD", arity=(2, None), kinds="STRING STRING")
def _field(c: _Call) -> Column:
    # The 1-based position of the first argument among the others; 0 if absent or NULL.
    return F.coalesce(F.array_position(F.array(*c.args[1:]), c.args[0]).cast("int"), F.lit(0))


_simple("ARRAY", (1, None), "ANY", F.array)
_simple("AS_MAP", 2, "ARRAY ARRAY", _map_last_wins)
_simple("MAP_KEYS", 1, "MAP", F.map_keys)
_simple("MAP_VALUES", 1, "MAP", F.map_values)
# Never NULL: false for a NULL array; a NULL value is found among NULL elements.
_simple("ARRAY_CONTAINS", 2, "ARRAY ANY",
        lambda a, v: F.coalesce(F.exists(a, lambda e: e.eqNullSafe(v)), F.lit(False)))
_simple("ARRAY_LENGTH", 1, "ARRAY", F.array_size)
_simple("ARRAY_DISTINCT", 1, "ARRAY", F.array_distinct)

@_register("ARRAY_MAX", "ARRAY_MIN", arity=1, kinds="ARRAY")
def _array_max_min(c: _Call) -> Column:
    # The greatest (least) non-NULL element; NULL for a NULL array or one of only NULLs.
    _primitive_elements(c, "compares")
    return (F.array_max if c.name == "ARRAY_MAX" else F.array_min)(c.args[0])



_simple("ARRAY_CONCAT", 2, "ARRAY ARRAY",
        lambda a, b: F.when(a.isNull(), b).when(b.isNull(), a).otherwise(F.concat(a, b)))
_simple("ARRAY_UNION", 2, "ARRAY ARRAY", F.array_union)
_simple("ARRAY_INTERSECT", 2, "ARRAY ARRAY", F.array_intersect)
_simple("ARRAY_EXCEPT", 2, "ARRAY ARRAY", F.array_except)
_simple("ARRAY_REMOVE", 2, "ARRAY ANY", lambda a, v: F.filter(a, lambda e: ~e.eqNullSafe(v)))
_simple("GENERATE_SERIES", (2, 3), "INT INT INT", F.sequence)


# ---------------------------------------------------------------- NULL handling

_simple("COALESCE", (1, None), "ANY", F.coalesce)
_simple("IFNULL", 2, "ANY ANY", F.coalesce)
_simple("NULLIF", 2, "ANY ANY", F.nullif)


FUNCTION_NAMES: frozenset[str] = frozenset(_SCALARS)
