"""DescribeCluster (cluster id, controller, and the brokers or, on a controller listener, the controllers) and
UnregisterBroker (`kafka-cluster unregister`)."""

from odradek.broker.controller_channel import from_controller_side
from odradek.broker.handlers.acls import ALL_CLUSTER_OPERATIONS, NOT_ASKED_FOR
from odradek.protocol.errors import ErrorCode, KafkaError

BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINTS: "BROKER", CONTROLLER_ENDPOINTS: "CONTROLLER"}


def handle_describe_cluster(broker, ctx, request: dict) -> dict:
    wanted = request.get("endpoint_type", BROKER_ENDPOINTS)
    here = CONTROLLER_ENDPOINTS if from_controller_side(broker, ctx) else BROKER_ENDPOINTS
    response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "endpoint_type": wanted,
                "cluster_id": broker.cluster_id, "controller_id": broker.controller_id, "brokers": [],
                "cluster_authorized_operations": ALL_CLUSTER_OPERATIONS
                if request.get("include_cluster_authorized_operations") else NOT_ASKED_FOR}
    if wanted not in _ENDPOINT_NAMES:
        return {**response, "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "endpoint_type": BROKER_ENDPOINTS,
                "error_message": f"Unsupported endpoint type {wanted}", "cluster_id": "", "controller_id": -1}
    if wanted != here:
        return {**response, "error_code": ErrorCode.MISMATCHED_ENDPOINT_TYPE, "endpoint_type": BROKER_ENDPOINTS,
                "error_message": f"The request was sent to an endpoint of type {_ENDPOINT_NAMES[here]}, but we "
                                 f"wanted an endpoint of type {_ENDPOINT_NAMES[wanted]}",
                "cluster_id": "", "controller_id": -1}
    if here == CONTROLLER_ENDPOINTS:
        response["controller_id"] = broker.quorum.leader_id
        response["brokers"] = broker.controller_endpoints()
    else:
        response["brokers"] = broker.broker_endpoints(ctx.connection.listener, key="broker_id",
                                                      include_fenced=request.get("include_fenced_brokers", False))
    return response


async def handle_unregister_broker(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    try:
        await broker.controller.unregister_broker(request["broker_id"])
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None}
