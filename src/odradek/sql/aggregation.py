"""GROUP BY as a changelog operator: aggregates per key and window, emitting upserts and tombstones.

Spark's update output mode cannot say "delete this key", and its window aggregations cannot merge sessions
into a keyed changelog, so a SQL aggregation runs as its own operator (`applyInPandasWithState` in append
mode, whose output goes through the exactly-once sink). The core here is sans-I/O: `GroupStep.run` takes one
group's records of a micro-batch, its state and the stream time, and returns the rows to emit, the new
state and when to wake up. `SparkAggregation` wraps it for Spark.

Stream time is the query's watermark plus its delay: the highest ROWTIME seen before this micro-batch, as
Spark tracks it (across partitions; ksqlDB tracks it per partition). A window closes when stream time
reaches its end plus the grace period; a record for a closed window is dropped.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------- the aggregate functions


class Aggregate:
    """One aggregate function: accumulators are plain picklable values."""

    name = ""

    def initial(self) -> Any:
        return None

    def add(self, acc: Any, value: Any, order: tuple) -> Any:
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def result(self, acc: Any) -> Any:
        return acc


class Count(Aggregate):
    """COUNT(*) counts records (star), COUNT(x) the records where x is not null."""

    def __init__(self, star: bool):
        self.star = star

    def initial(self):
        return 0

    def add(self, acc, value, order):
        return acc + (1 if self.star or value is not None else 0)

    def merge(self, a, b):
        return a + b


class Sum(Aggregate):
    def initial(self):
        return 0

    def add(self, acc, value, order):
        return acc if value is None else acc + value

    def merge(self, a, b):
        return a + b


class Avg(Aggregate):
    def initial(self):
        return (0, 0)

    def add(self, acc, value, order):
        return acc if value is None else (acc[0] + value, acc[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def result(self, acc):
        return float(acc[0]) / acc[1] if acc[1] else None


class Extreme(Aggregate):
    def __init__(self, pick):
        self.pick = pick

    def add(self, acc, value, order):
        if value is None:
            return acc
        return value if acc is None else self.pick(acc, value)

    def merge(self, a, b):
        return b if a is None else a if b is None else self.pick(a, b)


class ByOffset(Aggregate):
    """LATEST_BY_OFFSET / EARLIEST_BY_OFFSET: the value of the last (first) record, nulls ignored as ksqlDB does."""

    def __init__(self, latest: bool):
        self.latest = latest

    def add(self, acc, value, order):
        if value is None:
            return acc
        return self.merge(acc, (order, value))

    def merge(self, a, b):
        if a is None or b is None:
            return b if a is None else a
        return (max if self.latest else min)(a, b, key=lambda entry: entry[0])

    def result(self, acc):
        return None if acc is None else acc[1]


class CollectList(Aggregate):
    LIMIT = 1000  # ksqlDB's default ksql.functions.collect_list.limit

    def initial(self):
        return []

    def add(self, acc, value, order):
        return acc + [value] if len(acc) < self.LIMIT else acc

    def merge(self, a, b):
        return (a + b)[: self.LIMIT]


class CollectSet(CollectList):
    def add(self, acc, value, order):
        return acc if value in acc else super().add(acc, value, order)

    def merge(self, a, b):
        return a + [v for v in b if v not in a][: self.LIMIT - len(a)]


class CountDistinct(Aggregate):
    def initial(self):
        return []

    def add(self, acc, value, order):
        return acc if value is None or value in acc else acc + [value]

    def merge(self, a, b):
        return a + [v for v in b if v not in a]

    def result(self, acc):
        return len(acc)


def make_aggregate(name: str, star: bool) -> Aggregate:
    if name == "COUNT":
        return Count(star)
    factories = {
        "SUM": Sum, "AVG": Avg, "COLLECT_LIST": CollectList, "COLLECT_SET": CollectSet,
        "COUNT_DISTINCT": CountDistinct,
        "MIN": lambda: Extreme(min), "MAX": lambda: Extreme(max),
        "LATEST_BY_OFFSET": lambda: ByOffset(True), "EARLIEST_BY_OFFSET": lambda: ByOffset(False),
    }
    return factories[name]()


AGGREGATE_NAMES = frozenset(
    {"COUNT", "SUM", "AVG", "MIN", "MAX", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET", "COLLECT_LIST",
     "COLLECT_SET", "COUNT_DISTINCT"}
)


# ---------------------------------------------------------------- one group's step


@dataclass(frozen=True)
class Record:
    rowtime: int
    order: tuple  # (partition, offset): which record is later, for the *_BY_OFFSET aggregates
    values: tuple  # one per aggregate: its argument's value


@dataclass(frozen=True)
class Emit:
    window_start: int | None
    window_end: int | None
    results: tuple | None  # None: a tombstone for this key and window
    rowtime: int


@dataclass
class Session:
    start: int
    end: int
    accs: list
    rowtime: int
    emitted: bool = False
    closed: bool = False  # past its close time; kept a gap longer, so a record it would reach still merges


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # TUMBLING, HOPPING, SESSION
    size_ms: int  # TUMBLING and HOPPING: the size; SESSION: the inactivity gap
    grace_ms: int


@dataclass
class GroupStep:
    """The operator's logic for one group key (and, for TUMBLING and HOPPING, one window start)."""

    aggregates: list[Aggregate]
    window: WindowSpec | None = None
    emit_final: bool = False

    @property
    def delay_ms(self) -> int:
        """The watermark's delay: a record older than stream time minus this belongs to no open window."""
        return 0 if self.window is None else self.window.size_ms + self.window.grace_ms

    def run(self, state: Any, records: Iterable[Record], window_start: int | None, stream_time: int | None,
            timed_out: bool) -> tuple[list[Emit], Any, int | None]:
        """(rows to emit, new state or None to drop it, the stream time at which to run again or None).

        The state counts the group's micro-batches, so a record's order for the *_BY_OFFSET aggregates is
        (batch, partition, offset): a later batch always wins, whichever partition its record came from.
        """
        inner, batches = state if state is not None else (None, 0)
        batches += 1
        records = [Record(r.rowtime, (batches, *r.order), r.values) for r in records]
        if self.window is None:
            emits, inner, wake = self._unwindowed(inner, records)
        elif self.window.kind == "SESSION":
            emits, inner, wake = self._sessions(inner or [], records, stream_time)
        else:
            emits, inner, wake = self._time_window(inner, records, window_start, stream_time, timed_out)
        return emits, (None if inner is None else (inner, batches)), wake

    def _accumulate(self, accs: list, record: Record) -> list:
        return [agg.add(acc, value, record.order) for agg, acc, value in zip(self.aggregates, accs, record.values, strict=False)]

    def _results(self, accs: list) -> tuple:
        return tuple(agg.result(acc) for agg, acc in zip(self.aggregates, accs, strict=False))

    def _fold(self, state, records) -> tuple[list, int, bool]:
        """The accumulators and latest ROWTIME after the records, and whether there was any."""
        accs, rowtime = state or ([agg.initial() for agg in self.aggregates], 0)
        seen = False
        for record in records:
            accs = self._accumulate(accs, record)
            rowtime = max(rowtime, record.rowtime)
            seen = True
        return accs, rowtime, seen

    def _unwindowed(self, state, records):
        accs, rowtime, seen = self._fold(state, records)
        emits = [Emit(None, None, self._results(accs), rowtime)] if seen else []
        return emits, (accs, rowtime), None

    def _time_window(self, state, records, start, stream_time, timed_out):
        end = start + self.window.size_ms
        closes_at = end + self.window.grace_ms
        if timed_out or (stream_time is not None and stream_time >= closes_at):
            if state is not None and self.emit_final:
                return [Emit(start, end, self._results(state[0]), state[1])], None, None
            return [], None, None  # every record of this batch is late: its window has closed
        accs, rowtime, seen = self._fold(state, records)
        if not seen:
            return [], state, closes_at
        emits = [] if self.emit_final else [Emit(start, end, self._results(accs), rowtime)]
        return emits, (accs, rowtime), closes_at

    def _sessions(self, sessions: list[Session], records, stream_time):
        # A session closes when stream time passes its end plus the gap and the grace period (Kafka Streams'
        # close time): until then a record within the gap may still extend it.
        gap, grace = self.window.size_ms, self.window.grace_ms
        linger = gap + grace
        emits: list[Emit] = []
        changed: list[Session] = []
        for record in sorted(records, key=lambda r: (r.rowtime, r.order)):
            t = record.rowtime
            overlapping = [s for s in sessions if s.start - gap <= t <= s.end + gap]
            start = min([t] + [s.start for s in overlapping])
            end = max([t] + [s.end for s in overlapping])
            if stream_time is not None and end + linger < stream_time:
                continue  # late: the session it would make has closed
            accs = [agg.initial() for agg in self.aggregates]
            rowtime = t
            for s in overlapping:
                accs = [agg.merge(a, b) for agg, a, b in zip(self.aggregates, accs, s.accs, strict=False)]
                rowtime = max(rowtime, s.rowtime)
                sessions.remove(s)
                if s in changed:
                    changed.remove(s)
                if s.emitted and not self.emit_final:
                    emits.append(Emit(s.start, s.end, None, rowtime))
            merged = Session(start, end, self._accumulate(accs, record), rowtime)
            sessions.append(merged)
            changed.append(merged)
        if not self.emit_final:
            for s in changed:
                emits.append(Emit(s.start, s.end, self._results(s.accs), s.rowtime))
                s.emitted = True
        if stream_time is not None:
            for s in [s for s in sessions if not s.closed and s.end + linger <= stream_time]:
                if self.emit_final:
                    emits.append(Emit(s.start, s.end, self._results(s.accs), s.rowtime))
                s.closed = True
            # Kafka Streams keeps a closed session in its store for a while, and a record within the gap of it
            # still merges with it: keep it until no record that is not late could reach it.
            for s in [s for s in sessions if s.end + linger + gap <= stream_time]:
                sessions.remove(s)
        if not sessions:
            return emits, None, None
        return emits, sessions, min(s.end + linger + (gap if s.closed else 0) for s in sessions)


# ---------------------------------------------------------------- the Spark wrapper


@dataclass
class SparkAggregation:
    """The function given to `applyInPandasWithState`.

    Input columns (by name): the group key columns `__g<i>`, one `__a<i>` per aggregate, `__rowtime`,
    `__rowpartition`, `__rowoffset`, `__ts`, and for TUMBLING and HOPPING `__wstart`. Output: the group key columns,
    `WINDOWSTART`, `WINDOWEND`, one `__r<i>` per aggregate, `__rowtime`, `__tombstone`.
    """

    step: GroupStep
    output_names: tuple[str, ...]  # Spark matches the returned frame's columns to the output schema by name

    def __call__(self, key: tuple, frames: Iterator, state) -> Iterator:
        import pandas as pd

        key = tuple(k.item() if hasattr(k, "item") else k for k in key)
        group_key, window_start = (key, None)
        if self.step.window is not None and self.step.window.kind != "SESSION":
            group_key, window_start = key[:-1], key[-1]
        watermark = state.getCurrentWatermarkMs() if self.step.window is not None else 0
        stream_time = watermark + self.step.delay_ms if watermark > 0 else None
        previous = pickle.loads(state.get[0]) if state.exists else None
        records = [] if state.hasTimedOut else list(self._records(frames))
        emits, new_state, wake_at = self.step.run(previous, records, window_start, stream_time, state.hasTimedOut)
        if new_state is None:
            state.remove()
        else:
            state.update((pickle.dumps(new_state),))
            if wake_at is not None:
                # Spark fires the timeout once the watermark passes this; the watermark trails stream time
                # by the delay, so this fires when stream time reaches wake_at.
                timeout = wake_at - self.step.delay_ms - 1
                if timeout >= max(watermark, 1):  # Spark takes only a positive timeout, not below the watermark
                    state.setTimeoutTimestamp(timeout)
        rows = [
            (*group_key, e.window_start, e.window_end, *(e.results or (None,) * len(self.step.aggregates)),
             e.rowtime, e.results is None)
            for e in emits
        ]
        if rows:
            yield pd.DataFrame(rows, columns=list(self.output_names), dtype=object)

    def _records(self, frames: Iterator) -> Iterator[Record]:
        count = len(self.step.aggregates)
        for frame in frames:
            args = [frame[f"__a{i}"].tolist() for i in range(count)]
            rowtimes = frame["__rowtime"].tolist()
            partitions = frame["__rowpartition"].tolist()
            offsets = frame["__rowoffset"].tolist()
            for row in range(len(rowtimes)):
                values = tuple(plain_value(args[i][row]) for i in range(count))
                yield Record(int(rowtimes[row]), (int(partitions[row]), int(offsets[row])), values)


def plain_value(value):
    """pandas gives NaN for a null double and numpy arrays for arrays: make them None and lists."""
    if value is None:
        return None
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "tolist"):
        return value.tolist()
    return value
