"""ApiVersions: the API keys and version ranges this node serves."""

from odradek.protocol.errors import ErrorCode


def handle_api_versions(broker, ctx, request: dict) -> dict:
    return {"error_code": ErrorCode.NONE, "api_keys": broker.dispatcher.advertised_versions(), "throttle_time_ms": 0,
            "supported_features": [], "finalized_features_epoch": -1, "finalized_features": []}
