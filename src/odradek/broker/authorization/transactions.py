"""Authorization of the transaction APIs: InitProducerId (WRITE on the transactional id; an idempotent
producer needs IDEMPOTENT_WRITE on the cluster or, KIP-679, WRITE on some topic), AddPartitionsToTxn (WRITE
on the transactional id and on each topic from clients; CLUSTER_ACTION for the brokers' v4+), AddOffsetsToTxn
(WRITE on the transactional id, READ on the group), EndTxn (WRITE on the transactional id), TxnOffsetCommit
(WRITE on the transactional id, READ on the group and on each topic), DescribeTransactions and
ListTransactions (DESCRIBE on each transactional id; topics the caller may not DESCRIBE are left out) and
WriteTxnMarkers (ALTER or CLUSTER_ACTION on the cluster)."""

from __future__ import annotations

from odradek.broker.authorization.access import Answer, Gate, Proceed, top_level_error
from odradek.broker.authorization.groups import commit_rule
from odradek.broker.authorization.metadata import INTERNAL_TOPICS
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType

TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
FIRST_BROKER_ADD_PARTITIONS = 4


def authorize_init_producer_id(gate: Gate) -> Answer | None:
    access = gate.access
    transactional_id = gate.request["transactional_id"]
    if transactional_id is not None:
        if access.transactional_id(AclOperation.WRITE, transactional_id):
            return None
        return Answer(_init_refusal(TXN_DENIED))
    if access.cluster(AclOperation.IDEMPOTENT_WRITE) or access.any_resource(AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return Answer(_init_refusal(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))


def _init_refusal(error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}


def authorize_add_partitions_to_txn(gate: Gate) -> Answer | None:
    """A client's request (v0-3) is all or nothing: with a topic it may not WRITE (internal topics never),
    no partition is added; the refused ones say why, the others OPERATION_NOT_ATTEMPTED."""
    request, access = gate.request, gate.access
    if gate.version >= FIRST_BROKER_ADD_PARTITIONS:
        if access.cluster(AclOperation.CLUSTER_ACTION):
            return None
        return Answer({**top_level_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "results_by_transaction": []})
    topics = request["v3_and_below_topics"]
    if not access.transactional_id(AclOperation.WRITE, request["v3_and_below_transactional_id"]):
        return Answer(_add_partitions_answer(topics, lambda name, index: TXN_DENIED))
    writable = access.allowed_names(AclOperation.WRITE, ResourceType.TOPIC,
                                    (t["name"] for t in topics if t["name"] not in INTERNAL_TOPICS))
    if all(t["name"] in writable for t in topics):
        return None
    image_topics = gate.node.image.topics

    def error(name: str, index: int) -> ErrorCode:
        if name not in writable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if name not in image_topics or index not in image_topics[name].partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.OPERATION_NOT_ATTEMPTED

    return Answer(_add_partitions_answer(topics, error))


def _add_partitions_answer(topics: list[dict], error_of) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for topic in topics:
        results = by_topic.setdefault(topic["name"], [])
        results += [{"partition_index": index, "partition_error_code": error_of(topic["name"], index)}
                    for index in topic["partitions"]]
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": name, "results_by_partition": results} for name, results in by_topic.items()]}


def authorize_add_offsets_to_txn(gate: Gate) -> Answer | None:
    request, access = gate.request, gate.access
    if not access.transactional_id(AclOperation.WRITE, request["transactional_id"]):
        return Answer(top_level_error(TXN_DENIED))
    if not access.group(AclOperation.READ, request["group_id"]):
        return Answer(top_level_error(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return None


def authorize_end_txn(gate: Gate) -> Answer | None:
    if gate.access.transactional_id(AclOperation.WRITE, gate.request["transactional_id"]):
        return None
    return Answer({"throttle_time_ms": 0, "error_code": TXN_DENIED, "producer_id": -1, "producer_epoch": -1})


def authorize_txn_offset_commit(gate: Gate) -> Answer | Proceed | None:
    request = gate.request
    if not gate.access.transactional_id(AclOperation.WRITE, request["transactional_id"]):
        return Answer({"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": TXN_DENIED}
                                               for p in t["partitions"]]} for t in request["topics"]]})
    return commit_rule(gate)


def authorize_describe_transactions(gate: Gate) -> Answer | Proceed:
    """Each transactional id in the request's order, a refused one as TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    the topics of a described transaction are only those the caller may DESCRIBE."""
    request, access = gate.request, gate.access
    ids = request["transactional_ids"]
    allowed = access.allowed_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids)

    def refused(transactional_id: str) -> dict:
        return {"error_code": TXN_DENIED, "transactional_id": transactional_id, "transaction_state": "",
                "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []}

    def finish(response: dict) -> dict:
        described = iter(response["transaction_states"])
        states = []
        for transactional_id in ids:
            if transactional_id not in allowed:
                states.append(refused(transactional_id))
                continue
            state = next(described)
            states.append({**state, "topics": [t for t in state["topics"]
                                               if access.topic(AclOperation.DESCRIBE, t["topic"])]})
        return {**response, "transaction_states": states}

    kept = [i for i in ids if i in allowed]
    if not kept:
        return Answer(finish({"throttle_time_ms": 0, "transaction_states": []}))
    return Proceed({**request, "transactional_ids": kept}, finish)


def authorize_list_transactions(gate: Gate) -> Proceed:
    access = gate.access
    return Proceed(gate.request, lambda response: {**response, "transaction_states": [
        state for state in response["transaction_states"]
        if access.transactional_id(AclOperation.DESCRIBE, state["transactional_id"])]})


def authorize_write_txn_markers(gate: Gate) -> Answer | None:
    access = gate.access
    if access.cluster(AclOperation.ALTER) or access.cluster(AclOperation.CLUSTER_ACTION):
        return None
    error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return Answer({"markers": [{"producer_id": marker["producer_id"], "topics": [
        {"name": topic["name"], "partitions": [{"partition_index": index, "error_code": error}
                                               for index in topic["partition_indexes"]]}
        for topic in marker["topics"]]} for marker in gate.request["markers"]]})
