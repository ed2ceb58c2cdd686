"""Consumer groups end to end: partitions split among members, rebalances on close and kill -9, committed
offsets across node restarts, assignment strategies and static membership, with several clients."""

import asyncio
import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.raw_client import RawClient
from tests.kafka_python_reads import take

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")
FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def group_node(node_factory):
    return node_factory(FAST_GROUPS)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(15) == 0


class Member:
    """A group member subprocess and what it has reported."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config):
        self.proc = subprocess.Popen([sys.executable, str(MEMBER_SCRIPT), bootstrap, group, topic, json.dumps(config)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.assignment: list[int] = []
        self.records: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self._events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._events.put(json.loads(line))

    def drain(self) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if "assignment" in event:
                self.assignment = event["assignment"]
            elif "error" in event:
                self.errors.append(event["error"])
            else:
                self.records.append(tuple(event["record"]))

    def state(self) -> str:
        """For a failure's message: the assignment, whether the process still runs, its last errors."""
        exit_code = self.proc.poll()
        return (f"{self.assignment} ({'running' if exit_code is None else f'exited {exit_code}'}; "
                f"{len(self.errors)} errors, last: {self.errors[-3:]})")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def wait_for_assignments(members: list[Member], expected_sizes: list[int], partitions: int, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for member in members:
            member.drain()
        sizes = sorted(len(m.assignment) for m in members)
        owned = [p for m in members for p in m.assignment]
        if sizes == sorted(expected_sizes) and sorted(owned) == list(range(partitions)):
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"assignments did not become {expected_sizes} in {timeout}s: "
                         + "; ".join(member.state() for member in members))


def test_members_split_partitions_and_take_over_on_close_and_kill_9(group_node):
    topic, group = "split-6", "splitters"
    create_topic(group_node.bootstrap, topic, 6)
    members = [Member(group_node.bootstrap, group, topic) for _ in range(3)]
    try:
        wait_for_assignments(members, [2, 2, 2], 6, timeout=60)
        produce(group_node.bootstrap, topic, 600, 6)
        deadline = time.monotonic() + 30
        while sum(len(m.records) for m in members) < 600 and time.monotonic() < deadline:
            time.sleep(0.1)
            for member in members:
                member.drain()
        consumed = [r for m in members for r in m.records]
        assert sorted(consumed) == sorted({(i % 6, i // 6) for i in range(600)})  # each record once

        members[0].close()  # a clean close leaves the group: the others take over within the rebalance
        moved_after = wait_for_assignments(members[1:], [3, 3], 6, timeout=30)
        assert moved_after < 15

        members[1].kill()  # no goodbye: the coordinator notices when the session times out (6 s)
        started = time.monotonic()
        wait_for_assignments(members[2:], [6], 6, timeout=40)
        assert time.monotonic() - started >= 3  # it took the session timeout, not an immediate leave

        produce(group_node.bootstrap, topic, 60, 6)
        deadline = time.monotonic() + 30
        while len(members[2].records) < 60 + len([r for r in consumed if r in members[2].records]) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
            members[2].drain()
        late = {r for r in members[2].records if r[1] >= 100}
        assert late == {(i % 6, 100 + i // 6) for i in range(60)}
    finally:
        for member in members:
            if member.proc.poll() is None:
                member.kill()


def poll_values(consumer: Consumer, count: int, timeout: float = 30) -> list[bytes]:
    values = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    return values


def test_two_groups_each_receive_every_record_and_an_extra_member_stays_idle(group_node):
    topic = "pubsub"
    create_topic(group_node.bootstrap, topic, 3)
    produce(group_node.bootstrap, topic, 90, 3)
    for group in ("readers-a", "readers-b"):
        consumer = Consumer({"bootstrap.servers": group_node.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        assert sorted(poll_values(consumer, 90)) == sorted(b"%d" % i for i in range(90))
        consumer.close()

    members = [Member(group_node.bootstrap, "four-on-three", topic) for _ in range(4)]
    try:
        wait_for_assignments(members, [0, 1, 1, 1], 3, timeout=60)
    finally:
        for member in members:
            member.kill()


@pytest.mark.parametrize("stop", ["restart", "kill"])
def test_committed_offsets_survive_a_node_restart(node_factory, stop):
    node = node_factory(FAST_GROUPS)
    topic, group = f"resume-{stop}", "resumers"
    create_topic(node.bootstrap, topic, 1)
    produce(node.bootstrap, topic, 100, 1)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = poll_values(consumer, 37)
    consumer.commit(asynchronous=False)
    consumer.close()
    assert len(values) == 37
    if stop == "kill":
        node.kill()
        node.start()
    else:
        node.restart()
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    assert consumer.committed([TopicPartition(topic, 0)], timeout=15)[0].offset == 37
    consumer.subscribe([topic])
    msg = None
    deadline = time.monotonic() + 30
    while msg is None and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
    assert msg is not None and msg.offset() == 37 and msg.value() == b"37"
    consumer.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_assignment_strategies_split_partitions(group_node, strategy):
    topic = f"strategy-{strategy}"
    create_topic(group_node.bootstrap, topic, 4)
    members = [Member(group_node.bootstrap, f"group-{strategy}", topic, **{"partition.assignment.strategy": strategy})
               for _ in range(2)]
    try:
        wait_for_assignments(members, [2, 2], 4, timeout=60)
        members[0].close()
        wait_for_assignments(members[1:], [4], 4, timeout=30)
    finally:
        for member in members:
            if member.proc.poll() is None:
                member.kill()


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(group_node):
    topic, group = "static", "static-group"
    create_topic(group_node.bootstrap, topic, 4)
    config = {"session.timeout.ms": 30000}
    members = [Member(group_node.bootstrap, group, topic, **{"group.instance.id": f"instance-{i}"}, **config)
               for i in range(2)]
    try:
        wait_for_assignments(members, [2, 2], 4, timeout=60)
        before = [list(m.assignment) for m in members]
        members[0].kill()  # a static member that comes back within its session keeps its identity
        members[0] = Member(group_node.bootstrap, group, topic, **{"group.instance.id": "instance-0"}, **config)
        wait_for_assignments(members, [2, 2], 4, timeout=60)
        assert [m.assignment for m in members] == before
    finally:
        for member in members:
            if member.proc.poll() is None:
                member.kill()


def test_kip_848_consumer_protocol_assigns_on_the_broker(node_factory):
    node = node_factory({**FAST_GROUPS, "group.consumer.session.timeout.ms": "6000",
                         "group.consumer.heartbeat.interval.ms": "500"})
    topic, group = "kip-848", "next-gen"
    create_topic(node.bootstrap, topic, 6)
    produce(node.bootstrap, topic, 300, 6)
    config = {"group.protocol": "consumer"}
    members = [Member(node.bootstrap, group, topic, **config) for _ in range(3)]
    try:
        wait_for_assignments(members, [2, 2, 2], 6, timeout=60)
        deadline = time.monotonic() + 30
        while sum(len(m.records) for m in members) < 300 and time.monotonic() < deadline:
            time.sleep(0.1)
            for member in members:
                member.drain()
        consumed = [r for m in members for r in m.records]
        assert sorted(consumed) == sorted({(i % 6, i // 6) for i in range(300)})
        members[0].close()
        wait_for_assignments(members[1:], [3, 3], 6, timeout=30)
        members[1].kill()
        wait_for_assignments(members[2:], [6], 6, timeout=40)
        with RawClient(node.bootstrap) as client:
            described = client.request(69, 0, {"group_ids": [group], "include_authorized_operations": False})
        (entry,) = described["groups"]
        assert entry["error_code"] == 0 and len(entry["members"]) == 1
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        listed = admin.list_consumer_groups().result(15)
        assert [(g.group_id, g.type) for g in listed.valid if g.group_id == group] == [
            (group, ConsumerGroupType.CONSUMER)]
    finally:
        for member in members:
            if member.proc.poll() is None:
                member.kill()


def test_kafka_python_group_commits_and_resumes(group_node):
    from kafka import KafkaConsumer

    topic = f"kafka-python-group-{uuid.uuid4().hex[:6]}"
    create_topic(group_node.bootstrap, topic, 2)
    produce(group_node.bootstrap, topic, 40, 2)
    consumer = KafkaConsumer(topic, bootstrap_servers=group_node.bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10000)
    records = []
    for record in consumer:
        records.append(record)
        if len(records) == 40:
            break
    assert len(records) == 40
    consumer.commit()
    consumer.close()
    produce(group_node.bootstrap, topic, 10, 2)
    consumer = KafkaConsumer(topic, bootstrap_servers=group_node.bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    rest = [r.value for r in take(consumer, 10)]
    consumer.close()
    assert sorted(rest) == sorted(b"%d" % i for i in range(10))


def test_aiokafka_group_consumes_every_record(group_node):
    from aiokafka import AIOKafkaConsumer

    topic = f"aiokafka-group-{uuid.uuid4().hex[:6]}"
    create_topic(group_node.bootstrap, topic, 3)
    produce(group_node.bootstrap, topic, 30, 3)

    async def scenario():
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=group_node.bootstrap, group_id="aio-group",
                                      auto_offset_reset="earliest") for _ in range(2)]
        for consumer in consumers:
            await consumer.start()
        seen = []
        deadline = time.monotonic() + 30
        try:
            while len(seen) < 30 and time.monotonic() < deadline:
                for consumer in consumers:
                    batch = await consumer.getmany(timeout_ms=200)
                    seen += [r.value for records in batch.values() for r in records]
        finally:
            for consumer in consumers:
                await consumer.stop()
        return seen

    assert sorted(asyncio.run(scenario())) == sorted(b"%d" % i for i in range(30))
