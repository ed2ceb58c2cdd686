"""ApiVersions: the API keys and version ranges this node serves, and the cluster's feature levels."""

from odradek.broker.controller_channel import from_controller_side
from odradek.controller import features
from odradek.protocol.errors import ErrorCode


def handle_api_versions(broker, ctx, request: dict) -> dict:
    image = broker.image
    dispatcher = broker.controller_dispatcher if from_controller_side(broker, ctx) else broker.dispatcher
    return {"error_code": ErrorCode.NONE, "api_keys": dispatcher.advertised_versions(), "throttle_time_ms": 0,
            "supported_features": features.supported_for_api_versions(),
            "finalized_features_epoch": image.features_epoch,
            "finalized_features": features.finalized_for_api_versions(image.features)}
