"""What the rolling-restart planner and scaling look at, read from the cluster: the metadata quorum (voters,
leader, each voter's lag), every partition's replicas and ISR with its topic's min.insync.replicas.

One Metadata, one DescribeConfigs and one DescribeQuorum request through the first broker that answers, with
Odradek's own protocol client (librdkafka's admin client has no DescribeQuorum).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.network.client import NodeConnection
from odradek.operator.rolling import PartitionState, QuorumState
from odradek.security.client_properties import client_security

METADATA, DESCRIBE_CONFIGS, DESCRIBE_QUORUM = 3, 32, 55
TOPIC_RESOURCE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 3.0


class ObserveError(Exception):
    """The cluster did not answer, or answered an error; the one-line message says which."""


@dataclass(frozen=True)
class Observation:
    quorum: QuorumState
    partitions: tuple[PartitionState, ...]
    brokers: frozenset[int]  # the brokers registered and unfenced, as Metadata lists them

    def replicas_on(self, node_id: int) -> list[str]:
        return [p.name for p in self.partitions if node_id in p.replicas]


async def observe(properties: Mapping[str, str]) -> Observation:
    """The cluster's state through the first bootstrap server that answers; ObserveError when none does."""
    security = client_security(properties)
    failures = []
    for address in properties["bootstrap.servers"].split(","):
        host, _, port = address.rpartition(":")
        connection = NodeConnection(host, int(port), client_id=properties.get("client.id", "odradek-operator"),
                                    connect_timeout_s=CONNECT_TIMEOUT_S, security=security)
        try:
            return await _observe(connection)
        except (OSError, ObserveError) as e:  # ConnectionError and TimeoutError are OSErrors
            failures.append(f"{address}: {e}")
        finally:
            connection.close()
    raise ObserveError("no broker answered (" + "; ".join(failures) + ")")


async def _observe(connection: NodeConnection) -> Observation:
    metadata = await connection.request(METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        REQUEST_TIMEOUT_S)
    topics = [t for t in metadata["topics"] if not t["error_code"]]
    min_isr = await _min_insync_replicas(connection, [t["name"] for t in topics])
    partitions = tuple(
        PartitionState(t["name"], p["partition_index"], tuple(p["replica_nodes"]), tuple(p["isr_nodes"]),
                       min_isr.get(t["name"], 1))
        for t in topics for p in t["partitions"])
    quorum = await _quorum(connection)
    return Observation(quorum, partitions, frozenset(b["node_id"] for b in metadata["brokers"]))


async def _min_insync_replicas(connection: NodeConnection, topics: list[str]) -> dict[str, int]:
    if not topics:
        return {}
    response = await connection.request(DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name,
                       "configuration_keys": ["min.insync.replicas"]} for name in topics],
        "include_synonyms": False, "include_documentation": False}, REQUEST_TIMEOUT_S)
    found = {}
    for result in response["results"]:
        if result["error_code"] == UNKNOWN_TOPIC_OR_PARTITION:
            continue  # deleted since Metadata listed it: its partitions count as min ISR 1, harmless to a roll
        if result["error_code"]:
            raise ObserveError(f"DescribeConfigs of {result['resource_name']}: error {result['error_code']}")
        for config in result["configs"]:
            if config["name"] == "min.insync.replicas" and config["value"] is not None:
                found[result["resource_name"]] = int(config["value"])
    return found


async def _quorum(connection: NodeConnection) -> QuorumState:
    response = await connection.request(DESCRIBE_QUORUM, 1, {
        "topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        REQUEST_TIMEOUT_S)
    partitions = [p for t in response["topics"] for p in t["partitions"]]
    code = response["error_code"] or (partitions[0]["error_code"] if partitions else -1)
    if code:
        raise ObserveError(f"DescribeQuorum: error {code}")
    p = partitions[0]
    leader = p["leader_id"] if p["leader_id"] >= 0 else None
    voters = p["current_voters"]
    return QuorumState(frozenset(v["replica_id"] for v in voters), leader,
                       {v["replica_id"]: max(0, p["high_watermark"] - v["log_end_offset"])
                        for v in voters if v["log_end_offset"] >= 0})
