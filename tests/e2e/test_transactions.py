"""Transactions end to end: transactional producers of three clients, commit/abort markers, read_committed
fetches and the LSO, zombie fencing, timeouts, exactly-once consume-transform-produce through kill -9,
the admin APIs (DescribeTransactions, ListTransactions, DescribeProducers) and bad requests."""

import asyncio
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch
from tests.e2e.raw_client import RawClient

READ_COMMITTED, READ_UNCOMMITTED = 1, 0


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def txn_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(node, name: str, partitions: int = 1) -> None:
    client = AdminClient({"bootstrap.servers": node.bootstrap})
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def txn_producer(node, transactional_id: str, **config) -> Producer:
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, **config})
    producer.init_transactions(30)
    return producer


def read_all(node, topic: str, partitions: list[int], isolation: str, timeout: float = 20.0) -> list[tuple]:
    """Every record up to the end (the LSO for read_committed) as (partition, offset, value) tuples."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    records, at_end = [], set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"no end of {topic} within {timeout}s; read {len(records)}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            records.append((msg.partition(), msg.offset(), msg.value().decode()))
    finally:
        consumer.close()
    return records


def values(records: list[tuple], partition: int | None = None) -> list[str]:
    return [v for p, _, v in records if partition is None or p == partition]


def list_offset(node, topic: str, partition: int, isolation: int, timestamp: int = -1) -> int:
    with RawClient(node.bootstrap) as client:
        response = client.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                            "timestamp": timestamp}]}]})
    result = response["topics"][0]["partitions"][0]
    assert result["error_code"] == 0, result
    return result["offset"]


def describe_txn(node, transactional_id: str) -> dict:
    with RawClient(node.bootstrap) as client:
        response = client.request(65, 0, {"transactional_ids": [transactional_id]})
    (state,) = response["transaction_states"]
    return state


def list_txns(node, states: list[str] = (), pids: list[int] = ()) -> dict:
    with RawClient(node.bootstrap) as client:
        return client.request(66, 1, {"state_filters": list(states), "producer_id_filters": list(pids),
                                      "duration_filter": -1})


def describe_producers(node, topic: str, partition: int) -> dict:
    with RawClient(node.bootstrap) as client:
        response = client.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    return response["topics"][0]["partitions"][0]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what} not within {timeout}s"
        time.sleep(interval)


def ongoing_state_with_partitions(node, tid: str, topic: str, partitions: list[int]) -> dict:
    state = describe_txn(node, tid)
    assert state["error_code"] == 0, state
    assert state["transaction_state"] == "Ongoing", state
    listed = {t["topic"]: sorted(t["partitions"]) for t in state["topics"]}
    assert listed.get(topic) == partitions, state
    return state


# 1 ------------------------------------------------------------------------------------------------------------


def test_commit_abort_commit_read_committed_sees_only_committed(shared_node):
    topic = topic_name("txn-cac")
    create_topic(shared_node, topic, partitions=2)
    producer = txn_producer(shared_node, txn_id("cac"))
    expected = {0: [], 1: []}
    for label, commit in (("c1", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(20):
            value = f"{label}-{i}"
            producer.produce(topic, value=value.encode(), partition=i % 2)
            if commit:
                expected[i % 2].append(value)
        producer.flush(15)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    committed = read_all(shared_node, topic, [0, 1], "read_committed")
    for partition in (0, 1):
        assert values(committed, partition) == expected[partition]
    uncommitted = read_all(shared_node, topic, [0, 1], "read_uncommitted")
    assert sorted(values(uncommitted)) == sorted([f"{label}-{i}" for label in ("c1", "a1", "c2") for i in range(20)])
    # Three markers per partition sit between the data: 30 data records + 3 control records per partition.
    for partition in (0, 1):
        assert list_offset(shared_node, topic, partition, READ_UNCOMMITTED) == 33
        assert list_offset(shared_node, topic, partition, READ_COMMITTED) == 33

    if shutil.which("kcat"):
        for isolation, want in (("read_committed", expected[0] + expected[1]), ("read_uncommitted", None)):
            out = subprocess.run(["kcat", "-b", shared_node.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                                  "-X", f"isolation.level={isolation}", "-f", "%p %s\n"],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            lines = [line.split(" ", 1) for line in out.stdout.splitlines() if line]
            if want is None:
                assert len(lines) == 60
            else:
                for partition in (0, 1):
                    assert [v for p, v in lines if int(p) == partition] == expected[partition]


# 2 ------------------------------------------------------------------------------------------------------------


def test_open_transaction_is_invisible_to_read_committed_until_commit(shared_node):
    topic = topic_name("txn-open")
    create_topic(shared_node, topic)
    plain = Producer({"bootstrap.servers": shared_node.bootstrap})
    for i in range(3):
        plain.produce(topic, value=f"plain-{i}".encode(), partition=0)
    assert plain.flush(15) == 0

    producer = txn_producer(shared_node, txn_id("open"))
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"txn-{i}".encode(), partition=0)
    assert producer.flush(15) == 0

    # The open transaction starts at offset 3: that is the LSO; the high watermark is past its records.
    assert list_offset(shared_node, topic, 0, READ_UNCOMMITTED) == 8
    assert list_offset(shared_node, topic, 0, READ_COMMITTED) == 3
    assert values(read_all(shared_node, topic, [0], "read_committed")) == [f"plain-{i}" for i in range(3)]
    assert values(read_all(shared_node, topic, [0], "read_uncommitted")) == \
        [f"plain-{i}" for i in range(3)] + [f"txn-{i}" for i in range(5)]
    time.sleep(1)
    assert values(read_all(shared_node, topic, [0], "read_committed")) == [f"plain-{i}" for i in range(3)]

    producer.commit_transaction(30)
    wait_for(lambda: list_offset(shared_node, topic, 0, READ_COMMITTED) == 9, 10, "LSO past the commit marker")
    assert values(read_all(shared_node, topic, [0], "read_committed")) == \
        [f"plain-{i}" for i in range(3)] + [f"txn-{i}" for i in range(5)]


def test_interleaved_transactions_of_two_producers_on_one_partition(shared_node):
    topic = topic_name("txn-interleave")
    create_topic(shared_node, topic)
    first, second = txn_producer(shared_node, txn_id("first")), txn_producer(shared_node, txn_id("second"))

    def send(producer, value):
        producer.produce(topic, value=value.encode(), partition=0)
        assert producer.flush(15) == 0

    first.begin_transaction()
    second.begin_transaction()
    send(first, "a0")   # 0
    send(first, "a1")   # 1
    send(second, "b0")  # 2
    send(second, "b1")  # 3
    send(first, "a2")   # 4
    assert list_offset(shared_node, topic, 0, READ_COMMITTED) == 0
    first.commit_transaction(30)  # marker 5; the second producer's transaction still holds the LSO at 2
    wait_for(lambda: list_offset(shared_node, topic, 0, READ_UNCOMMITTED) == 6, 10, "commit marker")
    assert list_offset(shared_node, topic, 0, READ_COMMITTED) == 2
    assert values(read_all(shared_node, topic, [0], "read_committed")) == ["a0", "a1"]
    second.abort_transaction(30)  # marker 6
    wait_for(lambda: list_offset(shared_node, topic, 0, READ_COMMITTED) == 7, 10, "LSO after the abort")
    assert values(read_all(shared_node, topic, [0], "read_committed")) == ["a0", "a1", "a2"]

    second.begin_transaction()
    send(second, "b2")  # 7
    first.begin_transaction()
    send(first, "a3")   # 8
    second.commit_transaction(30)  # marker 9
    first.abort_transaction(30)    # marker 10
    wait_for(lambda: list_offset(shared_node, topic, 0, READ_COMMITTED) == 11, 10, "LSO after both ended")
    assert values(read_all(shared_node, topic, [0], "read_committed")) == ["a0", "a1", "a2", "b2"]
    assert values(read_all(shared_node, topic, [0], "read_uncommitted")) == ["a0", "a1", "b0", "b1", "a2", "b2", "a3"]


# 3 ------------------------------------------------------------------------------------------------------------


def test_zombie_producer_is_fenced_by_a_new_instance(shared_node):
    topic = topic_name("txn-zombie")
    create_topic(shared_node, topic)
    tid = txn_id("zombie")
    zombie = txn_producer(shared_node, tid)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(topic, value=f"zombie-{i}".encode(), partition=0)
    assert zombie.flush(15) == 0
    old_epoch = describe_txn(shared_node, tid)["producer_epoch"]

    fresh = txn_producer(shared_node, tid)  # fences the zombie and aborts its open transaction
    state = describe_txn(shared_node, tid)
    assert state["producer_epoch"] > old_epoch, state
    assert state["transaction_state"] in ("Empty", "CompleteAbort"), state
    assert list_offset(shared_node, topic, 0, READ_COMMITTED) == list_offset(shared_node, topic, 0, READ_UNCOMMITTED)

    with pytest.raises(KafkaException) as failure:
        zombie.produce(topic, value=b"zombie-late", partition=0)
        zombie.commit_transaction(15)
    error = failure.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
                                             KafkaError.PRODUCER_FENCED), error

    fresh.begin_transaction()
    for i in range(3):
        fresh.produce(topic, value=f"fresh-{i}".encode(), partition=0)
    fresh.commit_transaction(30)
    assert values(read_all(shared_node, topic, [0], "read_committed")) == [f"fresh-{i}" for i in range(3)]
    assert "zombie-late" not in values(read_all(shared_node, topic, [0], "read_uncommitted"))


# 4 ------------------------------------------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(node_factory):
    node = node_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    topic = topic_name("txn-timeout")
    create_topic(node, topic)
    tid = txn_id("timeout")
    producer = txn_producer(node, tid, **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"late-{i}".encode(), partition=0)
    assert producer.flush(15) == 0
    assert list_offset(node, topic, 0, READ_COMMITTED) == 0
    started = time.monotonic()

    # The abort marker (offset 4) is written and the LSO moves past it, to the high watermark.
    wait_for(lambda: list_offset(node, topic, 0, READ_COMMITTED) == 5, 10, "timeout abort")
    assert time.monotonic() - started > 1.0  # not before the transaction timed out
    assert list_offset(node, topic, 0, READ_UNCOMMITTED) == 5
    assert read_all(node, topic, [0], "read_committed") == []
    # the coordinator writes CompleteAbort once every marker is written: just after the LSO moved
    wait_for(lambda: describe_txn(node, tid)["transaction_state"] == "CompleteAbort", 10, "CompleteAbort")

    with pytest.raises(KafkaException):
        producer.commit_transaction(15)
    assert read_all(node, topic, [0], "read_committed") == []
    assert "Traceback" not in node.log_text()


def test_an_unused_transactional_id_expires_and_stays_forgotten_after_a_restart(node_factory):
    node = node_factory({"transactional.id.expiration.ms": "1500",
                         "transaction.remove.expired.transaction.cleanup.interval.ms": "300"})
    topic = topic_name("txn-expiry")
    create_topic(node, topic)
    tid = txn_id("expiry")
    producer = txn_producer(node, tid)
    producer.begin_transaction()
    producer.produce(topic, b"kept", partition=0)
    producer.commit_transaction(15)  # returns once PrepareCommit is written; the markers follow
    wait_for(lambda: describe_txn(node, tid)["transaction_state"] in ("CompleteCommit", ""), 10, "the commit")

    wait_for(lambda: describe_txn(node, tid)["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, 15,
             "the transactional id's expiry")
    node.stop()
    node.start()
    find_txn_coordinator_of(node, tid)
    assert describe_txn(node, tid)["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND  # the tombstone holds
    assert values(read_all(node, topic, [0], "read_committed")) == ["kept"]
    # a new producer with the id starts afresh
    again = txn_producer(node, tid)
    again.begin_transaction()
    again.produce(topic, b"again", partition=0)
    again.commit_transaction(15)
    assert values(read_all(node, topic, [0], "read_committed")) == ["kept", "again"]


def find_txn_coordinator_of(node, tid: str) -> None:
    with RawClient(node.bootstrap) as client:
        find_txn_coordinator(client, tid)


# 5 ------------------------------------------------------------------------------------------------------------

EOS_INPUT = 2000
EOS_BATCH = 50


class EosPipeline:
    """A consume-transform-produce loop that recovers from node crashes the way confluent-kafka documents."""

    def __init__(self, node, source: str, sink: str, partitions: int, tid: str, group: str, rng: random.Random):
        self.node, self.source, self.sink, self.partitions = node, source, sink, partitions
        self.rng = rng
        self.tid, self.group = tid, group
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.stats = Counter()
        self.progress = 0  # input records in committed transactions (as far as this loop knows)

    def base_config(self) -> dict:
        # No KIP-1102 re-bootstrap: while the only node is down librdkafka would decommission it, and then
        # send_offsets_to_transaction() can hang past its timeout on the stale group coordinator
        # (librdkafka issue #5511).
        return {"bootstrap.servers": self.node.bootstrap, "metadata.recovery.strategy": "none",
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 50, "socket.connection.setup.timeout.ms": 3000}

    def build(self, deadline: float) -> None:
        """A fresh producer (fencing any previous one) and a consumer at the group's committed offsets."""
        self.close()
        while True:
            assert time.monotonic() < deadline, f"could not rebuild the pipeline; {self.stats}"
            try:
                producer = Producer({**self.base_config(), "transactional.id": self.tid, "linger.ms": 5,
                                     "transaction.timeout.ms": 10000})
                producer.init_transactions(3)
                self.producer = producer
                break
            except KafkaException:
                self.stats["init-failed"] += 1
                time.sleep(0.3)
        self.consumer = Consumer({**self.base_config(), "group.id": self.group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        self.rewind(deadline)

    def rewind(self, deadline: float) -> None:
        partitions = [TopicPartition(self.source, p) for p in range(self.partitions)]
        while True:
            assert time.monotonic() < deadline, f"could not read committed offsets; {self.stats}"
            try:
                committed = self.consumer.committed(partitions, 3)
                break
            except KafkaException:
                self.stats["committed-failed"] += 1
                time.sleep(0.3)
        self.consumer.assign([TopicPartition(self.source, tp.partition, tp.offset if tp.offset >= 0 else
                                             OFFSET_BEGINNING) for tp in committed])
        self.progress = sum(max(tp.offset, 0) for tp in committed)

    def close(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:
                pass
        self.consumer = None
        self.producer = None  # dropped without ceremony, as a crashed process would

    def step(self, deadline: float) -> None:
        messages = [m for m in self.consumer.consume(EOS_BATCH, 0.5) if not m.error()]
        if not messages:
            return
        producer = self.producer
        try:
            producer.begin_transaction()
            for m in messages:
                producer.produce(self.sink, key=m.value(), value=b"out-" + m.value())
                producer.poll(0)
            positions = {}
            for m in messages:
                positions[m.partition()] = m.offset() + 1
            offsets = [TopicPartition(self.source, p, o) for p, o in sorted(positions.items())]
            producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 3)
            time.sleep(0.01)  # widen the window in which a crash finds the transaction open
            if self.rng.random() < 0.1:  # a processing failure: abort and redo the batch
                producer.abort_transaction(3)
                self.stats["deliberate-abort"] += 1
                self.rewind(deadline)
                return
            self.commit(producer, deadline)
            self.stats["committed"] += 1
            self.progress += len(messages)
        except KafkaException as e:
            error = e.args[0]
            self.stats[f"error-{error.name()}"] += 1
            if error.fatal():
                self.stats["fatal"] += 1
                self.build(deadline)
            elif error.txn_requires_abort():
                self.abort_or_rebuild(deadline)
            else:
                # Retriable, or the transaction outcome is unknown: start over from the committed state.
                self.stats["rebuild-other"] += 1
                self.build(deadline)

    def commit(self, producer: Producer, deadline: float) -> None:
        while True:
            try:
                producer.commit_transaction(3)
                return
            except KafkaException as e:
                error = e.args[0]
                if error.retriable() and not error.txn_requires_abort() and not error.fatal() \
                        and time.monotonic() < deadline:
                    self.stats["commit-retry"] += 1
                    continue
                raise

    def abort_or_rebuild(self, deadline: float) -> None:
        try:
            self.producer.abort_transaction(3)
            self.stats["aborted"] += 1
            self.rewind(deadline)
        except KafkaException:
            self.stats["abort-failed"] += 1
            self.build(deadline)


def test_exactly_once_consume_transform_produce_survives_kill_9(node_factory):
    rng = random.Random(20240601)
    node = node_factory()
    source, sink, partitions = topic_name("eos-in"), topic_name("eos-out"), 3
    create_topic(node, source, partitions)
    create_topic(node, sink, partitions)
    feeder = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for n in range(EOS_INPUT):
        feeder.produce(source, key=str(n).encode(), value=str(n).encode(), partition=n % partitions)
    assert feeder.flush(30) == 0
    del feeder

    pipeline = EosPipeline(node, source, sink, partitions, txn_id("eos"), f"eos-group-{uuid.uuid4().hex[:6]}",
                           random.Random(7))
    deadline = time.monotonic() + 150
    kills = []
    stop = threading.Event()

    def killer():
        # The last outage outlasts the loop's 3 s call timeouts, so its calls fail and it must recover.
        for fraction, downtime in ((0.2, rng.uniform(0.3, 1.0)), (0.45, rng.uniform(0.3, 1.0)), (0.7, 4.5)):
            while pipeline.progress < EOS_INPUT * fraction and not stop.is_set():
                time.sleep(0.02)
            if stop.is_set():
                return
            time.sleep(rng.uniform(0.0, 0.2))
            node.kill()
            kills.append(pipeline.progress)
            time.sleep(downtime)
            node.start()

    killer_thread = threading.Thread(target=killer, daemon=True)
    pipeline.build(deadline)
    killer_thread.start()
    try:
        while pipeline.progress < EOS_INPUT or killer_thread.is_alive():
            assert time.monotonic() < deadline, f"pipeline stuck at {pipeline.progress}: {pipeline.stats}, kills {kills}"
            pipeline.step(deadline)
            if pipeline.progress >= EOS_INPUT and killer_thread.is_alive():
                time.sleep(0.1)
    finally:
        stop.set()
        killer_thread.join(30)
        pipeline.close()
    assert len(kills) == 3, kills
    assert node.proc.poll() is None

    out = read_all(node, sink, list(range(partitions)), "read_committed", timeout=60)
    counts = Counter(int(v.removeprefix("out-")) for v in values(out))
    duplicates = {n: c for n, c in counts.items() if c > 1}
    missing = sorted(set(range(EOS_INPUT)) - set(counts))
    assert not duplicates and not missing, (f"duplicates {list(duplicates.items())[:20]} ({len(duplicates)}), "
                                            f"missing {missing[:20]} ({len(missing)}); stats {pipeline.stats}, "
                                            f"kills at {kills}")
    assert sum(counts.values()) == EOS_INPUT
    print(f"eos stats {dict(pipeline.stats)}, kills at progress {kills}")
    assert pipeline.stats["deliberate-abort"] > 0
    # The aborted batches are in the log too: read_uncommitted sees them, read_committed skipped them.
    assert len(read_all(node, sink, list(range(partitions)), "read_uncommitted", timeout=60)) > EOS_INPUT


# 6 ------------------------------------------------------------------------------------------------------------


def test_kafka_python_transactional_producer(shared_node):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = topic_name("txn-kafka-python")
    group = f"{topic}-group"
    create_topic(shared_node, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=shared_node.bootstrap, transactional_id=txn_id("kp"),
                             enable_idempotence=True)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(10):
            producer.send(topic, value=f"commit-{i}".encode(), partition=i % 2)
        # offsets in the transaction (AddOffsetsToTxn, then TxnOffsetCommit, verified by the coordinator)
        producer.send_offsets_to_transaction({KTopicPartition(topic, 0): OffsetAndMetadata(5, "", -1)}, group)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(10):
            producer.send(topic, value=f"abort-{i}".encode(), partition=i % 2)
        producer.send_offsets_to_transaction({KTopicPartition(topic, 0): OffsetAndMetadata(9, "", -1)}, group)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"commit-last", partition=0)
        producer.commit_transaction()
    finally:
        producer.close(10)

    partitions = [KTopicPartition(topic, 0), KTopicPartition(topic, 1)]
    got = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KafkaConsumer(bootstrap_servers=shared_node.bootstrap, enable_auto_commit=False,
                                 isolation_level=isolation, consumer_timeout_ms=3000)
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        got[isolation] = [(r.partition, r.value.decode()) for r in consumer]
        consumer.close()
    assert [v for p, v in got["read_committed"] if p == 0] == [f"commit-{i}" for i in range(0, 10, 2)] + ["commit-last"]
    assert [v for p, v in got["read_committed"] if p == 1] == [f"commit-{i}" for i in range(1, 10, 2)]
    assert len(got["read_uncommitted"]) == 21
    committer = KafkaConsumer(bootstrap_servers=shared_node.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert committer.committed(KTopicPartition(topic, 0)) == 5  # the aborted transaction's 9 was dropped
    finally:
        committer.close()
    assert values(read_all(shared_node, topic, [0, 1], "read_committed")) and \
        sorted(values(read_all(shared_node, topic, [0, 1], "read_committed"))) == \
        sorted([f"commit-{i}" for i in range(10)] + ["commit-last"])


# 7 ------------------------------------------------------------------------------------------------------------


def test_aiokafka_transactional_producer(shared_node):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition

    topic = topic_name("txn-aiokafka")
    create_topic(shared_node, topic)

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=shared_node.bootstrap, transactional_id=txn_id("aio"),
                                    enable_idempotence=True)
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send(topic, value=f"commit-{i}".encode(), partition=0)

            class Rollback(Exception):
                pass

            with pytest.raises(Rollback):
                async with producer.transaction():
                    for i in range(5):
                        await producer.send_and_wait(topic, value=f"abort-{i}".encode(), partition=0)
                    raise Rollback()

            await producer.begin_transaction()
            await producer.send(topic, value=b"abort-explicit", partition=0)
            await producer.abort_transaction()

            async with producer.transaction():
                await producer.send(topic, value=b"commit-last", partition=0)
        finally:
            await producer.stop()

        result = {}
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = AIOKafkaConsumer(bootstrap_servers=shared_node.bootstrap, enable_auto_commit=False,
                                        isolation_level=isolation)
            await consumer.start()
            try:
                partition = ATopicPartition(topic, 0)
                consumer.assign([partition])
                await consumer.seek_to_beginning(partition)
                got = []
                while True:
                    batch = await consumer.getmany(partition, timeout_ms=2000)
                    if not batch:
                        break
                    got += [r.value.decode() for r in batch[partition]]
                result[isolation] = got
            finally:
                await consumer.stop()
        return result

    result = asyncio.run(scenario())
    assert result["read_committed"] == [f"commit-{i}" for i in range(5)] + ["commit-last"]
    assert sorted(result["read_uncommitted"]) == sorted([f"commit-{i}" for i in range(5)] + ["commit-last"] +
                                                        [f"abort-{i}" for i in range(5)] + ["abort-explicit"])


# 8 ------------------------------------------------------------------------------------------------------------


def test_describe_and_list_transactions_and_producers(shared_node):
    topic = topic_name("txn-describe")
    create_topic(shared_node, topic, partitions=2)
    plain = Producer({"bootstrap.servers": shared_node.bootstrap})
    plain.produce(topic, value=b"before", partition=1)
    assert plain.flush(15) == 0

    tid = txn_id("describe")
    producer = txn_producer(shared_node, tid, **{"transaction.timeout.ms": 45000})
    state = describe_txn(shared_node, tid)
    assert state["error_code"] == 0 and state["transaction_state"] == "Empty", state
    assert state["transaction_timeout_ms"] == 45000
    pid = state["producer_id"]
    assert pid >= 0

    producer.begin_transaction()
    producer.produce(topic, value=b"a", partition=0)
    producer.produce(topic, value=b"b", partition=1)
    assert producer.flush(15) == 0
    state = ongoing_state_with_partitions(shared_node, tid, topic, [0, 1])
    assert state["producer_id"] == pid
    assert state["transaction_start_time_ms"] > 0
    assert abs(state["transaction_start_time_ms"] / 1000 - time.time()) < 60

    listed = list_txns(shared_node, states=["Ongoing"])
    assert listed["error_code"] == 0
    assert {"transactional_id": tid, "producer_id": pid, "transaction_state": "Ongoing"} in \
        listed["transaction_states"], listed
    by_pid = list_txns(shared_node, pids=[pid])
    assert [s["transactional_id"] for s in by_pid["transaction_states"]] == [tid]
    assert tid not in [s["transactional_id"] for s in list_txns(shared_node, states=["CompleteCommit"])
                       ["transaction_states"]]
    bogus = list_txns(shared_node, states=["Ongoing", "NoSuchState"])
    assert bogus["unknown_state_filters"] == ["NoSuchState"]

    for partition, first_offset in ((0, 0), (1, 1)):
        described = describe_producers(shared_node, topic, partition)
        assert described["error_code"] == 0, described
        ours = [p for p in described["active_producers"] if p["producer_id"] == pid]
        assert len(ours) == 1, described
        assert ours[0]["current_txn_start_offset"] == first_offset, described
        assert ours[0]["producer_epoch"] == state["producer_epoch"]
        assert ours[0]["last_sequence"] == 0

    producer.commit_transaction(30)
    wait_for(lambda: describe_txn(shared_node, tid)["transaction_state"] == "CompleteCommit", 10, "CompleteCommit")
    assert describe_txn(shared_node, tid)["topics"] == []
    for partition in (0, 1):
        described = describe_producers(shared_node, topic, partition)
        ours = [p for p in described["active_producers"] if p["producer_id"] == pid]
        assert len(ours) == 1 and ours[0]["current_txn_start_offset"] == -1, described
    assert tid in [s["transactional_id"] for s in list_txns(shared_node, states=["CompleteCommit"])
                   ["transaction_states"]]

    unknown = describe_txn(shared_node, txn_id("never-seen"))
    assert unknown["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, unknown
    missing = describe_producers(shared_node, topic, 9)
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing


# 9 ------------------------------------------------------------------------------------------------------------


def coordinator_request(client: RawClient, api_key: int, version: int, body: dict, timeout: float = 15) -> dict:
    """Retry while the transaction coordinator is still loading or not yet available."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.request(api_key, version, body)
        if response["error_code"] not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                          ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                          ErrorCode.CONCURRENT_TRANSACTIONS) or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def find_txn_coordinator(client: RawClient, tid: str, timeout: float = 15) -> None:
    """What clients do first; on a fresh node it also creates __transaction_state."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
        (coordinator,) = response["coordinators"]
        if coordinator["error_code"] == 0:
            return
        assert time.monotonic() < deadline, coordinator
        time.sleep(0.2)


def test_bad_transactional_requests_get_kafka_errors(node_factory):
    node = node_factory({"transaction.max.timeout.ms": "60000"})
    topic = topic_name("txn-bad")
    create_topic(node, topic)
    with RawClient(node.bootstrap) as client:
        find_txn_coordinator(client, "any")
        too_long = coordinator_request(client, 22, 4, {"transactional_id": txn_id("bad"),
                                                       "transaction_timeout_ms": 60001, "producer_id": -1,
                                                       "producer_epoch": -1})
        assert too_long["error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT, too_long
        assert too_long["producer_id"] == -1
        zero = coordinator_request(client, 22, 4, {"transactional_id": txn_id("bad"), "transaction_timeout_ms": 0,
                                                   "producer_id": -1, "producer_epoch": -1})
        assert zero["error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT, zero

        for version in (1, 3):
            end = coordinator_request(client, 26, version, {"transactional_id": txn_id("unknown"),
                                                            "producer_id": 4242, "producer_epoch": 0,
                                                            "committed": True})
            assert end["error_code"] == ErrorCode.INVALID_PRODUCER_ID_MAPPING, end

        tid = txn_id("not-added")
        init = coordinator_request(client, 22, 4, {"transactional_id": tid, "transaction_timeout_ms": 30000,
                                                   "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == 0, init
        pid, epoch = init["producer_id"], init["producer_epoch"]

        # EndTxn with a wrong producer id for a known transactional id is a mapping error too.
        wrong = coordinator_request(client, 26, 1, {"transactional_id": tid, "producer_id": pid + 1000,
                                                    "producer_epoch": epoch, "committed": True})
        assert wrong["error_code"] == ErrorCode.INVALID_PRODUCER_ID_MAPPING, wrong
        # Nothing was added: ending the empty transaction is an invalid state transition.
        empty = coordinator_request(client, 26, 1, {"transactional_id": tid, "producer_id": pid,
                                                    "producer_epoch": epoch, "committed": True})
        assert empty["error_code"] == ErrorCode.INVALID_TXN_STATE, empty

        batch = build_batch([(b"k", b"sneaky")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
        for version in (3, 9):
            response = client.request(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                                   "topic_data": [{"name": topic, "partition_data": [
                                                       {"index": 0, "records": batch}]}]})
            result = response["responses"][0]["partition_responses"][0]
            assert result["error_code"] == ErrorCode.INVALID_TXN_STATE, (version, result)

    assert list_offset(node, topic, 0, READ_UNCOMMITTED) == 0
    assert list_offset(node, topic, 0, READ_COMMITTED) == 0
    assert describe_producers(node, topic, 0)["active_producers"] == []
    assert node.proc.poll() is None


# 10 -----------------------------------------------------------------------------------------------------------

HANGING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, tid, topic = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 8000,
              "message.timeout.ms": 8000})
p.init_transactions(30)
p.begin_transaction()
for i in range(4):
    p.produce(topic, value=b"open-%d" % i, partition=0)
assert p.flush(15) == 0
print("ready", flush=True)
time.sleep(600)
"""


def test_restart_keeps_committed_and_times_out_the_open_transaction(node_factory, tmp_path):
    node = node_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    topic = topic_name("txn-restart")
    create_topic(node, topic)

    first = txn_producer(node, txn_id("restart-c1"))
    first.begin_transaction()
    for i in range(3):
        first.produce(topic, value=f"c1-{i}".encode(), partition=0)
    first.commit_transaction(30)  # offsets 0-2, marker 3

    open_tid = txn_id("restart-open")
    hanging = subprocess.Popen([sys.executable, "-c", HANGING_PRODUCER, node.bootstrap, open_tid, topic],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert hanging.stdout.readline().strip() == "ready", hanging.stderr.read()
        opened = time.monotonic()
    finally:
        hanging.kill()  # kill -9: the transaction stays open (offsets 4-7)
        hanging.wait()

    second = txn_producer(node, txn_id("restart-c2"))
    second.begin_transaction()
    for i in range(3):
        second.produce(topic, value=f"c2-{i}".encode(), partition=0)
    second.commit_transaction(30)  # offsets 8-10, marker 11
    del first, second

    assert list_offset(node, topic, 0, READ_COMMITTED) == 4
    node.stop()
    node.start()

    if time.monotonic() - opened < 6:
        assert list_offset(node, topic, 0, READ_UNCOMMITTED) == 12
        assert list_offset(node, topic, 0, READ_COMMITTED) == 4
        assert values(read_all(node, topic, [0], "read_committed")) == [f"c1-{i}" for i in range(3)]
        assert describe_txn(node, open_tid)["transaction_state"] == "Ongoing"

    wait_for(lambda: list_offset(node, topic, 0, READ_COMMITTED) == 13, 20, "timeout abort after restart")
    assert list_offset(node, topic, 0, READ_UNCOMMITTED) == 13
    assert values(read_all(node, topic, [0], "read_committed")) == \
        [f"c1-{i}" for i in range(3)] + [f"c2-{i}" for i in range(3)]
    wait_for(lambda: describe_txn(node, open_tid)["transaction_state"] == "CompleteAbort", 10, "CompleteAbort")

    # And the outcome survives another restart.
    node.stop()
    node.start()
    assert list_offset(node, topic, 0, READ_COMMITTED) == 13
    assert values(read_all(node, topic, [0], "read_committed")) == \
        [f"c1-{i}" for i in range(3)] + [f"c2-{i}" for i in range(3)]
