"""ACL bindings and binding filters with Kafka's wire codes, filter matching, and CreateAcls' validation.

A binding says "principal P is ALLOWED/DENIED operation O from host H on resources matching the pattern";
the pattern is a LITERAL name (the name "*" matches every resource of its type) or a PREFIXED name.
Principals are Kafka's "Type:name" strings ("User:alice"; "User:*" is everyone), as ACL records store them.
Filters select bindings for DescribeAcls and DeleteAcls; ANY and None fields match anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from odradek.protocol.errors import ErrorCode

WILDCARD = "*"  # as a LITERAL resource name: every resource of the type; as a host: every host
CLUSTER_NAME = "kafka-cluster"


class _KafkaEnum(IntEnum):
    """A code a newer client may send that this broker does not know reads as UNKNOWN, as in Kafka."""

    @classmethod
    def _missing_(cls, value: object) -> _KafkaEnum:
        return cls(0)


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2  # filters only: every binding that would apply to a resource of this name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The operations each resource type has (Kafka's AclEntry.supportedOperations): what KIP-430's authorized
# operations fields report on.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBindingFilter:
    """Which bindings a DescribeAcls or DeleteAcls filter selects. The defaults select every binding."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type != PatternType.MATCH:  # ANY, LITERAL and PREFIXED compare names exactly
            return self.resource_name == binding.resource_name
        if binding.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(binding.resource_name)
        return binding.resource_name in (self.resource_name, WILDCARD)

    def _matches_entry(self, binding: AclBinding) -> bool:
        return (self.principal in (None, binding.principal)
                and self.host in (None, binding.host)
                and self.operation in (AclOperation.ANY, binding.operation)
                and self.permission_type in (AclPermissionType.ANY, binding.permission_type))


Refusal = tuple[ErrorCode, str]


def validate_binding(binding: AclBinding) -> Refusal | None:
    """Why CreateAcls refuses to create this binding, in Kafka 4.0's words (the broker's checks, then the
    controller's), or None when it may be created. Kafka never gets this far with UNKNOWN codes (the request
    fails to parse) nor with ANY or MATCH ones (its binding classes throw: the whole request fails with
    UNKNOWN_SERVER_ERROR); those are the controller's checks, for bindings made some other way."""
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.resource_name:
        return ErrorCode.INVALID_REQUEST, "Invalid empty resource name"
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return ErrorCode.INVALID_REQUEST, f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return ErrorCode.INVALID_REQUEST, f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return ErrorCode.INVALID_REQUEST, f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return ErrorCode.INVALID_REQUEST, f"Invalid permissionType {binding.permission_type.name}"
    if ":" not in binding.principal:
        return ErrorCode.INVALID_REQUEST, (f"Could not parse principal from `{binding.principal}` (no colon is "
                                           "present separating the principal type from the principal name)")
    return None


def validate_filter(acl_filter: AclBindingFilter) -> Refusal | None:
    """Why DeleteAcls refuses this filter (a field this broker does not know), or None."""
    if acl_filter.resource_type == ResourceType.UNKNOWN or acl_filter.pattern_type == PatternType.UNKNOWN:
        return ErrorCode.INVALID_REQUEST, "Unknown patternFilter."
    if acl_filter.operation == AclOperation.UNKNOWN or acl_filter.permission_type == AclPermissionType.UNKNOWN:
        return ErrorCode.INVALID_REQUEST, "Unknown entryFilter."
    return None
