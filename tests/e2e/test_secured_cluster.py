"""A SCRAM user added to a running 3-node SASL_SSL cluster through the admin client (AlterUserScramCredentials)
logs in at every broker: each node learns the credential from the metadata log.

The replication and transaction tests of test_cluster.py and test_cluster_transactions.py run on such a cluster
too, as their [SASL_SSL] variants: clients log in with SCRAM-SHA-512 as a user written at format time."""

import ssl
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.e2e.raw_client import RawClient
from tests.e2e.test_cluster import create_topic, wait_for

CAROL = {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol", "sasl.password": "carol-secret"}


def logs_in(cluster, node, mechanism: str, username: str, password: str) -> bool:
    context = ssl.create_default_context(cafile=str(cluster.ca))
    try:
        with RawClient(node.bootstrap, ssl_context=context) as client:
            client.sasl_login(mechanism, username, password)
        return True
    except ConnectionError:
        return False


def test_a_scram_user_added_through_the_admin_client_logs_in_at_every_broker(cluster_factory):
    cluster = cluster_factory(3, {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,SCRAM-SHA-256"}, security="SASL_SSL")
    assert not logs_in(cluster, cluster.node(1), "SCRAM-SHA-256", "carol", "carol-secret")
    admin = AdminClient(cluster.client_settings())
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    for i, node in enumerate(cluster.nodes, 1):
        wait_for(lambda node=node: logs_in(cluster, node, "SCRAM-SHA-256", "carol", "carol-secret"), 30,
                 f"carol's credential at node {i}")
    assert not logs_in(cluster, cluster.node(2), "SCRAM-SHA-256", "carol", "wrong-secret")

    topic = "carols"
    create_topic(cluster, topic, partitions=3)  # a leader on every node
    producer = Producer(cluster.client_settings({**CAROL, "acks": "all"}))
    for i in range(30):
        producer.produce(topic, str(i).encode(), partition=i % 3)
    assert producer.flush(30) == 0
    consumer = Consumer(cluster.client_settings({**CAROL, "group.id": f"carol-{uuid.uuid4().hex[:6]}",
                                                 "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 30 and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and not message.error():
            values.append(int(message.value()))
    consumer.close()
    assert sorted(values) == list(range(30))
