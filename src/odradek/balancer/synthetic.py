"""Seeded synthetic clusters for the balancer's tests and benchmark: the same seed and shape give the same
ClusterModel.

A cluster has `nodes` nodes with ids 1..nodes (spread round-robin over `racks` racks, none when 0) and
`partitions` partitions of replication factor `replication_factor` over `topics` topics. Partition sizes
and rates vary around their means (sizes by `size_spread`: 0 makes them equal); rates follow size, as
traffic and retained bytes do. Placements:

- "balanced": each topic's partition j on consecutive nodes of a rack-alternating order, from the
  topic's random start plus j, as the controller places a new topic;
- "random": replicas on random distinct nodes (in distinct racks where there are enough);
- "skewed": as random, but the replicas of a third of the topics all on the same replication-factor nodes,
  and all of those partitions led by the first of them.

`empty_nodes` more nodes (the highest ids) hold nothing: nodes just added. Disk capacity is set so that
the cluster's bytes fill `disk_fill` of the total capacity (split over `log_dirs` dirs per node).
"""

from __future__ import annotations

import random
from dataclasses import replace

from odradek.balancer.model import ClusterModel, LogDir, Node, Partition

GIB = 2**30
PLACEMENTS = ("balanced", "random", "skewed")


def synthetic_cluster(seed: int, nodes: int, partitions: int, *, replication_factor: int = 3, racks: int = 0,
                      topics: int | None = None, placement: str = "random", empty_nodes: int = 0,
                      size_spread: float = 0.8, mean_size: int = GIB, disk_fill: float = 0.5,
                      log_dirs: int = 1) -> ClusterModel:
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r}: expected one of {PLACEMENTS}")
    rng = random.Random(seed)
    topic_count = topics or max(1, partitions // 50)
    node_ids = list(range(1, nodes + 1))
    rack_of = {n: f"rack-{(n - 1) % racks}" if racks else None for n in range(1, nodes + empty_nodes + 1)}
    holders = _rack_alternating(node_ids, rack_of)

    built = []
    skewed_topics = set(range(0, topic_count, 3)) if placement == "skewed" else set()
    skewed_nodes = holders[:replication_factor]
    topic_starts = [rng.randrange(len(holders)) for _ in range(topic_count)]
    for i in range(partitions):
        topic = i % topic_count
        size = max(1, int(mean_size * rng.uniform(1 - size_spread, 1 + size_spread)))
        bytes_in = size / 86_400 * rng.uniform(0.5, 1.5)  # a day's retention, give or take
        if topic in skewed_topics:
            replicas = list(skewed_nodes)
        elif placement == "balanced":
            start = topic_starts[topic] + i // topic_count
            replicas = [holders[(start + k) % len(holders)] for k in range(replication_factor)]
        else:
            replicas = _random_replicas(rng, holders, rack_of, replication_factor)
        built.append(Partition(
            topic=f"topic-{topic:04d}", index=i // topic_count, replicas=tuple(replicas), leader=replicas[0],
            size_bytes=size, bytes_in=bytes_in, bytes_out=bytes_in * rng.uniform(0.5, 3.0),
            produce_requests=bytes_in / 16_384, fetch_requests=10.0))

    total_bytes = sum(p.size_bytes * len(p.replicas) for p in built)
    per_node = total_bytes / (nodes + empty_nodes) / disk_fill
    dirs = tuple(LogDir(f"/data/{d}", int(per_node / log_dirs)) for d in range(log_dirs))
    cluster_nodes = tuple(Node(id=n, rack=rack_of[n], log_dirs=dirs) for n in range(1, nodes + empty_nodes + 1))
    if log_dirs > 1:  # spread each node's replicas over its dirs
        built = [replace(p, log_dirs=tuple(dirs[rng.randrange(log_dirs)].path for _ in p.replicas)) for p in built]
    return ClusterModel(cluster_nodes, tuple(built))


def _rack_alternating(node_ids: list[int], rack_of: dict[int, str | None]) -> list[int]:
    by_rack: dict[str | None, list[int]] = {}
    for n in node_ids:
        by_rack.setdefault(rack_of[n], []).append(n)
    groups = [by_rack[r] for r in sorted(by_rack, key=lambda r: r or "")]
    return [g[i] for i in range(max(len(g) for g in groups)) for g in groups if i < len(g)]


def _random_replicas(rng: random.Random, holders: list[int], rack_of: dict[int, str | None], count: int) -> list[int]:
    """count random nodes, in distinct racks as far as the racks go."""
    shuffled = rng.sample(holders, len(holders))
    chosen: list[int] = []
    racks_used: set[str | None] = set()
    for n in shuffled:
        if len(chosen) < count and (rack_of[n] is None or rack_of[n] not in racks_used):
            chosen.append(n)
            racks_used.add(rack_of[n])
    return chosen + [n for n in shuffled if n not in chosen][:count - len(chosen)]
