"""Cluster links between clusters whose listeners all ask for SASL, with an authorizer on both: the destination's
own link clients log in as the broker (over TLS here), the link logs in to the source as a user with only the
ACLs a link needs there, and `--sync-acls` copies the source's bindings on the mirror topics and groups, and
later removes the copies of those the source drops, never a binding the destination's administrators made."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from odradek.links.store import read_state
from tests.conftest import NodeProcess, free_port
from tests.security.certificates import CertificateAuthority
from tests.sql.server_process import wait_for

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER  # BROKER: Kafka's CLUSTER
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
READ, DESCRIBE, DESCRIBE_CONFIGS = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS
EVERY_BINDING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                 AclPermissionType.ANY)
PASSWORDS = {"broker": "broker-secret", "admin": "admin-secret", "linker": "linker-secret", "alice": "alice-secret"}
PARTITIONS, RECORDS = 2, 30  # records per partition
COMMITTED = 10  # the offset group app-1 has committed on the source, on each partition


def allow(name: str, principal: str, operation, resource_type=TOPIC, pattern=LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


# What the link's user needs on the source (granted PREFIXED, so that the link does not copy them): READ on the
# topics it mirrors (Metadata, ListOffsets and Fetch; READ implies DESCRIBE), DESCRIBE_CONFIGS on them (their
# configs), DESCRIBE on the groups it copies offsets of (ListGroups, OffsetFetch), and, for --sync-acls only,
# DESCRIBE on the cluster (DescribeAcls).
LINK_USER_ACLS = [allow("orders", "User:linker", READ, pattern=PREFIXED),
                  allow("orders", "User:linker", DESCRIBE_CONFIGS, pattern=PREFIXED),
                  allow("app-", "User:linker", DESCRIBE, GROUP, PREFIXED),
                  allow("kafka-cluster", "User:linker", DESCRIBE, CLUSTER)]
ALICE_READS_ORDERS = allow("orders", "User:alice", READ)
ALICE_READS_APP_1 = allow("app-1", "User:alice", READ, GROUP)
BOB_DESCRIBES_ORDERS = allow("orders", "User:bob", DESCRIBE)  # deleted on the source later
DAVE_DESCRIBES_ORDERS = allow("orders", "User:dave", DESCRIBE)  # also made by hand on the destination
NOT_COPIED = [allow("audit", "User:alice", READ),  # a topic the link does not mirror
              allow("ord", "User:bob", READ, pattern=PREFIXED),  # would cover the destination's own ord* topics
              allow("*", "User:alice", DESCRIBE),  # every topic
              allow("other", "User:alice", READ, GROUP)]  # a group the link's patterns do not select
CAROL_READS_ORDERS = allow("orders", "User:carol", READ)  # the destination's administrators' own


class SecuredNode:
    """A single-node cluster whose only listener is SASL_PLAINTEXT or SASL_SSL (PLAIN logins, the users of
    PASSWORDS), with Kafka's authorizer; the broker (its own clients' principal) and admin are super users."""

    def __init__(self, directory: Path, protocol: str, authority: CertificateAuthority | None = None):
        self.port = free_port()
        jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                f'password="{PASSWORDS["broker"]}" '
                + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items()) + ";")
        settings = {
            "listeners": f"{protocol}://127.0.0.1:{self.port}", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin", "group.initial.rebalance.delay.ms": "0",
        }
        self.tls = {}
        if authority is not None:
            keys = authority.issue(f"node-{self.port}")
            settings.update({"ssl.keystore.location": str(keys.keystore),
                             "ssl.truststore.location": str(authority.path)})
            self.tls = {"ssl.ca.location": str(authority.path)}
        self.protocol = protocol
        self.process = NodeProcess(directory, port=self.port, settings=settings)

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def client(self, user: str, **settings) -> dict:
        """confluent-kafka settings of a client logged in as `user`."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol.lower(), **self.tls,
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user], **settings}

    def admin(self) -> AdminClient:
        return AdminClient(self.client("admin"))

    def properties_file(self, path: Path, user: str) -> Path:
        path.write_text("".join(f"{key}={value}\n" for key, value in self.client(user).items()
                                if key != "bootstrap.servers"))
        return path


@pytest.fixture
def clusters(tmp_path):
    authority = CertificateAuthority(tmp_path / "ca")
    source = SecuredNode(tmp_path / "source", "SASL_PLAINTEXT")
    destination = SecuredNode(tmp_path / "destination", "SASL_SSL", authority)
    for node in (source, destination):
        node.process.spawn()
    try:
        for node in (source, destination):
            node.process.wait_listening()
        yield source, destination
    finally:
        for node in (destination, source):
            node.process.stop()


def create_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=30).values():
        future.result(30)


def delete_acl(admin: AdminClient, binding: AclBinding) -> None:
    exact = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                             binding.host, binding.operation, binding.permission_type)
    assert admin.delete_acls([exact], request_timeout=30)[exact].result(30) == [binding]


def bindings(admin: AdminClient) -> set[AclBinding]:
    return set(admin.describe_acls(EVERY_BINDING, request_timeout=30).result(30))


def produce(settings: dict, topic: str) -> None:
    producer = Producer({**settings, "enable.idempotence": True, "linger.ms": 10})
    for partition in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, key=f"k{i}".encode(), value=f"{partition}-{i}".encode(), partition=partition,
                             headers=[("seq", str(i).encode())], timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0


def records(settings: dict, topic: str) -> list[tuple] | None:
    """Every record of the topic as (partition, offset, key, value, headers, timestamp), read to the end of
    each partition; None while a partition cannot be read to its end."""
    consumer = Consumer({**settings, "group.id": f"compare-{uuid.uuid4()}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        if topic not in consumer.list_topics(timeout=10).topics:
            return None
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        found, ended = [], set()
        while len(ended) < PARTITIONS:
            message = consumer.poll(5)
            if message is None:
                return None
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    return None
                ended.add(message.partition())
                continue
            found.append((message.partition(), message.offset(), message.key(), message.value(),
                          message.headers(), message.timestamp()))
        return sorted(found)
    finally:
        consumer.close()


def links(destination: SecuredNode, command_config: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "links", *argv, "--bootstrap-server",
                           destination.bootstrap, "--command-config", str(command_config)],
                          capture_output=True, text=True, timeout=120)


def test_a_link_between_sasl_clusters_with_authorizers_mirrors_and_syncs_the_acls_it_owns(clusters, tmp_path):
    source, destination = clusters
    on_source, here = source.admin(), destination.admin()
    on_source.create_topics([NewTopic("orders", PARTITIONS, 1), NewTopic("audit", 1, 1)])["orders"].result(30)
    produce(source.client("admin"), "orders")
    create_acls(on_source, *LINK_USER_ACLS, ALICE_READS_ORDERS, ALICE_READS_APP_1, BOB_DESCRIBES_ORDERS,
                DAVE_DESCRIBES_ORDERS, *NOT_COPIED)
    group = ConsumerGroupTopicPartitions("app-1", [TopicPartition("orders", p, COMMITTED) for p in range(PARTITIONS)])
    on_source.alter_consumer_group_offsets([group], request_timeout=30)["app-1"].result(30)
    # the destination's administrators' own bindings, one of them the same as one of the source's
    create_acls(here, CAROL_READS_ORDERS, DAVE_DESCRIBES_ORDERS)

    command_config = destination.properties_file(tmp_path / "destination.properties", "admin")
    source_config = source.properties_file(tmp_path / "source.properties", "linker")
    created = links(destination, command_config, "create", "dc1", "--source-bootstrap", source.bootstrap,
                    "--source-config", str(source_config), "--topics", "orders", "--groups", "app-.*",
                    "--sync-acls")
    assert created.returncode == 0, created.stderr
    assert "1 source topics selected now (orders)" in created.stdout

    # the mirror holds the source's records at their offsets: keys, values, headers, timestamps
    expected = records(source.client("admin"), "orders")
    assert expected is not None and len(expected) == PARTITIONS * RECORDS
    wait_for(lambda: records(destination.client("admin"), "orders") == expected, timeout_s=60,
             what="the mirror to hold the source's records")

    # the bindings on the mirror topic and the link's group came along, and nothing else
    copied = {ALICE_READS_ORDERS, ALICE_READS_APP_1, BOB_DESCRIBES_ORDERS}
    wait_for(lambda: bindings(here) == copied | {CAROL_READS_ORDERS, DAVE_DESCRIBES_ORDERS}, timeout_s=60,
             what="the source's ACLs on the mirror topic and group to be copied")

    # alice may read the mirror here, in her group, from where the group's offsets were copied
    def committed_here() -> bool:
        found = here.list_consumer_group_offsets([ConsumerGroupTopicPartitions("app-1")],
                                                 request_timeout=30)["app-1"].result(30)
        return sorted((tp.partition, tp.offset) for tp in found.topic_partitions) == [
            (p, COMMITTED) for p in range(PARTITIONS)]

    wait_for(committed_here, timeout_s=60, what="the group's offsets to be copied")
    consumer = Consumer(destination.client("alice", **{"group.id": "app-1", "enable.auto.commit": False}))
    consumer.subscribe(["orders"])
    read = []
    while len(read) < PARTITIONS * (RECORDS - COMMITTED):
        message = consumer.poll(30)
        assert message is not None, f"alice read {len(read)} records of the mirror, then nothing"
        assert message.error() is None, message.error()
        read.append((message.partition(), message.offset()))
    consumer.close()
    assert sorted(read) == [(p, o) for p in range(PARTITIONS) for o in range(COMMITTED, RECORDS)]

    # bindings removed on the source go here too, but only those the link created: dave's was made by hand
    delete_acl(on_source, DAVE_DESCRIBES_ORDERS)
    wait_for(lambda: DAVE_DESCRIBES_ORDERS not in bindings(on_source), what="the source to drop dave's binding")
    delete_acl(on_source, BOB_DESCRIBES_ORDERS)
    wait_for(lambda: BOB_DESCRIBES_ORDERS not in bindings(here), timeout_s=60,
             what="the binding deleted on the source to go on the destination")
    assert bindings(here) == {ALICE_READS_ORDERS, ALICE_READS_APP_1, CAROL_READS_ORDERS, DAVE_DESCRIBES_ORDERS}
    # what the link created is recorded in __cluster_links: after the deletion (the link records what it will have
    # copied, deletes, then records what it has)
    def recorded() -> set:
        return {(b.resource_name, b.principal) for b in read_state(destination.client("admin")).copied_acls["dc1"]}

    wait_for(lambda: recorded() == {("orders", "User:alice"), ("app-1", "User:alice")}, timeout_s=60,
             what="the link's record of its copies to drop bob's")

    # managing links takes ALTER on the cluster: WRITE on __cluster_links alone writes no link record
    create_acls(here, allow("__cluster_links", "User:alice", AclOperation.WRITE))
    producer = Producer(destination.client("alice", **{"retries": 0}))
    errors = []
    producer.produce("__cluster_links", key=b"link/x", value=b"{}", partition=0,
                     on_delivery=lambda error, _message: errors.append(error))
    producer.flush(30)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
