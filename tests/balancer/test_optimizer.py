"""The optimizer on hand-made and seeded generated clusters: hard goals never broken, soft goals within
their thresholds where the cluster allows, the fewest bytes, idempotence and determinism."""

import random
from dataclasses import replace

import pytest

from odradek.balancer import (
    ClusterModel,
    LogDir,
    Node,
    Partition,
    ProposalOptions,
    apply,
    goals_by_name,
    propose,
)
from odradek.balancer.synthetic import GIB, synthetic_cluster
from tests.balancer.checks import count_spread, hard_breaches

# Generated shapes, small enough to run many seeds quickly.
SHAPES = {
    "random": dict(nodes=8, partitions=400),
    "skewed": dict(nodes=6, partitions=300, placement="skewed"),
    "three racks": dict(nodes=9, partitions=450, racks=3),
    "two racks for three replicas": dict(nodes=6, partitions=300, racks=2),
    "a new empty node": dict(nodes=5, partitions=300, placement="balanced", empty_nodes=1),
    "tight disk": dict(nodes=6, partitions=300, placement="skewed", disk_fill=0.75),
    "two log dirs a node": dict(nodes=6, partitions=300, placement="skewed", log_dirs=2, disk_fill=0.6),
    "replication factor 2": dict(nodes=7, partitions=400, replication_factor=2, placement="skewed"),
}


def unsatisfied(proposal, hard: bool | None = None) -> list[str]:
    return [f"{g.goal}: {g.violation_after} ({g.reason})" for g in proposal.goals
            if not g.satisfied_after and (hard is None or g.hard == hard)]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_goal_holds_after_a_proposal_on_generated_clusters(shape, seed):
    model = synthetic_cluster(seed, **SHAPES[shape])
    proposal = propose(model)
    after = apply(model, proposal)
    assert hard_breaches(model, after) == [], f"seed={seed}"
    assert unsatisfied(proposal) == [], f"seed={seed}"
    assert proposal.loads_after == after.node_loads(), f"seed={seed}"


@pytest.mark.parametrize("shape", SHAPES)
def test_proposing_again_after_applying_gives_an_empty_proposal(shape, seed):
    model = synthetic_cluster(seed, **SHAPES[shape])
    again = propose(apply(model, propose(model)))
    assert again.is_empty, f"seed={seed}: {again.replica_moves[:3]} {again.leadership_changes[:3]}"


@pytest.mark.parametrize("shape", ["random", "three racks", "a new empty node"])
def test_the_same_cluster_in_any_order_gives_the_same_proposal(shape, seed):
    model = synthetic_cluster(seed, **SHAPES[shape])
    shuffle = random.Random(seed)
    shuffled = ClusterModel(tuple(shuffle.sample(model.nodes, len(model.nodes))),
                            tuple(shuffle.sample(model.partitions, len(model.partitions))))
    first, second = propose(model), propose(shuffled)
    assert first.replica_moves == second.replica_moves, f"seed={seed}"
    assert first.leadership_changes == second.leadership_changes, f"seed={seed}"


def test_a_balanced_cluster_gives_an_empty_proposal():
    nodes = tuple(Node(i, log_dirs=(LogDir("/d", 100 * GIB),)) for i in (1, 2, 3))
    partitions = tuple(Partition("t", i, replicas=tuple(1 + (i + k) % 3 for k in range(3)), leader=1 + i % 3,
                                 size_bytes=GIB, bytes_in=1000.0, bytes_out=2000.0) for i in range(6))
    proposal = propose(ClusterModel(nodes, partitions))
    assert proposal.is_empty and proposal.bytes_moved == 0
    assert all(g.satisfied_before and g.satisfied_after for g in proposal.goals)


def test_a_topic_all_on_one_node_spreads_to_within_one_replica_and_leader():
    """The issue's three-node case: every replica of a topic on node 1."""
    nodes = tuple(Node(i) for i in (1, 2, 3))
    partitions = tuple(Partition("crowded", i, (1,), 1, size_bytes=GIB) for i in range(7))
    model = ClusterModel(nodes, partitions)
    after = apply(model, propose(model))
    fewest, most = count_spread(after, "replicas")
    assert most - fewest <= 1
    fewest, most = count_spread(after, "leaders")
    assert most - fewest <= 1


def test_leadership_moves_before_data():
    # Leaders all on node 1, replicas already even: only leaderships need to move, and nothing is copied.
    nodes = tuple(Node(i) for i in (1, 2, 3))
    partitions = tuple(Partition("t", i, (1, 2, 3), 1, size_bytes=GIB, bytes_in=100.0) for i in range(9))
    proposal = propose(ClusterModel(nodes, partitions))
    assert proposal.replica_moves == () and proposal.bytes_moved == 0
    assert len(proposal.leadership_changes) == 6
    assert sorted(load.leaders for load in proposal.loads_after.values()) == [3, 3, 3]
    assert {c.goal for c in proposal.leadership_changes} <= {"NetworkOutboundUsageDistributionGoal",
                                                             "LeaderReplicaDistributionGoal",
                                                             "LeaderBytesInDistributionGoal"}


def test_a_move_serving_a_count_picks_small_partitions():
    # Node 1 holds one replica too many; among its partitions, the smallest moves.
    nodes = tuple(Node(i) for i in (1, 2))
    sizes = [5 * GIB, GIB, 3 * GIB]
    partitions = tuple(Partition("t", i, (1,), 1, size_bytes=s) for i, s in enumerate(sizes))
    partitions += (Partition("u", 0, (2,), 2, size_bytes=0),)
    proposal = propose(ClusterModel(nodes, partitions), goals_by_name(["ReplicaDistributionGoal"]))
    assert [(m.topic, m.partition, m.bytes_moved) for m in proposal.replica_moves] == [("t", 1, GIB)]


def test_small_partitions_held_on_every_node_do_not_use_up_the_search():
    # Node 1's smallest replicas are of 60 partitions with a replica on every node (a three-node cluster's
    # __consumer_offsets): none can move, and trying them must not end its turn before the crowded topic.
    nodes = tuple(Node(i) for i in (1, 2, 3))
    partitions = tuple(Partition("__consumer_offsets", i, (1, 2, 3), 1) for i in range(60))
    partitions += tuple(Partition("crowded", i, (1,), 1, size_bytes=GIB) for i in range(16))
    proposal = propose(ClusterModel(nodes, partitions), goals_by_name(["ReplicaDistributionGoal"]))
    assert proposal.goal("ReplicaDistributionGoal").violation_after is None
    assert {m.topic for m in proposal.replica_moves} == {"crowded"}


def test_each_move_names_its_goal_and_bytes_moved_counts_replicas_added():
    model = synthetic_cluster(7, nodes=4, partitions=60, placement="skewed", empty_nodes=1)
    proposal = propose(model)
    goal_names = {g.goal for g in proposal.goals}
    for move in proposal.replica_moves:
        size = next(p.size_bytes for p in model.partitions if (p.topic, p.index) == (move.topic, move.partition))
        assert move.bytes_moved == size * len(move.added) > 0
        assert move.goal in goal_names
        assert len(move.new_log_dirs) == len(move.new_replicas)
    assert proposal.bytes_moved == sum(m.bytes_moved for m in proposal.replica_moves)


def test_a_later_goal_never_undoes_an_earlier_one(seed):
    model = synthetic_cluster(seed, nodes=6, partitions=300, placement="skewed")
    proposal = propose(model, goals_by_name(["ReplicaDistributionGoal", "LeaderReplicaDistributionGoal",
                                             "DiskUsageDistributionGoal"]))
    assert [g.goal for g in proposal.goals if g.satisfied_after] == [
        "DrainGoal", "DemoteGoal", "ReplicaDistributionGoal", "DiskUsageDistributionGoal",
        "LeaderReplicaDistributionGoal"], f"seed={seed}"


def test_tight_disk_is_relieved_per_log_dir(seed):
    # Node 1's first dir is full; its second dir and the other nodes have room.
    nodes = (Node(1, log_dirs=(LogDir("/a", 10 * GIB), LogDir("/b", 100 * GIB))),
             Node(2, log_dirs=(LogDir("/a", 100 * GIB),)), Node(3, log_dirs=(LogDir("/a", 100 * GIB),)))
    rng = random.Random(seed)
    partitions = tuple(Partition("t", i, (1, 2 + i % 2), 1, size_bytes=rng.randrange(GIB // 2, GIB),
                                 log_dirs=("/a", "/a")) for i in range(20))  # at least 10 GiB in /a
    model = ClusterModel(nodes, partitions)
    proposal = propose(model, goals_by_name(["DiskCapacityGoal"]))
    after = apply(model, proposal)
    assert after.node_loads()[1].log_dir_bytes["/a"] <= 0.85 * 10 * GIB, f"seed={seed}"
    assert proposal.goal("DiskCapacityGoal").satisfied_after and not proposal.goal("DiskCapacityGoal").satisfied_before


def test_max_replica_moves_stops_the_proposal_early(seed):
    model = synthetic_cluster(seed, nodes=6, partitions=300, placement="skewed")
    proposal = propose(model, options=ProposalOptions(max_replica_moves=5))
    assert proposal.stopped_at_move_limit
    assert sum(len(m.added) for m in proposal.replica_moves) <= 5, f"seed={seed}"
    assert hard_breaches(model, apply(model, proposal)) == [], f"seed={seed}"


def test_a_dead_node_not_being_healed_keeps_its_replicas_and_gets_none(seed):
    model = synthetic_cluster(seed, nodes=6, partitions=300, placement="skewed")
    model = replace(model, nodes=tuple(replace(n, alive=n.id != 4) for n in model.nodes))
    proposal = propose(model)
    for move in proposal.replica_moves:
        assert (4 in move.old_replicas) == (4 in move.new_replicas), f"seed={seed}: {move}"
    assert all(c.new_leader != 4 for c in proposal.leadership_changes)
    assert propose(apply(model, proposal)).is_empty, f"seed={seed}"


def test_a_moderate_cluster_is_balanced_by_every_goal(seed):
    model = synthetic_cluster(seed, nodes=20, partitions=2000, placement="skewed", racks=4)
    proposal = propose(model)
    assert hard_breaches(model, apply(model, proposal)) == [], f"seed={seed}"
    assert unsatisfied(proposal) == [], f"seed={seed}"
