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
from odradek.protocol.records import BatchInfo

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc32c of the rest, producer count
_PRODUCER = struct.Struct(">qhb")  # producer id, epoch, batch count
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


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


class ProducerEntry:
    """One producer id's epoch and its last `NUM_BATCHES_TO_RETAIN` batches, oldest first."""

    __slots__ = ("producer_id", "epoch", "batches")

    def __init__(self, producer_id: int, epoch: int = NO_PRODUCER_EPOCH):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp if self.batches else -1

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

    def update(
        self, info: BatchInfo, first_offset: int, last_offset: int, timestamp: int | None = None
    ) -> None:
        """Record an appended batch at its assigned offsets. `timestamp` defaults to the batch's maxTimestamp
        (pass the LogAppendTime when the broker set one)."""
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
        if info.is_control or info.base_sequence < 0:
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

    def rebuild_from(self, infos: Iterable[BatchInfo]) -> None:
        """Replay batches read back from the log (offsets as stored), on top of the current state."""
        for info in infos:
            if info.producer_id >= 0:
                self.update(info, info.base_offset, info.last_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for `producer.id.expiration.ms`; returns the ids removed."""
        expired = [
            pid for pid, entry in self.producers.items() if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def clear(self) -> None:
        self.producers.clear()

    def snapshot(self) -> bytes:
        body = bytearray()
        for entry in self.producers.values():
            body += _PRODUCER.pack(entry.producer_id, entry.epoch, len(entry.batches))
            for batch in entry.batches:
                body += _BATCH.pack(*batch)
        header = _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(body), len(self.producers))
        return header + bytes(body)

    def load(self, data: bytes) -> None:
        """Replace the state with a snapshot's; raises CorruptSnapshotError if it does not check out."""
        view = memoryview(data)
        if len(view) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError("producer state snapshot is truncated")
        version, crc, count = _SNAPSHOT_HEADER.unpack_from(view, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown producer state snapshot version {version}")
        if crc32c(view[_SNAPSHOT_HEADER.size :]) != crc:
            raise CorruptSnapshotError("producer state snapshot checksum mismatch")
        producers: dict[int, ProducerEntry] = {}
        pos = _SNAPSHOT_HEADER.size
        try:
            for _ in range(count):
                producer_id, epoch, batch_count = _PRODUCER.unpack_from(view, pos)
                pos += _PRODUCER.size
                entry = ProducerEntry(producer_id, epoch)
                for _ in range(batch_count):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(view, pos)))
                    pos += _BATCH.size
                producers[producer_id] = entry
        except struct.error:
            raise CorruptSnapshotError("producer state snapshot is truncated") from None
        if pos != len(view):
            raise CorruptSnapshotError("trailing bytes in producer state snapshot")
        self.producers = producers

    @classmethod
    def from_snapshot(cls, data: bytes) -> "ProducerStateManager":
        manager = cls()
        manager.load(data)
        return manager
