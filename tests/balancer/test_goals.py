"""Goals: their names, settings, bounds and rack limits."""

import pytest

from odradek.balancer import (
    SETTING_NAMES,
    BalancerError,
    BalancerSettings,
    ClusterModel,
    Node,
    Partition,
    check_goals,
    default_goals,
    goals_by_name,
)
from odradek.balancer.cluster_state import ClusterState
from odradek.balancer.goals import (
    RackAwareGoal,
    ReplicaDistributionGoal,
    TopicReplicaDistributionGoal,
)


def test_default_goals_run_in_cruise_controls_priority_order_after_the_operations():
    assert [g.name for g in default_goals()] == [
        "DrainGoal", "DemoteGoal", "RackAwareGoal", "ReplicaCapacityGoal", "DiskCapacityGoal",
        "NetworkInboundCapacityGoal", "NetworkOutboundCapacityGoal", "ReplicaDistributionGoal",
        "DiskUsageDistributionGoal", "NetworkInboundUsageDistributionGoal", "NetworkOutboundUsageDistributionGoal",
        "TopicReplicaDistributionGoal", "LeaderReplicaDistributionGoal", "LeaderBytesInDistributionGoal"]
    assert [g.hard for g in default_goals()] == [True] * 7 + [False] * 7


def test_cruise_control_goal_names_map_onto_goals_in_priority_order():
    names = ["com.linkedin.kafka.cruisecontrol.analyzer.goals.LeaderReplicaDistributionGoal",
             "RackAwareDistributionGoal", "ReplicaDistributionGoal"]
    assert [g.name for g in goals_by_name(names)] == [
        "RackAwareGoal", "ReplicaDistributionGoal", "LeaderReplicaDistributionGoal"]
    with pytest.raises(BalancerError, match="unknown goal 'CpuCapacityGoal'"):
        goals_by_name(["CpuCapacityGoal"])


def test_settings_come_from_balancer_properties_and_reach_the_goals():
    settings = BalancerSettings.from_properties({
        "balancer.replica.count.balance.threshold": "1.25", "balancer.disk.max.ratio": "0.7",
        "balancer.topic.replica.count.balance.min.gap": "5", "balancer.mode": "continuous"})
    assert settings.replica_count_balance_threshold == 1.25 and settings.disk_max_ratio == 0.7
    assert settings.topic_replica_count_balance_min_gap == 5
    goals = {g.name: g for g in default_goals(settings)}
    assert goals["ReplicaDistributionGoal"].threshold == 1.25 and goals["DiskCapacityGoal"].max_ratio == 0.7
    assert SETTING_NAMES["network_inbound_balance_threshold"] == "balancer.network.inbound.balance.threshold"


@pytest.mark.parametrize(("properties", "message"), [
    ({"balancer.disk.max.ratio": "1.5"}, r"balancer.disk.max.ratio=1.5: expected a ratio in \(0, 1\]"),
    ({"balancer.replica.count.balance.threshold": "0.9"}, "expected 1.0 or more"),
    ({"balancer.disk.balance.threshold": "lots"}, "expected a number"),
])
def test_bad_settings_are_refused(properties, message):
    with pytest.raises(BalancerError, match=message):
        BalancerSettings.from_properties(properties)


def test_replica_count_bounds_always_admit_a_balanced_placement():
    # 10 replicas over 3 nodes: share 3.33; 10% either way would be 3.0..3.67, so whole counts widen it to 3..4
    nodes = tuple(Node(i) for i in (1, 2, 3))
    model = ClusterModel(nodes, tuple(Partition("t", i, (1 + i % 3,), 1 + i % 3) for i in range(10)))
    bounds = ReplicaDistributionGoal(1.10).bounds(ClusterState(model))
    assert (bounds.lower, bounds.upper) == ([3, 3, 3], [4, 4, 4])


def test_disk_bounds_follow_capacity():
    from odradek.balancer import LogDir
    nodes = (Node(1, log_dirs=(LogDir("/d", 1000),)), Node(2, log_dirs=(LogDir("/d", 3000),)))
    model = ClusterModel(nodes, (Partition("t", 0, (1, 2), 1, size_bytes=400),))
    goal = next(g for g in default_goals() if g.name == "DiskUsageDistributionGoal")
    assert goal.shares(ClusterState(model)) == [200.0, 600.0]


@pytest.mark.parametrize(("rack_sizes", "rf", "most", "fewest"), [
    ({"a": 2, "b": 2, "c": 2}, 3, 1, {}),  # enough racks: one replica per rack
    ({"a": 3, "b": 3}, 3, 2, {"a": 1, "b": 1}),  # two racks for three replicas: 2 and 1
    ({"a": 1, "b": 5}, 4, 3, {"a": 1, "b": 2}),  # a one-node rack takes all it can, the other the rest
    ({"a": 2, "b": 2, "c": 2}, 4, 2, {"a": 1, "b": 1, "c": 1}),
])
def test_rack_limits_spread_replicas_as_evenly_as_the_racks_allow(rack_sizes, rf, most, fewest):
    nodes, node_id = [], 1
    for rack, size in rack_sizes.items():
        for _ in range(size):
            nodes.append(Node(node_id, rack=rack))
            node_id += 1
    state = ClusterState(ClusterModel(tuple(nodes), ()))
    limits = RackAwareGoal().limits(state, rf)
    assert limits.most == most
    assert {state.rack_names[rack]: least for rack, least in limits.fewest.items()} == fewest


def test_nodes_without_a_rack_are_racks_of_their_own():
    nodes = tuple(Node(i) for i in (1, 2, 3))
    model = ClusterModel(nodes, (Partition("t", 0, (1, 2, 3), 1),))
    assert check_goals(model)["RackAwareGoal"] is None


def test_rack_aware_violation_names_a_partition_sharing_a_rack():
    nodes = (Node(1, rack="a"), Node(2, rack="a"), Node(3, rack="b"), Node(4, rack="c"))
    model = ClusterModel(nodes, (Partition("t", 0, (1, 2, 3), 1),))
    assert check_goals(model)["RackAwareGoal"] == "1 partitions spread unevenly over racks, e.g. t-0 in racks a, a, b"


def test_topic_bounds_keep_a_gap_of_at_least_min_gap_around_the_share():
    nodes = tuple(Node(i) for i in range(1, 11))
    model = ClusterModel(nodes, tuple(Partition("t", i, (1 + i % 10,), 1 + i % 10) for i in range(20)))
    state = ClusterState(model)
    # share 2: 3.00 x 2 = 6 is a gap of 4 (between min gap 2 and max gap 40)
    assert TopicReplicaDistributionGoal().topic_bounds(state, 0) == (0, 6)
    assert TopicReplicaDistributionGoal(threshold=1.1, min_gap=2).topic_bounds(state, 0) == (0, 4)
