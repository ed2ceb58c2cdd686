"""ACLs on real nodes with an authorizer: CreateAcls, DescribeAcls and DeleteAcls through confluent-kafka and by
hand, with Kafka 4.0's answers (error codes and messages as its StandardAuthorizer gives them); the bindings kept
in the metadata log survive a restart, kill -9 and metadata snapshots; every node of a 3-node cluster knows the
bindings created through any of them, also a node that was down and catches up from a snapshot."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from odradek.protocol.errors import ErrorCode
from tests.conftest import NodeProcess
from tests.e2e.raw_client import RawClient

# Kafka's name for its KRaft authorizer; ANONYMOUS (every PLAINTEXT client, and the nodes themselves) may do
# everything, as a Kafka cluster with PLAINTEXT listeners and an authorizer needs.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER  # BROKER: Kafka's CLUSTER
LITERAL, PREFIXED, MATCH, ANY = (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED,
                                 ResourcePatternType.MATCH, ResourcePatternType.ANY)
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE

EVERY_BINDING = AclBindingFilter(ResourceType.ANY, None, ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)


def binding(name: str, principal: str = "User:alice", operation=READ, permission=ALLOW, *, pattern=LITERAL,
            resource_type=TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def create(bootstrap: str, *bindings: AclBinding) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer: its end fails its futures
    for future in admin.create_acls(list(bindings), request_timeout=30).values():
        future.result(30)


def described(bootstrap: str, acl_filter: AclBindingFilter = EVERY_BINDING) -> set[AclBinding]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.describe_acls(acl_filter, request_timeout=30).result(30))


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def creation(resource_type: int, name: str, pattern_type: int = 3, principal: str = "User:alice", host: str = "*",
             operation: int = 3, permission_type: int = 3) -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern_type,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission_type}


def acl_filter(resource_type: int = 1, name: str | None = None, pattern_type: int = 1, principal: str | None = None,
               host: str | None = None, operation: int = 1, permission_type: int = 1) -> dict:
    """A DeleteAcls filter, or the body of a DescribeAcls request (the same fields); the defaults match anything."""
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern_type,
            "principal_filter": principal, "host_filter": host, "operation": operation,
            "permission_type": permission_type}


@pytest.fixture
def acl_node(node_factory):
    return node_factory(AUTHORIZER)


def test_bindings_are_described_by_filter_and_deleted_with_what_each_filter_matched(acl_node):
    bootstrap = acl_node.bootstrap
    orders = binding("orders")
    prefix = binding("ord", "User:bob", WRITE, pattern=PREFIXED)
    every_topic = binding("*", "User:mallory", AclOperation.ALL, DENY)
    group = binding("billing", resource_type=GROUP)
    idempotent = binding("kafka-cluster", "User:bob", AclOperation.IDEMPOTENT_WRITE, resource_type=CLUSTER)
    from_host = binding("payments", host="10.0.0.7")
    create(bootstrap, orders, prefix, every_topic, group, idempotent, from_host)
    create(bootstrap, orders)  # already there: a success, nothing added
    assert described(bootstrap) == {orders, prefix, every_topic, group, idempotent, from_host}

    def only(*fields) -> set[AclBinding]:
        return described(bootstrap, AclBindingFilter(*fields))

    # MATCH: every binding that applies to the name; LITERAL and PREFIXED: the pattern exactly
    assert only(TOPIC, "orders", MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY) == {
        orders, prefix, every_topic}
    assert only(TOPIC, "ord", PREFIXED, None, None, AclOperation.ANY, AclPermissionType.ANY) == {prefix}
    assert only(TOPIC, "ord", LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY) == set()
    assert only(ResourceType.ANY, None, ANY, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY) == {
        prefix, idempotent}
    assert only(ResourceType.ANY, None, ANY, None, "10.0.0.7", AclOperation.ANY, AclPermissionType.ANY) == {
        from_host}
    assert only(ResourceType.ANY, None, ANY, None, None, AclOperation.ANY, DENY) == {every_topic}

    admin = AdminClient({"bootstrap.servers": bootstrap})
    by_pattern = AclBindingFilter(TOPIC, "orders", MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY)
    by_principal = AclBindingFilter(ResourceType.ANY, None, ANY, "User:bob", None, AclOperation.ANY,
                                    AclPermissionType.ANY)
    nothing = AclBindingFilter(GROUP, "nothing", LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)
    futures = admin.delete_acls([by_pattern, by_principal, nothing], request_timeout=30)
    # a binding both filters select is listed by both
    assert set(futures[by_pattern].result(30)) == {orders, prefix, every_topic}
    assert set(futures[by_principal].result(30)) == {prefix, idempotent}
    assert futures[nothing].result(30) == []
    assert described(bootstrap) == {group, from_host}


def test_bad_bindings_and_filters_get_kafkas_error_codes_and_messages(acl_node):
    with RawClient(acl_node.bootstrap) as client:
        results = client.request(30, 3, {"creations": [
            creation(4, "my-cluster"),                       # CLUSTER
            creation(2, ""),
            creation(2, "t", principal="alice"),
            creation(99, "t"), creation(2, "t", 99), creation(2, "t", operation=99),
            creation(2, "t", permission_type=99),
            creation(2, "fine"), creation(2, "fine"),
        ]})["results"]
        assert [(r["error_code"], r["error_message"]) for r in results] == [
            (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
            (ErrorCode.INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present separating "
                                        "the principal type from the principal name)"),
            (ErrorCode.INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
            (ErrorCode.INVALID_REQUEST, "Invalid patternType UNKNOWN"),
            (ErrorCode.INVALID_REQUEST, "Invalid operation UNKNOWN"),
            (ErrorCode.INVALID_REQUEST, "Invalid permissionType UNKNOWN"),
            (ErrorCode.NONE, ""), (ErrorCode.NONE, ""),
        ]
        # ANY or MATCH in a binding: Kafka cannot make a binding of it, and the whole request fails
        for wildcard in (creation(1, "t"), creation(2, "t", 1), creation(2, "t", 2), creation(2, "t", operation=1),
                         creation(2, "t", permission_type=1)):
            results = client.request(30, 3, {"creations": [creation(2, "not-made"), wildcard]})["results"]
            assert [(r["error_code"], r["error_message"]) for r in results] == [
                (ErrorCode.UNKNOWN_SERVER_ERROR, None)] * 2, wildcard

        answer = client.request(31, 3, {"filters": [acl_filter(99), acl_filter(2, operation=99),
                                                    acl_filter(2, "fine", 3)]})
        assert [(r["error_code"], r["error_message"], len(r["matching_acls"])) for r in answer["filter_results"]] == [
            (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.", 0),
            (ErrorCode.INVALID_REQUEST, "Unknown entryFilter.", 0),
            (ErrorCode.NONE, None, 1)]
        assert answer["filter_results"][2]["matching_acls"] == [{
            "error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "fine", "pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]

        # a filter code this node does not know matches nothing
        answer = client.request(29, 3, acl_filter(resource_type=99))
        assert (answer["error_code"], answer["error_message"], answer["resources"]) == (0, "", [])
    assert described(acl_node.bootstrap) == set()


@pytest.mark.parametrize("api_key, body", [
    (29, acl_filter(resource_type=0)),
    (29, acl_filter(operation=0)),
    (30, {"creations": [creation(2, "t", 0)]}),
    (30, {"creations": [creation(2, "t"), creation(2, "t", permission_type=0)]}),
    (31, {"filters": [acl_filter(pattern_type=0)]}),
])
def test_the_code_unknown_closes_the_connection_as_kafka_cannot_parse_the_request(shared_acl_node, api_key, body):
    with RawClient(shared_acl_node.bootstrap) as client:
        with pytest.raises(ConnectionError):
            client.request(api_key, 3, body)
    with RawClient(shared_acl_node.bootstrap) as client:  # the node goes on
        assert client.request(29, 3, acl_filter())["error_code"] == ErrorCode.NONE


@pytest.fixture(scope="module")
def shared_acl_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("acl-node") / "data", settings=AUTHORIZER).start()
    yield node
    node.stop()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(node):
    with RawClient(node.bootstrap) as client:
        answer = client.request(29, 3, acl_filter())
        assert (answer["error_code"], answer["error_message"]) == (
            ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
        results = client.request(30, 3, {"creations": [creation(2, "t")]})["results"]
        assert [(r["error_code"], r["error_message"]) for r in results] == [
            (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]
        results = client.request(31, 3, {"filters": [acl_filter()]})["filter_results"]
        assert [(r["error_code"], r["error_message"]) for r in results] == [
            (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]


def test_acls_survive_a_restart_and_kill_9(acl_node):
    kept = {binding(f"topic-{i}", f"User:user-{i}") for i in range(20)}
    removed = binding("short-lived")
    create(acl_node.bootstrap, *kept, removed)
    admin = AdminClient({"bootstrap.servers": acl_node.bootstrap})
    gone = AclBindingFilter(TOPIC, "short-lived", LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.delete_acls([gone], request_timeout=30)[gone].result(30) == [removed]

    acl_node.restart()
    assert described(acl_node.bootstrap) == kept
    acl_node.kill()
    acl_node.start()
    assert described(acl_node.bootstrap) == kept
    create(acl_node.bootstrap, binding("after-the-crash"))
    assert described(acl_node.bootstrap) == kept | {binding("after-the-crash")}


def test_acls_survive_metadata_snapshots(node_factory):
    node = node_factory({**AUTHORIZER, "metadata.log.max.record.bytes.between.snapshots": "4000"})
    bindings = [binding(f"snap-{i}", "User:someone-with-a-long-name") for i in range(60)]
    for start in range(0, 60, 10):  # several entries: the threshold is passed between them
        create(node.bootstrap, *bindings[start:start + 10])
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    some = [AclBindingFilter(TOPIC, f"snap-{i}", LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)
            for i in (1, *range(10, 20))]
    for future in admin.delete_acls(some, request_timeout=30).values():
        assert len(future.result(30)) == 1
    create(node.bootstrap, *bindings[:5])  # snap-1 again (the others of these exist)
    expected = {b for b in bindings if not b.name.startswith("snap-1")} | {bindings[1]}
    assert described(node.bootstrap) == expected
    assert list((node.data_dir / "__cluster_metadata-0").glob("snapshot-*")), "no metadata snapshot was taken"
    node.restart()  # from the latest snapshot and the log after it
    assert " installed" in node.log_text()  # at its start, from its own latest snapshot
    assert described(node.bootstrap) == expected


def test_a_three_node_cluster_sees_acls_created_through_any_node(cluster_factory):
    cluster = cluster_factory(3, {**AUTHORIZER, "metadata.log.max.record.bytes.between.snapshots": "4000"})
    made = {binding(f"via-node-{node_id}", f"User:creator-{node_id}") for node_id in (1, 2, 3)}
    for node_id in (1, 2, 3):  # each forwards to the active controller, wherever it is
        create(cluster.node(node_id).bootstrap, binding(f"via-node-{node_id}", f"User:creator-{node_id}"))
    for node in cluster.nodes:
        wait_for(lambda node=node: described(node.bootstrap) == made, 30, f"{node.bootstrap} to know every ACL")

    # a node that was away while many more came and went catches up from a snapshot of the leader's
    cluster.node(3).stop()
    survivors = f"{cluster.node(1).bootstrap},{cluster.node(2).bootstrap}"
    more = [binding(f"while-away-{i}", "User:someone-with-a-long-name") for i in range(60)]
    for start in range(0, 60, 10):
        create(survivors, *more[start:start + 10])
    admin = AdminClient({"bootstrap.servers": survivors})
    via_1 = AclBindingFilter(TOPIC, "via-node-1", LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)
    for future in admin.delete_acls([via_1], request_timeout=30).values():
        future.result(30)
    expected = (made - {binding("via-node-1", "User:creator-1")}) | set(more)
    cluster.node(3).start()
    wait_for(lambda: described(cluster.node(3).bootstrap) == expected, 30, "node 3 to catch up")
    assert "installed" in cluster.node(3).log_text()  # from the leader, by FetchSnapshot
    for node in cluster.nodes:
        assert described(node.bootstrap) == expected


def test_admin_client_errors_name_kafkas_exceptions(acl_node):
    admin = AdminClient({"bootstrap.servers": acl_node.bootstrap})
    bad = binding("", "User:alice")
    with pytest.raises(KafkaException) as failure:
        admin.create_acls([bad], request_timeout=30)[bad].result(30)
    error = failure.value.args[0]
    assert (error.code(), error.str()) == (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
