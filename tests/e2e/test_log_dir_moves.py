"""AlterReplicaLogDirs on a real node with two log dirs: partitions move between them while a producer writes,
nothing acknowledged is lost, duplicated or reordered, the node serves throughout, and a kill -9 during a
move leaves the partition whole in one dir."""

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.errors import ErrorCode
from tests.e2e.raw_client import RawClient


def two_dir_node(node_factory, tmp_path, settings=None):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    node = node_factory({"log.dirs": ",".join(str(d) for d in dirs), **(settings or {})})
    return node, dirs


def create(node, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={"segment.bytes": "65536"})])[topic].result(15)  # several segments


def alter(node, moves: dict[tuple[str, int], str]) -> dict[tuple[str, int], int]:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, index), directory in moves.items():
        by_dir.setdefault(directory, {}).setdefault(topic, []).append(index)
    with RawClient(node.bootstrap) as client:
        response = client.request(34, 2, {"dirs": [
            {"path": directory, "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}
            for directory, topics in by_dir.items()]})
    return {(t["topic_name"], p["partition_index"]): p["error_code"] for t in response["results"]
            for p in t["partitions"]}


def placement(node) -> dict[tuple[str, int, bool], str]:
    """(topic, partition, is future) -> log dir, from DescribeLogDirs."""
    with RawClient(node.bootstrap) as client:
        response = client.request(35, 4, {"topics": None})
    return {(t["name"], p["partition_index"], p["is_future_key"]): result["log_dir"]
            for result in response["results"] for t in result["topics"] for p in t["partitions"]}


def moved(node, moves: dict[tuple[str, int], str]) -> bool:
    now = placement(node)
    return all(now.get((t, p, False)) == d for (t, p), d in moves.items()) and not any(f for _, _, f in now)


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout}s")


def read_all(node, topic: str, partitions: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(len(seen[p]) < ends[p] for p in seen) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                seen[message.partition()].append(message.value())
        return seen
    finally:
        consumer.close()


def test_partitions_move_between_log_dirs_while_a_producer_writes(node_factory, tmp_path):
    node, (d1, d2) = two_dir_node(node_factory, tmp_path)
    topic = f"moving-{uuid.uuid4().hex[:6]}"
    create(node, topic, 2)
    acked: dict[int, list[bytes]] = {0: [], 1: []}
    stop = threading.Event()

    def produce():
        producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                             "batch.size": 16384})  # batches fit the 64 KiB segments

        def on_delivery(error, message):
            if error is None:
                acked[message.partition()].append(message.value())

        sent = 0
        while not stop.is_set():
            producer.produce(topic, value=b"%08d" % sent + b"x" * 200, partition=sent % 2, on_delivery=on_delivery)
            sent += 1
            producer.poll(0)
            if sent % 500 == 0:
                producer.flush(30)
        producer.flush(30)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(lambda: len(acked[0]) > 2000, 60, "the producer did not get going")
        for round_ in range(4):
            before = placement(node)
            moves = {(topic, p): str(d2 if before[(topic, p, False)] == str(d1) else d1) for p in (0, 1)}
            assert alter(node, moves) == {key: ErrorCode.NONE for key in moves}
            wait_until(lambda moves=moves: moved(node, moves), 60, f"move round {round_} did not finish")
    finally:
        stop.set()
        writer.join(60)
    seen = read_all(node, topic, 2)
    for p in (0, 1):
        assert seen[p] == acked[p], f"partition {p}: acknowledged records differ from what is read"
    assert not list(d1.glob("*-future")) and not list(d2.glob("*-future"))
    node.restart()  # the moved logs reopen from their new dirs
    assert read_all(node, topic, 2) == seen


def test_a_kill_during_a_move_leaves_the_partition_whole(node_factory, tmp_path):
    node, (d1, d2) = two_dir_node(node_factory, tmp_path, {"replica.alter.log.dirs.io.max.bytes.per.second": "20000"})
    topic = f"killed-{uuid.uuid4().hex[:6]}"
    create(node, topic, 1)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True,
                         "batch.size": 16384})  # batches fit the 64 KiB segments
    failed = []
    for i in range(5000):
        producer.produce(topic, value=b"%08d" % i + b"y" * 300, partition=0,
                         on_delivery=lambda error, _: failed.append(error) if error else None)
    assert producer.flush(30) == 0 and not failed
    source = placement(node)[(topic, 0, False)]
    target = str(d2 if source == str(d1) else d1)
    assert alter(node, {(topic, 0): target}) == {(topic, 0): ErrorCode.NONE}
    # at 20 kB/s (after a burst of at most 11 s of that, as Kafka's rate window allows) the 1.6 MB copy is far
    # from done when the future log shows up
    wait_until(lambda: (topic, 0, True) in placement(node), 30, "no future log appeared")
    node.kill()
    node.start()
    assert placement(node)[(topic, 0, False)] == source  # the move was abandoned, the partition stayed
    assert not list(d1.glob("*-future")) and not list(d2.glob("*-future"))
    values = read_all(node, topic, 1)[0]
    assert values == [b"%08d" % i + b"y" * 300 for i in range(5000)]


def test_bad_moves_get_kafkas_errors_and_a_move_to_the_current_dir_is_a_no_op(node_factory, tmp_path):
    node, (d1, d2) = two_dir_node(node_factory, tmp_path)
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    create(node, topic, 1)
    current = placement(node)[(topic, 0, False)]
    assert alter(node, {(topic, 0): str(tmp_path / "elsewhere")}) == {(topic, 0): ErrorCode.LOG_DIR_NOT_FOUND}
    assert alter(node, {(topic, 5): current}) == {(topic, 5): ErrorCode.REPLICA_NOT_AVAILABLE}
    assert alter(node, {("no-such-topic", 0): current}) == {("no-such-topic", 0): ErrorCode.REPLICA_NOT_AVAILABLE}
    assert alter(node, {(topic, 0): current}) == {(topic, 0): ErrorCode.NONE}
    assert {key: value for key, value in placement(node).items() if key[0] == topic} == {(topic, 0, False): current}
