"""From a SELECT to a Spark Structured Streaming plan: decode the source's records, filter, project,
aggregate, and encode the result as the sink's records.

A plan's frame has one column per output column (named as the output column), then `__rowtime` (epoch
ms), `__tombstone` (a table row deleted) and, for a windowed result, `__windowstart` and `__windowend`.
Records are decoded and encoded in Python (`mapInArrow`) with the serde of their format, so the SQL
server, pull queries and INSERT VALUES read and write exactly the same bytes; everything in between runs
in the JVM as Spark expressions, except GROUP BY, which is the changelog operator of aggregation.py.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.streaming.state import GroupStateTimeout

from odradek.sql import ast, functions, serde
from odradek.sql.aggregation import AGGREGATE_NAMES, GroupStep, SparkAggregation, WindowSpec, make_aggregate
from odradek.sql.catalog import Catalog, CatalogError, DataSource, SourceColumn, Windowing
from odradek.sql.joins import JoinSpec, JoinStep, SparkJoin
from odradek.sql.parser import position
from odradek.sql.partitioning import partition_for
from odradek.sql.record_time import TimestampFormatError, check_timestamp_column, epoch_ms, strptime_format
from odradek.sql.spark_types import UnsupportedType, from_spark, to_arrow_value, to_serde_value, to_spark

log = logging.getLogger(__name__)

ROWTIME, TOMBSTONE, WINDOWSTART, WINDOWEND = "__rowtime", "__tombstone", "__windowstart", "__windowend"
ROWPARTITION, ROWOFFSET, EVENT_TIME = "__rowpartition", "__rowoffset", "__ts"
_PSEUDO = {"ROWTIME": ROWTIME, "ROWPARTITION": ROWPARTITION, "ROWOFFSET": ROWOFFSET,
           "WINDOWSTART": WINDOWSTART, "WINDOWEND": WINDOWEND}
# ksqlDB's default grace period when a window names none (since 0.28, for EMIT FINAL and late data alike).
DEFAULT_GRACE_MS = 24 * 3600 * 1000


class PlanError(ValueError):
    """A statement that parses but cannot run; str() is one line, with the position when one is known."""

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.position = position(where) if where is not None else None

    def __str__(self) -> str:
        if self.position is None:
            return self.message
        return f"line {self.position[0]}:{self.position[1]}: {self.message}"


@dataclass(frozen=True)
class QueryPlan:
    frame: DataFrame
    kind: ast.SourceKind
    columns: tuple[SourceColumn, ...]
    windowing: Windowing | None
    sources: tuple[str, ...]


# ---------------------------------------------------------------- records in and out


def _formats(source: DataSource, registry_url: str | None):
    return source.formats(serde.HttpRegistryClient(registry_url) if registry_url else None)


def check_formats(source: DataSource, registry_url: str | None) -> None:
    """Raise PlanError when the source's columns cannot be written in its formats."""
    try:
        _formats(source, registry_url)
        for column in source.columns:
            to_spark(column.type)
        if source.timestamp_column is not None:
            check_timestamp_column(source.column(source.timestamp_column).type, source.timestamp_format)
    except (serde.SerdeError, UnsupportedType, TimestampFormatError) as e:
        raise PlanError(str(e)) from None


def decoded_schema(source: DataSource) -> T.StructType:
    fields = [T.StructField(c.name, to_spark(c.type), True) for c in source.columns]
    fields += [T.StructField(ROWTIME, T.LongType(), False), T.StructField(ROWPARTITION, T.IntegerType(), False),
               T.StructField(ROWOFFSET, T.LongType(), False), T.StructField(EVENT_TIME, T.TimestampType(), False),
               T.StructField(TOMBSTONE, T.BooleanType(), False)]
    if source.windowing is not None:
        fields += [T.StructField(WINDOWSTART, T.LongType(), True), T.StructField(WINDOWEND, T.LongType(), True)]
    return T.StructType(fields)


@dataclass
class RecordDecoder:
    """mapInArrow: the source's records (key, value, partition, offset, timestamp) as typed rows.

    A record that does not decode is skipped and logged, as ksqlDB's processing log records it; so is a
    STREAM record with a null value. A TABLE record with a null value is a tombstone for its key.
    """

    source: DataSource
    registry_url: str | None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = self.source
        key_format, value_format = _formats(source, self.registry_url)
        schema = decoded_schema(source)
        arrow_schema = pa.schema([pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"), f.nullable) for f in schema.fields])
        types = [c.type for c in source.columns]
        windowed = source.windowing is not None
        strptime = strptime_format(source.timestamp_format) if source.timestamp_format else None
        for batch in batches:
            data = batch.to_pydict()
            rows = []
            for key, value, partition, offset, timestamp in zip(
                    data["key"], data["value"], data["partition"], data["offset"], data["timestamp"], strict=False):
                try:
                    key_row = key_format.decode(key)
                    values = value_format.decode(value)
                except serde.SerdeError as e:
                    log.warning("skipping %s[%d]@%d: %s", source.topic, partition, offset, e)
                    continue
                if values is None and source.kind == "STREAM":
                    continue
                row = dict(zip((c.name for c in source.key_columns), key_row.values, strict=False))
                row.update(zip((c.name for c in source.value_columns), values or (), strict=False))
                rowtime = epoch_ms(timestamp)
                if source.timestamp_column is not None and values is not None:
                    try:
                        rowtime = epoch_ms(row.get(source.timestamp_column), strptime)
                    except (ValueError, TypeError, OverflowError) as e:
                        log.warning("skipping %s[%d]@%d: bad timestamp: %s", source.topic, partition, offset, e)
                        continue
                    if rowtime is None:
                        continue
                out = [to_arrow_value(row.get(c.name), t) for c, t in zip(source.columns, types, strict=False)]
                out += [rowtime, partition, offset, _utc(rowtime), values is None]
                if windowed:
                    end = key_row.window_end
                    if end is None and source.windowing.size_ms is not None:
                        end = key_row.window_start + source.windowing.size_ms
                    out += [key_row.window_start, end]
                rows.append(out)
            columns = list(zip(*rows, strict=False)) if rows else [[] for _ in arrow_schema]
            yield pa.RecordBatch.from_arrays(
                [pa.array(list(col), type=f.type) for col, f in zip(columns, arrow_schema, strict=False)], schema=arrow_schema)


def _utc(ms: int):
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


ENCODED_SCHEMA = T.StructType([T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
                               T.StructField("timestamp", T.LongType()), T.StructField("partition", T.IntegerType())])


@dataclass
class RecordEncoder:
    """mapInArrow: a plan's rows as the sink's records (key, value, timestamp, partition); a tombstone has a
    null value. A row that cannot be written (a value the format cannot hold, a table row without a key) is
    skipped and logged, as ksqlDB's processing log records it, rather than failing the query over and over.
    A windowed key goes to the partition of its key without the window, as Kafka Streams places it; other
    keys are left to the producer's partitioner (murmur2, as Java clients)."""

    sink: DataSource
    registry_url: str | None
    partitions: int | None = None  # the sink topic's partition count, for windowed keys

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key_format, value_format = _formats(self.sink, self.registry_url)
        inner_format = key_format
        windowed = self.sink.windowing is not None
        if windowed:
            inner_format, _ = _formats(replace(self.sink, windowing=None), self.registry_url)
        keys, values = self.sink.key_columns, self.sink.value_columns
        keyed = self.sink.kind == "TABLE"
        for batch in batches:
            out: tuple[list, ...] = ([], [], [], [])
            for row in batch.to_pylist():
                key_values = [to_serde_value(row[c.name], c.type) for c in keys]
                if keyed and any(v is None for v in key_values):
                    log.warning("%s: skipping a row with a null key (a table's record needs a key)", self.sink.name)
                    continue
                start, end = (row[WINDOWSTART], row[WINDOWEND]) if windowed else (None, None)
                try:
                    key = key_format.encode(key_values, start, end)
                    value = None if row[TOMBSTONE] else value_format.encode(
                        [to_serde_value(row[c.name], c.type) for c in values])
                    partition = None
                    if windowed and self.partitions and key is not None:
                        partition = partition_for(inner_format.encode(key_values), self.partitions)
                except serde.SerdeError as e:
                    log.warning("%s: skipping a row that cannot be written: %s", self.sink.name, e)
                    continue
                for column, item in zip(out, (key, value, row[ROWTIME], partition), strict=True):
                    column.append(item)
            yield pa.RecordBatch.from_arrays(
                [pa.array(out[0], pa.binary()), pa.array(out[1], pa.binary()), pa.array(out[2], pa.int64()),
                 pa.array(out[3], pa.int32())], names=["key", "value", "timestamp", "partition"])


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class _Entry:
    qualifiers: frozenset[str]
    name: str
    column: str  # the Spark column


class Scope:
    """The columns an expression may name, and the Spark column each one is."""

    def __init__(self, frame: DataFrame, entries: list[_Entry], pseudo: dict[str, str],
                 substitutions: dict[ast.Expression, str] | None = None, grouped: bool = False):
        self.frame = frame
        self.entries = entries
        self.pseudo = pseudo
        self.substitutions = substitutions or {}
        self.grouped = grouped

    def resolve(self, ref: ast.ColumnRef) -> str:
        matches = [e for e in self.entries if e.name == ref.name
                   and (ref.qualifier is None or ref.qualifier in e.qualifiers)]
        if not matches:
            shown = f"{ref.qualifier}.{ref.name}" if ref.qualifier else ref.name
            raise PlanError(f"column '{shown}' cannot be resolved", ref.name)
        if len(matches) > 1:
            raise PlanError(f"column '{ref.name}' is ambiguous", ref.name)
        return matches[0].column

    def type_of(self, column: Column) -> T.DataType:
        return self.frame.select(column.alias("c")).schema[0].dataType


_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


class Translator:
    """AST expressions to Spark columns, in a scope."""

    def __init__(self, scope: Scope):
        self.scope = scope

    def column(self, e: ast.Expression) -> Column:
        name = self.scope.substitutions.get(_unqualified(e))
        if name is not None:
            return F.col(name)
        method = getattr(self, "_" + type(e).__name__)
        return method(e)

    def _IntegerLiteral(self, e):
        return F.lit(e.value)

    def _DecimalLiteral(self, e):
        return F.lit(e.value)

    def _StringLiteral(self, e):
        return F.lit(e.value)

    def _BooleanLiteral(self, e):
        return F.lit(e.value)

    def _NullLiteral(self, e):
        return F.lit(None)

    def _ColumnRef(self, e):
        if self.scope.grouped:
            raise PlanError(f"non-aggregate SELECT expression(s) not part of GROUP BY: {e.name}", e.name)
        return F.col(self.scope.resolve(e))

    def _PseudoColumn(self, e):
        column = self.scope.pseudo.get(e.name)
        if column is None:
            raise PlanError(f"{e.name} is not available here"
                            + (" (only in windowed queries)" if e.name.startswith("WINDOW") else ""), e.name)
        return F.col(column)

    def _BinaryArithmetic(self, e):
        left, right = self.column(e.left), self.column(e.right)
        lt, rt = self.scope.type_of(left), self.scope.type_of(right)
        if e.op == "+" and (isinstance(lt, T.StringType) or isinstance(rt, T.StringType)):
            return F.concat(left, right)
        if e.op == "/" and isinstance(lt, _INTEGRAL) and isinstance(rt, _INTEGRAL):
            # integer division truncates, as in Java; a zero divisor gives null
            result = F.call_function("div", left, right)
            both_int = not isinstance(lt, T.LongType) and not isinstance(rt, T.LongType)
            return result.cast("int") if both_int else result
        return {"+": left + right, "-": left - right, "*": left * right, "/": left / right,
                "%": left % right}[e.op]

    def _Negate(self, e):
        return -self.column(e.operand)

    def _Comparison(self, e):
        left, right = self.column(e.left), self.column(e.right)
        return {"=": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
                ">": left > right, ">=": left >= right}[e.op]

    def _And(self, e):
        return self.column(e.left) & self.column(e.right)

    def _Or(self, e):
        return self.column(e.left) | self.column(e.right)

    def _Not(self, e):
        return ~self.column(e.operand)

    def _IsNull(self, e):
        operand = self.column(e.operand)
        return operand.isNotNull() if e.negated else operand.isNull()

    def _Between(self, e):
        result = self.column(e.operand).between(self.column(e.low), self.column(e.high))
        return ~result if e.negated else result

    def _InList(self, e):
        result = self.column(e.operand).isin([self.column(i) for i in e.items])
        return ~result if e.negated else result

    def _Like(self, e):
        pattern = e.pattern
        if not isinstance(pattern, ast.StringLiteral):
            raise PlanError("LIKE needs a string literal pattern")
        result = self.column(e.operand).like(pattern.value)
        return ~result if e.negated else result

    def _Case(self, e):
        result = None
        for when in e.whens:
            condition = self.column(when.condition)
            if e.operand is not None:
                condition = self.column(e.operand) == condition
            value = self.column(when.result)
            result = F.when(condition, value) if result is None else result.when(condition, value)
        return result.otherwise(self.column(e.else_)) if e.else_ is not None else result

    def _Cast(self, e):
        try:
            return self.column(e.operand).cast(to_spark(e.type))
        except UnsupportedType as error:
            raise PlanError(str(error)) from None

    def _FunctionCall(self, e):
        if e.name in AGGREGATE_NAMES:
            raise PlanError(f"aggregate function {e.name} is only allowed in a SELECT with GROUP BY", e.name)
        unit_at = functions.TIME_UNIT_ARGUMENT.get(e.name)
        args = [F.lit(str(a.name)) if i == unit_at and isinstance(a, ast.ColumnRef) else self.column(a)
                for i, a in enumerate(e.args)]  # DATEADD(DAYS, ...): the unit is a keyword, not a column
        try:
            return functions.scalar(e.name, args, [self.scope.type_of(a) for a in args])
        except functions.FunctionError as error:
            raise PlanError(str(error), e.name) from None

    def _FieldAccess(self, e):
        return self.column(e.operand).getField(e.field)

    def _Subscript(self, e):
        return F.element_at(self.column(e.operand), self.column(e.index))


def _unqualified(e: ast.Expression) -> ast.Expression:
    """Column references without their qualifier, so `s.id` and `id` match the same GROUP BY expression."""
    if isinstance(e, ast.ColumnRef) and e.qualifier is not None:
        return ast.ColumnRef(e.name)
    return e


def _find_aggregates(e, found: list[ast.FunctionCall]) -> None:
    if isinstance(e, ast.FunctionCall) and e.name in AGGREGATE_NAMES:
        if e not in found:
            found.append(e)
        return
    for value in vars(e).values() if hasattr(e, "__dict__") else ():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, ast.Expression | ast.WhenClause):
                _find_aggregates(item, found)


def _column_refs(e) -> list[ast.ColumnRef]:
    if isinstance(e, ast.ColumnRef):
        return [e]
    found = []
    for value in vars(e).values() if hasattr(e, "__dict__") else ():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, ast.Expression | ast.WhenClause):
                found += _column_refs(item)
    return found


def _auto_name(e: ast.Expression, index: int) -> str:
    if isinstance(e, ast.ColumnRef):
        return str(e.name)
    if isinstance(e, ast.FieldAccess):
        return e.field
    if isinstance(e, ast.PseudoColumn):
        return str(e.name)
    return f"KSQL_COL_{index}"


# ---------------------------------------------------------------- queries


class Planner:
    def __init__(self, spark: SparkSession, catalog: Catalog, bootstrap: str, client_config: dict | None = None,
                 registry_url: str | None = None):
        self.spark = spark
        self.catalog = catalog
        self.bootstrap = bootstrap
        self.client_config = client_config or {}
        self.registry_url = registry_url

    def source_frame(self, source: DataSource, offset_reset: str) -> DataFrame:
        reader = (self.spark.readStream.format("odradek")
                  .option("kafka.bootstrap.servers", self.bootstrap)
                  .option("kafka.isolation.level", "read_committed")
                  .option("subscribe", source.topic)
                  .option("startingOffsets", offset_reset)
                  .option("failOnDataLoss", "false"))
        for name, value in self.client_config.items():
            reader = reader.option(f"kafka.{name}", value)
        raw = reader.load().select("key", "value", "partition", "offset", "timestamp")
        return raw.mapInArrow(RecordDecoder(source, self.registry_url), decoded_schema(source))

    def encode(self, plan: QueryPlan, sink: DataSource, partitions: int | None = None) -> DataFrame:
        return plan.frame.mapInArrow(RecordEncoder(sink, self.registry_url, partitions), ENCODED_SCHEMA)

    def plan(self, select: ast.Select, offset_reset: str, persistent: bool) -> QueryPlan:
        try:
            return self._plan(select, offset_reset, persistent)
        except PySparkException as e:  # Spark's analysis refused an expression (a type mismatch, say)
            message = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise PlanError(message) from None

    def _plan(self, select: ast.Select, offset_reset: str, persistent: bool) -> QueryPlan:
        if select.joins:
            return self._join(select, offset_reset, persistent)
        source = self._source(select.source)
        frame = self.source_frame(source, offset_reset)
        qualifiers = frozenset({source.name} | ({select.source.alias} if select.source.alias else set()))
        entries = [_Entry(qualifiers, c.name, c.name) for c in source.columns]
        pseudo = {"ROWTIME": ROWTIME, "ROWPARTITION": ROWPARTITION, "ROWOFFSET": ROWOFFSET}
        if source.windowing is not None:
            pseudo.update(WINDOWSTART=WINDOWSTART, WINDOWEND=WINDOWEND)
        scope = Scope(frame, entries, pseudo)
        if select.group_by:
            return self._aggregate(select, source, scope, persistent)
        if select.window is not None:
            raise PlanError("WINDOW needs a GROUP BY")
        if select.having is not None:
            raise PlanError("HAVING needs a GROUP BY")
        if select.emit == "FINAL":
            raise PlanError("EMIT FINAL is only supported for windowed aggregations")
        translate = Translator(scope)
        tombstone = F.col(TOMBSTONE)
        if select.where is not None:
            condition = translate.column(select.where)
            if source.kind == "STREAM":
                frame = frame.where(condition)
                scope.frame = frame
            else:  # a table row that stops matching is deleted downstream
                tombstone = tombstone | ~F.coalesce(condition, F.lit(False))
        items = self._expand(select.items, source)
        if select.partition_by:
            if source.kind == "TABLE":
                raise PlanError("PARTITION BY is not supported on a TABLE: use GROUP BY to re-key a table")
            key_expressions = list(select.partition_by)
        else:
            key_expressions = [ast.ColumnRef(c.name) for c in source.key_columns]
        outputs = [(self._name(item, i), translate.column(item.expression)) for i, item in enumerate(items)]
        keys = self._key_names(items, key_expressions, select, persistent)
        windowing = source.windowing
        extra = [F.col(ROWTIME).alias(ROWTIME), tombstone.alias(TOMBSTONE)]
        if windowing is not None:
            extra += [F.col(WINDOWSTART).alias(WINDOWSTART), F.col(WINDOWEND).alias(WINDOWEND)]
        return self._finish(frame, outputs, keys, extra, source.kind, windowing, (source.name,), persistent)

    def _source(self, ref: ast.SourceRef) -> DataSource:
        try:
            return self.catalog.source(ref.name)
        except CatalogError as e:
            raise PlanError(str(e), ref.name) from None

    # ---------------------------------------------------------------- JOIN

    def _join(self, select: ast.Select, offset_reset: str, persistent: bool) -> QueryPlan:
        if len(select.joins) > 1:
            raise PlanError("a query joins two sources: more than one JOIN is not supported yet",
                            select.joins[1].source.name)
        if select.group_by or select.window is not None or select.partition_by:
            raise PlanError("GROUP BY, WINDOW and PARTITION BY on a join are not supported yet: join into a "
                            "stream or table first, then aggregate that")
        join = select.joins[0]
        refs = (select.source, join.source)
        left, right = self._source(refs[0]), self._source(refs[1])
        kind = {("STREAM", "TABLE"): "STREAM_TABLE", ("TABLE", "TABLE"): "TABLE_TABLE",
                ("STREAM", "STREAM"): "STREAM_STREAM"}.get((left.kind, right.kind))
        if kind is None:
            raise PlanError("a stream-table join needs the stream on the left: FROM stream JOIN table",
                            refs[0].name)
        if kind == "STREAM_STREAM" and join.within is None:
            raise PlanError("a stream-stream join needs a WITHIN clause", join.source.name)
        if kind != "STREAM_STREAM" and join.within is not None:
            raise PlanError("WITHIN is only for stream-stream joins", join.source.name)
        if kind == "STREAM_TABLE" and join.type == "FULL":
            raise PlanError("a stream-table join is INNER or LEFT", join.source.name)
        qualifiers = [frozenset({r.name} | ({r.alias} if r.alias else set())) for r in refs]
        if qualifiers[0] & qualifiers[1]:
            raise PlanError("both sides of the join have the same name: give them aliases", join.source.name)
        frames = [self.source_frame(s, offset_reset) for s in (left, right)]
        scopes = [Scope(frame, [_Entry(q, c.name, c.name) for c in s.columns],
                        {"ROWTIME": ROWTIME, "ROWPARTITION": ROWPARTITION, "ROWOFFSET": ROWOFFSET})
                  for frame, s, q in zip(frames, (left, right), qualifiers, strict=False)]
        left_key, right_key = self._join_criteria(join.on, scopes)
        for source, key in ((left, left_key), (right, right_key)):
            if source.kind == "TABLE" and not (isinstance(key, ast.ColumnRef) and len(source.key_columns) == 1
                              and key.name == source.key_columns[0].name):
                raise PlanError(f"a join on the TABLE {source.name} must use its PRIMARY KEY "
                                f"({', '.join(c.name for c in source.key_columns)})", getattr(key, "name", None))
        left_jk = Translator(scopes[0]).column(left_key)
        right_jk = Translator(scopes[1]).column(right_key)
        jk_type = scopes[0].type_of(left_jk)
        counts = (len(left.columns), len(right.columns))
        sides = []
        for side, (frame, jk) in enumerate(zip(frames, (left_jk, right_jk), strict=True)):
            columns = [F.col(c.name) if side == 0 else F.lit(None).cast(to_spark(c.type))
                       for c in left.columns]
            columns += [F.col(c.name) if side == 1 else F.lit(None).cast(to_spark(c.type))
                        for c in right.columns]
            names = [f"L{i}" for i in range(counts[0])] + [f"R{i}" for i in range(counts[1])]
            sides.append(frame.select(jk.cast(jk_type).alias("__jk"), F.lit(side).alias("__side"),
                                      *[c.alias(n) for c, n in zip(columns, names, strict=False)],
                                      F.col(ROWTIME), F.col(ROWPARTITION), F.col(ROWOFFSET), F.col(EVENT_TIME),
                                      F.col(TOMBSTONE)).where(F.col("__jk").isNotNull()))
        union = sides[0].unionByName(sides[1])
        within = join.within
        grace = DEFAULT_GRACE_MS if within is None or within.grace_ms is None else within.grace_ms
        spec = JoinSpec(kind, join.type, within.before_ms if within else 0, within.after_ms if within else 0,
                        grace if within else 0)
        if kind == "STREAM_STREAM":
            union = union.withWatermark(EVENT_TIME, f"{spec.delay_ms} milliseconds")
        output = T.StructType(
            [T.StructField("__jk", jk_type)]
            + [T.StructField(f"L{i}", to_spark(c.type)) for i, c in enumerate(left.columns)]
            + [T.StructField(f"R{i}", to_spark(c.type)) for i, c in enumerate(right.columns)]
            + [T.StructField(ROWTIME, T.LongType()), T.StructField(TOMBSTONE, T.BooleanType())])
        timeout = GroupStateTimeout.EventTimeTimeout if kind == "STREAM_STREAM" else GroupStateTimeout.NoTimeout
        joined = union.groupBy("__jk").applyInPandasWithState(
            SparkJoin(JoinStep(spec), counts[0], counts[1], tuple(output.names)), output,
            T.StructType([T.StructField("s", T.BinaryType())]), "append", timeout)
        entries = [_Entry(qualifiers[0], c.name, f"L{i}") for i, c in enumerate(left.columns)]
        entries += [_Entry(qualifiers[1], c.name, f"R{i}") for i, c in enumerate(right.columns)]
        # A FULL join's key is ksqlDB's synthetic ROWKEY (ROWKEY_1, ... if a side has a ROWKEY column): the
        # join key of whichever side is present, since either side's own key column may be null.
        synthetic_key = None
        if join.type == "FULL":
            taken = {c.name for c in (*left.columns, *right.columns)}
            candidates = itertools.chain(["ROWKEY"], (f"ROWKEY_{i}" for i in itertools.count(1)))
            synthetic_key = next(name for name in candidates if name not in taken)
            entries.append(_Entry(frozenset(), synthetic_key, "__jk"))
        scope = Scope(joined, entries, {"ROWTIME": ROWTIME})
        translate = Translator(scope)
        result_kind = "TABLE" if kind == "TABLE_TABLE" else "STREAM"
        tombstone = F.col(TOMBSTONE)
        frame = joined
        if select.where is not None:
            condition = translate.column(select.where)
            if result_kind == "STREAM":
                frame = frame.where(condition)
                scope.frame = frame
            else:
                tombstone = tombstone | ~F.coalesce(condition, F.lit(False))
        aliases = [r.alias or r.name for r in refs]
        items: list[ast.SelectItem] = []
        for item in select.items:
            if isinstance(item, ast.AllColumns):
                if synthetic_key and item.qualifier is None:
                    items.append(ast.SelectItem(ast.ColumnRef(synthetic_key), synthetic_key))
                for index, (source, alias) in enumerate(zip((left, right), aliases, strict=False)):
                    if item.qualifier is None or item.qualifier in qualifiers[index]:
                        items += [ast.SelectItem(ast.ColumnRef(c.name, alias), f"{alias}_{c.name}")
                                  for c in source.columns]
            else:
                items.append(item)
        outputs = [(self._name(item, i), translate.column(item.expression)) for i, item in enumerate(items)]
        if synthetic_key:
            keys = self._key_names(items, [ast.ColumnRef(synthetic_key)], select, persistent)
        else:
            keys = self._key_names(items, [left_key], select, False)
            if not keys:
                keys = self._key_names(items, [right_key], select, persistent)
        extra = [F.col(ROWTIME).alias(ROWTIME), tombstone.alias(TOMBSTONE)]
        return self._finish(frame, outputs, keys, extra, result_kind, None, (left.name, right.name), persistent)

    def _join_criteria(self, on: ast.Expression, scopes: list[Scope]) -> tuple[ast.Expression, ast.Expression]:
        """The left and right expressions of `ON a = b`, whichever order they are written in."""
        if not isinstance(on, ast.Comparison) or on.op != "=":
            raise PlanError("a join's ON clause must be an equality between the two sides (a = b)")

        def side_of(e: ast.Expression) -> int | None:
            refs = [r for r in _column_refs(e)]
            sides = set()
            for ref in refs:
                for index, scope in enumerate(scopes):
                    try:
                        scope.resolve(ref)
                        sides.add(index)
                    except PlanError:
                        pass
            return sides.pop() if len(sides) == 1 else None

        first, second = side_of(on.left), side_of(on.right)
        if (first, second) == (0, 1):
            return on.left, on.right
        if (first, second) == (1, 0):
            return on.right, on.left
        raise PlanError("each side of the join's ON equality must name columns of one source only")

    def _expand(self, items, source: DataSource) -> list[ast.SelectItem]:
        expanded: list[ast.SelectItem] = []
        for item in items:
            if isinstance(item, ast.AllColumns):
                expanded += [ast.SelectItem(ast.ColumnRef(c.name)) for c in source.columns]
            else:
                expanded.append(item)
        return expanded

    @staticmethod
    def _name(item: ast.SelectItem, index: int) -> str:
        return item.alias or _auto_name(item.expression, index)

    def _key_names(self, items, key_expressions, select, persistent: bool) -> list[str]:
        keys = []
        for expression in key_expressions:
            matching = [i for i, item in enumerate(items) if _unqualified(item.expression) == _unqualified(expression)]
            if matching:
                keys.append(self._name(items[matching[0]], matching[0]))
            elif persistent:
                shown = expression.name if isinstance(expression, ast.ColumnRef) else "the key expression"
                raise PlanError(f"the query must include the key column {shown} in its projection "
                                f"(eg, SELECT {shown} ...)", getattr(expression, "name", None))
        return keys

    def _finish(self, frame: DataFrame, outputs, keys: list[str], extra, kind, windowing, sources,
                persistent: bool) -> QueryPlan:
        names = [name for name, _ in outputs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise PlanError(f"duplicate column name {duplicates[0]} in the projection: give one an alias")
        if persistent:
            if windowing is not None:  # the sink's key carries the window bounds
                outputs = [(n, c) for n, c in outputs if n not in ("WINDOWSTART", "WINDOWEND")]
            reserved = [n for n, _ in outputs if n in _PSEUDO]
            if reserved:
                raise PlanError(f"{reserved[0]} is a reserved column name: give it an alias")
        projected = frame.select(*[column.alias(name) for name, column in outputs], *extra)
        columns = []
        for field_ in projected.schema.fields[:len(outputs)]:
            try:
                columns.append(SourceColumn(field_.name, from_spark(field_.dataType), field_.name in keys))
            except UnsupportedType as e:
                raise PlanError(f"column {field_.name}: {e}") from None
        return QueryPlan(projected, kind, tuple(columns), windowing, sources)

    # ---------------------------------------------------------------- GROUP BY

    def _aggregate(self, select: ast.Select, source: DataSource, scope: Scope, persistent: bool) -> QueryPlan:
        if source.kind == "TABLE":
            raise PlanError("aggregating a TABLE is not supported yet: aggregate the stream it is built from")
        if select.partition_by:
            raise PlanError("PARTITION BY and GROUP BY cannot be combined")
        translate = Translator(scope)
        frame = scope.frame
        if select.where is not None:
            frame = frame.where(translate.column(select.where))
            scope.frame = frame
        items = self._expand(select.items, source)
        aggregates: list[ast.FunctionCall] = []
        for item in items:
            _find_aggregates(item.expression, aggregates)
        if select.having is not None:
            _find_aggregates(select.having, aggregates)
        group_columns = [translate.column(g).alias(f"__g{i}") for i, g in enumerate(select.group_by)]
        arg_columns = []
        for i, call in enumerate(aggregates):
            if call.star or (call.name == "COUNT" and not call.args):
                arg_columns.append(F.lit(None).cast("int").alias(f"__a{i}"))
            elif len(call.args) == 1 or (call.name.endswith("_BY_OFFSET") and len(call.args) == 2):
                arg_columns.append(translate.column(call.args[0]).alias(f"__a{i}"))
            else:
                raise PlanError(f"{call.name} takes one argument, got {len(call.args)}", call.name)
        window = self._window_spec(select)
        base = [F.col(ROWTIME).alias(ROWTIME), F.col(ROWPARTITION).alias(ROWPARTITION),
                F.col(ROWOFFSET).alias(ROWOFFSET), F.col(EVENT_TIME).alias(EVENT_TIME)]
        pre = frame.select(*group_columns, *arg_columns, *base)
        for i in range(len(group_columns)):  # ksqlDB drops records whose grouping key is null
            pre = pre.where(F.col(f"__g{i}").isNotNull())
        keys = [f"__g{i}" for i in range(len(group_columns))]
        if window is not None and window.kind != "SESSION":
            size, advance = window.size_ms, (select.window.advance_ms if window.kind == "HOPPING" else window.size_ms)
            last = F.col(ROWTIME) - F.col(ROWTIME) % F.lit(advance)
            steps = -(-size // advance)
            starts = F.sequence(last - F.lit((steps - 1) * advance), last, F.lit(advance).cast("long"))
            pre = pre.withColumn("__wstart", F.explode(starts))
            pre = pre.where((F.col("__wstart") > F.col(ROWTIME) - F.lit(size)) & (F.col("__wstart") >= 0))
            keys.append("__wstart")
        step = GroupStep([make_aggregate(c.name, c.star or not c.args) for c in aggregates], window,
                         select.emit == "FINAL")
        if select.emit == "FINAL" and window is None:
            raise PlanError("EMIT FINAL is only supported for windowed aggregations")
        if window is not None:
            pre = pre.withWatermark(EVENT_TIME, f"{step.delay_ms} milliseconds")
        group_types = [f.dataType for f in pre.schema.fields[:len(group_columns)]]
        arg_types = [pre.schema[f"__a{i}"].dataType for i in range(len(aggregates))]
        result_types = [_result_type(c.name, t) for c, t in zip(aggregates, arg_types, strict=False)]
        output = T.StructType(
            [T.StructField(f"__g{i}", t) for i, t in enumerate(group_types)]
            + [T.StructField(WINDOWSTART, T.LongType()), T.StructField(WINDOWEND, T.LongType())]
            + [T.StructField(f"__r{i}", t) for i, t in enumerate(result_types)]
            + [T.StructField(ROWTIME, T.LongType()), T.StructField(TOMBSTONE, T.BooleanType())])
        timeout = GroupStateTimeout.EventTimeTimeout if window is not None else GroupStateTimeout.NoTimeout
        aggregated = pre.groupBy(*keys).applyInPandasWithState(
            SparkAggregation(step, tuple(output.names)), output, T.StructType([T.StructField("s", T.BinaryType())]),
            "append", timeout)
        substitutions: dict[ast.Expression, str] = {_unqualified(g): f"__g{i}" for i, g in enumerate(select.group_by)}
        substitutions.update({c: f"__r{i}" for i, c in enumerate(aggregates)})
        pseudo = {"ROWTIME": ROWTIME}
        if window is not None:
            pseudo.update(WINDOWSTART=WINDOWSTART, WINDOWEND=WINDOWEND)
        post = Translator(Scope(aggregated, [], pseudo, substitutions, grouped=True))
        outputs = [(self._name(item, i), post.column(item.expression)) for i, item in enumerate(items)]
        tombstone = F.col(TOMBSTONE)
        if select.having is not None:
            tombstone = tombstone | ~F.coalesce(post.column(select.having), F.lit(False))
        keys_out = self._key_names(items, list(select.group_by), select, persistent)
        windowing = None
        extra = [F.col(ROWTIME).alias(ROWTIME), tombstone.alias(TOMBSTONE)]
        if window is not None:
            windowing = Windowing(window.kind, None if window.kind == "SESSION" else window.size_ms)
            extra += [F.col(WINDOWSTART).alias(WINDOWSTART), F.col(WINDOWEND).alias(WINDOWEND)]
        return self._finish(aggregated, outputs, keys_out, extra, "TABLE", windowing, (source.name,), persistent)

    @staticmethod
    def _window_spec(select: ast.Select) -> WindowSpec | None:
        w = select.window
        if w is None:
            return None
        grace = DEFAULT_GRACE_MS if w.grace_ms is None else w.grace_ms
        if isinstance(w, ast.TumblingWindow):
            return WindowSpec("TUMBLING", w.size_ms, grace)
        if isinstance(w, ast.HoppingWindow):
            if w.advance_ms <= 0 or w.advance_ms > w.size_ms:
                raise PlanError("a HOPPING window's ADVANCE BY must be positive and at most its SIZE")
            return WindowSpec("HOPPING", w.size_ms, grace)
        return WindowSpec("SESSION", w.gap_ms, grace)


def _result_type(name: str, arg: T.DataType) -> T.DataType:
    if name in ("COUNT", "COUNT_DISTINCT"):
        return T.LongType()
    if name == "AVG":
        return T.DoubleType()
    if name == "SUM" and isinstance(arg, T.ByteType | T.ShortType | T.IntegerType):
        return T.LongType()
    if name in ("COLLECT_LIST", "COLLECT_SET"):
        return T.ArrayType(arg, True)
    return arg


def sink_source(plan: QueryPlan, kind: ast.SourceKind, name: str, topic: str, key_format: str, value_format: str,
                properties: dict, statement: str, query_id: str) -> DataSource:
    """The stream or table a CREATE ... AS SELECT makes, with the plan's columns (key columns first)."""
    columns = tuple([c for c in plan.columns if c.key] + [c for c in plan.columns if not c.key])
    return DataSource(kind, name, topic, columns, key_format, value_format, None, None, plan.windowing,
                      properties, statement, query_id)

