"""The balancer service on real clusters, driven as an operator drives it: `odradek balancer rebalance` spreads a
topic crowded onto one node while an idempotent producer (kafka-python) and a read_committed consumer
(confluent-kafka) run; continuous mode gives
a new node its share, `remove-nodes` drains a node before it is stopped, and a node killed for longer than
balancer.node.unavailable.timeout.ms has its replicas rebuilt on the others; an execution goes on after the node
running the balancer is killed mid-way."""

import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.balancer.admin import BalancerAdmin
from odradek.balancer.control import ControlError
from odradek.balancer.executor import EXECUTION_TOPIC
from odradek.balancer.model import BalancerError
from tests.balancer.test_executor import (
    PARTITIONS,
    Traffic,
    assert_balanced,
    counts,
    crowded_topic,
    finish_traffic,
)
from tests.conftest import Cluster
from tests.sql.server_process import wait_for

pytestmark = pytest.mark.timeout(240)

BALANCER = {"balancer.mode": "continuous", "balancer.sampling.enable": "true", "balancer.sample.interval.ms": "1000",
            "balancer.check.interval.ms": "500", "min.insync.replicas": "1",
            "offsets.topic.num.partitions": "6"}  # fewer partitions to move: shorter tests


def balancer_cli(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "balancer", *args, "--bootstrap-server",
                           cluster.bootstrap, *cluster.cli_args], capture_output=True, text=True, timeout=180)


def replicas_on(admin: AdminClient, node: int) -> list[str]:
    metadata = admin.list_topics(timeout=30)
    return [f"{name}-{index}" for name, topic in metadata.topics.items()
            for index, p in topic.partitions.items() if node in p.replicas]


def service_node(admin: AdminClient) -> int:
    """The node running the balancer: the leader of its topic's partition."""
    return admin.list_topics(EXECUTION_TOPIC, timeout=30).topics[EXECUTION_TOPIC].partitions[0].leader


def partial_cluster(tmp_path, settings: dict, started: int) -> Cluster:
    """Three combined nodes and a broker-only node 4, of which the first `started` run."""
    cluster = Cluster(tmp_path / "cluster", 4, settings, ["broker,controller"] * 3 + ["broker"])
    for node in cluster.nodes[:started]:
        node.spawn()
    for node in cluster.nodes[:started]:
        node.wait_listening(60)
    return cluster


def test_rebalance_from_the_command_line_while_clients_run(cluster_factory):
    cluster = cluster_factory(3, BALANCER)
    admin = AdminClient(cluster.client_settings())
    topic = crowded_topic(cluster, admin, (1,))
    traffic = Traffic(cluster, topic).start()
    wait_for(lambda: traffic.produced() > 200, 60, "records before the rebalance")

    dry = balancer_cli(cluster, "rebalance", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert counts(admin, topic)[0][1] == PARTITIONS, "a dry run changes nothing"
    done = balancer_cli(cluster, "rebalance", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "accepted" in done.stdout

    assert_balanced(admin, topic)
    finish_traffic(traffic)
    status = json.loads(balancer_cli(cluster, "status", "--json").stdout)
    assert "rebalance" in json.dumps(status)


def test_continuous_mode_fills_a_new_node_heals_a_dead_one_and_remove_nodes_drains_one(tmp_path):
    cluster = partial_cluster(tmp_path, {**BALANCER, "balancer.node.unavailable.timeout.ms": "3000"}, started=3)
    try:
        admin = AdminClient(cluster.client_settings())
        topic = f"spread-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
        traffic = Traffic(cluster, topic).start()
        watcher = BalancerAdmin(cluster.client_settings())
        wait_for(lambda: traffic.produced() > 200, 60, "records")

        def node_4_has_its_share():  # ReplicaDistributionGoal's lower bound, 0.9 of an even share
            metadata = admin.list_topics(timeout=30)
            total = sum(len(p.replicas) for t in metadata.topics.values() for p in t.partitions.values())
            return len(replicas_on(admin, 4)) >= int(total / 4 * 0.9)

        cluster.node(4).start(60)  # nobody asks: the new node gets its share
        wait_for(node_4_has_its_share, 120, "node 4 to get its share")
        assert watcher.wait(timeout_s=120).status == "done"

        cluster.node(4).kill()  # down longer than the timeout: its replicas are rebuilt on nodes 1-3

        def every_partition_back_to_three_in_sync():
            metadata = admin.list_topics(timeout=30)
            return all(len(p.isrs) == len(p.replicas) == 3 and 4 not in p.replicas
                       for name, t in metadata.topics.items() for p in t.partitions.values()
                       if name in (topic, "__consumer_offsets"))

        wait_for(every_partition_back_to_three_in_sync, 120, "every partition back to three in-sync replicas")
        assert watcher.wait(timeout_s=120).status == "done"
        assert any(r.operation == "heal" and r.nodes == (4,) for r in watcher.status().results)

        cluster.node(4).start(60)  # back, and empty: it gets its share again
        wait_for(node_4_has_its_share, 120, "node 4 to get its share again")
        assert watcher.wait(timeout_s=120).status == "done", "the automatic execution ends before an operator's"
        removed = balancer_cli(cluster, "remove-nodes", "4", "--wait")
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert replicas_on(admin, 4) == [], "every replica left node 4 before it stops"
        cluster.node(4).stop()
        finish_traffic(traffic)
        assert watcher.status().service.removed_nodes == (4,)
        watcher.close()
    finally:
        cluster.stop()


def test_an_execution_stops_resumes_and_goes_on_after_the_node_running_the_balancer_is_killed(cluster_factory):
    cluster = cluster_factory(3, {**BALANCER, "balancer.max.moves.total": "3", "balancer.check.interval.ms": "1000"})
    admin = AdminClient(cluster.client_settings())
    topic = f"crowded-{uuid.uuid4().hex[:6]}"  # enough partitions on node 1 to unbalance the replica counts
    admin.create_topics([NewTopic(topic, 16, replica_assignment=[[1]] * 16)])[topic].result(30)
    balancer = BalancerAdmin(cluster.client_settings())
    try:
        result = balancer.request("rebalance", goals=["ReplicaDistributionGoal"])
        assert result.execution_id is not None and result.replica_moves >= 4, result
        assert balancer.request("stop").execution_id == result.execution_id
        stopped = balancer.wait(result.execution_id, 60)  # the moves in flight (at most 3) finish, no other starts
        assert stopped.status == "stopped" and stopped.moves_done < result.replica_moves, stopped
        with pytest.raises(BalancerError, match="is stopped|no execution is running"):
            balancer.request("stop")
        assert balancer.request("resume").execution_id == result.execution_id

        host = service_node(admin)
        wait_for(lambda: balancer.status().progress.moves_done > stopped.moves_done, 60, "a move after the resume")
        cluster.node(host).kill()

        def taken_over():
            try:
                service = balancer.status().service
            except ControlError:  # the topic's leader moving
                return False
            return service is not None and service.node_id != host

        wait_for(taken_over, 60, "another node to run the balancer")
        cluster.node(host).start(60)
        progress = balancer.wait(result.execution_id, 120)
        assert (progress.status, progress.moves_failed) == ("done", 0), progress
        assert progress.moves_done == result.replica_moves
    finally:
        balancer.close()
