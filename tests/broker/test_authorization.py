"""The authorization rules of every API (broker/authorization/), decided with real Authorizer instances over a
small metadata image: what the handler is let to see, what comes back refused with which error and where in
the response, and the whole-request refusals; every answer is encoded with the API's schema to prove it is a
valid response of that version."""

from types import SimpleNamespace

import pytest

from odradek.broker.authorization import BROKER_RULES, CONTROLLER_RULES, ApiAuthorization
from odradek.broker.authorization.access import NOT_ASKED_FOR, acl_host
from odradek.broker.fetch_session import FetchSessionCache, SessionPartition
from odradek.broker.request_context import RequestContext
from odradek.controller.features import GROUP_VERSION
from odradek.controller.metadata_image import MetadataImage, PartitionImage, TopicImage
from odradek.network.server import Connection, Deferred
from odradek.protocol import records
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import API_BY_KEY
from odradek.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.security.authorizer import Authorizer

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
OP = AclOperation
ALICE = "User:alice"
ADMIN = "User:admin"
ALL_TOPIC_OPS = 3576  # Kafka's bits for every topic operation


def acl(resource_type, name, operation, *, principal=ALICE, deny=False, prefixed=False, host="*") -> AclBinding:
    return AclBinding(resource_type, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL, principal,
                      host, operation, AclPermissionType.DENY if deny else AclPermissionType.ALLOW)


def uuid_of(name: str) -> bytes:
    return name.encode().ljust(16, b"\0")[:16]


class FakeNode:
    """What the rules read from a node: the authorizer, the metadata image, config, fetch sessions."""

    def __init__(self, *bindings: AclBinding, topics=("orders", "payments", "secret"), auto_create=True):
        self.authorizer = Authorizer([ADMIN])
        for i, binding in enumerate(bindings):
            self.authorizer.add_acl(i.to_bytes(16, "big"), binding)
        self.image = MetadataImage()
        for name in topics:
            topic = TopicImage(name, uuid_of(name), {p: PartitionImage(p, [1], [1], 1) for p in range(2)})
            self.image.topics[name] = topic
            self.image.topics_by_id[topic.topic_id] = topic
        self.image.features[GROUP_VERSION] = 1
        self.controller = SimpleNamespace(image=self.image)
        self.config = {"auto.create.topics.enable": auto_create}
        self.fetch_sessions = FetchSessionCache()


class Handler:
    """Records what it was called with and answers `response` (or response(request))."""

    def __init__(self, response=None):
        self.response = response
        self.requests = []

    def __call__(self, ctx, request):
        self.requests.append(request)
        return self.response(request) if callable(self.response) else self.response

    @property
    def request(self):
        assert len(self.requests) == 1, f"the handler ran {len(self.requests)} times"
        return self.requests[0]


def call(node, api_key, version, request, handler=None, *, principal=ALICE, controller_side=False,
         peer="127.0.0.1:40000"):
    """The response the authorization hook gives (encoded with the API's schema to prove it valid) and the
    handler."""
    handler = handler if handler is not None else Handler()
    connection = Connection(peer, "SASL", 1, principal=principal)
    ctx = RequestContext(api_key, version, 7, "test", connection)
    response = ApiAuthorization(node, controller_side=controller_side).handle(ctx, request, handler)
    if isinstance(response, dict):
        API_BY_KEY[api_key].encode_response(version, response)
    return response, handler, connection


def codes(topics, partitions_key="partitions", name_key="name", index_key="partition_index"):
    return {(t[name_key], p[index_key]): p["error_code"] for t in topics for p in t[partitions_key]}


# --- the hook


def test_every_routed_api_has_a_rule_or_needs_none():
    from odradek.broker.node import CONTROLLER_ROUTES, ROUTES
    unchecked = {17, 18, 36, 38, 39, 40, 41}  # SASL, ApiVersions, delegation tokens (always refused)
    assert {key for key, *_ in ROUTES} - set(BROKER_RULES) == unchecked
    assert {key for key, *_ in CONTROLLER_ROUTES} - set(CONTROLLER_RULES) == unchecked & {17, 18, 36, 38, 39, 40, 41}


@pytest.mark.parametrize("peer, host", [
    ("127.0.0.1:9092", "127.0.0.1"), ("::1:9092", "0:0:0:0:0:0:0:1"), ("::ffff:10.0.0.1:5", "10.0.0.1"),
    ("fe80::1%eth0:7", "fe80:0:0:0:0:0:0:1%eth0"), ("2001:db8::abcd:5:9", "2001:db8:0:0:0:0:abcd:5"),
])
def test_acl_host_is_the_address_as_java_writes_it(peer, host):
    assert acl_host(peer) == host


def test_an_acl_for_the_clients_host_applies_and_another_hosts_does_not():
    node = FakeNode(acl(GROUP, "g", OP.READ, host="10.0.0.1"))
    assert call(node, 12, 4, {"group_id": "g"}, peer="10.0.0.1:5555")[0] is None
    assert call(node, 12, 4, {"group_id": "g"}, peer="10.0.0.2:5555")[0]["error_code"] == E.GROUP_AUTHORIZATION_FAILED


def test_finish_applies_to_awaitable_and_deferred_answers():
    import asyncio
    node = FakeNode(acl(TOPIC, "orders", OP.DESCRIBE))
    request = {"isolation_level": 0, "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]},
        {"name": "secret", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    answer = {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 5, "leader_epoch": 0}]}]}

    async def later(_request):
        return answer

    response, _, _ = call(node, 2, 7, request, Handler(lambda r: later(r)))
    assert codes(asyncio.run(response)["topics"]) == {("orders", 0): 0, ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}
    response, _, _ = call(node, 2, 7, request, Handler(lambda r: Deferred(later(r))))
    assert isinstance(response, Deferred)
    assert codes(asyncio.run(response.awaitable)["topics"])[("secret", 0)] == E.TOPIC_AUTHORIZATION_FAILED


def test_super_users_pass_every_rule_untouched():
    node = FakeNode()
    request = {"transactional_id": None, "acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "secret", "partition_data": [{"index": 0, "records": b""}]}]}
    handler = Handler({"responses": [], "throttle_time_ms": 0})
    call(node, 0, 9, request, handler, principal=ADMIN)
    assert handler.request is request


# --- Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers


def produce_request(*topics, transactional_id=None, acks=-1, transactional=False):
    batch = bytes(records.build_batch([(None, b"v")], is_transactional=transactional, producer_id=5,
                                      producer_epoch=0)) if transactional else b""
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 100, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": batch}]} for t in topics]}


def produce_answer(request):
    return {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "partition_responses": [
            {"index": d["index"], "error_code": 0, "base_offset": 0, "log_append_time_ms": -1,
             "log_start_offset": 0, "record_errors": [], "error_message": None} for d in t["partition_data"]]}
        for t in request["topic_data"]]}


def test_produce_writes_only_topics_with_write_and_refuses_the_rest():
    node = FakeNode(acl(TOPIC, "ord", OP.WRITE, prefixed=True))
    response, handler, _ = call(node, 0, 9, produce_request("orders", "secret"), Handler(produce_answer))
    assert [t["name"] for t in handler.request["topic_data"]] == ["orders"]
    assert codes(response["responses"], "partition_responses", index_key="index") == {
        ("orders", 0): 0, ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_produce_deny_overrides_allow():
    node = FakeNode(acl(TOPIC, "*", OP.WRITE), acl(TOPIC, "secret", OP.WRITE, deny=True))
    response, handler, _ = call(node, 0, 9, produce_request("orders", "secret"), Handler(produce_answer))
    assert codes(response["responses"], "partition_responses", index_key="index")[("secret", 0)] == \
        E.TOPIC_AUTHORIZATION_FAILED


def test_produce_with_acks_0_and_a_refused_topic_closes_the_connection_after_writing_the_rest():
    node = FakeNode(acl(TOPIC, "orders", OP.WRITE))
    response, handler, connection = call(node, 0, 9, produce_request("orders", "secret", acks=0), Handler(None))
    assert response is None and connection.close_after_response
    assert [t["name"] for t in handler.request["topic_data"]] == ["orders"]


def test_transactional_produce_needs_write_on_the_transactional_id():
    node = FakeNode(acl(TOPIC, "orders", OP.WRITE))
    request = produce_request("orders", transactional_id="tx", transactional=True)
    response, handler, _ = call(node, 0, 9, request)
    assert not handler.requests
    assert codes(response["responses"], "partition_responses", index_key="index") == {
        ("orders", 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    node = FakeNode(acl(TOPIC, "orders", OP.WRITE), acl(TXN, "tx", OP.WRITE))
    assert call(node, 0, 9, request, Handler(produce_answer))[1].request is request
    # acks=0: no response to refuse with; the connection closes
    response, handler, connection = call(FakeNode(), 0, 9, produce_request("orders", transactional_id="tx", acks=0,
                                                                           transactional=True))
    assert response is None and connection.close_after_response and not handler.requests


def fetch_request(*topics, version=12, replica_id=-1, session_id=0, epoch=-1, forgotten=()):
    key = "topic_id" if version >= 13 else "topic"
    return {"replica_id": replica_id, "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 0, "session_id": session_id,
            "session_epoch": epoch, "rack_id": "", "topics": [
                {key: uuid_of(t) if version >= 13 else t, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 100}]} for t in topics],
            "forgotten_topics_data": list(forgotten)}


def fetch_answer(request):
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": t.get("topic", ""), "topic_id": t.get("topic_id", bytes(16)), "partitions": [
            {"partition_index": p["partition"], "error_code": 0, "high_watermark": 0, "last_stable_offset": 0,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
            for p in t["partitions"]]} for t in request["topics"]]}


@pytest.mark.parametrize("version", [12, 13])
def test_fetch_reads_only_topics_with_read(version):
    node = FakeNode(acl(TOPIC, "orders", OP.READ))
    response, handler, _ = call(node, 1, version, fetch_request("orders", "secret", version=version),
                                Handler(fetch_answer))
    assert len(handler.request["topics"]) == 1
    refused = response["responses"][-1]
    assert refused["partitions"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    assert (refused["topic_id"] if version >= 13 else refused["topic"]) == (
        uuid_of("secret") if version >= 13 else "secret")


def test_fetch_forgets_session_partitions_the_caller_may_no_longer_read():
    node = FakeNode(acl(TOPIC, "orders", OP.READ))
    session = node.fetch_sessions.new_context(0, 0, [SessionPartition(t, uuid_of(t), 0, 0, 100, -1)
                                                     for t in ("orders", "secret")], [], True)
    request = fetch_request(session_id=session.session_id, epoch=1)
    response, handler, _ = call(node, 1, 12, request, Handler(fetch_answer))
    assert handler.request["forgotten_topics_data"] == [{"topic": "secret", "topic_id": uuid_of("secret"),
                                                          "partitions": [0]}]
    assert codes(response["responses"], name_key="topic") == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_follower_fetch_needs_cluster_action():
    request = fetch_request("orders", replica_id=2)
    response, handler, _ = call(FakeNode(acl(TOPIC, "*", OP.ALL)), 1, 12, request)
    assert not handler.requests
    assert codes(response["responses"], name_key="topic") == {("orders", 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert call(FakeNode(acl(CLUSTER, "kafka-cluster", OP.CLUSTER_ACTION)), 1, 12, request)[1].request is request


def test_list_offsets_needs_describe_implied_by_read():
    node = FakeNode(acl(TOPIC, "orders", OP.READ))
    request = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
        for t in ("orders", "secret")]}
    response, handler, _ = call(node, 2, 7, request, Handler({"throttle_time_ms": 0, "topics": []}))
    assert [t["name"] for t in handler.request["topics"]] == ["orders"]
    assert codes(response["topics"]) == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_offset_for_leader_epoch_cluster_action_or_describe_per_topic():
    request = {"replica_id": -1, "topics": [{"topic": t, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]} for t in ("orders", "secret")]}
    handler = Handler({"throttle_time_ms": 0, "topics": []})
    response, _, _ = call(FakeNode(acl(TOPIC, "orders", OP.DESCRIBE)), 23, 4, request, handler)
    assert codes(response["topics"], name_key="topic", index_key="partition") == {
        ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.CLUSTER_ACTION))
    assert call(node, 23, 4, request)[1].request is request


def test_delete_records_needs_delete():
    request = {"timeout_ms": 10, "topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 1}]}
                                            for t in ("orders", "secret")]}
    response, handler, _ = call(FakeNode(acl(TOPIC, "orders", OP.DELETE)), 21, 2, request,
                                Handler({"throttle_time_ms": 0, "topics": []}))
    assert [t["name"] for t in handler.request["topics"]] == ["orders"]
    assert codes(response["topics"]) == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_describe_producers_needs_read_and_keeps_the_requests_order():
    request = {"topics": [{"name": t, "partition_indexes": [0]} for t in ("secret", "orders", "bad name!")]}

    def answer(req):
        return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": None, "active_producers": []}]}
            for t in req["topics"]]}

    response, handler, _ = call(FakeNode(acl(TOPIC, "orders", OP.READ)), 61, 0, request, Handler(answer))
    assert [t["name"] for t in handler.request["topics"]] == ["orders", "bad name!"]  # invalid: the handler's
    assert [t["name"] for t in response["topics"]] == ["secret", "orders", "bad name!"]
    assert response["topics"][0]["partitions"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED


# --- Metadata, DescribeTopicPartitions, DescribeCluster


def metadata_answer(request, image=None):
    names = [t["name"] for t in request["topics"]] if request.get("topics") is not None else [
        "orders", "payments", "secret"]
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": "c", "controller_id": 1, "error_code": 0,
            "cluster_authorized_operations": NOT_ASKED_FOR, "topics": [
                {"error_code": 0, "name": n, "topic_id": uuid_of(n), "is_internal": False, "partitions": [],
                 "topic_authorized_operations": ALL_TOPIC_OPS} for n in names]}


def test_metadata_of_every_topic_shows_only_describable_ones():
    node = FakeNode(acl(TOPIC, "o", OP.DESCRIBE, prefixed=True), acl(TOPIC, "p", OP.WRITE, prefixed=True))
    response, handler, _ = call(node, 3, 12, {"topics": None, "allow_auto_topic_creation": True,
                                              "include_topic_authorized_operations": False},
                                Handler(metadata_answer))
    assert [t["name"] for t in response["topics"]] == ["orders", "payments"]


def test_metadata_of_named_topics_refuses_undescribable_ones_without_saying_if_they_exist():
    node = FakeNode(acl(TOPIC, "orders", OP.DESCRIBE))
    request = {"topics": [{"name": "orders", "topic_id": bytes(16)}, {"name": "secret", "topic_id": bytes(16)},
                          {"name": "nosuch", "topic_id": bytes(16)}], "allow_auto_topic_creation": False,
               "include_topic_authorized_operations": True}
    response, handler, _ = call(node, 3, 12, request, Handler(metadata_answer))
    assert [t["name"] for t in handler.request["topics"]] == ["orders"]
    by_name = {t["name"]: t for t in response["topics"]}
    assert by_name["secret"]["error_code"] == by_name["nosuch"]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    assert by_name["secret"]["topic_id"] == bytes(16)
    assert by_name["orders"]["topic_authorized_operations"] == 1 << OP.DESCRIBE
    assert by_name["secret"]["topic_authorized_operations"] == NOT_ASKED_FOR


def test_metadata_by_topic_id_names_the_id_of_a_refused_topic():
    request = {"topics": [{"name": None, "topic_id": uuid_of("secret")}],
               "include_topic_authorized_operations": False}
    response, handler, _ = call(FakeNode(), 3, 12, request, Handler(metadata_answer))
    assert response["topics"] == [{"error_code": E.TOPIC_AUTHORIZATION_FAILED, "name": None,
                                   "topic_id": uuid_of("secret"), "is_internal": False, "partitions": [],
                                   "topic_authorized_operations": NOT_ASKED_FOR}]


def test_metadata_auto_creation_needs_create_on_the_cluster_or_the_topic():
    request = {"topics": [{"name": "new-a", "topic_id": bytes(16)}, {"name": "new-b", "topic_id": bytes(16)}],
               "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    node = FakeNode(acl(TOPIC, "new", OP.DESCRIBE, prefixed=True), acl(TOPIC, "new-a", OP.CREATE))
    response, handler, _ = call(node, 3, 12, request, Handler(metadata_answer))
    assert [t["name"] for t in handler.request["topics"]] == ["new-a"]
    assert {t["name"]: t["error_code"] for t in response["topics"]}["new-b"] == E.TOPIC_AUTHORIZATION_FAILED
    node = FakeNode(acl(TOPIC, "new", OP.DESCRIBE, prefixed=True), acl(CLUSTER, "kafka-cluster", OP.CREATE))
    assert call(node, 3, 12, request, Handler(metadata_answer))[1].request is request


def test_metadata_v0_with_every_named_topic_refused_describes_none():
    response, handler, _ = call(FakeNode(), 3, 0, {"topics": [{"name": "secret"}]}, Handler(metadata_answer))
    assert handler.request["topics"] == []
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [("secret", E.TOPIC_AUTHORIZATION_FAILED)]


def test_metadata_cluster_operations_need_describe_on_the_cluster():
    request = {"topics": [], "include_cluster_authorized_operations": True, "include_topic_authorized_operations": False}
    response, _, _ = call(FakeNode(), 3, 10, request, Handler(metadata_answer))
    assert response["cluster_authorized_operations"] == 0
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.ALTER))
    response, _, _ = call(node, 3, 10, request, Handler(metadata_answer))
    assert response["cluster_authorized_operations"] == (1 << OP.ALTER) | (1 << OP.DESCRIBE)


def test_describe_topic_partitions_every_topic_means_the_describable_ones():
    node = FakeNode(acl(TOPIC, "orders", OP.DESCRIBE))

    def answer(req):
        return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
            {"error_code": 0, "name": t["name"], "topic_id": uuid_of(t["name"]), "is_internal": False,
             "partitions": [], "topic_authorized_operations": ALL_TOPIC_OPS} for t in req["topics"]]}

    response, handler, _ = call(node, 75, 0, {"topics": [], "response_partition_limit": 10, "cursor": None},
                                Handler(answer))
    assert handler.request["topics"] == [{"name": "orders"}]
    assert [(t["name"], t["topic_authorized_operations"]) for t in response["topics"]] == [
        ("orders", 1 << OP.DESCRIBE)]
    response, handler, _ = call(node, 75, 0, {"topics": [{"name": "secret"}], "response_partition_limit": 10,
                                              "cursor": None})
    assert not handler.requests
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [("secret", E.TOPIC_AUTHORIZATION_FAILED)]


def test_describe_cluster_operations_on_brokers_and_alter_on_controllers():
    request = {"include_cluster_authorized_operations": True, "endpoint_type": 1, "include_fenced_brokers": False}
    answer = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1, "cluster_id": "c",
              "controller_id": 1, "brokers": [], "cluster_authorized_operations": 8096}
    assert call(FakeNode(), 60, 1, request, Handler(answer))[0]["cluster_authorized_operations"] == 0
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.DESCRIBE))
    assert call(node, 60, 1, request, Handler(answer))[0]["cluster_authorized_operations"] == 1 << OP.DESCRIBE
    response, handler, _ = call(node, 60, 1, {**request, "endpoint_type": 2}, controller_side=True)
    assert response["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED and not handler.requests


# --- groups


@pytest.mark.parametrize("api_key, version, request_", [
    (11, 9, {"group_id": "g", "session_timeout_ms": 10, "rebalance_timeout_ms": 10, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer", "protocols": [], "reason": None}),
    (14, 5, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
             "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
    (12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}),
    (13, 5, {"group_id": "g", "members": [{"member_id": "m", "group_instance_id": None, "reason": None}]}),
])
def test_classic_group_membership_needs_read_on_the_group(api_key, version, request_):
    response, handler, _ = call(FakeNode(acl(GROUP, "g", OP.DESCRIBE)), api_key, version, request_)
    assert response["error_code"] == E.GROUP_AUTHORIZATION_FAILED and not handler.requests
    assert call(FakeNode(acl(GROUP, "g", OP.READ)), api_key, version, request_)[1].request is request_


def test_sync_group_without_protocol_type_is_refused_before_authorization():
    request = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
               "protocol_type": None, "protocol_name": "range", "assignments": []}
    assert call(FakeNode(), 14, 5, request)[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_find_coordinator_needs_describe_on_the_group_or_transactional_id():
    node = FakeNode(acl(GROUP, "g", OP.READ), acl(TXN, "tx", OP.WRITE))
    assert call(node, 10, 3, {"key": "g", "key_type": 0})[1].request is not None
    response, _, _ = call(node, 10, 3, {"key": "other", "key_type": 0})
    assert response["error_code"] == E.GROUP_AUTHORIZATION_FAILED and response["node_id"] == -1
    response, _, _ = call(node, 10, 3, {"key": "other", "key_type": 1})
    assert response["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    def answer(req):
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": k, "node_id": 1, "host": "h", "port": 1, "error_code": 0, "error_message": None}
            for k in req["coordinator_keys"]]}

    response, handler, _ = call(node, 10, 4, {"key_type": 0, "coordinator_keys": ["x", "g", "y"]}, Handler(answer))
    assert handler.request["coordinator_keys"] == ["g"]
    assert [(c["key"], c["error_code"]) for c in response["coordinators"]] == [
        ("x", E.GROUP_AUTHORIZATION_FAILED), ("g", 0), ("y", E.GROUP_AUTHORIZATION_FAILED)]


def commit_request(*topics, **extra):
    return {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}
                       for t in topics], **extra}


def commit_answer(request):
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": 0, "error_code": 0}]} for t in request["topics"]]}


def test_offset_commit_needs_read_on_the_group_then_each_topic_refused_first():
    response, handler, _ = call(FakeNode(acl(TOPIC, "*", OP.READ)), 8, 9, commit_request("orders"))
    assert codes(response["topics"]) == {("orders", 0): E.GROUP_AUTHORIZATION_FAILED} and not handler.requests
    node = FakeNode(acl(GROUP, "g", OP.READ), acl(TOPIC, "orders", OP.READ))
    response, handler, _ = call(node, 8, 9, commit_request("orders", "secret"), Handler(commit_answer))
    assert [t["name"] for t in handler.request["topics"]] == ["orders"]
    assert [(t["name"], t["partitions"][0]["error_code"]) for t in response["topics"]] == [
        ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("orders", 0)]


def offset_fetch_answer(request):
    def group(g):
        return {"group_id": g["group_id"], "error_code": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": i, "committed_offset": 3,
                                                "committed_leader_epoch": -1, "metadata": "", "error_code": 0}
                                               for i in t["partition_indexes"]]}
            for t in (g["topics"] if g["topics"] is not None else [{"name": "orders", "partition_indexes": [0]},
                                                                   {"name": "secret", "partition_indexes": [0]}])]}
    return {"throttle_time_ms": 0, "groups": [group(g) for g in request["groups"]]}


def test_offset_fetch_group_describe_then_topics_hidden_or_refused():
    node = FakeNode(acl(GROUP, "g", OP.DESCRIBE), acl(TOPIC, "orders", OP.DESCRIBE))
    request = {"require_stable": False, "groups": [
        {"group_id": "other", "member_id": None, "member_epoch": -1, "topics": None},
        {"group_id": "g", "member_id": None, "member_epoch": -1, "topics": None},
        {"group_id": "g", "member_id": None, "member_epoch": -1,
         "topics": [{"name": "orders", "partition_indexes": [0]}, {"name": "secret", "partition_indexes": [0]}]}]}
    response, handler, _ = call(node, 9, 9, request, Handler(offset_fetch_answer))
    assert [g["group_id"] for g in handler.request["groups"]] == ["g", "g"]
    other, every, named = response["groups"]
    assert other["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    assert [t["name"] for t in every["topics"]] == ["orders"]  # the offsets of secret are not shown
    assert codes(named["topics"]) == {("orders", 0): 0, ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_offset_fetch_before_v8():
    request = {"group_id": "g", "topics": [{"name": "secret", "partition_indexes": [0]}], "require_stable": False}
    response, _, _ = call(FakeNode(), 9, 7, request)
    assert response == {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED, "topics": []}
    response, handler, _ = call(FakeNode(acl(GROUP, "g", OP.READ)), 9, 7, request,
                                Handler({"throttle_time_ms": 0, "error_code": 0, "topics": []}))
    assert handler.request["topics"] == []
    assert codes(response["topics"]) == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}


def test_offset_delete_needs_delete_on_the_group_and_read_on_topics():
    request = {"group_id": "g", "topics": [{"name": t, "partitions": [{"partition_index": 0}]}
                                           for t in ("orders", "secret")]}
    response, _, _ = call(FakeNode(acl(GROUP, "g", OP.READ)), 47, 0, request)
    assert response["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    node = FakeNode(acl(GROUP, "g", OP.DELETE), acl(TOPIC, "orders", OP.READ))
    response, handler, _ = call(node, 47, 0, request, Handler(lambda r: {"error_code": 0, "throttle_time_ms": 0,
                                                                        **commit_answer(r)}))
    assert codes(response["topics"]) == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED, ("orders", 0): 0}


def test_describe_groups_refused_first_and_operations_of_described_ones():
    node = FakeNode(acl(GROUP, "g", OP.READ))

    def answer(req):
        return {"throttle_time_ms": 0, "groups": [
            {"error_code": 0, "error_message": None, "group_id": g, "group_state": "Stable", "protocol_type": "c",
             "protocol_data": "", "members": [], "authorized_operations": 0} for g in req["groups"]]}

    response, handler, _ = call(node, 15, 5, {"groups": ["g", "h"], "include_authorized_operations": True},
                                Handler(answer))
    assert handler.request["groups"] == ["g"]
    assert [(g["group_id"], g["error_code"]) for g in response["groups"]] == [
        ("h", E.GROUP_AUTHORIZATION_FAILED), ("g", 0)]
    assert response["groups"][1]["authorized_operations"] == (1 << OP.READ) | (1 << OP.DESCRIBE)


def test_list_groups_shows_every_group_with_describe_on_the_cluster_else_describable_ones():
    groups = [{"group_id": g, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"}
              for g in ("app-1", "app-2", "other")]
    answer = {"throttle_time_ms": 0, "error_code": 0, "groups": groups}
    response, _, _ = call(FakeNode(acl(GROUP, "app", OP.DESCRIBE, prefixed=True),
                                   acl(GROUP, "app-2", OP.DESCRIBE, deny=True)), 16, 5, {}, Handler(answer))
    assert [g["group_id"] for g in response["groups"]] == ["app-1"]
    response, _, _ = call(FakeNode(acl(CLUSTER, "kafka-cluster", OP.DESCRIBE)), 16, 5, {}, Handler(answer))
    assert len(response["groups"]) == 3


def test_delete_groups_needs_delete_each():
    response, handler, _ = call(FakeNode(acl(GROUP, "a", OP.DELETE)), 42, 2, {"groups_names": ["a", "b", "a"]},
                                Handler(lambda r: {"throttle_time_ms": 0, "results": [
                                    {"group_id": g, "error_code": 0} for g in r["groups_names"]]}))
    assert handler.request["groups_names"] == ["a"]
    assert [(r["group_id"], r["error_code"]) for r in response["results"]] == [
        ("a", 0), ("b", E.GROUP_AUTHORIZATION_FAILED)]


def test_consumer_group_heartbeat_needs_read_on_the_group_and_describe_on_subscribed_topics():
    request = {"group_id": "g", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
               "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["orders", "secret"],
               "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    assert call(FakeNode(), 68, 1, request)[0]["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    node = FakeNode(acl(GROUP, "g", OP.READ), acl(TOPIC, "orders", OP.DESCRIBE))
    assert call(node, 68, 1, request)[0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    node = FakeNode(acl(GROUP, "g", OP.READ), acl(TOPIC, "*", OP.READ))
    assert call(node, 68, 1, request)[1].request is request
    off = FakeNode()
    off.image.features[GROUP_VERSION] = 0  # the handler answers UNSUPPORTED_VERSION first
    assert call(off, 68, 1, request)[1].request is request


def test_consumer_group_describe_hides_groups_assigned_undescribable_topics():
    def group(group_id, topic):
        assignment = {"topic_partitions": [{"topic_id": uuid_of(topic), "topic_name": topic, "partitions": [0]}]}
        return {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": "Stable",
                "group_epoch": 1, "assignment_epoch": 1, "assignor_name": "uniform", "authorized_operations": 0,
                "members": [{"member_id": "m", "instance_id": None, "rack_id": None, "member_epoch": 1,
                             "client_id": "c", "client_host": "/h", "subscribed_topic_names": [topic],
                             "subscribed_topic_regex": None, "assignment": assignment,
                             "target_assignment": assignment, "member_type": 1}]}

    answer = {"throttle_time_ms": 0, "groups": [group("a", "orders"), group("b", "secret")]}
    node = FakeNode(acl(GROUP, "*", OP.DESCRIBE), acl(TOPIC, "orders", OP.DESCRIBE))
    response, _, _ = call(node, 69, 1, {"group_ids": ["a", "b", "c"], "include_authorized_operations": True},
                          Handler(answer))
    assert [(g["group_id"], g["error_code"]) for g in response["groups"]] == [
        ("a", 0), ("b", E.TOPIC_AUTHORIZATION_FAILED)]
    node = FakeNode(acl(GROUP, "a", OP.DESCRIBE), acl(TOPIC, "*", OP.DESCRIBE))
    response, handler, _ = call(node, 69, 1, {"group_ids": ["b", "a"], "include_authorized_operations": False},
                                Handler({"throttle_time_ms": 0, "groups": [group("a", "orders")]}))
    assert handler.request["group_ids"] == ["a"]
    assert [(g["group_id"], g["error_code"]) for g in response["groups"]] == [
        ("b", E.GROUP_AUTHORIZATION_FAILED), ("a", 0)]


# --- transactions


def test_init_producer_id_transactional_needs_write_on_the_id_idempotent_needs_a_topic_or_cluster():
    transactional = {"transactional_id": "tx", "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1}
    idempotent = {**transactional, "transactional_id": None}
    assert call(FakeNode(), 22, 4, transactional)[0]["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert call(FakeNode(acl(TXN, "t", OP.WRITE, prefixed=True)), 22, 4, transactional)[1].request is transactional
    assert call(FakeNode(acl(TOPIC, "*", OP.READ)), 22, 4, idempotent)[0]["error_code"] == \
        E.CLUSTER_AUTHORIZATION_FAILED
    assert call(FakeNode(acl(TOPIC, "ord", OP.WRITE, prefixed=True)), 22, 4, idempotent)[1].request is idempotent
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.IDEMPOTENT_WRITE))
    assert call(node, 22, 4, idempotent)[1].request is idempotent
    # KIP-679: a DENY covering every topic the ALLOW covers leaves no topic to write
    node = FakeNode(acl(TOPIC, "ord", OP.WRITE, prefixed=True), acl(TOPIC, "o", OP.WRITE, deny=True, prefixed=True))
    assert call(node, 22, 4, idempotent)[0]["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED


def test_add_partitions_to_txn_from_clients_is_all_or_nothing():
    request = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
               "v3_and_below_topics": [{"name": "orders", "partitions": [0]}, {"name": "secret", "partitions": [0]},
                                       {"name": "__consumer_offsets", "partitions": [0]}]}

    def errors(response):
        return {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in response["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}

    response, _, _ = call(FakeNode(), 24, 3, request)
    assert set(errors(response).values()) == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    node = FakeNode(acl(TXN, "tx", OP.WRITE), acl(TOPIC, "orders", OP.WRITE), acl(TOPIC, "__consumer_offsets", OP.ALL))
    response, handler, _ = call(node, 24, 3, request)
    assert not handler.requests
    assert errors(response) == {("orders", 0): E.OPERATION_NOT_ATTEMPTED, ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED,
                      ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}
    brokers = {"transactions": []}
    assert call(FakeNode(), 24, 4, brokers)[0]["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED


def test_add_offsets_and_end_txn_and_txn_offset_commit():
    add = {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"}
    assert call(FakeNode(), 25, 3, add)[0]["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert call(FakeNode(acl(TXN, "tx", OP.WRITE)), 25, 3, add)[0]["error_code"] == E.GROUP_AUTHORIZATION_FAILED
    end = {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True}
    assert call(FakeNode(acl(TXN, "tx", OP.DESCRIBE)), 26, 3, end)[0]["error_code"] == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    commit = {**commit_request("orders", "secret"), "transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
              "generation_id": -1}
    assert set(codes(call(FakeNode(), 28, 3, commit)[0]["topics"]).values()) == {
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert set(codes(call(FakeNode(acl(TXN, "tx", OP.WRITE)), 28, 3, commit)[0]["topics"]).values()) == {
        E.GROUP_AUTHORIZATION_FAILED}
    node = FakeNode(acl(TXN, "tx", OP.WRITE), acl(GROUP, "g", OP.READ), acl(TOPIC, "orders", OP.READ))
    response, handler, _ = call(node, 28, 3, commit, Handler(commit_answer))
    assert codes(response["topics"]) == {("secret", 0): E.TOPIC_AUTHORIZATION_FAILED, ("orders", 0): 0}


def test_describe_and_list_transactions_show_only_describable_ids_and_topics():
    def state(transactional_id):
        return {"error_code": 0, "transactional_id": transactional_id, "transaction_state": "Ongoing",
                "transaction_timeout_ms": 1, "transaction_start_time_ms": 1, "producer_id": 1, "producer_epoch": 0,
                "topics": [{"topic": "orders", "partitions": [0]}, {"topic": "secret", "partitions": [0]}]}

    node = FakeNode(acl(TXN, "a", OP.DESCRIBE), acl(TOPIC, "orders", OP.DESCRIBE))
    response, handler, _ = call(node, 65, 0, {"transactional_ids": ["b", "a"]},
                                Handler(lambda r: {"throttle_time_ms": 0, "transaction_states": [
                                    state(i) for i in r["transactional_ids"]]}))
    assert handler.request["transactional_ids"] == ["a"]
    b, a = response["transaction_states"]
    assert b["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert [t["topic"] for t in a["topics"]] == ["orders"]
    listed = {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": [], "transaction_states": [
        {"transactional_id": i, "producer_id": 1, "transaction_state": "Ongoing"} for i in ("a", "b")]}
    response, _, _ = call(node, 66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
                          Handler(listed))
    assert [s["transactional_id"] for s in response["transaction_states"]] == ["a"]


def test_write_txn_markers_needs_alter_or_cluster_action():
    request = {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                            "topics": [{"name": "orders", "partition_indexes": [0, 1]}]}]}
    response, handler, _ = call(FakeNode(acl(TOPIC, "*", OP.ALL)), 27, 1, request)
    assert codes(response["markers"][0]["topics"]) == {("orders", 0): E.CLUSTER_AUTHORIZATION_FAILED,
                                                        ("orders", 1): E.CLUSTER_AUTHORIZATION_FAILED}
    for operation in (OP.ALTER, OP.CLUSTER_ACTION):
        assert call(FakeNode(acl(CLUSTER, "kafka-cluster", operation)), 27, 1, request)[1].request is request


# --- admin


def test_create_topics_needs_create_on_the_cluster_or_each_topic_and_describe_configs_for_configs():
    request = {"timeout_ms": 100, "validate_only": False, "topics": [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for n in ("new-a", "new-b", "dup", "dup")]}

    def answer(req):
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "topic_id": uuid_of(t["name"]), "error_code": 0, "error_message": None,
             "num_partitions": 1, "replication_factor": 1, "configs": [
                 {"name": "x", "value": "y", "read_only": False, "config_source": 5, "is_sensitive": False}]}
            for t in req["topics"]]}

    node = FakeNode(acl(TOPIC, "new-a", OP.CREATE))
    response, handler, _ = call(node, 19, 7, request, Handler(answer))
    assert [t["name"] for t in handler.request["topics"]] == ["new-a", "dup", "dup"]  # duplicates: the handler's
    results = {t["name"]: t for t in response["topics"]}
    assert results["new-b"]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    assert results["new-a"]["topic_config_error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    assert results["new-a"]["configs"] == [] and results["new-a"]["num_partitions"] == -1
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.CREATE), acl(TOPIC, "*", OP.DESCRIBE_CONFIGS))
    assert call(node, 19, 7, request, Handler(answer))[1].request is request


def test_delete_topics_hides_undescribable_topics():
    request = {"timeout_ms": 100, "topics": [
        {"name": "orders", "topic_id": bytes(16)}, {"name": "secret", "topic_id": bytes(16)},
        {"name": "payments", "topic_id": bytes(16)}, {"name": None, "topic_id": uuid_of("secret")},
        {"name": None, "topic_id": uuid_of("payments")}, {"name": "nosuch", "topic_id": bytes(16)}]}
    node = FakeNode(acl(TOPIC, "orders", OP.DELETE), acl(TOPIC, "payments", OP.DESCRIBE),
                    acl(TOPIC, "nosuch", OP.DESCRIBE))
    response, handler, _ = call(node, 20, 6, request, Handler(lambda r: {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "topic_id": t["topic_id"], "error_code": 0, "error_message": None} for t in r["topics"]]}))
    assert [t["name"] for t in handler.request["topics"]] == ["orders", "nosuch"]  # nosuch: UNKNOWN from the handler
    refused = [(r["name"], r["topic_id"]) for r in response["responses"] if r["error_code"]]
    assert refused == [("secret", bytes(16)), ("payments", bytes(16)), (None, uuid_of("secret")),
                       ("payments", uuid_of("payments"))]
    old = {"timeout_ms": 100, "topic_names": ["orders", "secret"]}
    response, handler, _ = call(node, 20, 5, old, Handler(lambda r: {"throttle_time_ms": 0, "responses": [
        {"name": n, "error_code": 0, "error_message": None} for n in r["topic_names"]]}))
    assert handler.request["topic_names"] == ["orders"]
    assert call(FakeNode(acl(CLUSTER, "kafka-cluster", OP.DELETE)), 20, 5, old)[1].request is old


def test_create_partitions_needs_alter_refused_first():
    request = {"timeout_ms": 1, "validate_only": False, "topics": [
        {"name": t, "count": 3, "assignments": None} for t in ("orders", "secret")]}
    response, handler, _ = call(FakeNode(acl(TOPIC, "orders", OP.ALTER)), 37, 3, request,
                                Handler(lambda r: {"throttle_time_ms": 0, "results": [
                                    {"name": t["name"], "error_code": 0, "error_message": None}
                                    for t in r["topics"]]}))
    assert [(r["name"], r["error_code"]) for r in response["results"]] == [
        ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("orders", 0)]


def test_describe_configs_per_resource_type():
    request = {"include_synonyms": False, "include_documentation": False, "resources": [
        {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
        {"resource_type": 32, "resource_name": "g", "configuration_keys": None}]}
    node = FakeNode(acl(TOPIC, "orders", OP.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    response, handler, _ = call(node, 32, 4, request, Handler(lambda r: {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": "", "resource_type": x["resource_type"],
         "resource_name": x["resource_name"], "configs": []} for x in r["resources"]]}))
    assert [x["resource_name"] for x in handler.request["resources"]] == ["orders"]
    assert [(x["resource_name"], x["error_code"]) for x in response["results"]] == [
        ("orders", 0), ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("1", E.CLUSTER_AUTHORIZATION_FAILED),
        ("g", E.GROUP_AUTHORIZATION_FAILED)]


@pytest.mark.parametrize("api_key", [33, 44])
def test_alter_configs_per_resource_in_the_requests_order(api_key):
    config = {"name": "retention.ms", "value": "1"} | ({"config_operation": 0} if api_key == 44 else {})
    resources = [{"resource_type": t, "resource_name": n, "configs": [config]}
                 for t, n in ((4, ""), (2, "orders"), (2, "secret"))]
    node = FakeNode(acl(TOPIC, "orders", OP.ALTER_CONFIGS))
    response, handler, _ = call(node, api_key, 1, {"resources": resources, "validate_only": False},
                                Handler(lambda r: {"throttle_time_ms": 0, "responses": [
                                    {"error_code": 0, "error_message": None, "resource_type": x["resource_type"],
                                     "resource_name": x["resource_name"]} for x in r["resources"]]}))
    assert [x["resource_name"] for x in handler.request["resources"]] == ["orders"]
    assert [(x["resource_name"], x["error_code"]) for x in response["responses"]] == [
        ("", E.CLUSTER_AUTHORIZATION_FAILED), ("orders", 0), ("secret", E.TOPIC_AUTHORIZATION_FAILED)]


@pytest.mark.parametrize("api_key, version, request_, operation, error_of", [
    (29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
     OP.DESCRIBE, lambda r: r["error_code"]),
    (30, 3, {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                            "principal": "User:x", "host": "*", "operation": 3, "permission_type": 3}]},
     OP.ALTER, lambda r: r["results"][0]["error_code"]),
    (31, 3, {"filters": [{"resource_type_filter": 2, "resource_name_filter": None, "pattern_type_filter": 1,
                          "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
     OP.ALTER, lambda r: r["filter_results"][0]["error_code"]),
    (34, 2, {"dirs": [{"path": "/d", "topics": [{"name": "orders", "partitions": [0]}]}]}, OP.ALTER,
     lambda r: r["results"][0]["partitions"][0]["error_code"]),
    (35, 4, {"topics": None}, OP.DESCRIBE, lambda r: r["error_code"]),
    (43, 2, {"election_type": 0, "topic_partitions": [{"topic": "orders", "partitions": [0]}], "timeout_ms": 1},
     OP.ALTER, lambda r: r["replica_election_results"][0]["partition_result"][0]["error_code"]),
    (45, 0, {"timeout_ms": 1, "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
     OP.ALTER, lambda r: r["responses"][0]["partitions"][0]["error_code"]),
    (46, 0, {"timeout_ms": 1, "topics": None}, OP.DESCRIBE, lambda r: r["error_code"]),
    (48, 1, {"components": [], "strict": False}, OP.DESCRIBE_CONFIGS, lambda r: r["error_code"]),
    (49, 1, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "x"}], "ops": []}],
             "validate_only": False}, OP.ALTER_CONFIGS, lambda r: r["entries"][0]["error_code"]),
    (50, 0, {"users": None}, OP.DESCRIBE, lambda r: r["error_code"]),
    (51, 0, {"deletions": [{"name": "x", "mechanism": 1}], "upsertions": []}, OP.ALTER,
     lambda r: r["results"][0]["error_code"]),
    (55, 2, {"topics": []}, OP.DESCRIBE, lambda r: r["error_code"]),
    (57, 1, {"timeout_ms": 1, "feature_updates": [], "validate_only": False}, OP.ALTER, lambda r: r["error_code"]),
    (64, 0, {"broker_id": 2}, OP.ALTER, lambda r: r["error_code"]),
    (74, 0, {}, OP.DESCRIBE_CONFIGS, lambda r: r["error_code"]),
])
def test_cluster_wide_apis_need_their_operation_on_the_cluster(api_key, version, request_, operation, error_of):
    response, handler, _ = call(FakeNode(acl(TOPIC, "*", OP.ALL), acl(GROUP, "*", OP.ALL)), api_key, version, request_)
    assert error_of(response) == E.CLUSTER_AUTHORIZATION_FAILED and not handler.requests
    assert call(FakeNode(acl(CLUSTER, "kafka-cluster", operation)), api_key, version, request_)[1].request is request_


# --- node to node, on controller listeners


@pytest.mark.parametrize("api_key, version, request_", [
    (1, 13, {"replica_id": 2, "max_wait_ms": 1, "min_bytes": 1, "max_bytes": 1, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "topics": [], "forgotten_topics_data": [], "rack_id": "",
             "cluster_id": None}),
    (52, 1, {"cluster_id": None, "topics": []}),
    (53, 0, {"cluster_id": None, "topics": []}),
    (54, 0, {"cluster_id": None, "topics": []}),
    (56, 3, {"broker_id": 2, "broker_epoch": 1, "topics": []}),
    (59, 0, {"cluster_id": None, "replica_id": 2, "max_bytes": 1, "topics": []}),
    (62, 3, {"broker_id": 2, "cluster_id": "c", "incarnation_id": bytes(16), "listeners": [], "features": [],
             "rack": None, "is_migrating_zk_broker": False, "log_dirs": [], "previous_broker_epoch": -1}),
    (63, 1, {"broker_id": 2, "broker_epoch": 1, "current_metadata_offset": 0, "want_fence": False,
             "want_shut_down": False, "offline_log_dirs": []}),
    (67, 0, {"broker_id": 2, "broker_epoch": 1}),
])
def test_node_to_node_requests_need_cluster_action(api_key, version, request_):
    response, handler, _ = call(FakeNode(acl(CLUSTER, "kafka-cluster", OP.ALTER)), api_key, version, request_,
                                controller_side=True)
    assert response["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED and not handler.requests
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.CLUSTER_ACTION))
    assert call(node, api_key, version, request_, controller_side=True)[1].request is request_


def test_controller_trusts_a_forwarding_node_with_cluster_action():
    request = {"timeout_ms": 100, "validate_only": False, "topics": [
        {"name": "new", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]}
    node = FakeNode(acl(CLUSTER, "kafka-cluster", OP.CLUSTER_ACTION, principal="User:broker"))
    response, handler, _ = call(node, 19, 7, request, principal="User:broker", controller_side=True)
    assert handler.request is request
    response, handler, _ = call(node, 19, 7, request, controller_side=True)
    assert response["topics"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED and not handler.requests
