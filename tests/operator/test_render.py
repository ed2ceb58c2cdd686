"""The operator's sans-I/O core for an OdradekCluster: the resource parsed and checked, node ids kept stable, and
the rendered Kubernetes objects valid for Kubernetes 1.30 and their server.properties valid for Odradek."""

import copy
import hashlib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from odradek.config import BrokerConfig, parse_properties
from odradek.config_providers import DIRECTORY_PROVIDER
from odradek.operator.cluster_spec import SpecError, assign_node_ids, parse_cluster
from odradek.operator.image import DATA_PATH, NODE_COMMAND, image
from odradek.operator.render import (
    CERTIFICATE_HASH_ANNOTATION,
    CONFIG_HASH_ANNOTATION,
    RACK_CLUSTER_ROLE,
    rack_binding,
    render,
)

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
NAMESPACE = "streaming"
EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "cluster.yaml"

COMBINED = yaml.safe_load("""
apiVersion: odradek.io/v1beta1
kind: OdradekCluster
metadata: {name: small}
spec:
  nodePools:
    - name: nodes
      replicas: 3
      roles: [broker, controller]
      storage: {size: 10Gi}
  listeners:
    - {name: plain, port: 9092, type: internal}
""")

DEDICATED = yaml.safe_load("""
apiVersion: odradek.io/v1beta1
kind: OdradekCluster
metadata: {name: big}
spec:
  image: registry.example.com/odradek:1.2.3
  nodePools:
    - name: controllers
      replicas: 3
      roles: [controller]
      storage: {size: 5Gi, class: fast}
    - name: east
      replicas: 2
      roles: [broker]
      storage: {size: 100Gi, class: standard, deleteClaim: true}
      resources: {requests: {cpu: 500m, memory: 2Gi}, limits: {cpu: "2", memory: 4Gi}}
      config: {num.io.threads: "16"}
    - name: west
      replicas: 2
      roles: [broker]
      storage: {size: 100Gi}
  listeners:
    - {name: plain, port: 9092, type: internal}
    - {name: tls, port: 9093, type: internal, tls: true, authentication: {type: tls}}
    - {name: scram, port: 9094, type: internal, tls: true, authentication: {type: scram-sha-512}}
    - {name: external, port: 9095, type: loadbalancer, tls: true, authentication: {type: scram-sha-512}}
    - {name: nodes, port: 9096, type: nodeport, authentication: {type: scram-sha-512}}
  config:
    default.replication.factor: "3"
    min.insync.replicas: "2"
    auto.create.topics.enable: "false"
  rack: {topologyKey: topology.kubernetes.io/zone}
  metrics: {port: 9700}
  balancer: {mode: node_add}
""")


def rendered(resource, previous=None):
    spec = parse_cluster(resource)
    node_ids = assign_node_ids(spec, previous or {})
    return spec, node_ids, render(spec, node_ids, CLUSTER_ID, NAMESPACE)


def of_kind(objects, kind):
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def properties(objects, pod):
    return parse_properties(of_kind(objects, "ConfigMap")[f"{pod}-config"]["data"]["server.properties"])


def test_a_combined_cluster_parses_with_defaults():
    spec = parse_cluster(COMBINED)
    assert spec.name == "small" and spec.image == image()
    (pool,) = spec.node_pools
    assert (pool.replicas, pool.roles, pool.is_broker, pool.is_controller) == (3, ("broker", "controller"), True, True)
    assert pool.storage.size == "10Gi" and pool.storage.storage_class is None and not pool.storage.delete_claim
    (listener,) = spec.listeners
    assert (listener.listener_name, listener.security_protocol, listener.tls) == ("PLAIN", "PLAINTEXT", False)
    assert spec.metrics.enabled and spec.metrics.port == 9644
    assert spec.balancer_mode == "continuous" and spec.rack_topology_key is None and not spec.config
    assert assign_node_ids(spec, {}) == {"nodes": [0, 1, 2]}
    # the CRD asks for strings; numbers and booleans written unquoted still read as Kafka writes them
    typed = changed(COMBINED, lambda s: s.update(config={"num.partitions": 6, "log.cleaner.enable": True}))
    assert parse_cluster(typed).config == {"num.partitions": "6", "log.cleaner.enable": "true"}


def test_a_cluster_of_dedicated_controllers_and_two_broker_pools_parses():
    spec = parse_cluster(DEDICATED)
    assert spec.image == "registry.example.com/odradek:1.2.3"
    assert [(p.name, p.process_roles) for p in spec.node_pools] == [
        ("controllers", "controller"), ("east", "broker"), ("west", "broker")]
    assert spec.pool("east").resources["limits"]["cpu"] == "2"
    assert spec.pool("east").storage.delete_claim and spec.pool("controllers").storage.storage_class == "fast"
    assert [listener.security_protocol for listener in spec.listeners] == [
        "PLAINTEXT", "SSL", "SASL_SSL", "SASL_SSL", "SASL_PLAINTEXT"]
    assert spec.config == {"default.replication.factor": "3", "min.insync.replicas": "2",
                           "auto.create.topics.enable": "false"}
    assert spec.rack_topology_key == "topology.kubernetes.io/zone"
    assert (spec.metrics.port, spec.balancer_mode) == (9700, "node_add")
    assert assign_node_ids(spec, {}) == {"controllers": [0, 1, 2], "east": [3, 4], "west": [5, 6]}


@pytest.mark.skipif(not EXAMPLE.exists(), reason="deploy/examples/cluster.yaml is not there")
def test_the_example_cluster_renders_objects_valid_for_kubernetes_and_odradek(tmp_path):
    clusters = [r for r in yaml.safe_load_all(EXAMPLE.read_text()) if r and r.get("kind") == "OdradekCluster"]
    assert clusters
    for resource in clusters:
        _, _, objects = rendered(resource)
        for obj in objects:
            kubernetes_validate.validate(obj, "1.30", strict=True)
        for name in of_kind(objects, "Pod"):
            BrokerConfig(properties(objects, name) | {"log.dirs": str(tmp_path / name)})


def scaled(resource, **replicas):
    resource = copy.deepcopy(resource)
    for pool in resource["spec"]["nodePools"]:
        pool["replicas"] = replicas.get(pool["name"], pool["replicas"])
    return parse_cluster(resource)


def test_node_ids_survive_scaling_and_a_new_pool_never_reuses_an_id():
    ids = assign_node_ids(parse_cluster(DEDICATED), {})
    assert ids == {"controllers": [0, 1, 2], "east": [3, 4], "west": [5, 6]}
    # east grows: its new ids come after the highest id anywhere, not after its own
    ids = assign_node_ids(scaled(DEDICATED, east=4), ids)
    assert ids == {"controllers": [0, 1, 2], "east": [3, 4, 7, 8], "west": [5, 6]}
    # east shrinks: its highest ids go, the others keep theirs
    ids = assign_node_ids(scaled(DEDICATED, east=1), ids)
    assert ids == {"controllers": [0, 1, 2], "east": [3], "west": [5, 6]}
    # a new pool starts above every id in use, and the same input always gives the same ids
    grown = copy.deepcopy(DEDICATED)
    grown["spec"]["nodePools"][1]["replicas"] = 1
    grown["spec"]["nodePools"].append({"name": "north", "replicas": 2, "roles": ["broker"],
                                       "storage": {"size": "1Gi"}})
    assert assign_node_ids(parse_cluster(grown), ids) == {
        "controllers": [0, 1, 2], "east": [3], "west": [5, 6], "north": [7, 8]}
    assert assign_node_ids(parse_cluster(grown), ids) == assign_node_ids(parse_cluster(grown), dict(ids))
    # ids of a pool that shrinks in the same step stay taken: another pool's new nodes never get them
    both = copy.deepcopy(grown)
    both["spec"]["nodePools"][2]["replicas"] = 0
    previous = {"controllers": [0, 1, 2], "east": [3], "west": [5, 6]}
    assert assign_node_ids(parse_cluster(both), previous) == {
        "controllers": [0, 1, 2], "east": [3], "west": [], "north": [7, 8]}
    # the ids a pool keeps are never changed, whatever the order they are stored in
    assert assign_node_ids(scaled(DEDICATED), {"controllers": [2, 0, 1], "east": [4, 3], "west": [6, 5]}) == {
        "controllers": [0, 1, 2], "east": [3, 4], "west": [5, 6]}


def test_node_ids_given_to_two_pools_are_refused():
    with pytest.raises(SpecError, match="node id 3 is in pools east and west"):
        assign_node_ids(parse_cluster(DEDICATED), {"controllers": [0, 1, 2], "east": [3, 4], "west": [3, 5]})


def changed(resource, edit):
    resource = copy.deepcopy(resource)
    edit(resource["spec"])
    return resource


REFUSED = [
    ("a pool named twice", lambda s: s["nodePools"].append(dict(s["nodePools"][1])),
     r"spec.nodePools\[3\].name: node pool east is named twice"),
    ("a listener named twice", lambda s: s["listeners"].append({"name": "plain", "port": 9099, "type": "internal"}),
     r"spec.listeners\[5\].name: listener plain is named twice"),
    ("two listeners on one port", lambda s: s["listeners"].append({"name": "more", "port": 9093, "type": "internal"}),
     r"spec.listeners\[5\].port: 9093 is also the port of listener tls"),
    ("no controller pool", lambda s: s["nodePools"].pop(0),
     "spec.nodePools: no node pool has the controller role"),
    ("zero controllers", lambda s: s["nodePools"][0].update(replicas=0),
     r"spec.nodePools: the controller pools \(controllers\) have 0 replicas; a cluster needs at least one "
     "controller"),
    ("no broker pool", lambda s: s.update(nodePools=s["nodePools"][:1]),
     "spec.nodePools: no node pool has the broker role"),
    ("zero brokers", lambda s: [pool.update(replicas=0) for pool in s["nodePools"][1:]],
     r"spec.nodePools: the broker pools \(east, west\) have 0 replicas; a cluster needs at least one broker"),
    ("the controller port", lambda s: s["listeners"][0].update(port=9090),
     r"spec.listeners\[0\].port: 9090 is reserved for the controller listener"),
    ("the replication port", lambda s: s["listeners"][0].update(port=9091),
     r"spec.listeners\[0\].port: 9091 is reserved for the replication listener"),
    ("the metrics port", lambda s: s["listeners"][0].update(port=9700),
     r"spec.listeners\[0\].port: 9700 is the metrics port"),
    ("metrics on the controller port", lambda s: s["metrics"].update(port=9090),
     "spec.metrics.port: 9090 is reserved for the controller listener"),
    ("client certificates without tls", lambda s: s["listeners"][0].update(authentication={"type": "tls"}),
     r"spec.listeners\[0\].authentication.type: tls \(client certificates\) needs tls: true"),
    ("a listener named as the operator's own", lambda s: s["listeners"][0].update(name="replication"),
     r"spec.listeners\[0\].name: replication is the name of the operator's own listener"),
    ("an ingress listener", lambda s: s["listeners"][0].update(type="ingress"),
     r"spec.listeners\[0\].type: ingress listeners are not supported yet"),
    ("a name too long for a Service", lambda s: s["nodePools"][1].update(name="e" * 45),
     r"spec.nodePools\[1\].name: big-e{45}-<node id>-<listener> can be 64 characters, more than 63"),
]
OWNED = ["listeners", "node.id", "process.roles", "controller.quorum.voters", "log.dirs", "broker.rack",
         "metrics.listener", "advertised.listeners", "inter.broker.listener.name", "balancer.mode"]


@pytest.mark.parametrize(("edit", "message"), [(edit, message) for _, edit, message in REFUSED],
                         ids=[case for case, _, _ in REFUSED])
def test_a_cluster_the_operator_cannot_run_is_refused_with_one_line(edit, message):
    with pytest.raises(SpecError, match=message) as refused:
        parse_cluster(changed(DEDICATED, edit))
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("key", OWNED)
def test_settings_the_operator_owns_are_refused_in_cluster_and_pool_config(key):
    with pytest.raises(SpecError, match=rf"^spec.config.{key}: the operator sets {key} itself$"):
        parse_cluster(changed(DEDICATED, lambda s: s["config"].update({key: "x"})))
    with pytest.raises(SpecError, match=rf"^spec.nodePools\[1\].config.{key}: the operator sets {key} itself$"):
        parse_cluster(changed(DEDICATED, lambda s: s["nodePools"][1]["config"].update({key: "x"})))


@pytest.mark.parametrize("resource", [COMBINED, DEDICATED], ids=["combined", "dedicated"])
def test_every_node_config_is_accepted_by_odradek(resource, tmp_path):
    spec, node_ids, objects = rendered(resource)
    pods = of_kind(objects, "Pod")
    assert len(pods) == sum(len(ids) for ids in node_ids.values())
    for name in pods:
        props = properties(objects, name)
        assert props["log.dirs"] == DATA_PATH
        config = BrokerConfig(props | {"log.dirs": str(tmp_path / name)})
        pool = spec.pool(pods[name]["metadata"]["labels"]["odradek.io/pool"])
        assert config.node_id == int(pods[name]["metadata"]["labels"]["odradek.io/node-id"])
        assert config.process_roles == set(pool.roles)
        assert set(config.quorum_voters) == {i for p in spec.node_pools if p.is_controller for i in node_ids[p.name]}
        if pool.is_broker:
            assert config.inter_broker_listener == "REPLICATION"
            assert [listener.name for listener in config.listeners] == \
                ["REPLICATION"] + [listener.listener_name for listener in spec.listeners]
            assert config.security_protocols()["REPLICATION"] == "SSL"
            assert config.listener_setting("REPLICATION", "ssl.client.auth") == "required"
            assert {listener.host for listener in config.advertised_listeners} == \
                {f"{name}.{spec.name}-nodes.{NAMESPACE}.svc"}
        if pool.is_controller:
            assert [(listener.name, listener.port) for listener in config.controller_listeners] == \
                [("CONTROLLER", 9090)]
            assert config.listener_setting("CONTROLLER", "ssl.client.auth") == "required"
        assert props["listener.security.protocol.map"].startswith("CONTROLLER:SSL,REPLICATION:SSL,")
        assert config["ssl.keystore.location"] == "/etc/odradek/certs/node.pem"
        assert config["ssl.truststore.location"] == "/etc/odradek/certs/ca.crt"
        assert config["ssl.endpoint.identification.algorithm"] == "https"


def test_server_properties_of_a_broker_of_the_dedicated_cluster():
    _, _, objects = rendered(DEDICATED)
    text = of_kind(objects, "ConfigMap")["big-east-3-config"]["data"]["server.properties"]
    assert "REPLICATION (between brokers) and CONTROLLER (the metadata quorum) are mutual TLS" in text
    keys = [line.partition("=")[0] for line in text.splitlines() if not line.startswith("#")]
    assert keys == sorted(keys)
    props = parse_properties(text)
    dns = "big-east-3.big-nodes.streaming.svc"
    assert props["listeners"] == ("REPLICATION://:9091,PLAIN://:9092,TLS://:9093,SCRAM://:9094,EXTERNAL://:9095,"
                                  "NODES://:9096")
    assert props["advertised.listeners"] == (f"REPLICATION://{dns}:9091,PLAIN://{dns}:9092,TLS://{dns}:9093,"
                                             f"SCRAM://{dns}:9094,EXTERNAL://{dns}:9095,NODES://{dns}:9096")
    assert props["listener.security.protocol.map"] == (
        "CONTROLLER:SSL,REPLICATION:SSL,PLAIN:PLAINTEXT,TLS:SSL,SCRAM:SASL_SSL,EXTERNAL:SASL_SSL,"
        "NODES:SASL_PLAINTEXT")
    assert props["controller.quorum.voters"] == ",".join(
        f"{i}@big-controllers-{i}.big-nodes.streaming.svc:9090" for i in range(3))
    assert props["listener.name.scram.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.nodes.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.tls.ssl.client.auth"] == "required"
    # client certificates on the tls listener are the clients CA's; the others keep the node-wide cluster CA
    assert props["listener.name.tls.ssl.truststore.location"] == "/etc/odradek/certs/clients-ca.crt"
    assert props["listener.name.replication.ssl.client.auth"] == "required"
    assert "listener.name.scram.ssl.truststore.location" not in props and "ssl.client.auth" not in props
    assert "authorizer.class.name" not in props and "super.users" not in props
    assert props["metrics.listener"] == "http://0.0.0.0:9700"
    assert props["balancer.mode"] == "node_add"
    assert (props["num.io.threads"], props["min.insync.replicas"]) == ("16", "2")
    # the rack init container writes the Kubernetes node's zone there; the provider reads it at startup
    assert props["broker.rack"] == "${odradekdir:/var/run/odradek/init:rack.id}"
    assert (props["config.providers"], props["config.providers.odradekdir.class"]) == ("odradekdir", DIRECTORY_PROVIDER)
    west = properties(objects, "big-west-5")
    assert "num.io.threads" not in west  # pool config stays in its pool
    controller = properties(objects, "big-controllers-0")
    assert controller["listeners"] == "CONTROLLER://:9090" and controller["process.roles"] == "controller"
    assert "advertised.listeners" not in controller and "inter.broker.listener.name" not in controller


def test_external_addresses_are_advertised_once_known():
    spec = parse_cluster(DEDICATED)
    node_ids = assign_node_ids(spec, {})
    objects = render(spec, node_ids, CLUSTER_ID, NAMESPACE,
                     external_addresses={(3, "external"): ("203.0.113.7", 9095), (3, "nodes"): ("10.0.0.5", 31234)})
    advertised = properties(objects, "big-east-3")["advertised.listeners"]
    assert "EXTERNAL://203.0.113.7:9095" in advertised and "NODES://10.0.0.5:31234" in advertised


@pytest.mark.parametrize("resource", [COMBINED, DEDICATED], ids=["combined", "dedicated"])
def test_every_object_is_valid_for_kubernetes_1_30(resource):
    _, _, objects = rendered(resource)
    for obj in objects:
        kubernetes_validate.validate(obj, "1.30", strict=True)
        assert obj["metadata"]["namespace"] == NAMESPACE and "ownerReferences" not in obj["metadata"]


def test_objects_are_named_and_labelled_per_the_spec():
    _, _, objects = rendered(DEDICATED)
    names = [(obj["kind"], obj["metadata"]["name"]) for obj in objects]
    assert names[:7] == [("ServiceAccount", "big-node"), ("Service", "big-nodes"), ("Service", "big-bootstrap"),
                         ("Service", "big-external-bootstrap"), ("Service", "big-nodes-bootstrap"),
                         ("PodDisruptionBudget", "big-pdb"), ("NetworkPolicy", "big-network-policy")]
    assert names[7:10] == [("ConfigMap", "big-controllers-0-config"), ("PersistentVolumeClaim", "data-big-controllers-0"),
                          ("Pod", "big-controllers-0")]
    assert names[-5:] == [("ConfigMap", "big-west-6-config"), ("PersistentVolumeClaim", "data-big-west-6"),
                          ("Pod", "big-west-6"), ("Service", "big-west-6-external"), ("Service", "big-west-6-nodes")]
    assert len(set(names)) == len(names)
    assert objects == rendered(DEDICATED)[2]  # deterministic
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "odradek" and labels["app.kubernetes.io/instance"] == "big"
        assert labels["app.kubernetes.io/managed-by"] == "odradek-operator" and labels["odradek.io/cluster"] == "big"
    for name, obj in of_kind(objects, "Pod").items():
        assert obj["metadata"]["labels"]["odradek.io/pool"] in name
        assert name.endswith("-" + obj["metadata"]["labels"]["odradek.io/node-id"])

    services = of_kind(objects, "Service")
    headless = services["big-nodes"]["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert [port["port"] for port in headless["ports"]] == [9090, 9091, 9092, 9093, 9094, 9095, 9096]
    bootstrap = services["big-bootstrap"]["spec"]
    assert bootstrap["type"] == "ClusterIP" and [port["port"] for port in bootstrap["ports"]] == [9092, 9093, 9094]
    assert bootstrap["selector"]["odradek.io/broker-role"] == "true"
    assert services["big-external-bootstrap"]["spec"]["type"] == "LoadBalancer"
    assert services["big-nodes-bootstrap"]["spec"]["type"] == "NodePort"
    assert services["big-east-4-external"]["spec"]["selector"]["odradek.io/node-id"] == "4"
    assert not any(name.startswith("big-controllers-") for name in services)
    assert of_kind(objects, "PodDisruptionBudget")["big-pdb"]["spec"]["maxUnavailable"] == 1

    claim = of_kind(objects, "PersistentVolumeClaim")["data-big-east-3"]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}},
                             "storageClassName": "standard"}
    assert claim["metadata"]["labels"]["odradek.io/node-id"] == "3"


def test_a_pod_runs_the_node_on_its_claim_with_its_config():
    _, _, objects = rendered(DEDICATED)
    pods = of_kind(objects, "Pod")
    pod = pods["big-east-3"]["spec"]
    assert (pod["hostname"], pod["subdomain"], pod["serviceAccountName"]) == ("big-east-3", "big-nodes", "big-node")
    assert pod["terminationGracePeriodSeconds"] == 120
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    init, rack = pod["initContainers"]
    assert rack["name"] == "rack"  # tested with the other rack pieces
    assert init["command"] == ["odradek", "storage", "format", "--cluster-id", CLUSTER_ID, "--config",
                               "/etc/odradek/server.properties", "--ignore-formatted"]
    (node,) = pod["containers"]
    assert node["command"] == NODE_COMMAND and node["image"] == "registry.example.com/odradek:1.2.3"
    assert node["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert node["readinessProbe"]["tcpSocket"]["port"] == 9092
    assert {port["containerPort"] for port in node["ports"]} == {9091, 9092, 9093, 9094, 9095, 9096, 9700}
    assert {volume["name"]: volume for volume in pod["volumes"]} == {
        "config": {"name": "config", "configMap": {"name": "big-east-3-config",
                                                   "items": [{"key": "server.properties", "path": "server.properties"}]}},
        "certs": {"name": "certs", "secret": {"secretName": "big-east-3-certs", "defaultMode": 0o440, "items": [
            {"key": "node.pem", "path": "node.pem"}, {"key": "ca.crt", "path": "ca.crt"},
            {"key": "clients-ca.crt", "path": "clients-ca.crt"}]}},
        "data": {"name": "data", "persistentVolumeClaim": {"claimName": "data-big-east-3"}},
        "init": {"name": "init", "emptyDir": {}}}
    mounts = {mount["name"]: mount for mount in node["volumeMounts"]}
    assert mounts["config"] == {"name": "config", "mountPath": "/etc/odradek", "readOnly": True}
    assert mounts["certs"] == {"name": "certs", "mountPath": "/etc/odradek/certs", "readOnly": True}
    assert init["volumeMounts"] == node["volumeMounts"]
    assert DATA_PATH.startswith(mounts["data"]["mountPath"] + "/")
    controller = pods["big-controllers-0"]["spec"]["containers"][0]
    assert controller["readinessProbe"]["tcpSocket"]["port"] == 9090 and "resources" not in controller
    assert {port["containerPort"] for port in controller["ports"]} == {9090, 9700}
    assert "env" not in node


def hashes(objects):
    return {name: pod["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] for name, pod in of_kind(objects, "Pod").items()}


def test_the_config_hash_changes_exactly_when_a_nodes_config_does():
    spec, node_ids, objects = rendered(DEDICATED)
    before = hashes(objects)
    assert len(set(before.values())) == len(before)  # every node's config names the node
    # a cluster id or an image is not in server.properties
    again = render(spec, node_ids, "AAAAAAAAAAAAAAAAAAAAAA", NAMESPACE)
    assert hashes(again) == before
    # a pool's config changes its nodes only
    east = changed(DEDICATED, lambda s: s["nodePools"][1]["config"].update({"num.io.threads": "8"}))
    after = hashes(rendered(east)[2])
    assert {name for name in before if after[name] != before[name]} == {"big-east-3", "big-east-4"}
    # another broker changes no one's config; another controller changes every node's voters
    _, _, objects = rendered(changed(DEDICATED, lambda s: s["nodePools"][2].update(replicas=3)), node_ids)
    after = hashes(objects)
    assert {name for name in before if after[name] != before[name]} == set() and "big-west-7" in after
    _, _, objects = rendered(changed(DEDICATED, lambda s: s["nodePools"][0].update(replicas=5)), node_ids)
    after = hashes(objects)
    assert all(after[name] != before[name] for name in before)
    # the hash is the sha256 of the ConfigMap's text
    text = of_kind(objects, "ConfigMap")["big-east-3-config"]["data"]["server.properties"]
    assert after["big-east-3"] == hashlib.sha256(text.encode()).hexdigest()


def test_the_network_policy_opens_the_node_ports_only_to_the_cluster_and_the_operator():
    _, _, objects = rendered(DEDICATED)
    policy = of_kind(objects, "NetworkPolicy")["big-network-policy"]["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "odradek", "odradek.io/cluster": "big"}}
    assert policy["policyTypes"] == ["Ingress"]
    internal, public = policy["ingress"]
    assert [port["port"] for port in internal["ports"]] == [9090, 9091]
    assert internal["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "odradek", "odradek.io/cluster": "big"}}},
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "odradek-operator"}}, "namespaceSelector": {}}]
    assert "from" not in public and [port["port"] for port in public["ports"]] == [9092, 9093, 9094, 9095, 9096, 9700]
    without_metrics = changed(COMBINED, lambda s: s.update(metrics={"enabled": False}))
    (policy,) = of_kind(rendered(without_metrics)[2], "NetworkPolicy").values()
    assert [port["port"] for port in policy["spec"]["ingress"][1]["ports"]] == [9092]


def test_the_network_policy_lets_in_the_operator_pods_of_the_shipped_deployment():
    manifests = yaml.safe_load_all((EXAMPLE.parents[1] / "operator.yaml").read_text())
    (deployment,) = [obj for obj in manifests if obj and obj["kind"] == "Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    (policy,) = of_kind(rendered(COMBINED)[2], "NetworkPolicy").values()
    operator_peer = policy["spec"]["ingress"][0]["from"][1]["podSelector"]["matchLabels"]
    assert operator_peer.items() <= pod_labels.items()


def test_simple_authorization_makes_the_nodes_the_operator_and_the_named_users_super_users():
    authorized = changed(DEDICATED, lambda s: s.update(authorization={"type": "simple",
                                                                      "superUsers": ["admin", "CN=ops"]}))
    spec, _, objects = rendered(authorized)
    assert spec.authorization.super_users == ("admin", "CN=ops")
    for pod in of_kind(objects, "Pod"):
        props = properties(objects, pod)
        assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        assert props["super.users"] == "User:CN=big-node,O=odradek;User:CN=odradek-operator,O=odradek;User:admin;User:CN=ops"
    bare = changed(DEDICATED, lambda s: s.update(authorization={"type": "simple"}))
    assert properties(rendered(bare)[2], "big-east-3")["super.users"] == \
        "User:CN=big-node,O=odradek;User:CN=odradek-operator,O=odradek"
    # one principal for every node: another broker changes no node's super.users, nor its config
    _, node_ids, before = rendered(bare)
    _, _, after = rendered(changed(bare, lambda s: s["nodePools"][2].update(replicas=3)), node_ids)
    assert hashes(after)["big-east-3"] == hashes(before)["big-east-3"]


@pytest.mark.parametrize("authorization, message", [
    ({"type": "acl"}, "spec.authorization.type: expected one of simple, got 'acl'"),
    ({"type": "simple", "superUsers": "admin"}, "spec.authorization.superUsers: expected a list of user names"),
    ({"type": "simple", "superUsers": ["a;b"]}, r"spec.authorization.superUsers\[0\]: expected a user name"),
    ({"type": "simple", "superUsers": ["User:admin"]}, r"spec.authorization.superUsers\[0\]: expected a user name"),
])
def test_an_authorization_the_operator_cannot_render_is_refused(authorization, message):
    with pytest.raises(SpecError, match=message):
        parse_cluster(changed(COMBINED, lambda s: s.update(authorization=authorization)))


def test_the_certificate_hash_annotation_is_the_one_given_and_absent_without_one():
    spec, node_ids, objects = rendered(COMBINED)
    assert all(CERTIFICATE_HASH_ANNOTATION not in pod["metadata"]["annotations"]
               for pod in of_kind(objects, "Pod").values())
    given = {"small-nodes-0": "a" * 64, "small-nodes-1": "b" * 64, "small-nodes-2": "c" * 64}
    objects = render(spec, node_ids, CLUSTER_ID, NAMESPACE, certificate_hashes=given)
    assert {name: pod["metadata"]["annotations"][CERTIFICATE_HASH_ANNOTATION]
            for name, pod in of_kind(objects, "Pod").items()} == given
    assert hashes(objects) == hashes(rendered(COMBINED)[2])  # the config hash stays the config's


def test_with_rack_awareness_a_broker_reads_its_kubernetes_nodes_label_before_it_starts():
    spec, _, objects = rendered(DEDICATED)
    pods = of_kind(objects, "Pod")
    pod = pods["big-east-3"]["spec"]
    format_storage, rack = pod["initContainers"]
    assert rack["command"] == ["odradek", "operator", "write-rack", "--node", "$(NODE_NAME)",
                               "--label", "topology.kubernetes.io/zone", "--output", "/var/run/odradek/init/rack.id"]
    assert rack["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert rack["image"] == spec.image and rack["securityContext"]["allowPrivilegeEscalation"] is False
    assert rack["volumeMounts"] == [{"name": "init", "mountPath": "/var/run/odradek/init"}]
    # the node reads it; storage format loads server.properties too, before the file is there, and needs no rack
    init_mount = {"name": "init", "mountPath": "/var/run/odradek/init", "readOnly": True}
    assert init_mount in pod["containers"][0]["volumeMounts"] and init_mount in format_storage["volumeMounts"]
    assert pod["automountServiceAccountToken"] is True  # the rack container's API call
    # a controller-only node has no rack (Kafka's controllers do not register one): none of it
    controller = pods["big-controllers-0"]["spec"]
    assert [init["name"] for init in controller["initContainers"]] == ["format-storage"]
    assert controller["automountServiceAccountToken"] is False
    assert "init" not in {volume["name"] for volume in controller["volumes"]}
    assert "broker.rack" not in properties(objects, "big-controllers-0")
    assert not any(key.startswith("config.providers") for key in properties(objects, "big-controllers-0"))


def test_without_rack_awareness_no_rack_container_token_or_binding():
    spec, _, objects = rendered(COMBINED)
    pod = of_kind(objects, "Pod")["small-nodes-0"]["spec"]
    assert [init["name"] for init in pod["initContainers"]] == ["format-storage"]
    assert pod["automountServiceAccountToken"] is False
    assert {volume["name"] for volume in pod["volumes"]} == {"config", "certs", "data"}
    assert "broker.rack" not in properties(objects, "small-nodes-0")
    assert rack_binding(spec, NAMESPACE) is None


def test_the_users_config_providers_keep_working_beside_the_racks():
    resource = changed(DEDICATED, lambda s: s["config"].update({
        "config.providers": "file", "config.providers.file.class": "org.apache.kafka.common.config.provider."
                                                                    "FileConfigProvider"}))
    props = properties(rendered(resource)[2], "big-east-3")
    assert props["config.providers"] == "file,odradekdir"
    assert props["config.providers.file.class"].endswith("FileConfigProvider")
    assert props["config.providers.odradekdir.class"] == DIRECTORY_PROVIDER


def test_the_rack_binding_lets_the_nodes_service_account_get_nodes_and_is_valid_for_kubernetes_1_30():
    spec = parse_cluster(DEDICATED)
    binding = rack_binding(spec, NAMESPACE)
    kubernetes_validate.validate(binding, "1.30", strict=True)
    assert binding["kind"] == "ClusterRoleBinding" and "namespace" not in binding["metadata"]
    assert binding["metadata"]["name"] == "odradek-streaming-big-rack"
    assert binding["metadata"]["labels"]["odradek.io/cluster"] == "big"
    assert binding["metadata"]["labels"]["odradek.io/namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": RACK_CLUSTER_ROLE}
    service_account = of_kind(rendered(DEDICATED)[2], "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "big-node", "namespace": NAMESPACE}]
    assert set(service_account) == {"big-node"}
    # a cluster of the same name in another namespace has its own
    assert rack_binding(spec, "other")["metadata"]["name"] == "odradek-other-big-rack"
