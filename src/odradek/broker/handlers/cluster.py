"""DescribeCluster: cluster id, controller and brokers."""

from odradek.protocol.errors import ErrorCode

NO_AUTHORIZED_OPERATIONS = -2147483648


def handle_describe_cluster(broker, ctx, request: dict) -> dict:
    return {
        "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
        "endpoint_type": request.get("endpoint_type", 1),
        "cluster_id": broker.cluster_id, "controller_id": broker.controller_id,
        "brokers": broker.broker_endpoints(ctx.connection.listener, key="broker_id"),
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
