"""Authorization of the APIs that describe the cluster: Metadata and DescribeTopicPartitions (DESCRIBE on
each topic; a topic asked for by name and not describable is TOPIC_AUTHORIZATION_FAILED without saying
whether it exists, one the caller did not name is left out; auto-creation needs CREATE on the cluster or the
topic; KIP-430 authorized operations) and DescribeCluster (its authorized operations; on a controller
listener ALTER on the cluster)."""

from __future__ import annotations

from odradek.broker.authorization.access import (
    NOT_ASKED_FOR,
    ZERO_UUID,
    Answer,
    Gate,
    Proceed,
    refused_message,
    with_topics,
)
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _refused_topic(name: str | None, topic_id: bytes = ZERO_UUID, is_internal: bool = False) -> dict:
    return {"error_code": TOPIC_DENIED, "name": name, "topic_id": topic_id, "is_internal": is_internal,
            "partitions": [], "topic_authorized_operations": NOT_ASKED_FOR}


def _cluster_operations(gate: Gate) -> int:
    """What Kafka reports when asked for the cluster's authorized operations: nothing without DESCRIBE."""
    if not gate.access.cluster(AclOperation.DESCRIBE):
        return 0
    return gate.access.operations(ResourceType.CLUSTER, "kafka-cluster")


def authorize_metadata(gate: Gate) -> Proceed:
    request, version, access = gate.request, gate.version, gate.access
    image = gate.node.image
    requested = request.get("topics")
    every_topic = requested is None or (version == 0 and not requested)
    refused: list[dict] = []
    forward = request
    drop_described = False  # v0 with every named topic refused: the handler describes all topics; show none
    if not every_topic:
        kept = []
        for entry in requested:
            name = entry.get("name")
            if name is None:  # by topic id (v12+): ids are not secret, the refusal names the id
                topic = image.topics_by_id.get(entry.get("topic_id", ZERO_UUID))
                if topic is None or access.topic(AclOperation.DESCRIBE, topic.name):
                    kept.append(entry)  # an unknown id is the handler's UNKNOWN_TOPIC_ID
                else:
                    refused.append(_refused_topic(None, topic.topic_id))
            elif access.topic(AclOperation.DESCRIBE, name):
                kept.append(entry)
            else:
                refused.append(_refused_topic(name))
        auto_create = request.get("allow_auto_topic_creation", True) and gate.node.config["auto.create.topics.enable"]
        missing = [e["name"] for e in kept if e.get("name") is not None and e["name"] not in image.topics]
        if auto_create and missing and not access.cluster(AclOperation.CREATE):
            creatable = access.allowed_names(AclOperation.CREATE, ResourceType.TOPIC, missing)
            uncreatable = set(missing) - creatable
            if uncreatable:
                kept = [e for e in kept if e.get("name") not in uncreatable]
                refused += [_refused_topic(name, is_internal=name in INTERNAL_TOPICS)
                            for name in dict.fromkeys(n for n in missing if n in uncreatable)]
        if refused:
            forward = with_topics(request, "topics", kept)
            drop_described = version == 0 and not kept
    with_topic_operations = version >= 8 and request.get("include_topic_authorized_operations", False)
    with_cluster_operations = 8 <= version <= 10 and request.get("include_cluster_authorized_operations", False)
    if not (every_topic or refused or with_topic_operations or with_cluster_operations):
        return Proceed(forward)

    def finish(response: dict) -> dict:
        topics = [] if drop_described else response["topics"]
        if every_topic:
            topics = [t for t in topics if t["name"] is not None and access.topic(AclOperation.DESCRIBE, t["name"])]
        if with_topic_operations:
            topics = [{**t, "topic_authorized_operations": access.operations(ResourceType.TOPIC, t["name"])
                       if t["name"] is not None and t["error_code"] != ErrorCode.UNKNOWN_TOPIC_ID else NOT_ASKED_FOR}
                      for t in topics]
        answer = {**response, "topics": topics + refused}
        if with_cluster_operations:
            answer["cluster_authorized_operations"] = _cluster_operations(gate)
        return answer

    return Proceed(forward, finish)


def authorize_describe_topic_partitions(gate: Gate) -> Answer | Proceed:
    """Every topic (none named) means those the caller may DESCRIBE; named ones it may not come back as
    TOPIC_AUTHORIZATION_FAILED after the described ones. Authorized operations are always given."""
    request, access = gate.request, gate.access
    cursor = request.get("cursor")
    cursor_name = cursor["topic_name"] if cursor is not None else ""
    named = [t["name"] for t in request["topics"]]
    candidates = sorted({n for n in (named or gate.node.image.topics) if n >= cursor_name})
    allowed = access.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC, candidates)
    refused = [] if not named else [_refused_topic(n) for n in candidates if n not in allowed]
    kept = [n for n in candidates if n in allowed]
    if not kept:
        return Answer({"throttle_time_ms": 0, "topics": refused, "next_cursor": None})
    if named and len(kept) == len(set(named)):
        forward = request
    else:  # the handler sees only describable topics; an empty list would mean all of them
        forward = with_topics(request, "topics", [{"name": n} for n in kept])

    def finish(response: dict) -> dict:
        described = [{**t, "topic_authorized_operations": access.operations(ResourceType.TOPIC, t["name"])}
                     for t in response["topics"]]
        return {**response, "topics": described + refused}

    return Proceed(forward, finish)


def authorize_describe_cluster(gate: Gate) -> Answer | Proceed | None:
    """On a broker listener anyone may describe the cluster; on a controller listener only with ALTER on
    it. Asked-for authorized operations are the cluster's, or 0 without DESCRIBE."""
    if gate.controller_side and not gate.access.cluster(AclOperation.ALTER):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Answer({"throttle_time_ms": 0, "error_code": error, "error_message": refused_message(error),
                       "cluster_id": "", "controller_id": -1, "brokers": [],
                       "cluster_authorized_operations": NOT_ASKED_FOR})
    if not gate.request.get("include_cluster_authorized_operations", False):
        return None

    def finish(response: dict) -> dict:
        if response["error_code"] != ErrorCode.NONE:
            return response
        return {**response, "cluster_authorized_operations": _cluster_operations(gate)}

    return Proceed(gate.request, finish)
