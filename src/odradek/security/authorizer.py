"""The ACL authorizer: Kafka's StandardAuthorizer decisions over an in-memory index of ACL bindings.

A request is allowed when the principal is a super user, or when some ALLOW binding applies to it and no DENY
binding does. A binding applies when its pattern matches the resource (the LITERAL name, the LITERAL "*", or
a PREFIXED name the resource name starts with), its principal is the caller's or "User:*", its host is the
caller's or "*", and its operation is the one asked for or ALL, or, for an ALLOW only, one that implies it.
When no binding of any principal matches the resource, allow.everyone.if.no.acl.found decides.

Sans-I/O: the bindings arrive with their record ids (add_acl, remove_acl, as the metadata log replays them),
and every question is answered from memory. Hosts are compared as strings: the caller passes the client's
address as Java's getHostAddress writes it (192.0.2.1; IPv6 uncompressed, 0:0:0:0:0:0:0:1), as Kafka does.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator

from odradek.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.security.principal import WILDCARD_USER

# An ALLOW of one of these also allows DESCRIBE (or DESCRIBE_CONFIGS); a DENY of them denies only itself.
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# The resource name authorize_by_resource_type asks about first, as Kafka does: any name would do, so only
# super users, allow-everyone and bindings that match every name (or happen to match this one) answer.
PROBE_RESOURCE_NAME = "hardcode"


def parse_super_users(value: str) -> set[str]:
    """super.users: principals separated by semicolons (names may hold commas), each "Type:name"."""
    principals = [part.strip() for part in value.split(";") if part.strip()]
    for principal in principals:
        if ":" not in principal:
            raise ValueError(f"expected a string in format principalType:principalName but got {principal}")
    return set(principals)


class _ResourceTypeAcls:
    """The bindings of one resource type, by pattern name; PREFIXED names are also kept sorted, so the ones
    a resource name starts with are found with a few binary searches."""

    def __init__(self) -> None:
        self.literal: dict[str, set[AclBinding]] = {}
        self.prefixed: dict[str, set[AclBinding]] = {}
        self.prefixes: list[str] = []

    def add(self, binding: AclBinding) -> None:
        by_name = self._by_name(binding.pattern_type)
        if binding.pattern_type == PatternType.PREFIXED and binding.resource_name not in by_name:
            insort(self.prefixes, binding.resource_name)
        by_name.setdefault(binding.resource_name, set()).add(binding)

    def remove(self, binding: AclBinding) -> None:
        by_name = self._by_name(binding.pattern_type)
        bindings = by_name[binding.resource_name]
        bindings.remove(binding)
        if not bindings:
            del by_name[binding.resource_name]
            if binding.pattern_type == PatternType.PREFIXED:
                del self.prefixes[bisect_left(self.prefixes, binding.resource_name)]

    def __bool__(self) -> bool:
        return bool(self.literal or self.prefixed)

    def all(self) -> Iterator[AclBinding]:
        for by_name in (self.literal, self.prefixed):
            for bindings in by_name.values():
                yield from bindings

    def matching(self, name: str) -> Iterator[AclBinding]:
        """The bindings whose pattern matches the resource `name`."""
        yield from self.literal.get(name, ())
        if name != WILDCARD:
            yield from self.literal.get(WILDCARD, ())
        for prefix in self._prefixes_of(name):
            yield from self.prefixed[prefix]

    def _prefixes_of(self, name: str) -> Iterator[str]:
        # Walk the sorted prefixes down from `name`. Every prefix of `name` sorts at or below it; on meeting a
        # string that is not one, only prefixes shorter than what it shares with `name` can remain, and they
        # sort at or below that shared part, so jump there (Kafka walks its sorted ACL set the same way).
        prefixes = self.prefixes
        i = bisect_right(prefixes, name) - 1
        while i >= 0:
            candidate = prefixes[i]
            if name.startswith(candidate):
                yield candidate
                i -= 1
            else:
                shared = name[:len(os.path.commonprefix((name, candidate)))]
                i = bisect_right(prefixes, shared, 0, i) - 1

    def _by_name(self, pattern_type: PatternType) -> dict[str, set[AclBinding]]:
        if pattern_type == PatternType.LITERAL:
            return self.literal
        if pattern_type == PatternType.PREFIXED:
            return self.prefixed
        raise ValueError(f"an ACL binding's pattern is LITERAL or PREFIXED, not {pattern_type.name}")


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_id: dict[bytes, AclBinding] = {}
        self._bindings: set[AclBinding] = set()
        self._by_type: dict[ResourceType, _ResourceTypeAcls] = {}

    def add_acl(self, acl_id: bytes, binding: AclBinding) -> None:
        if acl_id in self._by_id:
            raise ValueError(f"an ACL with id {acl_id.hex()} already exists")
        if binding in self._bindings:
            raise ValueError(f"the ACL {binding} already exists")  # the controller creates each binding once
        self._by_type.setdefault(binding.resource_type, _ResourceTypeAcls()).add(binding)
        self._by_id[acl_id] = binding
        self._bindings.add(binding)

    def remove_acl(self, acl_id: bytes) -> AclBinding:
        binding = self._by_id.pop(acl_id)
        self._bindings.remove(binding)
        acls = self._by_type[binding.resource_type]
        acls.remove(binding)
        if not acls:
            del self._by_type[binding.resource_type]
        return binding

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, binding: AclBinding) -> bool:
        return binding in self._bindings

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the bindings the filter selects, oldest first."""
        return [binding for binding in self._by_id.values() if acl_filter.matches(binding)]

    def acls_with_ids(self, acl_filter: AclBindingFilter) -> list[tuple[bytes, AclBinding]]:
        """DeleteAcls: the bindings the filter selects, with the ids their removal records name."""
        return [(acl_id, binding) for acl_id, binding in self._by_id.items() if acl_filter.matches(binding)]

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._by_type.get(resource_type)
        if acls is None:
            return self.allow_everyone_if_no_acl_found
        resource_has_acls = allowed = False
        for binding in acls.matching(resource_name):
            resource_has_acls = True
            if _applies(binding, principal, host, operation):
                if binding.permission_type != AclPermissionType.ALLOW:
                    return False
                allowed = True
        # Bindings on the resource for other principals, hosts or operations mean "not you": no default then.
        return allowed or (not resource_has_acls and self.allow_everyone_if_no_acl_found)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              resource_name: str) -> int:
        """KIP-430: bit n set when the operation with code n, one of the type's operations, is allowed."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, resource_name):
                bits |= 1 << operation
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """KIP-679: whether the principal may do `operation` on at least one resource of the type, i.e. some
        ALLOW binding for it is not overridden by a DENY binding covering at least the same names. Bindings
        count here only for their exact operation or ALL, without implied operations (Kafka's
        Authorizer.authorizeByResourceType)."""
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type is for one resource type, not {resource_type.name}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type is for one operation, not {operation.name}")
        if self.authorize(principal, host, operation, resource_type, PROBE_RESOURCE_NAME):
            return True
        acls = self._by_type.get(resource_type)
        if acls is None:
            return False
        allowed_literals: set[str] = set()
        allowed_prefixes: set[str] = set()
        denied_literals: set[str] = set()
        denied_prefixes: set[str] = set()
        for binding in acls.all():
            if (binding.principal not in (principal, WILDCARD_USER) or binding.host not in (host, WILDCARD)
                    or binding.operation not in (operation, AclOperation.ALL)):
                continue
            literal = binding.pattern_type == PatternType.LITERAL
            if binding.permission_type == AclPermissionType.DENY:
                if literal and binding.resource_name == WILDCARD:
                    return False
                (denied_literals if literal else denied_prefixes).add(binding.resource_name)
            elif binding.permission_type == AclPermissionType.ALLOW:
                (allowed_literals if literal else allowed_prefixes).add(binding.resource_name)
        if WILDCARD in allowed_literals:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name[:length] in denied_prefixes for length in range(1, len(name) + 1))

        return (any(name not in denied_literals and not denied_by_prefix(name) for name in allowed_literals)
                or any(not denied_by_prefix(prefix) for prefix in allowed_prefixes))


def _applies(binding: AclBinding, principal: str, host: str, operation: AclOperation) -> bool:
    """Whether the binding speaks about this principal, host and operation (its resource already matches)."""
    if binding.principal not in (principal, WILDCARD_USER) or binding.host not in (host, WILDCARD):
        return False
    if binding.operation in (operation, AclOperation.ALL):
        return True
    if binding.permission_type != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return binding.operation in IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return binding.operation in IMPLIES_DESCRIBE_CONFIGS
    return False
