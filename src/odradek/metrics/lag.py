"""Consumer lag, as kafka_exporter names it, served by the group coordinator of each group.

The node that leads a group's `__consumer_offsets` partition holds the group's committed offsets (its
GroupCoordinator core) and exports, for each group it coordinates:

- kafka_consumergroup_current_offset{consumergroup,topic,partition}: the committed offset;
- kafka_consumergroup_lag{...}: the partition's end offset as consumers see it (its high watermark, what
  ListOffsets latest answers) minus the committed offset;
- kafka_consumergroup_lag_seconds{...}: now minus the timestamp of the first record at or after the
  committed offset (0 when caught up): how long the oldest unconsumed record has waited;
- kafka_consumergroup_lag_sum and kafka_consumergroup_current_offset_sum{consumergroup,topic};
- kafka_consumergroup_members{consumergroup}.

End offsets come from this node's replica of the partition when it has one (a follower's high watermark
trails the leader's by at most one fetch); otherwise one ListOffsets per partition leader, at scrape time,
which `prepare` gathers before rendering. lag_seconds needs the records, so it is given only for partitions
with a replica here; the timestamp found for a committed offset is kept while the offset stays committed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable

from odradek.coordinator.classic_group import GroupState
from odradek.metrics.registry import MetricFamily, gauge_family
from odradek.network.client import NodeClients
from odradek.protocol import records
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 7
LATEST_TIMESTAMP = -1
REMOTE_TIMEOUT_S = 2.0
MAX_BATCHES_SCANNED = 16  # control batches (transaction markers) skipped looking for a record's timestamp

GROUP, TOPIC, PARTITION = "consumergroup", "topic", "partition"


def first_record_timestamp(partition_log, offset: int, end: int) -> int | None:
    """The timestamp of the first data record at or after `offset` and before `end`, or None."""
    offset = max(offset, partition_log.log_start_offset)
    for _ in range(MAX_BATCHES_SCANNED):
        if offset >= end:
            return None
        region = partition_log.read(offset, 1, max_offset=end, min_one_batch=True)
        if region is None:
            return None
        data = os.pread(region.fd, region.size, region.position)
        info = records.read_batch_info(data, 0)
        if info.is_control:
            offset = info.last_offset + 1
            continue
        if info.timestamp_type == records.LOG_APPEND_TIME:
            return info.max_timestamp
        for record in records.decode_batch(data, info):
            if record.offset >= offset:
                return record.timestamp
        offset = info.last_offset + 1
    return None


class ConsumerLag:
    def __init__(self, node, now_ms):
        self.node = node
        self.now_ms = now_ms
        self.clients: NodeClients | None = None
        self._remote_ends: dict[tuple[str, int], int] = {}
        self._timestamps: dict[tuple[str, int, int], int] = {}  # (topic, partition, committed) -> timestamp

    def close(self) -> None:
        if self.clients is not None:
            self.clients.close()

    # what this node coordinates

    def _groups(self) -> Iterable[tuple[str, int, dict]]:
        """(group id, members, {topic: {partition: OffsetAndMetadata}}) of the live groups coordinated here."""
        service = self.node.groups
        if service is None:
            return
        core = service.core
        leading: dict[int, bool] = {}
        for group_id in sorted(set(core.offsets) | set(core.groups) | set(core.consumer_groups)):
            index = core.partition_for(group_id)
            if index not in leading:
                leading[index] = index not in core.unloaded_partitions and service.leads(index)
            if not leading[index]:
                continue
            consumer_group = core.consumer_groups.get(group_id)
            group = core.groups.get(group_id)
            if consumer_group is not None:
                members = len(consumer_group.members)
            elif group is not None and group.state != GroupState.DEAD:
                members = len(group.members)
            else:
                continue
            yield group_id, members, core.offsets.get(group_id, {})

    def _local_log(self, topic: str, index: int):
        partition = self.node.replicas.partitions.get((topic, index))
        if partition is None or self.node.log_manager.is_offline(topic, index):
            return None
        return partition.log

    # remote end offsets, before rendering

    async def prepare(self) -> None:
        """Ask the leaders of the committed partitions this node has no replica of for their end offsets."""
        image = self.node.image
        wanted: dict[int, dict[str, list[int]]] = {}
        for _, _, offsets in self._groups():
            for topic, partitions in offsets.items():
                topic_image = image.topics.get(topic)
                if topic_image is None:
                    continue
                for index in partitions:
                    partition = topic_image.partitions.get(index)
                    if partition is None or partition.leader < 0 or self._local_log(topic, index) is not None:
                        continue
                    wanted.setdefault(partition.leader, {}).setdefault(topic, [])
                    if index not in wanted[partition.leader][topic]:
                        wanted[partition.leader][topic].append(index)
        ends: dict[tuple[str, int], int] = {}
        if wanted:
            results = await asyncio.gather(*(self._list_offsets(leader, topics) for leader, topics in wanted.items()),
                                           return_exceptions=True)
            for result in results:
                if isinstance(result, dict):
                    ends.update(result)
        self._remote_ends = ends

    async def _list_offsets(self, leader: int, topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        endpoint = self.node.inter_broker_endpoint(leader)
        if endpoint is None:
            return {}
        if self.clients is None:
            self.clients = NodeClients(f"odradek-metrics-{self.node.node_id}",
                                       security=self.node.inter_broker_security)
        self.clients.set_endpoint(leader, *endpoint)
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": index, "current_leader_epoch": -1,
                                            "timestamp": LATEST_TIMESTAMP} for index in indexes]}
            for topic, indexes in topics.items()]}
        try:
            response = await self.clients.request(leader, LIST_OFFSETS, LIST_OFFSETS_VERSION, body, REMOTE_TIMEOUT_S)
        except (ConnectionError, TimeoutError, OSError, KafkaError, LookupError) as exc:
            log.debug("Consumer lag: ListOffsets to node %d failed: %s", leader, exc)
            return {}
        return {(topic["name"], p["partition_index"]): p["offset"] for topic in response["topics"]
                for p in topic["partitions"] if p["error_code"] == ErrorCode.NONE and p["offset"] >= 0}

    # rendering

    def collect(self) -> Iterable[MetricFamily]:
        labels = (GROUP, TOPIC, PARTITION)
        current = gauge_family("kafka_consumergroup_current_offset", "Committed offset of a consumer group in a "
                               "partition.", labels)
        current_sum = gauge_family("kafka_consumergroup_current_offset_sum", "Sum of a consumer group's committed "
                                   "offsets over a topic's partitions.", (GROUP, TOPIC))
        lag = gauge_family("kafka_consumergroup_lag", "Records a consumer group has yet to consume in a "
                           "partition: its high watermark minus the committed offset.", labels)
        lag_sum = gauge_family("kafka_consumergroup_lag_sum", "Sum of a consumer group's lag over a topic's "
                               "partitions.", (GROUP, TOPIC))
        lag_seconds = gauge_family("kafka_consumergroup_lag_seconds", "Seconds since the first record after the "
                                   "committed offset was written (0 when caught up); partitions with a replica "
                                   "on the coordinating node only.", labels)
        members = gauge_family("kafka_consumergroup_members", "Members of a consumer group.", (GROUP,))
        now = self.now_ms()
        seen_timestamps: dict[tuple[str, int, int], int] = {}
        topics = self.node.image.topics
        for group_id, member_count, offsets in self._groups():
            members.add((group_id,), member_count)
            for topic in sorted(offsets):
                if topic not in topics:
                    continue
                topic_lag = topic_offset = 0
                known = False
                for index in sorted(offsets[topic]):
                    committed = offsets[topic][index].offset
                    if committed < 0:
                        continue
                    current.add((group_id, topic, index), committed)
                    topic_offset += committed
                    partition_log = self._local_log(topic, index)
                    end = partition_log.high_watermark if partition_log is not None \
                        else self._remote_ends.get((topic, index))
                    if end is None:
                        continue
                    known = True
                    behind = end - committed
                    lag.add((group_id, topic, index), behind)
                    topic_lag += behind
                    if partition_log is not None:
                        lag_seconds.add((group_id, topic, index),
                                        self._lag_seconds(partition_log, topic, index, committed, end, now,
                                                          seen_timestamps))
                current_sum.add((group_id, topic), topic_offset)
                if known:
                    lag_sum.add((group_id, topic), topic_lag)
        self._timestamps = seen_timestamps  # forget the offsets no longer committed
        return [current, current_sum, lag, lag_sum, lag_seconds, members]

    def _lag_seconds(self, partition_log, topic: str, index: int, committed: int, end: int, now: int,
                     seen: dict) -> float:
        if committed >= end:
            return 0.0
        key = (topic, index, committed)
        timestamp = self._timestamps.get(key)
        if timestamp is None:
            try:
                timestamp = first_record_timestamp(partition_log, committed, end)
            except (OSError, KafkaError, ValueError) as exc:
                log.debug("Consumer lag: no timestamp at %s-%d offset %d: %s", topic, index, committed, exc)
                timestamp = None
            if timestamp is None:
                return 0.0
        seen[key] = timestamp
        return max(0, now - timestamp) / 1000
