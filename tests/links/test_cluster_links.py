"""Cluster links between two real nodes (each its own cluster): the mirror topic holds the source's records at
the same offsets, byte for byte (plain, compressed and transactional batches, markers included), is read-only
until promoted, follows new records and partitions, and `odradek links` drives it all from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka import KafkaConsumer

from odradek.links.admin import unmirrored_ages
from odradek.protocol.records import scan_valid_prefix, stamp_leader_epoch
from tests.conftest import free_port
from tests.e2e.raw_client import RawClient
from tests.e2e.test_metrics import metrics_port, scrape
from tests.java.conftest import _two_free_ports
from tests.reference_kafka import ReferenceBroker, requires_reference
from tests.sql.server_process import wait_for


def links(bootstrap: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "links", *argv, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=120)


def leader_address(bootstrap: str, topic: str, index: int) -> str:
    """host:port of the partition's leader in the cluster `bootstrap` names; AssertionError while it has none."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)  # naming it would create it
    assert topic in metadata.topics, f"no topic {topic}"
    partition = metadata.topics[topic].partitions.get(index)
    assert partition is not None and partition.leader in metadata.brokers, f"{topic}-{index} has no leader"
    broker = metadata.brokers[partition.leader]
    return f"{broker.host}:{broker.port}"


def raw_partition(bootstrap: str, topic: str, index: int, start: int = 0) -> bytes:
    """Every batch of a partition as the leader stores it, from the one holding `start` up to its high
    watermark, in offset order, with the partition leader epochs (which are each cluster's own) zeroed."""
    data, offset = b"", start
    with RawClient(leader_address(bootstrap, topic, index)) as client:
        while True:
            response = client.request(1, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 22, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [{
                    "partition": index, "current_leader_epoch": -1, "fetch_offset": offset,
                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 22}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            answer = response["responses"][0]["partitions"][0]
            assert answer["error_code"] == 0, answer
            infos, end = scan_valid_prefix(memoryview(answer["records"] or b""))
            if not infos:
                return data
            batches = bytearray(answer["records"][:end])
            stamp_leader_epoch(batches, infos, 0)
            data += batches
            offset = infos[-1].next_offset


def partitions_equal(source: str, destination: str, topic: str, count: int) -> bool:
    try:
        return all(raw_partition(source, topic, i) == raw_partition(destination, topic, i) for i in range(count))
    except (AssertionError, OSError):  # the mirror partition does not exist yet, or has no (reachable) leader
        return False


def produce_mixed(bootstrap: str, topic: str, tag: str) -> None:
    """Keyed records with headers in lz4 batches, a committed transaction and an aborted one."""
    plain = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 20,
                      "enable.idempotence": True})
    for i in range(60):
        plain.produce(topic, key=f"k{i}".encode(), value=f"{tag}-{i}".encode(), headers=[("h", str(i).encode())])
    assert plain.flush(30) == 0
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"links-{tag}-{uuid.uuid4()}"})
    transactional.init_transactions(30)
    for commit in (True, False):
        transactional.begin_transaction()
        for i in range(10):
            transactional.produce(topic, key=f"t{i}".encode(), value=f"{tag}-{'kept' if commit else 'aborted'}-{i}"
                                  .encode())
        (transactional.commit_transaction if commit else transactional.abort_transaction)(30)


def refused_write(bootstrap: str, topic: str) -> KafkaError:
    """The error a producer (retrying as it does by default) finally gets for a write to `topic`."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors = []
    producer.produce(topic, b"refused", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(60)
    assert errors and errors[0] is not None, errors
    return errors[0]


def committed_values(bootstrap: str, topic: str, count: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, i, 0) for i in range(count)])
    values, ended = [], set()
    while len(ended) < count:
        message = consumer.poll(10)
        assert message is not None, "the mirror did not answer"
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            continue
        values.append(message.value().decode())
    consumer.close()
    return sorted(values)


def test_a_link_mirrors_byte_for_byte_is_read_only_until_promoted(node_factory):
    source, destination = node_factory(name="source"), node_factory(name="destination")
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "86400000"}),
                         NewTopic("other", 1, 1)])["orders"].result(30)
    produce_mixed(source.bootstrap, "orders", "before")

    created = links(destination.bootstrap, "create", "dc1", "--source-bootstrap", source.bootstrap,
                    "--topics", "ord.*")
    assert created.returncode == 0, created.stderr
    assert "1 source topics selected now (orders)" in created.stdout
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 2),
                    what="the mirror to hold the source's batches")
    # the source topic's own configs came along; topics the pattern does not select did not
    local = AdminClient({"bootstrap.servers": destination.bootstrap})
    topics = local.list_topics(timeout=10).topics
    assert "other" not in topics and len(topics["orders"].partitions) == 2
    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    assert local.describe_configs([resource])[resource].result(30)["retention.ms"].value == "86400000"

    # read-only until promoted: a clear error for producers, nothing written
    producer = Producer({"bootstrap.servers": destination.bootstrap, "retries": 0})
    errors = []
    producer.produce("orders", b"refused", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors

    # it keeps following: new records, and a partition the source adds
    admin.create_partitions([NewPartitions("orders", 3)])["orders"].result(30)
    produce_mixed(source.bootstrap, "orders", "after")
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 3),
                    what="the mirror to follow new records and the third partition")
    assert committed_values(destination.bootstrap, "orders", 3) == committed_values(source.bootstrap, "orders", 3)
    assert not any("aborted" in v for v in committed_values(destination.bootstrap, "orders", 3))

    listed = links(destination.bootstrap, "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{"name": "dc1", "source": source.bootstrap, "topics": "ord.*",
                                          "state": "ACTIVE", "mirrors": 1, "promoted": 0}]
    described = json.loads(links(destination.bootstrap, "describe", "dc1", "-o", "json").stdout)
    assert [(p["topic"], p["partition"], p["lag"]) for p in described["partitions"]] == [
        ("orders", 0, 0), ("orders", 1, 0), ("orders", 2, 0)]
    assert all(p["source_end"] == p["mirror_end"] > 0 and p["lag_seconds"] == 0 for p in described["partitions"])
    # seconds behind, for a partition that lags: the age of the oldest source record its mirror lacks
    ages = unmirrored_ages({"bootstrap.servers": source.bootstrap},
                           [{"topic": "orders", "partition": 1, "mirror_end": 0}], 30)
    assert list(ages) == [("orders", 1)] and ages["orders", 1] >= 0

    refused = links(destination.bootstrap, "delete", "dc1")
    assert refused.returncode != 0 and "promote or delete them first" in refused.stderr

    # promoted: writable, at the offsets after the mirrored ones
    promoted = links(destination.bootstrap, "promote", "dc1")
    assert promoted.returncode == 0 and "orders" in promoted.stdout, promoted.stderr
    end = described["partitions"][0]["mirror_end"]
    delivered = []

    def written():
        producer.produce("orders", b"after promotion", partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
        producer.flush(30)
        return delivered and delivered[-1][0] is None

    assert wait_for(written, what="a write to the promoted topic")
    assert delivered[-1][1] == end
    # once the promoted topic is deleted, its name is free again: the link mirrors the source's topic afresh
    local.delete_topics(["orders"])["orders"].result(30)
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 3),
                    what="the link to mirror the deleted topic again")
    assert links(destination.bootstrap, "promote", "dc1").returncode == 0
    assert links(destination.bootstrap, "delete", "dc1").returncode == 0


def test_bad_link_definitions_get_one_line_errors(node):
    for argv, message in (
        (("create", "bad name", "--source-bootstrap", "127.0.0.1:1", "--topics", "x"), "link name"),
        (("create", "l1", "--source-bootstrap", "nowhere", "--topics", "x"), "source bootstrap"),
        (("create", "l1", "--source-bootstrap", "127.0.0.1:9", "--topics", "x(", "--timeout", "3"), "pattern"),
        (("describe", "nope"), "no link named nope"),
    ):
        result = links(node.bootstrap, *argv)
        assert result.returncode != 0 and message in result.stderr, (argv, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_kill_9_of_the_destination_and_the_source_during_mirroring_leaves_no_gap_and_no_duplicate(node_factory):
    source, destination = node_factory(name="source"), node_factory(name="destination")
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("events", 2, 1)])["events"].result(30)
    produce_mixed(source.bootstrap, "events", "first")
    assert links(destination.bootstrap, "create", "dc1", "--source-bootstrap", source.bootstrap,
                 "--topics", "events").returncode == 0
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for round_, victim in enumerate((destination, source, destination)):
        for i in range(300):  # in flight while the victim dies
            producer.produce("events", key=f"r{round_}-{i}".encode(), value=b"x" * 100)
            producer.poll(0)
        victim.kill()
        victim.start()
        if victim is destination:  # at once: the restarted node has not read which topics are mirrors yet
            assert refused_write(destination.bootstrap, "events").code() == KafkaError.TOPIC_EXCEPTION
        assert producer.flush(60) == 0
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "events", 2),
                    timeout_s=180, what="the mirror to catch up after the kills")
    assert committed_values(destination.bootstrap, "events", 2) == committed_values(source.bootstrap, "events", 2)


@requires_reference
def test_apache_kafka_as_the_source(node, tmp_path):
    port, _ = _two_free_ports()
    kafka = ReferenceBroker(tmp_path / "kafka", port, {"transaction.state.log.replication.factor": "1",
                                                      "transaction.state.log.min.isr": "1"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_topics([NewTopic("payments", 2, 1, config={"cleanup.policy": "compact"})])["payments"].result(60)
        produce_mixed(kafka.bootstrap, "payments", "kafka")
        created = links(node.bootstrap, "create", "from-kafka", "--source-bootstrap", kafka.bootstrap,
                        "--topics", "payments")
        assert created.returncode == 0, created.stderr
        assert wait_for(lambda: partitions_equal(kafka.bootstrap, node.bootstrap, "payments", 2),
                        what="the mirror of Apache Kafka's topic")
        assert committed_values(node.bootstrap, "payments", 2) == committed_values(kafka.bootstrap, "payments", 2)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "payments")
        local = AdminClient({"bootstrap.servers": node.bootstrap})
        configs = local.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact"
        # a resumed mirror task first checks the mirror against Kafka (its last batch, as Kafka returns it, with
        # Kafka's leader epoch): it holds, so nothing is truncated and the mirror follows on
        assert links(node.bootstrap, "pause", "from-kafka").returncode == 0
        produce_mixed(kafka.bootstrap, "payments", "later")
        assert links(node.bootstrap, "resume", "from-kafka").returncode == 0
        assert wait_for(lambda: partitions_equal(kafka.bootstrap, node.bootstrap, "payments", 2),
                        what="the mirror to follow Kafka after its check")
        assert "truncated the mirror" not in node.log_text()
    finally:
        kafka.stop()


def test_group_offsets_follow_and_a_consumer_fails_over_where_it_left_off(node_factory):
    source = node_factory(name="source")
    destination = node_factory({"metrics.listener": f"http://127.0.0.1:{free_port()}"}, name="destination")
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("clicks", 1, 1)])["clicks"].result(30)
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})
    for i in range(100):
        producer.produce("clicks", value=f"c{i}".encode())
    assert producer.flush(30) == 0

    def consume(bootstrap: str, count: int) -> list[str]:
        """`count` records as group `app`, committed (synchronously) as they are read."""
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "app", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["clicks"])
        values = []
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None, f"no record after {values[-1:]}"
            if not message.error():
                values.append(message.value().decode())
                consumer.commit(message, asynchronous=False)
        consumer.close()
        return values

    assert consume(source.bootstrap, 40) == [f"c{i}" for i in range(40)]
    assert links(destination.bootstrap, "create", "dc1", "--source-bootstrap", source.bootstrap,
                 "--topics", "clicks", "--groups", "app").returncode == 0
    local = AdminClient({"bootstrap.servers": destination.bootstrap})

    def copied_offset():
        try:
            found = local.list_consumer_group_offsets([ConsumerGroupTopicPartitions("app")])["app"].result(10)
        except KafkaException:
            return None
        return [tp.offset for tp in found.topic_partitions if tp.topic == "clicks"] == [40]

    assert wait_for(copied_offset, what="group app's offset 40 on the destination")
    # the mirror partition's lag, in the destination's metrics: none once it holds the source's 100 records
    lag = {"link": "dc1", "topic": "clicks", "partition": 0}
    assert wait_for(lambda: (m := scrape(metrics_port(destination))).get(
        "odradek_cluster_link_mirror_lag_records", None, **lag) == 0 and m.get(
        "odradek_cluster_link_mirror_lag_seconds", None, **lag) == 0, what="no lag in the metrics")
    # failover: the consumer moves to the promoted mirror and resumes at its first uncommitted record
    assert links(destination.bootstrap, "promote", "dc1").returncode == 0
    assert consume(destination.bootstrap, 60) == [f"c{i}" for i in range(40, 100)]


def test_a_three_node_destination_mirrors_through_a_kill_9_of_a_mirror_leader(node_factory, cluster_factory):
    source = node_factory(name="source")
    cluster = cluster_factory(3, {"default.replication.factor": "3", "min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("events", 3, 1)])["events"].result(30)
    produce_mixed(source.bootstrap, "events", "first")
    assert links(cluster.bootstrap, "create", "dc1", "--source-bootstrap", source.bootstrap,
                 "--topics", "events").returncode == 0
    assert wait_for(lambda: partitions_equal(source.bootstrap, cluster.bootstrap, "events", 3),
                    what="the first records on the three-node mirror")
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    assert all(len(p.replicas) == 3 for p in metadata.topics["events"].partitions.values())
    victim = cluster.node(metadata.topics["events"].partitions[0].leader)

    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(2000):  # being mirrored while the leader of the first mirror partition dies
        producer.produce("events", key=f"k{i}".encode(), value=b"v" * 200)
        producer.poll(0)
        if i == 500:
            victim.kill()
    assert producer.flush(60) == 0
    victim.start()
    produce_mixed(source.bootstrap, "events", "second")
    assert wait_for(lambda: partitions_equal(source.bootstrap, cluster.bootstrap, "events", 3), timeout_s=180,
                    what="the mirror to hold every batch after the kill")
    # the restarted node caught up as a follower: back in every mirror partition's in-sync replicas
    local = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert wait_for(lambda: all(len(p.isrs) == 3 for p in
                                local.list_topics(timeout=10).topics["events"].partitions.values()),
                    what="the restarted node back in the ISR of every mirror partition")
    assert committed_values(cluster.bootstrap, "events", 3) == committed_values(source.bootstrap, "events", 3)



def test_promote_while_producers_and_consumers_run(node_factory, cluster_factory):
    """A planned failover with the application live: the producer stops writing to the source and waits for
    the promotion, then writes to the destination; the consumer (kafka-python on the source, confluent-kafka on
    the destination) dies with some records processed but not committed, and its group resumes on the
    destination at its last commit. Every record arrives once, except the uncommitted window, read twice."""
    source = node_factory(name="source")
    destination = cluster_factory(3, {"default.replication.factor": "3", "min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    assert links(destination.bootstrap, "create", "dc1", "--source-bootstrap", source.bootstrap,
                 "--topics", "orders", "--groups", "app").returncode == 0
    total = 4000
    acked, failures, read_on_source = [], [], []
    switch, drained, promoted, source_consumer_stop = (threading.Event() for _ in range(4))

    def produce() -> None:
        seq = 0
        for bootstrap in (source.bootstrap, destination.bootstrap):
            producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

            def delivered(error, message):
                (failures if error else acked).append(error or int(message.value()))

            while seq < total and not (bootstrap == source.bootstrap and switch.is_set()):
                producer.produce("orders", value=str(seq).encode(), partition=seq % 2, on_delivery=delivered)
                producer.poll(0)
                seq += 1
                if seq % 100 == 0:  # an application's pace, not a bulk load
                    producer.flush(60)
            assert producer.flush(120) == 0, "records not delivered"
            if bootstrap == source.bootstrap:
                drained.set()
                assert promoted.wait(300), "no promotion"

    def consume_on_source() -> int:
        """Reads and commits every 50 records until told to stop, then dies without committing the rest; how
        many of its records are committed."""
        consumer = KafkaConsumer("orders", bootstrap_servers=source.bootstrap, group_id="app",
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        committed = 0
        while not source_consumer_stop.is_set():
            for records in consumer.poll(timeout_ms=200).values():
                read_on_source.extend(int(record.value) for record in records)
            if len(read_on_source) - committed >= 50:
                consumer.commit()
                committed = len(read_on_source)
        consumer.close(autocommit=False)
        return committed

    with ThreadPoolExecutor(2) as pool:
        producing, consuming = pool.submit(produce), pool.submit(consume_on_source)
        wait_for(lambda: len(read_on_source) >= 1000 or producing.done(), what="1000 records read on the source")
        source_consumer_stop.set()
        committed = consuming.result(120)
        switch.set()
        assert drained.wait(180) or producing.result(0)
        promotion = links(destination.bootstrap, "promote", "dc1", "--timeout", "60")
        assert promotion.returncode == 0 and "warning" not in promotion.stderr, promotion.stderr
        promoted.set()
        producing.result(300)
    assert not failures and sorted(acked) == list(range(total)), failures[:3]
    # the mirror holds the source's records at the same offsets, the destination's own writes after them
    for index in range(2):
        assert raw_partition(destination.bootstrap, "orders", index).startswith(
            raw_partition(source.bootstrap, "orders", index))

    consumer = Consumer({"bootstrap.servers": destination.bootstrap, "group.id": "app", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    read_on_destination = []
    while len(read_on_destination) < total - committed:
        message = consumer.poll(30)
        assert message is not None, f"stuck after {len(read_on_destination)} records"
        if not message.error():
            read_on_destination.append(int(message.value()))
    consumer.close()
    uncommitted = read_on_source[committed:]
    assert sorted(read_on_source[:committed] + read_on_destination) == list(range(total))
    assert set(read_on_destination) & set(read_on_source) == set(uncommitted)
    for index in range(2):  # in order within each partition
        mine = [seq for seq in read_on_destination if seq % 2 == index]
        assert mine == sorted(mine)


def test_a_three_node_source_loses_nodes_to_kill_9_during_mirroring(node_factory, cluster_factory):
    cluster = cluster_factory(3, {"default.replication.factor": "3", "min.insync.replicas": "2"})
    destination = node_factory(name="destination")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("events", 3, 3)])["events"].result(30)
    produce_mixed(cluster.bootstrap, "events", "first")
    assert links(destination.bootstrap, "create", "dc1", "--source-bootstrap", cluster.bootstrap,
                 "--topics", "events").returncode == 0
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for round_ in range(2):  # two source nodes die in turn while records flow
        leaders = {p.leader for p in AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(
            timeout=10).topics["events"].partitions.values()}
        # first node 1, the first address of the link's --source-bootstrap; then another partition leader
        victim = cluster.node(1 if round_ == 0 else min(leaders - {1} or leaders))
        for i in range(1500):
            producer.produce("events", key=f"k{round_}-{i}".encode(), value=b"v" * 200)
            producer.poll(0)
            if i == 500:
                victim.kill()
        assert producer.flush(120) == 0
        assert wait_for(lambda: partitions_equal(cluster.bootstrap, destination.bootstrap, "events", 3),
                        timeout_s=180, what=f"the mirror to follow the source while node {victim.settings['node.id']} "
                                            "is down")
        victim.start()
    produce_mixed(cluster.bootstrap, "events", "second")
    assert wait_for(lambda: partitions_equal(cluster.bootstrap, destination.bootstrap, "events", 3), timeout_s=180,
                    what="the mirror to hold every batch after the source's leaders died")
    assert committed_values(destination.bootstrap, "events", 3) == committed_values(cluster.bootstrap, "events", 3)
