"""The OdradekTopic and OdradekUser reconcilers against a real node: topics created, grown, configured, refused
what Kafka cannot do and deleted; SCRAM users whose Secret's password logs confluent-kafka and kafka-python
clients in, and tls users whose Secret's certificate (from the clients CA the operator issues) does, on a
listener requiring client certificates; both held to their ACLs and quotas, kept across passes and removed on
deletion.

The handlers are driven directly, each pass's status fed back into the resource as kopf would write it; the
Kubernetes side is the kmock emulator.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from odradek.operator import user_handler
from odradek.operator.certificates import clients_ca_secret_name, desired_secrets, issue_user_certificate
from odradek.operator.cluster_spec import assign_node_ids, parse_cluster
from odradek.operator.kube import SECRETS, Connection, Kube, KubeError
from odradek.operator.render import nodes
from odradek.operator.topic_handler import delete_topic, reconcile_topic
from odradek.operator.user_handler import delete_user, reconcile_user
from tests.conftest import NodeProcess, free_port
from tests.operator.kube_emulator import kube_emulator
from tests.operator.test_certificates import refusal

NS = "odradek-test"
CLUSTER = "my-cluster"
DEADLINE_S = 30.0
pytestmark = pytest.mark.filterwarnings("ignore:read_binary is deprecated:DeprecationWarning")  # in kmock 0.8


def eventually(condition, what: str, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"not within {timeout:g}s: {what}"
        time.sleep(0.2)
    return result


def conditions(status: dict) -> list[tuple[str, str]]:
    return [(c["type"], c["reason"]) for c in status["conditions"]]


def written(resource: dict, status: dict) -> dict:
    """The resource as the next pass sees it: the status written back, as kopf does."""
    return {**resource, "status": status}


# ---------------------------------------------------------------------------------------------------
# Topics


def topic_resource(name: str, partitions: int = 3, replicas: int = 1, config: dict | None = None,
                   topic_name: str | None = None, annotations: dict | None = None, created: str = "") -> dict:
    spec = {"partitions": partitions, "replicas": replicas, "config": config or {}}
    if topic_name:
        spec["topicName"] = topic_name
    return {"apiVersion": "odradek.io/v1beta1", "kind": "OdradekTopic",
            "metadata": {"name": name, "namespace": NS, "uid": str(uuid.uuid4()), "generation": 1,
                         "labels": {"odradek.io/cluster": CLUSTER}, "annotations": annotations or {},
                         "creationTimestamp": created or "2026-01-01T00:00:00Z"},
            "spec": spec}


def with_spec(resource: dict, **changes) -> dict:
    meta = resource["metadata"]
    return {**resource, "metadata": {**meta, "generation": meta["generation"] + 1},
            "spec": {**resource["spec"], **changes}}


def describe(admin: AdminClient, name: str):
    return admin.describe_topics(TopicCollection([name]))[name].result(30)


def topic_config(admin: AdminClient, name: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(30)


def topic_exists(admin: AdminClient, name: str) -> bool:
    return name in admin.list_topics(timeout=30).topics


@pytest.fixture(scope="module")
def topic_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("topics") / "data").start()
    yield node
    node.stop()


@pytest.fixture
def client_config(topic_node) -> dict:
    """The operator's view of the topic node."""
    return {"bootstrap.servers": topic_node.bootstrap}


@pytest.fixture
def admin(client_config) -> AdminClient:
    """The test's own view of the topic node."""
    return AdminClient(client_config)


def test_a_topic_is_created_with_its_partitions_and_config_then_grown(admin, client_config):
    resource = topic_resource("orders", partitions=3, config={"retention.ms": "600000", "cleanup.policy": "compact"},
                              topic_name="shop.orders")
    status = asyncio.run(reconcile_topic(NS, resource, client_config))

    assert conditions(status) == [("Ready", "TopicReady")]
    description = describe(admin, "shop.orders")
    assert len(description.partitions) == 3
    assert status | {"conditions": None} == {
        "observedGeneration": 1, "topicName": "shop.orders", "topicId": str(description.topic_id),
        "partitions": 3, "replicas": 1, "managedConfigKeys": ["cleanup.policy", "retention.ms"], "conditions": None}
    config = topic_config(admin, "shop.orders")
    assert (config["retention.ms"].value, config["cleanup.policy"].value) == ("600000", "compact")

    grown = with_spec(written(resource, status), partitions=5)
    status = asyncio.run(reconcile_topic(NS, grown, client_config))
    assert conditions(status) == [("Ready", "TopicReady")] and status["partitions"] == 5
    assert len(describe(admin, "shop.orders").partitions) == 5


def test_decreasing_partitions_or_changing_replicas_is_refused_and_the_rest_still_applied(admin, client_config):
    resource = topic_resource("shrinking", partitions=4)
    status = asyncio.run(reconcile_topic(NS, resource, client_config))
    assert conditions(status) == [("Ready", "TopicReady")]

    shrunk = with_spec(written(resource, status), partitions=2, config={"retention.ms": "700000"})
    status = asyncio.run(reconcile_topic(NS, shrunk, client_config))
    assert conditions(status) == [("NotReady", "NotSupported")]
    assert status["conditions"][0]["message"] == \
        "partitions cannot be decreased (the topic has 4, the spec asks for 2)"
    assert status["partitions"] == 4 and len(describe(admin, "shrinking").partitions) == 4
    assert topic_config(admin, "shrinking")["retention.ms"].value == "700000"

    replicated = with_spec(written(shrunk, status), partitions=4, replicas=3)
    status = asyncio.run(reconcile_topic(NS, replicated, client_config))
    assert conditions(status) == [("NotReady", "NotSupported")]
    assert status["conditions"][0]["message"].startswith(
        "replicas cannot be changed by the operator (the topic has 1, the spec asks for 3)")
    assert "\n" not in status["conditions"][0]["message"] and status["replicas"] == 1

    fixed = with_spec(written(replicated, status), replicas=1)
    assert conditions(asyncio.run(reconcile_topic(NS, fixed, client_config))) == [("Ready", "TopicReady")]


def test_a_key_removed_from_the_spec_goes_back_to_its_default_and_a_client_set_key_stays(admin, client_config):
    resource = topic_resource("configured", config={"retention.ms": "600000", "segment.bytes": "1048576"})
    status = asyncio.run(reconcile_topic(NS, resource, client_config))
    assert conditions(status) == [("Ready", "TopicReady")]
    by_client = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([by_client]).values():
        future.result(30)

    dropped = with_spec(written(resource, status), config={"segment.bytes": "1048576"})
    status = asyncio.run(reconcile_topic(NS, dropped, client_config))
    assert conditions(status) == [("Ready", "TopicReady")] and status["managedConfigKeys"] == ["segment.bytes"]
    config = topic_config(admin, "configured")
    assert config["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert config["retention.ms"].value == "604800000"
    assert (config["segment.bytes"].value, config["max.message.bytes"].value) == ("1048576", "2000000")

    status = asyncio.run(reconcile_topic(NS, written(dropped, status), client_config))  # a pass with nothing to do
    assert conditions(status) == [("Ready", "TopicReady")]
    assert topic_config(admin, "configured")["max.message.bytes"].value == "2000000"


def test_an_invalid_config_or_too_many_replicas_is_not_ready_with_the_brokers_reason(admin, client_config):
    status = asyncio.run(reconcile_topic(NS, topic_resource("wide", replicas=3), client_config))
    assert conditions(status) == [("NotReady", "KafkaError")]
    assert status["conditions"][0]["message"].startswith("cannot create wide: ")
    assert not topic_exists(admin, "wide")

    status = asyncio.run(reconcile_topic(NS, topic_resource("bad-config", config={"cleanup.policy": "shred"}),
                                         client_config))
    assert conditions(status) == [("NotReady", "KafkaError")] and "\n" not in status["conditions"][0]["message"]
    assert not topic_exists(admin, "bad-config")


def test_delete_removes_the_topic_unless_unmanaged_and_never_one_it_did_not_manage(admin, client_config):
    deleted = topic_resource("deleted")
    status = asyncio.run(reconcile_topic(NS, deleted, client_config))
    asyncio.run(delete_topic(written(deleted, status), client_config))
    eventually(lambda: not topic_exists(admin, "deleted"), "the topic is deleted")

    kept = topic_resource("kept", annotations={"odradek.io/managed": "false"})
    status = asyncio.run(reconcile_topic(NS, kept, client_config))
    asyncio.run(delete_topic(written(kept, status), client_config))
    assert topic_exists(admin, "kept")

    # a resource deleted before any pass recorded a topic id: the client's topic of that name stays
    admin.create_topics([NewTopic("clients-own", 1, 1)])["clients-own"].result(30)
    asyncio.run(delete_topic(topic_resource("clients-own"), client_config))
    assert topic_exists(admin, "clients-own")


def test_a_second_resource_naming_the_topic_is_in_conflict_and_its_deletion_keeps_the_topic(admin, client_config):
    first = topic_resource("first", topic_name="shared", created="2026-01-01T00:00:00Z")
    second = topic_resource("second", topic_name="shared", partitions=6, created="2026-01-02T00:00:00Z")
    status = asyncio.run(reconcile_topic(NS, first, client_config, others=[first, second]))
    assert conditions(status) == [("Ready", "TopicReady")]
    first = written(first, status)

    status = asyncio.run(reconcile_topic(NS, second, client_config, others=[first, second]))
    assert conditions(status) == [("NotReady", "ResourceConflict")]
    assert status["conditions"][0]["message"] == f"topic shared is managed by OdradekTopic {NS}/first, which is older"
    assert "topicId" not in status and len(describe(admin, "shared").partitions) == 3

    asyncio.run(delete_topic(written(second, status), client_config))
    assert topic_exists(admin, "shared")


def test_an_existing_topic_is_adopted(admin, client_config):
    admin.create_topics([NewTopic("adopted", 2, 1)])["adopted"].result(30)
    status = asyncio.run(reconcile_topic(NS, topic_resource("adopted", partitions=2), client_config))
    assert conditions(status) == [("Ready", "TopicReady")]
    assert status["topicId"] == str(describe(admin, "adopted").topic_id)


def test_on_a_three_node_sasl_ssl_cluster_a_topic_gets_its_replicas_grows_and_is_deleted(cluster_factory):
    cluster = cluster_factory(3, security="SASL_SSL")
    client_config = cluster.client_settings()
    admin = AdminClient(client_config)
    resource = topic_resource("replicated", partitions=2, replicas=3, config={"min.insync.replicas": "2"})
    status = asyncio.run(reconcile_topic(NS, resource, client_config))
    assert conditions(status) == [("Ready", "TopicReady")]
    assert (status["partitions"], status["replicas"]) == (2, 3)
    assert {len(p.replicas) for p in describe(admin, "replicated").partitions} == {3}

    grown = with_spec(written(resource, status), partitions=6)
    status = asyncio.run(reconcile_topic(NS, grown, client_config))
    assert conditions(status) == [("Ready", "TopicReady")] and status["partitions"] == 6
    assert topic_config(admin, "replicated")["min.insync.replicas"].value == "2"

    asyncio.run(delete_topic(written(grown, status), client_config))
    eventually(lambda: not topic_exists(admin, "replicated"), "the topic is deleted")


# ---------------------------------------------------------------------------------------------------
# Users


OPERATOR_USER, OPERATOR_PASSWORD = "operator", "operator-secret"


# The cluster whose certificates the operator issues (certificates.desired_secrets): one node, with a listener
# taking users' certificates. Its Secrets give the node its own certificate and the clients CA to trust there, and
# the clients CA's Secret the tls users' handler signs with.
CERTIFIED_CLUSTER = {
    "apiVersion": "odradek.io/v1beta1", "kind": "OdradekCluster", "metadata": {"name": CLUSTER},
    "spec": {"nodePools": [{"name": "nodes", "replicas": 1, "roles": ["broker", "controller"],
                            "storage": {"size": "1Gi"}}],
             "listeners": [{"name": "users", "port": 9093, "type": "internal", "tls": True,
                            "authentication": {"type": "tls"}}]}}


def issued_secrets() -> dict[str, dict]:
    """The data of the Secrets the operator issues for CERTIFIED_CLUSTER, by name."""
    spec = parse_cluster(CERTIFIED_CLUSTER)
    secrets = desired_secrets(spec, nodes(spec, assign_node_ids(spec, {})), NS, {},
                              datetime.datetime.now(datetime.UTC))
    return {secret["metadata"]["name"]: secret["data"] for secret in secrets}


class SecuredNode:
    """A node with a SCRAM-SHA-512 listener, an SSL listener requiring a certificate of the clients CA (as render()
    writes a listener with tls authentication) and the standard authorizer; the operator logs in on the SCRAM
    listener as a super user, the users under test on theirs; the PLAINTEXT listener (ANONYMOUS, a super user) is
    the test's own view."""

    def __init__(self, directory):
        self.directory = directory
        self.port, self.sasl_port, self.tls_port = free_port(), free_port(), free_port()
        self.secrets = issued_secrets()
        certs = directory / "certs"
        certs.mkdir()
        for key, value in self.secrets[f"{CLUSTER}-nodes-0-certs"].items():
            (certs / key).write_bytes(base64.b64decode(value))
        self.process = NodeProcess(directory / "data", port=self.port, settings={
            "listeners": f"SASL://127.0.0.1:{self.sasl_port},PLAINTEXT://127.0.0.1:{self.port},"
                         f"USERS://127.0.0.1:{self.tls_port}",
            "listener.security.protocol.map": "SASL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,USERS:SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.location": str(certs / "node.pem"),
            "listener.name.users.ssl.client.auth": "required",
            "listener.name.users.ssl.truststore.location": str(certs / "clients-ca.crt"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:ANONYMOUS;User:{OPERATOR_USER}",
            "log.dirs": str(directory / "data")})
        self.admin = AdminClient({"bootstrap.servers": self.process.bootstrap})

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def clients_ca_secret(self) -> dict:
        """The clients CA's Secret, as the cluster's reconciliation creates it."""
        return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": clients_ca_secret_name(CLUSTER), "namespace": NS,
                             "labels": {"odradek.io/cluster": CLUSTER}},
                "data": self.secrets[clients_ca_secret_name(CLUSTER)]}

    def certificate_files(self, user_secret_data: dict, name: str) -> dict:
        """A user's user.crt and user.key written to files, with the cluster CA's certificate (what clients trust
        the node's certificate by, from the `-cluster-ca-cert` Secret: the user Secret's ca.crt is the clients
        CA's, which signs users, not nodes)."""
        files = {"ca": self.directory / f"{name}-cluster-ca.crt", "certificate": self.directory / f"{name}.crt",
                 "key": self.directory / f"{name}.key"}
        for file, data in ((files["ca"], self.secrets[f"{CLUSTER}-cluster-ca-cert"]["ca.crt"]),
                           (files["certificate"], user_secret_data["user.crt"]),
                           (files["key"], user_secret_data["user.key"])):
            file.write_bytes(base64.b64decode(data))
        return {key: str(path) for key, path in files.items()}

    # Host names go unchecked on the USERS listener: the node's certificate names the pod's DNS names a cluster
    # would give it, and the test reaches it at 127.0.0.1. The certificate is still verified against the cluster
    # CA, and the node still verifies the client's.

    def tls_login(self, files: dict) -> dict:
        """confluent-kafka settings presenting the certificate of `files` (certificate_files) on USERS."""
        return {"bootstrap.servers": f"127.0.0.1:{self.tls_port}", "security.protocol": "SSL",
                "ssl.ca.location": files["ca"], "ssl.certificate.location": files["certificate"],
                "ssl.key.location": files["key"], "ssl.endpoint.identification.algorithm": "none"}

    def kafka_python_tls_login(self, files: dict) -> dict:
        return {"bootstrap_servers": f"127.0.0.1:{self.tls_port}", "security_protocol": "SSL",
                "ssl_cafile": files["ca"], "ssl_certfile": files["certificate"], "ssl_keyfile": files["key"],
                "ssl_check_hostname": False}

    def login(self, user: str, password: str) -> dict:
        """confluent-kafka settings logging in on the SCRAM listener."""
        return {"bootstrap.servers": self.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}

    def kafka_python_login(self, user: str, password: str) -> dict:
        return {"bootstrap_servers": self.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user, "sasl_plain_password": password}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    node = SecuredNode(tmp_path_factory.mktemp("users"))
    node.process.start()
    operator = UserScramCredentialUpsertion(OPERATOR_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                            OPERATOR_PASSWORD.encode())
    node.admin.alter_user_scram_credentials([operator])[OPERATOR_USER].result(30)
    for name in ("shop.orders", "shop.secrets"):
        node.admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    yield node
    node.process.stop()


def user_resource(name: str, acls: list | None = None, quotas: dict | None = None,
                  authentication: str = "scram-sha-512") -> dict:
    spec: dict = {"authentication": {"type": authentication}}
    if acls is not None:
        spec["authorization"] = {"type": "simple", "acls": acls}
    if quotas is not None:
        spec["quotas"] = quotas
    return {"apiVersion": "odradek.io/v1beta1", "kind": "OdradekUser",
            "metadata": {"name": name, "namespace": NS, "uid": str(uuid.uuid4()), "generation": 1,
                         "labels": {"odradek.io/cluster": CLUSTER}},
            "spec": spec}


ORDER_SERVICE_ACLS = [
    {"resource": {"type": "topic", "name": "shop.orders", "patternType": "literal"},
     "operations": ["Read", "Write", "Describe"], "host": "*"},
    {"resource": {"type": "group", "name": "order-service-", "patternType": "prefix"}, "operations": ["Read"]},
]


def authenticates(node: SecuredNode, user: str, password: str) -> bool:
    """Whether a confluent-kafka client logs in (True) or is refused with an authentication error (False)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**node.login(user, password), "error_cb": errors.append, "reconnect.backoff.ms": 500})
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1)
            return True
        except KafkaException:
            admin.poll(0.1)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
    raise AssertionError(f"{user} neither logged in nor was refused within {DEADLINE_S:g}s: {errors[:3]}")


def produce_outcome(settings: dict, topic: str, value: bytes = b"hello") -> KafkaError | None:
    """The delivery error of one record a confluent-kafka producer with these settings sends (None: delivered)."""
    delivered: list[KafkaError | None] = []
    producer = Producer({**settings, "message.timeout.ms": 20000})
    producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    eventually(lambda: producer.poll(0.2) >= 0 and delivered, f"the record to {topic} is delivered or refused")
    return delivered[0]


def quotas_described(node: SecuredNode, user: str) -> dict:
    """`odradek quotas describe --user` of the node, as {key: value}."""
    proc = subprocess.run([sys.executable, "-m", "odradek", "quotas", "describe", "--bootstrap-server",
                           node.process.bootstrap, "--user", user, "--output", "json"],
                          capture_output=True, text=True, timeout=60, check=True)
    return {key: value for row in json.loads(proc.stdout)["quotas"] for key, value in row["values"].items()}


def principal_acls(node: SecuredNode, user: str) -> list:
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None,
                             AclOperation.ANY, AclPermissionType.ANY)
    return node.admin.describe_acls(every).result(30)


def test_a_scram_user_logs_in_with_its_secrets_password_and_is_held_to_its_acls_and_quotas(secured):
    client_config = secured.login(OPERATOR_USER, OPERATOR_PASSWORD)
    quotas = {"producerByteRate": 1048576, "consumerByteRate": 2097152, "requestPercentage": 50,
              "controllerMutationRate": 10}

    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            resource = await kube.create(user_resource("order-service", ORDER_SERVICE_ACLS, quotas))
            status = await reconcile_user(kube, NS, resource, client_config)
            assert conditions(status) == [("Ready", "UserReady")]
            assert status | {"conditions": None} == {"observedGeneration": 1, "username": "order-service",
                                                     "secret": "order-service", "conditions": None}
            secret = await kube.get(SECRETS, NS, "order-service")
            password = base64.b64decode(secret["data"]["password"]).decode()
            assert base64.b64decode(secret["data"]["sasl.jaas.config"]).decode() == (
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"order-service\" "
                f"password=\"{password}\";")
            assert secret["metadata"]["labels"] == {"odradek.io/cluster": CLUSTER, "odradek.io/kind": "OdradekUser"}
            assert secret["metadata"]["ownerReferences"][0]["uid"] == resource["metadata"]["uid"]

            # what the ACLs allow, and what they do not, with confluent-kafka
            assert produce_outcome(secured.login("order-service", password), "shop.orders") is None
            refused = produce_outcome(secured.login("order-service", password), "shop.secrets")
            assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            # and with kafka-python: read in a group the prefix allows, refused a topic it does not
            consumer = KafkaConsumer("shop.orders", group_id="order-service-1", auto_offset_reset="earliest",
                                     consumer_timeout_ms=int(DEADLINE_S * 1000),
                                     **secured.kafka_python_login("order-service", password))
            assert next(iter(consumer)).value == b"hello"
            consumer.close()
            producer = KafkaProducer(**secured.kafka_python_login("order-service", password))
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send("shop.secrets", b"nope").get(timeout=DEADLINE_S)
            producer.close()

            assert quotas_described(secured, "order-service") == {
                "producer_byte_rate": 1048576, "consumer_byte_rate": 2097152, "request_percentage": 50,
                "controller_mutation_rate": 10}

            # another pass keeps the password; narrower ACLs and quotas replace the old ones
            resource = written(resource, status)
            resource["spec"] = {**resource["spec"], "quotas": {"producerByteRate": 1000},
                                "authorization": {"type": "simple", "acls": ORDER_SERVICE_ACLS[:1]}}
            status = await reconcile_user(kube, NS, resource, client_config)
            assert conditions(status) == [("Ready", "UserReady")]
            assert (await kube.get(SECRETS, NS, "order-service"))["data"]["password"] == secret["data"]["password"]
            assert authenticates(secured, "order-service", password)
            assert quotas_described(secured, "order-service") == {"producer_byte_rate": 1000}
            assert {b.restype for b in principal_acls(secured, "order-service")} == {ResourceType.TOPIC}

            await delete_user(kube, NS, written(resource, status), client_config)
            with pytest.raises(KubeError) as gone:
                await kube.get(SECRETS, NS, "order-service")
            assert gone.value.status == 404
            assert principal_acls(secured, "order-service") == []
            assert quotas_described(secured, "order-service") == {}
            eventually(lambda: not authenticates(secured, "order-service", password),
                       "the deleted user's password is refused")

    asyncio.run(test())


def scram_credential(node: SecuredNode, user: str) -> bool:
    """Whether the node has a SCRAM credential for `user`."""
    try:
        node.admin.describe_user_scram_credentials([user])[user].result(30)
        return True
    except KafkaException as e:
        if e.args[0].code() != KafkaError.RESOURCE_NOT_FOUND:
            raise
        return False


def test_a_scram_credential_is_upserted_only_when_missing_or_its_password_changed(secured, monkeypatch):
    client_config = secured.login(OPERATOR_USER, OPERATOR_PASSWORD)
    upserted: list[str] = []

    class CountingAdmin(AdminClient):
        """The handler's AdminClient, noting the users whose credential it upserts."""

        def alter_user_scram_credentials(self, alterations, **kwargs):
            upserted.extend(a.user for a in alterations if isinstance(a, UserScramCredentialUpsertion))
            return super().alter_user_scram_credentials(alterations, **kwargs)

    monkeypatch.setattr(user_handler, "AdminClient", CountingAdmin)

    def digest(secret: dict) -> str:
        return secret["metadata"]["annotations"]["odradek.io/credential-digest"]

    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            resource = await kube.create(user_resource("steady"))
            status = await reconcile_user(kube, NS, resource, client_config)
            assert conditions(status) == [("Ready", "UserReady")] and upserted == ["steady"]
            secret = await kube.get(SECRETS, NS, "steady")
            password = base64.b64decode(secret["data"]["password"]).decode()
            assert digest(secret) == hashlib.sha256(password.encode()).hexdigest()

            for _ in range(2):  # passes with nothing to do upsert nothing, nor touch the Secret
                status = await reconcile_user(kube, NS, written(resource, status), client_config)
                assert conditions(status) == [("Ready", "UserReady")]
            assert upserted == ["steady"]
            assert (await kube.get(SECRETS, NS, "steady"))["metadata"]["resourceVersion"] == \
                secret["metadata"]["resourceVersion"]
            assert authenticates(secured, "steady", password)

            # a password changed in the Secret by hand is upserted once
            changed = "changed-by-hand"
            await kube.merge_patch(SECRETS, NS, "steady", {"data": {"password": base64.b64encode(
                changed.encode()).decode()}})
            for _ in range(2):
                status = await reconcile_user(kube, NS, written(resource, status), client_config)
                assert conditions(status) == [("Ready", "UserReady")]
            assert upserted == ["steady", "steady"]
            secret = await kube.get(SECRETS, NS, "steady")
            assert digest(secret) == hashlib.sha256(changed.encode()).hexdigest()
            assert changed in base64.b64decode(secret["data"]["sasl.jaas.config"]).decode()
            assert authenticates(secured, "steady", changed) and not authenticates(secured, "steady", password)

            # a credential deleted by hand is upserted again
            deletion = UserScramCredentialDeletion("steady", ScramMechanism.SCRAM_SHA_512)
            secured.admin.alter_user_scram_credentials([deletion])["steady"].result(30)
            status = await reconcile_user(kube, NS, written(resource, status), client_config)
            assert conditions(status) == [("Ready", "UserReady")] and upserted == ["steady"] * 3
            assert authenticates(secured, "steady", changed)

            await delete_user(kube, NS, written(resource, status), client_config)
            assert not scram_credential(secured, "steady")

    asyncio.run(test())


def test_a_user_named_as_a_secret_it_does_not_own_never_writes_nor_deletes_it(secured):
    client_config = secured.login(OPERATOR_USER, OPERATOR_PASSWORD)
    name = f"{CLUSTER}-cluster-ca"

    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            cluster_ca = await kube.create({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": NS, "labels": {"odradek.io/cluster": CLUSTER}},
                "data": issued_secrets()[name]})
            resource = await kube.create(user_resource(name, ORDER_SERVICE_ACLS, {"producerByteRate": 1000}))
            status = await reconcile_user(kube, NS, resource, client_config)
            assert conditions(status) == [("NotReady", "SecretConflict")] and "secret" not in status
            assert status["conditions"][0]["message"] == \
                f"Secret {NS}/{name} exists and is not this user's: it is left alone"
            assert await kube.get(SECRETS, NS, name) == cluster_ca
            assert not scram_credential(secured, name) and principal_acls(secured, name) == []
            assert quotas_described(secured, name) == {}

            await delete_user(kube, NS, written(resource, status), client_config)
            assert await kube.get(SECRETS, NS, name) == cluster_ca

    asyncio.run(test())


def test_a_bad_acl_or_a_tls_user_without_the_clients_ca_is_not_ready_and_changes_nothing(secured):
    client_config = secured.login(OPERATOR_USER, OPERATOR_PASSWORD)

    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            bad = user_resource("bad-acl", [{"resource": {"type": "topic", "name": "t"}, "operations": ["Juggle"]}])
            status = await reconcile_user(kube, NS, bad, client_config)
            assert conditions(status) == [("NotReady", "InvalidSpec")]
            assert status["conditions"][0]["message"] == (
                "spec.authorization.acls[0].operations: unknown operation 'Juggle' (expected one of Read, Write, "
                "Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All)")
            assert await kube.list(SECRETS, NS) == [] and principal_acls(secured, "bad-acl") == []

            tls = user_resource("tls-user", ORDER_SERVICE_ACLS, authentication="tls")
            status = await reconcile_user(kube, NS, tls, client_config)
            assert conditions(status) == [("NotReady", "ClientsCaMissing")]
            assert status["conditions"][0]["message"] == f"the clients CA of cluster {CLUSTER} does not exist yet"
            assert await kube.list(SECRETS, NS) == [] and principal_acls(secured, "tls-user") == []

            for resource in (bad, tls):  # deleting them finds nothing to remove, and minds nothing
                await delete_user(kube, NS, resource, client_config)

    asyncio.run(test())


BILLING_ACLS = [
    {"resource": {"type": "topic", "name": "shop.orders"}, "operations": ["Read", "Write", "Describe"]},
    {"resource": {"type": "group", "name": "billing-", "patternType": "prefix"}, "operations": ["Read"]},
]


def test_a_tls_user_gets_a_certificate_its_clients_use_held_to_its_acls_and_quotas(secured):
    client_config = secured.login(OPERATOR_USER, OPERATOR_PASSWORD)

    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            resource = await kube.create(user_resource("billing", BILLING_ACLS, {"producerByteRate": 1048576},
                                                       authentication="tls"))
            await kube.create(secured.clients_ca_secret)
            status = await reconcile_user(kube, NS, resource, client_config)
            assert conditions(status) == [("Ready", "UserReady")]
            assert status | {"conditions": None} == {"observedGeneration": 1, "username": "CN=billing",
                                                     "secret": "billing", "conditions": None}
            secret = await kube.get(SECRETS, NS, "billing")
            assert set(secret["data"]) == {"user.crt", "user.key", "ca.crt"}
            assert secret["data"]["ca.crt"] == secured.secrets[clients_ca_secret_name(CLUSTER)]["ca.crt"]
            assert secret["metadata"]["labels"] == {"odradek.io/cluster": CLUSTER, "odradek.io/kind": "OdradekUser"}
            assert secret["metadata"]["ownerReferences"][0]["uid"] == resource["metadata"]["uid"]
            files = secured.certificate_files(secret["data"], "billing")

            # what the ACLs allow, and what they do not, with confluent-kafka
            assert produce_outcome(secured.tls_login(files), "shop.orders", b"from billing") is None
            refused = produce_outcome(secured.tls_login(files), "shop.secrets")
            assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            # and with kafka-python: read in a group the prefix allows, refused a topic it does not
            consumer = KafkaConsumer("shop.orders", group_id="billing-1", auto_offset_reset="earliest",
                                     consumer_timeout_ms=int(DEADLINE_S * 1000),
                                     **secured.kafka_python_tls_login(files))
            assert any(record.value == b"from billing" for record in consumer)
            consumer.close()
            producer = KafkaProducer(**secured.kafka_python_tls_login(files))
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send("shop.secrets", b"nope").get(timeout=DEADLINE_S)
            producer.close()
            # the quota entity is the principal's name, as the broker names a certificate's client
            assert quotas_described(secured, "CN=billing") == {"producer_byte_rate": 1048576}
            assert principal_acls(secured, "billing") == []  # the SCRAM name has none, and no credential
            assert not authenticates(secured, "billing", "any password")

            # another pass keeps the certificate, patching nothing
            status = await reconcile_user(kube, NS, written(resource, status), client_config)
            assert conditions(status) == [("Ready", "UserReady")]
            assert (await kube.get(SECRETS, NS, "billing"))["metadata"]["resourceVersion"] == \
                secret["metadata"]["resourceVersion"]

            # a certificate for the same name from another CA gets nowhere
            stranger = issue_user_certificate(issued_secrets()[clients_ca_secret_name(CLUSTER)], "billing",
                                              datetime.datetime.now(datetime.UTC))
            assert "unknown ca" in refusal(secured.tls_login(secured.certificate_files(stranger, "stranger")))

            await delete_user(kube, NS, written(resource, status), client_config)
            with pytest.raises(KubeError) as gone:
                await kube.get(SECRETS, NS, "billing")
            assert gone.value.status == 404
            assert principal_acls(secured, "CN=billing") == []
            assert quotas_described(secured, "CN=billing") == {}
            refused = produce_outcome(secured.tls_login(files), "shop.orders")
            assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    asyncio.run(test())


def test_a_scram_user_switched_to_tls_leaves_no_password_credential_acls_or_quotas_behind(secured):
    client_config = secured.login(OPERATOR_USER, OPERATOR_PASSWORD)

    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            await kube.create(secured.clients_ca_secret)
            resource = await kube.create(user_resource("switcher", BILLING_ACLS, {"producerByteRate": 1000}))
            status = await reconcile_user(kube, NS, resource, client_config)
            assert conditions(status) == [("Ready", "UserReady")]
            password = base64.b64decode((await kube.get(SECRETS, NS, "switcher"))["data"]["password"]).decode()
            assert authenticates(secured, "switcher", password)

            switched = with_spec(written(resource, status), authentication={"type": "tls"})
            status = await reconcile_user(kube, NS, switched, client_config)
            assert conditions(status) == [("Ready", "UserReady")] and status["username"] == "CN=switcher"
            assert set((await kube.get(SECRETS, NS, "switcher"))["data"]) == {"user.crt", "user.key", "ca.crt"}
            assert principal_acls(secured, "switcher") == [] and quotas_described(secured, "switcher") == {}
            assert len(principal_acls(secured, "CN=switcher")) == 4
            assert quotas_described(secured, "CN=switcher") == {"producer_byte_rate": 1000}
            assert not authenticates(secured, "switcher", password)

            await delete_user(kube, NS, written(switched, status), client_config)
            assert principal_acls(secured, "CN=switcher") == [] and quotas_described(secured, "CN=switcher") == {}

    asyncio.run(test())
