"""UpdateFeatures: raise or lower the cluster's feature levels (kafka-features upgrade|downgrade), on the
active controller."""

from odradek.broker.controller_channel import from_controller_side
from odradek.controller import features
from odradek.protocol.errors import ErrorCode, KafkaError


async def handle_update_features(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    updates = features.updates_from_request(ctx.api_version, request)
    try:
        await broker.controller.update_features(updates, request.get("validate_only", False))
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message, "results": []}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "results": [{"feature": update.name, "error_code": ErrorCode.NONE, "error_message": "NONE"}
                        for update in updates]}
