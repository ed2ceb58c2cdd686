"""GroupService: runs the sans-I/O group coordinator inside the node.

The core decides; this shell does the I/O. Its `Append` actions become record batches written to the
compacted internal topic `__consumer_offsets` (before the replies that follow them are released), parked
JoinGroup/SyncGroup requests are futures resolved by `Reply` actions, and one task drives the core's
timers. On start every `__consumer_offsets` partition is replayed into the core.
"""

from __future__ import annotations

import asyncio
import logging
import os

from odradek.broker.replica_manager import now_ms
from odradek.coordinator.group_coordinator import Append, GroupCoordinator, Reply
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import build_batch, decode_batches

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
LOAD_CHUNK_BYTES = 4 * 1024 * 1024


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

    # lifecycle

    def start(self) -> None:
        topic = self.node.controller.image.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            started = now_ms()
            for index in sorted(topic.partitions):
                self.core.load(self._read_partition(index), now_ms(), partition=index)
            log.info("Loaded consumer groups from %d %s partitions in %d ms", len(topic.partitions), OFFSETS_TOPIC,
                     now_ms() - started)
        self._timers = asyncio.create_task(self._drive_timers())

    def stop(self) -> None:
        if self._timers:
            self._timers.cancel()

    def _read_partition(self, index: int):
        partition_log = self.node.log_manager.get(OFFSETS_TOPIC, index)
        if partition_log is None:
            return
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            region = partition_log.read(offset, LOAD_CHUNK_BYTES, max_offset=partition_log.log_end_offset)
            if region is None:
                return
            data = os.pread(region.fd, region.size, region.position)
            for info, batch in decode_batches(data):
                for record in batch:
                    if record.offset >= offset and record.key is not None:
                        yield record.key, record.value
                offset = max(offset, info.last_offset + 1)

    def ensure_offsets_topic(self) -> bool:
        """Create `__consumer_offsets` when it is first needed, as Kafka does; False if it cannot exist."""
        image = self.node.controller.image
        if OFFSETS_TOPIC in image.topics:
            return True
        replication = min(self.node.config["offsets.topic.replication.factor"], len(self.node.controller.live_brokers))
        try:
            self.node.controller.create_topic(OFFSETS_TOPIC, self.core.num_partitions, replication,
                                              configs=OFFSETS_TOPIC_CONFIGS)
        except KafkaError as exc:
            log.error("Cannot create %s: %s", OFFSETS_TOPIC, exc)
            return False
        for index in range(self.core.num_partitions):
            self.core.load((), now_ms(), partition=index)
        return True

    # running the core

    def apply(self, actions: list) -> None:
        """Carry out the core's actions in order: appends first become durable, then replies are released."""
        failed = False
        for action in actions:
            if isinstance(action, Append):
                failed = not self._append(action) or failed
            elif isinstance(action, Reply):
                future = action.token
                if not future.done():
                    response = action.response
                    if failed and response.get("error_code") == ErrorCode.NONE:
                        response = {**response, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
                    future.set_result(response)
        self._wakeup.set()

    def append_or_fail(self, appends: list[Append]) -> bool:
        ok = True
        for append in appends:
            ok = self._append(append) and ok
        self._wakeup.set()
        return ok

    def _append(self, append: Append) -> bool:
        if not self.ensure_offsets_topic():
            return False
        batch = bytearray(build_batch([(key, value, []) for key, value in append.records]))
        result = self.node.replicas.append(OFFSETS_TOPIC, append.partition, memoryview(batch), -1)
        if result.error != ErrorCode.NONE:
            log.error("Writing group state to %s-%d failed: %s %s", OFFSETS_TOPIC, append.partition,
                      result.error.name, result.message or "")
            return False
        return True

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

    async def park(self, call) -> dict:
        """Run a core call that may park its request (JoinGroup, SyncGroup); wait for its reply."""
        future = asyncio.get_running_loop().create_future()
        self.apply(call(future))
        return await future
