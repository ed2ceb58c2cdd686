"""The operations a proposal is asked for: remove (drain) nodes, add nodes, demote nodes, heal dead nodes."""

from dataclasses import replace

import pytest

from odradek.balancer import (
    BalancerError,
    ClusterModel,
    LogDir,
    Node,
    Partition,
    ProposalOptions,
    apply,
    propose,
)
from odradek.balancer.synthetic import GIB, synthetic_cluster
from tests.balancer.checks import hard_breaches


def with_nodes(model: ClusterModel, **changes_by_id) -> ClusterModel:
    """model with node attributes changed: with_nodes(m, n4={"alive": False})."""
    nodes = tuple(replace(n, **changes_by_id.get(f"n{n.id}", {})) for n in model.nodes)
    return replace(model, nodes=nodes)


def kill(model: ClusterModel, node: int) -> ClusterModel:
    """node dead, as the controller leaves it: out of every ISR, its leaderships elected to another in-sync
    replica."""
    partitions = []
    for p in model.partitions:
        if node in p.replicas:
            in_sync = tuple(r for r in p.in_sync_replicas if r != node)
            leader = p.leader if p.leader != node else (in_sync[0] if in_sync else None)
            p = replace(p, in_sync=in_sync, leader=leader)
        partitions.append(p)
    return replace(with_nodes(model, **{f"n{node}": {"alive": False}}), partitions=tuple(partitions))


@pytest.mark.parametrize("racks", [0, 3])
def test_removing_a_node_drains_every_replica_off_it(racks, seed):
    model = synthetic_cluster(seed, nodes=9, partitions=300, racks=racks)
    options = ProposalOptions(remove={5})
    proposal = propose(model, options=options)
    after = apply(model, proposal)
    assert after.node_loads()[5].replicas == 0, f"seed={seed}"
    assert hard_breaches(model, after, options) == [], f"seed={seed}"
    assert proposal.goal("DrainGoal").satisfied_after and not proposal.goal("DrainGoal").satisfied_before
    drained = [m for m in proposal.replica_moves if 5 in m.old_replicas]
    assert drained and all(m.goal == "DrainGoal" for m in drained)
    assert propose(after, options=options).is_empty, f"seed={seed}"


def test_a_node_flagged_being_removed_is_drained_without_the_option(seed):
    model = with_nodes(synthetic_cluster(seed, nodes=5, partitions=100), n2={"being_removed": True})
    assert apply(model, propose(model)).node_loads()[2].replicas == 0, f"seed={seed}"


def test_removal_is_refused_when_too_few_nodes_would_remain():
    model = synthetic_cluster(1, nodes=3, partitions=30)
    with pytest.raises(BalancerError, match=r"^cannot remove node 3: 2 nodes would remain to hold replication "
                                            r"factor 3 of topic-\d+-\d+$"):
        propose(model, options=ProposalOptions(remove={3}))


def test_removal_is_refused_when_the_remaining_racks_are_fewer_than_the_replication_factor():
    model = synthetic_cluster(1, nodes=6, partitions=60, racks=3)  # racks 0, 1, 2: nodes 3 and 6 in rack-2
    with pytest.raises(BalancerError, match="cannot remove nodes 3, 6: the remaining nodes span 2 racks, fewer "
                                            "than replication factor 3"):
        propose(model, options=ProposalOptions(remove={3, 6}))


def test_removal_is_refused_when_the_remaining_disks_cannot_hold_the_data():
    model = synthetic_cluster(1, nodes=4, partitions=40, replication_factor=2, disk_fill=0.7)
    with pytest.raises(BalancerError, match="cannot remove node 4: .* bytes, and the remaining log dirs hold"):
        propose(model, options=ProposalOptions(remove={4}))


def test_removal_is_refused_when_no_node_can_take_a_replica():
    # Plenty of room overall, but the one node that could take orders-0's replica is at its replica limit.
    nodes = (Node(1, rack="a"), Node(2, rack="b"), Node(3, rack="c"), Node(4, rack="c", max_replicas=1),
             Node(5, rack="a"), Node(6, rack="b"))
    partitions = (Partition("orders", 0, (1, 2, 3), 1), Partition("other", 0, (4,), 4))
    with pytest.raises(BalancerError) as refused:
        propose(ClusterModel(nodes, partitions), options=ProposalOptions(remove={3}))
    assert str(refused.value) == ("cannot remove node 3: no node can take its replica of orders-0 (2 RackAwareGoal "
                                  "refuses, 1 ReplicaCapacityGoal refuses, 2 hold it already)")


def test_adding_nodes_moves_load_only_onto_the_new_nodes(seed):
    model = synthetic_cluster(seed, nodes=6, partitions=300, placement="skewed", empty_nodes=2)
    new = {7, 8}
    proposal = propose(model, options=ProposalOptions(move_onto=new))
    assert proposal.replica_moves, f"seed={seed}"
    for move in proposal.replica_moves:
        assert set(move.added) <= new, f"seed={seed}: {move}"
    for change in proposal.leadership_changes:
        assert change.new_leader in new, f"seed={seed}: {change}"
    after = apply(model, proposal)
    loads = after.node_loads()
    share = sum(load.replicas for load in loads.values()) / len(loads)
    assert all(loads[n].replicas >= int(share * 0.9) for n in new), f"seed={seed}: {loads}"
    assert hard_breaches(model, after) == [], f"seed={seed}"


def test_moving_onto_a_node_that_may_not_hold_replicas_is_refused():
    model = with_nodes(synthetic_cluster(1, nodes=4, partitions=20), n4={"alive": False})
    with pytest.raises(BalancerError, match="cannot move onto node 4: not a live node that may hold replicas"):
        propose(model, options=ProposalOptions(move_onto={4}))


def test_demoting_moves_every_leadership_away_where_another_in_sync_replica_exists(seed):
    model = synthetic_cluster(seed, nodes=5, partitions=200)
    # Ten partitions led by node 2 have no other in-sync replica: their leadership cannot move.
    led_by_2 = [p for p in model.partitions if p.leader == 2]
    alone = {(p.topic, p.index) for p in led_by_2[:10]}
    partitions = tuple(replace(p, in_sync=(2,)) if (p.topic, p.index) in alone else p for p in model.partitions)
    model = replace(model, partitions=partitions)
    options = ProposalOptions(demote={2})

    demotion = propose(model, goals=[], options=options)  # the operation alone
    after = apply(model, demotion)
    assert {(p.topic, p.index) for p in after.partitions if p.leader == 2} == alone, f"seed={seed}"
    assert demotion.replica_moves == () and len(demotion.leadership_changes) == len(led_by_2) - 10
    assert {c.goal for c in demotion.leadership_changes} == {"DemoteGoal"}
    assert all(p.leader is None or p.replicas[0] == p.leader for p in after.partitions)  # the preferred leader

    # With every goal, partitions of `alone` may also see node 2's replica moved away altogether.
    proposal = propose(model, options=options)
    after = apply(model, proposal)
    still_led = {(p.topic, p.index) for p in after.partitions if p.leader == 2}
    assert still_led <= alone, f"seed={seed}: {still_led - alone}"
    assert proposal.goal("DemoteGoal").satisfied_after, f"seed={seed}"
    assert propose(after, options=options).is_empty, f"seed={seed}"


def test_a_demoted_node_gains_no_leadership(seed):
    model = with_nodes(synthetic_cluster(seed, nodes=5, partitions=200, placement="skewed"),
                       n3={"leadership_excluded": True})
    proposal = propose(model)
    assert all(c.new_leader != 3 for c in proposal.leadership_changes), f"seed={seed}"
    assert all(m.new_replicas[0] != 3 or m.new_replicas[0] in m.old_replicas[:1] for m in proposal.replica_moves)


def test_healing_a_dead_node_rebuilds_its_replicas_from_live_ones(seed):
    model = synthetic_cluster(seed, nodes=9, partitions=300, racks=3)
    # One partition had no in-sync replica but the one on node 4: it goes offline with it, nothing to copy from.
    victim = next(p for p in model.partitions if p.replicas[0] == 4)
    model = kill(replace(model, partitions=tuple(replace(p, in_sync=(4,)) if p == victim else p
                                                 for p in model.partitions)), 4)
    options = ProposalOptions(heal={4})
    proposal = propose(model, options=options)
    after = apply(model, proposal)
    held = [p.name for p in after.partitions if 4 in p.replicas]
    assert held == [victim.name], f"seed={seed}"
    assert hard_breaches(model, after, options) == [], f"seed={seed}"
    report = proposal.goal("DrainGoal")
    assert not report.satisfied_after and "without a leader to copy from" in report.reason
    for move in proposal.replica_moves:
        if 4 in move.old_replicas:
            assert 4 not in move.new_replicas and all(after.node(n).alive for n in move.new_replicas)


def test_healing_a_live_node_is_refused():
    with pytest.raises(BalancerError, match="cannot heal node 2: it is alive"):
        propose(synthetic_cluster(1, nodes=3, partitions=10), options=ProposalOptions(heal={2}))


def test_operations_on_unknown_nodes_are_refused():
    with pytest.raises(BalancerError, match="cannot remove node 9: not in the cluster"):
        propose(synthetic_cluster(1, nodes=3, partitions=10), options=ProposalOptions(remove={9}))


def test_a_replica_moves_into_the_log_dir_with_the_most_room():
    nodes = (Node(1, log_dirs=(LogDir("/a", 10 * GIB),)),
             Node(2, log_dirs=(LogDir("/x", 10 * GIB), LogDir("/y", 40 * GIB))))
    partitions = (Partition("t", 0, (1,), 1, size_bytes=GIB), Partition("t", 1, (1,), 1, size_bytes=GIB))
    proposal = propose(ClusterModel(nodes, partitions), options=ProposalOptions(remove={1}))
    assert {m.new_log_dirs for m in proposal.replica_moves} == {("/y",)}
