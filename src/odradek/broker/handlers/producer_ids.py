"""InitProducerId: producer ids for idempotent producers (transactional ids arrive with transactions)."""

from odradek.protocol.errors import ErrorCode


def handle_init_producer_id(broker, ctx, request: dict) -> dict:
    if request["transactional_id"] is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    # Without a transactional id every call gets a fresh id, also when an idempotent producer asks to bump
    # its epoch after an error (KIP-360): a new id restarts its sequences cleanly.
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "producer_id": broker.controller.allocate_producer_id(), "producer_epoch": 0}
