"""The source's own Fetch client (odradek.spark.fetch) against real nodes, without Spark: which settings it
takes, a leader killed with kill -9 mid-range over plaintext and over SASL_SSL, transactions read_committed and
read_uncommitted, and a log that ends before the range does."""

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark.fetch import fetch_range, uses_fetch_client
from tests.conftest import SECURITIES
from tests.e2e.test_cluster import wait_for
from tests.e2e.test_cluster_transactions import all_in_sync, leaders
from tests.spark.topics import create_topic, unique

SASL_SSL_SETTINGS = {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL",
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "p"}


@pytest.mark.parametrize(("settings", "through_fetch"), [
    ({"bootstrap.servers": "b:1", "isolation.level": "read_committed"}, True),
    (SASL_SSL_SETTINGS, True),
    ({"bootstrap.servers": "b:1", "group.id": "g", "reconnect.backoff.ms": "50", "fetch.message.max.bytes": "1024"},
     True),
    ({"bootstrap.servers": "b:1", "check.crcs": "true"}, False),  # only librdkafka checks CRCs
    ({**SASL_SSL_SETTINGS, "sasl.mechanism": "GSSAPI"}, False),
    ({**SASL_SSL_SETTINGS, "ssl.keystore.location": "client.p12"}, False),
], ids=["plaintext", "sasl-ssl-scram", "not-applicable-settings", "librdkafka-setting", "gssapi", "pkcs12"])
def test_settings_the_fetch_client_does_not_speak_read_through_librdkafka(settings, through_fetch):
    assert uses_fetch_client(settings) is through_fetch


def read(settings: dict, topic: str, start: int, end: int, lost: list | None = None, between=lambda got: None):
    """(offset, value) of every record fetch_range returns, calling `between` with them after the first answer."""
    got = []
    for i, columns in enumerate(fetch_range(settings, topic, 0, start, end, include_headers=False, timeout_s=60,
                                            on_lost=(lost if lost is not None else []).append)):
        for c in columns:
            got += zip(c.offsets.tolist(), c.values.to_pylist(), strict=True)
        if i == 0:
            between(got)
    return got


@pytest.mark.parametrize("security", SECURITIES)
def test_a_leader_killed_mid_range_the_range_is_read_once_in_order_from_the_new_leader(cluster_factory, security):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"}, security=security)
    topic = unique("fetch-failover")
    admin = AdminClient(cluster.client_settings())
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_for(lambda: all_in_sync(cluster, [topic]), 60, "every replica in sync")
    # batches of 100 records, answers of 16 KiB: most of the range is read after the kill
    producer = Producer(cluster.client_settings({"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                                 "batch.num.messages": 100}))
    total = 20_000
    for i in range(total):
        producer.produce(topic, str(i).encode() * 10, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    victim = leaders(cluster, topic)[0][0]
    read_before_the_kill = []

    def kill_the_leader(got):
        cluster.node(victim).kill()
        read_before_the_kill.append(len(got))

    got = read(cluster.client_settings({"fetch.message.max.bytes": "16384"}), topic, 100, total - 100,
               between=kill_the_leader)
    assert [offset for offset, _ in got] == list(range(100, total - 100))
    assert all(value == str(offset).encode() * 10 for offset, value in got)
    # beyond what was read, or already on its way, when the leader died: the new leader served the rest
    assert read_before_the_kill[0] < total // 10, read_before_the_kill
    assert leaders(cluster, topic)[0][0] not in (victim, -1)


def test_a_wrong_password_fails_the_read_at_once_with_the_brokers_reason(cluster_factory):
    cluster = cluster_factory(1, security="SASL_SSL")
    topic = unique("fetch-auth")
    admin = AdminClient(cluster.client_settings())  # outlives its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # Not retried as a lost connection until the poll timeout (60 s here, a TimeoutError): refused is final.
    with pytest.raises(RuntimeError, match=f"reading {topic}-0: authentication to .* failed: .*"):
        read(cluster.client_settings({"sasl.password": "not-the-password"}), topic, 0, 10)


@pytest.fixture
def transactions(shared_node) -> tuple[str, dict[int, bytes], set[int]]:
    """A topic of plain records and two producers' interleaved transactions, committed and aborted: every
    record's value by offset, and the offsets of the aborted ones."""
    topic = unique("fetch-txn")
    create_topic(shared_node.bootstrap, topic)
    first, second = (Producer({"bootstrap.servers": shared_node.bootstrap, "transactional.id": unique(name),
                               "linger.ms": 0}) for name in ("first", "second"))
    for producer in (first, second):
        producer.init_transactions(30)
    plain = Producer({"bootstrap.servers": shared_node.bootstrap})

    def send(producer, value: str):
        producer.produce(topic, value.encode(), partition=0)
        producer.flush(30)

    send(plain, "p0")
    for round_ in range(3):
        first.begin_transaction()
        second.begin_transaction()
        send(first, f"c{round_}-0")
        send(second, f"a{round_}-0")
        send(plain, f"p{round_ + 1}")
        send(first, f"c{round_}-1")
        send(second, f"a{round_}-1")
        first.commit_transaction(30)
        second.abort_transaction(30)
    values = {}
    consumer_settings = {"bootstrap.servers": shared_node.bootstrap, "isolation.level": "read_uncommitted"}
    for offset, value in read(consumer_settings, topic, 0, 10**9, lost=[]):
        values[offset] = value
    return topic, values, {o for o, v in values.items() if v.startswith(b"a")}


def test_read_committed_leaves_out_aborted_transactions_and_every_marker(shared_node, transactions):
    topic, values, aborted = transactions
    # p0, then 3 rounds of 5 records and 2 markers (first's commit, second's abort): offsets 0 to 21
    assert len(values) == 4 + 12 and len(aborted) == 6 and max(values) == 19
    committed = read({"bootstrap.servers": shared_node.bootstrap, "isolation.level": "read_committed"},
                     topic, 0, 22)
    assert committed == sorted((o, v) for o, v in values.items() if o not in aborted)


def test_a_log_that_ends_before_the_range_reports_the_loss_and_returns_what_it_holds(shared_node):
    topic = unique("fetch-short")
    create_topic(shared_node.bootstrap, topic)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    for i in range(10):
        producer.produce(topic, str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    lost = []
    got = read({"bootstrap.servers": shared_node.bootstrap}, topic, 5, 20, lost=lost)
    assert [o for o, _ in got] == [5, 6, 7, 8, 9]
    assert lost == [f"{topic}-0 ends at 10, before the query's end offset 20"]
