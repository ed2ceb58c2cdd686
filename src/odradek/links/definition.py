"""What a cluster link is, and the state every node keeps of the links (sans-I/O).

The links live in the compacted topic `__cluster_links` of the destination cluster, as JSON values under three
kinds of keys: `link/<name>` holds a link's definition (its source, the topics and groups it mirrors, whether
it is paused), `mirror/<topic>` says that a local topic is a mirror of a link, ACTIVE (read-only, fed by the
link) or PROMOTED (an ordinary topic since its failover). A mirror record is written before its topic is
created, so a topic that exists is never mistaken for a mirror it is not, nor a mirror for a plain topic.
`acls/<name>` lists the ACL bindings a link with sync_acls has created here (links/acl_sync.py), so that it
removes only those, never one this cluster's administrators made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from odradek.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

LINKS_TOPIC = "__cluster_links"
INTERNAL_PREFIX = "__"  # internal topics (__consumer_offsets, __cluster_links, ...): never mirrored
ACTIVE, PROMOTED = "ACTIVE", "PROMOTED"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
_HOST_PORT = re.compile(r"[^,\s:]+:\d{1,5}(,[^,\s:]+:\d{1,5})*")


# What a link's source config may set: how to reach and log in to the source. Nothing else, since the nodes and
# the console hand it to librdkafka, some of whose settings load libraries or run commands.
SOURCE_CONFIG_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification", "client.id", "socket.connection.setup.timeout.ms",
})


class LinkError(ValueError):
    """A link definition or record that cannot be used; str() is one line."""


@dataclass(frozen=True)
class LinkDefinition:
    name: str
    source_bootstrap: str
    topics: tuple[str, ...]  # regular expressions a source topic's whole name must match
    groups: tuple[str, ...] = ()  # the same, for consumer groups whose offsets are copied
    source_config: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    sync_configs: bool = False
    sync_acls: bool = False
    paused: bool = False

    def __post_init__(self):
        if not _NAME.fullmatch(self.name):
            raise LinkError(f"link name {self.name!r}: letters, digits, '.', '_' and '-' only")
        if not _HOST_PORT.fullmatch(self.source_bootstrap):
            raise LinkError(f"source bootstrap {self.source_bootstrap!r}: expected HOST:PORT[,HOST:PORT...]")
        if not self.topics:
            raise LinkError("a link mirrors at least one topic pattern")
        for pattern in (*self.topics, *self.groups):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise LinkError(f"pattern {pattern!r}: {exc}") from None
        unknown = sorted(set(self.source_config) - SOURCE_CONFIG_KEYS)
        if unknown:
            raise LinkError(f"source config: {', '.join(unknown)} not taken (a link takes "
                            f"{', '.join(sorted(SOURCE_CONFIG_KEYS))})")

    def mirrors_topic(self, topic: str) -> bool:
        """Whether the link mirrors a source topic of this name (never an internal topic)."""
        return not topic.startswith(INTERNAL_PREFIX) and any(re.fullmatch(p, topic) for p in self.topics)

    def mirrors_group(self, group: str) -> bool:
        return any(re.fullmatch(p, group) for p in self.groups)

    def to_json(self) -> bytes:
        return json.dumps({
            "name": self.name, "source_bootstrap": self.source_bootstrap, "topics": list(self.topics),
            "groups": list(self.groups), "source_config": dict(self.source_config),
            "sync_configs": self.sync_configs, "sync_acls": self.sync_acls, "paused": self.paused,
        }, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LinkDefinition:
        try:
            value = json.loads(data)
            return cls(value["name"], value["source_bootstrap"], tuple(value["topics"]), tuple(value["groups"]),
                       MappingProxyType(dict(value["source_config"])), bool(value["sync_configs"]),
                       bool(value["sync_acls"]), bool(value["paused"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise LinkError(f"unreadable link definition: {exc}") from None


@dataclass(frozen=True)
class MirrorTopic:
    topic: str
    link: str
    state: str = ACTIVE  # ACTIVE or PROMOTED

    def to_json(self) -> bytes:
        return json.dumps({"topic": self.topic, "link": self.link, "state": self.state}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> MirrorTopic:
        try:
            value = json.loads(data)
            mirror = cls(value["topic"], value["link"], value["state"])
        except (ValueError, KeyError, TypeError) as exc:
            raise LinkError(f"unreadable mirror record: {exc}") from None
        if mirror.state not in (ACTIVE, PROMOTED):
            raise LinkError(f"mirror {mirror.topic}: unknown state {mirror.state!r}")
        return mirror


@dataclass(frozen=True)
class CopiedAcls:
    """The ACL bindings a link has created on this cluster (copies of the source's)."""

    link: str
    bindings: frozenset[AclBinding] = frozenset()

    def to_json(self) -> bytes:
        rows = sorted(({"resource_type": b.resource_type.name, "resource_name": b.resource_name,
                        "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
                        "operation": b.operation.name, "permission_type": b.permission_type.name}
                       for b in self.bindings), key=lambda row: tuple(row.values()))
        return json.dumps({"link": self.link, "bindings": rows}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CopiedAcls:
        try:
            value = json.loads(data)
            bindings = frozenset(AclBinding(
                ResourceType[row["resource_type"]], str(row["resource_name"]), PatternType[row["pattern_type"]],
                str(row["principal"]), str(row["host"]), AclOperation[row["operation"]],
                AclPermissionType[row["permission_type"]]) for row in value["bindings"])
            return cls(str(value["link"]), bindings)
        except (ValueError, KeyError, TypeError) as exc:
            raise LinkError(f"unreadable copied ACLs record: {exc}") from None


def link_key(name: str) -> bytes:
    return f"link/{name}".encode()


def mirror_key(topic: str) -> bytes:
    return f"mirror/{topic}".encode()


def acls_key(link: str) -> bytes:
    return f"acls/{link}".encode()


class LinkState:
    """The links, mirror topics and links' copied ACLs, as the records of `__cluster_links` read so far say."""

    def __init__(self):
        self.links: dict[str, LinkDefinition] = {}
        self.mirrors: dict[str, MirrorTopic] = {}
        self.copied_acls: dict[str, frozenset[AclBinding]] = {}  # by link: the bindings it created here

    def apply(self, key: bytes, value: bytes | None) -> None:
        """One record; a record that cannot be read is an error and changes nothing."""
        text = key.decode("utf-8", "replace")
        kind, _, name = text.partition("/")
        if kind == "link":
            if value is None:
                self.links.pop(name, None)
            else:
                self.links[name] = LinkDefinition.from_json(value)
        elif kind == "mirror":
            if value is None:
                self.mirrors.pop(name, None)
            else:
                self.mirrors[name] = MirrorTopic.from_json(value)
        elif kind == "acls":
            if value is None:
                self.copied_acls.pop(name, None)
            else:
                self.copied_acls[name] = CopiedAcls.from_json(value).bindings
        else:
            raise LinkError(f"unknown record key {text!r} in {LINKS_TOPIC}")

    def read_only(self, topic: str) -> str | None:
        """The link a topic is an active mirror of (so producers are refused), or None."""
        mirror = self.mirrors.get(topic)
        return mirror.link if mirror is not None and mirror.state == ACTIVE else None

    def reserved_by(self, topic: str) -> str | None:
        """The link that owns the name `topic` on this cluster, so that auto-creation must not take it: the link
        it is an active mirror of, or else a link whose patterns select it (it will create it as a mirror)."""
        mirror = self.mirrors.get(topic)
        if mirror is not None:
            return mirror.link if mirror.state == ACTIVE else None
        return next((link.name for link in self.links.values() if link.mirrors_topic(topic)), None)

    def active_mirrors(self) -> list[tuple[MirrorTopic, LinkDefinition]]:
        """Mirror topics being fed: active, of a link that exists and is not paused."""
        found = []
        for mirror in self.mirrors.values():
            link = self.links.get(mirror.link)
            if mirror.state == ACTIVE and link is not None and not link.paused:
                found.append((mirror, link))
        return found
