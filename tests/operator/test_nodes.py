"""The operator running real Odradek nodes: the fake kubelet starts `odradek server` for each Pod from the Pod's
own command, init containers, ConfigMap, Secret and claim (node_runtime.py), and the operator reaches the nodes as
it does in a cluster, through their REPLICATION listener over mutual TLS. Clients: confluent-kafka and
kafka-python.

Two clusters, each a test in the order a team lives it:
- created; a configuration change rolled one node at a time while an idempotent acks=all producer and a
  read_committed consumer run, the operator restarted mid-roll, the ISR never below min.insync.replicas; a node
  killed with kill -9 and restarted by the kubelet; scaled from 3 to 4 nodes (the balancer gives the new broker
  load) and back to 3 (the balancer drains it before its Pod goes); every acknowledged record read once, in order.
- with a TLS listener for SCRAM-SHA-512 clients, ACLs and racks (each broker's rack the zone of the Kubernetes
  node its Pod runs on): an OdradekTopic, an OdradekUser whose Secret's password
  lets clients do what its ACLs allow and nothing else, an OdradekRebalance proposed and carried out once
  approved, and the user and topic deleted."""

from __future__ import annotations

import asyncio
import base64
import copy
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka import KafkaConsumer

from odradek.operator.certificates import operator_secret_name
from odradek.operator.cluster_spec import parse_cluster
from odradek.operator.connection import admin_properties, operator_tls
from odradek.operator.kube import CLAIMS, CONFIG_MAPS, PODS, REBALANCES, SECRETS, TOPICS, USERS
from odradek.operator.rebalance_handler import ANNOTATION as REBALANCE_ANNOTATION
from odradek.operator.render import CLUSTER_LABEL, CONFIG_KEY
from tests.balancer.test_executor import PARTITIONS, Traffic, finish_traffic
from tests.operator.harness import (
    NAME,
    NS,
    Harness,
    condition,
    operator_harness,
    ready_with,
    wait_for_resource,
    wait_gone,
)
from tests.operator.node_runtime import NodeRuntime
from tests.sql.server_process import wait_for

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.filterwarnings("ignore:read_binary is deprecated:DeprecationWarning")]  # in kmock 0.8
PLAIN_PORT = 9092
TLS_PORT = 9093
ZONE_LABEL = "topology.kubernetes.io/zone"
DEADLINE_S = 180.0
COMBINED = [f"{NAME}-combined-{i}" for i in range(3)]
MIN_ISR = 2


def cluster_resource() -> dict:
    return {
        "apiVersion": "odradek.io/v1beta1", "kind": "OdradekCluster", "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "nodePools": [
                {"name": "combined", "replicas": 3, "roles": ["broker", "controller"], "storage": {"size": "1Gi"}},
                {"name": "brokers", "replicas": 0, "roles": ["broker"], "storage": {"size": "1Gi"}},
            ],
            "listeners": [{"name": "plain", "port": PLAIN_PORT, "type": "internal"}],
            "config": {"default.replication.factor": "3", "min.insync.replicas": str(MIN_ISR),
                       "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "6",
                       "transaction.state.log.replication.factor": "3",
                       "balancer.sample.interval.ms": "1000", "balancer.check.interval.ms": "500"},
            "metrics": {"enabled": False},
            "balancer": {"mode": "node_add"},
        },
    }


@dataclass
class ClientView:
    """What tests/balancer's Traffic needs of a cluster: where to connect, and no security."""

    bootstrap: str
    client_config: dict
    kafka_python_config: dict

    def client_settings(self, settings: dict | None = None) -> dict:
        return {"bootstrap.servers": self.bootstrap, **(settings or {})}


class IsrWatch:
    """Samples the ISR of every partition of a topic until stopped; `smallest` is the smallest ISR seen."""

    def __init__(self, admin: AdminClient, topic: str) -> None:
        self.admin, self.topic = admin, topic
        self.smallest: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> IsrWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                partitions = self.admin.list_topics(self.topic, timeout=5).topics[self.topic].partitions
            except Exception:  # a node restarting: ask again
                continue
            for p in partitions.values():
                self.smallest[p.id] = min(self.smallest.get(p.id, len(p.isrs)), len(p.isrs))


async def wait_cluster(harness: Harness, predicate, what: str) -> dict:
    """The cluster resource once `predicate` holds; on the deadline a failure saying what it was waiting for, the
    last status and what the kubelet saw."""
    try:
        return await harness.cluster.wait_for(predicate, DEADLINE_S)
    except TimeoutError:
        status = (harness.cluster.latest or {}).get("status")
        raise AssertionError(f"{what}: not within {DEADLINE_S}s; status {status}; kubelet {harness.kubelet.history}"
                             ) from None


def replicas_on(admin: AdminClient, node_id: int) -> int:
    metadata = admin.list_topics(timeout=10)
    return sum(node_id in p.replicas for t in metadata.topics.values() for p in t.partitions.values())


def test_a_cluster_rolls_under_traffic_and_scales_out_and_in_through_the_balancer(tmp_path):
    runtime: NodeRuntime | None = None

    def make_runtime(kube) -> NodeRuntime:
        nonlocal runtime
        runtime = NodeRuntime(kube, NS, tmp_path)
        return runtime

    async def main() -> None:
        async with operator_harness(make_runtime, address_map=lambda host, port: runtime.local_address(host, port)
                                    ) as harness:
            await scenario(harness, runtime)

    asyncio.run(main())


async def scenario(harness: Harness, runtime: NodeRuntime) -> None:
    resource = cluster_resource()
    await harness.kube.create(resource)
    ready = await wait_cluster(harness, ready_with(3), "three nodes ready")
    assert ready["status"]["nodeIds"] == {"combined": [0, 1, 2], "brokers": []}
    view = ClientView(runtime.bootstrap(COMBINED, PLAIN_PORT), {}, {})
    admin = AdminClient({"bootstrap.servers": view.bootstrap})
    await asyncio.to_thread(wait_for, lambda: len(admin.list_topics(timeout=10).brokers) == 3, DEADLINE_S,
                            "three brokers registered")
    topic = "orders"
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
    traffic = Traffic(view, topic).start()
    try:
        await clients_through_roll_and_scaling(harness, admin, traffic, resource, topic)
    finally:
        traffic.stop_producing()
        traffic.stop_consuming()


async def clients_through_roll_and_scaling(harness: Harness, admin: AdminClient, traffic: Traffic, resource: dict,
                                           topic: str) -> None:
    await asyncio.to_thread(wait_for, lambda: traffic.produced() > 200, 60, "records before the roll")

    # A configuration change: every node restarted once, one at a time, the ISR never below min.insync.replicas.
    with IsrWatch(admin, topic) as isr:
        await harness.patch_spec({"config": resource["spec"]["config"] | {"log.retention.hours": "100"}})
        # The operator itself restarted mid-roll (what it remembered is gone): the roll goes on as safely.
        await harness.kubelet.wait_for(lambda kubelet: kubelet.count("stopped") >= 1, DEADLINE_S)
        await harness.operator.stop()
        await harness.operator.start()
        rolled = await wait_cluster(
            harness, lambda r: ready_with(3)(r) and condition(r, "Warning") is None
            and all(harness.kubelet.count("ready", pod) >= 2 for pod in COMBINED), "the rolling restart")
    assert [harness.kubelet.count("stopped", pod) for pod in COMBINED] == [1, 1, 1]
    down = set()
    for event, pod in harness.kubelet.history:  # one node down at a time: stopped, then started and ready again
        if event == "stopped":
            assert not down, f"{pod} stopped while {down} was down"
            down.add(pod)
        elif event == "ready":
            down.discard(pod)
    assert isr.smallest and min(isr.smallest.values()) >= MIN_ISR, isr.smallest
    pods = await harness.kube.list(PODS, NS)
    assert all("log.retention.hours=100" in config for config in [await _config(harness, pod) for pod in pods])

    # kill -9 of a node: the kubelet starts it again (restartPolicy Always), and the cluster is whole again.
    victim = COMBINED[1]
    readied = harness.kubelet.count("ready", victim)
    harness.kubelet.procs[victim].kill()
    await harness.kubelet.wait_for(lambda kubelet: kubelet.count("ready", victim) > readied, DEADLINE_S)
    await wait_cluster(harness, ready_with(3), "three nodes ready after a kill -9")
    await asyncio.to_thread(wait_for, lambda: all(len(p.isrs) == 3 for p in admin.list_topics(
        topic, timeout=10).topics[topic].partitions.values()), DEADLINE_S, "the killed node back in every ISR")
    produced_before_scaling = traffic.produced()

    # Scale out: a broker-only node 3 joins and the balancer gives it replicas.
    pools = copy.deepcopy(rolled["spec"]["nodePools"])
    pools[1]["replicas"] = 1
    await harness.patch_spec({"nodePools": pools})
    await wait_cluster(harness, ready_with(4), "four nodes ready")
    await asyncio.to_thread(wait_for, lambda: replicas_on(admin, 3) >= PARTITIONS // 2, DEADLINE_S,
                            "the balancer to move replicas onto node 3")

    # Scale in: node 3 is drained before its Pod is deleted; its claim is kept.
    pools[1]["replicas"] = 0
    await harness.patch_spec({"nodePools": pools})
    await harness.kubelet.wait_for(lambda kubelet: kubelet.count("stopped", f"{NAME}-brokers-3") >= 1, DEADLINE_S)
    assert replicas_on(admin, 3) == 0, "a node holding replicas was stopped"
    shrunk = await wait_cluster(harness, lambda r: ready_with(3)(r) and condition(r, "Warning") is None,
                                "three nodes after scaling in")
    assert shrunk["status"]["nodeIds"] == {"combined": [0, 1, 2], "brokers": []}
    assert f"data-{NAME}-brokers-3" in {claim["metadata"]["name"] for claim in await harness.kube.list(CLAIMS, NS)}

    await asyncio.to_thread(wait_for, lambda: traffic.produced() > produced_before_scaling + 100, 60,
                            "records after scaling")
    await asyncio.to_thread(finish_traffic, traffic)


async def _config(harness: Harness, pod: dict) -> str:
    name = pod["spec"]["volumes"][0]["configMap"]["name"]
    return (await harness.kube.get(CONFIG_MAPS, NS, name))["data"][CONFIG_KEY]


def secured_cluster_resource() -> dict:
    """Three combined nodes with one listener, TLS with SCRAM-SHA-512 clients, and ACLs: what docs/kubernetes.md
    builds from scratch."""
    return {
        "apiVersion": "odradek.io/v1beta1", "kind": "OdradekCluster", "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "nodePools": [{"name": "combined", "replicas": 3, "roles": ["broker", "controller"],
                           "storage": {"size": "1Gi"}}],
            "listeners": [{"name": "tls", "port": TLS_PORT, "type": "internal", "tls": True,
                           "authentication": {"type": "scram-sha-512"}}],
            "authorization": {"type": "simple"},
            "config": {"default.replication.factor": "3", "min.insync.replicas": str(MIN_ISR),
                       "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "6",
                       "transaction.state.log.replication.factor": "3", "balancer.check.interval.ms": "500"},
            "rack": {"topologyKey": ZONE_LABEL},
            "metrics": {"enabled": False},
            "balancer": {"mode": "off"},  # the rebalance below is the one asked for
        },
    }


def labelled(kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": "odradek.io/v1beta1", "kind": kind,
            "metadata": {"name": name, "namespace": NS, "labels": {CLUSTER_LABEL: NAME}}, "spec": spec}


def ready(resource: dict) -> bool:
    return (condition(resource, "Ready") is not None
            and (resource.get("status") or {}).get("observedGeneration") == resource["metadata"]["generation"])


def test_topics_users_and_a_rebalance_on_a_cluster_with_tls_scram_acls_and_racks(tmp_path):
    runtime: NodeRuntime | None = None

    def make_runtime(kube) -> NodeRuntime:
        nonlocal runtime
        runtime = NodeRuntime(kube, NS, tmp_path, api_server=kube.connection.server)
        # each node's Pod on a Kubernetes node of its own zone
        runtime.kubernetes_nodes = {pod: f"kube-node-{i}" for i, pod in enumerate(COMBINED)}
        return runtime

    async def main() -> None:
        async with operator_harness(make_runtime, address_map=lambda host, port: runtime.local_address(host, port)
                                    ) as harness:
            await secured_scenario(harness, runtime, tmp_path)

    asyncio.run(main())


async def secured_scenario(harness: Harness, runtime: NodeRuntime, tmp_path: Path) -> None:
    kube = harness.kube
    for i in range(3):
        await kube.create({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": f"kube-node-{i}", "labels": {ZONE_LABEL: f"zone-{'abc'[i]}"}}})
    await kube.create(secured_cluster_resource())
    cluster = await wait_cluster(harness, ready_with(3), "three nodes ready")
    # The test's admin: the operator's own certificate (a super user) on the REPLICATION listener.
    operator_secret = await kube.get(SECRETS, NS, operator_secret_name(NAME))
    admin_config = admin_properties(parse_cluster(cluster), cluster["status"]["nodeIds"], NS,
                                    operator_tls(NS, NAME, operator_secret["data"]), runtime.local_address)
    admin = AdminClient(admin_config)
    # broker.rack: each broker's Kubernetes node's zone, read by its Pod's rack init container
    described = admin.describe_cluster(request_timeout=30).result(60)
    assert {node.id: node.rack for node in described.nodes} == {0: "zone-a", 1: "zone-b", 2: "zone-c"}
    ca_file = tmp_path / "cluster-ca.crt"  # what a client mounts from <cluster>-cluster-ca-cert
    ca_secret = await kube.get(SECRETS, NS, f"{NAME}-cluster-ca-cert")
    ca_file.write_bytes(base64.b64decode(ca_secret["data"]["ca.crt"]))
    bootstrap = runtime.bootstrap(COMBINED, TLS_PORT)

    # An OdradekTopic becomes a topic with its partitions, replicas and config.
    await kube.create(labelled("OdradekTopic", "orders", {
        "topicName": "shop.orders", "partitions": 3, "replicas": 3, "config": {"retention.ms": "3600000"}}))
    topic = await wait_for_resource(kube, TOPICS, "orders", ready, DEADLINE_S)
    assert (topic["status"]["partitions"], topic["status"]["replicas"]) == (3, 3)
    partitions = admin.list_topics("shop.orders", timeout=30).topics["shop.orders"].partitions
    assert len(partitions) == 3 and all(len(p.replicas) == 3 for p in partitions.values())
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "shop.orders")])
    assert next(iter(configs.values())).result(30)["retention.ms"].value == "3600000"

    # A SCRAM OdradekUser: its password in a Secret; over the TLS listener it may write and read the topic, in
    # its consumer groups, and nothing else.
    await kube.create(labelled("OdradekUser", "order-service", {
        "authentication": {"type": "scram-sha-512"},
        "authorization": {"type": "simple", "acls": [
            {"resource": {"type": "topic", "name": "shop.orders"}, "operations": ["Read", "Write", "Describe"]},
            {"resource": {"type": "group", "name": "order-service-", "patternType": "prefix"},
             "operations": ["Read"]}]}}))
    user = await wait_for_resource(kube, USERS, "order-service", ready, DEADLINE_S)
    secret = await kube.get(SECRETS, NS, user["status"]["secret"])
    password = base64.b64decode(secret["data"]["password"]).decode()
    librdkafka = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                  "sasl.username": "order-service", "sasl.password": password, "ssl.ca.location": str(ca_file),
                  # the nodes' certificates name their Pods' DNS names; here they are reached at 127.0.0.1
                  "ssl.endpoint.identification.algorithm": "none"}
    values = [f"order-{i}".encode() for i in range(20)]
    await asyncio.to_thread(produce, librdkafka, "shop.orders", values)
    assert sorted(await asyncio.to_thread(consume_with_kafka_python, bootstrap, password, ca_file)) == sorted(values)
    refused = await asyncio.to_thread(produce_error, librdkafka, "shop.payments")
    assert refused == "TOPIC_AUTHORIZATION_FAILED", refused

    # An OdradekRebalance: a proposal in status, carried out once approved.
    crowded = "crowded"
    admin.create_topics([NewTopic(crowded, 6, replica_assignment=[[0]] * 6)])[crowded].result(30)
    await kube.create(labelled("OdradekRebalance", "spread", {"mode": "full"}))
    proposed = await wait_for_resource(kube, REBALANCES, "spread", lambda r: condition(r, "ProposalReady"), DEADLINE_S)
    assert proposed["status"]["optimizationResult"]["numReplicaMovements"] > 0
    assert holders(admin, crowded) == {0}, "a proposal moves nothing"
    await kube.merge_patch(REBALANCES, NS, "spread", {"metadata": {"annotations": {REBALANCE_ANNOTATION: "approve"}}})
    done = await wait_for_resource(kube, REBALANCES, "spread", lambda r: condition(r, "Ready"), DEADLINE_S)
    assert done["status"]["executionId"]
    assert REBALANCE_ANNOTATION not in (done["metadata"].get("annotations") or {}), "the annotation is consumed"
    await asyncio.to_thread(wait_for, lambda: holders(admin, crowded) == {0, 1, 2}, 60,
                            "every broker's metadata to show the crowded topic spread")

    # Deleting the user removes its Secret and its credentials; deleting the topic deletes it.
    await kube.delete(USERS, NS, "order-service")
    await wait_gone(kube, SECRETS, secret["metadata"]["name"], DEADLINE_S)
    assert await asyncio.to_thread(produce_error, librdkafka, "shop.orders") == "_AUTHENTICATION"
    await kube.delete(TOPICS, NS, "orders")
    await wait_gone(kube, TOPICS, "orders", DEADLINE_S)
    await asyncio.to_thread(wait_for, lambda: "shop.orders" not in admin.list_topics(timeout=10).topics, 60,
                            "the topic to be deleted")


def holders(admin: AdminClient, topic: str) -> set[int]:
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    return {replica for p in partitions for replica in p.replicas}


def produce(config: dict, topic: str, values: list[bytes]) -> None:
    producer = Producer(config | {"enable.idempotence": True, "acks": "all"})
    failures = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _: err and failures.append(err))
    assert producer.flush(60) == 0 and not failures, failures


def produce_error(config: dict, topic: str) -> str | None:
    """The first error producing one record gets (None when it is written), as soon as it comes."""
    errors = []
    producer = Producer(config | {"message.timeout.ms": 30000,
                                  "error_cb": lambda err: errors.append(err.name())})
    producer.produce(topic, b"x", on_delivery=lambda err, _: errors.append(err.name() if err else None))
    deadline = time.monotonic() + 60
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(5)
    return errors[0] if errors else "no answer"


def consume_with_kafka_python(bootstrap: str, password: str, ca_file: Path) -> list[bytes]:
    consumer = KafkaConsumer(
        "shop.orders", bootstrap_servers=bootstrap.split(","), group_id="order-service-1",
        auto_offset_reset="earliest", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="order-service", sasl_plain_password=password, ssl_cafile=str(ca_file),
        ssl_check_hostname=False, consumer_timeout_ms=60000)
    values = []
    try:
        for message in consumer:
            values.append(message.value)
            if len(values) == 20:
                break
    finally:
        consumer.close()
    return values
