"""Authorization of the group APIs: FindCoordinator (DESCRIBE on the group or transactional id), the classic
protocol's JoinGroup, SyncGroup, Heartbeat and LeaveGroup (READ on the group), OffsetCommit (READ on the
group, then on each topic), OffsetFetch (DESCRIBE on the group, then on each topic), OffsetDelete (DELETE on
the group, READ on each topic), DescribeGroups (DESCRIBE on each group), ListGroups (DESCRIBE on the cluster,
or only the groups the caller may DESCRIBE), DeleteGroups (DELETE on each group) and KIP-848's
ConsumerGroupHeartbeat (READ on the group, DESCRIBE on every subscribed topic) and ConsumerGroupDescribe
(DESCRIBE on each group and on the topics its members are assigned)."""

from __future__ import annotations

from odradek.broker.authorization.access import (
    NOT_ASKED_FOR,
    Answer,
    Gate,
    Proceed,
    merge_topics,
    refused_message,
    top_level_error,
    with_topics,
)
from odradek.controller.features import GROUP_VERSION
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
FIRST_BATCHED_FIND_COORDINATOR = 4
FIRST_GROUPS_OFFSET_FETCH = 8
UNDESCRIBABLE_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def authorize_find_coordinator(gate: Gate) -> Answer | Proceed | None:
    request, access = gate.request, gate.access
    key_type = request.get("key_type", GROUP_KEY_TYPE)
    if key_type == GROUP_KEY_TYPE:
        resource, error = ResourceType.GROUP, GROUP_DENIED
    elif key_type == TRANSACTION_KEY_TYPE:
        resource, error = ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        return None  # the handler refuses other key types
    if gate.version < FIRST_BATCHED_FIND_COORDINATOR:
        if access.allowed(AclOperation.DESCRIBE, resource, request["key"]):
            return None
        return Answer({"throttle_time_ms": 0, "error_code": error, "error_message": refused_message(error),
                       "node_id": -1, "host": "", "port": -1})
    keys = request["coordinator_keys"]
    allowed = access.allowed_names(AclOperation.DESCRIBE, resource, keys)
    if len(allowed) == len(set(keys)):
        return None

    def refused(key: str) -> dict:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": None}

    kept = [key for key in keys if key in allowed]
    if not kept:  # nothing for the handler (which would first make sure the internal topic exists)
        return Answer({"throttle_time_ms": 0, "coordinators": [refused(key) for key in keys]})

    def finish(response: dict) -> dict:
        located = iter(response["coordinators"])
        return {**response, "coordinators": [next(located) if key in allowed else refused(key) for key in keys]}

    return Proceed({**request, "coordinator_keys": kept}, finish)


def _requires_group(operation: AclOperation, refusal):
    def rule(gate: Gate) -> Answer | None:
        if gate.access.group(operation, gate.request["group_id"]):
            return None
        return Answer(refusal(gate, GROUP_DENIED))

    return rule


def _join_group_refusal(gate: Gate, error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "generation_id": -1, "protocol_type": None,
            "protocol_name": None if gate.version >= 7 else "", "leader": "", "skip_assignment": False,
            "member_id": "", "members": []}


def _sync_group_refusal(gate: Gate, error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "protocol_type": None, "protocol_name": None,
            "assignment": b""}


def _error_only(gate: Gate, error: ErrorCode) -> dict:
    return top_level_error(error)


authorize_join_group = _requires_group(AclOperation.READ, _join_group_refusal)
_sync_group_read = _requires_group(AclOperation.READ, _sync_group_refusal)


def authorize_sync_group(gate: Gate) -> Answer | None:
    """From v5 the protocol type and name are mandatory: Kafka refuses a request without them
    (INCONSISTENT_GROUP_PROTOCOL) before it authorizes anything."""
    request = gate.request
    if gate.version >= 5 and (request.get("protocol_type") is None or request.get("protocol_name") is None):
        return Answer(_sync_group_refusal(gate, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    return _sync_group_read(gate)


authorize_heartbeat = _requires_group(AclOperation.READ, _error_only)
authorize_leave_group = _requires_group(AclOperation.READ, lambda gate, error: {
    "throttle_time_ms": 0, "error_code": error, "members": []})


def _partition_errors(topics: list[dict], error: ErrorCode) -> list[dict]:
    return [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": error}
                                               for p in t["partitions"]]} for t in topics]


def commit_rule(gate: Gate) -> Answer | Proceed | None:
    """OffsetCommit and TxnOffsetCommit once the transactional id is allowed: READ on the group (else every
    partition fails), READ on each topic; refused topics come first, as Kafka's response builder has them."""
    request, access = gate.request, gate.access
    if not access.group(AclOperation.READ, request["group_id"]):
        return Answer({"throttle_time_ms": 0, "topics": _partition_errors(request["topics"], GROUP_DENIED)})
    allowed = access.allowed_names(AclOperation.READ, ResourceType.TOPIC, (t["name"] for t in request["topics"]))
    refused = [t for t in request["topics"] if t["name"] not in allowed]
    if not refused:
        return None
    kept = [t for t in request["topics"] if t["name"] in allowed]
    refused_topics = _partition_errors(refused, TOPIC_DENIED)
    if not kept:
        return Answer({"throttle_time_ms": 0, "topics": refused_topics})
    return Proceed(with_topics(request, "topics", kept),
                   lambda response: {**response, "topics": merge_topics(refused_topics, response["topics"])})


authorize_offset_commit = commit_rule


def authorize_offset_delete(gate: Gate) -> Answer | Proceed | None:
    request, access = gate.request, gate.access
    if not access.group(AclOperation.DELETE, request["group_id"]):
        return Answer({"throttle_time_ms": 0, "error_code": GROUP_DENIED, "topics": []})
    allowed = access.allowed_names(AclOperation.READ, ResourceType.TOPIC, (t["name"] for t in request["topics"]))
    refused = [t for t in request["topics"] if t["name"] not in allowed]
    if not refused:
        return None
    refused_topics = _partition_errors(refused, TOPIC_DENIED)

    def finish(response: dict) -> dict:
        if response["error_code"] != ErrorCode.NONE:  # a group-level error replaces the topics' answers
            return response
        return {**response, "topics": merge_topics(refused_topics, response["topics"])}

    return Proceed(with_topics(request, "topics", [t for t in request["topics"] if t["name"] in allowed]), finish)


# --- OffsetFetch


def _offset_refusals(topics: list[dict]) -> list[dict]:
    return [{"name": t["name"], "partitions": [
        {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": TOPIC_DENIED} for index in t["partition_indexes"]]} for t in topics]


class _GroupFetch:
    """One group of an OffsetFetch: whether the caller may see it, and its topics split by DESCRIBE."""

    def __init__(self, gate: Gate, group_id: str | None, topics: list[dict] | None):
        access = gate.access
        self.allowed = group_id is not None and access.group(AclOperation.DESCRIBE, group_id)
        self.every_topic = topics is None
        self.kept, self.refused = topics, []
        if self.allowed and topics is not None:
            names = access.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (t["name"] for t in topics))
            self.kept = [t for t in topics if t["name"] in names]
            self.refused = [t for t in topics if t["name"] not in names]
        self.access = access

    def finish(self, topics: list[dict], error: int) -> list[dict]:
        if error != ErrorCode.NONE:
            return topics
        if self.every_topic:  # clients see no offsets of topics they may not DESCRIBE
            return [t for t in topics if self.access.topic(AclOperation.DESCRIBE, t["name"])]
        return topics + _offset_refusals(self.refused)


def authorize_offset_fetch(gate: Gate) -> Answer | Proceed:
    request = gate.request
    if gate.version < FIRST_GROUPS_OFFSET_FETCH:
        group = _GroupFetch(gate, request["group_id"], request.get("topics"))
        if not group.allowed:
            if request["group_id"] is None:
                return Proceed(request)  # the handler's INVALID_GROUP_ID
            return Answer({"throttle_time_ms": 0, "error_code": GROUP_DENIED, "topics": []})
        return Proceed({**request, "topics": group.kept},
                       lambda response: {**response, "topics": group.finish(response["topics"],
                                                                            response.get("error_code", 0))})
    groups = [_GroupFetch(gate, g["group_id"], g.get("topics")) for g in request["groups"]]
    kept = [{**g, "topics": fetch.kept} for g, fetch in zip(request["groups"], groups, strict=True) if fetch.allowed]

    def finish(response: dict) -> dict:
        answered = iter(response["groups"])
        merged = []
        for g, fetch in zip(request["groups"], groups, strict=True):
            if not fetch.allowed:
                merged.append({"group_id": g["group_id"], "topics": [], "error_code": GROUP_DENIED})
                continue
            answer = next(answered)
            merged.append({**answer, "topics": fetch.finish(answer["topics"], answer["error_code"])})
        return {**response, "groups": merged}

    if not kept:
        return Answer(finish({"throttle_time_ms": 0, "groups": []}))
    return Proceed({**request, "groups": kept}, finish)


# --- DescribeGroups, ListGroups, DeleteGroups


def _described_group_refusal(group_id: str) -> dict:
    return {"error_code": GROUP_DENIED, "error_message": None, "group_id": group_id, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NOT_ASKED_FOR}


def authorize_describe_groups(gate: Gate) -> Answer | Proceed:
    """Refused groups come first, then the described ones, as Kafka builds the response."""
    request, access = gate.request, gate.access
    allowed = access.allowed_names(AclOperation.DESCRIBE, ResourceType.GROUP, request["groups"])
    refused = [_described_group_refusal(g) for g in request["groups"] if g not in allowed]
    kept = [g for g in request["groups"] if g in allowed]
    with_operations = gate.version >= 3 and request.get("include_authorized_operations", False)
    if not kept:
        return Answer({"throttle_time_ms": 0, "groups": refused})

    def finish(response: dict) -> dict:
        described = response["groups"]
        if with_operations:
            described = [{**g, "authorized_operations": access.operations(ResourceType.GROUP, g["group_id"])}
                         if g["error_code"] == ErrorCode.NONE else g for g in described]
        return {**response, "groups": refused + described}

    if not refused and not with_operations:
        return Proceed(request)
    return Proceed({**request, "groups": kept}, finish)


def authorize_list_groups(gate: Gate) -> Proceed | None:
    access = gate.access
    if access.cluster(AclOperation.DESCRIBE):
        return None
    return Proceed(gate.request, lambda response: {**response, "groups": [
        g for g in response["groups"] if access.group(AclOperation.DESCRIBE, g["group_id"])]})


def authorize_delete_groups(gate: Gate) -> Answer | Proceed | None:
    request = gate.request
    names = list(dict.fromkeys(request["groups_names"]))
    allowed = gate.access.allowed_names(AclOperation.DELETE, ResourceType.GROUP, names)
    if len(allowed) == len(names):
        return None
    refused = [{"group_id": g, "error_code": GROUP_DENIED} for g in names if g not in allowed]
    kept = [g for g in names if g in allowed]
    if not kept:
        return Answer({"throttle_time_ms": 0, "results": refused})
    return Proceed({**request, "groups_names": kept},
                   lambda response: {**response, "results": response["results"] + refused})


# --- KIP-848


def _consumer_protocol_off(gate: Gate) -> bool:
    """With group.version 0 the handler answers UNSUPPORTED_VERSION before anything is authorized."""
    return gate.node.controller.image.features.get(GROUP_VERSION, 0) < 1


def authorize_consumer_group_heartbeat(gate: Gate) -> Answer | None:
    request, access = gate.request, gate.access
    if _consumer_protocol_off(gate):
        return None
    if not access.group(AclOperation.READ, request.get("group_id") or ""):
        return Answer(_heartbeat_refusal(GROUP_DENIED))
    subscribed = request.get("subscribed_topic_names")
    if subscribed:
        allowed = access.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC, subscribed)
        if len(allowed) < len(set(subscribed)):
            return Answer(_heartbeat_refusal(TOPIC_DENIED))
    return None


def _heartbeat_refusal(error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


def _consumer_group_refusal(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": NOT_ASKED_FOR}


def authorize_consumer_group_describe(gate: Gate) -> Answer | Proceed | None:
    """DESCRIBE on each group (refused ones first); a described group whose members are assigned, or are to
    be assigned, a topic the caller may not DESCRIBE is replaced by TOPIC_AUTHORIZATION_FAILED."""
    request, access = gate.request, gate.access
    if _consumer_protocol_off(gate):
        return None
    allowed = access.allowed_names(AclOperation.DESCRIBE, ResourceType.GROUP, request["group_ids"])
    refused = [_consumer_group_refusal(g, GROUP_DENIED) for g in request["group_ids"] if g not in allowed]
    kept = [g for g in request["group_ids"] if g in allowed]
    with_operations = request.get("include_authorized_operations", False)

    def finish(response: dict) -> dict:
        described = response["groups"]
        if with_operations:
            described = [{**g, "authorized_operations": access.operations(ResourceType.GROUP, g["group_id"])}
                         if g["error_code"] == ErrorCode.NONE else g for g in described]
        groups = refused + described
        topics = {_assigned_topics(g) for g in groups}
        names = set().union(*topics) if topics else set()
        describable = access.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        return {**response, "groups": [
            g if _assigned_topics(g) <= describable
            else _consumer_group_refusal(g["group_id"], TOPIC_DENIED, UNDESCRIBABLE_TOPICS) for g in groups]}

    if not kept:
        return Answer(finish({"throttle_time_ms": 0, "groups": []}))
    return Proceed({**request, "group_ids": kept}, finish)


def _assigned_topics(group: dict) -> frozenset[str]:
    names = set()
    for member in group["members"]:
        for assignment in (member.get("assignment"), member.get("target_assignment")):
            if assignment:
                names.update(t["topic_name"] for t in assignment["topic_partitions"])
    return frozenset(names)
