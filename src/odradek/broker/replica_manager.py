"""ReplicaManager: the partitions this node hosts, as leader or follower, and produce, fetch and offset look-ups.

The metadata image says who leads each partition, in which leader epoch, and who is in sync. A leader
appends produced batches, serves consumers up to its high watermark, and serves followers' fetches, from
which it learns each follower's log end: the high watermark is the smallest log end among the in-sync
replicas (including replicas whose joining is pending, KIP-497), and acks=all requests wait until it
passes their batch. A follower that has not caught up for replica.lag.time.max.ms leaves the ISR, one that
catches up joins it, both through AlterPartition to the controller. A follower divergent from its leader
(a deposed leader's unreplicated suffix) learns the diverging epoch from its fetch and truncates exactly
that suffix (replication/fetcher.py drives followers).

Fetches and acks=all produces that cannot be answered yet wait, keyed by partition, and are woken by
appends and high watermark moves. An I/O error while serving a partition takes its whole log dir offline
(LogManager.fail_dir); from then on that dir's partitions answer KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field

from odradek.controller.metadata_image import PartitionImage
from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.metrics.partition_counters import PartitionCounterTable
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.file_region import FileRegion
from odradek.protocol.records import scan_valid_prefix, stamp_leader_epoch
from odradek.registry import validation as schema_validation
from odradek.replication.throttle import ReplicationQuota, is_throttled
from odradek.storage.log import PartitionLog, UnexpectedAppendOffset

READ_COMMITTED = 1  # isolation level

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -5
LATEST_TIERED_TIMESTAMP = -6
ALTER_PARTITION, ALTER_PARTITION_VERSION = 56, 2


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1


@dataclass
class Partition:
    topic: str
    index: int
    log: PartitionLog
    node_id: int
    leader: int = -1
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: tuple[int, ...] | None = None  # an AlterPartition in flight
    # a mirror partition's leader truncated its log to this offset (the source truncated) in this leader epoch,
    # and some replica has yet to fetch from at or below it since: nothing is appended until every one has
    mirror_truncated_to: int | None = None

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

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
    last_offset: int = -1
    leader_epoch: int = -1
    record_errors: tuple[tuple[int, str], ...] = ()


@dataclass
class FetchRead:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) for a divergent follower
    aborted_transactions: list | None = None  # read_committed: AbortedTxns overlapping what may be read

    @property
    def size(self) -> int:
        return self.records.size if self.records else 0


class MirrorDiverged(Exception):
    """A source's batches for a mirror partition that cannot follow the mirror's log: the mirror must be checked
    against the source again (links/mirror.py)."""


class ReplicaManager:
    def __init__(self, node):
        self.node = node
        self.node_id = node.node_id
        self.log_manager = node.log_manager
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = defaultdict(set)
        self.leader_quota = ReplicationQuota(lambda: node.controller.dynamic["leader.replication.throttled.rate"])
        self.topic_stats = BrokerTopicStats()  # Kafka's BrokerTopicMetrics, counted by append and read
        self.partition_counters = PartitionCounterTable()  # the balancer's load per partition (balancer/sampler.py)
        # Kafka's IsrShrinksPerSec, IsrExpandsPerSec and FailedIsrUpdatesPerSec: this node's AlterPartition
        # requests as a leader, accepted (by the way the ISR changed) or not
        self.isr_shrinks = self.isr_expands = self.failed_isr_updates = 0

    # hosting

    def host(self, topic: str, index: int, log_: PartitionLog, image: PartitionImage) -> None:
        """Serve a partition in the role the metadata gives this node (called again on every change)."""
        key = (topic, index)
        partition = self.partitions.get(key)
        if partition is None or partition.log is not log_:
            partition = self.partitions[key] = Partition(topic, index, log_, self.node_id)
        was_leader, old_epoch = partition.is_leader, partition.leader_epoch
        partition.leader, partition.leader_epoch = image.leader, image.leader_epoch
        partition.isr, partition.replicas = tuple(image.isr), tuple(image.replicas)
        if image.partition_epoch != partition.partition_epoch:
            partition.pending_isr = None  # the controller decided; the image now says what
        partition.partition_epoch = image.partition_epoch
        if partition.is_leader:
            if not was_leader or old_epoch != partition.leader_epoch:
                self._become_leader(partition)
            else:  # a reassignment adds or removes followers
                for replica in partition.replicas:
                    if replica != self.node_id and replica not in partition.followers:
                        partition.followers[replica] = FollowerState()
                for replica in [r for r in partition.followers if r not in partition.replicas]:
                    del partition.followers[replica]
            self._advance_high_watermark(partition)
        else:
            partition.followers = {}
            self.node.fetchers.follow(topic, index, partition.leader)
        self._wake(key)

    def _become_leader(self, partition: Partition) -> None:
        self.node.fetchers.unfollow(partition.topic, partition.index)
        now = now_ms()
        # ISR members get a full lag window to show up; the epoch starts at our log end (KIP-101).
        partition.followers = {r: FollowerState(last_caught_up_ms=now if r in partition.isr else 0)
                               for r in partition.replicas if r != self.node_id}
        partition.mirror_truncated_to = None  # a new leader epoch: the followers' epoch check is sound again
        partition.log.leader_epochs.assign(partition.leader_epoch, partition.log.log_end_offset)
        log.debug("Leading %s-%d in epoch %d from offset %d (ISR %s)", partition.topic, partition.index,
                 partition.leader_epoch, partition.log.log_end_offset, list(partition.isr))

    def replace_log(self, topic: str, index: int, log_: PartitionLog) -> None:
        """The partition's log moved to another log dir: the same records, now served from there."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            partition.log = log_
        self._wake((topic, index))

    def unhost(self, topic: str, index: int) -> None:
        self.partitions.pop((topic, index), None)
        self.partition_counters.partitions.pop((topic, index), None)
        self.node.fetchers.unfollow(topic, index)
        self._wake((topic, index))

    def partition(self, topic: str, index: int) -> Partition:
        """The partition as its leader serves it; raises for followers and partitions not hosted."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self.log_manager.is_offline(topic, index):
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log dir of {topic}-{index} is offline")
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"node {self.node_id} does not lead {topic}-{index}")
        return partition

    def on_dir_failure(self, keys: list[tuple[str, int]]) -> None:
        """Wake the fetches waiting on partitions that just went offline, so they answer at once."""
        for key in keys:
            self._wake(key)

    def _storage_failed(self, partition: Partition, exc: OSError) -> KafkaError:
        self.log_manager.fail_dir_of(partition.log, exc)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{partition.topic}-{partition.index}: {exc.strerror or exc}")

    # produce

    def append(self, topic: str, index: int, records, required_acks: int, *,
               from_coordinator: bool = False, verification: object | None = False) -> ProduceResult:
        def write(partition: Partition):
            if records is None or len(records) == 0:
                raise KafkaError(ErrorCode.INVALID_RECORD, "the produce request carries no record batch")
            if required_acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
                raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                 f"{len(partition.isr)} in-sync replicas, min.insync.replicas is "
                                 f"{partition.log.config.min_insync_replicas}")
            config = partition.log.config
            if config.confluent_key_schema_validation or config.confluent_value_schema_validation:
                schema_validation.check_produce(self.node, topic, records, config, from_coordinator)
            return partition.log.append_as_leader(records, now_ms=now_ms(), leader_epoch=partition.leader_epoch,
                                                  from_coordinator=from_coordinator, verification=verification)

        result = self._append_as_leader(topic, index, write)
        if result.error == ErrorCode.NONE:
            self.topic_stats.appended(topic, result.last_offset - result.base_offset + 1, len(records))
            self.partition_counters.appended(topic, index, len(records))
        else:
            self.topic_stats.append_failed(topic, (topic, index) in self.partitions, result.error)
        return result

    def append_marker(self, topic: str, index: int, commit: bool, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int) -> ProduceResult:
        """WriteTxnMarkers on this partition's leader: end the producer's transaction here."""
        return self._append_as_leader(topic, index, lambda partition: partition.log.append_marker(
            commit, producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
            now_ms=now_ms(), leader_epoch=partition.leader_epoch))

    def _append_as_leader(self, topic: str, index: int, write) -> ProduceResult:
        partition = None
        try:
            partition = self.partition(topic, index)
            if partition.mirror_truncated_to is not None and not self.mirror_replicas_truncated(topic, index):
                # a mirror promoted right after its truncation: the same wait as for mirrored batches
                raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, f"the replicas of {topic}-{index} have yet to "
                                 f"truncate to offset {partition.mirror_truncated_to} (its source lost records)")
            info = write(partition)
        except KafkaError as exc:
            if exc.record_errors:
                return ProduceResult(exc.code, message=exc.message, log_start_offset=partition.log.log_start_offset,
                                     record_errors=exc.record_errors)
            return ProduceResult(exc.code, message=exc.message)
        except OSError as exc:
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, message=self._storage_failed(partition, exc).message)
        self._advance_high_watermark(partition)
        self._wake((topic, index))
        return ProduceResult(ErrorCode.NONE, info.first_offset, info.log_append_time_ms, info.log_start_offset,
                             last_offset=info.last_offset, leader_epoch=partition.leader_epoch)

    def start_verification(self, topic: str, index: int, producer_id: int) -> object | None:
        """The guard for verifying a transactional write with the coordinator; None when the producer's
        transaction is already open here (or the partition is not led here: the append will say so)."""
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            return None
        state = partition.log.producer_state
        return state.start_verification(producer_id) if state.needs_verification(producer_id) else None

    def replication_outcome(self, topic: str, index: int, last_offset: int, leader_epoch: int) -> ErrorCode | None:
        """acks=all: how a batch ending at `last_offset`, written in `leader_epoch`, stands now: NONE once the
        high watermark has passed it, an error once it cannot, None while it waits for the in-sync replicas."""
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader or partition.leader_epoch != leader_epoch \
                or self.log_manager.is_offline(topic, index):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.log.high_watermark > last_offset:
            if len(partition.isr) < partition.log.config.min_insync_replicas:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ErrorCode.NONE
        return None

    async def wait_for_replication(self, topic: str, index: int, last_offset: int, leader_epoch: int,
                                   timeout_s: float) -> ErrorCode:
        """acks=all: wait until the high watermark passes `last_offset` in the epoch it was written in."""
        (error,) = await self.wait_for_replication_of([(topic, index, last_offset, leader_epoch)], timeout_s)
        return error

    async def wait_for_replication_of(self, batches: list[tuple[str, int, int, int]],
                                      timeout_s: float) -> list[ErrorCode]:
        """wait_for_replication for several (topic, index, last offset, leader epoch) at once, in one task."""
        outcomes = [self.replication_outcome(*batch) for batch in batches]
        deadline = time.monotonic() + timeout_s
        while None in outcomes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return [ErrorCode.REQUEST_TIMED_OUT if outcome is None else outcome for outcome in outcomes]
            await self.wait_for_data([(topic, index) for (topic, index, *_), outcome in zip(batches, outcomes, strict=True)
                                      if outcome is None], remaining)
            outcomes = [self.replication_outcome(*batch) if outcome is None else outcome
                        for batch, outcome in zip(batches, outcomes, strict=True)]
        return outcomes

    # fetch

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int, current_leader_epoch: int,
             min_one_batch: bool, read_committed: bool = False) -> FetchRead:
        """A consumer's read from the leader: up to the high watermark, or the last stable offset for
        read_committed, which also gets the aborted transactions it must skip."""
        try:
            partition = self.partition(topic, index)
            partition.check_leader_epoch(current_leader_epoch)
            log_ = partition.log
            stable = log_.last_stable_offset
            limit = stable if read_committed else log_.high_watermark
            try:
                region = log_.read(fetch_offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)
            except OSError as exc:
                raise self._storage_failed(partition, exc) from exc
        except KafkaError as exc:
            self.topic_stats.read_failed(topic, (topic, index) in self.partitions, exc.code)
            return FetchRead(exc.code)  # as Kafka: a consumer gets no offsets with an error
        self.topic_stats.read(topic)
        aborted = None
        if read_committed:
            aborted = log_.aborted_transactions(fetch_offset, limit) if region is not None else []
        return FetchRead(ErrorCode.NONE, log_.high_watermark, stable, log_.log_start_offset, region,
                         aborted_transactions=aborted)

    def _failed_read(self, topic: str, index: int, exc: KafkaError) -> FetchRead:
        """A follower's failed fetch still carries the leader's offsets: on OFFSET_OUT_OF_RANGE it truncates to
        them (Kafka's followers ask with ListOffsets instead)."""
        partition = self.partitions.get((topic, index))
        if partition is None or exc.code == ErrorCode.KAFKA_STORAGE_ERROR:
            return FetchRead(exc.code)
        log_ = partition.log
        return FetchRead(exc.code, log_.high_watermark, log_.last_stable_offset, log_.log_start_offset)

    def read_for_follower(self, topic: str, index: int, replica_id: int, fetch_offset: int, last_fetched_epoch: int,
                          current_leader_epoch: int, max_bytes: int) -> FetchRead:
        """A follower's fetch: it reports its log end (fetch_offset), then reads up to our log end."""
        try:
            partition = self.partition(topic, index)
            partition.check_leader_epoch(current_leader_epoch)
            follower = partition.followers.get(replica_id)
            if follower is None:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"node {replica_id} is no replica of {topic}-{index}")
            log_ = partition.log
            if last_fetched_epoch >= 0:
                epoch, end = log_.end_offset_for_epoch(last_fetched_epoch)
                if epoch < 0:  # the follower has an epoch we never had: all of it after our latest epoch goes
                    epoch, end = max(log_.leader_epochs.latest_epoch, 0), log_.log_end_offset
                if epoch != last_fetched_epoch or end < fetch_offset:
                    return FetchRead(ErrorCode.NONE, log_.high_watermark, log_.high_watermark, log_.log_start_offset,
                                     diverging_epoch=(epoch, end))
            self._update_follower(partition, follower, replica_id, fetch_offset)
            # the topic names the leader's own replica (Kafka's rule), and the follower is still catching up
            throttled = replica_id not in partition.isr and is_throttled(
                log_.config.leader_replication_throttled_replicas, index, self.node_id)
            if throttled and self.leader_quota.exceeded():
                region = None  # this follower catches up later, within leader.replication.throttled.rate
            else:
                try:
                    region = log_.read(fetch_offset, max_bytes, max_offset=log_.log_end_offset, min_one_batch=True)
                except OSError as exc:
                    raise self._storage_failed(partition, exc) from exc
                if throttled and region is not None:
                    self.leader_quota.record(region.size)
        except KafkaError as exc:
            self.topic_stats.read_failed(topic, (topic, index) in self.partitions, exc.code)
            return self._failed_read(topic, index, exc)
        self.topic_stats.read(topic)
        return FetchRead(ErrorCode.NONE, log_.high_watermark, log_.high_watermark, log_.log_start_offset, region)

    def _update_follower(self, partition: Partition, follower: FollowerState, replica_id: int,
                         fetch_offset: int) -> None:
        now = now_ms()
        leader_end = partition.log.log_end_offset
        # Kafka's rule: caught up now if it asked from our log end, or since its previous fetch if it has
        # reached what our log end was then.
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.leader_end_at_last_fetch >= 0:
            follower.last_caught_up_ms = follower.last_fetch_ms
        follower.log_end_offset = fetch_offset
        follower.last_fetch_ms, follower.leader_end_at_last_fetch = now, leader_end
        self._maybe_expand_isr(partition, replica_id, follower)
        self._advance_high_watermark(partition)

    def _advance_high_watermark(self, partition: Partition) -> None:
        log_ = partition.log
        members = set(partition.isr) | set(partition.pending_isr or ())
        ends = [log_.log_end_offset] + [partition.followers[r].log_end_offset for r in members
                                        if r != self.node_id and r in partition.followers]
        new = min(ends)
        if new > log_.high_watermark:
            log_.high_watermark = new
            self._wake((partition.topic, partition.index))

    # in-sync replica set

    def _maybe_expand_isr(self, partition: Partition, replica_id: int, follower: FollowerState) -> None:
        if replica_id in partition.isr or partition.pending_isr is not None:
            return
        epoch_start = next((e.start_offset for e in partition.log.leader_epochs.entries
                            if e.epoch == partition.leader_epoch), 0)
        if follower.log_end_offset >= max(partition.log.high_watermark, epoch_start) \
                and replica_id in self.node.image.live_brokers:
            self._alter_isr(partition, (*partition.isr, replica_id))

    def maintain_isr(self) -> None:
        """Shrink the ISR of led partitions by the followers that fell behind for replica.lag.time.max.ms."""
        lag_max = self.node.config["replica.lag.time.max.ms"]
        now = now_ms()
        for partition in self.partitions.values():
            if not partition.is_leader or partition.pending_isr is not None:
                continue
            lagging = [r for r in partition.isr if r != self.node_id
                       and now - partition.followers.get(r, FollowerState()).last_caught_up_ms > lag_max]
            if lagging:
                self._alter_isr(partition, tuple(r for r in partition.isr if r not in lagging))

    def _alter_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        partition.pending_isr = new_isr
        log.info("Asking to change the ISR of %s-%d from %s to %s", partition.topic, partition.index,
                 list(partition.isr), list(new_isr))
        asyncio.get_running_loop().create_task(self._send_alter_partition(partition, new_isr))

    async def _send_alter_partition(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        old_isr = set(partition.isr)
        topic = self.node.image.topics.get(partition.topic)
        body = {"broker_id": self.node_id, "broker_epoch": self.node.lifecycle.epoch, "topics": [{
            "topic_id": topic.topic_id if topic else bytes(16), "partitions": [{
                "partition_index": partition.index, "leader_epoch": partition.leader_epoch,
                "new_isr": list(new_isr), "leader_recovery_state": 0,
                "partition_epoch": partition.partition_epoch}]}]}
        error = None
        try:
            response = await self.node.controller_channel.request(ALTER_PARTITION, ALTER_PARTITION_VERSION, body,
                                                                  timeout_s=10.0)
            error = response["error_code"] or next(
                (p["error_code"] for t in response["topics"] for p in t["partitions"]), ErrorCode.NONE)
        except (KafkaError, ConnectionError, TimeoutError) as exc:
            error = exc
        if error:
            self.failed_isr_updates += 1
            log.info("AlterPartition of %s-%d failed: %s", partition.topic, partition.index,
                     ErrorCode(error).name if isinstance(error, int) else error)
            if partition.pending_isr == new_isr:
                partition.pending_isr = None  # try again at the next check, from the current image
        elif set(new_isr) < old_isr:
            self.isr_shrinks += 1
        elif set(new_isr) > old_isr:
            self.isr_expands += 1

    # follower side (driven by replication/fetcher.py)

    def on_fetched(self, topic: str, index: int, leader_epoch: int, data: dict) -> ErrorCode:
        """Apply one partition of a follower fetch response; returns its error for the fetcher to act on."""
        partition = self.partitions.get((topic, index))
        if partition is None or partition.is_leader or partition.leader_epoch != leader_epoch:
            return ErrorCode.NONE  # the metadata moved on while the fetch was out
        log_ = partition.log
        error = ErrorCode(data["error_code"])
        try:
            if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                if log_.log_end_offset < data["log_start_offset"]:
                    log_.truncate_fully_and_start_at(data["log_start_offset"])
                else:
                    log_.truncate_to(max(data["high_watermark"], log_.high_watermark))
                return ErrorCode.NONE
            if error != ErrorCode.NONE:
                return error
            diverging = data["diverging_epoch"]
            if diverging["end_offset"] >= 0:
                epoch, end = log_.end_offset_for_epoch(diverging["epoch"])
                target = diverging["end_offset"] if end < 0 else min(end, diverging["end_offset"])
                log.info("Truncating %s-%d to %d: diverged from the leader at epoch %d", topic, index, target,
                         diverging["epoch"])
                log_.truncate_to(target)
                return ErrorCode.NONE
            records = data["records"]
            if records is not None and len(records):
                try:
                    log_.append_as_follower(records, now_ms=now_ms())
                except UnexpectedAppendOffset as exc:
                    if log_.log_start_offset != log_.log_end_offset or exc.first_offset > log_.log_end_offset:
                        raise
                    # an empty log starting inside the leader's first batch (a log start moved mid-batch):
                    # it starts at that batch, as Kafka's follower does
                    log_.truncate_fully_and_start_at(exc.first_offset)
                    log_.append_as_follower(records, now_ms=now_ms())
                self.topic_stats.replication_bytes_in += len(records)
            log_.high_watermark = min(data["high_watermark"], log_.log_end_offset)
            if log_.log_start_offset < data["log_start_offset"] <= log_.high_watermark:
                log_.delete_records_before(data["log_start_offset"])
        except OSError as exc:
            return self._storage_failed(partition, exc).code
        except KafkaError as exc:  # a corrupt or misplaced answer: nothing was written; the next fetch retries
            log.warning("Replicated records for %s-%d refused: %s", topic, index, exc)
            return exc.code
        return ErrorCode.NONE

    # mirror side (driven by links/mirror.py)

    def append_mirrored(self, topic: str, index: int, fetched, source_log_start: int) -> int:
        """On the leader of a cluster link's mirror partition: append the batches fetched from the source at
        their offsets, as a follower appends (timestamps, producer ids and markers kept), then follow the
        source's log start. The batches carry this partition's leader epoch instead of the source's, so the
        epoch history is the destination's own, as any partition's here (leader changes, followers'
        truncation, a promotion). A consumer fetch may end in a cut batch: only whole batches are taken, and
        any the log already holds are skipped. Returns the log end offset."""
        partition = self.partition(topic, index)
        if not self.mirror_replicas_truncated(topic, index):
            raise RuntimeError(f"{topic}-{index}: nothing may be appended to a truncated mirror partition until "
                               f"every replica has fetched from at or below offset {partition.mirror_truncated_to}")
        log_ = partition.log
        view = memoryview(fetched or b"")
        infos, _ = scan_valid_prefix(view)
        if infos and infos[0].base_offset < log_.log_end_offset == log_.log_start_offset:
            # an empty log that starts inside the source's first batch (a log start moved mid-batch there): it
            # starts at that batch instead, as Kafka's follower does, and takes the source's log start below
            log_.truncate_fully_and_start_at(infos[0].base_offset)
        if log_.log_end_offset > log_.log_start_offset and any(
                info.base_offset < log_.log_end_offset < info.next_offset for info in infos):
            # the mirror's last batch ends at its log end, so a source batch across it is another history
            raise MirrorDiverged(f"the source's batch across offset {log_.log_end_offset} is not the mirror's")
        fresh = [info for info in infos if info.base_offset >= log_.log_end_offset]
        if fresh:
            start = fresh[0].position
            batches = bytearray(view[start:fresh[-1].end])
            stamp_leader_epoch(batches, [info._replace(position=info.position - start) for info in fresh],
                               partition.leader_epoch)
            log_.append_as_follower(batches, now_ms=now_ms())
            self.topic_stats.replication_bytes_in += len(batches)
        self._advance_high_watermark(partition)
        if log_.log_start_offset < source_log_start <= log_.high_watermark:
            log_.delete_records_before(source_log_start)
        self._wake((topic, index))
        return log_.log_end_offset

    def mirror_batch_at(self, topic: str, index: int, offset: int) -> bytes | None:
        """On a mirror partition's leader: its whole batch holding `offset`, or the first after it (a gap in a
        compacted log); None if there is none."""
        partition = self.partition(topic, index)
        log_ = partition.log
        try:
            region = log_.read(max(offset, log_.log_start_offset), 1, max_offset=log_.log_end_offset,
                               min_one_batch=True)
            return os.pread(region.fd, region.size, region.position) if region is not None else None
        except OSError as exc:
            raise self._storage_failed(partition, exc) from exc

    def truncate_mirror_to(self, topic: str, index: int, offset: int) -> int:
        """On a mirror partition's leader: the source no longer holds the mirror's records from `offset` on (an
        unclean leader election there), so they go, as a diverged follower's do: the log, its indexes, the
        leader epoch cache, the producer state and a high watermark above it. Returns how many offsets the log
        end moved back.

        The followers then learn of it from the divergence check of their next fetch: this leader's epoch
        now ends at `offset`. Until every replica has fetched from at or below `offset`, nothing more is
        appended (append_mirrored refuses, mirror_replicas_truncated says when): appended first, new batches
        in this same leader epoch would let a follower that still holds the old ones beyond its log end
        pass that check, and keep them. A new leader epoch (this leader dying meanwhile) makes the check
        sound again on its own."""
        partition = self.partition(topic, index)
        log_ = partition.log
        before = log_.log_end_offset
        try:
            log_.truncate_to(offset)
        except OSError as exc:
            raise self._storage_failed(partition, exc) from exc
        partition.mirror_truncated_to = log_.log_end_offset
        for follower in partition.followers.values():
            follower.log_end_offset = -1  # unknown until its next fetch; it holds the high watermark meanwhile
        self._wake((topic, index))  # followers long-polling here answer now, against the shorter log
        return before - log_.log_end_offset

    def mirror_replicas_truncated(self, topic: str, index: int) -> bool:
        """Whether every replica of a mirror partition this node leads has fetched from at or below the
        offset the mirror was truncated to since (true when it was not truncated in this leader epoch)."""
        partition = self.partition(topic, index)
        truncated_to = partition.mirror_truncated_to
        if truncated_to is None:
            return True
        for replica in partition.replicas:
            follower = partition.followers.get(replica)
            if replica != self.node_id and (follower is None or not 0 <= follower.log_end_offset <= truncated_to):
                return False
        partition.mirror_truncated_to = None
        return True

    def restart_mirror_at(self, topic: str, index: int, offset: int) -> None:
        """The source no longer holds the mirror's next offset (retention there passed it): start the mirror
        partition's log over at the source's log start."""
        partition = self.partition(topic, index)
        partition.log.truncate_fully_and_start_at(offset)
        self._wake((topic, index))

    def follower_throttled(self, topic: str, index: int) -> bool:
        """Whether this node's fetching of a followed partition counts against follower.replication.throttled.rate:
        the topic names this replica, and it is out of the ISR."""
        partition = self.partitions.get((topic, index))
        return partition is not None and self.node_id not in partition.isr and is_throttled(
            partition.log.config.follower_replication_throttled_replicas, index, self.node_id)

    def fetch_position(self, topic: str, index: int) -> tuple[int, int, int, int] | None:
        """(leader epoch, fetch offset, last fetched epoch, log start) of a followed partition, or None."""
        partition = self.partitions.get((topic, index))
        if partition is None or partition.is_leader or self.log_manager.is_offline(topic, index):
            return None
        log_ = partition.log
        return partition.leader_epoch, log_.log_end_offset, log_.leader_epochs.latest_epoch, log_.log_start_offset

    # waiting

    async def wait_for_data(self, keys: list[tuple[str, int]], timeout_s: float) -> None:
        """Return after an append to, or a high watermark move of, any of `keys`, or after the timeout."""
        if timeout_s <= 0:
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        for key in keys:
            self._waiters[key].add(future)
        # a plain timer rather than asyncio.wait_for: a woken waiter resumes one turn of the event loop sooner
        timer = loop.call_later(timeout_s, _resolve, future)
        try:
            await future
        finally:
            timer.cancel()
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
                _resolve(future)

    # offsets

    def list_offset(self, topic: str, index: int, timestamp: int, current_leader_epoch: int,
                    isolation_level: int) -> tuple[int, int, int]:
        """(timestamp, offset, leader epoch) for a ListOffsets query; raises KafkaError."""
        partition = self.partition(topic, index)
        partition.check_leader_epoch(current_leader_epoch)
        log_ = partition.log
        epoch = partition.leader_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, log_.log_start_offset, epoch
        if timestamp == LATEST_TIMESTAMP:
            return -1, log_.last_stable_offset if isolation_level == READ_COMMITTED else log_.high_watermark, epoch
        if timestamp == MAX_TIMESTAMP:
            offset, max_timestamp = log_.max_timestamp()
            return max_timestamp, offset, epoch
        if timestamp in (EARLIEST_PENDING_UPLOAD_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            return -1, -1, -1  # no tiered storage: nothing is pending upload or tiered
        if timestamp < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
        try:
            found = log_.offset_for_timestamp(timestamp)
        except OSError as exc:
            raise self._storage_failed(partition, exc) from exc
        if found is None or found[0] >= log_.high_watermark:
            return -1, -1, -1
        return found[1], found[0], epoch

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        partition = self.partition(topic, index)
        log_ = partition.log
        if offset == -1:
            offset = log_.high_watermark
        if offset < 0 or offset > log_.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside the partition's range 0..{log_.high_watermark}")
        try:
            return log_.delete_records_before(offset)
        except OSError as exc:
            raise self._storage_failed(partition, exc) from exc


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
