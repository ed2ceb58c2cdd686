"""TimeIndex: the sparse `.timeindex` file of a segment, mapping timestamps to offsets.

On disk: 12-byte big-endian entries (timestamp int64, offset - base offset as int32). An entry (T, O)
says: up to and including the batch whose last offset is O, the largest timestamp seen in the segment
is T. Entries are written at the offset index's interval, only when the largest timestamp grows, plus
a final one when the segment stops being active (roll, close), so the last entry always holds the
segment's largest timestamp and the batch that first reached it.
"""

from __future__ import annotations

import bisect
import struct
from array import array

from odradek.storage.offset_index import IndexFile

_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    ENTRY_SIZE = 12

    def __init__(self, path: str, base_offset: int, max_index_size: int = 10485760):
        super().__init__(path, base_offset, max_index_size)
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def offsets(self) -> list[int]:
        """Absolute offsets of the entries (a copy: for tests and tools)."""
        return [self.base_offset + relative for relative in self.relative_offsets]

    def load(self, next_offset: int) -> str | None:
        """Read the file; return why it cannot be trusted, or None. `next_offset`: the segment's end."""
        data = self._read_file()
        self.timestamps = array("q")
        self.relative_offsets = array("i")
        if len(data) % self.ENTRY_SIZE:
            return f"size {len(data)} is not a multiple of {self.ENTRY_SIZE}"
        timestamps, relative_offsets = array("q"), array("i")
        last_timestamp, last_relative = -(2**63), -1
        limit = next_offset - self.base_offset
        for timestamp, relative in _ENTRY.iter_unpack(data):
            if timestamp <= last_timestamp or relative < last_relative or relative < 0:
                return f"entry ({timestamp}, +{relative}) is not after ({last_timestamp}, +{last_relative})"
            if relative >= limit:
                return f"entry ({timestamp}, {self.base_offset + relative}) points past the segment end {next_offset}"
            timestamps.append(timestamp)
            relative_offsets.append(relative)
            last_timestamp, last_relative = timestamp, relative
        self.timestamps, self.relative_offsets = timestamps, relative_offsets
        return None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's."""
        relative = offset - self.base_offset
        if self.timestamps and (timestamp <= self.timestamps[-1] or relative < self.relative_offsets[-1]):
            return
        self._write(_ENTRY.pack(timestamp, relative))
        self.timestamps.append(timestamp)
        self.relative_offsets.append(relative)

    def rewrite(self, entries: list[tuple[int, int]], *, atomically: bool = False) -> None:
        self._replace_file(b"".join(_ENTRY.pack(t, o - self.base_offset) for t, o in entries), atomically=atomically)
        self.timestamps = array("q", (t for t, _ in entries))
        self.relative_offsets = array("i", (o - self.base_offset for _, o in entries))

    def last_entry(self) -> tuple[int, int] | None:
        """(largest timestamp, offset) of the segment, or None if it has no timestamped batch."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def lookup_below(self, timestamp: int) -> int | None:
        """Offset of the last entry with a timestamp < `timestamp`: every record up to it is older."""
        slot = bisect.bisect_left(self.timestamps, timestamp) - 1
        if slot < 0:
            return None
        return self.base_offset + self.relative_offsets[slot]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = bisect.bisect_left(self.relative_offsets, offset - self.base_offset)
        if keep < len(self.timestamps):
            del self.timestamps[keep:]
            del self.relative_offsets[keep:]
            self._truncate_file(keep)
