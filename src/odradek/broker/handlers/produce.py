"""Produce: append each partition's record batches to its log and acknowledge per `acks`.

acks=1 answers once the leader has written; acks=all once the high watermark has passed the batch, that is
once every in-sync replica has it (or with an error at the request's timeout or a leadership change).

A transactional batch that would open its producer's transaction in a partition is first verified with the
transaction coordinator (KIP-890): the partition must be in the producer's ongoing transaction, so a late
or stray write cannot leave a transaction open that no marker will close.
"""

from odradek.broker.handlers.metadata import INTERNAL_TOPICS
from odradek.network.server import Deferred
from odradek.protocol import records
from odradek.protocol.errors import ErrorCode, KafkaError

VALID_ACKS = (0, 1, -1)


def handle_produce(broker, ctx, request: dict):
    if request.get("transactional_id") is not None and request["acks"] in VALID_ACKS:
        return _verify_then_append(broker, request)
    return _append(broker, request, {})


async def _verify_then_append(broker, request: dict):
    guards = {}  # (topic, partition) -> verification guard
    producer = None
    for topic in request["topic_data"]:
        for data in topic["partition_data"]:
            try:
                info = records.read_batch_info(data["records"] or b"", 0)
            except KafkaError:
                continue  # the append reports what is wrong with it
            if not (info.is_transactional and info.producer_id >= 0):
                continue
            producer = (info.producer_id, info.producer_epoch)
            guard = broker.replicas.start_verification(topic["name"], data["index"], info.producer_id)
            if guard is not None:
                guards[(topic["name"], data["index"])] = guard
    errors = {}
    if guards:
        errors = await broker.transactions.verify(request["transactional_id"], *producer, list(guards))
    verified = {key: guard for key, guard in guards.items() if errors.get(key, ErrorCode.NONE) == ErrorCode.NONE}
    response = _append(broker, request, {key: error for key, error in errors.items() if error != ErrorCode.NONE},
                       verified, transactional=True)
    return await response.awaitable if isinstance(response, Deferred) else response


def _append(broker, request: dict, refused: dict, verified: dict | None = None, *, transactional: bool = False):
    acks = request["acks"]
    responses = []
    replicating = []  # (partition response, topic, partition, last offset, leader epoch) for acks=all
    for topic in request["topic_data"]:
        name = topic["name"]
        partition_responses = []
        for data in topic["partition_data"]:
            if acks not in VALID_ACKS:
                partition_responses.append(_error(data["index"], ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if name in INTERNAL_TOPICS:
                partition_responses.append(_error(data["index"], ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                  f"Cannot append to internal topic {name}"))
                continue
            refusal = broker.links.write_refusal(name)
            if refusal is not None:
                partition_responses.append(_error(data["index"], *refusal))
                continue
            error = refused.get((name, data["index"]))
            if error is not None:
                partition_responses.append(_error(data["index"], error, "Partition was not added to the transaction"
                                                  if error == ErrorCode.INVALID_TXN_STATE else None))
                continue
            result = broker.replicas.append(name, data["index"], data["records"], acks,
                                            verification=verified.get((name, data["index"])) if transactional
                                            else False)
            answer = {
                "index": data["index"], "error_code": result.error, "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time_ms, "log_start_offset": result.log_start_offset,
                "record_errors": [{"batch_index": index, "batch_index_error_message": message}
                                  for index, message in result.record_errors],
                "error_message": result.message,
            }
            partition_responses.append(answer)
            if acks == -1 and result.error == ErrorCode.NONE:
                replicating.append((answer, name, data["index"], result.last_offset, result.leader_epoch))
        responses.append({"name": name, "partition_responses": partition_responses})
    if acks == 0:
        return None
    response = {"responses": responses, "throttle_time_ms": 0}
    # Answered at once when the in-sync replicas already have every batch (a single replica, above all): a
    # pipelined acks=all request then costs what an acks=1 request does, and its response is coalesced with
    # its neighbours' instead of being written alone after a turn of the event loop.
    waiting = []
    for entry in replicating:
        outcome = broker.replicas.replication_outcome(*entry[1:])
        if outcome is None:
            waiting.append(entry)
        else:
            _settle(entry[0], outcome)
    if not waiting:
        return response
    return Deferred(_await_replication(broker, response, waiting, request["timeout_ms"] / 1000))


async def _await_replication(broker, response: dict, waiting: list, timeout_s: float) -> dict:
    outcomes = await broker.replicas.wait_for_replication_of([entry[1:] for entry in waiting], timeout_s)
    for (answer, *_), outcome in zip(waiting, outcomes, strict=True):
        _settle(answer, outcome)
    return response


def _settle(answer: dict, outcome: ErrorCode) -> None:
    if outcome != ErrorCode.NONE:
        answer.update(error_code=outcome, base_offset=-1, error_message=f"not replicated: {outcome.name}")


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
            "record_errors": [], "error_message": message}
