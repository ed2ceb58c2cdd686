"""The Kubernetes objects of an OdradekCluster: per node a ConfigMap, a PVC and a Pod, and the cluster's Services,
PodDisruptionBudget, NetworkPolicy and ServiceAccount, as plain dicts in a fixed order (no owner references: the
caller adopts). The certificates' Secrets, which the Pods mount, come from certificates.desired_secrets(). With
rack awareness, the ClusterRoleBinding that lets the nodes read their Kubernetes node comes from rack_binding():
it is cluster-scoped, so it cannot be owned by the cluster and is not among render()'s objects."""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.config import CONFIG_PROVIDERS
from odradek.config_providers import DIRECTORY_PROVIDER
from odradek.operator.cluster_spec import (
    CONTROLLER_PORT,
    REPLICATION_PORT,
    ClusterSpec,
    Listener,
    NodePool,
)
from odradek.operator.image import CONFIG_PATH, DATA_PATH, NODE_COMMAND

CONFIG_KEY = "server.properties"
CONFIG_HASH_ANNOTATION = "odradek.io/config-hash"
CERTIFICATE_HASH_ANNOTATION = "odradek.io/certificate-hash"
DELETE_CLAIM_ANNOTATION = "odradek.io/delete-claim"
CLUSTER_LABEL = "odradek.io/cluster"
POOL_LABEL = "odradek.io/pool"
NODE_ID_LABEL = "odradek.io/node-id"
BROKER_ROLE_LABEL = "odradek.io/broker-role"
CONTROLLER_ROLE_LABEL = "odradek.io/controller-role"
NODE_UID = 1000
TERMINATION_GRACE_SECONDS = 120
_SERVICE_TYPES = {"nodeport": "NodePort", "loadbalancer": "LoadBalancer"}
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "odradek-operator"}  # deploy/operator.yaml's Deployment pods
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# The node's certificates Secret (certificates.py), mounted beside server.properties.
CERTS_DIR = posixpath.join(posixpath.dirname(CONFIG_PATH), "certs")
NODE_KEYSTORE_KEY = "node.pem"  # the node's key and certificate chain: ssl.keystore.location
CLUSTER_CA_BUNDLE_KEY = "ca.crt"  # the cluster CA's certificates: whom the nodes trust between themselves
CLIENTS_CA_BUNDLE_KEY = "clients-ca.crt"  # the clients CA's: whom listeners with tls authentication trust
_NODE_CERTS_KEYS = (NODE_KEYSTORE_KEY, CLUSTER_CA_BUNDLE_KEY, CLIENTS_CA_BUNDLE_KEY)  # what the node reads
ORGANIZATION = "odradek"  # the O of the certificates the cluster CA issues
OPERATOR_COMMON_NAME = "odradek-operator"

# Rack awareness (rack.py): the rack init container writes the Kubernetes node's label into RACK_FILE of an
# emptyDir, which the broker reads through a directory config provider of its own name (beside any the user names).
INIT_DIR = "/var/run/odradek/init"
RACK_FILE = "rack.id"
RACK_PROVIDER = "odradekdir"
RACK_CLUSTER_ROLE = "odradek-node-rack"  # deploy/operator.yaml: get on nodes
NAMESPACE_LABEL = "odradek.io/namespace"  # on cluster-scoped objects, which have no namespace of their own

# (node id, listener name) -> (host, port) clients outside Kubernetes reach that broker's listener at
ExternalAddresses = Mapping[tuple[int, str], tuple[str, int]]

_REPLICATION_COMMENT = (
    "# REPLICATION (between brokers) and CONTROLLER (the metadata quorum) are mutual TLS: only holders of a\n"
    "# certificate of the cluster CA (the nodes and the operator) connect, and the NetworkPolicy lets only this\n"
    "# cluster's pods and the operator reach ports 9090 and 9091.\n")


@dataclass(frozen=True)
class Node:
    pool: NodePool
    node_id: int
    name: str  # the Pod's name, <cluster>-<pool>-<id>


def pod_name(cluster: str, pool: str, node_id: int) -> str:
    return f"{cluster}-{pool}-{node_id}"


def headless_service_name(cluster: str) -> str:
    return f"{cluster}-nodes"


def bootstrap_service_name(cluster: str, listener: str | None = None) -> str:
    """The ClusterIP bootstrap Service, or the bootstrap Service of a nodeport or loadbalancer listener."""
    return f"{cluster}-{listener}-bootstrap" if listener else f"{cluster}-bootstrap"


def node_address(cluster: str, namespace: str, pod: str) -> str:
    """A node's stable DNS name, through the headless Service (the pod's hostname and subdomain)."""
    return f"{pod}.{headless_service_name(cluster)}.{namespace}.svc"


def node_certs_secret_name(pod: str) -> str:
    return f"{pod}-certs"


def node_common_name(cluster: str) -> str:
    """The CN of every node's certificate: one principal for all nodes, so super.users stays as nodes come."""
    return f"{cluster}-node"


def node_principal(cluster: str) -> str:
    return f"User:CN={node_common_name(cluster)},O={ORGANIZATION}"


def operator_principal() -> str:
    return f"User:CN={OPERATOR_COMMON_NAME},O={ORGANIZATION}"


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def nodes(spec: ClusterSpec, node_ids: Mapping[str, list[int]]) -> list[Node]:
    """The cluster's nodes, pool by pool in spec order and by id within a pool; a ValueError when `node_ids`
    (from assign_node_ids) does not give every pool exactly its replicas, or gives an id twice."""
    found: list[Node] = []
    for pool in spec.node_pools:
        ids = sorted(node_ids.get(pool.name, ()))
        if len(ids) != pool.replicas:
            raise ValueError(f"node pool {pool.name} has {pool.replicas} replicas but node ids {ids}")
        found += [Node(pool, node_id, pod_name(spec.name, pool.name, node_id)) for node_id in ids]
    every_id = [node.node_id for node in found]
    if len(set(every_id)) != len(every_id):
        raise ValueError(f"a node id is given to two nodes: {sorted(every_id)}")
    return found


def quorum_voters(spec: ClusterSpec, cluster_nodes: list[Node], namespace: str) -> str:
    return ",".join(f"{node.node_id}@{node_address(spec.name, namespace, node.name)}:{CONTROLLER_PORT}"
                    for node in sorted(cluster_nodes, key=lambda node: node.node_id) if node.pool.is_controller)


def server_properties(spec: ClusterSpec, node: Node, cluster_nodes: list[Node], namespace: str,
                      external_addresses: ExternalAddresses | None = None) -> str:
    """The node's server.properties: the operator's settings, then spec.config, then its pool's config (later
    ones win), keys sorted so that equal settings give equal text (and an equal config hash)."""
    pool = node.pool
    address = node_address(spec.name, namespace, node.name)
    listeners = []
    settings = {
        "node.id": str(node.node_id),
        "process.roles": pool.process_roles,
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": quorum_voters(spec, cluster_nodes, namespace),
        "listener.security.protocol.map": ",".join(
            ["CONTROLLER:SSL", "REPLICATION:SSL"]
            + [f"{listener.listener_name}:{listener.security_protocol}" for listener in spec.listeners]),
        "log.dirs": DATA_PATH,
        "balancer.mode": spec.balancer_mode,
        # every TLS listener presents the node's certificate; the nodes trust the cluster CA, and check the
        # other node's DNS name against its certificate
        "ssl.keystore.location": posixpath.join(CERTS_DIR, NODE_KEYSTORE_KEY),
        "ssl.truststore.location": posixpath.join(CERTS_DIR, CLUSTER_CA_BUNDLE_KEY),
        "ssl.endpoint.identification.algorithm": "https",
    }
    if spec.authorization is not None:
        settings["authorizer.class.name"] = STANDARD_AUTHORIZER
        # the nodes reach each other, and the operator reaches them, as these: they need CLUSTER_ACTION and more
        settings["super.users"] = ";".join([node_principal(spec.name), operator_principal()]
                                           + [f"User:{name}" for name in spec.authorization.super_users])
    if pool.is_controller:
        listeners.append(f"CONTROLLER://:{CONTROLLER_PORT}")
        settings["listener.name.controller.ssl.client.auth"] = "required"
    if pool.is_broker:
        listeners.append(f"REPLICATION://:{REPLICATION_PORT}")
        settings["listener.name.replication.ssl.client.auth"] = "required"
        listeners += [f"{listener.listener_name}://:{listener.port}" for listener in spec.listeners]
        advertised = [f"REPLICATION://{address}:{REPLICATION_PORT}"]
        for listener in spec.listeners:
            host, port = (external_addresses or {}).get((node.node_id, listener.name), (address, listener.port))
            advertised.append(f"{listener.listener_name}://{host}:{port}")
        settings["advertised.listeners"] = ",".join(advertised)
        # a controller-only node has no REPLICATION listener, and Odradek refuses an inter-broker listener it lacks
        settings["inter.broker.listener.name"] = "REPLICATION"
        for listener in spec.listeners:
            prefix = f"listener.name.{listener.name}."
            if listener.authentication == "scram-sha-512":
                settings[prefix + "sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
            elif listener.authentication == "tls":
                settings[prefix + "ssl.client.auth"] = "required"
                settings[prefix + "ssl.truststore.location"] = posixpath.join(CERTS_DIR, CLIENTS_CA_BUNDLE_KEY)
    settings["listeners"] = ",".join(listeners)
    if spec.metrics.enabled:
        settings["metrics.listener"] = f"http://0.0.0.0:{spec.metrics.port}"
    settings.update(spec.config)
    settings.update(pool.config)
    if _has_rack(spec, pool):
        providers = [name.strip() for name in settings.get(CONFIG_PROVIDERS, "").split(",") if name.strip()]
        settings[CONFIG_PROVIDERS] = ",".join(providers + [RACK_PROVIDER] if RACK_PROVIDER not in providers
                                              else providers)
        settings[f"{CONFIG_PROVIDERS}.{RACK_PROVIDER}.class"] = DIRECTORY_PROVIDER
        settings["broker.rack"] = f"${{{RACK_PROVIDER}:{INIT_DIR}:{RACK_FILE}}}"
    header = (f"# Node {node.node_id} (pool {pool.name}) of OdradekCluster {spec.name}, written by the Odradek "
              "operator:\n# edit the OdradekCluster, not this file.\n")
    return header + _REPLICATION_COMMENT + "".join(f"{key}={settings[key]}\n" for key in sorted(settings))


def render(spec: ClusterSpec, node_ids: Mapping[str, list[int]], cluster_id: str, namespace: str,
           external_addresses: ExternalAddresses | None = None, *,
           certificate_hashes: Mapping[str, str] | None = None) -> list[dict]:
    """Every Kubernetes object of the cluster: the cluster-wide ones first (ServiceAccount, Services,
    PodDisruptionBudget, NetworkPolicy), then per node its ConfigMap, PVC, Pod and external Services.
    `external_addresses` are the addresses of nodeport and loadbalancer listeners once their Services have them;
    until then a broker advertises its pod's DNS name there. `certificate_hashes` (pod name -> hash, from
    certificates.node_certificate_hashes) go into each Pod's certificate-hash annotation, as the config hash:
    a Pod whose hash differs restarts to take up its renewed certificates."""
    cluster_nodes = nodes(spec, node_ids)
    objects = [_service_account(spec, namespace), _headless_service(spec, namespace)]
    if any(listener.type == "internal" for listener in spec.listeners):
        objects.append(_bootstrap_service(spec, namespace, None))
    objects += [_bootstrap_service(spec, namespace, listener) for listener in spec.listeners if listener.is_external]
    objects += [_pod_disruption_budget(spec, namespace), _network_policy(spec, namespace)]
    for node in cluster_nodes:
        text = server_properties(spec, node, cluster_nodes, namespace, external_addresses)
        objects += [_config_map(spec, node, namespace, text), _claim(spec, node, namespace),
                    _pod(spec, node, namespace, cluster_id, text, (certificate_hashes or {}).get(node.name))]
        if node.pool.is_broker:
            objects += [_broker_service(spec, node, namespace, listener)
                        for listener in spec.listeners if listener.is_external]
    return objects


def rack_binding_name(cluster: str, namespace: str) -> str:
    return f"odradek-{namespace}-{cluster}-rack"


def rack_binding(spec: ClusterSpec, namespace: str) -> dict | None:
    """With rack awareness, the ClusterRoleBinding that lets the cluster's nodes' ServiceAccount get Kubernetes
    nodes (their rack init container reads its node's labels); None without. Nodes are cluster-scoped, so only a
    ClusterRoleBinding grants them; it is cluster-scoped too, and its labels (the cluster's, and its namespace)
    find it again for deletion."""
    if not spec.rack_topology_key:
        return None
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": rack_binding_name(spec.name, namespace),
                         "labels": cluster_labels(spec) | {NAMESPACE_LABEL: namespace}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RACK_CLUSTER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": node_service_account_name(spec), "namespace": namespace}]}


def node_service_account_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-node"


def _has_rack(spec: ClusterSpec, pool: NodePool) -> bool:
    """Rack awareness applies to brokers: Kafka's controllers do not register a rack."""
    return bool(spec.rack_topology_key) and pool.is_broker


def cluster_labels(spec: ClusterSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": "odradek", "app.kubernetes.io/instance": spec.name,
            "app.kubernetes.io/managed-by": "odradek-operator", CLUSTER_LABEL: spec.name}


def _node_labels(spec: ClusterSpec, node: Node) -> dict[str, str]:
    return cluster_labels(spec) | {POOL_LABEL: node.pool.name, NODE_ID_LABEL: str(node.node_id)}


def _selector(spec: ClusterSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": "odradek", CLUSTER_LABEL: spec.name}


def _brokers_selector(spec: ClusterSpec) -> dict[str, str]:
    return _selector(spec) | {BROKER_ROLE_LABEL: "true"}


def _metadata(name: str, namespace: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def _port_name(listener: Listener | str) -> str:
    """An IANA service name (at most 15 characters, with a letter): tcp-<listener>."""
    return f"tcp-{listener.name if isinstance(listener, Listener) else listener}"


def _service_port(name: str, port: int) -> dict:
    return {"name": name, "port": port, "targetPort": port, "protocol": "TCP"}


def _service_account(spec: ClusterSpec, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _metadata(node_service_account_name(spec), namespace, cluster_labels(spec))}


def _headless_service(spec: ClusterSpec, namespace: str) -> dict:
    ports = [_service_port(_port_name("controller"), CONTROLLER_PORT),
             _service_port(_port_name("replication"), REPLICATION_PORT)]
    ports += [_service_port(_port_name(listener), listener.port) for listener in spec.listeners]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _metadata(headless_service_name(spec.name), namespace, cluster_labels(spec)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": _selector(spec),
                     "ports": ports}}


def _bootstrap_service(spec: ClusterSpec, namespace: str, listener: Listener | None) -> dict:
    if listener is None:
        kind = "ClusterIP"
        ports = [_service_port(_port_name(each), each.port) for each in spec.listeners if each.type == "internal"]
    else:
        kind = _SERVICE_TYPES[listener.type]
        ports = [_service_port(_port_name(listener), listener.port)]
    name = bootstrap_service_name(spec.name, listener.name if listener else None)
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(name, namespace, cluster_labels(spec)),
            "spec": {"type": kind, "selector": _brokers_selector(spec), "ports": ports}}


def _broker_service(spec: ClusterSpec, node: Node, namespace: str, listener: Listener) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _metadata(f"{node.name}-{listener.name}", namespace, _node_labels(spec, node)),
            "spec": {"type": _SERVICE_TYPES[listener.type],
                     "selector": _selector(spec) | {NODE_ID_LABEL: str(node.node_id)},
                     "ports": [_service_port(_port_name(listener), listener.port)]}}


def _pod_disruption_budget(spec: ClusterSpec, namespace: str) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _metadata(f"{spec.name}-pdb", namespace, cluster_labels(spec)),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector(spec)}}}


def _network_policy(spec: ClusterSpec, namespace: str) -> dict:
    """Strimzi's: the controller and replication ports only from this cluster's pods and the operator's (in any
    namespace), the client listeners and the metrics port from anywhere."""
    internal = [{"protocol": "TCP", "port": port} for port in (CONTROLLER_PORT, REPLICATION_PORT)]
    public = [{"protocol": "TCP", "port": listener.port} for listener in spec.listeners]
    if spec.metrics.enabled:
        public.append({"protocol": "TCP", "port": spec.metrics.port})
    peers = [{"podSelector": {"matchLabels": _selector(spec)}},
             {"podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)}, "namespaceSelector": {}}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _metadata(f"{spec.name}-network-policy", namespace, cluster_labels(spec)),
            "spec": {"podSelector": {"matchLabels": _selector(spec)}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": peers, "ports": internal}, {"ports": public}]}}


def _config_map(spec: ClusterSpec, node: Node, namespace: str, text: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _metadata(f"{node.name}-config", namespace, _node_labels(spec, node)),
            "data": {CONFIG_KEY: text}}


def _claim(spec: ClusterSpec, node: Node, namespace: str) -> dict:
    storage = node.pool.storage
    claim_spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}}
    if storage.storage_class:
        claim_spec["storageClassName"] = storage.storage_class
    annotations = {DELETE_CLAIM_ANNOTATION: "true" if storage.delete_claim else "false"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _metadata(f"data-{node.name}", namespace, _node_labels(spec, node), annotations),
            "spec": claim_spec}


def _pod(spec: ClusterSpec, node: Node, namespace: str, cluster_id: str, text: str,
         certificate_hash: str | None) -> dict:
    pool = node.pool
    has_rack = _has_rack(spec, pool)
    config_dir = posixpath.dirname(CONFIG_PATH)
    # The claim is mounted above the log dir: a fresh volume's lost+found stays out of log.dirs.
    data_dir = posixpath.dirname(DATA_PATH)
    # The kubelet makes the mount point of certs inside the read-only config volume (Kubernetes 1.10 and later).
    mounts = [{"name": "config", "mountPath": config_dir, "readOnly": True},
              {"name": "certs", "mountPath": CERTS_DIR, "readOnly": True},
              {"name": "data", "mountPath": data_dir}]
    if has_rack:
        mounts.append({"name": "init", "mountPath": INIT_DIR, "readOnly": True})
    container_security = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    ports = []
    if pool.is_controller:
        ports.append({"name": _port_name("controller"), "containerPort": CONTROLLER_PORT, "protocol": "TCP"})
    if pool.is_broker:
        ports.append({"name": _port_name("replication"), "containerPort": REPLICATION_PORT, "protocol": "TCP"})
        ports += [{"name": _port_name(listener), "containerPort": listener.port, "protocol": "TCP"}
                  for listener in spec.listeners]
    if spec.metrics.enabled:
        ports.append({"name": "http-metrics", "containerPort": spec.metrics.port, "protocol": "TCP"})
    ready_port = spec.listeners[0].port if pool.is_broker else CONTROLLER_PORT
    container = {
        "name": "odradek",
        "image": spec.image,
        "command": list(NODE_COMMAND),
        "ports": ports,
        "volumeMounts": mounts,
        "readinessProbe": {"tcpSocket": {"port": ready_port}, "initialDelaySeconds": 5, "periodSeconds": 10},
        "securityContext": container_security,
    }
    if pool.resources:
        container["resources"] = {kind: dict(amounts) for kind, amounts in pool.resources.items()}
    format_storage = {
        "name": "format-storage",
        "image": spec.image,
        "command": [NODE_COMMAND[0], "storage", "format", "--cluster-id", cluster_id, "--config", CONFIG_PATH,
                    "--ignore-formatted"],
        "volumeMounts": mounts,
        "securityContext": container_security,
    }
    if pool.resources:
        format_storage["resources"] = container["resources"]
    init_containers = [format_storage]
    volumes = [
        {"name": "config", "configMap": {"name": f"{node.name}-config",
                                         "items": [{"key": CONFIG_KEY, "path": posixpath.basename(CONFIG_PATH)}]}},
        # readable by the node's group (fsGroup) only: node.pem holds the node's private key
        {"name": "certs", "secret": {"secretName": node_certs_secret_name(node.name), "defaultMode": 0o440,
                                     "items": [{"key": key, "path": key} for key in _NODE_CERTS_KEYS]}},
        {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{node.name}"}},
    ]
    if has_rack:
        # after storage format, which does not need broker.rack (its reference to a file not yet written is left
        # as it is), and before the node
        rack = _rack_container(spec, container_security)
        if pool.resources:
            rack["resources"] = container["resources"]
        init_containers.append(rack)
        volumes.append({"name": "init", "emptyDir": {}})
    annotations = {CONFIG_HASH_ANNOTATION: config_hash(text)}
    if certificate_hash is not None:
        annotations[CERTIFICATE_HASH_ANNOTATION] = certificate_hash
    labels = _node_labels(spec, node) | {BROKER_ROLE_LABEL: _flag(pool.is_broker),
                                         CONTROLLER_ROLE_LABEL: _flag(pool.is_controller)}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": _metadata(node.name, namespace, labels, annotations),
        "spec": {
            "hostname": node.name,
            "subdomain": headless_service_name(spec.name),
            "serviceAccountName": node_service_account_name(spec),
            # Only the rack init container calls the API (get on its Kubernetes node), with the Pod's service
            # account token; without rack awareness nothing does, so no token is mounted.
            "automountServiceAccountToken": has_rack,
            "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
            "securityContext": {"runAsNonRoot": True, "runAsUser": NODE_UID, "runAsGroup": NODE_UID,
                                "fsGroup": NODE_UID},
            "initContainers": init_containers,
            "containers": [container],
            "volumes": volumes,
        },
    }


def _rack_container(spec: ClusterSpec, container_security: dict) -> dict:
    """Writes the label spec.rack.topologyKey of the Kubernetes node the Pod runs on to INIT_DIR/RACK_FILE."""
    return {
        "name": "rack",
        "image": spec.image,
        # Kubernetes expands $(NODE_NAME) in a command from the container's env
        "command": [NODE_COMMAND[0], "operator", "write-rack", "--node", "$(NODE_NAME)",
                    "--label", spec.rack_topology_key, "--output", posixpath.join(INIT_DIR, RACK_FILE)],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "volumeMounts": [{"name": "init", "mountPath": INIT_DIR}],
        "securityContext": container_security,
    }


def _flag(value: bool) -> str:
    return "true" if value else "false"
