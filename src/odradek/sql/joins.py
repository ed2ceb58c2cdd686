"""JOIN as an operator over both sides' records, co-grouped by the join key.

Both inputs are unioned and grouped by the join key (so Spark's shuffle repartitions them: no
co-partitioning is needed), and one `applyInPandasWithState` function keeps what each kind of join must
remember. The core is sans-I/O: `JoinStep.run` takes one key's records of a micro-batch, in time order.

- stream-table: the table's latest row for the key; a stream record joins the row as of its own time (a
  table update at the same or an earlier ROWTIME in the batch applies first). LEFT emits nulls on a miss.
- table-table: both sides' latest rows; every change emits the joined row, or a tombstone when the join
  type no longer holds (INNER needs both, LEFT the left, FULL either).
- stream-stream: records of both sides buffered for the WITHIN window plus grace; a new record joins the
  other side's records within the window. LEFT and FULL emit a record with nulls once its window has
  closed without a match (stream time past its time + after + grace), as Kafka Streams does with grace.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from odradek.sql.aggregation import plain_value

LEFT, RIGHT = 0, 1


@dataclass(frozen=True)
class JoinRecord:
    side: int
    rowtime: int
    order: tuple
    values: tuple | None  # None: a table tombstone


@dataclass(frozen=True)
class Joined:
    left: tuple | None
    right: tuple | None
    rowtime: int
    tombstone: bool = False


@dataclass
class Buffered:
    rowtime: int
    order: tuple
    values: tuple
    matched: bool = False


@dataclass(frozen=True)
class JoinSpec:
    kind: str  # STREAM_TABLE, TABLE_TABLE, STREAM_STREAM
    type: str  # INNER, LEFT, FULL
    before_ms: int = 0  # STREAM_STREAM: the right record may be this much older than the left one
    after_ms: int = 0  # ... or this much newer
    grace_ms: int = 0

    @property
    def delay_ms(self) -> int:
        """The watermark's delay: a record older than stream time minus this can join nothing any more."""
        return self.before_ms + self.after_ms + self.grace_ms if self.kind == "STREAM_STREAM" else 0


@dataclass
class JoinStep:
    spec: JoinSpec
    emitted: list = field(default_factory=list)

    def run(self, state: Any, records: Iterable[JoinRecord], stream_time: int | None
            ) -> tuple[list[Joined], Any, int | None]:
        """(rows to emit, new state or None to drop it, the stream time at which to run again or None)."""
        ordered = sorted(records, key=lambda r: (r.rowtime, -r.side if self.spec.kind == "STREAM_TABLE" else 0,
                                                 r.order))
        if self.spec.kind == "STREAM_TABLE":
            return self._stream_table(state, ordered)
        if self.spec.kind == "TABLE_TABLE":
            return self._table_table(state, ordered)
        return self._stream_stream(state or ([], []), ordered, stream_time)

    def _stream_table(self, table_row, records):
        out = []
        for r in records:
            if r.side == RIGHT:
                table_row = r.values
            elif table_row is not None or self.spec.type == "LEFT":
                out.append(Joined(r.values, table_row, r.rowtime))
        return out, table_row, None

    def _table_table(self, state, records):
        left, right, rowtime = state or (None, None, 0)
        if not records:
            return [], state, None
        for r in records:
            if r.side == LEFT:
                left = r.values
            else:
                right = r.values
            rowtime = max(rowtime, r.rowtime)
        holds = {"INNER": left is not None and right is not None, "LEFT": left is not None,
                 "FULL": left is not None or right is not None}[self.spec.type]
        out = [Joined(left, right, rowtime, tombstone=not holds)]
        return out, ((left, right, rowtime) if left is not None or right is not None else None), None

    def _closes_at(self, side: int, rowtime: int) -> int:
        return rowtime + (self.spec.after_ms if side == LEFT else self.spec.before_ms) + self.spec.grace_ms

    def _stream_stream(self, state, records, stream_time):
        lefts, rights = state
        spec = self.spec
        out = []
        for r in records:
            if stream_time is not None and self._closes_at(r.side, r.rowtime) < stream_time:
                continue  # late: its window has closed
            record = Buffered(r.rowtime, r.order, r.values)
            if r.side == LEFT:
                for other in rights:
                    if r.rowtime - spec.before_ms <= other.rowtime <= r.rowtime + spec.after_ms:
                        out.append(Joined(record.values, other.values, max(r.rowtime, other.rowtime)))
                        record.matched = other.matched = True
                lefts.append(record)
            else:
                for other in lefts:
                    if other.rowtime - spec.before_ms <= r.rowtime <= other.rowtime + spec.after_ms:
                        out.append(Joined(other.values, record.values, max(r.rowtime, other.rowtime)))
                        record.matched = other.matched = True
                rights.append(record)
        if stream_time is not None:
            out += self._expire(lefts, LEFT, stream_time)
            out += self._expire(rights, RIGHT, stream_time)
        if not lefts and not rights:
            return out, None, None
        wake = min(self._closes_at(LEFT, b.rowtime) for b in lefts) if lefts else None
        if rights:
            right_wake = min(self._closes_at(RIGHT, b.rowtime) for b in rights)
            wake = right_wake if wake is None else min(wake, right_wake)
        return out, (lefts, rights), wake

    def _expire(self, buffered: list[Buffered], side: int, stream_time: int) -> list[Joined]:
        """Drop the records whose window has closed; an unmatched one is emitted with nulls if the type says so."""
        pads = self.spec.type == "FULL" or (self.spec.type == "LEFT" and side == LEFT)
        out = []
        for b in [b for b in buffered if self._closes_at(side, b.rowtime) <= stream_time]:
            if pads and not b.matched:
                out.append(Joined(b.values, None, b.rowtime) if side == LEFT else Joined(None, b.values, b.rowtime))
            buffered.remove(b)
        return out


@dataclass
class SparkJoin:
    """The function given to `applyInPandasWithState`.

    Input columns: `__jk`, `__side`, `L0..` (left), `R0..` (right), `__rowtime`, `__rowpartition`,
    `__rowoffset`, `__tombstone`. Output: `__jk`, `L0..`, `R0..`, `__rowtime`, `__tombstone`.
    """

    step: JoinStep
    left_columns: int
    right_columns: int
    output_names: tuple[str, ...]  # Spark matches the returned frame's columns to the output schema by name

    def __call__(self, key: tuple, frames: Iterator, state) -> Iterator:
        import pandas as pd

        join_key = key[0].item() if hasattr(key[0], "item") else key[0]
        watermark = state.getCurrentWatermarkMs() if self.step.spec.kind == "STREAM_STREAM" else 0
        stream_time = watermark + self.step.spec.delay_ms if watermark > 0 else None
        previous = pickle.loads(state.get[0]) if state.exists else None
        records = [] if state.hasTimedOut else list(self._records(frames))
        joined, new_state, wake_at = self.step.run(previous, records, stream_time)
        if new_state is None:
            state.remove()
        else:
            state.update((pickle.dumps(new_state),))
            if wake_at is not None:
                # Spark fires the timeout once the watermark passes this: when stream time reaches wake_at
                timeout = wake_at - self.step.spec.delay_ms - 1
                if timeout >= max(watermark, 1):  # Spark takes only a positive timeout, not below the watermark
                    state.setTimeoutTimestamp(timeout)
        rows = [(join_key, *(j.left or (None,) * self.left_columns), *(j.right or (None,) * self.right_columns),
                 j.rowtime, j.tombstone) for j in joined]
        if rows:
            yield pd.DataFrame(rows, columns=list(self.output_names), dtype=object)

    def _records(self, frames: Iterator) -> Iterator[JoinRecord]:
        for frame in frames:
            sides = frame["__side"].tolist()
            lefts = [frame[f"L{i}"].tolist() for i in range(self.left_columns)]
            rights = [frame[f"R{i}"].tolist() for i in range(self.right_columns)]
            rowtimes = frame["__rowtime"].tolist()
            partitions = frame["__rowpartition"].tolist()
            offsets = frame["__rowoffset"].tolist()
            tombstones = frame["__tombstone"].tolist()
            for row, side in enumerate(sides):
                columns = lefts if side == LEFT else rights
                values = None if tombstones[row] else tuple(plain_value(c[row]) for c in columns)
                yield JoinRecord(int(side), int(rowtimes[row]), (int(partitions[row]), int(offsets[row])), values)
