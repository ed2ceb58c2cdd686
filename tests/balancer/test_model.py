"""The load model: how partitions load their nodes, and which models are refused."""

import pytest

from odradek.balancer import BalancerError, ClusterModel, LogDir, Node, Partition

MIB = 2**20


def three_nodes(**node_settings) -> tuple[Node, ...]:
    return tuple(Node(id=i, rack=f"r{i}", log_dirs=(LogDir("/a", 1000), LogDir("/b", 3000)), **node_settings)
                 for i in (1, 2, 3))


def test_leader_carries_produce_consumers_and_replication_out_followers_carry_replication_in():
    partition = Partition("orders", 0, replicas=(1, 2, 3), leader=1, size_bytes=100, bytes_in=10 * MIB,
                          bytes_out=30 * MIB, produce_requests=5, fetch_requests=7, log_dirs=("/a", "/b", "/a"))
    loads = ClusterModel(three_nodes(), (partition,)).node_loads()
    leader, follower = loads[1], loads[2]
    assert (leader.replicas, leader.leaders, follower.replicas, follower.leaders) == (1, 1, 1, 0)
    assert leader.network_in == follower.network_in == 10 * MIB  # produced to the leader, fetched by followers
    assert leader.network_out == 30 * MIB + 2 * 10 * MIB  # consumers, and one copy per follower
    assert follower.network_out == 0
    assert (leader.leader_bytes_in, follower.leader_bytes_in) == (10 * MIB, 0)
    assert (leader.produce_requests, leader.fetch_requests, follower.produce_requests) == (5, 7, 0)
    assert leader.log_dir_bytes == {"/a": 100, "/b": 0} and follower.log_dir_bytes == {"/a": 0, "/b": 100}
    assert leader.disk_bytes == 100 and leader.disk_capacity_bytes == 4000 and leader.disk_ratio == 100 / 4000
    assert leader.topic_replicas == {"orders": 1}


def test_replicas_without_named_log_dirs_live_in_their_nodes_first_dir():
    loads = ClusterModel(three_nodes(), (Partition("t", 0, (2,), 2, size_bytes=50),)).node_loads()
    assert loads[2].log_dir_bytes == {"/a": 50, "/b": 0}


def test_a_leader_on_a_dead_node_counts_as_no_leader():
    nodes = (Node(1), Node(2, alive=False))
    loads = ClusterModel(nodes, (Partition("t", 0, (2, 1), 2, bytes_in=5.0),)).node_loads()
    assert loads[2].leaders == 0 and loads[2].network_out == 0
    assert loads[2].network_in == 5.0  # the replica is still counted where it is


def test_unknown_capacity_leaves_the_disk_ratio_unknown():
    loads = ClusterModel((Node(1),), (Partition("t", 0, (1,), 1, size_bytes=10),)).node_loads()
    assert loads[1].disk_capacity_bytes is None and loads[1].disk_ratio is None


@pytest.mark.parametrize(("partition", "message"), [
    (Partition("t", 0, (1, 9), 1), "replica on node 9, not in the model"),
    (Partition("t", 0, (1, 1), 1), "expected distinct nodes"),
    (Partition("t", 0, (1, 2), 3), "leader 3, not one of its replicas"),
    (Partition("t", 0, (1, 2), 1, in_sync=(1, 3)), "in-sync replicas outside"),
    (Partition("t", 0, (1, 2), 1, log_dirs=("/a",)), "names 1 log dirs for 2 replicas"),
    (Partition("t", 0, (1, 2), 1, log_dirs=("/a", "/c")), "node 2 has no log dir '/c'"),
])
def test_inconsistent_models_are_refused_in_one_line(partition, message):
    with pytest.raises(BalancerError, match=message) as raised:
        ClusterModel(three_nodes(), (partition,))
    assert "\n" not in str(raised.value)


def test_a_partition_or_node_given_twice_is_refused():
    with pytest.raises(BalancerError, match="partition t-0 appears twice"):
        ClusterModel(three_nodes(), (Partition("t", 0, (1,), 1), Partition("t", 0, (2,), 2)))
    with pytest.raises(BalancerError, match="node 1 appears twice"):
        ClusterModel((Node(1), Node(1)), ())
