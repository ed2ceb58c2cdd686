"""The storage a Raft core drives: the replicated log and the durable quorum state.

`RaftLog` is the interface (offsets start at 0; `end_offset` is one past the last entry); `MemoryLog`
implements it in memory with an explicit durable prefix, so a simulated crash keeps exactly what was
flushed. `QuorumStateStore` persists (epoch, voted_for, leader_id) synchronously, as KRaft's
quorum-state file does: the core never sends a vote before the store has it. The durable, file-backed
implementations are in `odradek.raft.file_log`.
"""

from dataclasses import dataclass
from typing import Protocol

from odradek.raft.messages import NO_LEADER, Entry


class RaftLog(Protocol):
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


class MemoryLog:
    """An in-memory `RaftLog`; `crash()` drops everything not yet flushed."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._durable: list[Entry] = []
        self._flushed_end = 0

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; 0 for offset -1 (the empty prefix)."""
        return self.entries[offset].epoch if offset >= 0 else 0

    def read(self, start: int, max_entries: int) -> tuple[Entry, ...]:
        return tuple(self.entries[start:start + max_entries])

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        for entry in entries:
            if entry.epoch < self.last_epoch():
                raise ValueError(f"epoch {entry.epoch} after {self.last_epoch()}")
            self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]
        self._flushed_end = min(self._flushed_end, offset)

    def flush(self) -> None:
        self._durable = list(self.entries)
        self._flushed_end = len(self.entries)

    def crash(self) -> None:
        self.entries = list(self._durable)
        self._flushed_end = len(self.entries)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` in the log and the offset where it ends (KIP-101/KIP-595).

        Returns (0, 0) when the log holds no entry of an epoch <= `epoch`.
        """
        for offset in range(len(self.entries) - 1, -1, -1):
            found = self.entries[offset].epoch
            if found <= epoch:
                return found, offset + 1
        return 0, 0


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
