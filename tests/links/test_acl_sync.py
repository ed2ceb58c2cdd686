"""A link's ACL sync (sans-I/O): it copies the source's LITERAL bindings on its mirror topics and groups, and
removes only what it created; a source that refuses DescribeAcls is logged once per link; and the topic sync
keeps one source client per link."""

import logging
import threading
from concurrent.futures import Future

from confluent_kafka import KafkaError, KafkaException

from odradek.links import sync
from odradek.links.acl_sync import AclChanges, in_scope, plan_acl_sync
from odradek.links.definition import LinkDefinition, LinkState
from odradek.links.sync import SourceClients, TopicSync
from odradek.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

LINK = LinkDefinition("dc1", "source:9092", ("orders", "pay.*"), groups=("app-.*",), sync_acls=True)
MIRRORS = {"orders", "payments"}
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(name: str, principal: str = "User:alice", operation=AclOperation.READ, *, resource_type=TOPIC,
        pattern=LITERAL, permission=AclPermissionType.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


ORDERS_ALICE = acl("orders")
PAYMENTS_BOB_DENY = acl("payments", "User:bob", AclOperation.WRITE, permission=AclPermissionType.DENY,
                        host="10.0.0.1")
APP_GROUP = acl("app-1", resource_type=GROUP)


def test_only_literal_bindings_on_the_links_mirror_topics_and_groups_are_copied():
    copied = [ORDERS_ALICE, PAYMENTS_BOB_DENY, APP_GROUP]
    not_copied = [
        acl("audit"),                                       # a topic the link does not mirror
        acl("pay", pattern=PREFIXED),                       # would also cover the destination's own pay* topics
        acl("*"),                                           # every topic of the destination
        acl("*", resource_type=GROUP),                      # a group named like the wildcard: never
        acl("app-", resource_type=GROUP, pattern=PREFIXED),
        acl("other-group", resource_type=GROUP),            # a group the link's patterns do not select
        acl("kafka-cluster", operation=AclOperation.DESCRIBE, resource_type=ResourceType.CLUSTER),
        acl("orders", resource_type=ResourceType.TRANSACTIONAL_ID),
        acl("pay-later"),                                   # selected by the patterns, but no mirror of the link
    ]
    assert [b for b in copied + not_copied if in_scope(LINK, MIRRORS, b)] == copied
    assert plan_acl_sync(LINK, MIRRORS, copied + not_copied, [], []) == AclChanges(
        create=frozenset(copied), delete=frozenset(), copied=frozenset(copied), released=frozenset())


def test_a_link_without_group_patterns_copies_no_group_binding():
    link = LinkDefinition("dc1", "source:9092", ("orders",), sync_acls=True)
    assert plan_acl_sync(link, {"orders"}, [ORDERS_ALICE, APP_GROUP], [], []).create == {ORDERS_ALICE}


def test_in_step_nothing_changes_and_nothing_is_recorded_again():
    changes = plan_acl_sync(LINK, MIRRORS, [ORDERS_ALICE, APP_GROUP], [ORDERS_ALICE, APP_GROUP],
                            [ORDERS_ALICE, APP_GROUP])
    assert (changes.create, changes.delete) == (set(), set())
    assert changes.intent == changes.copied == {ORDERS_ALICE, APP_GROUP}


def test_a_binding_removed_on_the_source_is_removed_here_only_if_the_link_created_it():
    by_hand = acl("orders", "User:carol")  # on both clusters, but the destination's administrators made it here
    changes = plan_acl_sync(LINK, MIRRORS, source=[APP_GROUP],
                            destination=[ORDERS_ALICE, APP_GROUP, by_hand], recorded=[ORDERS_ALICE, APP_GROUP])
    assert changes.delete == {ORDERS_ALICE} and changes.create == set()
    assert changes.copied == {APP_GROUP}
    assert changes.intent == {ORDERS_ALICE, APP_GROUP}  # still recorded until it is deleted


def test_a_binding_the_destination_has_already_is_neither_created_nor_recorded():
    changes = plan_acl_sync(LINK, MIRRORS, source=[ORDERS_ALICE, APP_GROUP], destination=[ORDERS_ALICE],
                            recorded=[])
    assert changes.create == {APP_GROUP} and changes.copied == {APP_GROUP}
    # so when the source drops it, it stays
    later = plan_acl_sync(LINK, MIRRORS, source=[APP_GROUP], destination=[ORDERS_ALICE, APP_GROUP],
                          recorded=changes.copied)
    assert later.delete == set() and later.copied == {APP_GROUP}


def test_a_copied_binding_deleted_here_by_hand_comes_back_while_the_source_has_it():
    changes = plan_acl_sync(LINK, MIRRORS, source=[ORDERS_ALICE], destination=[], recorded=[ORDERS_ALICE])
    assert changes.create == {ORDERS_ALICE} and changes.copied == {ORDERS_ALICE}


def test_a_recorded_binding_gone_from_both_clusters_is_forgotten():
    changes = plan_acl_sync(LINK, MIRRORS, source=[], destination=[], recorded=[ORDERS_ALICE])
    assert changes.delete == set() and changes.copied == set() and changes.intent == set()


def test_bindings_of_a_promoted_mirror_stay_here_and_are_forgotten():
    # payments was promoted: no longer one of the link's mirrors, its bindings are ordinary ones from now on
    changes = plan_acl_sync(LINK, {"orders"}, source=[ORDERS_ALICE], destination=[ORDERS_ALICE, PAYMENTS_BOB_DENY],
                            recorded=[ORDERS_ALICE, PAYMENTS_BOB_DENY])
    assert changes.delete == set() and changes.create == set()
    assert changes.copied == {ORDERS_ALICE} and changes.released == {PAYMENTS_BOB_DENY}


def test_only_what_the_link_records_is_at_stake_another_links_copies_are_not():
    other_links_copy = acl("payments", "User:dave")  # on the destination, recorded by no one here
    changes = plan_acl_sync(LINK, MIRRORS, source=[], destination=[other_links_copy], recorded=[])
    assert changes == AclChanges(frozenset(), frozenset(), frozenset(), frozenset())


def test_the_sync_keeps_one_source_client_per_link_until_its_source_settings_change_or_it_goes():
    made = []

    def factory(properties: dict) -> object:
        made.append(properties)
        return object()

    clients = SourceClients(factory)
    first = clients.get(LINK)
    assert clients.get(LINK) is first
    assert clients.get(LinkDefinition("dc1", "source:9092", ("other",), paused=False)) is first  # patterns: same
    moved = clients.get(LinkDefinition("dc1", "source:9093", ("orders",)))
    assert moved is not first
    secured = LinkDefinition("dc1", "source:9093", ("orders",), source_config={"security.protocol": "ssl"})
    assert clients.get(secured) is not moved and clients.get(secured) is clients.get(secured)
    second = clients.get(LinkDefinition("dc2", "elsewhere:9092", ("x",)))
    clients.keep_only({"dc2"})
    assert clients.get(LinkDefinition("dc2", "elsewhere:9092", ("x",))) is second
    assert len(made) == 4
    clients.get(secured)  # dropped with its link: made anew
    assert made == [{"bootstrap.servers": "source:9092"}, {"bootstrap.servers": "source:9093"},
                    {"bootstrap.servers": "source:9093", "security.protocol": "ssl"},
                    {"bootstrap.servers": "elsewhere:9092"},
                    {"bootstrap.servers": "source:9093", "security.protocol": "ssl"}]


class RefusingAdmin:
    """An admin client of a cluster that answers DescribeAcls with an error."""

    def __init__(self, code: int = KafkaError.SECURITY_DISABLED):
        self.code = code
        self.asked = 0

    def describe_acls(self, acl_filter, request_timeout: float) -> Future:
        self.asked += 1
        future = Future()
        future.set_exception(KafkaException(KafkaError(self.code, "No Authorizer is configured on the broker")))
        return future


class Reader:
    def __init__(self):
        self.lock = threading.Lock()
        self.state = LinkState()


def test_a_source_that_refuses_describe_acls_is_logged_once_per_link(monkeypatch, caplog):
    monkeypatch.setattr(sync, "AdminClient", lambda properties: RefusingAdmin())  # the destination's client
    topic_sync = TopicSync(Reader(), {})
    source, other = RefusingAdmin(), RefusingAdmin(KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    other_link = LinkDefinition("dc2", "elsewhere:9092", ("x",), sync_acls=True)
    with caplog.at_level(logging.INFO, logger="odradek.links.sync"):
        for _ in range(3):
            topic_sync._sync_acls(LINK, source)
            topic_sync._sync_acls(other_link, other)
    assert source.asked == other.asked == 2 * 3  # the topic and the group bindings, every pass
    assert topic_sync.local.asked == 0  # the destination is not asked while the source refuses
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "Cluster link dc1: the source refuses DescribeAcls (SECURITY_DISABLED: No Authorizer is configured on the "
        "broker); ACLs are not synced",
        "Cluster link dc2: the source refuses DescribeAcls (CLUSTER_AUTHORIZATION_FAILED: No Authorizer is "
        "configured on the broker); ACLs are not synced"]
