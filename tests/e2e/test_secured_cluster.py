"""A 3-node cluster with SASL_SSL on every listener: clients (SCRAM-SHA-256), replication between brokers and
the metadata quorum (PLAIN, the nodes' own user). Acknowledged writes survive a leader's kill -9, the ISR
heals, transactions commit and abort across brokers, and a new controller takes over, all over TLS."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.security.certificates import CertificateAuthority

NODE_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
             'password="node-secret" user_node="node-secret" user_admin="admin-secret";')


@pytest.fixture
def secured_cluster(cluster_factory, tmp_path):
    authority = CertificateAuthority(tmp_path / "ca")
    keys = authority.issue("node")
    settings = {
        # the fixture's listener names, each mapped to SASL_SSL
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
        "ssl.keystore.location": str(keys.keystore), "ssl.truststore.location": str(authority.path),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": NODE_JAAS,
        "listener.name.controller.plain.sasl.jaas.config": NODE_JAAS,
        "min.insync.replicas": "2",
    }
    cluster = cluster_factory(3, settings)
    cluster.ca = authority.path
    admin = AdminClient(client_settings(cluster, "PLAIN", "admin", "admin-secret"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    return cluster


def client_settings(cluster, mechanism="SCRAM-SHA-256", username="carol", password="carol-secret",
                    bootstrap: str | None = None, **overrides) -> dict:
    return {"bootstrap.servers": bootstrap or cluster.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(cluster.ca), "sasl.mechanism": mechanism, "sasl.username": username,
            "sasl.password": password, **overrides}


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = condition()
        except KafkaException:
            result = None
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def create_topic(cluster, name: str, partitions: int = 3) -> None:
    admin = AdminClient(client_settings(cluster))
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    wait_for(lambda: all(len(p.isrs) == 3 for p in admin.list_topics(name, timeout=10).topics[name]
                         .partitions.values()), 30, "every replica in sync")


def read_all(cluster, topic: str, partitions: int, isolation: str = "read_committed",
             bootstrap: str | None = None) -> list[bytes]:
    consumer = Consumer(client_settings(cluster, bootstrap=bootstrap, **{
        "group.id": f"check-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, ended = [], set()
    deadline = time.monotonic() + 60
    while len(ended) < partitions and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            if message.error().code() == message.error()._PARTITION_EOF:
                ended.add(message.partition())
            continue
        values.append(message.value())
    consumer.close()
    assert len(ended) == partitions, f"did not reach the end of every partition of {topic}"
    return values


def test_acknowledged_writes_survive_a_leader_kill_and_the_isr_heals_over_sasl_ssl(secured_cluster):
    cluster = secured_cluster
    topic = "secured-replicated"
    create_topic(cluster, topic, partitions=1)
    admin = AdminClient(client_settings(cluster))
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    acknowledged = []
    producer = Producer(client_settings(cluster, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    for i in range(3000):
        producer.produce(topic, str(i).encode(), on_delivery=lambda err, msg: err is None and
                         acknowledged.append(msg.value()))
        if i == 1000:
            producer.flush(30)
            cluster.node(leader).kill()
        producer.poll(0)
    assert producer.flush(60) == 0
    survivors = ",".join(n.bootstrap for n in cluster.nodes if n.proc.poll() is None)
    assert len(acknowledged) == 3000
    assert read_all(cluster, topic, 1, bootstrap=survivors) == [str(i).encode() for i in range(3000)]
    cluster.node(leader).start()
    wait_for(lambda: len(AdminClient(client_settings(cluster)).list_topics(topic, timeout=10)
                         .topics[topic].partitions[0].isrs) == 3, 60, "the restarted replica back in the ISR")


def test_transactions_commit_and_abort_across_brokers_over_sasl_ssl(secured_cluster):
    cluster = secured_cluster
    topic = "secured-transactions"
    create_topic(cluster, topic, partitions=3)
    producer = Producer(client_settings(cluster, **{"transactional.id": "secured-txn", "linger.ms": 5}))
    producer.init_transactions(30)
    for batch, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for i in range(30):
            producer.produce(topic, f"{batch}-{i}".encode(), partition=i % 3)
        if commit:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # written, then aborted (abort_transaction drops what is unsent)
            producer.abort_transaction(30)
    committed = read_all(cluster, topic, 3)
    assert sorted(committed) == sorted(f"{b}-{i}".encode() for b in (0, 2) for i in range(30))
    assert len(read_all(cluster, topic, 3, isolation="read_uncommitted")) == 90


def test_a_new_controller_takes_over_over_sasl_ssl(secured_cluster):
    cluster = secured_cluster
    admin = AdminClient(client_settings(cluster))
    controller = admin.list_topics(timeout=10).controller_id
    cluster.node(controller).kill()
    others = ",".join(n.bootstrap for n in cluster.nodes if n.proc.poll() is None)
    survivors = AdminClient(client_settings(cluster, bootstrap=others))
    wait_for(lambda: survivors.list_topics(timeout=5).controller_id not in (-1, controller), 60, "a new controller")
    survivors.create_topics([NewTopic("after-failover", 1, 2)])["after-failover"].result(30)
    assert "after-failover" in survivors.list_topics(timeout=10).topics
