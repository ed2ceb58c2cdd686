"""Mirror fetchers: on each node, one task per mirror partition it leads pulls the source partition's log.

The task asks the source cluster (through the link's bootstrap servers, with the link's TLS and SASL
settings) which node leads the partition, then sends it consumer Fetch requests (read_uncommitted, so aborted
transactions and their markers come too) from the mirror's log end, and hands each answer to
`ReplicaManager.append_mirrored`: the batches land at the source's offsets, unchanged. The destination's own
followers replicate the mirror partition from here as any partition. When the source no longer holds the
next offset (its retention passed it), the mirror starts over at the source's log start.
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.links.definition import LinkDefinition
from odradek.network.client import ClientSecurity, NodeClients, UnknownNodeError
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

FETCH, FETCH_VERSION = 1, 12
LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 7
METADATA, METADATA_VERSION = 3, 12
BOOTSTRAP = -1  # the node id the link's bootstrap address goes by until Metadata names the source's nodes
RECONCILE_INTERVAL_S = 0.5
FETCH_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
REQUEST_TIMEOUT_S = 30.0
BACKOFF_S = 1.0
EARLIEST = -2


class SourceCluster:
    """A link's view of its source cluster: connections to its nodes, and who leads each partition."""

    def __init__(self, link: LinkDefinition, security: ClientSecurity | None):
        self.link = link
        self.clients = NodeClients(f"odradek-link-{link.name}", security=security)
        host, port = link.source_bootstrap.split(",")[0].rsplit(":", 1)
        self.clients.set_endpoint(BOOTSTRAP, host, int(port))

    async def leader_of(self, topic: str, index: int) -> tuple[int, int, dict]:
        """(leader node id, leader epoch, partition metadata) of a source partition; KafkaError if unknown."""
        response = await self.clients.request(BOOTSTRAP, METADATA, METADATA_VERSION, {
            "topics": [{"topic_id": bytes(16), "name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}, REQUEST_TIMEOUT_S)
        for broker in response["brokers"]:
            self.clients.set_endpoint(broker["node_id"], broker["host"], broker["port"])
        for entry in response["topics"]:
            if entry["error_code"]:
                raise KafkaError(ErrorCode(entry["error_code"]), f"source topic {topic}")
            for partition in entry["partitions"]:
                if partition["partition_index"] == index:
                    if partition["error_code"] or partition["leader_id"] < 0:
                        raise KafkaError(ErrorCode(partition["error_code"] or ErrorCode.LEADER_NOT_AVAILABLE),
                                         f"source partition {topic}-{index}")
                    return partition["leader_id"], partition["leader_epoch"], partition
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"source partition {topic}-{index}")

    async def fetch(self, leader: int, topic: str, index: int, offset: int, leader_epoch: int) -> dict:
        response = await self.clients.request(leader, FETCH, FETCH_VERSION, {
            "cluster_id": None, "replica_id": -1, "max_wait_ms": FETCH_WAIT_MS, "min_bytes": 1,
            "max_bytes": FETCH_MAX_BYTES, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": FETCH_MAX_BYTES}]}],
            "forgotten_topics_data": [], "rack_id": ""}, FETCH_WAIT_MS / 1000 + REQUEST_TIMEOUT_S)
        if response["error_code"]:
            raise KafkaError(ErrorCode(response["error_code"]), f"fetch from source node {leader}")
        return response["responses"][0]["partitions"][0]

    async def earliest_offset(self, leader: int, topic: str, index: int, leader_epoch: int) -> int:
        response = await self.clients.request(leader, LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{
                "partition_index": index, "current_leader_epoch": leader_epoch, "timestamp": EARLIEST}]}]},
            REQUEST_TIMEOUT_S)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"]:
            raise KafkaError(ErrorCode(answer["error_code"]), f"list offsets of source {topic}-{index}")
        return answer["offset"]

    def close(self) -> None:
        self.clients.close()


class MirrorFetchers:
    """Runs a mirror task for every active mirror partition this node leads, and only for those."""

    def __init__(self, node, reader, security_of):
        self.node = node
        self.reader = reader  # a LinkStateReader
        self.security_of = security_of  # LinkDefinition -> ClientSecurity | None (raises ValueError if unusable)
        self.sources: dict[str, SourceCluster] = {}
        self.tasks: dict[tuple[str, int], asyncio.Task] = {}
        # per mirror partition fed here: (link, records behind the source's high watermark, monotonic time it
        # last held everything the source had)
        self.lag: dict[tuple[str, int], tuple[str, int, float]] = {}

    async def run(self) -> None:
        try:
            while True:
                self._reconcile()
                await asyncio.sleep(RECONCILE_INTERVAL_S)
        finally:
            for task in self.tasks.values():
                task.cancel()
            for source in self.sources.values():
                source.close()

    def _reconcile(self) -> None:
        if not self.reader.ready.is_set():  # until it has read every link record: a mirror may be promoted
            return
        with self.reader.lock:
            active = self.reader.state.active_mirrors()
        wanted: dict[tuple[str, int], LinkDefinition] = {}
        for mirror, link in active:
            topic = self.node.image.topics.get(mirror.topic)
            for index in topic.partitions if topic is not None else ():
                partition = self.node.replicas.partitions.get((mirror.topic, index))
                if partition is not None and partition.is_leader:
                    wanted[(mirror.topic, index)] = link
        links = {link.name: link for link in wanted.values()}
        for name, source in list(self.sources.items()):
            if links.get(name) != source.link:  # gone, or redefined: new connections with the new settings
                source.close()
                del self.sources[name]
        for key, task in list(self.tasks.items()):
            if task.done() or key not in wanted or wanted[key].name not in self.sources:
                task.cancel()
                del self.tasks[key]
                self.lag.pop(key, None)
        for key, link in wanted.items():
            if link.name not in self.sources:
                try:
                    self.sources[link.name] = SourceCluster(link, self.security_of(link))
                except ValueError as exc:
                    log.warning("Cluster link %s cannot connect to its source: %s", link.name, exc)
                    continue
            if key not in self.tasks:
                self.tasks[key] = asyncio.get_running_loop().create_task(
                    self._mirror(self.sources[link.name], *key))

    async def _mirror(self, source: SourceCluster, topic: str, index: int) -> None:
        replicas = self.node.replicas
        leader = epoch = None
        while True:
            try:
                if leader is None:
                    leader, epoch, _ = await source.leader_of(topic, index)
                log_end = replicas.partition(topic, index).log.log_end_offset
                data = await source.fetch(leader, topic, index, log_end, epoch)
                error = ErrorCode(data["error_code"])
                if error == ErrorCode.NONE:
                    with self.reader.lock:  # promoted while the fetch was out: nothing more is appended
                        if self.reader.state.read_only(topic) is None:
                            return
                    appended = replicas.append_mirrored(topic, index, data["records"], data["log_start_offset"])
                    self._record_lag(source.link.name, topic, index, max(0, data["high_watermark"] - appended))
                    if appended > log_end or not data["records"]:
                        continue
                    log.warning("Mirror %s-%d: the source's answer at offset %d holds nothing to append",
                                topic, index, log_end)
                else:
                    if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                        earliest = await source.earliest_offset(leader, topic, index, epoch)
                        if log_end < earliest:
                            log.info("Mirror %s-%d starts over at the source's log start %d", topic, index,
                                     earliest)
                            replicas.restart_mirror_at(topic, index, earliest)
                            continue
                    log.info("Mirror %s-%d: the source answered %s", topic, index, error.name)
            except (ConnectionError, TimeoutError, UnknownNodeError) as exc:
                log.debug("Mirror %s-%d: the source is unreachable: %s", topic, index, exc)
            except KafkaError as exc:
                if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not self._leads(topic, index):
                    return  # this node no longer leads the mirror partition
                log.info("Mirror %s-%d: %s", topic, index, exc)
            except Exception:  # an answer it cannot use (an error code it does not know): it tries again
                log.exception("Mirror %s-%d failed", topic, index)
            leader = None  # ask the source's metadata again
            await asyncio.sleep(BACKOFF_S)

    def _record_lag(self, link: str, topic: str, index: int, records: int) -> None:
        now = time.monotonic()
        caught_up = now if records == 0 else self.lag.get((topic, index), (link, 0, now))[2]
        self.lag[(topic, index)] = (link, records, caught_up)

    def lag_seconds(self, topic: str, index: int) -> float:
        """How long the mirror partition has been behind the source (0 while it is caught up)."""
        _, records, caught_up = self.lag[(topic, index)]
        return 0.0 if records == 0 else time.monotonic() - caught_up

    def _leads(self, topic: str, index: int) -> bool:
        partition = self.node.replicas.partitions.get((topic, index))
        return partition is not None and partition.is_leader
