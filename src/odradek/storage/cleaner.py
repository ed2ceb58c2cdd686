"""LogCleaner: log compaction of `cleanup.policy=compact` partitions, Kafka's background log cleaner.

One cleaning of one partition, as Kafka does it:

1. `grab_filthiest` (event loop): among compacted logs, the one with the highest dirty ratio above its
   `min.cleanable.dirty.ratio`, or one whose oldest dirty batch is older than `max.compaction.lag.ms`.
   The dirty section runs from the checkpointed first dirty offset to the first uncleanable offset: the
   active segment, the high watermark, and the first segment holding records younger than
   `min.compaction.lag.ms`, and the last stable offset. The closed segments' descriptors are duplicated, so the work below never
   races with retention or deletion closing them.
2. `build` (a worker thread): an offset map of key hash -> last offset over the dirty section, bounded
   by `log.cleaner.dedupe.buffer.size` (24 bytes an entry, load factor 0.9, as Kafka's SkimpyOffsetMap);
   if the section has more keys, the map covers a prefix and only that prefix counts as cleaned. Then
   the segments from the log start to the end of the map, grouped up to `segment.bytes`, are rewritten
   into `<base>.log.cleaned` files (and indexes) keeping, per key, only the record at the mapped offset.
   Offsets never change: a rewritten batch keeps its base offset, last offset delta, producer id, epoch
   and base sequence; a batch left empty is dropped unless it is its producer's last batch (then kept
   empty, so the producer's sequence survives). Records of aborted transactions neither enter the map
   nor survive a cleaning; transaction markers are kept; cleaning stops at the last stable offset, so an
   undecided transaction is never cleaned. Tombstones get a delete horizon (KIP-534: the batch's
   baseTimestamp becomes now + `delete.retention.ms`, attribute bit 6) when first cleaned, and are
   dropped by the first cleaning after it.
3. `install` (event loop, one synchronous step, so no produce or fetch interleaves): each `.cleaned` log
   is renamed `.swap`, the segments it replaces renamed `.deleted`, then `.swap` renamed to `.log`;
   `PartitionLog._complete_swaps` finishes the job if the process dies in between. The first dirty
   offset goes to `cleaner-offset-checkpoint` in the log dir.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    BatchInfo,
    read_batch_info,
)
from odradek.protocol.types import MalformedMessage, read_varlong, write_varlong
from odradek.storage import checkpoint
from odradek.storage.log import CLEANED_SUFFIX, PartitionLog, largest_timestamp
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.segment import (
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    NO_TIMESTAMP,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentCorrupt,
    _RecoveryState,
    file_name,
)
from odradek.storage.time_index import TimeIndex

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
BYTES_PER_ENTRY = 24  # Kafka's SkimpyOffsetMap: 16-byte MD5 of the key + 8-byte offset
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728
DEFAULT_LOAD_FACTOR = 0.9
DEFAULT_BACKOFF_MS = 15000

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")


class CleaningAborted(Exception):
    """The cleaner is stopping, or the log changed under it: the cleaning is dropped, nothing is lost."""


class OffsetMap:
    """Key hash -> last offset of that key in the dirty section; at most `capacity` entries."""

    def __init__(self, buffer_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR):
        slots = max(1, buffer_bytes // BYTES_PER_ENTRY)
        self.capacity = max(1, int(slots * load_factor))
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    def put(self, key: bytes, offset: int) -> None:
        self._map[hashlib.md5(key).digest()] = offset

    def get(self, key: bytes) -> int:
        return self._map.get(hashlib.md5(key).digest(), -1)

    def has_room_for(self, count: int) -> bool:
        return len(self._map) + count <= self.capacity


@dataclass
class _RawRecord:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool
    tail_start: int  # where the key length starts: everything from here to `end` is copied verbatim
    end: int


def _parse_records(data, count: int) -> list[_RawRecord]:
    out = []
    pos = 0
    for _ in range(count):
        length, pos = read_varlong(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise MalformedMessage(f"record length {length} overruns the batch")
        p = pos + 1  # attributes
        timestamp_delta, p = read_varlong(data, p)
        offset_delta, p = read_varlong(data, p)
        tail = p
        key_length, p = read_varlong(data, p)
        key = None
        if key_length >= 0:
            key = bytes(data[p:p + key_length])
            p += key_length
        value_length, p = read_varlong(data, p)
        out.append(_RawRecord(offset_delta, timestamp_delta, key, value_length < 0, tail, end))
        pos = end
    return out


@dataclass
class _SegmentCopy:
    """A closed segment as the cleaner sees it: its own descriptor (dup'ed), size and offsets."""

    segment: LogSegment
    fd: int
    size: int
    base_offset: int
    upper_offset: int  # the next segment's base offset


def _iter_batches(copy: _SegmentCopy, stop: _Stop):
    """(header, whole batch bytes) of each batch of a segment copy, read with pread on its own descriptor."""
    position = 0
    while position < copy.size:
        stop.check()
        header = os.pread(copy.fd, BATCH_HEADER_SIZE, position)
        info = read_batch_info(header, 0)
        data = os.pread(copy.fd, info.size, position) if info.size >= BATCH_HEADER_SIZE else b""
        if len(data) != info.size or crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]) != _UINT32.unpack_from(data, CRC_OFFSET)[0]:
            # never give a damaged batch a fresh CRC: the log is left to recovery, the partition skipped
            raise SegmentCorrupt(f"{copy.segment.log_path}: invalid batch at position {position}")
        yield info._replace(position=0), data
        position += info.size


class _Stop:
    def __init__(self):
        self.stopping = False

    def check(self) -> None:
        if self.stopping:
            raise CleaningAborted("the cleaner is stopping")


@dataclass
class CleaningTask:
    """What `grab_filthiest` chose: one log, its closed segments, and the dirty range to map."""

    log: PartitionLog
    log_dir: str
    first_dirty: int
    first_uncleanable: int
    segments: list[_SegmentCopy]
    last_offsets_of_producers: dict[int, int]
    now_ms: int
    dirty_ratio: float
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # producer id -> [(first, marker)]
    cleaned: list[tuple[list[LogSegment], int]] = field(default_factory=list)  # (replaced segments, base)
    end_offset: int = -1

    def close(self) -> None:
        for copy in self.segments:
            if copy.fd >= 0:
                os.close(copy.fd)
                copy.fd = -1


@dataclass
class CleanerConfig:
    enabled: bool = True
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    load_factor: float = DEFAULT_LOAD_FACTOR
    backoff_ms: int = DEFAULT_BACKOFF_MS


class LogCleaner:
    """Compacts the logs of a LogManager; see the module docstring for one cleaning's steps."""

    def __init__(self, log_manager, config: CleanerConfig | None = None):
        self.log_manager = log_manager
        self.config = config or CleanerConfig()
        self._stop = _Stop()
        self.uncleanable: set[tuple[str, int]] = set()  # failed once (e.g. a corrupt batch): skipped until restart
        self._first_dirty: dict[str, dict[tuple[str, int], int]] = {}
        for log_dir in log_manager.online_dirs():
            path = os.path.join(log_dir, CLEANER_CHECKPOINT)
            self._first_dirty[log_dir] = checkpoint.OffsetCheckpointFile(path).read_or_empty()

    # ---- choosing a log

    def first_dirty_offset(self, partition_log: PartitionLog) -> int:
        log_dir = self.log_manager.dir_of(partition_log)
        offset = self._first_dirty.get(log_dir, {}).get((partition_log.topic, partition_log.partition))
        if offset is None or offset < partition_log.log_start_offset or offset > partition_log.log_end_offset:
            return partition_log.log_start_offset
        return offset

    def _cleanable_range(self, partition_log: PartitionLog, now_ms: int):
        """(first dirty, first uncleanable, clean bytes, cleanable bytes, needs compaction now)."""
        config = partition_log.config
        segments = partition_log.segments
        first_dirty = self.first_dirty_offset(partition_log)
        first_uncleanable = min(partition_log.active.base_offset, partition_log.last_stable_offset)
        if config.min_compaction_lag_ms > 0:
            cutoff = now_ms - config.min_compaction_lag_ms
            for index, segment in enumerate(segments[:-1]):
                upper = segments[index + 1].base_offset
                if upper > first_dirty and largest_timestamp(segment) > cutoff:
                    first_uncleanable = min(first_uncleanable, max(segment.base_offset, first_dirty))
                    break
        first_uncleanable = max(first_uncleanable, first_dirty)
        clean_bytes = cleanable_bytes = 0
        earliest = None
        for index, segment in enumerate(segments[:-1]):
            upper = segments[index + 1].base_offset
            if upper <= first_dirty:
                clean_bytes += segment.size
            elif segment.base_offset < first_uncleanable:
                cleanable_bytes += segment.size
            if upper > first_dirty and segment.first_batch_timestamp is not None and segment.first_batch_timestamp > 0:
                earliest = segment.first_batch_timestamp if earliest is None else min(earliest, segment.first_batch_timestamp)
        max_lag = max(config.max_compaction_lag_ms, 0)
        needs_now = earliest is not None and earliest < now_ms - max_lag
        return first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, needs_now

    def grab_filthiest(self, now_ms: int) -> CleaningTask | None:
        """The compacted log most in need of cleaning, with copies of its closed segments; None if none is."""
        best = None
        for partition_log in self.log_manager.logs():
            if (not partition_log.config.compact or partition_log._closed or len(partition_log.segments) < 2
                    or (partition_log.topic, partition_log.partition) in self.uncleanable):
                continue
            first_dirty, first_uncleanable, clean, cleanable, needs_now = self._cleanable_range(partition_log, now_ms)
            if cleanable <= 0 or first_uncleanable <= first_dirty:
                continue
            ratio = cleanable / (clean + cleanable)
            if not needs_now and ratio <= partition_log.config.min_cleanable_dirty_ratio:
                continue
            score = (needs_now, ratio)
            if best is None or score > best[0]:
                best = (score, partition_log, first_dirty, first_uncleanable, ratio)
        if best is None:
            return None
        _, partition_log, first_dirty, first_uncleanable, ratio = best
        return self._task(partition_log, first_dirty, first_uncleanable, ratio, now_ms)

    def _task(self, partition_log: PartitionLog, first_dirty: int, first_uncleanable: int, ratio: float,
              now_ms: int) -> CleaningTask:
        segments = partition_log.segments
        copies = []
        for index, segment in enumerate(segments[:-1]):
            if segment.base_offset >= first_uncleanable:
                break
            copies.append(_SegmentCopy(segment, os.dup(segment.fd), segment.size, segment.base_offset,
                                       segments[index + 1].base_offset))
        last_offsets = {pid: entry.last_offset for pid, entry in partition_log.producer_state.producers.items()}
        aborted: dict[int, list[tuple[int, int]]] = {}
        for txn in partition_log.producer_state.aborted:
            aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        return CleaningTask(partition_log, self.log_manager.dir_of(partition_log), first_dirty, first_uncleanable,
                            copies, last_offsets, now_ms, ratio, aborted)

    # ---- cleaning (thread-safe: touches only the task's own descriptors and new files)

    def build(self, task: CleaningTask) -> CleaningTask:
        """Map the dirty section, then write the cleaned segments as `.cleaned` files."""
        offset_map = OffsetMap(self.config.dedupe_buffer_size, self.config.load_factor)
        self._build_offset_map(task, offset_map)
        if offset_map.latest_offset < task.first_dirty:
            task.end_offset = task.first_dirty
            return task
        task.end_offset = offset_map.latest_offset + 1
        to_clean = [copy for copy in task.segments if copy.base_offset < task.end_offset]
        for group in self._group_by_size(task, to_clean):
            base = self._clean_group(task, group, offset_map)
            task.cleaned.append(([copy.segment for copy in group], base))
        return task

    def _build_offset_map(self, task: CleaningTask, offset_map: OffsetMap) -> None:
        start, stop = task.first_dirty, task.first_uncleanable
        for copy in task.segments:
            if copy.upper_offset <= start:
                continue
            if copy.base_offset >= stop:
                break
            for info, data in _iter_batches(copy, self._stop):
                if info.last_offset < start:
                    continue
                if info.base_offset >= stop:
                    return
                if len(offset_map) and not offset_map.has_room_for(info.record_count):
                    return  # full: the cleaning covers offsets up to here; the rest is the next one's
                if not info.is_control and not _in_aborted_txn(task, info):
                    body = codecs.decompress(info.compression, memoryview(data)[BATCH_HEADER_SIZE:])
                    for record in _parse_records(body, info.record_count):
                        offset = info.base_offset + record.offset_delta
                        if record.key is not None and offset >= start:
                            offset_map.put(record.key, offset)
                offset_map.latest_offset = info.last_offset

    @staticmethod
    def _group_by_size(task: CleaningTask, copies: list[_SegmentCopy]) -> list[list[_SegmentCopy]]:
        """Kafka's groupSegmentsBySize: consecutive segments whose total fits one segment and 32-bit offsets."""
        max_size = task.log.config.segment_bytes
        groups: list[list[_SegmentCopy]] = []
        for copy in copies:
            if groups:
                group = groups[-1]
                size = sum(c.size for c in group) + copy.size
                if size <= max_size and copy.upper_offset - 1 - group[0].base_offset <= INT32_MAX:
                    group.append(copy)
                    continue
            groups.append([copy])
        return groups

    def _clean_group(self, task: CleaningTask, group: list[_SegmentCopy], offset_map: OffsetMap) -> int:
        partition_log = task.log
        config = partition_log.config
        base = group[0].base_offset
        directory = partition_log.directory
        log_path = os.path.join(directory, file_name(base, LOG_SUFFIX + CLEANED_SUFFIX))
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        state = _RecoveryState(base, config.index_interval_bytes, offset_entries, time_entries)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            position = 0
            for copy in group:
                for info, data in _iter_batches(copy, self._stop):
                    cleaned = self._filter_batch(task, info, data, offset_map)
                    if cleaned is None:
                        continue
                    view = memoryview(cleaned)
                    while view:
                        view = view[os.write(fd, view):]
                    state.accept(read_batch_info(cleaned, 0)._replace(position=position))
                    position += len(cleaned)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            _remove_cleaned(directory, base)
            raise
        os.close(fd)
        if state.max_timestamp != NO_TIMESTAMP and (not time_entries or time_entries[-1][0] < state.max_timestamp):
            time_entries.append((state.max_timestamp, state.offset_of_max_timestamp))
        for index, entries in ((OffsetIndex(os.path.join(directory, file_name(base, INDEX_SUFFIX + CLEANED_SUFFIX)),
                                            base, config.segment_index_bytes), offset_entries),
                               (TimeIndex(os.path.join(directory, file_name(base, TIME_INDEX_SUFFIX + CLEANED_SUFFIX)),
                                          base, config.segment_index_bytes), time_entries)):
            index.rewrite(entries)
            index.flush()
            index.close()
        return base

    def _filter_batch(self, task: CleaningTask, info: BatchInfo, data: bytes, offset_map: OffsetMap) -> bytes | None:
        """The batch with only the records to keep; the original bytes if all stay; None to drop it."""
        if info.is_control:
            return data  # markers are kept: read_committed consumers of what remains still need them
        if info.base_offset <= offset_map.latest_offset and _in_aborted_txn(task, info):
            if info.producer_id >= 0 and task.last_offsets_of_producers.get(info.producer_id) == info.last_offset:
                return _empty_batch(info)
            return None
        now_ms = task.now_ms
        horizon = info.base_timestamp if info.has_delete_horizon else None
        body = codecs.decompress(info.compression, memoryview(data)[BATCH_HEADER_SIZE:])
        raw = _parse_records(body, info.record_count)
        kept = []
        tombstones = False
        for record in raw:
            offset = info.base_offset + record.offset_delta
            if offset > offset_map.latest_offset:
                keep = True  # beyond what the map covers: the next cleaning decides
            elif record.key is None:
                keep = False  # Kafka discards keyless records of compacted logs
            elif offset < offset_map.get(record.key):
                keep = False  # a later record has the same key
            elif record.tombstone:
                keep = horizon is None or now_ms < horizon
            else:
                keep = True
            if keep:
                kept.append(record)
                tombstones = tombstones or record.tombstone
        set_horizon = tombstones and horizon is None
        if len(kept) == len(raw) and not set_horizon:
            return data
        if not kept:
            if info.producer_id >= 0 and task.last_offsets_of_producers.get(info.producer_id) == info.last_offset:
                return _empty_batch(info)  # the producer's last batch: its sequence must survive
            return None
        return _rebuild(info, body, kept, now_ms + task.log.config.delete_retention_ms if set_horizon else None)

    # ---- installing

    def install(self, task: CleaningTask) -> bool:
        """Swap the cleaned segments in (on the event loop); False if the log changed and the work was dropped."""
        partition_log = task.log
        installed = True
        try:
            for index, (old, base) in enumerate(task.cleaned):
                if self.log_manager.get(partition_log.topic, partition_log.partition) is not partition_log \
                        or partition_log._closed or not partition_log.replace_segments(old, base, task.now_ms):
                    for _, other in task.cleaned[index:]:
                        _remove_cleaned(partition_log.directory, other)
                    installed = False
                    break
        finally:
            task.close()
        if installed and task.end_offset > task.first_dirty:
            key = (partition_log.topic, partition_log.partition)
            offsets = self._first_dirty.setdefault(task.log_dir, {})
            offsets[key] = task.end_offset
            self.write_checkpoint(task.log_dir)
            log.info("Cleaned %s-%d: offsets %d..%d mapped, dirty ratio was %.2f, %d segment group(s) rewritten",
                     partition_log.topic, partition_log.partition, task.first_dirty, task.end_offset - 1,
                     task.dirty_ratio, len(task.cleaned))
        return installed

    def write_checkpoint(self, log_dir: str) -> None:
        present = {(lg.topic, lg.partition) for lg in self.log_manager.logs() if self.log_manager.dir_of(lg) == log_dir}
        offsets = {key: offset for key, offset in self._first_dirty.get(log_dir, {}).items() if key in present}
        self._first_dirty[log_dir] = offsets
        checkpoint.OffsetCheckpointFile(os.path.join(log_dir, CLEANER_CHECKPOINT)).write(offsets)

    def abandon(self, task: CleaningTask) -> None:
        for _, base in task.cleaned:
            _remove_cleaned(task.log.directory, base)
        task.close()

    # ---- driving

    def clean_once(self, now_ms: int) -> bool:
        """Grab, build and install in the calling thread (tests, tools). True if a log was cleaned."""
        task = self.grab_filthiest(now_ms)
        if task is None:
            return False
        try:
            self.build(task)
        except BaseException:
            self.abandon(task)
            raise
        return self.install(task)

    async def run(self, clock) -> None:
        """The background loop: heavy work in a worker thread, the swap on the event loop."""
        loop = asyncio.get_running_loop()
        while True:
            task = None
            try:
                task = self.grab_filthiest(clock())
                if task is not None:
                    work = loop.run_in_executor(None, self.build, task)
                    try:
                        await asyncio.shield(work)
                    except asyncio.CancelledError:
                        # the thread still uses the task's descriptors: let it notice and stop first
                        self._stop.stopping = True
                        await asyncio.wait([work])
                        raise
                    self.install(task)
                    task = None
                    continue
            except asyncio.CancelledError:
                self._stop.stopping = True
                raise
            except OSError as exc:
                if task is None:
                    log.exception("choosing a log to clean failed")
                else:  # its log dir is failing: take it offline (its logs are then never chosen again)
                    self.log_manager.fail_dir_of(task.log, exc)
            except Exception:
                if task is None:
                    log.exception("choosing a log to clean failed")
                else:
                    log.exception("cleaning %s-%d failed; it is not cleaned again until restart",
                                  task.log.topic, task.log.partition)
                    self.uncleanable.add((task.log.topic, task.log.partition))
            finally:
                if task is not None:
                    try:
                        self.abandon(task)
                    except OSError:
                        log.exception("removing the partial output of cleaning %s-%d failed", task.log.topic,
                                      task.log.partition)
            await asyncio.sleep(self.config.backoff_ms / 1000)

    def stop(self) -> None:
        self._stop.stopping = True


def _in_aborted_txn(task: CleaningTask, info: BatchInfo) -> bool:
    if not info.is_transactional:
        return False
    return any(first <= info.base_offset <= marker for first, marker in task.aborted.get(info.producer_id, ()))


def _remove_cleaned(directory: str, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        try:
            os.unlink(os.path.join(directory, file_name(base, suffix + CLEANED_SUFFIX)))
        except FileNotFoundError:
            pass


def _finish_batch(header: tuple, payload: bytes | bytearray) -> bytes:
    batch = bytearray(BATCH_HEADER_SIZE)
    batch += payload
    _HEADER.pack_into(batch, 0, header[0], len(batch) - LOG_OVERHEAD, *header[1:])
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _empty_batch(info: BatchInfo) -> bytes:
    """Kafka's writeEmptyHeader: same offsets and producer fields, no records, uncompressed."""
    attributes = info.attributes & ~COMPRESSION_MASK & ~DELETE_HORIZON_FLAG
    return _finish_batch((info.base_offset, info.partition_leader_epoch, 2, 0, attributes, info.last_offset_delta,
                          info.max_timestamp, info.max_timestamp, info.producer_id, info.producer_epoch,
                          info.base_sequence, 0), b"")


def _rebuild(info: BatchInfo, body, kept: list[_RawRecord], horizon: int | None) -> bytes:
    """A batch with the kept records at their original offsets, the original last offset delta (the
    producer's last sequence stays) and, if given, the delete horizon as its base timestamp."""
    log_append_time = info.timestamp_type == 1
    base_timestamp = info.base_timestamp
    attributes = info.attributes
    if horizon is not None:
        base_timestamp = horizon
        attributes |= DELETE_HORIZON_FLAG
    out = bytearray()
    max_timestamp = NO_TIMESTAMP
    for record in kept:
        timestamp = info.base_timestamp + record.timestamp_delta
        delta = record.timestamp_delta if log_append_time else timestamp - base_timestamp
        max_timestamp = max(max_timestamp, timestamp)
        encoded = b"\x00" + write_varlong(delta) + write_varlong(record.offset_delta) + body[record.tail_start:record.end]
        out += write_varlong(len(encoded))
        out += encoded
    if log_append_time:
        max_timestamp = info.max_timestamp
    payload = codecs.compress(info.compression, out) if info.compression else out
    return _finish_batch((info.base_offset, info.partition_leader_epoch, 2, 0, attributes, info.last_offset_delta,
                          base_timestamp, max_timestamp, info.producer_id, info.producer_epoch, info.base_sequence,
                          len(kept)), payload)
