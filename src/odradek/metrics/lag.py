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

A partition with a replica here is read here: its high watermark (a follower's trails the leader's by at
most one fetch) and the record at the committed offset. For the others `prepare` asks their leaders at
scrape time, before rendering: one ListOffsets per leader for the end offsets, then, for each committed
offset behind its end whose timestamp is not known yet, a consumer Fetch of that offset small enough to
bring back about one batch. The fetches share a short deadline: a slow or dead leader's partitions are
left out of that scrape's lag_seconds rather than holding the scrape. The timestamp found for a committed
offset, here or remotely, is kept while the offset stays committed, so a steady group costs no Fetch.
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

LAG_PREFIX = "kafka_consumergroup_"  # every family this module serves
LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 7
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
REMOTE_TIMEOUT_S = 2.0
MAX_BATCHES_SCANNED = 16  # control batches (transaction markers) skipped looking for a record's timestamp
# The remote record timestamps: Fetch v12 as the node's follower fetcher sends it (topics by name), but as a
# consumer (replica id -1, read_uncommitted, no session, no wait). The leader returns the batch holding the
# offset whole whatever its size (KIP-74), and the small batches after it that fit in FETCH_MAX_BYTES (a
# transaction marker is one, so the data after a marker usually comes in the same answer).
FETCH, FETCH_VERSION = 1, 12
FETCH_MAX_BYTES = 4096
READ_UNCOMMITTED = 0
TIMESTAMP_TIMEOUT_S = 1.0  # for all of a scrape's fetches together
MAX_FETCHES_PER_OFFSET = 4  # further fetches after answers holding only transaction markers

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
        timestamp, offset = batch_timestamp(os.pread(region.fd, region.size, region.position), offset)
        if timestamp is not None:
            return timestamp
    return None


def batch_timestamp(data, offset: int) -> tuple[int | None, int]:
    """In record batches (a log region, a Fetch answer's records): the timestamp of the first data record at
    or after `offset`, and the offset after the last whole batch read, where to look next when none is."""
    view = memoryview(data)
    position = 0
    while len(view) - position >= records.BATCH_HEADER_SIZE:
        info = records.read_batch_info(view, position)
        if info.size < records.BATCH_HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch of {info.size} bytes")
        if info.size > len(view) - position:
            break  # a partial batch at the end of a fetch answer
        position += info.size
        if info.last_offset < offset:
            continue
        if info.is_control:
            offset = info.next_offset
            continue
        if info.timestamp_type == records.LOG_APPEND_TIME:
            return info.max_timestamp, info.next_offset
        for record in records.decode_batch(view, info):
            if record.offset >= offset:
                return record.timestamp, info.next_offset
        offset = info.next_offset
    return None, offset


class ConsumerLag:
    def __init__(self, node, now_ms):
        self.node = node
        self.now_ms = now_ms
        self.clients: NodeClients | None = None
        self._remote_ends: dict[tuple[str, int], int] = {}
        self._timestamps: dict[tuple[str, int, int], int] = {}  # (topic, partition, committed) -> timestamp
        self._remote_no_record: set[tuple[str, int, int]] = set()  # behind, but only markers up to the end

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

    # what the leaders of the other partitions say, before rendering

    async def prepare(self) -> None:
        """Ask the leaders of the committed partitions this node has no replica of for their end offsets,
        then for the timestamps of the committed offsets behind them that are not known yet."""
        image = self.node.image
        leaders: dict[tuple[str, int], int] = {}
        committed: set[tuple[str, int, int]] = set()
        for _, _, offsets in self._groups():
            for topic, partitions in offsets.items():
                topic_image = image.topics.get(topic)
                if topic_image is None:
                    continue
                for index, stored in partitions.items():
                    partition = topic_image.partitions.get(index)
                    if partition is None or partition.leader < 0 or self._local_log(topic, index) is not None:
                        continue
                    leaders[(topic, index)] = partition.leader
                    if stored.offset >= 0:
                        committed.add((topic, index, stored.offset))
        wanted: dict[int, dict[str, list[int]]] = {}
        for (topic, index), leader in sorted(leaders.items()):
            wanted.setdefault(leader, {}).setdefault(topic, []).append(index)
        ends: dict[tuple[str, int], int] = {}

        async def ask(leader: int, topics: dict[str, list[int]]) -> None:
            ends.update(await self._list_offsets(leader, topics))

        if wanted:
            try:  # connecting counts too: a leader that does not accept connections must not hold the scrape
                async with asyncio.timeout(REMOTE_TIMEOUT_S):
                    await asyncio.gather(*(ask(leader, topics) for leader, topics in wanted.items()),
                                         return_exceptions=True)
            except TimeoutError:
                log.debug("Consumer lag: not every leader answered ListOffsets within %gs", REMOTE_TIMEOUT_S)
        self._remote_ends = ends
        behind = {key: leaders[key[:2]] for key in sorted(committed)
                  if key not in self._timestamps and key[2] < ends.get(key[:2], -1)}
        self._remote_no_record = await self.fetch_timestamps(behind, ends) if behind else set()

    async def _list_offsets(self, leader: int, topics: dict[str, list[int]],
                            timestamp: int = LATEST_TIMESTAMP) -> dict[tuple[str, int], int]:
        body = {"replica_id": -1, "isolation_level": READ_UNCOMMITTED, "topics": [
            {"name": topic, "partitions": [{"partition_index": index, "current_leader_epoch": -1,
                                            "timestamp": timestamp} for index in indexes]}
            for topic, indexes in topics.items()]}
        try:
            response = await self._request(leader, LIST_OFFSETS, LIST_OFFSETS_VERSION, body, REMOTE_TIMEOUT_S)
        except (ConnectionError, TimeoutError, OSError, KafkaError, LookupError) as exc:
            log.debug("Consumer lag: ListOffsets to node %d failed: %s", leader, exc)
            return {}
        return {(topic["name"], p["partition_index"]): p["offset"] for topic in response["topics"]
                for p in topic["partitions"] if p["error_code"] == ErrorCode.NONE and p["offset"] >= 0}

    async def fetch_timestamps(self, behind: dict[tuple[str, int, int], int],
                               ends: dict[tuple[str, int], int]) -> set[tuple[str, int, int]]:
        """For each (topic, partition, committed offset) -> leader: the timestamp of the first record at or
        after the offset, asked of the leader, into the kept timestamps. All within TIMESTAMP_TIMEOUT_S:
        what is not answered by then is left out. Returns the offsets the leader has no data record
        after (only transaction markers up to the end)."""
        found: dict[tuple[str, int, int], int] = {}
        no_record: set[tuple[str, int, int]] = set()

        async def one(key: tuple[str, int, int], leader: int) -> None:
            topic, index, offset = key
            try:
                timestamp = await self._remote_timestamp(leader, topic, index, offset, ends[(topic, index)])
            except (ConnectionError, TimeoutError, OSError, KafkaError, LookupError, ValueError) as exc:
                log.debug("Consumer lag: no timestamp of %s-%d offset %d from node %d: %s", topic, index, offset,
                          leader, exc)
                return
            if timestamp is None:
                no_record.add(key)
            else:
                found[key] = timestamp

        try:
            async with asyncio.timeout(TIMESTAMP_TIMEOUT_S):
                await asyncio.gather(*(one(key, leader) for key, leader in behind.items()), return_exceptions=True)
        except TimeoutError:
            log.debug("Consumer lag: %d of %d record timestamps not answered within %gs", len(behind) - len(found)
                      - len(no_record), len(behind), TIMESTAMP_TIMEOUT_S)
        self._timestamps.update(found)
        return no_record

    async def _remote_timestamp(self, leader: int, topic: str, index: int, offset: int, end: int) -> int | None:
        """The timestamp of the first data record at or after `offset` (or after the log start, if the
        leader no longer has `offset`) and before `end`, or None if there are only transaction markers
        there. Raises when the leader does not tell."""
        for _ in range(MAX_FETCHES_PER_OFFSET):
            if offset >= end:
                return None
            error, data = await self._fetch(leader, topic, index, offset)
            if error == ErrorCode.OFFSET_OUT_OF_RANGE:  # below the log start (retention, DeleteRecords)
                start = (await self._list_offsets(leader, {topic: [index]}, EARLIEST_TIMESTAMP)).get((topic, index))
                if start is None or start <= offset:
                    raise KafkaError(error, f"offset {offset} out of range, log start {start}")
                offset = start
                continue
            if error != ErrorCode.NONE:
                raise KafkaError(error)
            if not data:
                raise LookupError(f"no records at offset {offset}")
            timestamp, offset = batch_timestamp(data, offset)
            if timestamp is not None:
                return timestamp
        return None  # only transaction markers in all those answers: give up, as the local scan does

    async def _fetch(self, leader: int, topic: str, index: int, offset: int) -> tuple[ErrorCode, object]:
        """One consumer Fetch of `offset`: (error code, records)."""
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": READ_UNCOMMITTED, "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic": topic, "partitions": [
                        {"partition": index, "current_leader_epoch": -1, "fetch_offset": offset,
                         "last_fetched_epoch": -1, "log_start_offset": -1,
                         "partition_max_bytes": FETCH_MAX_BYTES}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        response = await self._request(leader, FETCH, FETCH_VERSION, body, TIMESTAMP_TIMEOUT_S)
        if response["error_code"]:
            return ErrorCode(response["error_code"]), None
        for answer in response["responses"]:
            for partition in answer["partitions"]:
                if answer["topic"] == topic and partition["partition_index"] == index:
                    return ErrorCode(partition["error_code"]), partition["records"]
        return ErrorCode.UNKNOWN_SERVER_ERROR, None

    async def _request(self, leader: int, api_key: int, api_version: int, body: dict, timeout_s: float) -> dict:
        """A request to a node over the inter-broker listener (one connection per node, kept between scrapes)."""
        endpoint = self.node.inter_broker_endpoint(leader)
        if endpoint is None:
            raise LookupError(f"node {leader} has no inter-broker endpoint")
        if self.clients is None:
            self.clients = NodeClients(f"odradek-metrics-{self.node.node_id}", connect_timeout_s=REMOTE_TIMEOUT_S,
                                       security=self.node.inter_broker_security)
        self.clients.set_endpoint(leader, *endpoint)
        return await self.clients.request(leader, api_key, api_version, body, timeout_s)

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
                                   "committed offset was written (0 when caught up).", labels)
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
                        seconds = self._lag_seconds(partition_log, topic, index, committed, end, now,
                                                    seen_timestamps)
                    else:
                        seconds = self._remote_lag_seconds(topic, index, committed, end, now, seen_timestamps)
                    if seconds is not None:
                        lag_seconds.add((group_id, topic, index), seconds)
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

    def _remote_lag_seconds(self, topic: str, index: int, committed: int, end: int, now: int,
                            seen: dict) -> float | None:
        """From what `prepare` asked the partition's leader; None when it did not answer."""
        if committed >= end:
            return 0.0
        key = (topic, index, committed)
        timestamp = self._timestamps.get(key)
        if timestamp is None:
            return 0.0 if key in self._remote_no_record else None
        seen[key] = timestamp
        return max(0, now - timestamp) / 1000
