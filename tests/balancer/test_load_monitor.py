"""The load monitor: windowed averages of the nodes' samples, coverage, and the ClusterModel built from them."""

import pytest

from odradek.balancer import BalancerError, propose
from odradek.balancer.load_monitor import (
    ClusterMetadata,
    LoadMonitor,
    PartitionPlacement,
    build_model,
    metadata_from_image,
)
from odradek.balancer.sampler import LogDirSample, NodeSample, ReplicaSample, decode_sample, encode_sample
from odradek.metrics.partition_counters import CounterDelta

MINUTE = 60_000
HOUR = 60 * MINUTE
T0 = 1_700_000_000_000 // HOUR * HOUR  # on a bucket boundary, so the arithmetic below is exact
DISK = (LogDirSample("/data", 10**12, 9 * 10**11, 0),)


def leader_sample(node, end_ms, bytes_in, bytes_out=0, produce=0, fetch=0, topic="t", index=0, size=0,
                  duration=MINUTE):
    return NodeSample(node, f"r{node}", end_ms - duration, end_ms, DISK,
                      (ReplicaSample(topic, index, "/data", size, True,
                                     CounterDelta(bytes_in, bytes_out, produce, fetch)),))


def feed_steady(monitor, minutes, per_minute, node=1, start=T0):
    for m in range(1, minutes + 1):
        monitor.add(leader_sample(node, start + m * MINUTE, per_minute, per_minute * 2, 60, 120))


def test_rates_are_counts_over_the_time_the_samples_cover():
    monitor = LoadMonitor(window_ms=HOUR)
    feed_steady(monitor, 10, 60_000)  # 1000 B/s for ten minutes
    load = monitor.partition_load("t", 0, T0 + 10 * MINUTE)
    assert load.bytes_in == pytest.approx(1000)
    assert load.bytes_out == pytest.approx(2000)
    assert load.produce_requests == pytest.approx(1)
    assert load.fetch_requests == pytest.approx(2)
    assert load.samples == 10 and load.covered_ms == 10 * MINUTE


def test_a_burst_inside_a_long_window_moves_the_average_little():
    monitor = LoadMonitor(window_ms=HOUR)
    feed_steady(monitor, 59, 60_000)
    monitor.add(leader_sample(1, T0 + 60 * MINUTE, 100 * 60_000))  # one minute at 100x
    load = monitor.partition_load("t", 0, T0 + 60 * MINUTE)
    # the window holds whole buckets of window/12: some 55 minutes of steady traffic and the burst
    assert load.samples >= 50
    assert load.bytes_in == pytest.approx((load.samples - 1 + 100) / load.samples * 1000)
    assert load.bytes_in < 3 * 1000  # under 3x, not 100x


def test_old_samples_fall_out_of_the_window():
    monitor = LoadMonitor(window_ms=HOUR)
    feed_steady(monitor, 60, 600_000)  # an hour at 10 kB/s
    feed_steady(monitor, 60, 60_000, start=T0 + HOUR)  # then an hour at 1 kB/s
    now = T0 + 2 * HOUR
    assert monitor.partition_load("t", 0, now).bytes_in == pytest.approx(1000)
    monitor.expire(now)
    assert min(monitor._buckets) * monitor.bucket_ms >= T0 + HOUR
    # long after: nothing left, and the partition is as if never sampled
    assert monitor.partition_load("t", 0, now + 2 * HOUR).samples == 0


def test_samples_of_successive_leaders_add_up():
    monitor = LoadMonitor(window_ms=HOUR)
    feed_steady(monitor, 5, 60_000, node=1)
    feed_steady(monitor, 5, 120_000, node=2, start=T0 + 5 * MINUTE)
    assert monitor.partition_load("t", 0, T0 + 10 * MINUTE).bytes_in == pytest.approx(1500)


def test_a_sample_survives_its_encoding():
    sample = NodeSample(3, "b", T0, T0 + MINUTE, (LogDirSample("/d1", 100, 50, 7), LogDirSample("/d2", None, None, 0)),
                        tuple(ReplicaSample("t", i, "/d1" if i % 2 else "/d2", i * 10, i % 3 == 0,
                                            CounterDelta(i, 2 * i, 1, 2) if i % 3 == 0 else CounterDelta())
                              for i in range(7)))
    values = encode_sample(sample, per_record=3)
    assert len(values) == 3
    parts = [decode_sample(v) for v in values]
    assert all(p.node == 3 and p.rack == "b" and p.log_dirs == sample.log_dirs for p in parts)
    assert tuple(r for p in parts for r in p.replicas) == sample.replicas
    assert decode_sample(b'{"v": 99}') is None and decode_sample(b"not json") is None


def metadata(partitions, nodes=(1, 2, 3), alive=None):
    return ClusterMetadata({n: None for n in nodes}, frozenset(nodes if alive is None else alive), tuple(partitions))


def test_the_model_carries_the_averaged_load_sizes_log_dirs_and_racks():
    monitor = LoadMonitor(window_ms=HOUR)
    dirs = (LogDirSample("/a", 1000, 900, 0), LogDirSample("/b", 2000, 1500, 0))
    for m in range(1, 11):
        end = T0 + m * MINUTE
        monitor.add(NodeSample(1, "r1", end - MINUTE, end, dirs, (
            ReplicaSample("t", 0, "/b", 500 + m, True, CounterDelta(6000, 12000, 6, 12)),
            ReplicaSample("t", 1, "/a", 40, False))))
        monitor.add(NodeSample(2, "r2", end - MINUTE, end, DISK, (
            ReplicaSample("t", 0, "/data", 490, False),
            ReplicaSample("t", 1, "/data", 41, True, CounterDelta(0, 0, 0, 60)))))
    built = build_model(metadata([PartitionPlacement("t", 0, (1, 2), 1, (1, 2)),
                                  PartitionPlacement("t", 1, (2, 1), 2),
                                  PartitionPlacement("t", 2, (3, 1), 3)]),
                        monitor, T0 + 10 * MINUTE)
    model = built.model
    nodes = {n.id: n for n in model.nodes}
    assert nodes[1].rack == "r1" and [(d.path, d.capacity_bytes) for d in nodes[1].log_dirs] == [("/a", 1000),
                                                                                                ("/b", 2000)]
    assert nodes[3].log_dirs[0].path == "" and nodes[3].rack is None  # never sampled
    p0, p1, p2 = model.partitions
    assert (p0.size_bytes, p0.log_dirs, p0.in_sync) == (510, ("/b", "/data"), (1, 2))
    assert (p0.bytes_in, p0.bytes_out, p0.produce_requests, p0.fetch_requests) == pytest.approx((100, 200, 0.1, 0.2))
    assert (p1.size_bytes, p1.log_dirs, p1.fetch_requests) == (41, ("/data", "/a"), pytest.approx(1))
    assert (p2.size_bytes, p2.bytes_in) == (0, 0)
    assert (built.coverage.partitions, built.coverage.sampled, built.coverage.unsampled) == (3, 2, 1)
    assert built.coverage.unsampled_partitions == ("t-2",)
    loads = model.node_loads()
    assert loads[1].log_dir_bytes == {"/a": 41, "/b": 510}
    propose(model)  # the optimizer takes it


def test_too_few_sampled_partitions_refuse_to_balance():
    monitor = LoadMonitor(window_ms=HOUR)
    feed_steady(monitor, 3, 60_000)
    placements = [PartitionPlacement("t", i, (1,), 1) for i in range(4)]
    built = build_model(metadata(placements, nodes=(1,)), monitor, T0 + 3 * MINUTE)
    assert built.coverage.ratio == 0.25 and built.coverage.enough(0.25) and not built.coverage.enough(0.95)
    with pytest.raises(BalancerError, match=r"not enough load samples: 1 of 4 partitions sampled \(25%\)"):
        built.coverage.check(0.95)
    strict = build_model(metadata(placements, nodes=(1,)), monitor, T0 + 3 * MINUTE, min_samples=4)
    assert strict.coverage.sampled == 0 and strict.model.partitions[0].bytes_in == 0


def test_a_dead_node_and_an_offline_partition_come_from_the_metadata():
    class Broker:
        def __init__(self, broker_id, rack, fenced):
            self.broker_id, self.rack, self.fenced = broker_id, rack, fenced

    class PartitionImage:
        def __init__(self, replicas, leader, isr):
            self.replicas, self.leader, self.isr = replicas, leader, isr

    class Topic:
        partitions = {0: PartitionImage([1, 2], 1, [1, 2]), 1: PartitionImage([2], -1, [])}

    class Image:
        brokers = {1: Broker(1, "a", False), 2: Broker(2, "b", True)}
        topics = {"t": Topic()}

    md = metadata_from_image(Image())
    assert md.nodes == {1: "a", 2: "b"} and md.alive == frozenset({1})
    assert md.partitions[1].leader is None
    model = build_model(md, LoadMonitor(), T0).model
    assert [n.alive for n in model.nodes] == [True, False]
