"""A log dir that fills up (ENOSPC on a small tmpfs) goes offline; the node keeps serving its other dir.

The node gets two log dirs: a normal one (it also holds the metadata log) and a 1 MiB tmpfs. Once the
tmpfs is full, the partitions in it answer KAFKA_STORAGE_ERROR to produce, fetch and ListOffsets, Metadata
shows them leaderless with this node as an offline replica, DescribeLogDirs reports the dir's error,
DeleteRecords fails and groups whose offsets partition is there have no coordinator, and
the partitions of the other dir go on taking and serving records. After a restart with space freed the
full dir is recovered: every acknowledged record is there at its offset, nothing torn, and it takes
appends again. Mounting a tmpfs needs root.
"""

import os
import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordinator.group_coordinator import java_string_hash
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch
from tests.e2e.raw_client import RawClient
from tests.e2e.test_bad_input import produce_raw

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")

PARTITIONS = 4
RECORD = b"r" * 1000
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions


def find_coordinator(client: RawClient, group: str) -> int:
    response = client.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
    return response["coordinators"][0]["error_code"]


def group_in(directory, prefix: str) -> str:
    """A group id whose `__consumer_offsets` partition lives in `directory`."""
    for i in range(1000):
        group = f"{prefix}-{i}"
        h = java_string_hash(group)
        partition = (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS
        if (directory / f"__consumer_offsets-{partition}").is_dir():
            return group
    raise AssertionError(f"no group's offsets partition is in {directory}")


@pytest.fixture
def small_dir(tmp_path):
    """A 1 MiB tmpfs, unmounted after the node using it has stopped (request it before node_factory)."""
    path = tmp_path / "small"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True)
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path, leave_bytes: int) -> None:
    """Take all but `leave_bytes` of the file system's free space with a filler file."""
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    with open(path / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))


def read_partition(bootstrap: str, topic: str, partition: int, count: int) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "check.crcs": True})
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: dict[int, bytes] = {}
    for _ in range(100):
        if len(records) >= count:
            break
        for msg in consumer.consume(count - len(records), 0.2):
            assert msg.error() is None, msg.error()
            records[msg.offset()] = msg.value()
    consumer.close()
    return records


def produce_acked(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> list[int]:
    """Offsets of the records acknowledged (acks=all)."""
    offsets = []

    def on_delivery(err, msg):
        assert err is None, err
        offsets.append(msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
    assert producer.flush(20) == 0
    return offsets


def test_a_full_log_dir_goes_offline_and_the_other_keeps_serving(small_dir, node_factory, tmp_path):
    node = node_factory({"log.dirs": f"{tmp_path / 'big'},{small_dir}"})
    topic = f"spread-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # must outlive its future
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    on_small = [p for p in range(PARTITIONS) if (small_dir / f"{topic}-{p}").is_dir()]
    on_big = [p for p in range(PARTITIONS) if p not in on_small]
    assert on_small and on_big, "partitions are spread over both log dirs"
    full, healthy = on_small[0], on_big[0]

    acked = {p: produce_acked(node.bootstrap, topic, p, [b"%d-%d" % (p, i) + RECORD for i in range(50)])
             for p in range(PARTITIONS)}
    assert all(offsets == list(range(50)) for offsets in acked.values())

    with RawClient(node.bootstrap) as client:
        assert find_coordinator(client, "creates-the-offsets-topic") == ErrorCode.NONE
    group_on_small, group_on_big = group_in(small_dir, "g"), group_in(tmp_path / "big", "g")
    fill(small_dir, leave_bytes=64 * 1024)
    with RawClient(node.bootstrap) as client:
        errors = []
        for i in range(200):  # 200 KiB of batches cannot fit in 64 KiB
            batch = build_batch([(None, b"%d-late-%d" % (full, i) + RECORD * 4, [])])
            result = produce_raw(client, topic, full, batch)
            errors.append(result["error_code"])
            if result["error_code"] != ErrorCode.NONE:
                break
            acked[full].append(result["base_offset"])
        assert errors[-1] == ErrorCode.KAFKA_STORAGE_ERROR, errors[-5:]

        # every partition of the full dir is now offline, to every API
        for partition in on_small:
            assert produce_raw(client, topic, partition, build_batch([(None, b"x", [])]))["error_code"] \
                == ErrorCode.KAFKA_STORAGE_ERROR
            listed = client.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                "timestamp": -1}]}]})
            assert listed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
            fetched = client.request(1, 11, {
                "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                            "fetch_offset": 0, "log_start_offset": -1,
                                                            "partition_max_bytes": 1 << 20}]}]})
            assert fetched["responses"][0]["partitions"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        deleted = client.request(21, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": full, "offset": 1}]}], "timeout_ms": 5000})
        assert deleted["topics"][0]["partitions"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        assert find_coordinator(client, group_on_small) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert find_coordinator(client, group_on_big) == ErrorCode.NONE
        dirs = client.request(35, 4, {"topics": None})["results"]
        errors_by_dir = {entry["log_dir"]: entry["error_code"] for entry in dirs}
        assert errors_by_dir[str(small_dir)] == ErrorCode.KAFKA_STORAGE_ERROR
        assert errors_by_dir[str(tmp_path / "big")] == ErrorCode.NONE

    described = admin.list_topics(topic, timeout=10).topics[topic].partitions
    for partition in on_small:
        assert described[partition].leader == -1
        assert described[partition].error.code() == ErrorCode.LEADER_NOT_AVAILABLE
    assert described[healthy].leader == 1 and described[healthy].error is None

    # the other dir serves on: new records are acknowledged and everything reads back
    acked[healthy] += produce_acked(node.bootstrap, topic, healthy, [b"after-%d" % i for i in range(100)])
    assert acked[healthy] == list(range(150))
    records = read_partition(node.bootstrap, topic, healthy, 150)
    assert sorted(records) == list(range(150)) and records[149] == b"after-99"
    assert node.proc.poll() is None, "the node keeps running"

    # restart with space freed: the full dir is recovered, nothing acknowledged lost, nothing torn
    node.stop()
    (small_dir / "filler").unlink()
    node.start()
    for partition in on_small:
        records = read_partition(node.bootstrap, topic, partition, len(acked[partition]))
        assert sorted(records) == acked[partition] == list(range(len(acked[partition]))), partition
        assert records[0].startswith(b"%d-0" % partition)
    appended = produce_acked(node.bootstrap, topic, full, [b"after-restart"])
    assert appended == [len(acked[full])], "the next append follows the last acknowledged record"
    kcat = subprocess.run(["kcat", "-C", "-b", node.bootstrap, "-t", topic, "-p", str(full), "-o", "beginning",
                           "-e", "-q", "-f", "%o\n"], capture_output=True, text=True, timeout=30)
    assert kcat.returncode == 0, kcat.stderr
    assert [int(line) for line in kcat.stdout.split()] == list(range(len(acked[full]) + 1))


def test_the_node_stops_when_the_dir_of_its_metadata_log_fails(small_dir, node_factory, tmp_path):
    node = node_factory({"log.dirs": f"{small_dir},{tmp_path / 'big'}"})  # the first dir holds the metadata log
    topic = f"meta-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    on_small = next(p for p in range(2) if (small_dir / f"{topic}-{p}").is_dir())
    acked = produce_acked(node.bootstrap, topic, on_small, [b"%d" % i + RECORD for i in range(20)])
    fill(small_dir, leave_bytes=32 * 1024)
    with RawClient(node.bootstrap) as client:
        for _ in range(100):
            if produce_raw(client, topic, on_small, build_batch([(None, RECORD * 4, [])]))["error_code"]:
                break
            acked.append(acked[-1] + 1)
    assert node.proc.wait(timeout=30) == 1
    assert "Stopping the node: the metadata log's dir" in node.log_text()
    (small_dir / "filler").unlink()
    node.start()
    assert sorted(read_partition(node.bootstrap, topic, on_small, len(acked))) == acked
