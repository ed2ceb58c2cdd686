"""A three-node cluster: replicated topics, leader failover, controlled shutdown, ISR and min.insync.replicas,
driven by confluent-kafka, kafka-python and kcat. Every test runs twice (the `security` fixture): with
PLAINTEXT listeners, and with SASL_SSL on every listener, clients', replication's and the controllers'."""

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

pytestmark = pytest.mark.timeout(300)


def create_topic(cluster, name: str, partitions: int = 3, replication: int = 3, bootstrap: str | None = None,
                 **configs) -> None:
    """Through every broker of the cluster, or the ones `bootstrap` names (as do the helpers below)."""
    admin = AdminClient(cluster.client_settings(bootstrap=bootstrap))
    futures = admin.create_topics([NewTopic(name, partitions, replication, config={k.replace("_", "."): str(v)
                                                                                   for k, v in configs.items()})])
    futures[name].result(30)


def partition_states(cluster, topic: str, bootstrap: str | None = None) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), as Metadata reports it."""
    admin = AdminClient(cluster.client_settings(bootstrap=bootstrap))
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in metadata.topics[topic].partitions.values()}


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except KafkaException as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def produce_numbered(cluster, topic: str, start: int, count: int, bootstrap: str | None = None) -> list[tuple[int, int]]:
    """Idempotent acks=all writes of values start..start+count-1, keyed round the partitions; the acknowledged
    (partition, offset) of each, in order. Fails if any write is not acknowledged."""
    producer = Producer(cluster.client_settings({"enable.idempotence": True, "acks": "all",
                                                 "message.timeout.ms": 60000, "retry.backoff.ms": 100}, bootstrap))
    acknowledged, failed = {}, []

    def delivered(err, msg):
        if err is not None:
            failed.append(err)
        else:
            acknowledged[int(msg.value())] = (msg.partition(), msg.offset())

    for value in range(start, start + count):
        producer.produce(topic, value=str(value).encode(), key=str(value % 7).encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not failed, failed
    return [acknowledged[v] for v in range(start, start + count)]


def read_all_kafka_python(cluster, topic: str, partitions: int,
                          bootstrap: str | None = None) -> dict[int, list[tuple[int, int]]]:
    consumer = KafkaConsumer(bootstrap_servers=(bootstrap or cluster.bootstrap).split(","), enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000, **cluster.kafka_python_config)
    assigned = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(assigned)
    read: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < ends[tp] for tp in assigned) and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            read[tp.partition] += [(r.offset, int(r.value)) for r in records]
    consumer.close()
    return read


def test_acknowledged_writes_survive_leader_kill_and_the_isr_heals(cluster_factory, security):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"}, security=security)
    create_topic(cluster, "orders")
    first = produce_numbered(cluster, "orders", 0, 300)

    victim = partition_states(cluster, "orders")[0][0]
    cluster.node(victim).kill()
    survivors = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes, 1) if i != victim)
    moved = wait_for(lambda: all(leader not in (victim, -1) for leader, _, _ in
                                 partition_states(cluster, "orders", survivors).values()), 20, "leaders to move")
    assert moved
    second = produce_numbered(cluster, "orders", 300, 300, survivors)  # the clients follow the new leaders

    read = read_all_kafka_python(cluster, "orders", 3, survivors)
    values = [value for records in read.values() for _, value in records]
    assert sorted(values) == list(range(600)), "lost or duplicated records"
    for partition, offset in first + second:
        assert offset in {o for o, _ in read[partition]}
    for records in read.values():
        offsets = [o for o, _ in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)

    cluster.node(victim).start()
    wait_for(lambda: all(len(isr) == 3 for _, _, isr in partition_states(cluster, "orders").values()),
             30, "the restarted node to rejoin every ISR")
    # The restarted replica holds the same log: once it leads, kcat reads it all from there.
    out = subprocess.run(["kcat", "-b", cluster.node(victim).bootstrap, *cluster.kcat_args, "-t", "orders", "-C", "-e",
                          "-q", "-f", "%s\n"], capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert sorted(map(int, out)) == list(range(600))


def test_controlled_shutdown_moves_leadership_at_once(cluster_factory, security):
    # With a session timeout of 10 minutes, only the controlled shutdown can move leadership within the wait.
    cluster = cluster_factory(3, {"broker.session.timeout.ms": "600000"}, security=security)
    create_topic(cluster, "moves", partitions=6)
    led_by_2 = [p for p, (leader, _, _) in partition_states(cluster, "moves").items() if leader == 2]
    assert led_by_2
    cluster.node(2).stop(timeout=120)
    assert cluster.node(2).proc.returncode == 0, "the node did not shut down on its own"
    others = f"{cluster.node(1).bootstrap},{cluster.node(3).bootstrap}"
    states = wait_for(lambda: (lambda s: s if all(s[p][0] in (1, 3) for p in led_by_2) else None)(
        partition_states(cluster, "moves", others)), 120, "leadership to move")
    for leader, replicas, isr in states.values():
        assert 2 not in isr and leader in isr and len(replicas) == 3


def test_min_insync_replicas_refuses_acks_all_writes(cluster_factory, security):
    cluster = cluster_factory(3, security=security)
    create_topic(cluster, "strict", partitions=1, min_insync_replicas=3)
    produce_numbered(cluster, "strict", 0, 10)
    leader = partition_states(cluster, "strict")[0][0]
    follower = next(i for i in (1, 2, 3) if i != leader)
    cluster.node(follower).kill()
    others = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes, 1) if i != follower)
    wait_for(lambda: len(partition_states(cluster, "strict", others)[0][2]) == 2, 30, "the ISR to shrink")
    producer = Producer(cluster.client_settings({"acks": "all", "message.timeout.ms": 3000, "retries": 0}, others))
    errors = []
    producer.produce("strict", b"refused", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None and errors[0].name() == "NOT_ENOUGH_REPLICAS"
    consumer = Consumer(cluster.client_settings({"group.id": "strict-check", "auto.offset.reset": "earliest"}, others))
    consumer.assign([__import__("confluent_kafka").TopicPartition("strict", 0, 0)])
    seen = []
    deadline = time.monotonic() + 20
    while len(seen) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen.append(message.value())
    consumer.close()
    assert sorted(int(v) for v in seen) == list(range(10))


def test_admin_requests_reach_a_new_active_controller(cluster_factory, security):
    cluster = cluster_factory(3, security=security)
    controller = AdminClient(cluster.client_settings()).list_topics(timeout=10).controller_id
    cluster.node(controller).kill()
    others = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes, 1) if i != controller)
    # A new controller answers, and fences the dead node once its session expires (broker.session.timeout.ms).
    wait_for(lambda: (lambda m: m.controller_id not in (controller, -1) and controller not in m.brokers)(
        AdminClient(cluster.client_settings(bootstrap=others)).list_topics(timeout=5)), 20, "a new controller")
    create_topic(cluster, "after-failover", partitions=2, replication=2, bootstrap=others)
    states = partition_states(cluster, "after-failover", others)
    assert all(controller not in replicas and leader in replicas for leader, replicas, _ in states.values())


def test_kcat_producer_follows_a_leader_change(cluster_factory, security):
    cluster = cluster_factory(3, {"min.insync.replicas": "2"}, security=security)
    create_topic(cluster, "piped", partitions=1)
    leader = partition_states(cluster, "piped")[0][0]
    survivors = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes, 1) if i != leader)
    kcat = subprocess.Popen(["kcat", "-b", survivors, *cluster.kcat_args, "-t", "piped", "-P", "-p", "0",
                             "-X", "acks=all", "-X", "enable.idempotence=true", "-X", "message.timeout.ms=60000"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for i in range(100):
        kcat.stdin.write(f"{i}\n")
    kcat.stdin.flush()
    time.sleep(1)
    cluster.node(leader).kill()
    for i in range(100, 200):
        kcat.stdin.write(f"{i}\n")
    kcat.stdin.close()
    assert kcat.wait(90) == 0, kcat.stderr.read()
    out = subprocess.run(["kcat", "-b", survivors, *cluster.kcat_args, "-t", "piped", "-C", "-e", "-q", "-f", "%s\n"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert sorted(map(int, out)) == list(range(200))


def test_preferred_leaders_return_by_election_and_by_automatic_balancing(cluster_factory, security):
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as Partition

    cluster = cluster_factory(3, {"leader.imbalance.check.interval.seconds": "2"}, security=security)
    create_topic(cluster, "balanced", partitions=3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in partition_states(cluster, "balanced").items()}
    victim = preferred[0]
    cluster.node(victim).stop()  # controlled shutdown: its leaderships move at once
    cluster.node(victim).start()
    wait_for(lambda: all(len(isr) == 3 for _, _, isr in partition_states(cluster, "balanced").values()),
             30, "the restarted node to catch up")
    admin = AdminClient(cluster.client_settings())
    result = admin.elect_leaders(ElectionType.PREFERRED, [Partition("balanced", 0)]).result(30)
    errors = {(tp.topic, tp.partition): err for tp, err in result.items()}
    states = partition_states(cluster, "balanced")
    # Either this election moved it, or the automatic balancing (every 2 s here) did so first.
    assert states[0][0] == victim
    assert errors[("balanced", 0)] is None or errors[("balanced", 0)].name() == "ELECTION_NOT_NEEDED"
    again = admin.elect_leaders(ElectionType.PREFERRED, [Partition("balanced", 0)]).result(30)
    assert next(iter(again.values())).name() == "ELECTION_NOT_NEEDED"

    cluster.node(victim).stop()
    cluster.node(victim).start()
    wait_for(lambda: {p: leader for p, (leader, _, _) in partition_states(cluster, "balanced").items()}
             == preferred, 30, "automatic balancing to restore the preferred leaders")


def test_group_coordinator_moves_with_its_offsets_partition(cluster_factory, security):
    from confluent_kafka import TopicPartition as Partition

    cluster = cluster_factory(3, {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"},
                              security=security)
    create_topic(cluster, "work", partitions=2)
    produce_numbered(cluster, "work", 0, 100)
    settings = {"group.id": "workers", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumer = Consumer(cluster.client_settings(settings))
    consumer.subscribe(["work"])
    seen = []
    while len(seen) < 50:
        message = consumer.poll(1)
        if message is not None and not message.error():
            seen.append(int(message.value()))
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed([Partition("work", 0), Partition("work", 1)], 10)}
    assert sum(o for o in committed.values() if o >= 0) == len(seen)  # -1001: nothing committed there
    consumer.close()

    offsets_leaders = {p: leader for p, (leader, _, _) in partition_states(cluster, "__consumer_offsets").items()}
    admin = AdminClient(cluster.client_settings())  # must outlive its futures
    coordinator = admin.describe_consumer_groups(["workers"])["workers"].result(10).coordinator.id
    assert coordinator in offsets_leaders.values()
    cluster.node(coordinator).kill()
    survivors = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes, 1) if i != coordinator)

    consumer = Consumer(cluster.client_settings(settings, survivors))
    wait_for(lambda: {tp.partition: tp.offset for tp in consumer.committed(
        [Partition("work", 0), Partition("work", 1)], 5)} == committed, 30, "the committed offsets at a new coordinator")
    consumer.subscribe(["work"])
    rest = []
    deadline = time.monotonic() + 60
    while len(rest) < 50 and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and not message.error():
            rest.append(int(message.value()))
    consumer.close()
    assert sorted(seen + rest) == list(range(100)), "the group resumed where it committed, no gap, no repeat"


def test_reassignment_moves_a_partition_to_other_brokers(cluster_factory, security):
    from kafka.admin import KafkaAdminClient

    cluster = cluster_factory(4, {"min.insync.replicas": "2"}, security=security)
    create_topic(cluster, "moving", partitions=1, replication=3)
    produce_numbered(cluster, "moving", 0, 500)
    _, replicas, _ = partition_states(cluster, "moving")[0]
    newcomer = next(b for b in (1, 2, 3, 4) if b not in replicas)
    target = [newcomer, *replicas[1:]]  # the newcomer replaces the leader
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","), **cluster.kafka_python_config)
    partition = TopicPartition("moving", 0)
    assert admin.alter_partition_reassignments({partition: target}) == {partition: None}
    wait_for(lambda: (lambda s: sorted(s[1]) == sorted(target) and sorted(s[2]) == sorted(target))(
        partition_states(cluster, "moving")[0]), 30, "the move to settle")
    assert admin.list_partition_reassignments() == {}
    admin.close()
    assert not (cluster.node(replicas[0]).data_dir / "moving-0").exists(), "the leaving replica deleted its log"
    produce_numbered(cluster, "moving", 500, 100)
    cluster.node(replicas[1]).stop()  # leadership may now land on the newcomer, which must hold everything
    others = ",".join(n.bootstrap for i, n in enumerate(cluster.nodes, 1) if i != replicas[1])
    out = subprocess.run(["kcat", "-b", others, *cluster.kcat_args, "-t", "moving", "-C", "-e", "-q", "-f", "%s\n"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert sorted(map(int, out)) == list(range(600))


def test_a_node_back_from_downtime_catches_up_from_a_metadata_snapshot(cluster_factory, security):
    cluster = cluster_factory(3, {"metadata.log.max.record.bytes.between.snapshots": "4000"}, security=security)
    cluster.node(3).stop()
    survivors = f"{cluster.node(1).bootstrap},{cluster.node(2).bootstrap}"
    admin = AdminClient(cluster.client_settings(bootstrap=survivors))
    names = [f"made-while-away-{i}" for i in range(30)]
    for future in admin.create_topics([NewTopic(n, 2, 2) for n in names]).values():
        future.result(30)
    snapshots = sorted((cluster.node(1).data_dir / "__cluster_metadata-0").glob("snapshot-*"))
    assert snapshots, "the leader's metadata grew past the snapshot threshold"
    cluster.node(3).start()
    direct = AdminClient(cluster.client_settings(bootstrap=cluster.node(3).bootstrap))
    wait_for(lambda: set(names) <= set(direct.list_topics(timeout=10).topics), 30, "node 3 to know every topic")
    assert "installed" in cluster.node(3).log_text()  # from the leader, by FetchSnapshot
    create_topic(cluster, "after-catch-up", partitions=3, replication=3)
    produce_numbered(cluster, "after-catch-up", 0, 50)
    wait_for(lambda: all(len(isr) == 3 for _, _, isr in partition_states(cluster, "after-catch-up").values()),
             30, "node 3 in every ISR")
    cluster.node(3).restart()  # and it starts again from its own snapshot
    wait_for(lambda: set(names) <= set(AdminClient(cluster.client_settings(bootstrap=cluster.node(3).bootstrap))
                                       .list_topics(timeout=10).topics), 30, "node 3 to know every topic again")


def test_separate_controller_and_broker_nodes(cluster_factory, security):
    """Three controller-only voters and three broker-only nodes (observers of the metadata quorum)."""
    cluster = cluster_factory(roles=["controller"] * 3 + ["broker"] * 3, settings={"min.insync.replicas": "2"},
                              security=security)
    admin = AdminClient(cluster.client_settings())
    assert sorted(admin.list_topics(timeout=10).brokers) == [4, 5, 6], "controllers are not brokers"
    create_topic(cluster, "split", partitions=3)
    produce_numbered(cluster, "split", 0, 100)
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "odradek", "cluster", "status", "--bootstrap-server", cluster.brokers[0].bootstrap,
         *cluster.cli_args, "-o", "json"], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert [v["id"] for v in status["quorum"]["voters"]] == [1, 2, 3]
    assert [o["id"] for o in status["quorum"]["observers"]] == [4, 5, 6]
    assert [b["id"] for b in status["brokers"]] == [4, 5, 6] and status["under_replicated"] == []
    assert sum(b["leaders"] for b in status["brokers"]) == 3  # the partitions of "split", the only topic
    leader = AdminClient(cluster.client_settings()).list_topics(timeout=10).controller_id
    assert leader in (4, 5, 6)  # clients are pointed at a broker, which forwards to the active controller
    quorum_leader = next(i for i in (1, 2, 3) if "is the active controller" in cluster.node(i).log_text())
    cluster.node(quorum_leader).kill()
    create_topic(cluster, "after-controller-failover", partitions=1)
    victim = partition_states(cluster, "split")[0][0]
    cluster.node(victim).kill()
    survivors = ",".join(n.bootstrap for n in cluster.brokers if n is not cluster.node(victim))
    produce_numbered(cluster, "split", 100, 100, survivors)
    read = read_all_kafka_python(cluster, "split", 3, survivors)
    assert sorted(v for records in read.values() for _, v in records) == list(range(200))
