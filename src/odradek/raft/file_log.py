"""Durable Raft storage on local files: the replicated log (`raft.log`), its latest snapshot
(`snapshot-<end offset>-<epoch>.checkpoint`) and the quorum state (`quorum-state`).

`FileRaftLog` keeps the log in one append-only file of frames [length u32][crc32c u32][payload] (big-endian;
the CRC-32C covers the payload), the payload being the entry's epoch (i32) followed by its data as JSON,
`null` for a leader-change record. A metadata log is small, so every entry stays in memory together with
the byte position of its frame: `read` never touches the file and `truncate_to` is one ftruncate. `append`
only writes; `flush` fsyncs, and only then do entries count as flushed. On open, frames are replayed up to
the first torn or corrupt one (or one whose epoch goes backwards, which `append` refuses), the file is cut
there and fsynced, so everything loaded counts as flushed.

Offsets stay absolute when the prefix is dropped: the file then begins with a log-start frame, framed like
an entry but with epoch -1 and the payload JSON {"start_offset": S, "start_epoch": E} (E: the epoch of the
entry at S - 1). Without it the log starts at offset 0 (files from before snapshots read unchanged).
`truncate_prefix_to` rewrites the file: the log-start frame and the kept frames' bytes go to a temp file,
which is fsynced and renamed over `raft.log`, and the directory is fsynced.

A snapshot is one file `snapshot-<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` holding one frame
(the same [length][crc32c] header) whose payload is JSON {"end_offset", "epoch", "state"}. `save_snapshot`
writes it atomically (temp file, fsync, rename, directory fsync) before anything else changes; then, when
the log does not hold the snapshot's last entry (a follower installing its leader's snapshot), `raft.log` is
rewritten empty, starting at the snapshot's end; then older snapshot files are removed.

Crash cases on open (every file appears whole, by rename, after an fsync):
- during the snapshot write: a `.tmp` file, removed; the previous snapshot and the log are unchanged;
- after the snapshot write, before the prefix drop (or the install's log reset): the snapshot is loaded; if
  the log holds the snapshot's last entry (same epoch at end offset - 1) the log is kept, its start still
  below the snapshot's end; otherwise (the log is behind it, diverges from it, or its unflushed tail was lost:
  a leader may snapshot committed entries it has not fsynced yet) the log is reset to start at the
  snapshot's end. A durable snapshot only ever holds committed entries, so it is never the one ignored;
- during the rewrite of `raft.log`: the old or the new file, whole;
- before older snapshot files were removed: the newest valid one wins and the others are removed.
A snapshot file that is not intact (bad name, frame, CRC or contents) is ignored and removed; if the log
then starts beyond the newest intact snapshot, its prefix is in no snapshot and open fails with ValueError
rather than serving a log with a hole.

`FileQuorumStateStore` keeps (epoch, voted_for, leader_id) in a JSON file with KRaft's key names, replaced
atomically (temp file, fsync, rename, fsync of the directory) before `save` returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
from bisect import bisect_left, bisect_right

import crc32c

from odradek.raft.log import UNKNOWN_EPOCH_END, QuorumState, holds_last_entry_of
from odradek.raft.messages import Entry, Snapshot
from odradek.storage.checkpoint import TMP_SUFFIX, fsync_dir, write_atomic

LOG_FILE = "raft.log"
QUORUM_STATE_FILE = "quorum-state"
QUORUM_STATE_VERSION = 0
SNAPSHOT_FILE = re.compile(r"snapshot-(\d{20})-(\d{10})\.checkpoint")

_FRAME = struct.Struct(">II")  # payload length, CRC-32C of the payload
_EPOCH = struct.Struct(">i")
_LOG_START_EPOCH = -1  # the epoch field of the log-start frame


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    return f"snapshot-{end_offset:020d}-{epoch:010d}.checkpoint"


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def _payload(entry: Entry) -> bytes:
    return _EPOCH.pack(entry.epoch) + _json(entry.data)


def _entry(payload: bytes) -> Entry:
    (epoch,) = _EPOCH.unpack_from(payload)
    return Entry(epoch, json.loads(payload[_EPOCH.size:]))


def _unframe(data: bytes, position: int) -> bytes | None:
    """The payload of the intact frame at `position`, or None."""
    if position + _FRAME.size > len(data):
        return None
    length, checksum = _FRAME.unpack_from(data, position)
    payload = data[position + _FRAME.size:position + _FRAME.size + length]
    # The length check matters for zero-filled tails (a crash can leave some): the CRC-32C of an
    # empty payload is 0, so an all-zero header would otherwise pass.
    if length < _EPOCH.size or len(payload) != length or crc32c.crc32c(payload) != checksum:
        return None
    return payload


def _read_snapshot(path: str, end_offset: int, epoch: int) -> Snapshot | None:
    """The snapshot in `path` if the file is intact and agrees with its name."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        payload = _unframe(data, 0)
        if payload is None or _FRAME.size + len(payload) != len(data):
            return None
        fields = json.loads(payload)
        if (fields["end_offset"], fields["epoch"]) != (end_offset, epoch):
            return None
        return Snapshot(end_offset, epoch, fields["state"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class FileRaftLog:
    """A `RaftLog` in `<directory>/raft.log` and its snapshot files; one process at a time may open a directory."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.path = os.path.join(directory, LOG_FILE)
        self._snapshot = self._load_snapshot()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._start = 0
        self._start_epoch = 0  # epoch of the entry at start_offset - 1
        self._entries: list[Entry] = []  # from start_offset on
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
        self._flushed_end = self.end_offset
        self._dirty = False  # written or truncated since the last fsync
        snapshot = self._snapshot
        if self._start > (snapshot.end_offset if snapshot else 0):
            os.close(self._fd)
            raise ValueError(f"{self.path}: the log starts at offset {self._start} but no intact snapshot covers "
                             f"the entries before it (latest: {snapshot and snapshot.end_offset}); "
                             f"restore the snapshot file or remove the directory to refetch from the leader")
        if snapshot is not None and not holds_last_entry_of(self, snapshot):
            self._rewrite(snapshot.end_offset, snapshot.epoch, len(self._entries))
        self._remove_other_snapshots()

    def _load_snapshot(self) -> Snapshot | None:
        names = []
        for name in os.listdir(self.directory):
            match = SNAPSHOT_FILE.fullmatch(name)
            if match:
                names.append((int(match[1]), int(match[2]), name))
        for end_offset, epoch, name in sorted(names, reverse=True):
            snapshot = _read_snapshot(os.path.join(self.directory, name), end_offset, epoch)
            if snapshot is not None:
                return snapshot
        return None

    def _remove_other_snapshots(self) -> None:
        """Remove leftover temp files and every snapshot file but the latest (no fsync: a file that comes
        back after a crash is older than the latest, or not intact, and is removed again)."""
        keep = snapshot_file_name(self._snapshot.end_offset, self._snapshot.epoch) if self._snapshot else None
        for name in os.listdir(self.directory):
            stale_tmp = name.endswith(TMP_SUFFIX) and (name.startswith("snapshot-") or name == LOG_FILE + TMP_SUFFIX)
            if stale_tmp or (name != keep and SNAPSHOT_FILE.fullmatch(name)):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(self.directory, name))

    def _replay(self) -> int:
        """Load every intact frame in order; returns the byte size they take up."""
        with open(self.path, "rb") as f:
            data = f.read()
        position = 0
        payload = _unframe(data, 0)
        if payload is not None and _EPOCH.unpack_from(payload)[0] == _LOG_START_EPOCH:
            fields = json.loads(payload[_EPOCH.size:])
            self._start, self._start_epoch = fields["start_offset"], fields["start_epoch"]
            position = _FRAME.size + len(payload)
        while (payload := _unframe(data, position)) is not None:
            entry = _entry(payload)
            if entry.epoch < self.last_epoch():
                # Stale bytes from before a truncation that was never flushed; nothing past them was flushed.
                break
            self._add(entry, position)
            position += _FRAME.size + len(payload)
        return position

    def _add(self, entry: Entry, position: int) -> None:
        if not self._entries or entry.epoch > self._epochs[-1]:
            self._epochs.append(entry.epoch)
            self._epoch_starts.append(self.end_offset)
        self._entries.append(entry)
        self._positions.append(position)

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    def last_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else self._start_epoch

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; for `start_offset - 1`, the epoch before the log (0 for offset -1)."""
        if offset == self._start - 1:
            return self._start_epoch
        if offset < self._start:
            raise IndexError(f"offset {offset} is before the log start {self._start}: only in the snapshot")
        if offset >= self.end_offset:
            raise IndexError(f"offset {offset} is past the end of the log ({self.end_offset})")
        return self._epochs[bisect_right(self._epoch_starts, offset) - 1]

    def read(self, start: int, max_entries: int) -> tuple[Entry, ...]:
        if start < self._start:
            raise IndexError(f"offset {start} is before the log start {self._start}: only in the snapshot")
        index = start - self._start
        return tuple(self._entries[index:index + max_entries])

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        """Write `entries` after the last one, without fsync; a batch with a decreasing epoch is refused whole."""
        last_epoch = self.last_epoch()
        frames = []
        for entry in entries:
            if entry.epoch < last_epoch:
                raise ValueError(f"epoch {entry.epoch} after {last_epoch}")
            last_epoch = entry.epoch
            frames.append(_frame(_payload(entry)))
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
        """Drop the entries from `offset` on (not durable until the next flush); never below the snapshot."""
        if offset < (self._snapshot.end_offset if self._snapshot else 0):
            raise ValueError(f"truncating to {offset} would cut into the snapshot {self._snapshot}")
        if offset >= self.end_offset:
            return
        index = offset - self._start
        self._size = self._positions[index]
        os.ftruncate(self._fd, self._size)
        self._dirty = True
        del self._entries[index:]
        del self._positions[index:]
        first_gone = bisect_left(self._epoch_starts, offset)
        del self._epochs[first_gone:]
        del self._epoch_starts[first_gone:]
        self._flushed_end = min(self._flushed_end, offset)

    def flush(self) -> None:
        if self._dirty:  # the leader flushes on every tick; skip the fsync when nothing changed
            os.fsync(self._fd)
            self._dirty = False
        self._flushed_end = self.end_offset

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` in the log and the offset where it ends (KIP-101/KIP-595).

        Returns (0, 0) when the log holds no entry of an epoch <= `epoch`; when entries were dropped below
        `start_offset`, it counts the epoch before the log as an entry ending there, and returns (-1, -1)
        for an epoch older than that one.
        """
        index = bisect_right(self._epochs, epoch)
        if index == 0:
            if self._start == 0 or epoch >= self._start_epoch:
                return self._start_epoch, self._start
            return UNKNOWN_EPOCH_END
        end = self._epoch_starts[index] if index < len(self._epochs) else self.end_offset
        return self._epochs[index - 1], end

    def latest_snapshot(self) -> Snapshot | None:
        return self._snapshot

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Write `snapshot` durably as the latest; it must be newer than the current one. If the log does not
        hold its last entry, `raft.log` is then rewritten empty, starting at the snapshot's end offset."""
        if self._snapshot is not None and snapshot.end_offset <= self._snapshot.end_offset:
            raise ValueError(f"snapshot {snapshot.end_offset} is not newer than {self._snapshot.end_offset}")
        payload = _json({"end_offset": snapshot.end_offset, "epoch": snapshot.epoch, "state": snapshot.state})
        write_atomic(os.path.join(self.directory, snapshot_file_name(snapshot.end_offset, snapshot.epoch)),
                     _frame(payload))
        # Keep what a reopen reads back (see append).
        self._snapshot = Snapshot(snapshot.end_offset, snapshot.epoch, json.loads(payload)["state"])
        if not holds_last_entry_of(self, snapshot):
            self._rewrite(snapshot.end_offset, snapshot.epoch, len(self._entries))
        self._remove_other_snapshots()

    def truncate_prefix_to(self, offset: int) -> None:
        """Drop the entries below `offset`, which the latest snapshot must cover; durable on return, and every
        remaining entry is then flushed (the file is rewritten)."""
        if offset <= self._start:
            return
        if self._snapshot is None or offset > self._snapshot.end_offset:
            raise ValueError(f"no snapshot covers the entries below {offset}")
        self._rewrite(offset, self.epoch_at(offset - 1), offset - self._start)

    def _rewrite(self, start: int, start_epoch: int, first_kept: int) -> None:
        """Replace raft.log, atomically, by a log starting at `start` with the entries from index `first_kept`."""
        header = _frame(_EPOCH.pack(_LOG_START_EPOCH) + _json({"start_offset": start, "start_epoch": start_epoch}))
        cut = self._positions[first_kept] if first_kept < len(self._entries) else self._size
        kept = os.pread(self._fd, self._size - cut, cut)
        if len(kept) != self._size - cut:
            raise OSError(f"{self.path}: short read while dropping the log prefix")
        write_atomic(self.path, header + kept)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR, 0o644)
        entries = self._entries[first_kept:]
        positions = [position - cut + len(header) for position in self._positions[first_kept:]]
        self._start, self._start_epoch = start, start_epoch
        self._entries, self._positions, self._epochs, self._epoch_starts = [], [], [], []
        for entry, position in zip(entries, positions, strict=True):
            self._add(entry, position)
        self._size = len(header) + len(kept)
        self._dirty = False
        self._flushed_end = self.end_offset

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
