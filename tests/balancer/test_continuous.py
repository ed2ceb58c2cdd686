"""What each operation asks of the optimizer (`plan`), and when continuous and node_add modes act by themselves
(`automatic_action`): sans-I/O, on small hand-made models."""

import pytest

from odradek.balancer import BalancerError, BalancerSettings, ClusterModel, LogDir, Node, Partition
from odradek.balancer.control import ADD_NODES, DEMOTE, HEAL, REBALANCE, REMOVE_NODES
from odradek.balancer.operations import automatic_action, plan

TIMEOUT_MS = 60_000
SETTINGS = BalancerSettings()


def model(nodes=4, dead=(), empty=(), dir_bytes=None) -> ClusterModel:
    """RF3 partitions over the nodes not in `empty`, each partition 1 GB (or dir_bytes), log dirs of 100 GB."""
    holders = [n for n in range(1, nodes + 1) if n not in empty]
    node_list = tuple(Node(n, alive=n not in dead, log_dirs=(LogDir("/d", 10**11),)) for n in range(1, nodes + 1))
    partitions = []
    for i in range(12):
        replicas = tuple(holders[(i + k) % len(holders)] for k in range(3))
        leader = next((r for r in replicas if r not in dead), None)
        partitions.append(Partition("t", i, replicas, leader, size_bytes=dir_bytes or 10**9,
                                    in_sync=tuple(r for r in replicas if r not in dead)))
    return ClusterModel(node_list, tuple(partitions))


def test_remove_nodes_drains_them_and_later_proposals_keep_them_empty():
    proposal = plan(REMOVE_NODES, [4], model())
    assert proposal.replica_moves and all(4 not in m.new_replicas for m in proposal.replica_moves)
    assert all(4 not in m.new_replicas for m in plan(REBALANCE, [], model(empty=(4,)), removed=[4]).replica_moves)


def test_add_nodes_takes_a_removed_node_back_and_moves_only_onto_it():
    proposal = plan(ADD_NODES, [4], model(empty=(4,)), removed=[4])
    assert proposal.replica_moves
    assert all(set(m.added) == {4} for m in proposal.replica_moves)


def test_demote_moves_leadership_and_no_replica():
    proposal = plan(DEMOTE, [1], model())
    assert not proposal.replica_moves
    assert proposal.leadership_changes and all(c.new_leader != 1 for c in proposal.leadership_changes)


def test_operations_refuse_unknown_nodes_missing_nodes_and_dead_nodes_to_add():
    with pytest.raises(BalancerError, match="unknown node 9: the cluster has 1, 2, 3, 4"):
        plan(REMOVE_NODES, [9], model())
    with pytest.raises(BalancerError, match="needs at least one node id"):
        plan(DEMOTE, [], model())
    with pytest.raises(BalancerError, match="cannot add node 4: not alive"):
        plan(ADD_NODES, [4], model(dead=(4,)))
    with pytest.raises(BalancerError, match="cannot remove node"):
        plan(REMOVE_NODES, [3, 4], model())  # RF3 on two nodes


def test_goals_named_run_alone():
    proposal = plan(REBALANCE, [], model(), goals=["ReplicaDistributionGoal"])
    assert [g.goal for g in proposal.goals] == ["DrainGoal", "DemoteGoal", "ReplicaDistributionGoal"]


def test_a_node_down_past_the_timeout_is_healed_in_continuous_mode_only():
    dead = model(dead=(4,))
    since = {4: 0}
    assert automatic_action(dead, "continuous", SETTINGS, TIMEOUT_MS - 1, since, (), TIMEOUT_MS) is None
    action = automatic_action(dead, "continuous", SETTINGS, TIMEOUT_MS, since, (), TIMEOUT_MS)
    assert action[:2] == (HEAL, (4,)) and "unavailable for more than 60000 ms" in action[2]
    assert automatic_action(dead, "node_add", SETTINGS, TIMEOUT_MS, since, (), TIMEOUT_MS) is None
    assert automatic_action(dead, "off", SETTINGS, TIMEOUT_MS, since, (), TIMEOUT_MS) is None
    proposal = plan(HEAL, [4], dead)
    assert all(4 not in m.new_replicas and 4 in m.old_replicas for m in proposal.replica_moves)


def test_self_healing_needs_three_nodes():
    two = model(nodes=3, dead=(3,))
    small = ClusterModel(two.nodes[:2], tuple(Partition("t", i, (1, 2), 1) for i in range(3)))
    small = ClusterModel((small.nodes[0], Node(2, alive=False)), small.partitions)
    assert automatic_action(small, "continuous", SETTINGS, TIMEOUT_MS, {2: 0}, (), TIMEOUT_MS) is None


def test_a_node_holding_less_than_half_a_share_gets_its_share_unless_removed():
    new = model(empty=(4,))
    almost = ClusterModel(new.nodes, new.partitions + (Partition("u", 0, (4,), 4),))
    assert automatic_action(almost, "node_add", SETTINGS, 0, {}, (), TIMEOUT_MS)[:2] == (ADD_NODES, (4,))
    assert automatic_action(new, "node_add", SETTINGS, 0, {}, (), TIMEOUT_MS)[:2] == (ADD_NODES, (4,))
    assert automatic_action(new, "continuous", SETTINGS, 0, {}, (), TIMEOUT_MS)[:2] == (ADD_NODES, (4,))
    assert automatic_action(new, "continuous", SETTINGS, 0, {}, (4,), TIMEOUT_MS) is None
    assert automatic_action(new, "off", SETTINGS, 0, {}, (), TIMEOUT_MS) is None


def test_a_full_log_dir_starts_a_rebalance_that_sheds_it():
    full = model(dir_bytes=10**10)  # 9 replicas of 10 GB on each node: 90% of 100 GB
    action = automatic_action(full, "continuous", SETTINGS, 0, {}, (), TIMEOUT_MS)
    assert action[0] == REBALANCE and "above balancer.disk.max.ratio 0.85" in action[2]
    assert automatic_action(model(), "continuous", SETTINGS, 0, {}, (), TIMEOUT_MS) is None
