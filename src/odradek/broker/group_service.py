"""GroupService: runs the sans-I/O group coordinator inside the node.

The core decides; this shell does the I/O. Its `Append` actions become record batches written to the
compacted internal topic `__consumer_offsets` (before the replies that follow them are released), parked
JoinGroup/SyncGroup requests are futures resolved by `Reply` actions, and one task drives the core's
timers. The coordinator of a group is the leader of its `__consumer_offsets` partition: a partition is
replayed into the core when this node comes to lead it and unloaded (its groups answer NOT_COORDINATOR)
when leadership moves away.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.broker.replica_manager import now_ms
from odradek.coordinator.group_coordinator import Append, GroupCoordinator, Reply
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import COMMIT_MARKER, build_batch, marker_of

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}
COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms


class GroupService:
    def __init__(self, node):
        self.node = node
        config = node.config
        self.core = GroupCoordinator(
            num_partitions=config["offsets.topic.num.partitions"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            max_group_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            consumer_default_assignor=config["group.consumer.assignors"].split(",")[0].strip(),
        )
        self._wakeup = asyncio.Event()
        self._timers: asyncio.Task | None = None
        self._loaded: set[int] = set()
        self._releases: set[asyncio.Task] = set()

    # lifecycle

    def start(self) -> None:
        topic = self.node.image.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            started = now_ms()
            for index in sorted(topic.partitions):
                self.on_leadership(index)
            log.info("Loaded consumer groups from %d of %d %s partitions in %d ms", len(self._loaded),
                     len(topic.partitions), OFFSETS_TOPIC, now_ms() - started)
        self._timers = asyncio.create_task(self._drive_timers())

    def leads(self, index: int) -> bool:
        partition = self.node.replicas.partitions.get((OFFSETS_TOPIC, index))
        return partition is not None and partition.is_leader

    def on_leadership(self, index: int) -> None:
        """Load a partition's groups when this node comes to lead it; unload them when it no longer does."""
        if self.leads(index):
            if index not in self._loaded:
                self._loaded.add(index)
                open_transactions: dict[int, list] = {}
                self.core.load(self._read_partition(index, open_transactions), now_ms(), partition=index)
                for producer_id, records in open_transactions.items():
                    self.core.restore_pending_offsets(producer_id, records)
        elif index in self._loaded or index not in self.core.unloaded_partitions:
            self._loaded.discard(index)
            self.apply(self.core.unload(index))

    def stop(self) -> None:
        if self._timers:
            self._timers.cancel()

    def _read_partition(self, index: int, open_transactions: dict[int, list]):
        """The partition's records in log order; a transaction's offset commits come at its commit marker
        (dropped at an abort); those of transactions still open are left in `open_transactions`."""
        partition_log = self.node.log_manager.get(OFFSETS_TOPIC, index)
        if partition_log is None:
            return
        for info, batch in partition_log.replay():
            if info.is_control:
                marker = marker_of(batch[0]) if info.producer_id >= 0 and batch else None
                committed = open_transactions.pop(info.producer_id, [])
                if marker is not None and marker[0] == COMMIT_MARKER:
                    yield from committed
            elif info.is_transactional:
                open_transactions.setdefault(info.producer_id, []).extend(
                    (r.key, r.value) for r in batch if r.key is not None)
            else:
                yield from ((r.key, r.value) for r in batch if r.key is not None)

    async def ensure_offsets_topic(self) -> bool:
        """Create `__consumer_offsets` when it is first needed, as Kafka does; False if it cannot exist."""
        if OFFSETS_TOPIC in self.node.image.topics:
            return True
        config = self.node.config
        replication = min(config["offsets.topic.replication.factor"], len(self.node.image.live_brokers))
        configs = {**OFFSETS_TOPIC_CONFIGS, "segment.bytes": str(config["offsets.topic.segment.bytes"])}
        response = await self.node.controller_channel.request(19, 7, {"topics": [{
            "name": OFFSETS_TOPIC, "num_partitions": self.core.num_partitions, "replication_factor": replication,
            "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": 30000, "validate_only": False})
        error = response["topics"][0]["error_code"]
        if error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("Cannot create %s: %s", OFFSETS_TOPIC, response["topics"][0]["error_message"])
            return False
        return OFFSETS_TOPIC in self.node.image.topics

    # running the core

    def apply(self, actions: list) -> None:
        """Carry out the core's actions: the appends are written, and the replies are released once the
        appends are on every in-sync replica (at once on a single node); after a failed append with an error."""
        failed, waits, replies = False, [], []
        for action in actions:
            if isinstance(action, Append):
                ok, wait = self._append(action)
                failed = failed or not ok
                if wait is not None:
                    waits.append(wait)
            elif isinstance(action, Reply):
                replies.append((action, failed))
        if waits:
            task = asyncio.get_running_loop().create_task(self._release_when_replicated(waits, replies))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)
        else:
            self._release(replies, False)
        self._wakeup.set()

    async def _release_when_replicated(self, waits: list, replies: list) -> None:
        self._release(replies, not await self._replicated(waits))

    @staticmethod
    def _release(replies: list, failed: bool) -> None:
        for action, failed_before in replies:
            future = action.token
            if not future.done():
                response = action.response
                if (failed or failed_before) and response.get("error_code") == ErrorCode.NONE:
                    response = {**response, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
                future.set_result(response)

    async def write(self, appends: list[Append], verification: object = False) -> bool:
        """Write appends for a response the handler builds itself; True once every in-sync replica has them.
        `verification`: the guard of a transactional write's verification with the transaction coordinator."""
        ok, waits = True, []
        for append in appends:
            written, wait = self._append(append, verification)
            ok = ok and written
            if wait is not None:
                waits.append(wait)
        self._wakeup.set()
        return await self._replicated(waits) and ok

    async def _replicated(self, waits: list) -> bool:
        errors = await self.node.replicas.wait_for_replication_of(
            [(OFFSETS_TOPIC, partition, last_offset, epoch) for partition, last_offset, epoch in waits], COMMIT_TIMEOUT_S)
        return all(error == ErrorCode.NONE for error in errors)

    def _append(self, append: Append, verification: object = False) -> tuple[bool, tuple[int, int, int] | None]:
        """Write one append as the partition's leader: (written, what to wait for before it counts)."""
        if OFFSETS_TOPIC not in self.node.image.topics:
            if append.undo is not None:
                append.undo()
            return False, None
        producer_id, epoch = append.producer or (-1, -1)
        batch = bytearray(build_batch([(key, value, []) for key, value in append.records], producer_id=producer_id,
                                      producer_epoch=epoch, is_transactional=append.producer is not None))
        result = self.node.replicas.append(OFFSETS_TOPIC, append.partition, memoryview(batch), -1,
                                           from_coordinator=True, verification=verification)
        if result.error != ErrorCode.NONE:
            log.error("Writing group state to %s-%d failed: %s %s", OFFSETS_TOPIC, append.partition,
                      result.error.name, result.message or "")
            if append.undo is not None:
                append.undo()
            return False, None
        partition_log = self.node.replicas.partitions[(OFFSETS_TOPIC, append.partition)].log
        if partition_log.high_watermark > result.last_offset:
            return True, None
        return True, (append.partition, result.last_offset, result.leader_epoch)

    async def _drive_timers(self) -> None:
        while True:
            deadline = self.core.next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass
            try:
                self.apply(self.core.tick(now_ms()))
            except Exception:
                log.exception("group coordinator timer failed")

    def on_transaction_completed(self, index: int, producer_id: int, commit: bool) -> None:
        self.core.complete_transaction(index, producer_id, commit)

    async def park(self, call) -> dict:
        """Run a core call that may park its request (JoinGroup, SyncGroup); wait for its reply."""
        future = asyncio.get_running_loop().create_future()
        self.apply(call(future))
        return await future
