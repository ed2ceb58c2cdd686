"""What a cluster link is, and the state every node keeps of the links (sans-I/O).

The links live in the compacted topic `__cluster_links` of the destination cluster, as JSON values under two
kinds of keys: `link/<name>` holds a link's definition (its source, the topics and groups it mirrors, whether
it is paused), `mirror/<topic>` says that a local topic is a mirror of a link, ACTIVE (read-only, fed by the
link) or PROMOTED (an ordinary topic since its failover). A mirror record is written before its topic is
created, so a topic that exists is never mistaken for a mirror it is not, nor a mirror for a plain topic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

LINKS_TOPIC = "__cluster_links"
ACTIVE, PROMOTED = "ACTIVE", "PROMOTED"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
_HOST_PORT = re.compile(r"[^,\s:]+:\d{1,5}(,[^,\s:]+:\d{1,5})*")


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

    def mirrors_topic(self, topic: str) -> bool:
        """Whether the link mirrors a source topic of this name (never an internal topic)."""
        return not topic.startswith("__") and any(re.fullmatch(p, topic) for p in self.topics)

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


def link_key(name: str) -> bytes:
    return f"link/{name}".encode()


def mirror_key(topic: str) -> bytes:
    return f"mirror/{topic}".encode()


class LinkState:
    """The links and mirror topics, as the records of `__cluster_links` read so far say."""

    def __init__(self):
        self.links: dict[str, LinkDefinition] = {}
        self.mirrors: dict[str, MirrorTopic] = {}

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
