"""LogSegment: one `.log` file of record batches with its `.index` and `.timeindex`.

The segment's `.log` holds complete v2 record batches back to back, exactly as they were validated and
offset-assigned; nothing else. Appends are one `os.write` on an O_APPEND descriptor; reads never copy
records: they find batch boundaries by reading 61-byte headers with `os.pread` and hand back a
FileRegion for `os.sendfile`. Recovery walks the whole file with CRC checks and truncates at the first
torn or corrupt batch. The in-memory state (size, next offset, largest timestamp) is always derived
from the file, never stored separately.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Callable, Iterator

from odradek.protocol import records
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.file_region import FileRegion
from odradek.protocol.records import BATCH_HEADER_SIZE, BatchInfo
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1
RECOVERY_WINDOW = 64 * 1024 * 1024  # bytes of the log CRC-checked per scan_valid_prefix call

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MAGIC = 2
_LOG_OVERHEAD = 12


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class SegmentCorrupt(KafkaError):
    """A segment whose file or indexes do not agree; recovering it (CRC scan, index rebuild) fixes it.

    Met while serving a request it answers KAFKA_STORAGE_ERROR.
    """

    def __init__(self, message: str):
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class LogSegment:
    def __init__(self, directory: str, base_offset: int, *, index_bytes: int, now_ms: int):
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, file_name(base_offset, LOG_SUFFIX))
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(os.path.join(directory, file_name(base_offset, INDEX_SUFFIX)),
                                        base_offset, index_bytes)
        self.time_index = TimeIndex(os.path.join(directory, file_name(base_offset, TIME_INDEX_SUFFIX)),
                                    base_offset, index_bytes)
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None  # for segment.ms: Kafka's rollingBasedTimestamp
        self.created_ms = now_ms
        self.bytes_since_last_index_entry = 0
        self.deleted = False
        self.failed = False  # a partial write could not be undone: appends are refused until restart
        self.index_failed = False

    # ---- opening

    @classmethod
    def create(cls, directory: str, base_offset: int, *, index_bytes: int, now_ms: int) -> LogSegment:
        segment = cls(directory, base_offset, index_bytes=index_bytes, now_ms=now_ms)
        if segment.size:
            raise FileExistsError(f"segment {segment.log_path} already exists with {segment.size} bytes")
        segment.offset_index.rewrite([])
        segment.time_index.rewrite([])
        return segment

    def load(self) -> None:
        """Trust the files of a cleanly closed segment: load the indexes, find the end with a header scan.

        Raises SegmentCorrupt if anything disagrees; the caller then calls recover().
        """
        for path in (self.offset_index.path, self.time_index.path):
            if self.size and not os.path.exists(path):
                raise SegmentCorrupt(f"{path} is missing")
        problem = self.offset_index.load(self.size)
        if problem:
            raise SegmentCorrupt(f"{self.offset_index.path}: {problem}")
        indexed_offset, position = self.offset_index.last_entry()
        next_offset = self.base_offset
        last = None
        for info in self.batches(position):
            if last is None and len(self.offset_index) and info.base_offset > indexed_offset:
                raise SegmentCorrupt(f"{self.log_path}: batch at {position} does not hold indexed offset {indexed_offset}")
            if info.base_offset < next_offset or info.last_offset_delta < 0:
                raise SegmentCorrupt(f"{self.log_path}: batch at {info.position} has offset {info.base_offset}")
            last = info
            next_offset = info.last_offset + 1
        if last is None and position != 0:
            raise SegmentCorrupt(f"{self.log_path}: no batch at indexed position {position}")
        self.next_offset = next_offset
        problem = self.time_index.load(self.next_offset)
        if problem:
            raise SegmentCorrupt(f"{self.time_index.path}: {problem}")
        entry = self.time_index.last_entry()
        if entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = entry
        self.bytes_since_last_index_entry = self.size - position
        first = self._first_batch()
        self.first_batch_timestamp = first.max_timestamp if first else None

    def recover(self, index_interval_bytes: int, on_batch: Callable[[BatchInfo], None] | None = None) -> int:
        """CRC-check every batch, truncate the file after the last valid one, rebuild both indexes.

        Batches must also have offsets increasing from the base offset; the first that does not ends
        the valid prefix. Calls `on_batch` for every valid batch (header fields, absolute position).
        Returns the number of bytes truncated.
        """
        file_size = os.fstat(self.fd).st_size
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        state = _RecoveryState(self.base_offset, index_interval_bytes, offset_entries, time_entries)
        valid_end = 0
        if file_size:
            with mmap.mmap(self.fd, file_size, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    valid_end = _scan(view, file_size, state, on_batch)
                finally:
                    view.release()
        truncated = file_size - valid_end
        if truncated:
            log.warning("%s: truncating %d invalid bytes after position %d (offset %d)", self.log_path,
                        truncated, valid_end, state.next_offset)
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.next_offset = state.next_offset
        self.max_timestamp, self.offset_of_max_timestamp = state.max_timestamp, state.offset_of_max_timestamp
        if state.max_timestamp != NO_TIMESTAMP and (not time_entries or time_entries[-1][0] < state.max_timestamp):
            time_entries.append((state.max_timestamp, state.offset_of_max_timestamp))
        # atomically: this segment may be below the recovery point (recovered because it failed its sanity
        # check), so the next start would trust whatever a crash here left of its indexes
        self.offset_index.rewrite(offset_entries, atomically=True)
        self.time_index.rewrite(time_entries, atomically=True)
        self.bytes_since_last_index_entry = state.bytes_since_last_index_entry
        self.first_batch_timestamp = state.first_batch_timestamp
        return truncated

    # ---- appending

    def append(self, buf: bytes | bytearray | memoryview, batches: list[tuple[int, int, int, int]],
               index_interval_bytes: int) -> None:
        """Write `buf` (whole batches, offsets assigned) at the end of the segment with one write.

        `batches`: (position in buf, size, last offset, max timestamp) of each batch in buf, in order.
        If the write fails part way, the file is cut back to its previous size and the error raised.
        """
        if self.failed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.log_path} failed an earlier write")
        start = self.size
        view = memoryview(buf)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except BaseException:
            # Bytes after `start` would be cut by recovery together with everything appended after
            # them: the partial write must go, or this segment takes no more appends.
            try:
                os.ftruncate(self.fd, start)
                self.failed = os.fstat(self.fd).st_size != start
            except OSError:
                self.failed = True
            if self.failed:
                log.error("%s: cannot cut back a partial write at %d; no more appends", self.log_path, start)
            raise
        self.size = start + len(buf)
        for position, size, last_offset, max_timestamp in batches:
            self.next_offset = last_offset + 1
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = max_timestamp
            if max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
            if self.bytes_since_last_index_entry > index_interval_bytes:
                self.bytes_since_last_index_entry = 0
                self._index(last_offset, start + position)
            self.bytes_since_last_index_entry += size

    def _index(self, offset: int, position: int) -> None:
        """Index entries are hints: a failure to write one must not fail an append already written.

        After a failed index write the segment's indexes take no more entries (reads then scan more
        headers); a torn entry on disk is caught by the sanity check at the next open and rebuilt.
        """
        if self.index_failed:
            return
        try:
            self.offset_index.append(offset, position)
            if self.max_timestamp != NO_TIMESTAMP:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        except OSError:
            log.exception("%s: cannot write an index entry; indexing of this segment stops", self.log_path)
            self.index_failed = True

    def on_become_inactive(self) -> None:
        """The segment is rolled or closed: make the time index's last entry its largest timestamp."""
        if self.max_timestamp != NO_TIMESTAMP and not self.index_failed:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # ---- reading

    def header_at(self, position: int) -> BatchInfo | None:
        """The batch header at `position` (no CRC check), or None at or past the end."""
        if position >= self.size:
            return None
        data = os.pread(self.fd, BATCH_HEADER_SIZE, position)
        if len(data) < BATCH_HEADER_SIZE:
            raise SegmentCorrupt(f"{self.log_path}: truncated batch header at {position}")
        fields = _HEADER.unpack(data)
        size = fields[1] + _LOG_OVERHEAD
        if fields[3] != _MAGIC or size < BATCH_HEADER_SIZE or position + size > self.size:
            raise SegmentCorrupt(f"{self.log_path}: invalid batch header at {position}")
        return BatchInfo(position, size, fields[0], fields[2], *fields[5:])

    def batches(self, position: int = 0) -> Iterator[BatchInfo]:
        """Headers of the batches from `position` (a batch boundary) to the end of the segment."""
        end = self.size
        while position < end:
            info = self.header_at(position)
            yield info
            position += info.size

    def _first_batch(self) -> BatchInfo | None:
        return self.header_at(0)

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset is >= `offset`, or None if there is none in this segment."""
        if offset >= self.next_offset:
            return None
        _, position = self.offset_index.lookup(offset)
        for info in self.batches(position):
            if info.base_offset + info.last_offset_delta >= offset:
                return info
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> FileRegion | None:
        """Whole batches from the one holding `offset`, stopping before any batch reaching `max_offset`.

        At most `max_bytes`, except that with `min_one_batch` the first batch is returned whatever its
        size. None if nothing qualifies.
        """
        first = self.find_batch(offset)
        if first is None or first.last_offset >= max_offset:
            return None
        start = first.position
        if max_offset >= self.next_offset:
            end_limit = self.size
        else:
            stop = self.find_batch(max_offset)
            end_limit = stop.position if stop is not None else self.size
        if end_limit - start <= max_bytes:
            return FileRegion(self.fd, start, end_limit - start)
        end = self._boundary_at_or_before(start + max_bytes, start)
        if end == start:
            if not min_one_batch:
                return None
            end = start + first.size
        return FileRegion(self.fd, start, end - start)

    def _boundary_at_or_before(self, limit: int, start: int) -> int:
        """The last batch boundary in [start, limit], found from the offset index then header reads."""
        _, position = self.offset_index.lookup_by_position(limit)
        position = max(position, start)
        while position < self.size:
            info = self.header_at(position)
            if position + info.size > limit:
                break
            position += info.size
        return position

    def read_batch(self, info: BatchInfo) -> bytes:
        return os.pread(self.fd, info.size, info.position)

    def find_first_batch_with_timestamp(self, timestamp: int) -> BatchInfo | None:
        """The first batch whose max timestamp is >= `timestamp`, via the time index then header reads."""
        if self.max_timestamp < timestamp:
            return None
        older_up_to = self.time_index.lookup_below(timestamp)
        if older_up_to is None:
            position = 0
        else:
            after = self.find_batch(older_up_to + 1)
            if after is None:
                return None
            position = after.position
        for info in self.batches(position):
            if info.max_timestamp >= timestamp:
                return info
        return None

    # ---- truncation, flushing, deletion

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns the bytes removed.

        Hazard: a FileRegion handed out earlier over the removed bytes sends whatever the file holds
        when it is finally sent. Truncation only happens when a follower diverges from its leader.
        """
        info = self.find_batch(offset)
        if info is None:
            return 0
        position = info.position
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(info.base_offset)
        self._rescan_tail()
        return removed

    def _rescan_tail(self) -> None:
        """Recompute next offset and largest timestamp after truncation, from the index entries on."""
        last_offset, position = self.offset_index.last_entry()
        self.next_offset = last_offset + 1 if len(self.offset_index) else self.base_offset
        entry = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = entry if entry else (NO_TIMESTAMP, -1)
        scan_from = 0
        if entry is not None:
            after = self.find_batch(entry[1] + 1) if entry[1] + 1 < self.next_offset else None
            scan_from = min(after.position if after else position, position)
        for info in self.batches(scan_from):
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = info.max_timestamp, info.last_offset
            self.next_offset = max(self.next_offset, info.last_offset + 1)
        self.bytes_since_last_index_entry = self.size - position
        first = self._first_batch()
        self.first_batch_timestamp = first.max_timestamp if first else None

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def release_index_files(self) -> None:
        """Close the index descriptors of an inactive segment (reopened if ever written or flushed again)."""
        self.offset_index.close()
        self.time_index.close()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def mark_deleted(self) -> None:
        """Rename the files to `.deleted`; the descriptor stays open for FileRegions still being sent."""
        self.deleted = True
        for index in (self.offset_index, self.time_index):
            if os.path.exists(index.path):
                index.rename(index.path + DELETED_SUFFIX)
        os.rename(self.log_path, self.log_path + DELETED_SUFFIX)
        self.log_path += DELETED_SUFFIX

    def delete_files(self) -> None:
        """Close and unlink (after mark_deleted, or directly when the segment is discarded)."""
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size}, next_offset={self.next_offset})"


class _RecoveryState:
    """What recover() learns while walking the valid batches of a segment."""

    def __init__(self, base_offset: int, index_interval_bytes: int, offset_entries: list, time_entries: list):
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.interval = index_interval_bytes
        self.offset_entries = offset_entries
        self.time_entries = time_entries
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None

    def accept(self, info: BatchInfo) -> bool:
        """Account for one CRC-valid batch; False if its offsets make it invalid here."""
        last_offset = info.base_offset + info.last_offset_delta
        if (info.base_offset < self.next_offset or info.last_offset_delta < 0
                or last_offset - self.base_offset > INT32_MAX):
            return False
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = info.max_timestamp
        if info.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = info.max_timestamp, last_offset
        if self.bytes_since_last_index_entry > self.interval:
            self.offset_entries.append((last_offset, info.position))
            if self.max_timestamp != NO_TIMESTAMP and (
                    not self.time_entries or self.time_entries[-1][0] < self.max_timestamp):
                self.time_entries.append((self.max_timestamp, self.offset_of_max_timestamp))
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += info.size
        self.next_offset = last_offset + 1
        return True


def _scan(view: memoryview, file_size: int, state: _RecoveryState,
          on_batch: Callable[[BatchInfo], None] | None) -> int:
    """Walk the valid prefix of a mapped segment window by window; returns where valid data ends."""
    position = 0
    while position < file_size:
        window_end = min(file_size, position + RECOVERY_WINDOW)
        if window_end - position >= BATCH_HEADER_SIZE:
            declared = struct.unpack_from(">i", view, position + 8)[0] + _LOG_OVERHEAD
            if declared > window_end - position and position + declared <= file_size:
                window_end = position + declared  # one batch larger than the window
        window = view[position:window_end]
        try:
            infos, end = records.scan_valid_prefix(window)
        finally:
            window.release()
        for info in infos:
            info = info._replace(position=info.position + position)
            if not state.accept(info):
                return info.position
            if on_batch is not None:
                on_batch(info)
        if end == 0 or window_end == file_size:
            return position + end
        position += end
    return position


def scan_end_offset(path: str, base_offset: int) -> int:
    """Next offset after the valid batches of the segment file at `path` (for installing `.swap` files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        state = _RecoveryState(base_offset, 2**62, [], [])
        if file_size:
            with mmap.mmap(fd, file_size, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    _scan(view, file_size, state, None)
                finally:
                    view.release()
        return state.next_offset
    finally:
        os.close(fd)
