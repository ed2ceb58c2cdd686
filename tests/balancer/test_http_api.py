"""Cruise Control's REST API on a node's HTTP port (balancer/http_api.py), the balancer's metrics and the console's
Balancer page, against one node whose balancer runs; and LinkedIn's cruise-control-client driving it."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import CLIENT_PASSWORD, CLIENT_USER, Cluster, free_port
from tests.console.harness import Browser

BALANCER = {"balancer.mode": "continuous", "balancer.sampling.enable": "true", "balancer.sample.interval.ms": "1000",
            "balancer.check.interval.ms": "500"}
DEADLINE_S = 30.0


def start(node_factory):
    port = free_port()
    node = node_factory({"metrics.listener": f"http://127.0.0.1:{port}", **BALANCER})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("balanced", 3, 1)])["balanced"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(30):
        producer.produce("balanced", b"x" * 1000, partition=i % 3)
    producer.flush(30)
    return node, f"http://127.0.0.1:{port}"


def call(base: str, method: str, path: str) -> tuple[int, object]:
    """(status, body): JSON when it is JSON, else the text."""
    request = urllib.request.Request(base + path, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_until(condition, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def running_balancer(base: str) -> dict:
    def running():
        status, state = call(base, "GET", "/kafkacruisecontrol/state?json=true")
        return state if status == 200 and state["BalancerState"]["runningNode"] is not None else None

    return wait_until(running, "the balancer service to run")


def test_cruise_controls_rest_api_drives_the_balancer(node_factory):
    node, base = start(node_factory)
    state = running_balancer(base)
    assert state["BalancerState"]["mode"] == "continuous" and state["BalancerState"]["activeHere"] is True
    assert state["ExecutorState"]["state"] in ("NO_TASK_IN_PROGRESS", "INTER_BROKER_REPLICA_MOVEMENT_TASK_IN_PROGRESS",
                                               "LEADER_MOVEMENT_TASK_IN_PROGRESS")
    monitor = state["MonitorState"]
    assert monitor["state"] == "RUNNING" and monitor["numTotalPartitions"] >= 3
    assert 0 <= monitor["monitoringCoveragePct"] <= 100

    status, only = call(base, "GET", "/kafkacruisecontrol/state?json=true&substates=executor")
    assert status == 200 and set(only) == {"ExecutorState", "version"}
    status, text = call(base, "GET", "/kafkacruisecontrol/state")
    assert status == 200 and "BalancerState:" in text and "mode: continuous" in text

    status, load = call(base, "GET", "/kafkacruisecontrol/load?json=true")
    assert status == 200
    (broker,) = load["brokers"]
    assert broker["BrokerState"] == "ALIVE" and broker["Host"] == "127.0.0.1"
    assert broker["Replicas"] >= 3 and broker["Leaders"] >= 3 and broker["DiskMB"] >= 0
    for field in ("Broker", "Rack", "DiskPct", "LeaderNwInRate", "FollowerNwInRate", "NwOutRate", "PnwOutRate",
                  "DiskCapacityMB", "NetworkInCapacity", "NetworkOutCapacity"):
        assert field in broker, field
    assert load["hosts"][0]["Host"] == "127.0.0.1"

    status, partitions = call(base, "GET", "/kafkacruisecontrol/partition_load?json=true&topic=bal.*&entries=2")
    assert status == 200 and len(partitions["records"]) == 2
    record = partitions["records"][0]
    assert record["topic"] == "balanced" and record["followers"] == [] and record["leader"] == broker["Broker"]
    assert {"disk", "networkInbound", "networkOutbound"} <= set(record)

    status, proposal = call(base, "GET", "/kafkacruisecontrol/proposals?json=true&verbose=true")
    assert status == 200, proposal
    assert {"numReplicaMovements", "numLeaderMovements", "dataToMoveMB"} <= set(proposal["summary"])
    assert proposal["goalSummary"] and {g["status"] for g in proposal["goalSummary"]} <= {"VIOLATED", "FIXED",
                                                                                          "NO-ACTION"}
    assert [b["Broker"] for b in proposal["loadAfterOptimization"]["brokers"]] == [broker["Broker"]]

    status, dry = call(base, "POST", "/kafkacruisecontrol/rebalance?json=true")  # dryrun=true by default
    assert status == 200 and "goalSummary" in dry

    status, started = call(base, "POST", "/kafkacruisecontrol/rebalance?dryrun=false&json=true")
    assert status == 200, started
    assert started["summary"]["numReplicaMovements"] == 0 and started["UserTaskId"]

    status, refused = call(base, "POST", f"/kafkacruisecontrol/remove_broker?brokerid={broker['Broker']}"
                                         "&dryrun=false&json=true")
    assert status == 400 and "errorMessage" in refused
    assert f"node {broker['Broker']}" in refused["errorMessage"] or "remove" in refused["errorMessage"], refused
    status, bad = call(base, "POST", "/kafkacruisecontrol/remove_broker?brokerid=one&json=true")
    assert status == 400 and bad["errorMessage"].startswith("brokerid: expected comma-separated integers")

    status, tasks = call(base, "GET", "/kafkacruisecontrol/user_tasks?json=true")
    assert status == 200
    by_id = {t["UserTaskId"]: t for t in tasks["userTasks"]}
    assert by_id[started["UserTaskId"]]["Status"] == "Completed"
    assert by_id[started["UserTaskId"]]["RequestURL"] == "POST /kafkacruisecontrol/rebalance"
    refused_task = next(t for t in tasks["userTasks"] if t["operation"] == "remove_nodes")
    assert refused_task["Status"] == "CompletedWithError" and refused_task["error"] == refused["errorMessage"]

    status, missing = call(base, "GET", "/kafkacruisecontrol/bootstrap?json=true")
    assert status == 404 and "unknown endpoint 'bootstrap'" in missing["errorMessage"]
    assert call(base, "GET", "/kafkacruisecontrol/rebalance?json=true")[0] == 405

    with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert "odradek_balancer_active 1" in metrics
    assert 'odradek_balancer_mode{mode="continuous"} 1' in metrics
    assert "odradek_balancer_requests_total 2" in metrics and "odradek_balancer_requests_refused_total 1" in metrics
    for family in ("odradek_balancer_execution_moves", "odradek_balancer_execution_bytes",
                   "odradek_balancer_execution_leadership_changes", "odradek_balancer_automatic_actions_total"):
        assert f"# TYPE {family}" in metrics, family

    status, _, page = Browser(base).get("/balancer")
    assert status == 200 and 'id="node-load"' in page and "continuous" in page
    assert "refused: " in page  # the remove_nodes above, among the recent results


def test_cruise_control_client_drives_state_load_and_rebalance(node_factory):
    endpoints = pytest.importorskip("cruisecontrolclient.client.Endpoint")
    from cruisecontrolclient.client.Responder import CruiseControlResponder

    _, base = start(node_factory)
    running_balancer(base)
    address = base.removeprefix("http://")
    responder = CruiseControlResponder()

    state = endpoints.StateEndpoint()
    state.add_param("json", True)
    answer = responder.retrieve_response_from_Endpoint(address, state)
    assert answer.status_code == 200 and answer.json()["ExecutorState"]["state"] == "NO_TASK_IN_PROGRESS"

    load = endpoints.LoadEndpoint()
    load.add_param("json", True)
    answer = responder.retrieve_response_from_Endpoint(address, load)
    assert answer.status_code == 200 and answer.json()["brokers"][0]["Replicas"] >= 3

    rebalance = endpoints.RebalanceEndpoint()
    rebalance.add_param("json", True)
    rebalance.add_param("dryrun", False)
    answer = responder.retrieve_response_from_Endpoint(address, rebalance)
    assert answer.status_code == 200, answer.text
    assert answer.headers["User-Task-ID"] == answer.json()["UserTaskId"]


def test_on_a_sasl_cluster_the_api_takes_the_callers_login_and_refuses_cross_site_posts(tmp_path):
    cluster = Cluster(tmp_path / "cluster", 1, {**BALANCER, "balancer.mode": "off"}, security="SASL_SSL")
    http_port = free_port()
    cluster.nodes[0].settings["metrics.listener"] = f"http://127.0.0.1:{http_port}"
    cluster.start()
    base = f"http://127.0.0.1:{http_port}"
    try:
        status, body = call(base, "GET", "/kafkacruisecontrol/state?json=true")
        assert status == 401 and "HTTP Basic" in body["errorMessage"]

        def with_login(password: str) -> tuple[int, object]:
            token = base64.b64encode(f"{CLIENT_USER}:{password}".encode()).decode()
            request = urllib.request.Request(base + "/kafkacruisecontrol/state?json=true&substates=balancer",
                                             headers={"Authorization": f"Basic {token}"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        # the user's SCRAM credential is in the metadata log, applied a moment after the node starts
        status, body = wait_until(lambda: (answer := with_login(CLIENT_PASSWORD))[0] == 200 and answer,
                                  "the user's login to be taken")
        assert body["BalancerState"]["thisNode"] == 1, body
        status, body = with_login("wrong")
        assert status == 401 and "login refused" in body["errorMessage"], body

        request = urllib.request.Request(base + "/kafkacruisecontrol/rebalance?dryrun=false&json=true", method="POST",
                                         headers={"Origin": "http://elsewhere.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 403
    finally:
        cluster.stop()
