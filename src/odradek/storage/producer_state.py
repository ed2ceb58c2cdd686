"""Idempotent producer state of one partition: epochs and recent sequence ranges per producer id (sans-I/O).

Follows Kafka's ProducerStateManager / ProducerAppendInfo / ProducerStateEntry for client appends:

* a retry of one of the producer's last 5 batches (same epoch, same first and last sequence) is a
  duplicate: the broker answers success with the original offsets and appends nothing;
* an epoch older than the known one -> INVALID_PRODUCER_EPOCH;
* a newer epoch must start at sequence 0 -> else OUT_OF_ORDER_SEQUENCE_NUMBER;
* the same epoch must continue at last sequence + 1 (Int32.MAX wraps to 0) -> else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* an unknown producer id is accepted at any sequence (its state may be gone after retention,
  DeleteRecords or truncation).

Transactions (Kafka's transactional ProducerAppendInfo): a producer's first transactional batch opens its
transaction at that offset; a non-transactional batch while one is open is INVALID_TXN_STATE; a commit or
abort marker (control batch) closes it. The first offset of any transaction still open, or closed by a
marker the high watermark has not yet passed, bounds the last stable offset. Aborted transactions are kept
as (producer id, first offset, marker offset) for read_committed fetches until retention passes them.

The partition's shell calls `check` before appending a batch and `update` after, with the batch's
assigned offsets; on recovery it `load`s the last snapshot and replays later batches with
`rebuild_from`.
"""

import struct
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import ABORT_MARKER, BatchInfo

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

SNAPSHOT_VERSION = 2
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc32c of the rest, producer count
_PRODUCER_V1 = struct.Struct(">qhb")  # producer id, epoch, batch count
# producer id, epoch, coordinator epoch, open transaction's first offset, time of its last marker, batch count
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp
_COUNT = struct.Struct(">i")
_ABORTED = struct.Struct(">qqq")  # producer id, first offset, marker offset


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class DuplicateInfo(NamedTuple):
    """Where a retried batch was appended the first time: answer NONE with `first_offset`."""

    first_offset: int
    last_offset: int
    timestamp: int


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class ProducerEntry:
    """One producer id's epoch, its last `NUM_BATCHES_TO_RETAIN` batches (oldest first), the epoch of the
    coordinator that wrote its last marker, when, and the first offset of its open transaction (-1: none)."""

    __slots__ = ("producer_id", "epoch", "batches", "coordinator_epoch", "txn_first_offset", "marker_timestamp")

    def __init__(self, producer_id: int, epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 txn_first_offset: int = -1, marker_timestamp: int = -1):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = coordinator_epoch
        self.txn_first_offset = txn_first_offset
        self.marker_timestamp = marker_timestamp

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """The producer's last activity here: its last batch or marker (a fencing marker keeps it known)."""
        return max(self.batches[-1].timestamp if self.batches else -1, self.marker_timestamp)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def __repr__(self) -> str:
        return f"ProducerEntry({self.producer_id}, epoch={self.epoch}, batches={list(self.batches)})"


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class CorruptSnapshotError(ValueError):
    """A producer state snapshot failed its checksum or framing: rebuild from the log instead."""


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # transactions closed by a marker at or above the high watermark: (first offset, marker offset)
        self.unreplicated: list[tuple[int, int]] = []
        self.aborted: list[AbortedTxn] = []  # by marker offset
        # KIP-890: producer id -> the guard of a verification with the coordinator under way. A marker drops
        # it, so a transactional batch verified before a marker that ended its transaction is refused.
        self.verifying: dict[int, object] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def check(self, info: BatchInfo) -> DuplicateInfo | None:
        """Validate a client batch before it is appended.

        Returns the original offsets if the batch duplicates one of the producer's last 5, None if
        it may be appended; raises KafkaError(INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER).
        """
        if info.producer_id < 0 or info.is_control:
            return None
        entry = self.producers.get(info.producer_id)
        if entry is None:
            return None
        epoch = info.producer_epoch
        first_seq = info.base_sequence
        duplicate = entry.find_duplicate(epoch, first_seq, info.last_sequence)
        if duplicate is not None:
            return DuplicateInfo(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp)
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {epoch} of producer {info.producer_id} is older than the last seen epoch {entry.epoch}",
            )
        if not info.is_transactional and entry.txn_first_offset >= 0:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {info.producer_id} sent a non-transactional batch inside its open transaction",
            )
        if first_seq < 0:
            return None
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {epoch} of producer {info.producer_id} must start at sequence 0, not {first_seq}",
                )
        elif not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {info.producer_id} sent sequence {first_seq} after {entry.last_seq}",
            )
        return None

    def needs_verification(self, producer_id: int) -> bool:
        """A transactional batch of a producer without an open transaction here must be verified first."""
        entry = self.producers.get(producer_id)
        return entry is None or entry.txn_first_offset < 0

    def start_verification(self, producer_id: int) -> object:
        return self.verifying.setdefault(producer_id, object())

    def check_verified(self, info: BatchInfo, guard: object | None) -> None:
        """Raise INVALID_TXN_STATE for a transactional batch that would open a transaction here without a
        verification still standing (the coordinator did not add this partition, or a marker came since)."""
        if info.is_transactional and self.needs_verification(info.producer_id) and (
                guard is None or self.verifying.get(info.producer_id) is not guard):
            raise KafkaError(ErrorCode.INVALID_TXN_STATE, "Record was not part of an ongoing transaction")

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Validate a transaction marker from the coordinator: raises TRANSACTION_COORDINATOR_FENCED for a
        marker from an older coordinator, INVALID_PRODUCER_EPOCH for an older producer epoch."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker epoch {epoch} of producer {producer_id} is older than the last seen epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker of coordinator epoch {coordinator_epoch} for producer {producer_id} is older than "
                f"{entry.coordinator_epoch}",
            )

    def update(
        self,
        info: BatchInfo,
        first_offset: int,
        last_offset: int,
        timestamp: int | None = None,
        *,
        marker: tuple[int, int] | None = None,
    ) -> None:
        """Record an appended batch at its assigned offsets. `timestamp` defaults to the batch's maxTimestamp
        (pass the LogAppendTime when the broker set one). A control batch passes its `marker`: (type,
        coordinator epoch)."""
        if info.producer_id < 0:
            return
        entry = self.producers.get(info.producer_id)
        if entry is None:
            entry = self.producers[info.producer_id] = ProducerEntry(info.producer_id, info.producer_epoch)
        if info.producer_epoch != entry.epoch:
            if info.is_control and info.producer_epoch < entry.epoch:
                return
            entry.epoch = info.producer_epoch
            entry.batches.clear()
        if info.is_control:
            entry.marker_timestamp = max(entry.marker_timestamp, info.max_timestamp if timestamp is None else timestamp)
            if marker is not None:
                self.verifying.pop(info.producer_id, None)
                self._close_txn(entry, marker, first_offset)
            return
        if info.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self.verifying.pop(info.producer_id, None)
        if info.base_sequence < 0:
            return
        entry.batches.append(
            BatchMetadata(
                info.base_sequence,
                info.last_sequence,
                first_offset,
                last_offset,
                info.max_timestamp if timestamp is None else timestamp,
            )
        )

    def _close_txn(self, entry: ProducerEntry, marker: tuple[int, int], marker_offset: int) -> None:
        marker_type, coordinator_epoch = marker
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        first = entry.txn_first_offset
        if first < 0:
            return  # a marker for a transaction that wrote nothing here (or a retried marker)
        entry.txn_first_offset = -1
        self.unreplicated.append((first, marker_offset))
        if marker_type == ABORT_MARKER:
            self.aborted.append(AbortedTxn(entry.producer_id, first, marker_offset))

    def on_high_watermark(self, high_watermark: int) -> None:
        """Transactions whose marker the high watermark passed are stable."""
        if self.unreplicated:
            self.unreplicated = [txn for txn in self.unreplicated if txn[1] >= high_watermark]

    def first_unstable_offset(self) -> int | None:
        """The first offset of an open transaction or of one whose marker is not yet replicated."""
        firsts = [entry.txn_first_offset for entry in self.producers.values() if entry.txn_first_offset >= 0]
        firsts.extend(first for first, _ in self.unreplicated)
        return min(firsts, default=None)

    def open_transactions(self) -> list[ProducerEntry]:
        return [entry for entry in self.producers.values() if entry.txn_first_offset >= 0]

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start, end): what a read_committed fetch there must skip."""
        return [txn for txn in self.aborted if txn.last_offset >= start and txn.first_offset < end]

    def forget_aborted_before(self, log_start_offset: int) -> None:
        if self.aborted and self.aborted[0].last_offset < log_start_offset:
            self.aborted = [txn for txn in self.aborted if txn.last_offset >= log_start_offset]

    def rebuild_from(self, batches: Iterable[tuple[BatchInfo, tuple[int, int] | None]]) -> None:
        """Replay batches read back from the log (offsets as stored), on top of the current state: each with
        its marker (type, coordinator epoch) when it is a control batch."""
        for info, marker in batches:
            if info.producer_id >= 0:
                self.update(info, info.base_offset, info.last_offset, marker=marker)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for `producer.id.expiration.ms` with no open transaction; returns the ids."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms and entry.txn_first_offset < 0
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def clear(self) -> None:
        self.producers.clear()
        self.unreplicated.clear()
        self.aborted.clear()

    def snapshot(self) -> bytes:
        body = bytearray()
        for entry in self.producers.values():
            body += _PRODUCER.pack(entry.producer_id, entry.epoch, entry.coordinator_epoch, entry.txn_first_offset,
                                   entry.marker_timestamp, len(entry.batches))
            for batch in entry.batches:
                body += _BATCH.pack(*batch)
        body += _COUNT.pack(len(self.aborted))
        for txn in self.aborted:
            body += _ABORTED.pack(*txn)
        header = _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(body), len(self.producers))
        return header + bytes(body)

    def load(self, data: bytes) -> None:
        """Replace the state with a snapshot's; raises CorruptSnapshotError if it does not check out."""
        view = memoryview(data)
        if len(view) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError("producer state snapshot is truncated")
        version, crc, count = _SNAPSHOT_HEADER.unpack_from(view, 0)
        if version not in (1, SNAPSHOT_VERSION):
            raise CorruptSnapshotError(f"unknown producer state snapshot version {version}")
        if crc32c(view[_SNAPSHOT_HEADER.size :]) != crc:
            raise CorruptSnapshotError("producer state snapshot checksum mismatch")
        producers: dict[int, ProducerEntry] = {}
        aborted: list[AbortedTxn] = []
        pos = _SNAPSHOT_HEADER.size
        try:
            for _ in range(count):
                if version == 1:
                    producer_id, epoch, batch_count = _PRODUCER_V1.unpack_from(view, pos)
                    entry = ProducerEntry(producer_id, epoch)
                    pos += _PRODUCER_V1.size
                else:
                    producer_id, epoch, coordinator_epoch, txn_first_offset, marker_timestamp, batch_count = (
                        _PRODUCER.unpack_from(view, pos))
                    entry = ProducerEntry(producer_id, epoch, coordinator_epoch, txn_first_offset, marker_timestamp)
                    pos += _PRODUCER.size
                for _ in range(batch_count):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(view, pos)))
                    pos += _BATCH.size
                producers[producer_id] = entry
            if version > 1:
                (aborted_count,) = _COUNT.unpack_from(view, pos)
                pos += _COUNT.size
                for _ in range(aborted_count):
                    aborted.append(AbortedTxn(*_ABORTED.unpack_from(view, pos)))
                    pos += _ABORTED.size
        except struct.error:
            raise CorruptSnapshotError("producer state snapshot is truncated") from None
        if pos != len(view):
            raise CorruptSnapshotError("trailing bytes in producer state snapshot")
        self.producers = producers
        self.aborted = aborted
        self.unreplicated = []

    @classmethod
    def from_snapshot(cls, data: bytes) -> "ProducerStateManager":
        manager = cls()
        manager.load(data)
        return manager
