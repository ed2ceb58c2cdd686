"""PartitionLog: the segments of one partition, with append, read, offset look-ups, retention and recovery.

Invariants (tests/storage pin them down):

* offsets in the log only increase; a leader append gets offsets log_end_offset.. contiguously;
* an append is acknowledged only after its single `os.write` returned: the bytes are then in the page
  cache and survive a kill -9 of the process; fsync happens on roll, on flush.messages / flush.ms,
  and on close (Kafka's defaults leave the rest to the OS);
* after any crash the log is the longest prefix of valid batches (CRC-checked) of what was written, so
  every acknowledged batch is there, once, in order, unless the machine itself lost unflushed pages;
* the leader epoch cache never names an offset past the log end, whatever the moment of a crash: on
  open it is cut to the log and completed from the epochs of the batches recovery scans;
* segments leave the log by being renamed `.deleted` and closed only after file.delete.delay.ms, so a
  FileRegion handed to the network layer stays readable until it has been sent.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
from collections.abc import Iterator
from typing import NamedTuple

from odradek.protocol import compression, records
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.file_region import FileRegion
from odradek.protocol.records import LOG_APPEND_TIME, BatchInfo
from odradek.storage import checkpoint
from odradek.storage.leader_epoch_cache import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import CorruptSnapshotError, ProducerStateManager
from odradek.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    NO_TIMESTAMP,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentCorrupt,
    file_name,
    scan_end_offset,
)

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SNAPSHOTS_TO_KEEP = 2
REPLAY_CHUNK_BYTES = 4 * 1024 * 1024
PRODUCER_ID_EXPIRATION_MS = 86400000  # Kafka's producer.id.expiration.ms default


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int


class UnexpectedAppendOffset(KafkaError):
    """Replicated batches that do not continue the log: a base offset below the log end offset (or below
    the previous batch's end). Kafka's UnexpectedAppendOffsetException, which clients see as an unknown
    server error; the fetcher decides whether to truncate or fetch again."""

    def __init__(self, message: str, first_offset: int, log_end_offset: int):
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a `<topic>-<partition>` directory name, or None."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class PartitionLog:
    """The log of one partition. Opening it recovers it if needed; see docs/storage-format.md."""

    def __init__(self, directory: str, config: LogConfig, *, now_ms: int, recovery_point: int = 0,
                 log_start_offset: int = 0, high_watermark: int = 0, clean_shutdown: bool = False,
                 topic: str | None = None, partition: int | None = None, topic_id: bytes | None = None):
        parsed = parse_partition_dir(os.path.basename(os.path.normpath(directory)))
        self.topic = topic if topic is not None else (parsed[0] if parsed else "")
        self.partition = partition if partition is not None else (parsed[1] if parsed else 0)
        self.directory = directory
        self.config = config
        os.makedirs(directory, exist_ok=True)
        if topic_id is not None:
            checkpoint.write_partition_metadata(directory, topic_id)
        self.topic_id = checkpoint.read_partition_metadata(directory)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[list] = []  # [segment, due_ms or None]
        self.producer_state = ProducerStateManager()
        self.leader_epochs = LeaderEpochFileCache(directory)
        self.producer_id_expiration_ms = PRODUCER_ID_EXPIRATION_MS  # the broker's producer.id.expiration.ms
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self._high_watermark = 0
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._roll_jitter_ms = 0
        self._closed = False
        self.truncations = 0  # how often the log was cut back: a copy of it (a log dir move) starts over
        self._load(now_ms, recovery_point, log_start_offset, clean_shutdown)
        self.high_watermark = high_watermark
        self._new_roll_jitter()

    # ---- offsets

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Kafka's rule: the high watermark stays within [log start offset, log end offset]."""
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: the high watermark, or the first offset of a
        transaction still open or whose marker is not yet replicated, if lower."""
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self._high_watermark
        return max(min(first_unstable, self._high_watermark), self.log_start_offset)

    def aborted_transactions(self, start: int, end: int) -> list:
        """(producer id, first offset) of the aborted transactions with records in [start, end)."""
        return self.producer_state.aborted_transactions(start, end)

    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._new_roll_jitter()

    def _new_roll_jitter(self) -> None:
        jitter = self.config.segment_jitter_ms
        self._roll_jitter_ms = random.randrange(min(jitter, self.config.max_segment_ms)) if jitter > 0 else 0

    # ---- loading and recovery

    def _load(self, now_ms: int, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        directory = self.directory
        self._remove_orphans()
        self._complete_swaps()
        bases = sorted(int(name[:20]) for name in os.listdir(directory)
                       if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit())
        index_bytes = self.config.segment_index_bytes
        self.segments = [LogSegment(directory, base, index_bytes=index_bytes, now_ms=now_ms) for base in bases]
        if clean:
            recover_from = len(self.segments)
        else:
            # the segment holding the recovery point and everything after it may hold unflushed data
            recover_from = max(0, bisect.bisect_right(bases, recovery_point) - 1) if bases else 0
        # the leader epochs of the batches recovered here replace the checkpoint's from this offset on
        epochs_from = bases[recover_from] if recover_from < len(bases) else None
        recovered_epochs: list[tuple[int, int]] = []

        def note_epoch(info: BatchInfo) -> None:
            if not recovered_epochs or recovered_epochs[-1][0] != info.partition_leader_epoch:
                recovered_epochs.append((info.partition_leader_epoch, info.base_offset))

        recovered = False
        index = 0
        while index < len(self.segments):
            segment = self.segments[index]
            must_recover = index >= recover_from
            if not must_recover:
                try:
                    segment.load()
                except SegmentCorrupt as exc:
                    log.warning("%s: %s; rebuilding it from the log", segment.log_path, exc)
                    must_recover = True
            if must_recover:
                recovered = True
                truncated = segment.recover(self.config.index_interval_bytes,
                                            note_epoch if index >= recover_from else None)
                if truncated and index + 1 < len(self.segments):
                    if index >= recover_from:
                        for later in self.segments[index + 1:]:
                            log.warning("%s: deleting %s, which follows a corrupt segment", directory, later.log_path)
                            later.delete_files()
                        del self.segments[index + 1:]
                    else:
                        log.error("%s: flushed segment %s had %d corrupt bytes", directory, segment.log_path, truncated)
            index += 1
        self._delete_misplaced_segments()
        if not self.segments:
            start = max(log_start_offset, 0)
            self.segments = [LogSegment.create(directory, start, index_bytes=index_bytes, now_ms=now_ms)]
            checkpoint.fsync_dir(directory)
        self._bases = [segment.base_offset for segment in self.segments]
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            # every offset below the log start is gone: start afresh at the log start offset
            log.warning("%s: log start offset %d is past the log end %d; starting an empty log there",
                        directory, self.log_start_offset, self.log_end_offset)
            self._replace_all_segments(self.log_start_offset, now_ms)
        if recovered:
            for segment in self.segments:
                segment.flush()
            checkpoint.fsync_dir(directory)
        for segment in self.segments[:-1]:
            segment.release_index_files()
        self.recovery_point = self.log_end_offset
        self._load_producer_state()
        self._load_leader_epochs(epochs_from, recovered_epochs)

    def _remove_orphans(self) -> None:
        """Files a crash can leave behind: deletions not finished, cleaner output not swapped in, temps."""
        names = set(os.listdir(self.directory))
        logs = {name[:20] for name in names if name.endswith(LOG_SUFFIX)}
        for name in names:
            path = os.path.join(self.directory, name)
            orphan_index = (name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and name[:20] not in logs)
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, checkpoint.TMP_SUFFIX)) or orphan_index:
                log.info("%s: removing leftover %s", self.directory, name)
                os.unlink(path)
            elif name.endswith((INDEX_SUFFIX + SWAP_SUFFIX, TIME_INDEX_SUFFIX + SWAP_SUFFIX)):
                os.unlink(path)  # indexes are rebuilt from the swapped-in log

    def _complete_swaps(self) -> None:
        """A `.log.swap` is a complete replacement (cleaner output) for the segments it overlaps: install it."""
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                continue
            base = int(name[:20])
            swap_path = os.path.join(self.directory, name)
            end = scan_end_offset(swap_path, base)
            for other in os.listdir(self.directory):
                if other.endswith(LOG_SUFFIX) and other[:20].isdigit() and base <= int(other[:20]) < end:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        try:
                            os.unlink(os.path.join(self.directory, other[:20] + suffix))
                        except FileNotFoundError:
                            pass
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                try:
                    os.unlink(os.path.join(self.directory, file_name(base, suffix)))
                except FileNotFoundError:
                    pass
            os.rename(swap_path, os.path.join(self.directory, file_name(base, LOG_SUFFIX)))
            checkpoint.fsync_dir(self.directory)
            log.info("%s: installed swap segment %s (offsets %d..%d)", self.directory, name, base, end)

    def _delete_misplaced_segments(self) -> None:
        """Drop segments that do not start after the previous one's end (cannot happen unless hand-edited)."""
        kept: list[LogSegment] = []
        for segment in self.segments:
            if kept and segment.base_offset < kept[-1].next_offset:
                log.error("%s overlaps the previous segment; deleting it", segment.log_path)
                segment.delete_files()
                continue
            kept.append(segment)
        self.segments = kept

    def _replace_all_segments(self, base_offset: int, now_ms: int) -> None:
        for segment in self.segments:
            segment.delete_files()
        self.segments = [LogSegment.create(self.directory, base_offset, index_bytes=self.config.segment_index_bytes,
                                           now_ms=now_ms)]
        self._bases = [base_offset]
        checkpoint.fsync_dir(self.directory)

    def _snapshot_offsets(self) -> list[int]:
        return sorted(int(name[:20]) for name in os.listdir(self.directory)
                      if name.endswith(SNAPSHOT_SUFFIX) and name[:20].isdigit())

    def _load_producer_state(self) -> None:
        """Latest usable snapshot at or below the log end, then replay the batches after it."""
        end = self.log_end_offset
        self.producer_state = ProducerStateManager()
        start = self.segments[0].base_offset
        for offset in reversed(self._snapshot_offsets()):
            path = os.path.join(self.directory, file_name(offset, SNAPSHOT_SUFFIX))
            if offset > end:
                os.unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    self.producer_state.load(f.read())
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: ignoring producer state snapshot %s: %s", self.directory, path, exc)
                continue
            start = offset
            break
        self.producer_state.rebuild_from(self._batches_with_markers_from(start))
        self.producer_state.on_high_watermark(self._high_watermark)

    def _load_leader_epochs(self, recovered_from: int | None, recovered_epochs: list[tuple[int, int]]) -> None:
        """The checkpoint corrected by the batches recovery scanned; if the checkpoint is missing or malformed
        (a log written before it existed, or a crash before its first write), every batch's epoch."""
        if self.leader_epochs.load():
            start = self.log_end_offset if recovered_from is None else recovered_from
            epochs = iter(recovered_epochs)
        else:
            start = self.segments[0].base_offset
            epochs = ((info.partition_leader_epoch, info.base_offset) for info in self._batches_from(start))
        self.leader_epochs.recover(start, epochs, self.log_start_offset, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset), see LeaderEpochFileCache.end_offset_for."""
        return self.leader_epochs.end_offset_for(epoch, self.log_end_offset)

    def _batches_from(self, offset: int) -> Iterator[BatchInfo]:
        """Headers of every batch from the one holding `offset` on, across segments."""
        for segment in self.segments[max(0, bisect.bisect_right(self._bases, offset) - 1):]:
            if segment.next_offset <= offset:
                continue
            first = segment.find_batch(offset)
            if first is not None:
                yield from segment.batches(first.position)

    def _batches_with_markers_from(self, offset: int) -> Iterator[tuple[BatchInfo, tuple[int, int] | None]]:
        """Batches starting at or after `offset`, each control batch with its transaction marker."""
        for segment in self.segments[max(0, bisect.bisect_right(self._bases, offset) - 1):]:
            if segment.next_offset <= offset:
                continue
            first = segment.find_batch(offset)
            if first is None:
                continue
            for info in segment.batches(first.position):
                if info.base_offset < offset:
                    continue
                marker = None
                if info.is_control and info.producer_id >= 0:
                    marker = records.read_marker(segment.read_batch(info), info._replace(position=0))
                yield info, marker

    def _write_producer_snapshot(self, offset: int) -> None:
        checkpoint.write_atomic(os.path.join(self.directory, file_name(offset, SNAPSHOT_SUFFIX)),
                                self.producer_state.snapshot())
        for old in self._snapshot_offsets()[:-SNAPSHOTS_TO_KEEP]:
            os.unlink(os.path.join(self.directory, file_name(old, SNAPSHOT_SUFFIX)))

    # ---- appending

    def append_as_leader(self, records_view, *, now_ms: int, leader_epoch: int = 0,
                         from_coordinator: bool = False, verification: object | None = False) -> AppendInfo:
        """Validate a produce request's records, assign offsets and write them: one batch, one write.

        `verification`: False when transactional batches need no verification; else the guard a verification
        with the transaction coordinator got (None: none was made), see ProducerStateManager.check_verified.
        """
        config = self.config
        self._check_writable()
        infos = records.validate_batches(records_view, max_batch_size=config.max_message_bytes,
                                         from_coordinator=from_coordinator)
        if len(infos) != 1:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"a produce request must carry exactly one record batch per partition, not {len(infos)}")
        info = infos[0]
        self._check_timestamps(info, now_ms)
        if config.compact:
            self._check_keys(records_view, info)
        if info.size > config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"record batch of {info.size} bytes exceeds segment.bytes {config.segment_bytes}")
        append_time = now_ms if config.log_append_time else None
        duplicate = self.producer_state.check(info)
        if duplicate is None and verification is not False:
            self.producer_state.check_verified(info, verification)
        if duplicate is not None:
            return AppendInfo(duplicate.first_offset, duplicate.last_offset,
                              duplicate.timestamp if append_time is not None else -1,
                              self.log_start_offset, info.record_count)
        target = compression.codec_for_topic(config.compression_type)
        if target is not None and target != info.compression:
            buf = bytearray(self._recompress(records_view, info, target, leader_epoch))
            info = records.read_batch_info(buf, 0)
            if info.size > config.max_message_bytes:
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"record batch of {info.size} bytes after recompression exceeds max.message.bytes")
            if info.size > config.segment_bytes:
                raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                                 f"record batch of {info.size} bytes after recompression exceeds segment.bytes")
        else:
            buf = bytearray(records_view)
        max_timestamp = append_time if append_time is not None else info.max_timestamp
        first = self.log_end_offset
        self._maybe_roll(len(buf), first, first + info.last_offset_delta, max_timestamp, now_ms)
        next_offset = records.assign_offsets(buf, (info,), first, log_append_time_ms=append_time,
                                             partition_leader_epoch=leader_epoch)
        last = next_offset - 1
        self.active.append(buf, [(0, len(buf), last, max_timestamp)], config.index_interval_bytes)
        self.producer_state.update(info, first, last, max_timestamp)
        # after the write: a crash in between leaves an unflushed batch that recovery scans for its epoch
        self.leader_epochs.assign(leader_epoch, first)
        self._unflushed_messages += info.record_count
        if self._unflushed_messages >= config.flush_messages:
            self.flush()
        return AppendInfo(first, last, -1 if append_time is None else append_time, self.log_start_offset,
                          info.record_count)

    def append_marker(self, commit: bool, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      now_ms: int, leader_epoch: int = 0) -> AppendInfo:
        """WriteTxnMarkers: end the producer's transaction here with a commit or abort control batch."""
        self._check_writable()
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        first = self.log_end_offset
        buf = bytearray(records.build_marker_batch(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                                   coordinator_epoch=coordinator_epoch, timestamp_ms=now_ms))
        info = records.read_batch_info(buf, 0)
        self._maybe_roll(len(buf), first, first, now_ms, now_ms)
        records.assign_offsets(buf, (info,), first, partition_leader_epoch=leader_epoch)
        self.active.append(buf, [(0, len(buf), first, now_ms)], self.config.index_interval_bytes)
        self.producer_state.update(info, first, first, now_ms,
                                   marker=(records.COMMIT_MARKER if commit else records.ABORT_MARKER, coordinator_epoch))
        self.leader_epochs.assign(leader_epoch, first)
        self._unflushed_messages += 1
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendInfo(first, first, -1, self.log_start_offset, 1)

    def append_as_follower(self, records_view, *, now_ms: int) -> AppendInfo:
        """Append replicated batches as the leader wrote them: offsets, timestamps and epochs are kept.

        Every batch must be whole, magic 2 and CRC-valid (CORRUPT_MESSAGE otherwise), and offsets must go
        up from the log end: a batch starting below it raises UnexpectedAppendOffset. Gaps are allowed (a
        compacted leader log has them). Each batch is written on its own after append_as_leader's roll
        check, so segments and indexes come out as the leader's do under the same configuration. The
        producer state and the leader epoch cache follow each batch.
        """
        config = self.config
        self._check_writable()
        view = memoryview(records_view)
        infos, valid_end = records.scan_valid_prefix(view)
        if not infos or valid_end != len(view):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"replicated records for {self.topic}-{self.partition} hold no whole valid batch "
                             f"at byte {valid_end} of {len(view)}")
        next_offset = self.log_end_offset
        for info in infos:
            if info.base_offset < next_offset or info.last_offset_delta < 0:
                raise UnexpectedAppendOffset(
                    f"replicated batch at offset {info.base_offset} (last {info.last_offset}) does not follow "
                    f"offset {next_offset - 1} of {self.topic}-{self.partition} (log end {self.log_end_offset})",
                    infos[0].base_offset, self.log_end_offset)
            if info.size > config.segment_bytes:
                raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                                 f"record batch of {info.size} bytes exceeds segment.bytes {config.segment_bytes}")
            next_offset = info.next_offset
        record_count = 0
        for info in infos:
            self._maybe_roll(info.size, info.base_offset, info.last_offset, info.max_timestamp, now_ms)
            self.active.append(view[info.position:info.end], [(0, info.size, info.last_offset, info.max_timestamp)],
                               config.index_interval_bytes)
            marker = records.read_marker(view, info) if info.is_control and info.producer_id >= 0 else None
            self.producer_state.update(info, info.base_offset, info.last_offset, marker=marker)
            if info.partition_leader_epoch >= 0:
                self.leader_epochs.assign(info.partition_leader_epoch, info.base_offset)
            record_count += info.record_count
        self._unflushed_messages += record_count
        if self._unflushed_messages >= config.flush_messages:
            self.flush()
        return AppendInfo(infos[0].base_offset, infos[-1].last_offset, -1, self.log_start_offset, record_count)

    def _check_timestamps(self, info: BatchInfo, now_ms: int) -> None:
        """Kafka's LogValidator.validateTimestamp, on the batch's first and largest timestamps."""
        if info.timestamp_type == LOG_APPEND_TIME:
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "producers may not set the LogAppendTime timestamp type")
        config = self.config
        if config.log_append_time:
            return
        low = now_ms - config.message_timestamp_before_max_ms
        high = now_ms + config.message_timestamp_after_max_ms
        for timestamp in (info.base_timestamp, info.max_timestamp):
            if timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
                raise KafkaError(ErrorCode.INVALID_TIMESTAMP,
                                 f"timestamp {timestamp} is out of range: it should be within [{low}, {high}]")

    def _check_keys(self, records_view, info: BatchInfo) -> None:
        """A compacted topic refuses a batch with keyless records, naming each of them (as Kafka does)."""
        reason = f"Compacted topic cannot accept message without key in topic partition {self.topic}-{self.partition}"
        keyless = tuple((index, reason) for index, record in enumerate(records.decode_batch(records_view, info))
                        if record.key is None)
        if keyless:
            shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in keyless[:3])
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"One or more records have been rejected due to {len(keyless)} record errors in total, "
                             f"and only showing the first three errors at most: [{shown}]", keyless)

    @staticmethod
    def _recompress(records_view, info: BatchInfo, codec: int, leader_epoch: int) -> bytes:
        decoded = records.decode_batch(records_view, info)
        return records.build_batch(decoded, compression=codec, producer_id=info.producer_id,
                                   producer_epoch=info.producer_epoch, base_sequence=info.base_sequence,
                                   is_transactional=info.is_transactional, partition_leader_epoch=leader_epoch)

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, max_timestamp: int, now_ms: int) -> None:
        """Kafka's LogSegment.shouldRoll, checked before each append of a batch."""
        segment = self.active
        if last_offset - segment.base_offset > INT32_MAX:
            # even an empty segment could not index it: a replicated batch after a gap in the leader's log
            self.roll(now_ms, first_offset)
            return
        if segment.size == 0:
            return
        config = self.config
        if segment.first_batch_timestamp is not None and segment.first_batch_timestamp >= 0 and max_timestamp >= 0:
            waited = max_timestamp - segment.first_batch_timestamp
        else:
            waited = now_ms - segment.created_ms
        if (segment.size + size > config.segment_bytes
                or waited > config.max_segment_ms - self._roll_jitter_ms
                or segment.offset_index.is_full or segment.time_index.is_full):
            self.roll(now_ms, first_offset)

    def _check_writable(self) -> None:
        if self.active.failed:
            # a new segment after a failed one would be deleted by recovery with the failed one's tail
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{self.topic}-{self.partition} failed a write; it takes no appends until restart")

    def roll(self, now_ms: int, base_offset: int | None = None) -> LogSegment:
        """Close the active segment (fsynced, final time index entry) and start one at the log end, or at
        `base_offset` if later (Kafka names a follower's new segment after the batch it rolls for)."""
        self._check_writable()
        old = self.active
        base = self.log_end_offset if base_offset is None else max(base_offset, self.log_end_offset)
        if old.size == 0 and old.base_offset == base:
            return old
        old.on_become_inactive()
        try:
            old.flush()
        except OSError:
            old.failed = True
            raise
        old.release_index_files()
        segment = LogSegment.create(self.directory, base, index_bytes=self.config.segment_index_bytes, now_ms=now_ms)
        self.segments.append(segment)
        self._bases.append(base)
        checkpoint.fsync_dir(self.directory)
        self.recovery_point = max(self.recovery_point, base)
        self._write_producer_snapshot(base)
        self._new_roll_jitter()
        return segment

    def flush(self) -> None:
        """fsync the active segment: every offset below the log end is then durable.

        A failed fsync cannot be retried safely (the kernel may have dropped the dirty pages): the
        segment then refuses appends until a restart recovers the log.
        """
        if self.log_end_offset > self.recovery_point or self._unflushed_messages:
            try:
                self.active.flush()
            except OSError:
                self.active.failed = True
                raise
        self.recovery_point = self.log_end_offset
        self._unflushed_messages = 0

    # ---- reading

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FileRegion | None:
        """Whole batches from the one holding `offset`, within one segment, below `max_offset`.

        `max_offset` defaults to the high watermark; no returned batch reaches it. At most `max_bytes`,
        but the first batch is returned whole with `min_one_batch`. None when there is nothing to return.
        """
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside the log's range {self.log_start_offset}..{end}")
        if max_offset is None:
            max_offset = self._high_watermark
        if offset == end or offset >= max_offset:
            return None
        for segment in self.segments[self._segment_index(offset):]:
            # an empty segment (the cleaner removed all its records) holds nothing to return: look further
            if offset < segment.next_offset and segment.size:
                return segment.read(offset, max_bytes, max_offset, min_one_batch)
        return None

    def replay(self, chunk_bytes: int = REPLAY_CHUNK_BYTES) -> Iterator[tuple[BatchInfo, list]]:
        """Every batch from the log start to the log end, decoded: how coordinators load their state."""
        offset = self.log_start_offset
        while offset < self.log_end_offset:
            region = self.read(offset, chunk_bytes, max_offset=self.log_end_offset)
            if region is None:
                return
            data = os.pread(region.fd, region.size, region.position)
            for info, batch in records.decode_batches(data):
                yield info, [record for record in batch if record.offset >= offset]
                offset = max(offset, info.last_offset + 1)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start with a timestamp >= `timestamp_ms`."""
        start = self.log_start_offset
        for segment in self.segments:
            if segment.next_offset <= start or segment.max_timestamp < timestamp_ms:
                continue
            info = segment.find_first_batch_with_timestamp(timestamp_ms)
            position = info.position if info is not None else segment.size
            for info in segment.batches(position):
                if info.max_timestamp < timestamp_ms or info.last_offset < start:
                    continue
                found = self._first_record_at_or_after(segment, info, timestamp_ms, start)
                if found is not None:
                    return found
        return None

    @staticmethod
    def _first_record_at_or_after(segment: LogSegment, info: BatchInfo, timestamp_ms: int,
                                  start: int) -> tuple[int, int] | None:
        if info.timestamp_type == LOG_APPEND_TIME:
            return max(info.base_offset, start), info.max_timestamp
        data = segment.read_batch(info)
        for record in records.decode_batch(data, info._replace(position=0)):
            if record.timestamp >= timestamp_ms and record.offset >= start:
                return record.offset, record.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record carrying the largest timestamp; (-1, -1) if none."""
        best = None
        for segment in self.segments:
            if segment.max_timestamp != NO_TIMESTAMP and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return -1, -1
        timestamp = best.max_timestamp
        info = best.find_batch(best.offset_of_max_timestamp)
        if info is None or info.max_timestamp != timestamp:
            return best.offset_of_max_timestamp, timestamp
        found = self._first_record_at_or_after(best, info, timestamp, -1)
        return found if found is not None else (best.offset_of_max_timestamp, timestamp)

    # ---- deleting and truncating

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to `offset` and drop the segments wholly below it."""
        if offset > self._high_watermark or offset < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"cannot delete records before {offset}: the high watermark is {self._high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            count = 0
            while count + 1 < len(self.segments) and self.segments[count + 1].base_offset <= offset:
                count += 1
            self._delete_oldest(count, f"log start offset moved to {offset}")
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        return self.log_start_offset

    def _delete_oldest(self, count: int, reason: str) -> None:
        """Move the `count` oldest segments out of the log; their files go after file.delete.delay.ms."""
        if count <= 0:
            return
        doomed, self.segments = self.segments[:count], self.segments[count:]
        log.info("%s-%d: deleting %d segment(s) with offsets %d..%d: %s", self.topic, self.partition, count,
                 doomed[0].base_offset, doomed[-1].next_offset - 1, reason)
        self._bases = self._bases[count:]
        for segment in doomed:
            segment.mark_deleted()
            self._pending_deletes.append([segment, None])
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)

    def replace_segments(self, old: list[LogSegment], base: int, now_ms: int) -> bool:
        """Install the cleaner's `<base>.log.cleaned` (and indexes) in place of the consecutive closed
        segments `old`; False (nothing changed) if they are no longer all in the log.

        Crash-safe order, as Kafka's replaceSegments: `.cleaned` -> `.swap`; the old segments -> `.deleted`
        (their files go after file.delete.delay.ms, so FileRegions in flight stay readable); `.swap` ->
        `.log`. A crash at any point leaves either the old segments or a `.swap` that `_complete_swaps`
        installs on the next open.
        """
        try:
            first = next(i for i, segment in enumerate(self.segments) if segment is old[0])
        except StopIteration:
            return False
        if (self.segments[first:first + len(old)] != old or first + len(old) >= len(self.segments)
                or any(segment.deleted for segment in old) or old[0].base_offset != base):
            return False
        directory = self.directory
        cleaned = os.path.join(directory, file_name(base, LOG_SUFFIX + CLEANED_SUFFIX))
        swap = os.path.join(directory, file_name(base, LOG_SUFFIX + SWAP_SUFFIX))
        os.rename(cleaned, swap)
        checkpoint.fsync_dir(directory)
        for segment in old:
            segment.mark_deleted()
            self._pending_deletes.append([segment, None])
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            os.rename(os.path.join(directory, file_name(base, suffix + CLEANED_SUFFIX)),
                      os.path.join(directory, file_name(base, suffix)))
        os.rename(swap, os.path.join(directory, file_name(base, LOG_SUFFIX)))
        checkpoint.fsync_dir(directory)
        segment = LogSegment(directory, base, index_bytes=self.config.segment_index_bytes, now_ms=now_ms)
        try:
            segment.load()
        except SegmentCorrupt as exc:
            log.warning("%s: %s; rebuilding it from the log", segment.log_path, exc)
            segment.recover(self.config.index_interval_bytes)
        segment.release_index_files()
        self.segments[first:first + len(old)] = [segment]
        self._bases = [s.base_offset for s in self.segments]
        return True

    def _apply_retention(self, now_ms: int) -> None:
        """retention.ms and retention.bytes, as Kafka's deleteOldSegments (cleanup.policy=delete)."""
        config = self.config
        if config.retention_ms >= 0:
            cutoff = now_ms - config.retention_ms
            self._delete_while(lambda segment: largest_timestamp(segment) < cutoff, now_ms,
                               f"retention.ms {config.retention_ms} passed")
        if config.retention_bytes >= 0:
            excess = [self.size_in_bytes() - config.retention_bytes]

            def over(segment: LogSegment) -> bool:
                if excess[0] - segment.size >= 0:
                    excess[0] -= segment.size
                    return True
                return False

            self._delete_while(over, now_ms, f"retention.bytes {config.retention_bytes} exceeded")

    def _delete_while(self, predicate, now_ms: int, reason: str) -> None:
        count = 0
        for index, segment in enumerate(self.segments):
            last = index == len(self.segments) - 1
            upper = self.log_end_offset if last else self.segments[index + 1].base_offset
            if self._high_watermark < upper or (last and segment.size == 0) or not predicate(segment):
                break
            count += 1
        if count == len(self.segments):
            self.roll(now_ms)
        self._delete_oldest(count, reason)
        self.leader_epochs.truncate_from_start(self.log_start_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch from the one holding `offset` on (replication: a diverged follower).

        Hazard: FileRegions handed out before over the removed range may send other bytes; callers must
        not truncate while such reads are in flight.
        """
        if offset >= self.log_end_offset:
            # No batch goes, but an epoch that starts at the log end and wrote nothing does (a leadership
            # lost before any write): kept, the follower would name it in every fetch and diverge forever.
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = bisect.bisect_right(self._bases, offset)
        if self._bases[keep - 1] == offset and keep > 1:
            keep -= 1
        for segment in self.segments[keep:]:
            segment.mark_deleted()
            self._pending_deletes.append([segment, None])
        del self.segments[keep:]
        del self._bases[keep:]
        self.active.truncate_to(offset)
        self._after_truncation()
        # the log end, not `offset`: the batch holding `offset` went whole
        self.leader_epochs.truncate_from_end(self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self.segments:
            segment.mark_deleted()
            self._pending_deletes.append([segment, None])
        self.segments = [LogSegment.create(self.directory, offset, index_bytes=self.config.segment_index_bytes,
                                           now_ms=self.active.created_ms if self.segments else 0)]
        self._bases = [offset]
        checkpoint.fsync_dir(self.directory)
        self.log_start_offset = offset
        self._after_truncation()
        self.leader_epochs.clear_and_flush()

    def _after_truncation(self) -> None:
        self.truncations += 1
        self.active.flush()
        self._high_watermark = min(max(self._high_watermark, self.log_start_offset), self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._load_producer_state()

    # ---- maintenance and shutdown

    def maintain(self, now_ms: int, *, enforce_retention: bool = True) -> None:
        """Periodic work: time-based roll, flush.ms, retention (unless told not to: the LogManager runs it
        every log.retention.check.interval.ms), removal of segments deleted earlier, expiry of idle
        producer ids."""
        config = self.config
        segment = self.active
        if (segment.size and not segment.failed
                and now_ms - segment.created_ms > config.max_segment_ms - self._roll_jitter_ms):
            self.roll(now_ms)
        if self.log_end_offset > self.recovery_point and now_ms - self._last_flush_ms >= config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms
        if config.delete and enforce_retention:
            self._apply_retention(now_ms)
        self._delete_due_segments(now_ms)
        self.producer_state.remove_expired(now_ms, self.producer_id_expiration_ms)
        self.producer_state.forget_aborted_before(self.log_start_offset)

    def _delete_due_segments(self, now_ms: int | None) -> None:
        remaining = []
        for entry in self._pending_deletes:
            segment, due = entry
            if now_ms is not None and due is None:
                entry[1] = due = now_ms + self.config.file_delete_delay_ms
            if now_ms is None or now_ms >= due:
                segment.delete_files()
            else:
                remaining.append(entry)
        self._pending_deletes = remaining

    def close(self) -> None:
        """Flush, write the producer state snapshot and close every file (pending deletions finish now)."""
        if self._closed:
            return
        self.active.on_become_inactive()
        # fsync even when flush() finds every record flushed (flush.messages=1): on_become_inactive may have
        # just written the time index's final entry, and after the clean-shutdown marker the next start
        # trusts that index as it is on disk; a power loss soon after the shutdown would drop the entry.
        self.active.flush()
        self.flush()
        self._write_producer_snapshot(self.log_end_offset)
        self.abandon()

    def abandon(self) -> None:
        """Close every file without flushing (the log is being deleted, or the process is failing)."""
        self._closed = True
        for segment in self.segments:
            segment.close()
        self._delete_due_segments(None)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, hw={self._high_watermark}, segments={len(self.segments)})")


def largest_timestamp(segment: LogSegment) -> int:
    """Kafka's LogSegment.largestTimestamp: the largest record timestamp, else the file's mtime."""
    if segment.max_timestamp != NO_TIMESTAMP:
        return segment.max_timestamp
    return int(os.fstat(segment.fd).st_mtime * 1000)
