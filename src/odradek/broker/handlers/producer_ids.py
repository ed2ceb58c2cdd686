"""InitProducerId: producer ids for idempotent producers; a transactional id goes to its coordinator."""

from odradek.broker.handlers.transactions import init_transactional_producer
from odradek.protocol.errors import ErrorCode, KafkaError


async def handle_init_producer_id(broker, ctx, request: dict) -> dict:
    if request["transactional_id"] is not None:
        if request["transactional_id"] == "" or (request.get("producer_id", -1) < 0) != (
                request.get("producer_epoch", -1) < 0):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "producer_id": -1,
                    "producer_epoch": -1}
        return await init_transactional_producer(broker, ctx, request)
    # Without a transactional id every call gets a fresh id, also when an idempotent producer asks to bump
    # its epoch after an error (KIP-360): a new id restarts its sequences cleanly.
    try:
        producer_id = await broker.producer_ids.next_id()
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE if exc.code ==
                ErrorCode.NOT_CONTROLLER else exc.code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}
