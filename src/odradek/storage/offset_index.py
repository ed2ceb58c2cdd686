"""OffsetIndex: the sparse `.index` file of a segment, mapping offsets to byte positions in its `.log`.

On disk: 8-byte big-endian entries (offset - base offset as int32, position as int32), appended as the
log grows, one every `index.interval.bytes` of log. An entry (offset O, position P) says: the batch
starting at P holds offsets up to O (O is that batch's last offset, as Kafka writes it), so the batch
containing any offset >= O starts at P or later. In memory: two int32 arrays (relative offsets, positions),
8 bytes per entry like the file, loaded once at open; the file is only appended to, truncated, or
rewritten on recovery.
"""

from __future__ import annotations

import bisect
import os
import struct
import sys
from array import array

from odradek.storage import checkpoint

_ENTRY = struct.Struct(">ii")
_LITTLE_ENDIAN = sys.byteorder == "little"
assert array("i").itemsize == 4


class IndexFile:
    """Shared plumbing of the offset and time indexes: an append-only file of fixed-size entries."""

    ENTRY_SIZE = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.ENTRY_SIZE)

    # No descriptor is kept: a node with tens of thousands of segments would run out of them, and an entry
    # is written only every index.interval.bytes of log, so opening the file for it costs little.
    def _open(self, flags: int = 0) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | flags, 0o644)

    def _write(self, data: bytes) -> None:
        fd = self._open(os.O_APPEND)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def _truncate_file(self, entries: int) -> None:
        fd = self._open()
        try:
            os.ftruncate(fd, entries * self.ENTRY_SIZE)
        finally:
            os.close(fd)

    def _replace_file(self, data: bytes, *, atomically: bool) -> None:
        if atomically:
            # A crash then leaves the old file or the whole new one. A rebuild cut short (an empty time
            # index above all) would pass the sanity check of the next start and be trusted.
            checkpoint.write_atomic(self.path, data)
            return
        self._truncate_file(0)
        if data:
            self._write(data)

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # no entry was ever written: nothing to make durable
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Nothing is held open (see _open)."""

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries


class OffsetIndex(IndexFile):
    ENTRY_SIZE = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int = 10485760):
        super().__init__(path, base_offset, max_index_size)
        self.relative_offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.relative_offsets)

    @property
    def offsets(self) -> list[int]:
        """Absolute offsets of the entries (a copy: for tests and tools)."""
        base = self.base_offset
        return [base + relative for relative in self.relative_offsets]

    def load(self, log_size: int) -> str | None:
        """Read the file; return why it cannot be trusted (then the caller rebuilds it), or None."""
        data = self._read_file()
        self.relative_offsets = array("i")
        self.positions = array("i")
        if len(data) % self.ENTRY_SIZE:
            return f"size {len(data)} is not a multiple of {self.ENTRY_SIZE}"
        entries = array("i", data)
        if _LITTLE_ENDIAN:
            entries.byteswap()
        relative_offsets, positions = entries[0::2], entries[1::2]
        last_relative, last_position = -1, -1
        for relative, position in zip(relative_offsets, positions, strict=True):
            if relative <= last_relative or position <= last_position:
                return (f"entry ({self.base_offset + relative}, {position}) is not after "
                        f"({self.base_offset + last_relative}, {last_position})")
            last_relative, last_position = relative, position
        if positions and positions[-1] >= log_size:
            return f"entry at position {positions[-1]} points past the log end {log_size}"
        self.relative_offsets, self.positions = relative_offsets, positions
        return None

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self.positions and (relative <= self.relative_offsets[-1] or position <= self.positions[-1]):
            return  # never write a non-monotonic entry; the index is only a hint
        self._write(_ENTRY.pack(relative, position))
        self.relative_offsets.append(relative)
        self.positions.append(position)

    def rewrite(self, entries: list[tuple[int, int]], *, atomically: bool = False) -> None:
        """Replace the whole index (after recovery rebuilt it from the log); `atomically`: see _replace_file."""
        self._replace_file(b"".join(_ENTRY.pack(o - self.base_offset, p) for o, p in entries), atomically=atomically)
        self.relative_offsets = array("i", (offset - self.base_offset for offset, _ in entries))
        self.positions = array("i", (position for _, position in entries))

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target; (base offset, 0) if none."""
        slot = bisect.bisect_right(self.relative_offsets, target_offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[slot], self.positions[slot]

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before `position`; (base offset, 0) if none."""
        slot = bisect.bisect_right(self.positions, position) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[slot], self.positions[slot]

    def last_entry(self) -> tuple[int, int]:
        if not self.positions:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[-1], self.positions[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or past `position` (the log is being truncated there)."""
        keep = bisect.bisect_left(self.positions, position)
        if keep < len(self.positions):
            del self.relative_offsets[keep:]
            del self.positions[keep:]
            self._truncate_file(keep)
