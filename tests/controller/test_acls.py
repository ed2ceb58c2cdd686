"""ACL bindings in the metadata log, as Kafka's AclControlManager keeps them: what CreateAcls and DeleteAcls
commit, the image and its snapshot, and an authorizer kept in step with the committed records (per record,
and after a snapshot replaced the image)."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.controller import acls
from odradek.controller.controller import Controller
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.security.authorizer import Authorizer

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE = AclOperation.READ, AclOperation.WRITE
OK = (ErrorCode.NONE, None)


def acl(name: str, principal: str = "User:alice", operation=READ, permission=ALLOW, *, pattern=LITERAL,
        resource_type=TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def committed(image: MetadataImage, records: list[dict]) -> list[dict]:
    """Records as the log returns them (through JSON), applied to the image."""
    records = json.loads(json.dumps(records, allow_nan=False))
    for record in records:
        image.apply(record)
    return records


def image_with(*bindings: AclBinding) -> MetadataImage:
    image = MetadataImage()
    records, results = acls.create(image, list(bindings))
    assert all(result == OK for result in results), results
    committed(image, records)
    return image


def bindings_of(image: MetadataImage) -> list[AclBinding]:
    return [acls.binding_of(record) for record in image.acls.values()]


# --- CreateAcls


def test_each_new_binding_is_one_record_with_kafkas_fields_and_a_fresh_id():
    image = MetadataImage()
    first, second = acl("orders"), acl("orders-", pattern=PREFIXED, operation=WRITE, permission=DENY)
    records, results = acls.create(image, [first, second])
    assert results == [OK, OK]
    assert [r["type"] for r in records] == ["AccessControlEntryRecord"] * 2
    assert set(records[0]) == {"type", "id", "resource_type", "resource_name", "pattern_type", "principal", "host",
                               "operation", "permission_type"}
    assert records[1] | {"id": None} == {
        "type": "AccessControlEntryRecord", "id": None, "resource_type": 2, "resource_name": "orders-",
        "pattern_type": 4, "principal": "User:alice", "host": "*", "operation": 4, "permission_type": 2}
    assert len({r["id"] for r in records}) == 2
    committed(image, records)
    assert bindings_of(image) == [first, second]


def test_a_binding_that_exists_or_comes_twice_succeeds_without_a_second_record():
    image = image_with(acl("orders"))
    records, results = acls.create(image, [acl("orders"), acl("payments"), acl("payments")])
    assert results == [OK, OK, OK]
    assert [acls.binding_of(r) for r in records] == [acl("payments")]


def test_refused_bindings_get_kafkas_errors_and_the_others_are_still_created():
    image = MetadataImage()
    records, results = acls.create(image, [
        acl("x", principal="alice"), acl("ok"), acl("x", resource_type=ResourceType.UNKNOWN),
        acl("", pattern=PREFIXED), acl("foo", resource_type=CLUSTER), acl("x", operation=AclOperation.UNKNOWN)])
    assert results == [
        (ErrorCode.INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present separating the "
                                    "principal type from the principal name)"),
        OK,
        (ErrorCode.INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
        (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
        (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.INVALID_REQUEST, "Invalid operation UNKNOWN"),
    ]
    assert [acls.binding_of(r) for r in records] == [acl("ok")]


def test_more_new_bindings_than_one_request_may_write_fail_every_one(monkeypatch):
    monkeypatch.setattr(acls, "MAX_RECORDS_PER_USER_OP", 3)
    image = image_with(acl("t0"))
    records, results = acls.create(image, [acl(f"t{i}") for i in range(5)])  # t0 exists: 4 new records
    assert records == []
    assert results == [(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")] * 5
    records, results = acls.create(image, [acl(f"t{i}") for i in range(4)])
    assert len(records) == 3 and results == [OK] * 4


# --- DeleteAcls


def test_each_filter_lists_the_bindings_it_selects_and_each_is_removed_once():
    image = image_with(acl("orders"), acl("orders", principal="User:bob", operation=WRITE),
                       acl("ord", pattern=PREFIXED), acl("*"), acl("payments"))
    records, results = acls.delete(image, [
        AclBindingFilter(TOPIC, "orders", PatternType.MATCH),  # literal orders (both), the prefix ord, and *
        AclBindingFilter(principal="User:bob"),
        AclBindingFilter(GROUP),
    ])
    assert results == [
        (OK, [acl("orders"), acl("orders", principal="User:bob", operation=WRITE), acl("ord", pattern=PREFIXED),
              acl("*")]),
        (OK, [acl("orders", principal="User:bob", operation=WRITE)]),
        (OK, []),
    ]
    assert [r["type"] for r in records] == ["RemoveAccessControlEntryRecord"] * 4
    committed(image, records)
    assert bindings_of(image) == [acl("payments")]


def test_a_filter_with_codes_this_node_does_not_know_is_refused_alone():
    image = image_with(acl("orders"))
    records, results = acls.delete(image, [AclBindingFilter(ResourceType.UNKNOWN),
                                           AclBindingFilter(operation=AclOperation.UNKNOWN),
                                           AclBindingFilter(TOPIC)])
    assert results == [((ErrorCode.INVALID_REQUEST, "Unknown patternFilter."), []),
                       ((ErrorCode.INVALID_REQUEST, "Unknown entryFilter."), []),
                       (OK, [acl("orders")])]
    assert len(records) == 1


def test_more_removals_than_one_request_may_write_fail_every_filter_and_remove_nothing(monkeypatch):
    image = image_with(acl("a"), acl("b"), acl("c"))
    monkeypatch.setattr(acls, "MAX_RECORDS_PER_USER_OP", 2)
    records, results = acls.delete(image, [AclBindingFilter(TOPIC, "a"), AclBindingFilter(TOPIC)])
    assert records == []
    assert results == [((ErrorCode.UNKNOWN_SERVER_ERROR, None), [])] * 2


# --- the image and its snapshot


def test_the_snapshot_rebuilds_the_bindings_with_their_ids_in_creation_order():
    image = image_with(acl("b"), acl("a"), acl("c", pattern=PREFIXED))
    committed(image, acls.delete(image, [AclBindingFilter(TOPIC, "a")])[0])
    copy = MetadataImage()
    copy.load_snapshot(json.loads(json.dumps(image.snapshot_records())))
    assert copy.acls == image.acls
    assert bindings_of(copy) == [acl("b"), acl("c", pattern=PREFIXED)]


# --- the authorizer in step with the log


def test_replayed_records_add_and_remove_the_authorizers_bindings():
    image = MetadataImage()
    authorizer = Authorizer()
    records = committed(image, acls.create(image, [acl("orders"), acl("payments")])[0])
    acls.replay(authorizer, [{"type": "TopicRecord", "name": "t", "topic_id": "x"}, *records])
    assert authorizer.authorize("User:alice", "10.0.0.1", READ, TOPIC, "orders")
    acls.replay(authorizer, committed(image, acls.delete(image, [AclBindingFilter(TOPIC, "orders")])[0]))
    assert not authorizer.authorize("User:alice", "10.0.0.1", READ, TOPIC, "orders")
    assert authorizer.acls(AclBindingFilter()) == [acl("payments")]


def test_a_record_the_authorizer_cannot_take_is_logged_not_raised(caplog):
    authorizer = Authorizer()
    image = MetadataImage()
    records = committed(image, acls.create(image, [acl("orders")])[0])
    acls.replay(authorizer, records)
    acls.replay(authorizer, records + [{"type": "RemoveAccessControlEntryRecord", "id": "AAAAAAAAAAAAAAAAAAAAAA"}])
    assert len(authorizer) == 1
    assert "Cannot apply AccessControlEntryRecord" in caplog.text
    assert "Cannot apply RemoveAccessControlEntryRecord" in caplog.text


def test_loading_a_snapshot_leaves_the_authorizer_with_exactly_the_images_bindings():
    image = image_with(acl("kept"), acl("gone"))
    authorizer = Authorizer()
    acls.replay(authorizer, image.acls.values())
    newer = MetadataImage()
    newer.load_snapshot(image.snapshot_records())
    committed(newer, acls.delete(newer, [AclBindingFilter(TOPIC, "gone")])[0])
    committed(newer, acls.create(newer, [acl("new")])[0])
    acls.load(authorizer, newer)
    assert authorizer.acls(AclBindingFilter()) == [acl("kept"), acl("new")]
    assert {acl_id for acl_id, _ in authorizer.acls_with_ids(AclBindingFilter())} == {
        acls.uuid_from_text(acl_id) for acl_id in newer.acls}


def test_the_authorizer_is_there_when_authorizer_class_name_is_set():
    assert acls.new_authorizer(BrokerConfig({})) is None
    authorizer = acls.new_authorizer(BrokerConfig({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:CN=ops,O=Acme", "allow.everyone.if.no.acl.found": "true"}))
    assert authorizer.super_users == {"User:admin", "User:CN=ops,O=Acme"}
    assert authorizer.allow_everyone_if_no_acl_found
    with pytest.raises(ConfigError, match="super.users: expected a string in format principalType:principalName"):
        acls.new_authorizer(BrokerConfig({"authorizer.class.name": "x", "super.users": "admin"}))


# --- through the controller


class MemoryQuorum:
    """Each proposal committed at once and applied to the image, through JSON as in the real log."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self.is_active = True
        self.entries: list[list[dict]] = []

    async def propose(self, records: list[dict], timeout_s: float) -> int:
        if not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the active controller")
        self.entries.append(committed(self.image, records))
        return len(self.entries) - 1


def test_the_controller_commits_creations_and_deletions_each_as_one_entry():
    async def scenario():
        image = MetadataImage()
        quorum = MemoryQuorum(image)
        controller = Controller(BrokerConfig({}), image, quorum)
        assert await controller.create_acls([acl("a"), acl("b"), acl("")]) == [
            OK, OK, (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")]
        assert await controller.create_acls([acl("a")]) == [OK]  # nothing new: nothing committed
        assert len(quorum.entries) == 1 and len(quorum.entries[0]) == 2
        assert await controller.delete_acls([AclBindingFilter(TOPIC, "a"), AclBindingFilter(TOPIC, "zzz")]) == [
            (OK, [acl("a")]), (OK, [])]
        assert len(quorum.entries) == 2 and bindings_of(image) == [acl("b")]
        quorum.is_active = False
        with pytest.raises(KafkaError) as failure:
            await controller.create_acls([acl("c")])
        assert failure.value.code == ErrorCode.NOT_CONTROLLER

    asyncio.run(scenario())
