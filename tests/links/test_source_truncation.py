"""A source partition that loses records its mirror holds (an unclean leader election on the source): the mirror is
truncated where the two diverge, as a follower truncates, and its replicas with it; then it follows the source's
new records. First a mirror partition's leader and followers without a network (why the leader waits for its
replicas after a truncation), then real clusters: an unclean election on a three-node source mirrored into a
destination of three brokers, once with the source holding other records at the mirror's offsets, once with
the mirror's leader killed (kill -9) while it waits for its stopped followers; and the source's retention
passing the mirror's end, and Apache Kafka as a source that lost nothing, which are no truncations."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek.broker.replica_manager import MirrorDiverged, ReplicaManager
from odradek.controller.metadata_image import PartitionImage
from odradek.links.mirror import MirrorFetchers
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch, decode_batches, scan_valid_prefix, stamp_leader_epoch
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from tests.links.test_cluster_links import (
    committed_values,
    links,
    partitions_equal,
    raw_partition,
)
from tests.sql.server_process import wait_for

# ---- a mirror partition's leader and followers, without a network

NOW = 1_700_000_000_000
REPLICAS = [1, 2, 3]


def source_batch(base_offset: int, tag: str, count: int = 2) -> bytes:
    """A batch as the source holds it (its own leader epoch, 99, which the mirror replaces)."""
    return build_batch([(None, f"{tag}-{i}") for i in range(count)], base_offset=base_offset, timestamp_ms=NOW,
                       partition_leader_epoch=99)


class Replica:
    """One node's replica of mirror partition m-0: its ReplicaManager and its log."""

    def __init__(self, directory: Path, node_id: int):
        self.node_id = node_id
        self.log = PartitionLog(str(directory / f"node-{node_id}" / "m-0"), LogConfig(), now_ms=NOW)
        self.replicas = ReplicaManager(SimpleNamespace(
            node_id=node_id, log_manager=SimpleNamespace(is_offline=lambda topic, index: False),
            fetchers=SimpleNamespace(follow=lambda *args: None, unfollow=lambda *args: None),
            image=SimpleNamespace(live_brokers=set(REPLICAS))))

    def host(self, leader: int, leader_epoch: int) -> None:
        self.replicas.host("m", 0, self.log, PartitionImage(0, REPLICAS, REPLICAS, leader, leader_epoch))

    def fetch_from(self, leader: Replica) -> None:
        """One follower fetch round, as replication/fetcher.py and the Fetch handler run it."""
        epoch, offset, last_epoch, log_start = self.replicas.fetch_position("m", 0)
        read = leader.replicas.read_for_follower("m", 0, self.node_id, offset, last_epoch, epoch, 1 << 20)
        diverging_epoch, end_offset = read.diverging_epoch or (-1, -1)
        records = os.pread(read.records.fd, read.records.size, read.records.position) if read.records else b""
        error = self.replicas.on_fetched("m", 0, epoch, {
            "error_code": read.error, "high_watermark": read.high_watermark, "log_start_offset": read.log_start_offset,
            "diverging_epoch": {"epoch": diverging_epoch, "end_offset": end_offset}, "records": records})
        assert error == 0, error

    def batches(self) -> list[tuple[int, int, bytes]]:
        """(base offset, leader epoch, bytes) of every batch of the log."""
        region = self.log.read(self.log.log_start_offset, 1 << 24, max_offset=self.log.log_end_offset)
        data = os.pread(region.fd, region.size, region.position) if region else b""
        infos, _ = scan_valid_prefix(data)
        return [(info.base_offset, info.partition_leader_epoch, data[info.position:info.end]) for info in infos]


@pytest.fixture
def mirror_partition(tmp_path):
    """Leader 1 (epoch 5) mirrors five source batches, offsets 0 to 9; followers 2 and 3 hold them all."""
    leader, *followers = replicas = [Replica(tmp_path, node_id) for node_id in REPLICAS]
    for replica in replicas:
        replica.host(leader=1, leader_epoch=5)
    fetched = b"".join(source_batch(offset, "old") for offset in range(0, 10, 2))
    assert leader.replicas.append_mirrored("m", 0, fetched, 0) == 10
    for follower in followers:
        follower.fetch_from(leader)
        follower.fetch_from(leader)  # the next fetch reports its end: the high watermark passes it
    assert leader.log.high_watermark == 10
    assert all(follower.batches() == leader.batches() for follower in followers)
    assert {epoch for _, epoch, _ in leader.batches()} == {5}
    yield replicas
    for replica in replicas:
        replica.log.close()


def test_a_truncated_mirror_appends_again_only_once_every_replica_has_truncated_too(mirror_partition):
    leader, second, third = mirror_partition
    assert leader.replicas.truncate_mirror_to("m", 0, 6) == 4
    assert (leader.log.log_end_offset, leader.log.high_watermark) == (6, 6)
    assert not leader.replicas.mirror_replicas_truncated("m", 0)
    with pytest.raises(RuntimeError, match="every replica has fetched"):
        leader.replicas.append_mirrored("m", 0, source_batch(6, "new"), 0)

    second.fetch_from(leader)  # told its epoch 5 ends at 6 now: it truncates
    assert second.log.log_end_offset == 6
    assert not leader.replicas.mirror_replicas_truncated("m", 0)  # it has not fetched from 6 yet
    second.fetch_from(leader)
    assert not leader.replicas.mirror_replicas_truncated("m", 0)  # the third replica still holds offsets 6 to 9
    third.fetch_from(leader)
    third.fetch_from(leader)
    assert leader.replicas.mirror_replicas_truncated("m", 0)

    new = b"".join(source_batch(offset, "new") for offset in (6, 8, 10))
    assert leader.replicas.append_mirrored("m", 0, new, 0) == 12
    for follower in (second, third):
        follower.fetch_from(leader)
        follower.fetch_from(leader)
        assert follower.batches() == leader.batches()
    assert [batch for _, _, batch in leader.batches()][3:] == [
        bytes(stamped(source_batch(offset, "new"), 5)) for offset in (6, 8, 10)]


def stamped(batch: bytes, leader_epoch: int) -> bytearray:
    copy = bytearray(batch)
    stamp_leader_epoch(copy, scan_valid_prefix(copy)[0], leader_epoch)
    return copy


def test_without_the_wait_a_follower_would_keep_the_records_the_source_lost(mirror_partition):
    """Why the leader waits: new batches in the same leader epoch past a follower's stale end let that
    follower's divergence check pass, and it keeps the old records at offsets 6 to 9."""
    leader, second, _ = mirror_partition
    leader.replicas.truncate_mirror_to("m", 0, 6)
    leader.replicas.partitions[("m", 0)].mirror_truncated_to = None  # as if it did not wait
    new = b"".join(source_batch(offset, "new") for offset in (6, 8, 10))
    leader.replicas.append_mirrored("m", 0, new, 0)
    second.fetch_from(leader)
    assert second.log.log_end_offset == 12  # it took the batch at 10 after its stale ones
    assert second.batches()[3] != leader.batches()[3]


def test_a_mirror_promoted_while_its_leader_waits_takes_no_produce_until_the_wait_is_over(mirror_partition):
    leader, second, third = mirror_partition
    leader.replicas.truncate_mirror_to("m", 0, 6)
    refused = leader.replicas.append("m", 0, memoryview(source_batch(0, "produced")), 1)
    assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS and "truncate to offset 6" in refused.message
    for follower in (second, third):
        follower.fetch_from(leader)
        follower.fetch_from(leader)
    assert leader.replicas.append("m", 0, memoryview(source_batch(0, "produced")), 1).base_offset == 6


def test_a_new_leader_epoch_ends_the_wait(mirror_partition):
    leader, _, _ = mirror_partition
    leader.replicas.truncate_mirror_to("m", 0, 6)
    assert not leader.replicas.mirror_replicas_truncated("m", 0)
    leader.host(leader=1, leader_epoch=6)  # it leads again in a new epoch: followers' epoch checks are sound
    assert leader.replicas.mirror_replicas_truncated("m", 0)


class EmptySource:
    """A source partition's new leader whose log is empty and starts at `start` (it lost everything from
    there): a consumer fetch below or past that is out of range."""

    def __init__(self, start: int):
        self.start = start

    async def fetch(self, leader, topic, index, offset, epoch, *, max_bytes=0, wait_ms=0):
        if offset != self.start:
            return {"error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "records": None}
        return {"error_code": ErrorCode.NONE, "records": b"", "high_watermark": self.start,
                "log_start_offset": self.start}

    async def earliest_offset(self, leader, topic, index, epoch):
        return self.start


def test_a_source_whose_log_starts_inside_the_mirrors_batch_is_compared_from_there(tmp_path):
    """The mirror's one batch [0,10) has its log start at 6 (it followed the source's); the source's new leader
    holds nothing from 6 on. The batch is not held: the mirror truncates to 6, not keeping offsets 6 to 9."""
    replica = Replica(tmp_path, 1)
    replica.replicas.host("m", 0, replica.log, PartitionImage(0, [1], [1], 1, 5))
    assert replica.replicas.append_mirrored("m", 0, source_batch(0, "old", 10), 0) == 10
    replica.log.delete_records_before(6)
    reader = SimpleNamespace(lock=threading.Lock(), state=SimpleNamespace(read_only=lambda topic: "dc1"),
                             end_offset=lambda timeout_s: 0, applied_position=0)
    fetchers = MirrorFetchers(SimpleNamespace(replicas=replica.replicas), reader, None)
    assert asyncio.run(fetchers._check_prefix(EmptySource(6), 2, 7, "m", 0))
    assert (replica.log.log_start_offset, replica.log.log_end_offset) == (6, 6)
    assert fetchers.truncations[("m", 0)] == ("dc1", 1, 4)
    replica.log.close()


def test_a_source_batch_across_the_mirrors_end_is_another_history(mirror_partition):
    """The mirror ends at 10 after its batch [8,10); a source batch [9,12) cannot follow it: the mirror must be
    checked again, not given a gap."""
    leader = mirror_partition[0]
    with pytest.raises(MirrorDiverged):
        leader.replicas.append_mirrored("m", 0, source_batch(9, "new", 3), 0)
    assert leader.log.log_end_offset == 10


# ---- real clusters: an unclean leader election on the source

TRUNCATED = re.compile(r"Mirror orders-0 of cluster link dc1: .* truncated the mirror to offset (\d+), dropping (\d+)")


def source_partition(admin: AdminClient) -> tuple[int, list[int]] | None:
    """(leader, ISR) of the source's orders-0 as its metadata says, None while it cannot say."""
    try:
        partition = admin.list_topics(timeout=10).topics["orders"].partitions[0]
    except (KafkaException, KeyError):  # the metadata is not there yet
        return None
    return partition.leader, sorted(partition.isrs)


def produce(bootstrap: str, tag: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "compression.type": "lz4"})
    for i in range(count):
        producer.produce("orders", key=f"{tag}-{i % 7}".encode(), value=f"{tag}-{i}".encode(), partition=0)
    assert producer.flush(60) == 0


def replica_batches(node) -> list[bytes]:
    """Every batch of a node's replica of orders-0, as its segment files hold them (leader epochs and all)."""
    data = b"".join(path.read_bytes() for path in sorted((node.data_dir / "orders-0").glob("*.log")))
    infos, _ = scan_valid_prefix(data)
    return [data[info.position:info.end] for info in infos]


def replicas_identical(cluster) -> bool:
    """Whether the three replicas of the mirror partition hold the same batches, the leader's up to its high
    watermark among them (so nothing is on one replica only)."""
    held = [replica_batches(node) for node in cluster.brokers]
    if not held[0] or any(batches != held[0] for batches in held):
        return False
    zeroed = bytearray(b"".join(held[0]))
    stamp_leader_epoch(zeroed, scan_valid_prefix(zeroed)[0], 0)
    try:
        return bytes(zeroed) == raw_partition(cluster.bootstrap, "orders", 0)
    except (AssertionError, OSError):  # no (reachable) leader just now
        return False


def mirror_partition_state(cluster) -> tuple[int, list[int]] | None:
    """(leader, ISR) of the mirror partition orders-0, None while the destination cannot say."""
    try:
        partition = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).topics[
            "orders"].partitions[0]
    except (KafkaException, KeyError):  # the metadata is not there yet
        return None
    return partition.leader, sorted(partition.isrs)


def values(batches: bytes) -> list[str]:
    return [record.value.decode() for info, records in decode_batches(batches) if not info.is_control
            for record in records]


def mirror_through_an_unclean_election(cluster_factory, *, paused: bool = False,
                                       stop_mirror_followers: bool = False) -> None:
    """Source orders-0 on nodes A=1 and B=2 (node 3 is the controller), mirrored into a destination of three
    brokers and a controller: B stops, records only A holds are mirrored to every replica, A stops, B leads
    uncleanly and gets new records at the offsets A's tail had, A comes back (and truncates as a follower).
    Then the mirror holds the source's partition, byte for byte, on every replica.

    With `paused`, the link is paused from before A stops until B holds more records than the mirror did: the
    source holds other records at the mirror's offsets when the mirror looks again. With
    `stop_mirror_followers`, the mirror partition's followers are stopped (SIGSTOP) before A stops, so its
    leader truncates and waits for them in vain; it is killed (kill -9) right after the truncation and
    restarted, and the followers continued after, still holding A's tail."""
    source = cluster_factory(roles=["broker", "broker", "broker,controller"])
    a, b, controller = source.nodes
    admin = AdminClient({"bootstrap.servers": controller.bootstrap})
    admin.create_topics([NewTopic("orders", 1, replica_assignment=[[1, 2]], config={
        "unclean.leader.election.enable": "true", "min.insync.replicas": "1"})])["orders"].result(30)
    destination = cluster_factory(roles=["controller", "broker", "broker", "broker"],
                                  settings={"default.replication.factor": "3", "min.insync.replicas": "2"})
    produce(source.bootstrap, "kept", 200)
    created = links(destination.bootstrap, "create", "dc1", "--source-bootstrap", controller.bootstrap,
                    "--topics", "orders")
    assert created.returncode == 0, created.stderr
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 1),
                    what="the mirror to hold the first records")

    b.kill()
    assert wait_for(lambda: source_partition(admin) == (1, [1]), what="A alone in the ISR")
    produce(a.bootstrap, "lost", 150)  # acknowledged by A alone
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 1)
                    and replicas_identical(destination), what="every mirror replica to hold A's tail")
    assert len(values(raw_partition(destination.bootstrap, "orders", 0))) == 350
    if paused:
        assert links(destination.bootstrap, "pause", "dc1").returncode == 0
    stopped = []
    if stop_mirror_followers:
        leader_id = mirror_partition_state(destination)[0]
        stopped = [node for node in destination.brokers if node is not destination.node(leader_id)]
        for node in stopped:
            node.proc.send_signal(signal.SIGSTOP)
        assert wait_for(lambda: mirror_partition_state(destination) == (leader_id, [leader_id]),
                        what="the stopped followers out of the mirror partition's ISR")

    a.kill()
    b.start()
    assert wait_for(lambda: source_partition(admin) == (2, [2]), what="B to lead uncleanly")
    produce(b.bootstrap, "new", 300)  # at the offsets of A's lost tail, and beyond
    if paused:
        assert len(values(raw_partition(source.bootstrap, "orders", 0))) == 500  # past the mirror's end, 350
        assert links(destination.bootstrap, "resume", "dc1").returncode == 0
    mirror_leader = wait_for(lambda: next((node for node in destination.brokers
                                           if TRUNCATED.search(node.log_text())), None),
                             what="the mirror's leader to truncate it")
    if stop_mirror_followers:
        # the stopped followers still hold the tail the source lost (A's 350 records), which they must drop
        assert all(len(values(b"".join(replica_batches(node)))) == 350 for node in stopped)
        mirror_leader.kill()  # while it waits for its followers
        mirror_leader.start()
        for node in stopped:
            node.proc.send_signal(signal.SIGCONT)
    a.start()
    assert wait_for(lambda: (source_partition(admin) or (0, []))[1] == [1, 2],
                    what="A back in sync, its tail truncated")

    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 1),
                    what="the mirror to hold the source's partition again")
    assert wait_for(lambda: replicas_identical(destination), what="every mirror replica to hold the same batches")
    mirrored = values(raw_partition(destination.bootstrap, "orders", 0))
    assert mirrored == [f"kept-{i}" for i in range(200)] + [f"new-{i}" for i in range(300)]
    assert committed_values(destination.bootstrap, "orders", 1) == committed_values(source.bootstrap, "orders", 1)
    truncation = TRUNCATED.search(mirror_leader.log_text())
    assert int(truncation.group(1)) == 200 and 0 < int(truncation.group(2)) <= 150, truncation.group(0)


def test_a_source_holding_other_records_at_the_mirrors_offsets_truncates_the_mirror_and_its_replicas(
        cluster_factory):
    mirror_through_an_unclean_election(cluster_factory, paused=True)


def test_a_mirror_leader_killed_while_it_waits_for_its_followers_leaves_them_truncated_too(cluster_factory):
    mirror_through_an_unclean_election(cluster_factory, stop_mirror_followers=True)


# ---- what is not a truncation: the source's retention passing the mirror's end


def log_start(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer is in
    (found,) = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()}).values()
    return found.result(30).offset


def test_a_source_whose_retention_passed_the_mirrors_end_is_no_truncation_the_mirror_starts_at_its_log_start(
        node_factory):
    source, destination = node_factory(name="source"), node_factory(name="destination")
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    produce(source.bootstrap, "early", 100)
    assert links(destination.bootstrap, "create", "dc1", "--source-bootstrap", source.bootstrap,
                 "--topics", "orders").returncode == 0
    assert wait_for(lambda: partitions_equal(source.bootstrap, destination.bootstrap, "orders", 1),
                    what="the mirror to hold the first records")
    assert links(destination.bootstrap, "pause", "dc1").returncode == 0
    produce(source.bootstrap, "late", 100)
    admin.delete_records([TopicPartition("orders", 0, 150)])[TopicPartition("orders", 0, 150)].result(30)

    assert links(destination.bootstrap, "resume", "dc1").returncode == 0  # its task checks the mirror first
    assert wait_for(lambda: log_start(destination.bootstrap, "orders") == 150, what="the mirror to start at 150")

    def same() -> bool:
        try:
            return (raw_partition(source.bootstrap, "orders", 0, 150)
                    == raw_partition(destination.bootstrap, "orders", 0, 150))
        except (AssertionError, OSError):
            return False

    assert wait_for(same, what="the mirror to hold the source's records from its log start")
    assert committed_values(destination.bootstrap, "orders", 1) == [f"late-{i}" for i in range(50, 100)]
    assert not TRUNCATED.search(destination.log_text())
