"""`odradek operator` end to end: kopf handlers against an emulated Kubernetes API (kmock), with a fake kubelet
running `sleep` for each Pod. The operator runs as in production, on its own thread and event loop; the test's loop
serves the API and runs the kubelet. Every wait is on an event (a watch, the kubelet's condition), bounded."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from odradek.operator.cluster_handler import OWNED, desired_objects
from odradek.operator.cluster_spec import parse_cluster
from odradek.operator.kube import CLAIMS, CLUSTERS, CONFIG_MAPS, PODS, SECRETS, SERVICES
from odradek.operator.main import FINALIZER
from odradek.operator.render import CONFIG_HASH_ANNOTATION
from tests.operator.harness import NAME, NS, Harness, condition, ready_with, run

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "cluster.yaml"
pytestmark = pytest.mark.filterwarnings("ignore:read_binary is deprecated:DeprecationWarning")  # in kmock 0.8


def example_cluster(replicas: int = 3) -> dict:
    resource = yaml.safe_load(EXAMPLE.read_text())
    resource["metadata"]["namespace"] = NS
    resource["spec"]["nodePools"][0]["replicas"] = replicas
    return resource


async def create_ready_cluster(harness: Harness, replicas: int = 3) -> dict:
    await harness.kube.create(example_cluster(replicas))
    await harness.kubelet.wait_for(lambda kubelet: len(kubelet.procs) == replicas)
    return await harness.cluster.wait_for(ready_with(replicas))


def expected_objects(resource: dict, stored: dict[tuple[str, str], dict]) -> list[dict]:
    """What the cluster should have, given the certificates it has (the same certificates are kept)."""
    status = resource["status"]
    secrets = {name: obj["data"] for (kind, name), obj in stored.items() if kind == "Secret"}
    return desired_objects(parse_cluster(resource), status["nodeIds"], status["clusterId"], NS, secrets,
                           datetime.datetime.now(datetime.UTC))


async def assert_objects_match_render(harness: Harness, resource: dict) -> dict[tuple[str, str], dict]:
    """The cluster's objects are exactly render()'s and the certificates', each as rendered, the kept claims of
    removed nodes aside."""
    stored = await harness.objects()
    expected = expected_objects(resource, stored)
    names = {(obj["kind"], obj["metadata"]["name"]) for obj in expected}
    assert names <= set(stored)
    assert {key for key in stored if key not in names and key[0] != "PersistentVolumeClaim"} == set()
    for obj in expected:
        got = stored[obj["kind"], obj["metadata"]["name"]]
        for part in ("spec", "data"):
            if part in obj and obj["kind"] != "Pod":  # a Pod's spec is never patched: checked by its config hash
                assert got[part] == obj[part], (obj["kind"], obj["metadata"]["name"], part)
        assert got["metadata"]["labels"] == obj["metadata"]["labels"]
        if obj["kind"] == "PersistentVolumeClaim":  # deleteClaim false: no owner, a garbage collector keeps it
            assert "ownerReferences" not in got["metadata"]
        else:
            assert [ref["uid"] for ref in got["metadata"]["ownerReferences"]] == [resource["metadata"]["uid"]]
    return stored


# ---------------------------------------------------------------------------------------------------------------


def test_a_new_cluster_gets_its_objects_nodes_and_a_ready_status():
    async def test(harness: Harness) -> None:
        resource = await create_ready_cluster(harness)
        status = resource["status"]
        assert status["nodeIds"] == {"combined": [0, 1, 2]}
        assert status["clusterId"] and not status["clusterId"].startswith("-")
        assert status["observedGeneration"] == 1
        assert status["listeners"] == [
            {"name": "plain", "type": "internal", "bootstrapServers": f"{NAME}-bootstrap.{NS}.svc:9092"},
            {"name": "tls", "type": "internal", "bootstrapServers": f"{NAME}-bootstrap.{NS}.svc:9093"}]
        assert condition(resource, "Ready")["status"] == "True" and condition(resource, "Warning") is None
        assert FINALIZER in resource["metadata"]["finalizers"]

        stored = await assert_objects_match_render(harness, resource)
        kinds = sorted(kind for kind, _ in stored)
        assert kinds.count("ConfigMap") == kinds.count("PersistentVolumeClaim") == kinds.count("Pod") == 3
        assert {"ServiceAccount", "PodDisruptionBudget"} <= set(kinds)
        assert {name for kind, name in stored if kind == "Service"} == {
            f"{NAME}-nodes", f"{NAME}-bootstrap", f"{NAME}-external-bootstrap",
            *(f"{NAME}-combined-{i}-external" for i in range(3))}
        for obj in expected_objects(resource, stored):  # Pods as rendered, with the cluster id in the format step
            if obj["kind"] == "Pod":
                assert stored["Pod", obj["metadata"]["name"]]["spec"] == obj["spec"]
                assert status["clusterId"] in obj["spec"]["initContainers"][0]["command"]

        assert sorted(harness.kubelet.procs) == [f"{NAME}-combined-{i}" for i in range(3)]
        assert all(proc.returncode is None for proc in harness.kubelet.procs.values())

        # Later passes (the timer) keep the cluster id and the node ids.
        await harness.patch_spec({"config": {"log.retention.hours": "168"}})
        again = await harness.cluster.wait_for(lambda r: r.get("status", {}).get("observedGeneration") == 2)
        assert again["status"]["clusterId"] == status["clusterId"]
        assert again["status"]["nodeIds"] == status["nodeIds"]

    run(test)


def test_an_invalid_spec_is_reported_and_touches_nothing():
    async def test(harness: Harness) -> None:
        resource = example_cluster()
        resource["spec"]["listeners"][0]["port"] = 9090  # the controller listener's
        await harness.kube.create(resource)
        got = await harness.cluster.wait_for(lambda r: condition(r, "NotReady") is not None)
        not_ready = condition(got, "NotReady")
        assert not_ready["status"] == "True" and not_ready["reason"] == "InvalidSpec"
        assert "9090" in not_ready["message"]
        assert got["status"]["observedGeneration"] == 1 and "clusterId" not in got["status"]
        assert await harness.objects() == {}
        for kind in OWNED:
            assert await harness.kube.list(kind, NS) == []
        assert harness.kubelet.history == []

    run(test)


def test_a_broker_pool_scales_up_with_new_ids_and_a_broker_nobody_can_drain_is_kept():
    async def test(harness: Harness) -> None:
        resource = await create_ready_cluster(harness)
        cluster_id = resource["status"]["clusterId"]
        pools = copy.deepcopy(resource["spec"]["nodePools"])
        brokers = {"name": "brokers", "replicas": 1, "roles": ["broker"], "storage": {"size": "1Gi"}}

        await harness.patch_spec({"nodePools": [*pools, brokers]})
        await harness.kubelet.wait_for(lambda kubelet: f"{NAME}-brokers-3" in kubelet.procs)
        grown = await harness.cluster.wait_for(ready_with(4))
        assert grown["status"]["nodeIds"] == {"combined": [0, 1, 2], "brokers": [3]}
        assert grown["status"]["clusterId"] == cluster_id
        stored = await assert_objects_match_render(harness, grown)
        for key in (("Pod", f"{NAME}-brokers-3"), ("ConfigMap", f"{NAME}-brokers-3-config"),
                    ("PersistentVolumeClaim", f"data-{NAME}-brokers-3"), ("Service", f"{NAME}-brokers-3-external"),
                    ("Secret", f"{NAME}-brokers-3-certs")):
            assert key in stored
        # a broker joins without touching the quorum: no other node's configuration changed
        assert condition(grown, "Warning") is None

        # Scaling down: the removed broker keeps running until the balancer has moved its replicas off it; with
        # `sleep` for nodes nothing answers, so it is kept and the reason reported (tests/operator/test_nodes.py
        # drains real nodes).
        await harness.patch_spec({"nodePools": [*pools, brokers | {"replicas": 0}]})
        shrunk = await harness.cluster.wait_for(lambda r: _warning(r, "ScaleDownPending") is not None)
        assert shrunk["status"]["nodeIds"] == {"combined": [0, 1, 2], "brokers": []}
        assert "nodes 3 wait to be drained: no broker answered" in _warning(shrunk, "ScaleDownPending")["message"]
        stored = await harness.objects()
        assert ("Pod", f"{NAME}-brokers-3") in stored and ("ConfigMap", f"{NAME}-brokers-3-config") in stored
        assert f"{NAME}-brokers-3" in harness.kubelet.procs

    run(test)


def test_changing_the_controllers_of_a_running_cluster_is_refused_and_changes_nothing():
    async def test(harness: Harness) -> None:
        resource = await create_ready_cluster(harness)
        before = await harness.objects()
        pools = copy.deepcopy(resource["spec"]["nodePools"])
        pools[0]["replicas"] = 4
        await harness.patch_spec({"nodePools": pools})
        refused = await harness.cluster.wait_for(lambda r: condition(r, "NotReady") is not None)
        message = condition(refused, "NotReady")["message"]
        assert condition(refused, "NotReady")["reason"] == "InvalidSpec"
        assert "nodes 0, 1, 2 are the voters, the spec asks for 0, 1, 2, 3" in message, message
        after = await harness.objects()
        assert set(after) == set(before)
        assert all(after[key].get("data") == before[key].get("data") for key in before)
        assert sorted(harness.kubelet.procs) == [f"{NAME}-combined-{i}" for i in range(3)]

    run(test)


def test_load_balancer_addresses_are_advertised_named_in_certificates_and_reported():
    async def test(harness: Harness) -> None:
        await create_ready_cluster(harness)
        for node_id in range(3):  # what a cloud's load balancer controller writes
            await harness.kube.merge_patch(
                SERVICES, NS, f"{NAME}-combined-{node_id}-external",
                {"status": {"loadBalancer": {"ingress": [{"hostname": f"lb-{node_id}.example.com"}]}}},
                subresource="status")
        external = "lb-0.example.com:9094,lb-1.example.com:9094,lb-2.example.com:9094"
        seen = await harness.cluster.wait_for(lambda r: any(
            listener["name"] == "external" for listener in (r.get("status") or {}).get("listeners") or []))
        assert {"name": "external", "type": "loadbalancer", "bootstrapServers": external} in seen["status"]["listeners"]
        config = (await harness.kube.get(CONFIG_MAPS, NS, f"{NAME}-combined-1-config"))["data"]["server.properties"]
        assert "EXTERNAL://lb-1.example.com:9094" in config
        certificate = x509.load_pem_x509_certificate(base64.b64decode(
            (await harness.kube.get(SECRETS, NS, f"{NAME}-combined-1-certs"))["data"]["node.crt"]))
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "lb-1.example.com" in names.get_values_for_type(x509.DNSName)
        # the nodes run the old configuration and certificates until restarted (nothing to observe here: `sleep`)
        pending = await harness.cluster.wait_for(lambda r: _warning(r, "RestartPending") is not None)
        assert _warning(pending, "RestartPending")["message"].startswith("RestartPending: nodes 0, 1, 2 ")

    run(test)


def test_node_port_addresses_are_the_kubernetes_nodes_and_stay_while_a_pod_is_unscheduled():
    async def test(harness: Harness) -> None:
        resource = example_cluster()
        resource["spec"]["listeners"][2] = {"name": "external", "port": 9094, "type": "nodeport", "tls": True}
        await harness.kube.create(resource)
        await harness.cluster.wait_for(ready_with(3))
        for node_id in range(3):  # the scheduler's choice, the node's addresses, the port Kubernetes gave
            await harness.kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"worker-{node_id}"},
                                       "status": {"addresses": [
                                           {"type": "InternalIP", "address": f"10.0.0.{node_id}"},
                                           {"type": "ExternalIP", "address": f"203.0.113.{node_id}"}]}})
            await harness.kube.merge_patch(PODS, NS, f"{NAME}-combined-{node_id}",
                                           {"spec": {"nodeName": f"worker-{node_id}"}})
            await harness.kube.merge_patch(SERVICES, NS, f"{NAME}-combined-{node_id}-external",
                                           {"spec": {"ports": [{"name": "tcp-external", "port": 9094,
                                                                "targetPort": 9094, "protocol": "TCP",
                                                                "nodePort": 31000 + node_id}]}})
        external = "203.0.113.0:31000,203.0.113.1:31001,203.0.113.2:31002"
        await harness.cluster.wait_for(lambda r: {"name": "external", "type": "nodeport",
                                                  "bootstrapServers": external} in (r["status"].get("listeners") or []))

        async def advertised(node_id: int) -> str:
            config = await harness.kube.get(CONFIG_MAPS, NS, f"{NAME}-combined-{node_id}-config")
            return config["data"]["server.properties"]

        assert "EXTERNAL://203.0.113.1:31001" in await advertised(1)
        # The Pod deleted (a restart): until it is scheduled again, the node keeps the address it advertises.
        await harness.kube.delete(PODS, NS, f"{NAME}-combined-1")
        await harness.kubelet.wait_for(lambda kubelet: kubelet.count("started", f"{NAME}-combined-1") >= 2)
        again = await harness.kube.get(PODS, NS, f"{NAME}-combined-1")
        assert not again["spec"].get("nodeName")
        assert "EXTERNAL://203.0.113.1:31001" in await advertised(1)

    run(test)


def _warning(resource: dict, reason: str) -> dict | None:
    return next((c for c in (resource.get("status") or {}).get("conditions") or []
                 if c["type"] == "Warning" and c["reason"] == reason), None)


def test_a_config_change_patches_the_config_maps_and_marks_every_node_restart_pending():
    async def test(harness: Harness) -> None:
        resource = await create_ready_cluster(harness)
        pods_before = {pod["metadata"]["name"]: pod for pod in await harness.kube.list(PODS, NS)}

        await harness.patch_spec({"config": {"log.retention.hours": "24"}})
        changed = await harness.cluster.wait_for(lambda r: condition(r, "Warning") is not None)
        warning = condition(changed, "Warning")
        assert warning["reason"] == "RestartPending"
        assert warning["message"].startswith("RestartPending: nodes 0, 1, 2 ")
        assert changed["status"]["observedGeneration"] == 2
        await assert_objects_match_render(harness, changed)
        for name, config_map in ((c["metadata"]["name"], c) for c in await harness.kube.list(CONFIG_MAPS, NS)):
            assert "log.retention.hours=24\n" in config_map["data"]["server.properties"], name
        for pod in await harness.kube.list(PODS, NS):  # untouched: the same Pods with their old hash
            before = pods_before[pod["metadata"]["name"]]
            assert pod["metadata"]["uid"] == before["metadata"]["uid"]
            assert pod["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == \
                before["metadata"]["annotations"][CONFIG_HASH_ANNOTATION]
        assert [what for what, _ in harness.kubelet.history if what != "ready"] == ["started"] * 3

        # An invalid spec now: reported, and the running cluster's objects are left as they are.
        objects_before = await harness.objects()
        listeners = copy.deepcopy(resource["spec"]["listeners"])
        listeners[0]["port"] = 9091
        await harness.patch_spec({"listeners": listeners})
        invalid = await harness.cluster.wait_for(lambda r: condition(r, "NotReady") is not None)
        assert condition(invalid, "NotReady")["reason"] == "InvalidSpec"
        assert invalid["status"]["clusterId"] == resource["status"]["clusterId"]
        assert await harness.objects() == objects_before

    run(test)


def test_deleting_the_cluster_removes_its_objects_and_stops_its_nodes_but_keeps_the_claims():
    async def test(harness: Harness) -> None:
        await create_ready_cluster(harness)
        await harness.kube.delete(CLUSTERS, NS, NAME)
        await harness.kubelet.wait_for(lambda kubelet: not kubelet.procs)
        await harness.cluster.wait_deleted()
        left = await harness.objects()
        assert sorted(left) == [("PersistentVolumeClaim", f"data-{NAME}-combined-{i}") for i in range(3)]
        for kind in (PODS, CONFIG_MAPS, SERVICES):
            assert await harness.kube.list(kind, NS) == []
        assert len(await harness.kube.list(CLAIMS, NS)) == 3
        assert sorted(what for what, _ in harness.kubelet.history if what != "ready") == ["started"] * 3 + ["stopped"] * 3

    run(test)


def test_claims_follow_delete_claim_and_a_new_size_is_reported_not_applied():
    async def test(harness: Harness) -> None:
        resource = await create_ready_cluster(harness)
        pools = copy.deepcopy(resource["spec"]["nodePools"])
        pools[0]["storage"] = {"size": "10Gi", "deleteClaim": True}
        await harness.patch_spec({"nodePools": pools})
        await harness.cluster.wait_for(lambda r: r["status"].get("observedGeneration") == 2)

        async def claims() -> list[dict]:
            return [c for c in await harness.kube.list(CLAIMS, NS) if c["metadata"]["name"].startswith("data-")]

        async with asyncio.timeout(30):
            while not all(c["metadata"].get("ownerReferences") for c in await claims()):
                await asyncio.sleep(0.1)
        pools[0]["storage"] = {"size": "20Gi", "deleteClaim": False}
        await harness.patch_spec({"nodePools": pools})
        reported = await harness.cluster.wait_for(lambda r: _warning(r, "StorageChangeIgnored") is not None)
        assert "claims data-my-cluster-combined-0, " in _warning(reported, "StorageChangeIgnored")["message"]
        kept = await claims()
        # a kept claim has no owner: deleting the cluster on a real Kubernetes cluster leaves it to the user
        assert all(not c["metadata"].get("ownerReferences") for c in kept)
        assert {c["spec"]["resources"]["requests"]["storage"] for c in kept} == {"10Gi"}

    run(test)
