"""The storage a Raft core drives: the replicated log with its latest snapshot, and the durable quorum state.

`RaftLog` is the interface. Offsets are absolute and start at 0; `end_offset` is one past the last entry.
A snapshot (KIP-630) holds the state machine's state for every entry below its `end_offset`; the log keeps
the latest one only. Entries below `start_offset` are gone from the log and live only in that snapshot:

- `start_offset <= snapshot.end_offset <= end_offset`, and the log's epoch at `snapshot.end_offset - 1` is the
  snapshot's epoch (the log holds the snapshot's last entry, or starts right after it). Without a snapshot,
  `start_offset == 0`. `save_snapshot` restores this at once when the log does not hold the snapshot's last
  entry (a follower installing the leader's snapshot): the log becomes empty, starting at its end offset.
- `epoch_at(start_offset - 1)` answers the epoch before the first entry held (the snapshot's epoch when the
  prefix was dropped up to it, 0 for offset -1); an offset further back raises `IndexError`, as does one at or
  past `end_offset`. `read(start, n)` raises `IndexError` for `start < start_offset`: those entries are only in
  the snapshot, and silently returning nothing would let a caller apply past a hole.
- `end_offset_for_epoch(epoch)` is exact for any epoch >= the epoch at `start_offset - 1`; for an older one
  the answer is in the dropped prefix and it returns (-1, -1) (a leader then sends its snapshot instead).
- `save_snapshot` and `truncate_prefix_to` are durable on return (the snapshot first, then the prefix drop),
  and `truncate_prefix_to` leaves every remaining entry flushed. `truncate_to` never cuts into the snapshot.

`MemoryLog` implements it in memory with an explicit durable state, so a simulated crash keeps exactly what
was flushed plus the saved snapshot. `QuorumStateStore` persists (epoch, voted_for, leader_id)
synchronously, as KRaft's quorum-state file does: the core never sends a vote before the store has it. The
durable, file-backed implementations are in `odradek.raft.file_log`.
"""

from dataclasses import dataclass
from typing import Protocol

from odradek.raft.messages import NO_LEADER, Entry, Snapshot

UNKNOWN_EPOCH_END = (-1, -1)  # end_offset_for_epoch of an epoch whose end lies in the dropped prefix


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def flushed_end_offset(self) -> int: ...

    def last_epoch(self) -> int: ...

    def epoch_at(self, offset: int) -> int: ...

    def read(self, start: int, max_entries: int) -> tuple[Entry, ...]: ...

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def flush(self) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def latest_snapshot(self) -> Snapshot | None: ...

    def save_snapshot(self, snapshot: Snapshot) -> None: ...

    def truncate_prefix_to(self, offset: int) -> None: ...


def holds_last_entry_of(log: RaftLog, snapshot: Snapshot) -> bool:
    """Whether `log` holds `snapshot`'s last entry (or starts right after it): then, by log matching, its
    entries up to the snapshot's end are the ones the snapshot covers."""
    end = snapshot.end_offset
    return log.start_offset <= end <= log.end_offset and log.epoch_at(end - 1) == snapshot.epoch


class MemoryLog:
    """An in-memory `RaftLog`; `crash()` drops everything not yet flushed but keeps the saved snapshot."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []  # the entries from start_offset on
        self._start = 0
        self._start_epoch = 0  # epoch of the entry at start_offset - 1
        self._snapshot: Snapshot | None = None
        self._durable: list[Entry] = []  # what a crash keeps, from start_offset on
        self._flushed_end = 0

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self.entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self._start_epoch

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; for `start_offset - 1`, the epoch before the log (0 for offset -1)."""
        index = offset - self._start
        if index == -1:
            return self._start_epoch
        if index < -1:
            raise IndexError(f"offset {offset} is before the log start {self._start}: only in the snapshot")
        return self.entries[index].epoch

    def read(self, start: int, max_entries: int) -> tuple[Entry, ...]:
        if start < self._start:
            raise IndexError(f"offset {start} is before the log start {self._start}: only in the snapshot")
        index = start - self._start
        return tuple(self.entries[index:index + max_entries])

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        for entry in entries:
            if entry.epoch < self.last_epoch():
                raise ValueError(f"epoch {entry.epoch} after {self.last_epoch()}")
            self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries from `offset` on (not durable until the next flush)."""
        if offset < (self._snapshot.end_offset if self._snapshot else 0):
            raise ValueError(f"truncating to {offset} would cut into the snapshot {self._snapshot}")
        del self.entries[offset - self._start:]
        self._flushed_end = min(self._flushed_end, offset)

    def flush(self) -> None:
        self._durable = list(self.entries)
        self._flushed_end = self.end_offset

    def crash(self) -> None:
        self.entries = list(self._durable)
        self._flushed_end = self.end_offset
        if self._snapshot is not None and not holds_last_entry_of(self, self._snapshot):
            # The snapshot is durable but the entries it ends with were not flushed: start after it.
            self._restart_at(self._snapshot.end_offset, self._snapshot.epoch, [])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` in the log and the offset where it ends (KIP-101/KIP-595).

        Returns (0, 0) when the log holds no entry of an epoch <= `epoch`; when entries were dropped below
        `start_offset`, it counts the epoch before the log as an entry ending there, and returns (-1, -1)
        for an epoch older than that one.
        """
        for index in range(len(self.entries) - 1, -1, -1):
            found = self.entries[index].epoch
            if found <= epoch:
                return found, self._start + index + 1
        if self._start == 0 or epoch >= self._start_epoch:
            return self._start_epoch, self._start
        return UNKNOWN_EPOCH_END

    def latest_snapshot(self) -> Snapshot | None:
        return self._snapshot

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Keep `snapshot` as the latest (durably); it must be newer than the current one. If the log does not
        hold its last entry, the log is emptied and starts at the snapshot's end offset."""
        if self._snapshot is not None and snapshot.end_offset <= self._snapshot.end_offset:
            raise ValueError(f"snapshot {snapshot.end_offset} is not newer than {self._snapshot.end_offset}")
        self._snapshot = snapshot
        if not holds_last_entry_of(self, snapshot):
            self._restart_at(snapshot.end_offset, snapshot.epoch, [])

    def truncate_prefix_to(self, offset: int) -> None:
        """Drop the entries below `offset`, which the latest snapshot must cover; durable, and flushes the rest."""
        if offset <= self._start:
            return
        if self._snapshot is None or offset > self._snapshot.end_offset:
            raise ValueError(f"no snapshot covers the entries below {offset}")
        self._restart_at(offset, self.epoch_at(offset - 1), self.entries[offset - self._start:])

    def _restart_at(self, start: int, start_epoch: int, entries: list[Entry]) -> None:
        self._start, self._start_epoch = start, start_epoch
        self.entries = list(entries)
        self.flush()


@dataclass(frozen=True, slots=True)
class QuorumState:
    epoch: int = 0
    voted_for: int = NO_LEADER
    leader_id: int = NO_LEADER


class QuorumStateStore:
    """Durable (fsynced) quorum state; in memory here, surviving simulated crashes."""

    def __init__(self) -> None:
        self.state = QuorumState()

    def load(self) -> QuorumState:
        return self.state

    def save(self, state: QuorumState) -> None:
        self.state = state
