"""The ACL authorizer against Kafka's StandardAuthorizer behaviour: matching, DENY precedence, implied
operations, super users, the allow-everyone default, KIP-430 operation bits, KIP-679 by-resource-type checks,
DescribeAcls/DeleteAcls filters and CreateAcls validation; and authorize() against a brute-force reference."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_binding,
    validate_filter,
)
from odradek.security.authorizer import Authorizer, parse_super_users

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
    AclOperation.ALTER, AclOperation.DESCRIBE)
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
HOST = "127.0.0.1"


def acl(name: str, principal: str = "User:*", operation: AclOperation = READ, permission=ALLOW, *,
        pattern: PatternType = LITERAL, resource_type: ResourceType = TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def authorizer_with(*bindings: AclBinding, super_users=("User:superman",), allow_everyone=False) -> Authorizer:
    authorizer = Authorizer(super_users, allow_everyone)
    for binding in bindings:
        authorizer.add_acl(acl_id(binding), binding)
    return authorizer


def acl_id(binding: AclBinding) -> bytes:
    return (hash(binding) % 2**128).to_bytes(16, "big")


def allowed(authorizer: Authorizer, user: str, operation: AclOperation, name: str, resource_type=TOPIC,
            host: str = HOST) -> bool:
    return authorizer.authorize(f"User:{user}", host, operation, resource_type, name)


# --- wire codes


def test_enum_codes_are_kafkas():
    assert [(t.name, t.value) for t in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4), ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(t.name, t.value) for t in PatternType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [(t.name, t.value) for t in AclPermissionType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]
    assert [(o.name, o.value) for o in AclOperation] == [
        ("UNKNOWN", 0), ("ANY", 1), ("ALL", 2), ("READ", 3), ("WRITE", 4), ("CREATE", 5), ("DELETE", 6),
        ("ALTER", 7), ("DESCRIBE", 8), ("CLUSTER_ACTION", 9), ("DESCRIBE_CONFIGS", 10), ("ALTER_CONFIGS", 11),
        ("IDEMPOTENT_WRITE", 12), ("CREATE_TOKENS", 13), ("DESCRIBE_TOKENS", 14)]


def test_codes_this_broker_does_not_know_read_as_unknown():
    assert ResourceType(99) is ResourceType.UNKNOWN
    assert PatternType(5) is PatternType.UNKNOWN
    assert AclOperation(15) is AclOperation.UNKNOWN
    assert AclPermissionType(4) is AclPermissionType.UNKNOWN


# --- filters (Kafka's ResourcePatternFilterTest and AccessControlEntryFilter rules)


@pytest.mark.parametrize(("filter_type", "filter_name", "filter_pattern", "binding_type", "binding_name",
                          "binding_pattern", "matches"), [
    (TOPIC, "Name", LITERAL, GROUP, "Name", LITERAL, False),
    (TOPIC, "Different", PREFIXED, TOPIC, "Name", PREFIXED, False),
    (TOPIC, "NAME", LITERAL, TOPIC, "Name", LITERAL, False),
    (TOPIC, "Name", LITERAL, TOPIC, "Name", PREFIXED, False),
    (ResourceType.ANY, "Name", PREFIXED, TOPIC, "Name", PREFIXED, True),
    (TOPIC, None, PREFIXED, TOPIC, "Name", PREFIXED, True),
    (TOPIC, None, PatternType.ANY, TOPIC, "Name", PREFIXED, True),
    (TOPIC, None, MATCH, TOPIC, "Name", PREFIXED, True),
    (TOPIC, "Name", LITERAL, TOPIC, "Name", LITERAL, True),
    (TOPIC, "Name", PatternType.ANY, TOPIC, "Name", LITERAL, True),
    (TOPIC, "Name", MATCH, TOPIC, "Name", LITERAL, True),
    (TOPIC, "Name-something", MATCH, TOPIC, "Name", LITERAL, False),
    (TOPIC, "*", LITERAL, TOPIC, "*", LITERAL, True),
    (TOPIC, "Name", LITERAL, TOPIC, "*", LITERAL, False),
    (TOPIC, "*", LITERAL, TOPIC, "Name", LITERAL, False),
    (TOPIC, "Name", PatternType.ANY, TOPIC, "*", LITERAL, False),
    (TOPIC, "Name", MATCH, TOPIC, "*", LITERAL, True),
    (TOPIC, "Name", PREFIXED, TOPIC, "Name", PREFIXED, True),
    (TOPIC, "Name", PREFIXED, TOPIC, "Name-something", PREFIXED, False),
    (TOPIC, "Name-something", PREFIXED, TOPIC, "Name", PREFIXED, False),
    (TOPIC, "Name-something", PatternType.ANY, TOPIC, "Name", PREFIXED, False),
    (TOPIC, "Name-something", MATCH, TOPIC, "Name", PREFIXED, True),
    (TOPIC, "Nam", MATCH, TOPIC, "Name", PREFIXED, False),
    (ResourceType.UNKNOWN, None, PatternType.ANY, TOPIC, "Name", LITERAL, False),
])
def test_resource_pattern_filter_matching(filter_type, filter_name, filter_pattern, binding_type, binding_name,
                                          binding_pattern, matches):
    acl_filter = AclBindingFilter(filter_type, filter_name, filter_pattern)
    assert acl_filter.matches(acl(binding_name, pattern=binding_pattern, resource_type=binding_type)) is matches


def test_entry_filter_fields_match_exactly_unless_any():
    binding = acl("t", "User:alice", WRITE, DENY, host="10.0.0.1")
    assert AclBindingFilter().matches(binding)
    assert AclBindingFilter(principal="User:alice", host="10.0.0.1", operation=WRITE,
                            permission_type=DENY).matches(binding)
    assert not AclBindingFilter(principal="User:*").matches(binding)  # no wildcard expansion in filters
    assert not AclBindingFilter(host="*").matches(binding)
    assert not AclBindingFilter(operation=ALL).matches(binding)
    assert not AclBindingFilter(permission_type=ALLOW).matches(binding)


def test_describe_and_delete_see_the_bindings_a_filter_selects():
    foo_read = acl("foo_", "User:bob", READ, pattern=PREFIXED)
    foo_write = acl("foo_", "User:bob", WRITE, pattern=PREFIXED)
    bar_describe_configs = acl("bar", operation=DESCRIBE_CONFIGS, permission=DENY, resource_type=GROUP)
    bar_alter_configs = acl("bar", operation=ALTER_CONFIGS, permission=DENY, resource_type=GROUP)
    authorizer = authorizer_with(foo_read, foo_write, bar_describe_configs, bar_alter_configs)
    assert authorizer.acls(AclBindingFilter()) == [foo_read, foo_write, bar_describe_configs, bar_alter_configs]
    assert authorizer.remove_acl(acl_id(foo_write)) == foo_write
    assert authorizer.acls(AclBindingFilter()) == [foo_read, bar_describe_configs, bar_alter_configs]
    assert authorizer.acls(AclBindingFilter(TOPIC, None, PatternType.ANY)) == [foo_read]
    assert authorizer.acls(AclBindingFilter(TOPIC, "foo_bar", MATCH)) == [foo_read]
    assert authorizer.acls_with_ids(AclBindingFilter(GROUP, operation=ALTER_CONFIGS)) == [
        (acl_id(bar_alter_configs), bar_alter_configs)]
    assert len(authorizer) == 3
    assert foo_read in authorizer and foo_write not in authorizer


def test_an_acl_is_added_once_and_removed_once():
    binding = acl("t")
    authorizer = authorizer_with(binding)
    with pytest.raises(ValueError):
        authorizer.add_acl(acl_id(binding), acl("other"))
    with pytest.raises(ValueError):
        authorizer.add_acl(b"\x00" * 16, binding)
    authorizer.remove_acl(acl_id(binding))
    with pytest.raises(KeyError):
        authorizer.remove_acl(acl_id(binding))
    assert authorizer.acls(AclBindingFilter()) == []


# --- CreateAcls and DeleteAcls validation


def test_a_well_formed_binding_is_valid():
    assert validate_binding(acl("*", "User:*", ALTER)) is None
    assert validate_binding(acl("payments-", "User:alice", WRITE, DENY, pattern=PREFIXED, host="10.0.0.1")) is None
    assert validate_binding(acl("kafka-cluster", "User:admin", ALTER, resource_type=CLUSTER)) is None


@pytest.mark.parametrize("binding, message", [
    (acl("my-cluster", resource_type=CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl("", resource_type=CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(""), "Invalid empty resource name"),
    (acl("", pattern=PREFIXED), "Invalid empty resource name"),
    (acl("t", resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl("t", resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
    (acl("t", pattern=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
    (acl("t", pattern=PatternType.ANY), "Invalid patternType ANY"),
    (acl("t", pattern=MATCH), "Invalid patternType MATCH"),
    (acl("t", operation=AclOperation.UNKNOWN), "Invalid operation UNKNOWN"),
    (acl("t", operation=AclOperation.ANY), "Invalid operation ANY"),
    (acl("t", permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (acl("t", permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl("t", "alice"), "Could not parse principal from `alice` (no colon is present separating the principal "
                        "type from the principal name)"),
])
def test_create_acls_refuses_what_kafka_refuses(binding, message):
    assert validate_binding(binding) == (ErrorCode.INVALID_REQUEST, message)


def test_delete_acls_refuses_filters_with_unknown_fields():
    assert validate_filter(AclBindingFilter(ResourceType.ANY, "*", LITERAL, "User:*", "*")) is None
    assert validate_filter(AclBindingFilter(pattern_type=PatternType.UNKNOWN)) == (
        ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert validate_filter(AclBindingFilter(resource_type=ResourceType.UNKNOWN)) == (
        ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert validate_filter(AclBindingFilter(pattern_type=MATCH, permission_type=AclPermissionType.UNKNOWN)) == (
        ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")
    assert validate_filter(AclBindingFilter(operation=AclOperation.UNKNOWN)) == (
        ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")


def test_super_users_setting_is_semicolon_separated_principals():
    assert parse_super_users("") == set()
    assert parse_super_users(" ") == set()
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users("User:CN=bob,O=example") == {"User:CN=bob,O=example"}
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got bob"):
        parse_super_users("bob;:alice")


# --- authorize


@pytest.mark.parametrize("operation", [DESCRIBE, READ, WRITE, DELETE, ALTER])
def test_allowing_read_write_delete_or_alter_allows_describe(operation):
    authorizer = authorizer_with(acl("foo_", "User:bob", operation, pattern=PREFIXED))
    assert allowed(authorizer, "bob", DESCRIBE, "foo_bar")


@pytest.mark.parametrize("operation", [CREATE, DESCRIBE_CONFIGS, ALTER_CONFIGS, AclOperation.CLUSTER_ACTION])
def test_other_allows_do_not_allow_describe(operation):
    authorizer = authorizer_with(acl("foo_", "User:bob", operation, pattern=PREFIXED))
    assert not allowed(authorizer, "bob", DESCRIBE, "foo_bar")


@pytest.mark.parametrize("operation", [READ, WRITE, DELETE, ALTER])
def test_denying_read_write_delete_or_alter_does_not_deny_describe(operation):
    authorizer = authorizer_with(acl("foo_", "User:bob", operation, DENY, pattern=PREFIXED),
                                 acl("foo_", "User:bob", DESCRIBE, pattern=PREFIXED))
    assert allowed(authorizer, "bob", DESCRIBE, "foo_bar")
    assert not allowed(authorizer, "bob", operation, "foo_bar")


def test_denying_describe_denies_it_whatever_is_allowed():
    authorizer = authorizer_with(acl("foo_", "User:bob", DESCRIBE, DENY, pattern=PREFIXED),
                                 acl("foo_", "User:bob", READ, pattern=PREFIXED))
    assert not allowed(authorizer, "bob", DESCRIBE, "foo_bar")
    assert allowed(authorizer, "bob", READ, "foo_bar")


def test_allowing_alter_configs_allows_describe_configs_but_denying_it_does_not_deny_them():
    assert allowed(authorizer_with(acl("foo_", "User:bob", ALTER_CONFIGS, pattern=PREFIXED)),
                   "bob", DESCRIBE_CONFIGS, "foo_bar")
    assert not allowed(authorizer_with(acl("foo_", "User:bob", DESCRIBE, pattern=PREFIXED)),
                       "bob", DESCRIBE_CONFIGS, "foo_bar")
    authorizer = authorizer_with(acl("foo_", "User:bob", ALTER_CONFIGS, DENY, pattern=PREFIXED),
                                 acl("foo_", "User:bob", DESCRIBE_CONFIGS, pattern=PREFIXED))
    assert allowed(authorizer, "bob", DESCRIBE_CONFIGS, "foo_bar")
    assert not allowed(authorizer, "bob", ALTER_CONFIGS, "foo_bar")


def test_a_binding_applies_to_its_principal_or_to_everyone_with_user_star():
    authorizer = authorizer_with(acl("foo_", "User:bob", READ, pattern=PREFIXED),
                                 acl("bar", "User:*", READ, DENY, resource_type=GROUP),
                                 acl("bar", "User:*", DESCRIBE, resource_type=GROUP))
    assert allowed(authorizer, "bob", READ, "foo_bar")
    assert not allowed(authorizer, "alice", READ, "foo_bar")
    assert not allowed(authorizer, "alice", READ, "bar", GROUP)
    assert allowed(authorizer, "alice", DESCRIBE, "bar", GROUP)


def test_only_user_star_is_the_wildcard_principal():
    authorizer = authorizer_with(acl("t", "Group:*"), acl("u", "User:*"))
    assert not authorizer.authorize("Group:admins", HOST, READ, TOPIC, "t")
    assert authorizer.authorize("Group:admins", HOST, READ, TOPIC, "u")


def test_simple_authorizations():
    authorizer = authorizer_with(
        acl("foo_", "User:bob", READ, pattern=PREFIXED), acl("foo_", "User:bob", WRITE, pattern=PREFIXED),
        acl("bar", operation=DESCRIBE_CONFIGS, resource_type=GROUP),
        acl("bar", operation=ALTER_CONFIGS, resource_type=GROUP))
    assert allowed(authorizer, "bob", READ, "foo_")
    assert allowed(authorizer, "fred", ALTER_CONFIGS, "bar", GROUP)


def test_deny_takes_precedence_even_over_a_more_specific_allow():
    authorizer = authorizer_with(
        acl("foo", "User:alice", ALL, DENY), acl("foo", "User:alice", READ, pattern=PREFIXED),
        acl("foo", "User:*", ALL, DENY), acl("foo", "User:*", DESCRIBE, pattern=PREFIXED))
    assert [allowed(authorizer, "alice", op, name) for op, name in
            [(WRITE, "foo"), (READ, "foo"), (DESCRIBE, "foo"), (READ, "foobar")]] == [False, False, False, True]
    assert [allowed(authorizer, "bob", op, name) for op, name in
            [(DESCRIBE, "foo"), (READ, "foo"), (WRITE, "foo"), (DESCRIBE, "foobaz"), (READ, "foobaz")]] == [
        False, False, False, True, False]


def test_operation_all_allows_every_operation():
    authorizer = authorizer_with(acl("foo", "User:*", ALL), acl("bar", "User:alice", ALL, pattern=PREFIXED),
                                 acl("baz", "User:bob", ALL))
    assert [allowed(authorizer, "alice", op, name) for op, name in
            [(WRITE, "foo"), (DESCRIBE_CONFIGS, "bar"), (DESCRIBE, "baz")]] == [True, True, False]
    assert [allowed(authorizer, "bob", op, name) for op, name in
            [(WRITE, "foo"), (READ, "bar"), (DESCRIBE, "baz")]] == [True, False, True]
    assert [allowed(authorizer, "malory", op, name) for op, name in
            [(DESCRIBE, "foo"), (WRITE, "bar"), (READ, "baz")]] == [True, False, False]


def test_a_binding_applies_from_its_host_or_from_every_host_with_star():
    local, host1, host2 = "10.0.0.9", "192.168.1.1", "192.168.1.2"
    authorizer = authorizer_with(
        acl("foo", "User:alice", READ, DENY, host=host1), acl("foo", "User:alice", READ, host="*"),
        acl("bar", "User:bob", READ, host=host2), acl("bar", "User:*", DESCRIBE, host=local))
    actions = [(READ, "foo"), (READ, "bar"), (DESCRIBE, "bar")]

    def decisions(user, host):
        return [allowed(authorizer, user, op, name, host=host) for op, name in actions]

    assert decisions("alice", local) == [True, False, True]
    assert decisions("alice", host1) == [False, False, False]
    assert decisions("alice", host2) == [True, False, False]
    assert decisions("bob", local) == [False, False, True]
    assert decisions("bob", host1) == [False, False, False]
    assert decisions("bob", host2) == [False, True, True]


def many_acls() -> list[AclBinding]:
    return [
        acl("green2", "User:*", READ), acl("green", "User:bob", READ, pattern=PREFIXED),
        acl("betamax4", "User:bob", READ), acl("betamax", "User:bob", READ),
        acl("beta", "User:*", READ, pattern=PREFIXED), acl("alpha", "User:*", READ, pattern=PREFIXED),
        acl("alp", "User:bob", READ, DENY, pattern=PREFIXED),
        acl("*", "User:bob", WRITE, resource_type=GROUP), acl("wheel", "User:*", WRITE, DENY, resource_type=GROUP)]


def test_decisions_among_many_literal_prefixed_and_wildcard_acls():
    authorizer = authorizer_with(*many_acls())
    assert allowed(authorizer, "bob", READ, "green1")
    assert not allowed(authorizer, "bob", WRITE, "wheel", GROUP)
    assert not allowed(authorizer, "bob", READ, "alpha")
    assert allowed(authorizer, "bob", WRITE, "arbitrary", GROUP)
    assert not allowed(authorizer, "bob", READ, "ala")
    assert allowed(authorizer, "alice", READ, "alphabet")
    assert allowed(authorizer, "alice", READ, "betamax4")
    assert not allowed(authorizer, "alice", READ, "betmax")


def test_prefixed_acls_match_names_that_start_with_them():
    authorizer = authorizer_with(acl("fooa", "User:alice", ALL, pattern=PREFIXED), acl("foobar", "User:bob", ALL),
                                 acl("f", "User:bob", ALL, pattern=PREFIXED))
    assert [allowed(authorizer, "bob", op, name) for op, name in
            [(WRITE, "foobarr"), (READ, "goobar"), (READ, "fooa")]] == [True, False, True]
    assert [allowed(authorizer, "alice", op, name) for op, name in
            [(DESCRIBE, "fooa"), (WRITE, "bar"), (READ, "baz")]] == [True, False, False]


def test_literal_wildcard_matches_every_name_of_its_type_only():
    authorizer = authorizer_with(acl("*", "User:alice", READ))
    assert allowed(authorizer, "alice", READ, "anything")
    assert allowed(authorizer, "alice", READ, "*")
    assert not allowed(authorizer, "alice", READ, "anything", GROUP)
    assert not allowed(authorizer, "bob", READ, "anything")


def test_prefixed_star_is_a_prefix_not_a_wildcard():
    authorizer = authorizer_with(acl("*", "User:alice", READ, pattern=PREFIXED))
    assert allowed(authorizer, "alice", READ, "*weird")
    assert not allowed(authorizer, "alice", READ, "plain")


def test_super_users_are_allowed_everything_whatever_the_acls():
    authorizer = authorizer_with(acl("*", "User:*", ALL, DENY), super_users={"User:superman"})
    assert allowed(authorizer, "superman", WRITE, "t")
    assert allowed(authorizer, "superman", AclOperation.CLUSTER_ACTION, "kafka-cluster", CLUSTER)
    assert not allowed(authorizer, "bob", WRITE, "t")
    assert allowed(Authorizer({"User:superman"}), "superman", READ, "t")


def test_with_allow_everyone_only_resources_without_any_acl_are_open():
    authorizer = authorizer_with(acl("topic1", "User:Alice", READ), allow_everyone=True)
    assert not allowed(authorizer, "Bob", READ, "topic1")  # an ACL for someone else still closes topic1
    assert allowed(authorizer, "Bob", READ, "topic2")
    assert allowed(authorizer, "Bob", WRITE, "g", GROUP)


def test_without_allow_everyone_nothing_is_allowed_without_an_acl():
    authorizer = authorizer_with(acl("topic1", "User:Alice", READ), allow_everyone=False)
    assert not allowed(authorizer, "Bob", READ, "topic1")
    assert not allowed(authorizer, "Bob", READ, "topic2")
    assert not allowed(Authorizer(), "Bob", READ, "topic2")


def test_allow_everyone_counts_prefixed_and_wildcard_acls_as_acls_on_the_resource():
    authorizer = authorizer_with(acl("pay", "User:alice", WRITE, pattern=PREFIXED),
                                 acl("*", "User:alice", WRITE, resource_type=GROUP), allow_everyone=True)
    assert not allowed(authorizer, "bob", READ, "payments")
    assert allowed(authorizer, "bob", READ, "orders")
    assert not allowed(authorizer, "bob", READ, "g", GROUP)


def test_removing_the_last_acl_of_a_resource_reopens_it_to_allow_everyone():
    binding = acl("pay", "User:alice", pattern=PREFIXED)
    authorizer = authorizer_with(binding, allow_everyone=True)
    assert not allowed(authorizer, "bob", READ, "payments")
    authorizer.remove_acl(acl_id(binding))
    assert allowed(authorizer, "bob", READ, "payments")


# --- authorized operations (KIP-430)


def bits(*operations: AclOperation) -> int:
    return sum(1 << operation for operation in operations)


def test_authorized_operations_reports_the_allowed_operations_of_the_resource_type():
    authorizer = authorizer_with(acl("t", "User:alice", READ), acl("t", "User:alice", ALTER_CONFIGS),
                                 acl("g", "User:alice", ALL, resource_type=GROUP),
                                 acl("g", "User:alice", DELETE, DENY, resource_type=GROUP))
    assert authorizer.authorized_operations("User:alice", HOST, TOPIC, "t") == bits(
        READ, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS)
    assert authorizer.authorized_operations("User:alice", HOST, GROUP, "g") == bits(
        READ, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    assert authorizer.authorized_operations("User:bob", HOST, TOPIC, "t") == 0


def test_everything_a_resource_type_supports_is_authorized_for_super_users():
    authorizer = authorizer_with(super_users={"User:admin"})
    assert authorizer.authorized_operations("User:admin", HOST, TOPIC, "t") == 3576
    assert authorizer.authorized_operations("User:admin", HOST, CLUSTER, "kafka-cluster") == 8096
    assert authorizer.authorized_operations("User:admin", HOST, GROUP, "g") == bits(
        READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    assert authorizer.authorized_operations("User:admin", HOST, ResourceType.TRANSACTIONAL_ID, "tx") == bits(
        DESCRIBE, WRITE)
    assert authorizer.authorized_operations("User:admin", HOST, ResourceType.DELEGATION_TOKEN, "x") == bits(
        DESCRIBE)
    assert authorizer.authorized_operations("User:admin", HOST, ResourceType.USER, "u") == bits(
        AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS)


def test_authorized_operations_under_allow_everyone_without_acls_is_everything():
    authorizer = Authorizer(allow_everyone_if_no_acl_found=True)
    assert authorizer.authorized_operations("User:x", HOST, TOPIC, "t") == 3576


# --- authorize by resource type (KIP-679, Kafka's BaseAuthorizerTest)

USER1, USER2 = "User:user1", "User:user2"
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"


def by_type(authorizer: Authorizer, principal: str, host: str, operation: AclOperation,
            resource_type: ResourceType) -> bool:
    return authorizer.authorize_by_resource_type(principal, host, operation, resource_type)


def add(authorizer: Authorizer, *bindings: AclBinding) -> None:
    for binding in bindings:
        if binding not in authorizer:
            authorizer.add_acl(acl_id(binding), binding)


def remove(authorizer: Authorizer, *bindings: AclBinding) -> None:
    for binding in bindings:
        authorizer.remove_acl(acl_id(binding))


def test_by_resource_type_follows_acls_as_they_come_and_go():
    authorizer = authorizer_with()
    allow_read = acl("sb1", USER1, READ, ALLOW, host=HOST1)
    deny_read = acl("sb1", USER1, READ, DENY, host=HOST1)
    for _ in range(3):
        assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
        add(authorizer, allow_read)
        assert by_type(authorizer, USER1, HOST1, READ, TOPIC)
        for _ in range(3):
            add(authorizer, deny_read)
            assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
            remove(authorizer, deny_read)
            add(authorizer, allow_read)
            assert by_type(authorizer, USER1, HOST1, READ, TOPIC)
        remove(authorizer, allow_read)
        assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)


def test_by_resource_type_unrelated_deny_does_not_dominate_allow():
    authorizer = authorizer_with(
        acl("sb1", USER1, READ, DENY, host=HOST1), acl("sb1", USER2, READ, DENY, host=HOST1),
        acl("sb1", USER1, WRITE, DENY, host=HOST2), acl("sb1", USER2, READ, DENY, host=HOST2),
        acl("sb1", USER1, READ, ALLOW, host=HOST2),
        acl("sb2", USER1, READ, DENY, host=HOST2),
        acl("s", USER1, READ, DENY, host=HOST2, pattern=PREFIXED, resource_type=GROUP))
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    assert not by_type(authorizer, USER1, HOST1, READ, GROUP)
    assert not by_type(authorizer, USER1, HOST1, READ, ResourceType.TRANSACTIONAL_ID)
    assert not by_type(authorizer, USER1, HOST1, READ, CLUSTER)
    assert by_type(authorizer, USER1, HOST2, READ, TOPIC)


def test_by_resource_type_deny_takes_precedence():
    authorizer = authorizer_with(acl("sb1", USER1, WRITE, ALLOW, host=HOST1))
    assert by_type(authorizer, USER1, HOST1, WRITE, TOPIC)
    add(authorizer, acl("sb1", USER1, WRITE, DENY, host=HOST1))
    assert not by_type(authorizer, USER1, HOST1, WRITE, TOPIC)


def test_by_resource_type_a_shorter_denied_prefix_dominates():
    def group_acl(prefix, permission):
        return acl(prefix, USER1, READ, permission, host=HOST1, pattern=PREFIXED, resource_type=GROUP)

    authorizer = authorizer_with(group_acl("abcde", ALLOW))
    assert by_type(authorizer, USER1, HOST1, READ, GROUP)
    add(authorizer, group_acl("abcd", DENY))
    assert not by_type(authorizer, USER1, HOST1, READ, GROUP)
    add(authorizer, group_acl("abc", ALLOW))
    assert by_type(authorizer, USER1, HOST1, READ, GROUP)
    add(authorizer, group_acl("a", DENY))
    assert not by_type(authorizer, USER1, HOST1, READ, GROUP)
    add(authorizer, group_acl("ab", ALLOW))
    assert not by_type(authorizer, USER1, HOST1, READ, GROUP)


def test_by_resource_type_a_wildcard_deny_dominates():
    def group_acl(name, permission, pattern=LITERAL):
        return acl(name, USER1, WRITE, permission, host=HOST1, pattern=pattern, resource_type=GROUP)

    authorizer = authorizer_with(group_acl("hello", ALLOW, PREFIXED))
    assert by_type(authorizer, USER1, HOST1, WRITE, GROUP)
    add(authorizer, group_acl("*", DENY))
    assert not by_type(authorizer, USER1, HOST1, WRITE, GROUP)
    add(authorizer, group_acl("*", ALLOW))
    assert not by_type(authorizer, USER1, HOST1, WRITE, GROUP)
    add(authorizer, group_acl("aloha", ALLOW))
    assert not by_type(authorizer, USER1, HOST1, WRITE, GROUP)


def test_by_resource_type_counts_operation_all():
    authorizer = authorizer_with()
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb1", USER1, WRITE, DENY, host=HOST1), acl("sb1", USER1, ALL, ALLOW, host=HOST1))
    assert by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb1", USER1, ALL, DENY, host=HOST1))
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)


def test_by_resource_type_counts_acls_for_every_host():
    authorizer = authorizer_with()
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb1", USER1, READ, ALLOW, host=HOST1))
    assert by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb1", USER1, READ, DENY, host="*"))
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb2", USER1, READ, DENY, host=HOST1))
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    assert not by_type(authorizer, USER1, HOST2, READ, TOPIC)
    add(authorizer, acl("sb2", USER1, READ, ALLOW, host="*"))
    assert by_type(authorizer, USER1, HOST2, READ, TOPIC)
    add(authorizer, acl("sb2", USER1, READ, DENY, host="*"))
    assert not by_type(authorizer, USER1, HOST2, READ, TOPIC)


def test_by_resource_type_counts_acls_for_every_principal():
    authorizer = authorizer_with()
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb1", USER1, READ, ALLOW, host=HOST1))
    assert by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb1", "User:*", READ, DENY, host=HOST1))
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    add(authorizer, acl("sb2", USER1, READ, DENY, host=HOST1))
    assert not by_type(authorizer, USER1, HOST1, READ, TOPIC)
    assert not by_type(authorizer, USER2, HOST1, READ, TOPIC)
    add(authorizer, acl("sb2", "User:*", READ, ALLOW, host=HOST1))
    assert by_type(authorizer, USER2, HOST1, READ, TOPIC)
    add(authorizer, acl("sb2", "User:*", READ, DENY, host=HOST1))
    assert not by_type(authorizer, USER2, HOST1, READ, TOPIC)


def test_by_resource_type_super_users_always_have_access():
    deny_all = [acl("*", "User:*", ALL, DENY, resource_type=t)
                for t in (TOPIC, CLUSTER, GROUP, ResourceType.TRANSACTIONAL_ID)]
    authorizer = authorizer_with(*deny_all, super_users={"User:superuser1", "User:superuser2"})
    for resource_type in (TOPIC, CLUSTER, GROUP, ResourceType.TRANSACTIONAL_ID):
        assert by_type(authorizer, "User:superuser1", "192.0.4.4", READ, resource_type)
        assert not by_type(authorizer, USER1, "192.0.4.4", READ, resource_type)


def test_idempotent_producer_with_write_on_some_topic_passes_the_kip_679_check():
    authorizer = authorizer_with(acl("orders-", "User:producer", WRITE, pattern=PREFIXED))
    assert not allowed(authorizer, "producer", AclOperation.IDEMPOTENT_WRITE, "kafka-cluster", CLUSTER)
    assert by_type(authorizer, "User:producer", HOST, WRITE, TOPIC)
    assert not by_type(authorizer, "User:consumer", HOST, WRITE, TOPIC)


def test_by_resource_type_ignores_implied_operations():
    authorizer = authorizer_with(acl("t", USER1, READ))
    assert allowed(authorizer, "user1", DESCRIBE, "t")
    assert not by_type(authorizer, USER1, HOST, DESCRIBE, TOPIC)


def test_by_resource_type_asks_about_a_made_up_name_first():
    # As in Kafka, a name matching the made-up one, or allow-everyone with no ACL on it, answers yes.
    prefix_matching_the_probe = authorizer_with(acl("hard", USER1, DESCRIBE, pattern=PREFIXED))
    assert by_type(prefix_matching_the_probe, USER1, HOST, DESCRIBE, TOPIC)
    open_by_default = authorizer_with(acl("t", USER1, READ, DENY), allow_everyone=True)
    assert by_type(open_by_default, USER1, HOST, READ, TOPIC)
    read_on_every_topic_implies_describe = authorizer_with(acl("*", USER1, READ))
    assert by_type(read_on_every_topic_implies_describe, USER1, HOST, DESCRIBE, TOPIC)


@pytest.mark.parametrize("operation, resource_type", [
    (READ, ResourceType.ANY), (READ, ResourceType.UNKNOWN), (AclOperation.ANY, TOPIC), (AclOperation.UNKNOWN, TOPIC)])
def test_by_resource_type_needs_a_concrete_operation_and_type(operation, resource_type):
    with pytest.raises(ValueError):
        by_type(Authorizer(), USER1, HOST, operation, resource_type)


# --- against a brute-force reference

# What an ALLOW of an operation also allows, written out as a table.
ALSO_ALLOWED = {READ: {DESCRIBE}, WRITE: {DESCRIBE}, DELETE: {DESCRIBE}, ALTER: {DESCRIBE},
                ALTER_CONFIGS: {DESCRIBE_CONFIGS}}


def reference_authorize(bindings, super_users, allow_everyone, principal, host, operation, resource_type, name):
    if principal in super_users:
        return True
    on_resource = [b for b in bindings if b.resource_type == resource_type and (
        name.startswith(b.resource_name) if b.pattern_type == PREFIXED else b.resource_name in (name, "*"))]
    applying = [b for b in on_resource
                if b.principal in (principal, "User:*") and b.host in (host, "*") and (
                    b.operation in (ALL, operation)
                    or (b.permission_type == ALLOW and operation in ALSO_ALLOWED.get(b.operation, ())))]
    if any(b.permission_type == DENY for b in applying):
        return False
    if applying:
        return True
    return not on_resource and allow_everyone


# Small worlds, so that ACLs overlap often; every question in them is asked.
ACL_NAMES = ["a", "*", "aa", "a*", "*a", "**"]
NAMES = ACL_NAMES + ["".join(chars) for chars in itertools.product("a*", repeat=3)] + ["b", "ab"]
QUESTIONS = list(itertools.product(["User:alice", "User:bob", "User:root"], ["h1", "h2"],
                                   [ALL, READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS], [TOPIC, GROUP], NAMES))
bindings = st.builds(
    AclBinding, st.sampled_from([TOPIC, GROUP]), st.sampled_from(ACL_NAMES), st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]), st.sampled_from(["h1", "*"]),
    st.sampled_from([ALL, READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]), st.sampled_from([ALLOW, DENY]))


@settings(max_examples=200, deadline=None)
@given(acls=st.lists(bindings, max_size=16, unique=True), removed=st.sets(st.integers(0, 15)),
       allow_everyone=st.booleans())
def test_authorize_agrees_with_brute_force(acls, removed, allow_everyone):
    authorizer = authorizer_with(*acls, super_users={"User:root"}, allow_everyone=allow_everyone)
    for index in removed & set(range(len(acls))):
        authorizer.remove_acl(acl_id(acls[index]))
    remaining = [b for i, b in enumerate(acls) if i not in removed]
    for question in QUESTIONS:
        expected = reference_authorize(remaining, {"User:root"}, allow_everyone, *question)
        assert authorizer.authorize(*question) == expected, question


@settings(max_examples=300, deadline=None)
@given(prefixes=st.sets(st.text(alphabet="ab", min_size=1, max_size=4), max_size=12),
       name=st.text(alphabet="ab", min_size=1, max_size=6))
def test_a_name_is_matched_by_every_prefix_it_starts_with(prefixes, name):
    authorizer = authorizer_with(*(acl(prefix, pattern=PREFIXED) for prefix in prefixes))
    expected = any(name.startswith(prefix) for prefix in prefixes)
    assert authorizer.authorize("User:alice", HOST, READ, TOPIC, name) == expected


def test_ten_thousand_acls_decide_as_the_reference_does(seed):
    rng = random.Random(seed)

    def name() -> str:
        return "".join(rng.choice("abc-") for _ in range(rng.randint(1, 6)))

    acls = list(dict.fromkeys(
        acl(name(), f"User:u{rng.randrange(20)}", rng.choice([READ, WRITE, DESCRIBE, ALL]),
            rng.choice([ALLOW, DENY]), pattern=rng.choice([LITERAL, PREFIXED]), host=rng.choice(["h1", "*"]))
        for _ in range(10_000)))
    authorizer = authorizer_with(*acls)
    for _ in range(200):
        query = (f"User:u{rng.randrange(20)}", rng.choice(["h1", "h2"]), rng.choice([READ, WRITE, DESCRIBE]),
                 TOPIC, name() + name())
        assert authorizer.authorize(*query) == reference_authorize(acls, set(), False, *query), f"seed {seed}"
