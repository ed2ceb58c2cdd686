"""Metadata and DescribeTopicPartitions: brokers, topics, partitions and leaders from the metadata image.

A partition whose log dir is offline on this node has no leader (LEADER_NOT_AVAILABLE, this node among its
offline replicas), as Kafka reports it once the controller has moved leadership off a failed dir.
"""

from odradek.broker.handlers.acls import ALL_CLUSTER_OPERATIONS, ALL_TOPIC_OPERATIONS, NOT_ASKED_FOR
from odradek.config import validate_topic_name
from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def handle_metadata(broker, ctx, request: dict):
    image = broker.image
    requested = request.get("topics")
    allow_auto_create = request.get("allow_auto_topic_creation", True) and broker.config["auto.create.topics.enable"]
    if requested and allow_auto_create:
        missing = [e["name"] for e in requested if e.get("name") is not None and e["name"] not in image.topics
                   and e["name"] not in INTERNAL_TOPICS and validate_topic_name(e["name"]) is None
                   and not broker.links.reserves(e["name"])]  # a cluster link creates it, as a mirror
        if missing:
            return _auto_create_then_describe(broker, ctx, request, missing)
    return _metadata(broker, ctx, request)


async def _auto_create_then_describe(broker, ctx, request: dict, missing: list[str]) -> dict:
    for name in missing:
        await broker.auto_create_topic(name)
    return _metadata(broker, ctx, request)


def _metadata(broker, ctx, request: dict) -> dict:
    image = broker.image
    requested = request.get("topics")
    operations = ALL_TOPIC_OPERATIONS if request.get("include_topic_authorized_operations") else NOT_ASKED_FOR
    if requested is None or (ctx.api_version == 0 and not requested):
        topics = [_describe(broker, topic, operations) for topic in image.topics.values()]
    else:
        topics = []
        for entry in requested:
            name = entry.get("name")
            if name is None:
                topic = image.topics_by_id.get(entry.get("topic_id", ZERO_UUID))
                topics.append(_describe(broker, topic, operations) if topic else _missing(
                    None, ErrorCode.UNKNOWN_TOPIC_ID, operations, entry.get("topic_id", ZERO_UUID)))
                continue
            topic = image.topics.get(name)
            if topic is not None:
                topics.append(_describe(broker, topic, operations))
            elif validate_topic_name(name) is not None:
                topics.append(_missing(name, ErrorCode.INVALID_TOPIC_EXCEPTION, operations))
            else:
                topics.append(_missing(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, operations))
    return {
        "throttle_time_ms": 0,
        "brokers": broker.broker_endpoints(ctx.connection.listener, key="node_id"),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "topics": topics,
        "cluster_authorized_operations": (ALL_CLUSTER_OPERATIONS if request.get("include_cluster_authorized_operations")
                                          else NOT_ASKED_FOR),
        "error_code": ErrorCode.NONE,
    }


def _describe(broker, topic, operations: int) -> dict:
    return {
        "error_code": ErrorCode.NONE, "name": topic.name, "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": [_partition(broker, topic.name, p) for _, p in sorted(topic.partitions.items())],
        "topic_authorized_operations": operations,
    }


def _partition(broker, topic_name: str, p) -> dict:
    described = {"error_code": ErrorCode.NONE, "partition_index": p.partition, "leader_id": p.leader,
                 "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas), "isr_nodes": list(p.isr),
                 "offline_replicas": [], "eligible_leader_replicas": [], "last_known_elr": []}
    if p.leader < 0:
        described["error_code"] = ErrorCode.LEADER_NOT_AVAILABLE
    if broker.log_manager.is_offline(topic_name, p.partition):
        described.update(error_code=ErrorCode.LEADER_NOT_AVAILABLE, leader_id=-1, offline_replicas=[broker.node_id])
    return described


def _missing(name, code: ErrorCode, operations: int, topic_id: bytes = ZERO_UUID) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": [],
            "topic_authorized_operations": operations}


def handle_describe_topic_partitions(broker, ctx, request: dict) -> dict:
    """KIP-966's paginated topic description, used by the Java admin client's describeTopics."""
    image = broker.image
    names = [t["name"] for t in request["topics"]] or sorted(image.topics)
    limit = max(1, request.get("response_partition_limit") or 2000)
    cursor = request.get("cursor")
    if cursor is not None:
        names = [n for n in sorted(names) if n >= cursor["topic_name"]]
    else:
        names = sorted(names)
    topics, budget, next_cursor = [], limit, None
    for name in names:
        topic = image.topics.get(name)
        if topic is None:
            topics.append(_missing(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ALL_TOPIC_OPERATIONS))
            continue
        start = cursor["partition_index"] if cursor is not None and name == cursor["topic_name"] else 0
        indexes = [i for i in sorted(topic.partitions) if i >= start]
        if budget <= 0:
            next_cursor = {"topic_name": name, "partition_index": start}
            break
        shown = indexes[:budget]
        budget -= len(shown)
        described = _describe(broker, topic, ALL_TOPIC_OPERATIONS)
        described["partitions"] = [_partition(broker, name, topic.partitions[i]) for i in shown]
        topics.append(described)
        if len(shown) < len(indexes):
            next_cursor = {"topic_name": name, "partition_index": indexes[len(shown)]}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}

