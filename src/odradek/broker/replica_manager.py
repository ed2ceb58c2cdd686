"""ReplicaManager: the partitions this node hosts, and produce, fetch and offset look-ups against their logs.

On a single node every partition is led here and its in-sync replica set is just this node, so the high
watermark follows the log end offset as soon as an append is written. Fetches that cannot be answered yet
wait in the purgatory, keyed by partition, and are woken by appends to the partitions they read.

An I/O error while serving a partition takes its whole log dir offline (LogManager.fail_dir); from then on
that dir's partitions answer KAFKA_STORAGE_ERROR and the fetches waiting on them are woken to say so.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.file_region import FileRegion
from odradek.storage.log import PartitionLog
from odradek.storage.log_manager import LogManager

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -5
LATEST_TIERED_TIMESTAMP = -6


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Partition:
    topic: str
    index: int
    log: PartitionLog
    leader_epoch: int = 0
    isr: tuple[int, ...] = ()

    def check_leader_epoch(self, requested: int) -> None:
        if requested < 0 or requested == self.leader_epoch:
            return
        if requested < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)


@dataclass
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None


@dataclass
class FetchRead:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | None = None

    @property
    def size(self) -> int:
        return self.records.size if self.records else 0


class ReplicaManager:
    def __init__(self, log_manager: LogManager):
        self.log_manager = log_manager
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = defaultdict(set)

    # hosting

    def host(self, topic: str, index: int, log: PartitionLog, leader_epoch: int, isr: list[int]) -> None:
        # This node is the only replica: everything its log holds, recovered after a crash too, is committed.
        log.high_watermark = log.log_end_offset
        self.partitions[(topic, index)] = Partition(topic, index, log, leader_epoch, tuple(isr))

    def unhost(self, topic: str, index: int) -> None:
        self.partitions.pop((topic, index), None)
        self._wake((topic, index))

    def partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self.log_manager.is_offline(topic, index):
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log dir of {topic}-{index} is offline")
        return partition

    def on_dir_failure(self, keys: list[tuple[str, int]]) -> None:
        """Wake the fetches waiting on partitions that just went offline, so they answer at once."""
        for key in keys:
            self._wake(key)

    def _storage_failed(self, partition: Partition, exc: OSError) -> KafkaError:
        self.log_manager.fail_dir_of(partition.log, exc)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{partition.topic}-{partition.index}: {exc.strerror or exc}")

    # produce

    def append(self, topic: str, index: int, records, required_acks: int) -> ProduceResult:
        partition = None
        try:
            partition = self.partition(topic, index)
            if records is None or len(records) == 0:
                raise KafkaError(ErrorCode.INVALID_RECORD, "the produce request carries no record batch")
            if required_acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
                raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                 f"{len(partition.isr)} in-sync replicas, min.insync.replicas is "
                                 f"{partition.log.config.min_insync_replicas}")
            info = partition.log.append_as_leader(records, now_ms=now_ms(), leader_epoch=partition.leader_epoch)
        except KafkaError as exc:
            return ProduceResult(exc.code, message=exc.message)
        except OSError as exc:
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, message=self._storage_failed(partition, exc).message)
        # Single replica: the ISR is this node, so the high watermark moves with the log end offset.
        partition.log.high_watermark = partition.log.log_end_offset
        self._wake((topic, index))
        return ProduceResult(ErrorCode.NONE, info.first_offset, info.log_append_time_ms, info.log_start_offset)

    # fetch

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int, current_leader_epoch: int,
             min_one_batch: bool) -> FetchRead:
        try:
            partition = self.partition(topic, index)
            partition.check_leader_epoch(current_leader_epoch)
            log = partition.log
            try:
                region = log.read(fetch_offset, max_bytes, max_offset=log.high_watermark,
                                  min_one_batch=min_one_batch)
            except OSError as exc:
                raise self._storage_failed(partition, exc) from exc
        except KafkaError as exc:
            partition = self.partitions.get((topic, index))
            if partition is None or exc.code == ErrorCode.KAFKA_STORAGE_ERROR:
                return FetchRead(exc.code)
            log = partition.log
            return FetchRead(exc.code, log.high_watermark, log.high_watermark, log.log_start_offset)
        return FetchRead(ErrorCode.NONE, log.high_watermark, log.high_watermark, log.log_start_offset, region)

    async def wait_for_data(self, keys: list[tuple[str, int]], timeout_s: float) -> None:
        """Return after an append to any of `keys`, or after the timeout."""
        if timeout_s <= 0:
            return
        future = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters[key].add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    def _wake(self, key: tuple[str, int]) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    # offsets

    def list_offset(self, topic: str, index: int, timestamp: int, current_leader_epoch: int,
                    isolation_level: int) -> tuple[int, int, int]:
        """(timestamp, offset, leader epoch) for a ListOffsets query; raises KafkaError."""
        partition = self.partition(topic, index)
        partition.check_leader_epoch(current_leader_epoch)
        log = partition.log
        epoch = partition.leader_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, log.log_start_offset, epoch
        if timestamp == LATEST_TIMESTAMP:
            return -1, log.high_watermark, epoch
        if timestamp == MAX_TIMESTAMP:
            offset, max_timestamp = log.max_timestamp()
            return max_timestamp, offset, epoch
        if timestamp in (EARLIEST_PENDING_UPLOAD_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            return -1, -1, -1  # no tiered storage: nothing is pending upload or tiered
        if timestamp < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
        try:
            found = log.offset_for_timestamp(timestamp)
        except OSError as exc:
            raise self._storage_failed(partition, exc) from exc
        if found is None or found[0] >= log.high_watermark:
            return -1, -1, -1
        return found[1], found[0], epoch

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        partition = self.partition(topic, index)
        log = partition.log
        if offset == -1:
            offset = log.high_watermark
        if offset < 0 or offset > log.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside the partition's range 0..{log.high_watermark}")
        try:
            return log.delete_records_before(offset)
        except OSError as exc:
            raise self._storage_failed(partition, exc) from exc
