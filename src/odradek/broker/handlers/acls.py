"""DescribeAcls, CreateAcls and DeleteAcls, answered as Kafka answers them on a broker without an authorizer.

Odradek has no authorizer yet: every request is allowed, and the ACL APIs say so with SECURITY_DISABLED,
so tools (kafka-acls, MirrorMaker 2's ACL sync) get the error they already handle.
"""

from odradek.protocol.errors import ErrorCode

# What a client may do, as AclOperation bits, when it asks (authorized_operations fields): everything, since
# there is no authorizer. Kafka answers the same without one.
NOT_ASKED_FOR = -2147483648
ALL_TOPIC_OPERATIONS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
ALL_CLUSTER_OPERATIONS = 8096  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                               # IDEMPOTENT_WRITE

# Kafka's words: DescribeAcls answers with the second, CreateAcls and DeleteAcls with the first.
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_TO_DESCRIBE = "No Authorizer is configured on the broker"


def handle_describe_acls(broker, ctx, request: dict) -> dict:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED,
            "error_message": NO_AUTHORIZER_TO_DESCRIBE, "resources": []}


def handle_create_acls(broker, ctx, request: dict) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER} for _ in request["creations"]]}


def handle_delete_acls(broker, ctx, request: dict) -> dict:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
        for _ in request["filters"]]}
