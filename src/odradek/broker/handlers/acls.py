"""DescribeAcls, CreateAcls and DeleteAcls, as Kafka's brokers and controllers answer them.

With an authorizer (authorizer.class.name set), DescribeAcls is answered from this node's authorizer, which
follows the ACL records of the metadata log; CreateAcls and DeleteAcls are forwarded to the active controller,
which checks them and commits their records. Without one, all three answer SECURITY_DISABLED, so tools
(kafka-acls, MirrorMaker 2's ACL sync) get the error they already handle.

A request carrying the UNKNOWN code (0) for a resource type, pattern type, operation or permission type closes
the connection: Kafka cannot parse it. Other codes this node does not know read as UNKNOWN, which matches no
binding and is refused for a new one.
"""

from odradek.broker.controller_channel import from_controller_side
from odradek.network.server import CloseConnection
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_binding,
)

# What a client may do, as AclOperation bits, when it asks (authorized_operations fields): everything, since
# there is no authorizer. Kafka answers the same without one.
NOT_ASKED_FOR = -2147483648
ALL_TOPIC_OPERATIONS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
ALL_CLUSTER_OPERATIONS = 8096  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                               # IDEMPOTENT_WRITE

# Kafka's words: DescribeAcls answers with the second, CreateAcls and DeleteAcls with the first.
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_TO_DESCRIBE = "No Authorizer is configured on the broker"

UNKNOWN_CODE = 0
API_NAMES = {29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls"}


def handle_describe_acls(broker, ctx, request: dict) -> dict:
    _refuse_unknown_codes(ctx, [(request["resource_type_filter"], request["pattern_type_filter"],
                                 request["operation"], request["permission_type"])])
    if broker.authorizer is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED,
                "error_message": NO_AUTHORIZER_TO_DESCRIBE, "resources": []}
    acl_filter = AclBindingFilter(
        ResourceType(request["resource_type_filter"]), request["resource_name_filter"],
        PatternType(request["pattern_type_filter"]), request["principal_filter"], request["host_filter"],
        AclOperation(request["operation"]), AclPermissionType(request["permission_type"]))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "",
            "resources": describe_resources(broker.authorizer.acls(acl_filter))}


def describe_resources(bindings: list[AclBinding]) -> list[dict]:
    """DescribeAcls' resources: the bindings grouped by resource pattern, in the order first seen."""
    resources: dict[tuple, list[dict]] = {}
    for binding in bindings:
        key = (binding.resource_type, binding.resource_name, binding.pattern_type)
        resources.setdefault(key, []).append({
            "principal": binding.principal, "host": binding.host, "operation": binding.operation,
            "permission_type": binding.permission_type})
    return [{"resource_type": resource_type, "resource_name": name, "pattern_type": pattern_type,
             "acls": entries} for (resource_type, name, pattern_type), entries in resources.items()]


def handle_create_acls(broker, ctx, request: dict):
    creations = request["creations"]
    _refuse_unknown_codes(ctx, [(c["resource_type"], c["resource_pattern_type"], c["operation"],
                                 c["permission_type"]) for c in creations])
    if not from_controller_side(broker, ctx):
        return _forward(broker, ctx, request,
                        lambda code, message: _create_response([(code, message)] * len(creations)))
    if broker.authorizer is None:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER} for _ in creations]}
    return _create_acls(broker, [_binding(creation) for creation in creations])


async def _create_acls(broker, bindings: list[AclBinding]) -> dict:
    if any(_has_wildcard_code(binding) for binding in bindings):
        # Kafka's binding classes refuse ANY and MATCH: the whole request fails, with no message.
        return _create_response([(ErrorCode.UNKNOWN_SERVER_ERROR, None)] * len(bindings))
    # The broker's checks first (a CLUSTER resource's name, an empty name), then the controller's.
    refused = {i: validate_binding(binding) for i, binding in enumerate(bindings)}
    valid = [binding for i, binding in enumerate(bindings) if refused[i] is None]
    try:
        created = iter(await broker.controller.create_acls(valid) if valid else [])
    except KafkaError as exc:
        created = iter([(exc.code, exc.message)] * len(valid))
    return _create_response([refused[i] or next(created) for i in range(len(bindings))])


def _create_response(results: list[tuple[ErrorCode, str | None]]) -> dict:
    # Kafka leaves a success's message at its default, the empty string.
    return {"throttle_time_ms": 0, "results": [
        {"error_code": code, "error_message": "" if code == ErrorCode.NONE else message}
        for code, message in results]}


def handle_delete_acls(broker, ctx, request: dict):
    filters = request["filters"]
    _refuse_unknown_codes(ctx, [(f["resource_type_filter"], f["pattern_type_filter"], f["operation"],
                                 f["permission_type"]) for f in filters])
    if not from_controller_side(broker, ctx):
        return _forward(broker, ctx, request,
                        lambda code, message: _delete_response([((code, message), [])] * len(filters)))
    if broker.authorizer is None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
            for _ in filters]}
    return _delete_acls(broker, [AclBindingFilter(
        ResourceType(f["resource_type_filter"]), f["resource_name_filter"],
        PatternType(f["pattern_type_filter"]), f["principal_filter"], f["host_filter"],
        AclOperation(f["operation"]), AclPermissionType(f["permission_type"])) for f in filters])


async def _delete_acls(broker, filters: list[AclBindingFilter]) -> dict:
    try:
        results = await broker.controller.delete_acls(filters)
    except KafkaError as exc:
        results = [((exc.code, exc.message), [])] * len(filters)
    return _delete_response(results)


def _delete_response(results: list[tuple[tuple[ErrorCode, str | None], list[AclBinding]]]) -> dict:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": code, "error_message": message, "matching_acls": [_matching_acl(b) for b in bindings]}
        for (code, message), bindings in results]}


async def _forward(broker, ctx, request: dict, failed) -> dict:
    """The active controller's answer; failed(code, message) when none answers in time."""
    try:
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    except KafkaError as exc:
        return failed(exc.code, exc.message)


def _matching_acl(binding: AclBinding) -> dict:
    return {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": binding.resource_type,
            "resource_name": binding.resource_name, "pattern_type": binding.pattern_type,
            "principal": binding.principal, "host": binding.host, "operation": binding.operation,
            "permission_type": binding.permission_type}


def _binding(creation: dict) -> AclBinding:
    return AclBinding(ResourceType(creation["resource_type"]), creation["resource_name"],
                      PatternType(creation["resource_pattern_type"]), creation["principal"], creation["host"],
                      AclOperation(creation["operation"]), AclPermissionType(creation["permission_type"]))


def _has_wildcard_code(binding: AclBinding) -> bool:
    return (binding.resource_type == ResourceType.ANY
            or binding.pattern_type in (PatternType.ANY, PatternType.MATCH)
            or binding.operation == AclOperation.ANY or binding.permission_type == AclPermissionType.ANY)


def _refuse_unknown_codes(ctx, codes: list[tuple[int, int, int, int]]) -> None:
    if any(UNKNOWN_CODE in four for four in codes):
        raise CloseConnection(f"{API_NAMES[ctx.api_key]} v{ctx.api_version} request (correlation id "
                              f"{ctx.correlation_id}, client {ctx.client_id!r}) holds the code UNKNOWN (0)")
