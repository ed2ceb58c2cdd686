"""The OdradekTopic and OdradekUser reconcilers' decisions, without a broker: specs parsed and refused, what a pass
does to a topic's partitions and config, which resource manages a topic several name, a user's names in Kafka,
ACLs, quotas and Secret, and what a tls user's pass decides before it reaches the cluster."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import ConfigSource

from odradek.operator.certificates import user_principal
from odradek.operator.crds import ACL_OPERATIONS
from odradek.operator.kube import SECRETS, KubeError
from odradek.operator.topic_handler import (
    TopicPlan,
    TopicSpec,
    TopicSpecError,
    TopicState,
    managing_resource,
    parse_topic,
    plan_topic,
    reconcile_topic,
    topic_state,
)
from odradek.operator.user_handler import (
    OPERATIONS,
    Acl,
    UserSpec,
    UserSpecError,
    credential_digest,
    kafka_username,
    new_password,
    owns,
    parse_user,
    plan_acls,
    plan_quotas,
    principal,
    reconcile_user,
    secret_password,
    secret_patch,
    tls_user_secret,
    user_secret,
    wanted_by_username,
)

# Passes that must decide without the cluster: nothing listens here, so any request would fail.
UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1"}


def topic(name: str = "orders", created: str = "2026-01-01T00:00:00Z", status: dict | None = None, **spec) -> dict:
    return {"apiVersion": "odradek.io/v1beta1", "kind": "OdradekTopic",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 2, "creationTimestamp": created,
                         "labels": {"odradek.io/cluster": "c"}},
            "spec": {"partitions": 3, "replicas": 1, **spec}, "status": status or {}}


def state(partitions: int = 3, replicas: int = 1, config: dict | None = None, overridden=()) -> TopicState:
    return TopicState("id", partitions, replicas, {"retention.ms": "604800000", **(config or {})},
                      frozenset(overridden))


# ---------------------------------------------------------------------------------------------------
# Topics


def test_a_topic_is_named_by_topic_name_or_else_the_resource_and_its_config_values_become_strings():
    assert parse_topic(topic("orders")) == TopicSpec("orders", 3, 1, {})
    parsed = parse_topic(topic("orders", topicName="shop.orders",
                               config={"retention.ms": 1000, "compression.gzip.level": 9.5, "preallocate": True}))
    assert parsed == TopicSpec("shop.orders", 3, 1, {"retention.ms": "1000", "compression.gzip.level": "9.5",
                                                     "preallocate": "true"})


@pytest.mark.parametrize("spec, message", [
    ({"topicName": "a/b"}, "'a/b' is not a valid topic name (1 to 249 of a-z A-Z 0-9 . _ -)"),
    ({"topicName": ".."}, "'..' is not a valid topic name (1 to 249 of a-z A-Z 0-9 . _ -)"),
    ({"partitions": 0}, "spec.partitions must be an integer from 1 to 2147483647, got 0"),
    ({"partitions": True}, "spec.partitions must be an integer from 1 to 2147483647, got True"),
    ({"replicas": 40000}, "spec.replicas must be an integer from 1 to 32767, got 40000"),
    ({"config": {"retention.ms": ["1"]}}, "spec.config.retention.ms must be a string, got ['1']"),
])
def test_a_spec_no_topic_can_have_is_refused_in_one_line(spec, message):
    with pytest.raises(TopicSpecError) as refused:
        parse_topic(topic(**spec))
    assert str(refused.value) == message


def test_a_missing_topic_is_created_with_the_specs_config_which_the_operator_then_manages():
    plan = plan_topic(TopicSpec("t", 3, 2, {"retention.ms": "1", "cleanup.policy": "compact"}), None, ["old.key"])
    assert plan == TopicPlan(create=True, set_config={"retention.ms": "1", "cleanup.policy": "compact"},
                             managed_config=("cleanup.policy", "retention.ms"))


def test_partitions_are_raised_never_lowered_and_replicas_never_changed():
    assert plan_topic(TopicSpec("t", 5, 1, {}), state(partitions=3), []) == TopicPlan(partitions=5)
    lowered = plan_topic(TopicSpec("t", 2, 3, {"retention.ms": "1"}), state(partitions=3), [])
    assert lowered.partitions is None and lowered.refused == (
        "partitions cannot be decreased (the topic has 3, the spec asks for 2)",
        "replicas cannot be changed by the operator (the topic has 1, the spec asks for 3): reassign its partitions "
        "instead")
    assert lowered.set_config == {"retention.ms": "1"}  # the rest still applies


def test_config_is_set_where_it_differs_and_deleted_only_where_the_operator_set_it_before():
    current = state(config={"retention.ms": "1000", "segment.ms": "60000", "max.message.bytes": "2000000"},
                    overridden={"retention.ms", "segment.ms", "max.message.bytes"})
    spec = TopicSpec("t", 3, 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    plan = plan_topic(spec, current, managed_before=["retention.ms", "segment.ms", "flush.ms"])
    assert plan.set_config == {"cleanup.policy": "compact"}  # retention.ms is already so
    assert plan.delete_config == ("segment.ms",)  # flush.ms is no longer set; max.message.bytes is a client's
    assert plan.managed_config == ("cleanup.policy", "retention.ms")


def test_a_value_equal_to_the_default_is_still_set_so_that_a_default_change_does_not_move_it():
    plan = plan_topic(TopicSpec("t", 3, 1, {"retention.ms": "604800000"}), state(), [])
    assert plan.set_config == {"retention.ms": "604800000"}


def test_replicas_a_reassignment_adds_for_a_while_do_not_count_as_the_topics():
    """A partition the balancer moves lists its new replicas with the old until the move ends: the topic's
    replication factor is still the spec's, not NotReady for the move's duration."""
    def described(*replica_counts: int):
        return SimpleNamespace(topic_id="id", partitions=[SimpleNamespace(replicas=list(range(count)))
                                                          for count in replica_counts])

    entries = {"retention.ms": SimpleNamespace(value="1000", source=ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
               "segment.ms": SimpleNamespace(value="60000", source=ConfigSource.DEFAULT_CONFIG.value)}
    moving = topic_state(described(3, 4, 3, 5), entries)  # two of four partitions being moved
    assert moving == TopicState("id", 4, 3, {"retention.ms": "1000", "segment.ms": "60000"},
                                frozenset({"retention.ms"}))
    assert plan_topic(TopicSpec("t", 4, 3, {}), moving, []).refused == ()
    # most of them moving, too; and a partition left with fewer replicas is the one reported
    assert topic_state(described(4, 4, 3), entries).replicas == 3
    assert topic_state(described(3, 2, 3), entries).replicas == 2
    assert topic_state(described(), entries).replicas == 0


def test_the_oldest_resource_naming_a_topic_manages_it():
    first = topic("first", "2026-01-01T00:00:00Z", topicName="shared")
    second = topic("second", "2026-01-02T00:00:00Z", topicName="shared")
    same_second = topic("also-second", "2026-01-02T00:00:00Z", topicName="shared")
    other = topic("other", "2025-01-01T00:00:00Z", topicName="elsewhere")
    every = [first, second, same_second, other]
    assert managing_resource(first, "shared", every) is None
    assert managing_resource(second, "shared", every) == "first"
    assert managing_resource(second, "shared", [second, same_second]) == "also-second"  # same second: by name
    assert managing_resource(same_second, "shared", [second, same_second]) is None
    being_deleted = {**first, "metadata": {**first["metadata"], "deletionTimestamp": "2026-02-01T00:00:00Z"}}
    assert managing_resource(second, "shared", [being_deleted, second]) is None
    other_cluster = {**first, "metadata": {**first["metadata"], "labels": {"odradek.io/cluster": "d"}}}
    assert managing_resource(second, "shared", [other_cluster, second]) is None


def test_a_pass_that_cannot_apply_the_spec_keeps_what_it_last_saw_of_the_topic():
    seen = {"topicName": "orders", "topicId": "abc", "partitions": 3, "replicas": 1,
            "managedConfigKeys": ["retention.ms"], "observedGeneration": 1}
    invalid = asyncio.run(reconcile_topic("ns", topic(partitions=0, status=seen), UNREACHABLE))
    assert invalid | {"conditions": None} == seen | {"observedGeneration": 2, "conditions": None}
    assert [(c["type"], c["reason"]) for c in invalid["conditions"]] == [("NotReady", "InvalidSpec")]

    renamed = asyncio.run(reconcile_topic("ns", topic(topicName="renamed", status=seen), UNREACHABLE))
    assert renamed["topicName"] == "orders" and renamed["topicId"] == "abc"
    assert [(c["reason"], c["message"]) for c in renamed["conditions"]] == [
        ("NotSupported", "spec.topicName cannot be changed (the resource manages orders)")]


def test_a_conflicting_resource_reports_no_topic_of_its_own():
    first, second = topic("first", "2026-01-01T00:00:00Z"), topic("second", "2026-01-02T00:00:00Z", topicName="first")
    status = asyncio.run(reconcile_topic("ns", second, UNREACHABLE, others=[first, second]))
    assert status | {"conditions": None} == {"observedGeneration": 2, "topicName": "first", "conditions": None}
    assert [(c["reason"], c["message"]) for c in status["conditions"]] == [
        ("ResourceConflict", "topic first is managed by OdradekTopic ns/first, which is older")]


# ---------------------------------------------------------------------------------------------------
# Users


def user(name: str = "app", **spec) -> dict:
    return {"apiVersion": "odradek.io/v1beta1", "kind": "OdradekUser",
            "metadata": {"name": name, "uid": "uid-1", "labels": {"odradek.io/cluster": "c"}},
            "spec": {"authentication": {"type": "scram-sha-512"}, **spec}}


def test_the_handler_knows_every_operation_the_crd_allows():
    assert set(OPERATIONS) == set(ACL_OPERATIONS)


def test_acl_rules_become_one_acl_per_operation_and_quotas_kafkas_keys():
    parsed = parse_user(user(authorization={"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Write"]},
        {"resource": {"type": "group", "name": "app-", "patternType": "prefix"}, "operations": ["Read"],
         "host": "10.0.0.1"},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
    ]}, quotas={"producerByteRate": 1024, "controllerMutationRate": 0.5}))
    assert parsed.acls == {
        Acl("topic", "orders", "literal", "*", "Read"), Acl("topic", "orders", "literal", "*", "Write"),
        Acl("group", "app-", "prefix", "10.0.0.1", "Read"),
        Acl("cluster", "kafka-cluster", "literal", "*", "IdempotentWrite")}
    assert parsed.quotas == {"producer_byte_rate": 1024.0, "controller_mutation_rate": 0.5}
    assert parse_user(user()).acls == frozenset() and parse_user(user()).quotas == {}


@pytest.mark.parametrize("spec, message", [
    ({"authorization": {"type": "simple", "acls": [{"resource": {"type": "topic", "name": "t"},
                                                    "operations": ["Read", "Juggle"]}]}},
     "spec.authorization.acls[0].operations: unknown operation 'Juggle' (expected one of Read, Write, Create, "
     "Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All)"),
    ({"authorization": {"type": "simple", "acls": [{"resource": {"type": "topic"}, "operations": ["Read"]}]}},
     "spec.authorization.acls[0].resource.name is needed for a topic"),
    ({"authorization": {"type": "simple", "acls": [{"resource": {"type": "queue", "name": "q"},
                                                    "operations": ["Read"]}]}},
     "spec.authorization.acls[0].resource.type must be one of topic, group, cluster, transactionalId, got 'queue'"),
    ({"authorization": {"type": "opa"}}, "spec.authorization.type must be simple, got 'opa'"),
    ({"quotas": {"producerByteRate": -1}}, "spec.quotas.producerByteRate must be a number of at least 0, got -1"),
    ({"authentication": {"type": "plain"}}, "spec.authentication.type must be scram-sha-512 or tls, got 'plain'"),
    ({"name": "u" * 65, "authentication": {"type": "tls"}},
     f"a tls user's name is its certificate's common name, at most 64 characters: {'u' * 65} has 65"),
])
def test_a_spec_kafka_cannot_take_is_refused_in_one_line(spec, message):
    spec = dict(spec)
    with pytest.raises(UserSpecError) as refused:
        parse_user(user(spec.pop("name", "app"), **spec))
    assert str(refused.value) == message


def test_acls_and_quotas_end_exactly_as_the_spec_says():
    read, write, describe = (Acl("topic", "t", "literal", "*", op) for op in ("Read", "Write", "Describe"))
    plan = plan_acls(wanted={read, write}, current={write, describe})
    assert (plan.create, plan.delete) == ((read,), (describe,))
    assert plan_quotas({"producer_byte_rate": 10.0, "consumer_byte_rate": 5.0},
                       {"producer_byte_rate": 10.0, "consumer_byte_rate": 1.0, "request_percentage": 50.0}) == {
        "consumer_byte_rate": 5.0, "request_percentage": None}
    assert plan_quotas({}, {}) == {}


def test_the_secret_holds_the_password_as_strimzi_shapes_it():
    secret = user_secret(user("app"), "ns", "s3cret")
    assert secret["metadata"] == {"name": "app", "namespace": "ns",
                                  "labels": {"odradek.io/cluster": "c", "odradek.io/kind": "OdradekUser"},
                                  "annotations": {"odradek.io/credential-digest": credential_digest("s3cret")},
                                  "ownerReferences": [{"apiVersion": "odradek.io/v1beta1", "kind": "OdradekUser",
                                                       "name": "app", "uid": "uid-1", "controller": True,
                                                       "blockOwnerDeletion": True}]}
    assert credential_digest("s3cret") == hashlib.sha256(b"s3cret").hexdigest() != credential_digest("s3cret2")
    assert base64.b64decode(secret["data"]["sasl.jaas.config"]).decode() == \
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="s3cret";'
    assert secret_password(secret) == "s3cret"
    assert secret_password({"data": {}}) is None and secret_password({"data": {"password": "not base64!"}}) is None


def test_passwords_are_long_random_and_need_no_quoting():
    passwords = {new_password() for _ in range(20)}
    assert len(passwords) == 20
    assert all(len(p) == 32 and p.isalnum() and p.isascii() for p in passwords)


def test_a_tls_users_name_in_kafka_is_its_certificates_principal_name():
    assert kafka_username("app", "scram-sha-512") == "app"
    assert kafka_username("app", "tls") == "CN=app"
    assert principal(kafka_username("app", "tls")) == user_principal("app")
    assert parse_user(user("u" * 64, authentication={"type": "tls"})).authentication == "tls"  # the longest CN
    assert parse_user(user("u" * 65)).name == "u" * 65  # a SCRAM name is no CN


def test_the_name_of_the_other_authentication_ends_with_no_acls_and_no_quotas():
    acls = frozenset({Acl("topic", "t", "literal", "*", "Read")})
    quotas = {"producer_byte_rate": 10.0}
    assert wanted_by_username(UserSpec("app", "tls", acls, quotas)) == {
        "app": (frozenset(), {}), "CN=app": (acls, quotas)}
    assert wanted_by_username(UserSpec("app", "scram-sha-512", acls, quotas)) == {
        "app": (acls, quotas), "CN=app": (frozenset(), {})}


def test_a_tls_users_secret_is_labelled_and_owned_as_a_scram_users():
    certificate = {"user.crt": "Y2VydA==", "user.key": "a2V5", "ca.crt": "Y2E="}
    secret = tls_user_secret(user("app"), "ns", certificate)
    scram_metadata = user_secret(user("app"), "ns", "s3cret")["metadata"]
    assert secret["metadata"] == {key: value for key, value in scram_metadata.items() if key != "annotations"}
    assert secret["data"] == certificate and secret["type"] == "Opaque"


def test_a_secret_is_patched_only_when_it_differs_and_then_to_exactly_what_is_wanted():
    certificate = {"user.crt": "Yw==", "user.key": "aw==", "ca.crt": "YQ=="}
    tls = tls_user_secret(user("app"), "ns", certificate)
    scram = user_secret(user("app"), "ns", "p")
    assert secret_patch(tls, tls) is None and secret_patch(scram, scram) is None
    renewed = tls_user_secret(user("app"), "ns", certificate | {"ca.crt": "Yg=="})
    assert secret_patch(tls, renewed) == {"data": certificate | {"ca.crt": "Yg=="}}
    assert secret_patch(scram, tls) == {"metadata": {"annotations": {"odradek.io/credential-digest": None}},
                                        "data": certificate | {"password": None, "sasl.jaas.config": None}}
    # a Secret made before the kind label, whose password was changed by hand: labelled, its new password's digest
    changed = user_secret(user("app"), "ns", "q")
    old = {"metadata": {"labels": {"odradek.io/cluster": "c", "team": "a"}}, "data": changed["data"]}
    assert secret_patch(old, changed) == {"metadata": {"labels": {"odradek.io/kind": "OdradekUser"},
                                                       "annotations": changed["metadata"]["annotations"]}}


def test_only_a_secret_the_user_owns_is_its_own():
    mine = user_secret(user("app"), "ns", "p")
    assert owns(user("app"), mine)
    cluster_ca = {"metadata": {"name": "app", "labels": {"odradek.io/cluster": "c"}}}
    assert not owns(user("app"), cluster_ca)
    another_users = {"metadata": {**mine["metadata"], "ownerReferences": [
        {**mine["metadata"]["ownerReferences"][0], "uid": "uid-2"}]}}
    assert not owns(user("app"), another_users)
    without_uid = user("app")
    del without_uid["metadata"]["uid"]  # not read from a cluster: the kind label marks the users' Secrets
    assert owns(without_uid, user_secret(without_uid, "ns", "p")) and not owns(without_uid, cluster_ca)


class SecretsOnly:
    """Kube holding only some Secrets, which refuses to change anything: a pass that must stop before writing."""

    def __init__(self, secrets: dict[str, dict]):
        self.secrets = secrets

    async def get(self, resource, namespace, name):
        assert resource == SECRETS
        if name not in self.secrets:
            raise KubeError(404, f"secrets {name} not found")
        return self.secrets[name]


@pytest.mark.parametrize("authentication", ["scram-sha-512", "tls"])
def test_a_user_named_as_a_secret_it_does_not_own_leaves_it_alone_and_is_not_ready(authentication):
    cluster_ca = {"metadata": {"name": "c-cluster-ca", "labels": {"odradek.io/cluster": "c"}},
                  "data": {"ca.key": "a2V5", "ca.crt": "Y2VydA=="}}
    clients_ca = {"metadata": {"name": "c-clients-ca"}, "data": {"ca.crt": "bm90IGEgY2VydGlmaWNhdGU="}}
    kube = SecretsOnly({"c-cluster-ca": cluster_ca, "c-clients-ca": clients_ca})  # refuses any write
    status = asyncio.run(reconcile_user(kube, "ns", user("c-cluster-ca", authentication={"type": authentication}),
                                        UNREACHABLE))
    assert "secret" not in status
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("NotReady", "SecretConflict", "Secret ns/c-cluster-ca exists and is not this user's: it is left alone")]


def test_a_tls_user_waits_for_its_clusters_clients_ca_and_a_broken_one_is_reported():
    tls_user = user("app", authentication={"type": "tls"})
    status = asyncio.run(reconcile_user(SecretsOnly({}), "ns", tls_user, UNREACHABLE))
    assert status["username"] == "CN=app" and "secret" not in status
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("NotReady", "ClientsCaMissing", "the clients CA of cluster c does not exist yet")]

    broken = SecretsOnly({"c-clients-ca": {"data": {"ca.crt": "bm90IGEgY2VydGlmaWNhdGU="}}})
    status = asyncio.run(reconcile_user(broken, "ns", tls_user, UNREACHABLE))
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("NotReady", "ClientsCaInvalid", "no clients-ca key and certificate in its Secret")]
