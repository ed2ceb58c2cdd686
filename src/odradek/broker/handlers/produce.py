"""Produce: append each partition's record batches to its log and acknowledge per `acks`."""

from odradek.broker.handlers.metadata import INTERNAL_TOPICS
from odradek.protocol.errors import ErrorCode

VALID_ACKS = (0, 1, -1)


def handle_produce(broker, ctx, request: dict) -> dict | None:
    acks = request["acks"]
    responses = []
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
            if request.get("transactional_id") is not None:
                partition_responses.append(_error(data["index"], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                  "transactions are not supported yet"))
                continue
            result = broker.replicas.append(name, data["index"], data["records"], acks)
            partition_responses.append({
                "index": data["index"], "error_code": result.error, "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time_ms, "log_start_offset": result.log_start_offset,
                "record_errors": [], "error_message": result.message,
            })
        responses.append({"name": name, "partition_responses": partition_responses})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
            "record_errors": [], "error_message": message}
