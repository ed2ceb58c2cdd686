"""`odradek balancer` against a real node: requests reach the balancer service and come back accepted or refused
with a one-line reason, and the JSON output parses."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.sql.server_process import wait_for

BALANCER = {"balancer.mode": "continuous", "balancer.sampling.enable": "true", "balancer.sample.interval.ms": "1000",
            "balancer.check.interval.ms": "500"}


def balancer(node, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "balancer", *argv, "--bootstrap-server", node.bootstrap],
                          capture_output=True, text=True, timeout=120)


def balancer_node(node_factory):
    """A node whose balancer service runs and has reported its state."""
    node = node_factory(BALANCER)
    wait_for(lambda: json.loads(balancer(node, "status", "--json").stdout)["service"] is not None, 60,
             "the balancer service")
    return node


def assert_refused(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode != 0
    assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


def test_bad_node_ids_are_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "odradek", "balancer", "remove-nodes", "x"], capture_output=True,
                          text=True, timeout=60)
    assert_refused(proc, "expected node ids separated by commas")


def test_rebalance_of_a_balanced_node_is_accepted_with_nothing_to_do(node_factory):
    node = balancer_node(node_factory)

    proc = balancer(node, "rebalance")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "nothing to do: the placement already meets the goals"

    status = json.loads(balancer(node, "status", "--json").stdout)
    assert status["service"]["mode"] == "continuous" and status["execution"] is None
    latest = status["results"][0]
    assert (latest["operation"], latest["status"], latest["execution_id"]) == ("rebalance", "accepted", None)

    table = balancer(node, "status")
    assert table.returncode == 0 and "rebalance  -      client  accepted" in table.stdout, table.stdout


def test_removing_the_only_node_or_an_unknown_node_is_refused(node_factory):
    node = balancer_node(node_factory)

    assert_refused(balancer(node, "remove-nodes", "1"), "cannot remove node 1")
    assert_refused(balancer(node, "remove-nodes", "7"), "unknown node 7")

    proposal = json.loads(balancer(node, "proposal", "--json").stdout)
    assert proposal["operation"] == "rebalance" and proposal["replica_moves"] == []
    assert [load["node"] for load in proposal["loads"]] == [1]


def test_a_proposal_before_any_load_sample_counts_every_partition_unsampled(node_factory):
    node = node_factory({**BALANCER, "balancer.sampling.enable": "false"})  # no __balancer_samples topic
    wait_for(lambda: json.loads(balancer(node, "status", "--json").stdout)["service"] is not None, 60,
             "the balancer service")
    proc = balancer(node, "proposal", "--json")
    assert proc.returncode == 0, proc.stderr
    coverage = json.loads(proc.stdout)["coverage"]
    assert coverage["sampled"] == 0 and coverage["partitions"] >= 1, coverage
