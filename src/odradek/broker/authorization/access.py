"""What an authorization rule works with: the caller (principal and host) facing the authorizer, and the two
verdicts a rule gives, answer the request itself or let the handler run with what the caller may touch.

A rule is `rule(gate) -> Answer | Proceed | None` (None: the request goes to the handler unchanged). It reads
the decoded request, never changes it in place (the handler gets a copy with the refused parts left out), and
says how the refused parts go back into the handler's response (`Proceed.finish`), so the response reads as
Kafka's would.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.security.authorizer import Authorizer

# Kafka's default messages for the errors rules answer with, where Kafka puts them in the response.
MESSAGES = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}
NOT_ASKED_FOR = -2147483648  # an authorized_operations field nobody asked for (Kafka's schema default)
ZERO_UUID = bytes(16)
HOST_KEY = "acl.host"  # where a connection keeps its host as ACLs name it (Connection.state)


def acl_host(peer: str) -> str:
    """The client's address as Kafka's ACLs compare it (Java's InetAddress.getHostAddress): dotted IPv4,
    IPv6 as eight groups without leading zeros (and its scope), an IPv4-mapped IPv6 address as its IPv4
    address."""
    host = peer.rsplit(":", 1)[0].strip("[]")
    address_text, percent, scope = host.partition("%")
    try:
        address = ipaddress.ip_address(address_text)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        groups = ":".join(format(int(group, 16), "x") for group in address.exploded.split(":"))
        return groups + percent + scope  # a link-local address keeps its scope, as Java writes it
    return str(address)


class Access:
    """One request's questions to the authorizer, always about the caller: may it do `operation` on the
    resource of this type and LITERAL name?"""

    __slots__ = ("authorizer", "principal", "host")

    def __init__(self, authorizer: Authorizer, principal: str, host: str):
        self.authorizer = authorizer
        self.principal = principal
        self.host = host

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def topic(self, operation: AclOperation, name: str) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, name)

    def group(self, operation: AclOperation, name: str) -> bool:
        return self.allowed(operation, ResourceType.GROUP, name)

    def transactional_id(self, operation: AclOperation, name: str) -> bool:
        return self.allowed(operation, ResourceType.TRANSACTIONAL_ID, name)

    def allowed_names(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """The names among `names` the caller may do `operation` on, each asked once."""
        return {name for name in set(names) if self.allowed(operation, resource_type, name)}

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's authorized_operations bit field."""
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)

    def any_resource(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """KIP-679: allowed on at least one resource of the type."""
        return self.authorizer.authorize_by_resource_type(self.principal, self.host, operation, resource_type)


@dataclass(frozen=True, slots=True)
class Gate:
    """What a rule sees: the node (metadata image, config, fetch sessions), the caller, the request."""

    node: object
    access: Access
    version: int
    request: dict
    controller_side: bool  # the request came in on a controller listener (Kafka's ControllerApis)


@dataclass(frozen=True, slots=True)
class Answer:
    """The whole response, given without running the handler; None: no response, the connection is closed
    (Produce with acks=0, whose client expects no answer)."""

    response: dict | None


@dataclass(frozen=True, slots=True)
class Proceed:
    """Run the handler with `request` (the original less what the caller may not touch), then `finish` its
    response (put the refused parts back, hide what the caller may not see)."""

    request: dict
    finish: Callable[[dict], dict] | None = None
    close_connection: bool = False  # once answered (Produce with acks=0 and a refused partition)


Rule = Callable[[Gate], "Answer | Proceed | None"]


def refused_message(error: ErrorCode) -> str | None:
    return MESSAGES.get(error)


def top_level_error(error: ErrorCode) -> dict:
    """The response of an API whose errors are one top-level error_code (other fields take their defaults)."""
    return {"throttle_time_ms": 0, "error_code": error}


def top_level_error_with_message(error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": refused_message(error)}


def requires_cluster(operation: AclOperation, response: Callable[[ErrorCode], dict] = top_level_error) -> Rule:
    """The rule of an API that needs `operation` on the cluster and nothing else (Kafka's
    authorizeClusterOperation): without it the whole request fails with CLUSTER_AUTHORIZATION_FAILED, answered
    as the API answers any error, `response(error)`."""

    def rule(gate: Gate) -> Answer | None:
        if gate.access.cluster(operation):
            return None
        return Answer(response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))

    rule.__name__ = f"requires_cluster_{operation.name.lower()}"
    return rule


def with_topics(request: dict, key: str, topics: list[dict]) -> dict:
    """A copy of `request` whose `key` list is `topics` (the rest shared: the handler does not mutate it)."""
    return {**request, key: topics}


def merge_topics(first: list[dict], second: list[dict], partitions_key: str = "partitions",
                 name_key: str = "name") -> list[dict]:
    """`first` then `second`, a topic of `second` already in `first` adding its partitions there (Kafka's
    response builders' merge)."""
    merged = [{**topic, partitions_key: list(topic[partitions_key])} for topic in first]
    by_name = {topic[name_key]: topic for topic in merged}
    for topic in second:
        existing = by_name.get(topic[name_key])
        if existing is None:
            merged.append(topic)
        else:
            existing[partitions_key] += topic[partitions_key]
    return merged
