"""AlterReplicaLogDirs: a replica of this node moves to another of its log dirs while it keeps serving.

As in Kafka, a future log in the destination dir is filled from the current log the way a follower is filled
from its leader: whole batches with their offsets, leader epochs and producer ids, at most
replica.alter.log.dirs.io.max.bytes.per.second. Once it holds everything the current log holds it takes its
place in one step on the event loop, so no append falls in between, and the current log is deleted. When
the current log is cut back meanwhile (it follows a new leader and truncates) or its start passes the copy,
the copy starts over. A restart abandons a move (LogManager removes the future dir); ask for it again.
"""

from __future__ import annotations

import asyncio
import logging
import os

from odradek.broker.replica_manager import now_ms
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.throttle import ReplicationQuota

log = logging.getLogger(__name__)

COPY_CHUNK_BYTES = 1024 * 1024
THROTTLED_WAIT_S = 0.1


class LogDirMover:
    def __init__(self, node):
        self.node = node
        self.log_manager = node.log_manager
        self._moves: dict[tuple[str, int], tuple[str, asyncio.Task]] = {}  # key -> (destination, task)
        self.quota = ReplicationQuota(
            lambda: node.controller.dynamic["replica.alter.log.dirs.io.max.bytes.per.second"])

    def alter(self, topic: str, index: int, destination: str) -> ErrorCode:
        """Start moving the replica to `destination` (or record it for a replica yet to come); the move goes
        on in the background, and DescribeLogDirs shows its future log until it is done."""
        try:
            path = self.log_manager.check_destination(destination)
        except KafkaError as exc:
            return exc.code
        if self.log_manager.is_offline(topic, index):
            return ErrorCode.KAFKA_STORAGE_ERROR
        current = self.log_manager.get(topic, index)
        if current is None:  # Kafka's answer, after noting the dir for when the replica comes
            self.log_manager.prefer_dir(topic, index, path)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        key = (topic, index)
        moving = self._moves.get(key)
        if moving is not None and moving[0] == path:
            return ErrorCode.NONE
        self.cancel(topic, index)
        if self.log_manager.dir_of(current) != path:
            self._moves[key] = (path, asyncio.get_running_loop().create_task(self._move(topic, index, path)))
        return ErrorCode.NONE

    def cancel(self, topic: str, index: int) -> None:
        moving = self._moves.pop((topic, index), None)
        if moving is not None:
            moving[1].cancel()
        self.log_manager.abandon_future(topic, index)

    def stop(self) -> None:
        for topic, index in list(self._moves):
            self.cancel(topic, index)

    async def _move(self, topic: str, index: int, path: str) -> None:
        log_manager = self.log_manager
        current = log_manager.get(topic, index)
        future = log_manager.create_future(topic, index, path, now_ms())
        truncations = current.truncations
        log.info("Moving %s-%d from %s to %s", topic, index, log_manager.dir_of(current), path)
        try:
            while True:
                await asyncio.sleep(0)  # requests go first
                if log_manager.get(topic, index) is not current:
                    log_manager.abandon_future(topic, index)
                    return  # the partition went (deleted, or reassigned away)
                if current.truncations != truncations or current.log_start_offset > future.log_end_offset:
                    future = log_manager.create_future(topic, index, path, now_ms())
                    truncations = current.truncations
                    continue
                end = current.log_end_offset
                if future.log_end_offset >= end:
                    promoted = log_manager.promote_future(topic, index, now_ms())
                    self.node.replicas.replace_log(topic, index, promoted)
                    log.info("Moved %s-%d to %s", topic, index, path)
                    return
                if self.quota.exceeded():
                    await asyncio.sleep(THROTTLED_WAIT_S)
                    continue
                region = current.read(future.log_end_offset, COPY_CHUNK_BYTES, max_offset=end)
                if region is None:  # the current log rolled past its last batch: the future rolls there too
                    future.roll(now_ms(), end)
                    continue
                data = os.pread(region.fd, region.size, region.position)
                future.append_as_follower(data, now_ms=now_ms())
                self.quota.record(len(data))
        except (OSError, KafkaError) as exc:
            log.error("Moving %s-%d to %s failed: %s", topic, index, path, exc)
            log_manager.abandon_future(topic, index)
        except Exception:
            log.exception("Moving %s-%d to %s failed", topic, index, path)
            log_manager.abandon_future(topic, index)
        finally:
            if self._moves.get((topic, index), (None, None))[1] is asyncio.current_task():
                del self._moves[(topic, index)]
