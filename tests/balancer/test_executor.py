"""The executor on a real three-node cluster: a topic crowded onto one node is spread out by a proposal executed
with bounded concurrency and a replication throttle while an idempotent producer and a read_committed consumer
run; and an executor that dies midway is picked up by a new one from `__balancer_execution`, then stopped and
resumed."""

import functools
import threading
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka import KafkaProducer

from odradek.balancer import ClusterModel, Node, Partition, propose
from odradek.balancer.execution import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    ExecutionLimits,
)
from odradek.balancer.executor import EXECUTION_TOPIC, Executor
from odradek.protocol.errors import ErrorCode
from tests.sql.server_process import wait_for

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
THROTTLE_KEYS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
RATE_KEYS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)


def cluster_model(admin: AdminClient, topics: set[str]) -> ClusterModel:
    """The model of the topics from metadata alone: replicas and leaders, sizes and rates 0."""
    metadata = admin.list_topics(timeout=30)
    nodes = tuple(Node(broker_id) for broker_id in sorted(metadata.brokers))
    partitions = tuple(
        Partition(name, index, replicas=tuple(p.replicas), leader=p.leader if p.leader >= 0 else None)
        for name in sorted(topics) for index, p in sorted(metadata.topics[name].partitions.items()))
    return ClusterModel(nodes, partitions)


def crowded_topic(cluster, admin: AdminClient, replicas: tuple[int, ...] = (1,)) -> str:
    """A topic whose partitions all have `replicas`, led by the first."""
    topic = f"crowded-{uuid.uuid4().hex[:6]}"
    new_topic = NewTopic(topic, PARTITIONS, replica_assignment=[list(replicas)] * PARTITIONS)
    admin.create_topics([new_topic])[topic].result(30)

    def led_by_the_first():
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        return all(p.leader == replicas[0] for p in partitions)

    wait_for(led_by_the_first, 60, "the crowded topic's leaders")
    return topic


def counts(admin: AdminClient, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    metadata = admin.list_topics(topic, timeout=30)
    replicas = {b: 0 for b in metadata.brokers}
    leaders = {b: 0 for b in metadata.brokers}
    for p in metadata.topics[topic].partitions.values():
        for r in p.replicas:
            replicas[r] += 1
        leaders[p.leader] += 1
    return replicas, leaders


def throttle_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    """The throttle configs set on the topic and on every broker, by "resource/key"."""
    resources = [ConfigResource(ResourceType.TOPIC, topic)] + [
        ConfigResource(ResourceType.BROKER, str(b)) for b in (1, 2, 3)]
    found = {}
    for resource in resources:  # librdkafka takes one broker resource per call
        for key, entry in admin.describe_configs([resource])[resource].result(30).items():
            if key in THROTTLE_KEYS + RATE_KEYS and entry.value not in (None, "") and not entry.is_default:
                found[f"{resource.name}/{key}"] = entry.value
    return found


class Traffic:
    """An idempotent acks=all producer (kafka-python) writing numbered records to every partition, and a
    read_committed consumer (confluent-kafka) reading them, both in threads until stopped."""

    def __init__(self, cluster, topic: str):
        self.cluster, self.topic = cluster, topic
        self.acked: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
        self.read: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._consumer = threading.Thread(target=self._consume, daemon=True)

    def start(self) -> "Traffic":
        self._producing.set()
        self._consuming.set()
        self._producer.start()
        self._consumer.start()
        return self

    def stop_producing(self) -> None:
        self._producing.clear()
        self._producer.join(60)

    def stop_consuming(self) -> None:
        self._consuming.clear()
        self._consumer.join(60)

    def produced(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def _produce(self) -> None:
        # kafka-python's idempotent producer: librdkafka's can write a batch twice when partition leaders move
        # (confluentinc/librdkafka#4953: a skipped sequence bumps the producer epoch, and batches the old leader
        # wrote but answered NOT_LEADER_OR_FOLLOWER are sent again in the new epoch, new records to any broker)
        producer = KafkaProducer(bootstrap_servers=self.cluster.bootstrap.split(","), enable_idempotence=True,
                                 acks="all", linger_ms=5, **self.cluster.kafka_python_config)

        def delivered(value: str, metadata) -> None:
            self.acked[metadata.partition].append((metadata.offset, value))

        sequence = 0
        while self._producing.is_set():
            for partition in range(PARTITIONS):
                value = f"{partition}:{sequence}"
                future = producer.send(self.topic, value.encode(), partition=partition)
                future.add_callback(functools.partial(delivered, value))
                future.add_errback(lambda error: self.errors.append(str(error)))
            sequence += 1
            time.sleep(0.02)
        producer.flush(60)
        producer.close(10)

    def _consume(self) -> None:
        consumer = Consumer(self.cluster.client_settings({
            "group.id": f"reader-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest"}))
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while self._consuming.is_set():
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            self.read[message.partition()].append(message.value().decode())
        consumer.close()

    def check_exactly_once_in_order(self) -> None:
        assert not self.errors
        for partition in range(PARTITIONS):
            expected = [value for _, value in sorted(self.acked[partition])]
            assert self.read[partition] == expected, f"partition {partition}"


def assert_balanced(admin: AdminClient, topic: str) -> None:
    replicas, leaders = counts(admin, topic)
    assert max(replicas.values()) - min(replicas.values()) <= 1, replicas
    assert max(leaders.values()) - min(leaders.values()) <= 1, leaders


def finish_traffic(traffic: Traffic) -> None:
    traffic.stop_producing()
    total = traffic.produced()
    wait_for(lambda: sum(len(v) for v in traffic.read.values()) >= total, 60, "the consumer to read every record")
    time.sleep(1)  # duplicates, if any, would come now
    traffic.stop_consuming()
    traffic.check_exactly_once_in_order()


@pytest.mark.parametrize("replicas", [(1,), (1, 2)], ids=["all-on-one-node", "rf2-led-by-one-node"])
def test_executor_spreads_a_crowded_topic_with_throttles_while_clients_run(cluster_factory, replicas):
    cluster = cluster_factory(3, {"min.insync.replicas": "1"})
    admin = AdminClient(cluster.client_settings())
    topic = crowded_topic(cluster, admin, replicas)
    traffic = Traffic(cluster, topic).start()
    wait_for(lambda: traffic.produced() > 100, 60, "records before the execution")
    proposal = propose(cluster_model(admin, {topic}))
    assert proposal.replica_moves, "the crowded topic needs moves"
    executor = Executor(cluster.bootstrap, client_config=cluster.client_config)
    try:
        executor.start(proposal, ExecutionLimits(max_moves_per_node=2, max_moves_total=2,
                                                 throttle_bytes_per_s=10_000_000))
        progress = executor.step()
        assert progress.moves_in_flight == 2
        throttles = throttle_configs(admin, topic)
        assert throttles[f"{topic}/{LEADER_THROTTLED_REPLICAS}"]
        assert throttles[f"{topic}/{FOLLOWER_THROTTLED_REPLICAS}"]
        assert throttles[f"1/{LEADER_THROTTLED_RATE}"] == "10000000"
        while not progress.finished:
            assert progress.moves_in_flight <= 2
            time.sleep(0.3)
            progress = executor.step()
        assert (progress.moves_done, progress.moves_failed) == (len(proposal.replica_moves), 0)
        assert progress.leadership_failed == 0 and progress.eta_ms == 0
        assert progress.leadership_done == len(proposal.leadership_changes)
    finally:
        executor.close()
    wait_for(lambda: throttle_configs(admin, topic) == {}, 30, "the throttles to be removed")
    assert_balanced(admin, topic)
    finish_traffic(traffic)


def test_a_new_executor_picks_up_a_half_done_execution_from_the_internal_topic(cluster_factory, security):
    cluster = cluster_factory(3, {"min.insync.replicas": "1"}, security=security)
    admin = AdminClient(cluster.client_settings())
    topic = crowded_topic(cluster, admin)
    traffic = Traffic(cluster, topic).start()
    proposal = propose(cluster_model(admin, {topic}))
    limits = ExecutionLimits(max_moves_per_node=1, max_moves_total=1, throttle_bytes_per_s=10_000_000)
    first = Executor(cluster.bootstrap, client_config=cluster.client_config)
    first.start(proposal, limits)
    progress = first.step()
    wait_for(lambda: first.step().moves_done >= 1, 60, "a first move to finish")
    first.close()  # the executor dies with moves left and a move maybe in flight
    assert first.execution.progress(0).moves_done < len(proposal.replica_moves)
    assert EXECUTION_TOPIC in admin.list_topics(timeout=10).topics

    second = Executor(cluster.bootstrap, client_config=cluster.client_config)
    try:
        recovered = second.recover()
        assert recovered is not None and recovered.id == first.execution.id
        assert recovered.status == "running" and recovered.progress(0).moves_done >= 1
        second.stop()  # the move in flight finishes, no other starts, the throttles go
        progress = second.run_until_done(poll_interval=0.3, timeout=90)
        assert progress.status == "stopped" and progress.moves_in_flight == 0
        wait_for(lambda: throttle_configs(admin, topic) == {}, 30, "the throttles to be removed on stop")
        assert second.recover() is None, "a stopped execution is not picked up, only resumed"
        assert second.resume().status == "running"
        progress = second.run_until_done(poll_interval=0.3, timeout=90)
        assert progress.finished and progress.moves_done == len(proposal.replica_moves)
        assert second.recover() is None and second.resume() is None, "nothing left to pick up"
    finally:
        second.close()
    wait_for(lambda: throttle_configs(admin, topic) == {}, 30, "the throttles to be removed")
    assert_balanced(admin, topic)
    finish_traffic(traffic)


def test_an_election_the_cluster_finds_not_needed_counts_as_done():
    """Kafka 4.0 answers a preferred election of a partition its preferred leader leads with ELECTION_NOT_NEEDED
    (a KafkaError per partition in confluent-kafka's answer): the leadership change is done, not failed."""
    from confluent_kafka import KafkaError as ClientError

    class Answer:
        def __init__(self, results):
            self.results = results

        def result(self, timeout):
            return self.results

    class Admin:
        def elect_leaders(self, election_type, partitions):
            return Answer({partitions[0]: ClientError(ErrorCode.ELECTION_NOT_NEEDED),
                           partitions[1]: ClientError(ErrorCode.NOT_CONTROLLER)})

    executor = Executor.__new__(Executor)  # no cluster: only the answer's reading is under test
    executor._admin = Admin()
    errors = executor._elect((("t", 0), ("t", 1)))
    assert errors[("t", 0)] is None and errors[("t", 1)] is not None
