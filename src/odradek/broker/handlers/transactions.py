"""The transaction APIs: the coordinator's (InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions) and the partition leader's
(WriteTxnMarkers, DescribeProducers). TxnOffsetCommit is the group coordinator's (handlers/groups.py)."""

from __future__ import annotations

from odradek.broker.group_service import OFFSETS_TOPIC
from odradek.broker.replica_manager import now_ms
from odradek.coordinator.transactions import STATE_BY_DISPLAY
from odradek.protocol.errors import ErrorCode, KafkaError

MARKER_TIMEOUT_S = 30.0
# KIP-588: clients older than these versions know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH
FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


def _error(ctx, exc: KafkaError) -> ErrorCode:
    if exc.code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_SINCE.get(ctx.api_key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return exc.code


async def init_transactional_producer(broker, ctx, request: dict) -> dict:
    try:
        producer_id, epoch = await broker.transactions.init_producer_id(
            request["transactional_id"], request["transaction_timeout_ms"], request.get("producer_id", -1),
            request.get("producer_epoch", -1))
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": _error(ctx, exc), "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": epoch}


async def handle_add_partitions_to_txn(broker, ctx, request: dict) -> dict:
    if ctx.api_version <= 3:
        results = await _add_partitions(broker, ctx, request["v3_and_below_transactional_id"],
                                        request["v3_and_below_producer_id"], request["v3_and_below_producer_epoch"],
                                        request["v3_and_below_topics"], verify_only=False)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    answers = []
    for txn in request["transactions"]:
        results = await _add_partitions(broker, ctx, txn["transactional_id"], txn["producer_id"],
                                        txn["producer_epoch"], txn["topics"], verify_only=txn["verify_only"])
        answers.append({"transactional_id": txn["transactional_id"], "topic_results": results})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": answers}


async def _add_partitions(broker, ctx, transactional_id: str, producer_id: int, producer_epoch: int,
                          topics: list[dict], *, verify_only: bool) -> list[dict]:
    wanted = [(topic["name"], index) for topic in topics for index in topic["partitions"]]
    image = broker.image
    errors: dict[tuple[str, int], ErrorCode] = {}
    unknown = {p for p in wanted if p[0] not in image.topics or p[1] not in image.topics[p[0]].partitions}
    # no markers in a mirror either; while this node has yet to read which topics are mirrors, the client retries
    refusals = {p: refusal[0] for p in wanted if (refusal := broker.links.write_refusal(p[0])) is not None}
    mirrors = {p: ErrorCode.INVALID_TOPIC_EXCEPTION if code == ErrorCode.INVALID_TOPIC_EXCEPTION
               else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for p, code in refusals.items()}
    if unknown or mirrors:
        errors = {p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p in unknown else mirrors[p]
                  if p in mirrors else ErrorCode.OPERATION_NOT_ATTEMPTED for p in wanted}
    elif verify_only:
        errors = broker.transactions.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
    else:
        try:
            await broker.transactions.add_partitions(transactional_id, producer_id, producer_epoch, set(wanted))
            errors = dict.fromkeys(wanted, ErrorCode.NONE)
        except KafkaError as exc:
            errors = dict.fromkeys(wanted, _error(ctx, exc))
    by_topic: dict[str, list[dict]] = {}
    for (topic, index) in wanted:
        by_topic.setdefault(topic, []).append({"partition_index": index,
                                               "partition_error_code": errors[(topic, index)]})
    return [{"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]


async def handle_add_offsets_to_txn(broker, ctx, request: dict) -> dict:
    if not await broker.groups.ensure_offsets_topic():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    partition = (OFFSETS_TOPIC, broker.groups.core.partition_for(request["group_id"]))
    try:
        await broker.transactions.add_partitions(request["transactional_id"], request["producer_id"],
                                                 request["producer_epoch"], {partition})
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": _error(ctx, exc)}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE}


async def handle_end_txn(broker, ctx, request: dict) -> dict:
    try:
        await broker.transactions.end_txn(request["transactional_id"], request["producer_id"],
                                          request["producer_epoch"], request["committed"])
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": _error(ctx, exc), "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": -1, "producer_epoch": -1}


def handle_describe_transactions(broker, ctx, request: dict) -> dict:
    states = []
    for transactional_id in request["transactional_ids"]:
        answer = {"error_code": ErrorCode.NONE, "transactional_id": transactional_id, "transaction_state": "",
                  "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                  "producer_epoch": -1, "topics": []}
        try:
            broker.transactions.check_coordinator(transactional_id)
            txn = broker.transactions.core.describe(transactional_id)
        except KafkaError as exc:
            answer["error_code"] = exc.code
            states.append(answer)
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(index)
        answer.update(transaction_state=txn.state.display, transaction_timeout_ms=txn.timeout_ms,
                      transaction_start_time_ms=txn.start_ms, producer_id=txn.producer_id,
                      producer_epoch=txn.producer_epoch,
                      topics=[{"topic": t, "partitions": p} for t, p in by_topic.items()])
        states.append(answer)
    return {"throttle_time_ms": 0, "transaction_states": states}


def handle_list_transactions(broker, ctx, request: dict) -> dict:
    filters = set(request["state_filters"])
    known = filters & set(STATE_BY_DISPLAY)
    unknown = sorted(filters - known)
    txns = [] if filters and not known else broker.transactions.core.list(
        known, set(request["producer_id_filters"]), request.get("duration_filter", -1), now_ms())
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                    "transaction_state": t.state.display} for t in txns]}


def handle_describe_producers(broker, ctx, request: dict) -> dict:
    topics = []
    for topic in request["topics"]:
        parts = []
        for index in topic["partition_indexes"]:
            answer = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                      "active_producers": []}
            try:
                partition = broker.replicas.partition(topic["name"], index)
            except KafkaError as exc:
                answer.update(error_code=exc.code, error_message=exc.message)
                parts.append(answer)
                continue
            answer["active_producers"] = [{
                "producer_id": entry.producer_id, "producer_epoch": entry.epoch, "last_sequence": entry.last_seq,
                "last_timestamp": entry.last_timestamp, "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_start_offset": entry.txn_first_offset,
            } for entry in partition.log.producer_state.producers.values()]
            parts.append(answer)
        topics.append({"name": topic["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def handle_write_txn_markers(broker, ctx, request: dict) -> dict:
    return await write_markers(broker, request)


async def write_markers(broker, request: dict) -> dict:
    """Append each marker to its partitions (this node must lead them) and answer once they are replicated;
    a marker on a `__consumer_offsets` partition also settles the transaction's pending offset commits."""
    results = []
    for marker in request["markers"]:
        producer_id, commit = marker["producer_id"], marker["transaction_result"]
        waits = []
        topics = []
        for topic in marker["topics"]:
            parts = []
            for index in topic["partition_indexes"]:
                answer = {"partition_index": index, "error_code": ErrorCode.NONE}
                result = broker.replicas.append_marker(topic["name"], index, commit, producer_id,
                                                       marker["producer_epoch"], marker["coordinator_epoch"])
                answer["error_code"] = result.error
                if result.error == ErrorCode.NONE:
                    waits.append((answer, topic["name"], index, result.last_offset, result.leader_epoch))
                parts.append(answer)
            topics.append({"name": topic["name"], "partitions": parts})
        errors = await broker.replicas.wait_for_replication_of([wait[1:] for wait in waits], MARKER_TIMEOUT_S)
        for (answer, name, index, _, _), error in zip(waits, errors, strict=True):
            answer["error_code"] = error
            if error == ErrorCode.NONE and name == OFFSETS_TOPIC and broker.groups is not None:
                broker.groups.on_transaction_completed(index, producer_id, commit)
        results.append({"producer_id": producer_id, "topics": topics})
    return {"markers": results}

