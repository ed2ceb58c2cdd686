"""Link definitions and the state built from `__cluster_links` records (sans-I/O)."""

import re

import pytest

from odradek.links.definition import (
    ACTIVE,
    PROMOTED,
    CopiedAcls,
    LinkDefinition,
    LinkError,
    LinkState,
    MirrorTopic,
    acls_key,
    link_key,
    mirror_key,
)
from odradek.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType


def test_patterns_select_whole_names_and_never_internal_topics():
    link = LinkDefinition("dc1", "a:9092,b:9092", ("orders", "pay.*"), groups=("app-.*",))
    assert link.mirrors_topic("orders") and link.mirrors_topic("payments")
    assert not link.mirrors_topic("orders-eu") and not link.mirrors_topic("my-payments")
    assert not LinkDefinition("all", "a:1", (".*",)).mirrors_topic("__consumer_offsets")
    assert link.mirrors_group("app-1") and not link.mirrors_group("other")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: LinkDefinition("a b", "h:1", ("x",)), "link name 'a b'"),
    (lambda: LinkDefinition("l", "host", ("x",)), "expected HOST:PORT"),
    (lambda: LinkDefinition("l", "h:1", ()), "at least one topic pattern"),
    (lambda: LinkDefinition("l", "h:1", ("x(",)), "pattern 'x('"),
    (lambda: LinkDefinition("l", "h:1", ("x",), source_config={"plugin.library.paths": "/tmp/x.so"}),
     "source config: plugin.library.paths not taken"),
    (lambda: LinkDefinition.from_json(b"{}"), "unreadable link definition"),
    (lambda: MirrorTopic.from_json(b'{"topic": "t", "link": "l", "state": "GONE"}'), "unknown state 'GONE'"),
])
def test_bad_definitions_are_one_line_errors(make, message):
    with pytest.raises(LinkError, match=re.escape(message)) as info:
        make()
    assert "\n" not in str(info.value)


def test_records_build_the_state_and_tombstones_remove():
    link = LinkDefinition("dc1", "h:1", ("t.*",), source_config={"security.protocol": "ssl"}, sync_configs=True)
    assert LinkDefinition.from_json(link.to_json()) == link
    state = LinkState()
    state.apply(link_key("dc1"), link.to_json())
    state.apply(mirror_key("t1"), MirrorTopic("t1", "dc1").to_json())
    state.apply(mirror_key("t2"), MirrorTopic("t2", "dc1", PROMOTED).to_json())
    state.apply(mirror_key("t3"), MirrorTopic("t3", "gone").to_json())
    assert state.read_only("t1") == "dc1" and state.read_only("t2") is None and state.read_only("x") is None
    # a mirror of a link that no longer exists stays read-only, but nothing feeds it
    assert state.read_only("t3") == "gone"
    assert [(m.topic, link.name) for m, link in state.active_mirrors()] == [("t1", "dc1")]
    # auto-creation leaves alone what a link owns or will create: active mirrors and names its patterns select
    assert [state.reserved_by(t) for t in ("t1", "t2", "t3", "t9", "x")] == ["dc1", None, "gone", "dc1", None]
    state.apply(link_key("dc1"), LinkDefinition("dc1", "h:1", ("t.*",), paused=True).to_json())
    assert state.active_mirrors() == [] and state.read_only("t1") == "dc1"  # paused: still read-only
    state.apply(mirror_key("t1"), None)
    state.apply(link_key("dc1"), None)
    assert state.read_only("t1") is None and state.links == {}
    with pytest.raises(LinkError, match="unknown record key"):
        state.apply(b"other/x", b"{}")
    assert ACTIVE == MirrorTopic("t", "l").state


def test_a_links_copied_acls_record_is_kept_until_its_tombstone():
    read = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                      AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.GROUP, "app-1", PatternType.LITERAL, "User:bob", "10.0.0.1",
                      AclOperation.ALL, AclPermissionType.DENY)
    copied = CopiedAcls("dc1", frozenset({read, deny}))
    assert copied.to_json() == CopiedAcls("dc1", frozenset({deny, read})).to_json()  # one text per set
    assert CopiedAcls.from_json(copied.to_json()) == copied
    state = LinkState()
    state.apply(acls_key("dc1"), copied.to_json())
    assert state.copied_acls == {"dc1": {read, deny}}
    with pytest.raises(LinkError, match="unreadable copied ACLs record"):
        state.apply(acls_key("dc1"), b'{"link": "dc1", "bindings": [{"resource_type": "TOPIC"}]}')
    assert state.copied_acls == {"dc1": {read, deny}}  # a record that cannot be read changes nothing
    state.apply(acls_key("dc1"), CopiedAcls("dc1").to_json())
    assert state.copied_acls == {"dc1": frozenset()}
    state.apply(acls_key("dc1"), None)
    assert state.copied_acls == {}
