"""Durable Raft storage on local files: the replicated log (`raft.log`) and the quorum state (`quorum-state`).

`FileRaftLog` keeps the log in one append-only file of frames [length u32][crc32c u32][payload] (big-endian;
the CRC-32C covers the payload), the payload being the entry's epoch (i32) followed by its data as JSON,
`null` for a leader-change record. A metadata log is small, so every entry stays in memory together with
the byte position of its frame: `read` never touches the file and `truncate_to` is one ftruncate. `append`
only writes; `flush` fsyncs, and only then do entries count as flushed. On open, frames are replayed up to
the first torn or corrupt one (or one whose epoch goes backwards, which `append` refuses), the file is cut
there and fsynced, so everything loaded counts as flushed.

`FileQuorumStateStore` keeps (epoch, voted_for, leader_id) in a JSON file with KRaft's key names, replaced
atomically (temp file, fsync, rename, fsync of the directory) before `save` returns.
"""

from __future__ import annotations

import json
import os
import struct
from bisect import bisect_left, bisect_right

import crc32c

from odradek.raft.log import QuorumState
from odradek.raft.messages import Entry
from odradek.storage.checkpoint import fsync_dir, write_atomic

LOG_FILE = "raft.log"
QUORUM_STATE_FILE = "quorum-state"
QUORUM_STATE_VERSION = 0

_FRAME = struct.Struct(">II")  # payload length, CRC-32C of the payload
_EPOCH = struct.Struct(">i")


def _payload(entry: Entry) -> bytes:
    return _EPOCH.pack(entry.epoch) + json.dumps(entry.data, separators=(",", ":"), allow_nan=False).encode()


def _entry(payload: bytes) -> Entry:
    (epoch,) = _EPOCH.unpack_from(payload)
    return Entry(epoch, json.loads(payload[_EPOCH.size:]))


class FileRaftLog:
    """A `RaftLog` in `<directory>/raft.log`; one process at a time may open a directory."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, LOG_FILE)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._entries: list[Entry] = []
        self._positions: list[int] = []  # byte position of each entry's frame
        # One (epoch, first offset) per epoch in the log, both increasing: epoch look-ups bisect these.
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []
        self._size = self._replay()
        os.ftruncate(self._fd, self._size)
        # Entries a crashed process wrote but never flushed may still sit in the page cache: sync them
        # (and the cut) before reporting them flushed, and the directory so the file's name survives too.
        os.fsync(self._fd)
        fsync_dir(directory)
        self._flushed_end = len(self._entries)
        self._dirty = False  # written or truncated since the last fsync

    def _replay(self) -> int:
        """Load every intact frame in order; returns the byte size they take up."""
        with open(self.path, "rb") as f:
            data = f.read()
        position = 0
        while position + _FRAME.size <= len(data):
            length, checksum = _FRAME.unpack_from(data, position)
            payload = data[position + _FRAME.size:position + _FRAME.size + length]
            # The length check matters for zero-filled tails (a crash can leave some): the CRC-32C of an
            # empty payload is 0, so an all-zero header would otherwise pass.
            if length < _EPOCH.size or len(payload) != length or crc32c.crc32c(payload) != checksum:
                break
            entry = _entry(payload)
            if entry.epoch < self.last_epoch():
                # Stale bytes from before a truncation that was never flushed; nothing past them was flushed.
                break
            self._add(entry, position)
            position += _FRAME.size + length
        return position

    def _add(self, entry: Entry, position: int) -> None:
        if not self._entries or entry.epoch > self._epochs[-1]:
            self._epochs.append(entry.epoch)
            self._epoch_starts.append(len(self._entries))
        self._entries.append(entry)
        self._positions.append(position)

    @property
    def end_offset(self) -> int:
        return len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    def last_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else 0

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; 0 for offset -1 (the empty prefix)."""
        if offset < 0:
            return 0
        if offset >= len(self._entries):
            raise IndexError(f"offset {offset} is past the end of the log ({len(self._entries)})")
        return self._epochs[bisect_right(self._epoch_starts, offset) - 1]

    def read(self, start: int, max_entries: int) -> tuple[Entry, ...]:
        return tuple(self._entries[start:start + max_entries])

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        """Write `entries` after the last one, without fsync; a batch with a decreasing epoch is refused whole."""
        last_epoch = self.last_epoch()
        frames = []
        for entry in entries:
            if entry.epoch < last_epoch:
                raise ValueError(f"epoch {entry.epoch} after {last_epoch}")
            last_epoch = entry.epoch
            payload = _payload(entry)
            frames.append(_FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload)
        data = b"".join(frames)
        view = memoryview(data)
        try:
            while view:
                view = view[os.pwrite(self._fd, view, self._size + len(data) - len(view)):]
        except OSError:
            os.ftruncate(self._fd, self._size)  # no half-written frame for the next append to land after
            raise
        self._dirty = True
        position = self._size
        for frame in frames:
            # Keep what a reopen reads back, so memory and disk agree even for a value JSON changes (a
            # tuple, an int key) or one the caller mutates after appending it.
            self._add(_entry(frame[_FRAME.size:]), position)
            position += len(frame)
        self._size = position

    def truncate_to(self, offset: int) -> None:
        """Drop the entries from `offset` on (not durable until the next flush)."""
        if offset >= len(self._entries):
            return
        self._size = self._positions[offset]
        os.ftruncate(self._fd, self._size)
        self._dirty = True
        del self._entries[offset:]
        del self._positions[offset:]
        first_gone = bisect_left(self._epoch_starts, offset)
        del self._epochs[first_gone:]
        del self._epoch_starts[first_gone:]
        self._flushed_end = min(self._flushed_end, offset)

    def flush(self) -> None:
        if self._dirty:  # the leader flushes on every tick; skip the fsync when nothing changed
            os.fsync(self._fd)
            self._dirty = False
        self._flushed_end = len(self._entries)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` in the log and the offset where it ends (KIP-101/KIP-595).

        Returns (0, 0) when the log holds no entry of an epoch <= `epoch`.
        """
        index = bisect_right(self._epochs, epoch)
        if index == 0:
            return 0, 0
        end = self._epoch_starts[index] if index < len(self._epochs) else len(self._entries)
        return self._epochs[index - 1], end

    def close(self) -> None:
        """Close the file; unflushed entries are written but not fsynced."""
        os.close(self._fd)


class FileQuorumStateStore:
    """The quorum state in `<directory>/quorum-state`: {"leaderId", "leaderEpoch", "votedId", "data_version"}."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, QUORUM_STATE_FILE)
        self._saved: QuorumState | None = None  # what the file is known to hold

    def load(self) -> QuorumState:
        """The saved state; QuorumState() if none was ever saved. Raises ValueError if the file is unreadable."""
        try:
            with open(self.path, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            return QuorumState()
        try:
            fields = json.loads(text)
            if fields["data_version"] != QUORUM_STATE_VERSION:
                raise ValueError(f"unsupported data_version {fields['data_version']!r}")
            values = [fields[key] for key in ("leaderEpoch", "votedId", "leaderId")]
            if any(type(value) is not int for value in values):
                raise ValueError(f"non-integer values {values!r}")
        except (ValueError, KeyError, TypeError) as exc:
            # Never fall back to an empty state: forgetting a vote could let this node vote twice in an epoch.
            raise ValueError(f"{self.path}: unreadable quorum state ({exc!r}); fix or remove it by hand") from exc
        self._saved = QuorumState(*values)
        return self._saved

    def save(self, state: QuorumState) -> None:
        if state == self._saved:  # the core re-persists an unchanged state, e.g. on each BeginQuorumEpoch
            return
        fields = {"leaderId": state.leader_id, "leaderEpoch": state.epoch, "votedId": state.voted_for,
                  "data_version": QUORUM_STATE_VERSION}
        write_atomic(self.path, json.dumps(fields, separators=(",", ":")).encode())
        self._saved = state
