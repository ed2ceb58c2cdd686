"""Follower fetchers: one task per leader broker pulls every partition this node follows from it.

Each round sends one Fetch (v12: per partition the leader epoch, fetch offset = our log end, and the epoch
of our last batch) to the leader's inter-broker listener; the leader long-polls it. ReplicaManager applies
each partition's answer: append, adopt the high watermark, or truncate a diverging suffix. A partition
whose leader answers with an epoch or leadership error sits out until the metadata changes it or
replica.fetch.backoff.ms passes (the leader may just not have applied the change yet).
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.network.client import NodeClients
from odradek.protocol.errors import ErrorCode
from odradek.replication.throttle import ReplicationQuota

log = logging.getLogger(__name__)

FETCH, FETCH_VERSION = 1, 12
RETRIABLE_AFTER_METADATA = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                                      ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


class ReplicaFetchers:
    def __init__(self, node):
        self.node = node
        self.clients = NodeClients(f"odradek-replica-fetcher-{node.node_id}", security=node.inter_broker_security)
        self._leader_of: dict[tuple[str, int], int] = {}
        self._parked: dict[tuple[str, int], float] = {}  # partition -> monotonic time it sits out until
        self._tasks: dict[int, asyncio.Task] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self.quota = ReplicationQuota(lambda: node.controller.dynamic["follower.replication.throttled.rate"])

    def follow(self, topic: str, index: int, leader: int) -> None:
        key = (topic, index)
        self._parked.pop(key, None)
        if leader < 0:
            self._leader_of.pop(key, None)
            return
        self._leader_of[key] = leader
        if leader not in self._tasks or self._tasks[leader].done():
            self._wakeups[leader] = asyncio.Event()
            self._tasks[leader] = asyncio.get_running_loop().create_task(self._run(leader))
        self._wakeups[leader].set()

    def unfollow(self, topic: str, index: int) -> None:
        self._leader_of.pop((topic, index), None)
        self._parked.pop((topic, index), None)

    async def stop(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        self.clients.close()

    def _partitions_of(self, leader: int) -> list[tuple[str, int]]:
        now = time.monotonic()
        return [key for key, led_by in self._leader_of.items()
                if led_by == leader and self._parked.get(key, 0) <= now]

    async def _run(self, leader: int) -> None:
        config = self.node.config
        backoff_s = config["replica.fetch.backoff.ms"] / 1000
        wait_ms = config["replica.fetch.wait.max.ms"]
        while True:
            partitions = self._partitions_of(leader)
            if not any(led_by == leader for led_by in self._leader_of.values()):
                del self._tasks[leader]
                return
            if not partitions or not self._locate(leader):
                wakeup = self._wakeups[leader]
                wakeup.clear()
                try:
                    await asyncio.wait_for(wakeup.wait(), backoff_s)
                except TimeoutError:
                    pass
                continue
            throttled = {key for key in partitions if self.node.replicas.follower_throttled(*key)}
            if throttled and self.quota.exceeded():  # they sit this round out
                partitions = [key for key in partitions if key not in throttled]
            request, epochs = self._request(partitions, wait_ms)
            if not epochs:
                await asyncio.sleep(backoff_s)
                continue
            try:
                response = await self.clients.request(leader, FETCH, FETCH_VERSION, request, wait_ms / 1000 + 10)
            except (ConnectionError, TimeoutError) as exc:
                log.debug("Fetch from leader %d failed: %s", leader, exc)
                await asyncio.sleep(backoff_s)
                continue
            if response["error_code"]:
                log.info("Fetch from leader %d failed: %s", leader, ErrorCode(response["error_code"]).name)
                await asyncio.sleep(backoff_s)
                continue
            for topic in response["responses"]:
                for data in topic["partitions"]:
                    key = (topic["topic"], data["partition_index"])
                    if key not in epochs or self._leader_of.get(key) != leader:
                        continue
                    if key in throttled and data["records"] is not None:
                        self.quota.record(len(data["records"]))
                    error = self.node.replicas.on_fetched(key[0], key[1], epochs[key], data)
                    if error in RETRIABLE_AFTER_METADATA:  # until the metadata moves, or a backoff passes
                        self._parked[key] = time.monotonic() + backoff_s
                    elif error != ErrorCode.NONE:
                        log.warning("Replicating %s-%d from %d failed: %s", key[0], key[1], leader, error.name)

    def _locate(self, leader: int) -> bool:
        endpoint = self.node.inter_broker_endpoint(leader)
        if endpoint is None:
            return False
        self.clients.set_endpoint(leader, *endpoint)
        return True

    def _request(self, partitions: list[tuple[str, int]], wait_ms: int) -> tuple[dict, dict]:
        config = self.node.config
        by_topic: dict[str, list[dict]] = {}
        epochs = {}
        for topic, index in partitions:
            position = self.node.replicas.fetch_position(topic, index)
            if position is None:
                continue
            leader_epoch, fetch_offset, last_epoch, log_start = position
            epochs[(topic, index)] = leader_epoch
            by_topic.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": fetch_offset,
                "last_fetched_epoch": last_epoch, "log_start_offset": log_start,
                "partition_max_bytes": config["replica.fetch.max.bytes"]})
        request = {"cluster_id": self.node.cluster_id, "replica_id": self.node.node_id, "max_wait_ms": wait_ms,
                   "min_bytes": 1, "max_bytes": config["replica.fetch.response.max.bytes"], "isolation_level": 0,
                   "session_id": 0, "session_epoch": -1,
                   "topics": [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()],
                   "forgotten_topics_data": [], "rack_id": ""}
        return request, epochs
