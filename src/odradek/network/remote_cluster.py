"""A client's view of a Kafka cluster reached from outside it: who leads each partition, consumer Fetch and
ListOffsets requests to that leader, and an idempotent producer's Produce requests. Used by a cluster link's
mirror fetchers (links/mirror.py), by the Spark source's read tasks (spark/fetch.py) and by the Spark sink's
(spark/produce.py), over `NodeClients` with the TLS and SASL settings given.

Metadata is asked of the bootstrap addresses (negative keys: BOOTSTRAP, BOOTSTRAP - 1, ...) and of the
cluster's nodes once it has named them, the last one that answered first: any one of them may be down.
"""

from __future__ import annotations

from odradek.network.client import ClientSecurity, NodeClients
from odradek.protocol.errors import ErrorCode, KafkaError

FETCH, FETCH_VERSION = 1, 12
LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 7
METADATA, METADATA_VERSION = 3, 12
PRODUCE, PRODUCE_VERSION = 0, 11
INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION = 22, 4
BOOTSTRAP = -1  # the key of the first bootstrap address (the others count down from it; node ids are >= 0)
FETCH_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
REQUEST_TIMEOUT_S = 30.0
EARLIEST = -2
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class RemoteCluster:
    """Connections to a cluster's nodes, and its partitions' leaders as its metadata names them."""

    def __init__(self, client_id: str, bootstrap: str, security: ClientSecurity | None, *,
                 create_topics: bool = False):
        self.clients = NodeClients(client_id, security=security)
        self.create_topics = create_topics
        self._asked_for_metadata: list[int] = []
        for position, address in enumerate(bootstrap.split(",")):
            host, port = address.strip().rsplit(":", 1)
            self.clients.set_endpoint(BOOTSTRAP - position, host, int(port))
            self._asked_for_metadata.append(BOOTSTRAP - position)

    async def _ask_any(self, api_key: int, api_version: int, body: dict) -> dict:
        """A request any node can answer, to the last one that answered first."""
        failure: Exception | None = None
        for key in list(self._asked_for_metadata):
            try:
                response = await self.clients.request(key, api_key, api_version, body, REQUEST_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:  # ConnectionError is an OSError
                failure = exc
                continue
            self._asked_for_metadata.remove(key)
            self._asked_for_metadata.insert(0, key)
            return response
        raise failure or ConnectionError("no address to ask")

    async def topic_metadata(self, topic: str) -> dict:
        """The topic's metadata (its partitions, their leaders and epochs); KafkaError for the topic's error.
        With `create_topics`, asking for a topic that does not exist creates it where the cluster allows."""
        response = await self._ask_any(METADATA, METADATA_VERSION, {
            "topics": [{"topic_id": bytes(16), "name": topic}], "allow_auto_topic_creation": self.create_topics,
            "include_topic_authorized_operations": False})
        for broker in response["brokers"]:
            self.clients.set_endpoint(broker["node_id"], broker["host"], broker["port"])
            if broker["node_id"] not in self._asked_for_metadata:
                self._asked_for_metadata.append(broker["node_id"])
        (entry,) = response["topics"]
        if entry["error_code"]:
            raise KafkaError(ErrorCode(entry["error_code"]), f"topic {topic}")
        return entry

    async def leader_of(self, topic: str, index: int) -> tuple[int, int, dict]:
        """(leader node id, leader epoch, partition metadata) of a partition; KafkaError if unknown."""
        for partition in (await self.topic_metadata(topic))["partitions"]:
            if partition["partition_index"] == index:
                if partition["error_code"] or partition["leader_id"] < 0:
                    raise KafkaError(ErrorCode(partition["error_code"] or ErrorCode.LEADER_NOT_AVAILABLE),
                                     f"partition {topic}-{index}")
                return partition["leader_id"], partition["leader_epoch"], partition
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{index}")

    async def init_producer_id(self) -> tuple[int, int]:
        """A new idempotent (not transactional) producer's id and epoch."""
        response = await self._ask_any(INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, {
            "transactional_id": None, "transaction_timeout_ms": 2_147_483_647, "producer_id": -1,
            "producer_epoch": -1})
        if response["error_code"]:
            raise KafkaError(ErrorCode(response["error_code"]), "init producer id")
        return response["producer_id"], response["producer_epoch"]

    async def produce(self, leader: int, batches: dict[tuple[str, int], bytes], *, acks: int,
                      timeout_ms: int) -> dict[tuple[str, int], ErrorCode]:
        """Record batches to partitions `leader` leads, in one Produce request; each partition's error code."""
        topics: dict[str, list] = {}
        for (topic, index), records in batches.items():
            topics.setdefault(topic, []).append({"index": index, "records": records})
        response = await self.clients.request(leader, PRODUCE, PRODUCE_VERSION, {
            "transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": t, "partition_data": p} for t, p in topics.items()]},
            timeout_ms / 1000 + REQUEST_TIMEOUT_S)
        return {(entry["name"], answer["index"]): ErrorCode(answer["error_code"])
                for entry in response["responses"] for answer in entry["partition_responses"]}

    async def fetch(self, leader: int, topic: str, index: int, offset: int, leader_epoch: int, *,
                    max_bytes: int = FETCH_MAX_BYTES, wait_ms: int = FETCH_WAIT_MS,
                    isolation_level: int = READ_UNCOMMITTED) -> dict:
        """One partition's answer to a consumer Fetch in `leader_epoch`: the node fences it
        (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) once its leader changed. At least one whole batch when
        there is one to read, whatever `max_bytes`. read_uncommitted brings aborted transactions and their
        markers too."""
        response = await self.clients.request(leader, FETCH, FETCH_VERSION, {
            "cluster_id": None, "replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1,
            "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}, wait_ms / 1000 + REQUEST_TIMEOUT_S)
        if response["error_code"]:
            raise KafkaError(ErrorCode(response["error_code"]), f"fetch from node {leader}")
        return response["responses"][0]["partitions"][0]

    async def earliest_offset(self, leader: int, topic: str, index: int, leader_epoch: int) -> int:
        response = await self.clients.request(leader, LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [{
                "partition_index": index, "current_leader_epoch": leader_epoch, "timestamp": EARLIEST}]}]},
            REQUEST_TIMEOUT_S)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"]:
            raise KafkaError(ErrorCode(answer["error_code"]), f"list offsets of {topic}-{index}")
        return answer["offset"]

    def close(self) -> None:
        self.clients.close()
