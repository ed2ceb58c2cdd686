"""Authorization of the APIs that read and write partitions: Produce (WRITE on each topic, and WRITE on the
transactional id of transactional records; ALTER on the cluster too for `__cluster_links` and
`__balancer_execution`), Fetch (READ on each topic; CLUSTER_ACTION for a follower),
ListOffsets and OffsetForLeaderEpoch (DESCRIBE on each topic; CLUSTER_ACTION covers every topic of the
latter), DeleteRecords (DELETE on each topic) and DescribeProducers (READ on each topic)."""

from __future__ import annotations

from odradek.broker.authorization.access import Answer, Gate, Proceed, refused_message, with_topics
from odradek.config import validate_topic_name
from odradek.links.definition import LINKS_TOPIC
from odradek.protocol import records
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import AclOperation, ResourceType

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
FIRST_TOPIC_ID_FETCH = 13
FIRST_SESSION_FETCH = 7
FIRST_REPLICA_STATE_FETCH = 15
CLUSTER_ALTERING_TOPICS = (LINKS_TOPIC, "__balancer_execution")  # balancer/executor.py's EXECUTION_TOPIC


def _split_topics(gate: Gate, operation: AclOperation, key: str = "topics", name_key: str = "name"):
    """The request's topic entries the caller may do `operation` on, and the ones it may not."""
    topics = gate.request[key]
    allowed = gate.access.allowed_names(operation, ResourceType.TOPIC, (t[name_key] for t in topics))
    kept = [t for t in topics if t[name_key] in allowed]
    refused = [t for t in topics if t[name_key] not in allowed]
    return kept, refused


# --- Produce


def authorize_produce(gate: Gate) -> Answer | Proceed | None:
    request = gate.request
    acks = request["acks"]
    if _has_transactional_records(request):
        transactional_id = request.get("transactional_id")
        if transactional_id is None or not gate.access.transactional_id(AclOperation.WRITE, transactional_id):
            if acks == 0:  # no response is expected: Kafka closes the connection instead
                return Answer(None)
            return Answer(_produce_refusal(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    kept, refused = _split_topics(gate, AclOperation.WRITE, "topic_data")
    if any(t["name"] in CLUSTER_ALTERING_TOPICS for t in kept) and not gate.access.cluster(AclOperation.ALTER):
        # a link record steers what the nodes fetch, into which topics, and which ACLs they delete; a balancer
        # request moves partitions: as Confluent's Cluster Linking and Kafka's reassignments ask, ALTER on the
        # cluster, not just WRITE on the topic
        refused += [t for t in kept if t["name"] in CLUSTER_ALTERING_TOPICS]
        kept = [t for t in kept if t["name"] not in CLUSTER_ALTERING_TOPICS]
    if not refused:
        return None
    refused_topics = _produce_refusal({"topic_data": refused}, TOPIC_DENIED)["responses"]
    forward = with_topics(request, "topic_data", kept)
    if acks == 0:  # no response to carry the refusals: Kafka closes the connection, so the client notices
        return Proceed(forward, close_connection=True)
    return Proceed(forward, lambda response: {**response, "responses": response["responses"] + refused_topics})


def _has_transactional_records(request: dict) -> bool:
    """Kafka looks at the first batch of each partition's records."""
    for topic in request["topic_data"]:
        for data in topic["partition_data"]:
            if not data["records"]:
                continue
            try:
                if records.read_batch_info(data["records"], 0).is_transactional:
                    return True
            except KafkaError:
                continue
    return False


def _produce_error(index: int, error: ErrorCode, message: str | None = None) -> dict:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
            "record_errors": [], "error_message": message}


def _produce_refusal(request: dict, error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "partition_responses": [_produce_error(d["index"], error) for d in t["partition_data"]]}
        for t in request["topic_data"]]}


# --- Fetch


def _replica_id(gate: Gate) -> int:
    if gate.version >= FIRST_REPLICA_STATE_FETCH:
        return gate.request["replica_state"]["replica_id"]
    return gate.request.get("replica_id", -1)


def _fetch_partition_error(index: int, error: ErrorCode) -> dict:
    return {"partition_index": index, "error_code": error, "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


def _fetch_topic_entry(name: str | None, topic_id: bytes, partitions: list[int], error: ErrorCode) -> dict:
    return {"topic": name or "", "topic_id": topic_id,
            "partitions": [_fetch_partition_error(p, error) for p in partitions]}


def authorize_fetch(gate: Gate) -> Answer | Proceed | None:
    """READ on each topic a consumer fetches, including those its fetch session holds from earlier requests
    (Kafka authorizes every partition of the session's context each time); a follower needs CLUSTER_ACTION
    and, without it, gets TOPIC_AUTHORIZATION_FAILED for every partition."""
    request, version = gate.request, gate.version
    by_id = version >= FIRST_TOPIC_ID_FETCH
    if _replica_id(gate) >= 0:
        if gate.access.cluster(AclOperation.CLUSTER_ACTION):
            return None
        return Answer({"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": [
            _fetch_topic_entry(t.get("topic"), t.get("topic_id", bytes(16)), [p["partition"] for p in t["partitions"]],
                               TOPIC_DENIED) for t in request["topics"]]})
    image = gate.node.image

    def name_of(entry: dict) -> str | None:
        if by_id:
            known = image.topics_by_id.get(entry["topic_id"])
            return known.name if known is not None else None  # unknown ids: the handler's UNKNOWN_TOPIC_ID
        return entry["topic"]

    names = {name_of(t) for t in request["topics"]}
    session = _incremental_session(gate)
    session_partitions = list(session.partitions.values()) if session is not None else []
    names.update(p.topic for p in session_partitions)
    names.discard(None)
    allowed = gate.access.allowed_names(AclOperation.READ, ResourceType.TOPIC, names)
    if len(allowed) == len(names):
        return None
    kept, refused = [], {}  # refused: (name, topic id) -> partition indexes
    for entry in request["topics"]:
        name = name_of(entry)
        if name is None or name in allowed:
            kept.append(entry)
            continue
        topic_id = entry["topic_id"] if by_id else image.topics[name].topic_id if name in image.topics else bytes(16)
        indexes = refused.setdefault((name, topic_id), [])
        indexes += [p["partition"] for p in entry["partitions"] if p["partition"] not in indexes]
    for partition in session_partitions:  # still in the session from when the caller could read them
        if partition.topic is None or partition.topic in allowed:
            continue
        indexes = refused.setdefault((partition.topic, partition.topic_id), [])
        if partition.partition not in indexes:
            indexes.append(partition.partition)
    forward = with_topics(request, "topics", kept)
    if session is not None:  # the refused partitions leave the session: the handler never reads them again
        forgotten = list(request.get("forgotten_topics_data", ()))
        for (name, topic_id), indexes in refused.items():
            forgotten.append({"topic": name, "topic_id": topic_id, "partitions": indexes})
        forward["forgotten_topics_data"] = forgotten
    refused_entries = [_fetch_topic_entry(name, topic_id, indexes, TOPIC_DENIED)
                       for (name, topic_id), indexes in refused.items()]

    def finish(response: dict) -> dict:
        if response["error_code"] != ErrorCode.NONE:  # a session error answers for the whole request
            return response
        return {**response, "responses": response["responses"] + refused_entries}

    return Proceed(forward, finish)


def _incremental_session(gate: Gate):
    """The fetch session an incremental fetch continues, if this node has it."""
    request = gate.request
    if gate.version < FIRST_SESSION_FETCH or request.get("session_epoch", -1) <= 0:
        return None
    return gate.node.fetch_sessions.sessions.get(request.get("session_id", 0))


# --- ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers


def authorize_list_offsets(gate: Gate) -> Proceed | None:
    kept, refused = _split_topics(gate, AclOperation.DESCRIBE)
    if not refused:
        return None
    refused_topics = [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": TOPIC_DENIED, "timestamp": -1, "offset": -1,
         "leader_epoch": -1} for p in t["partitions"]]} for t in refused]
    return Proceed(with_topics(gate.request, "topics", kept),
                   lambda response: {**response, "topics": response["topics"] + refused_topics})


def authorize_offset_for_leader_epoch(gate: Gate) -> Proceed | None:
    """Followers (CLUSTER_ACTION) may ask about any topic; consumers (KIP-320) about those they may DESCRIBE."""
    if gate.access.cluster(AclOperation.CLUSTER_ACTION):
        return None
    kept, refused = _split_topics(gate, AclOperation.DESCRIBE, name_key="topic")
    if not refused:
        return None
    refused_topics = [{"topic": t["topic"], "partitions": [
        {"partition": p["partition"], "error_code": TOPIC_DENIED, "leader_epoch": -1, "end_offset": -1}
        for p in t["partitions"]]} for t in refused]
    return Proceed(with_topics(gate.request, "topics", kept),
                   lambda response: {**response, "topics": response["topics"] + refused_topics})


def authorize_delete_records(gate: Gate) -> Proceed | None:
    kept, refused = _split_topics(gate, AclOperation.DELETE)
    if not refused:
        return None
    refused_topics = [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": TOPIC_DENIED}
        for p in t["partitions"]]} for t in refused]
    return Proceed(with_topics(gate.request, "topics", kept),
                   lambda response: {**response, "topics": response["topics"] + refused_topics})


def authorize_describe_producers(gate: Gate) -> Proceed | None:
    """READ on each topic; a name that is no legal topic name is the handler's to refuse, as Kafka checks
    names first. Topics stay in the request's order."""
    topics = gate.request["topics"]
    candidates = {t["name"] for t in topics if validate_topic_name(t["name"]) is None}
    allowed = gate.access.allowed_names(AclOperation.READ, ResourceType.TOPIC, candidates)
    refused = candidates - allowed
    if not refused:
        return None
    kept = [t for t in topics if t["name"] not in refused]
    message = refused_message(TOPIC_DENIED)

    def finish(response: dict) -> dict:
        answered = iter(response["topics"])
        merged = [{"name": t["name"], "partitions": [
            {"partition_index": index, "error_code": TOPIC_DENIED, "error_message": message, "active_producers": []}
            for index in t["partition_indexes"]]} if t["name"] in refused else next(answered) for t in topics]
        return {**response, "topics": merged}

    return Proceed(with_topics(gate.request, "topics", kept), finish)
