"""The operator's CustomResourceDefinitions (apiextensions.k8s.io/v1): OdradekCluster, OdradekTopic, OdradekUser, OdradekRebalance.

Declared once here as plain data; `python -m odradek.operator.crds > deploy/crds.yaml` renders them, and a test
keeps the shipped file equal to this declaration. Every schema is structural: each node is typed (or is an
int-or-string quantity), maps are `additionalProperties`, and only the rebalance's optimization result keeps
unknown fields.
"""

import sys

GROUP = "odradek.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_LABEL = "odradek.io/cluster"
REBALANCE_ANNOTATION = "odradek.io/rebalance"
CATEGORIES = ["odradek"]

# Node settings the operator writes itself: refused in OdradekCluster's spec.config and nodePools[].config.
# The spec names the first seven; the rest are settings the operator derives with them (as cluster_spec does):
# the listeners' and the nodes' TLS (the operator's certificates) and the authorizer of spec.authorization.
OPERATOR_OWNED_CONFIG = (
    "listeners", "node.id", "process.roles", "controller.quorum.voters", "log.dirs", "broker.rack",
    "metrics.listener",
    "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
    "controller.listener.names", "controller.quorum.bootstrap.servers", "broker.id", "log.dir", "balancer.mode",
    "ssl.keystore.location", "ssl.truststore.location", "ssl.client.auth", "ssl.endpoint.identification.algorithm",
    "authorizer.class.name", "super.users",
)
# The node's own listener names (CONTROLLER on 9090, REPLICATION on 9091); a spec listener named so would clash.
RESERVED_LISTENER_NAMES = ("controller", "replication")
MAX_LISTENERS = 16

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # RFC 1123: a pool's name, inside the cluster's Pod names
SERVICE_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"  # RFC 1035: the cluster's name, which starts Service names
LISTENER_NAME = r"^[a-z0-9]{1,11}$"
TOPIC_NAME = r"^[a-zA-Z0-9._-]{1,249}$"
# Kubernetes' resource.Quantity, as controller-gen writes it
QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
            r"|(\.[0-9]+))))?$")
STORAGE_SIZE = r"^[0-9]+(\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$"
ACL_OPERATIONS = ["Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
                  "AlterConfigs", "IdempotentWrite", "All"]
REBALANCE_CONDITIONS = ["New", "PendingProposal", "ProposalReady", "Rebalancing", "Stopped", "NotReady", "Ready"]


def _string(description: str, **extra) -> dict:
    return {"type": "string", "description": description, **extra}


def _integer(description: str, **extra) -> dict:
    return {"type": "integer", "description": description, **extra}


def _boolean(description: str, default: bool) -> dict:
    return {"type": "boolean", "description": description, "default": default}


def _object(description: str, properties: dict, required: tuple = (), **extra) -> dict:
    schema = {"type": "object", "description": description, "properties": properties}
    if required:
        schema["required"] = list(required)
    return {**schema, **extra}


def _array(description: str, items: dict, **extra) -> dict:
    return {"type": "array", "description": description, "items": items, **extra}


def _string_map(description: str, **extra) -> dict:
    return {"type": "object", "description": description, "additionalProperties": {"type": "string"}, **extra}


def _quantity(description: str) -> dict:
    return {"description": description, "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY}


def _node_config(description: str) -> dict:
    return _string_map(
        f"{description} Values are strings (quote numbers); the operator's own settings "
        f"({', '.join(OPERATOR_OWNED_CONFIG)}) are refused.",
        **{"not": {"anyOf": [{"required": [key]} for key in OPERATOR_OWNED_CONFIG]}},
    )


def _conditions(types: list[str]) -> dict:
    return _array("The resource's state, Kubernetes-style.", _object("A condition.", {
        "type": _string("The condition's type.", enum=types),
        "status": _string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
        "reason": _string("A CamelCase reason for the last transition."),
        "message": _string("A human-readable message."),
        "lastTransitionTime": _string("When the status last changed.", format="date-time"),
    }, required=("type", "status")))


def _observed_generation() -> dict:
    return _integer("The metadata.generation the operator last reconciled.", format="int64")


def _ready_column() -> dict:
    return {"name": "Ready", "type": "string", "description": "The Ready condition's status.",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}


def _cluster_column() -> dict:
    return {"name": "Cluster", "type": "string", "description": "The OdradekCluster this belongs to.",
            "jsonPath": ".metadata.labels.odradek\\.io/cluster"}


def _age_column() -> dict:
    return {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _definition(kind: str, short_name: str, spec: dict, status: dict, columns: list[dict],
                spec_required: bool = True, metadata: dict | None = None) -> dict:
    plural = kind.lower() + "s"
    root = {
        "type": "object",
        "description": f"{kind}: {spec['description']}",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": metadata or {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    if spec_required:
        root["required"] = ["spec"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/name": "odradek",
                                                             "app.kubernetes.io/part-of": "odradek-operator"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": [short_name], "categories": list(CATEGORIES)},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": root},
            }],
        },
    }


def odradek_cluster() -> dict:
    node_pool = _object("A group of nodes with the same roles, storage and resources.", {
        "name": _string("The pool's name (a DNS label); part of each node's Pod name <cluster>-<pool>-<id>.",
                        pattern=DNS_LABEL, maxLength=63),
        "replicas": _integer("How many nodes the pool runs.", minimum=0),
        "roles": _array("broker, controller, or both (combined nodes).",
                        _string("A role.", enum=["broker", "controller"]),
                        minItems=1, maxItems=2, **{"x-kubernetes-list-type": "set"}),
        "storage": _object("Each node's data volume (a PersistentVolumeClaim).", {
            "size": _string("The volume's size, a quantity such as 10Gi.", pattern=STORAGE_SIZE),
            "class": _string("The StorageClass; unset: the cluster's default."),
            "deleteClaim": _boolean("Delete the claims when the cluster is deleted or the pool shrinks.", False),
        }, required=("size",)),
        "resources": _object("The node container's compute resources.", {
            "requests": _object("Requested resources.", {"cpu": _quantity("CPU."), "memory": _quantity("Memory.")}),
            "limits": _object("Resource limits.", {"cpu": _quantity("CPU."), "memory": _quantity("Memory.")}),
        }),
        "config": _node_config("Node settings for this pool's nodes, over the cluster's config."),
    }, required=("name", "replicas", "roles", "storage"))
    listener = _object("A client listener.", {
        "name": _string("The listener's name: lowercase letters and digits, at most 11 (not controller or "
                        "replication, the node's own listeners).",
                        pattern=LISTENER_NAME, **{"not": {"enum": list(RESERVED_LISTENER_NAMES)}}),
        "port": _integer("The port, unique among listeners (9090 and 9091 are the controller's and replication's).",
                         minimum=9092, maximum=65535),
        "type": _string("How clients reach it.", enum=["internal", "nodeport", "loadbalancer", "ingress"]),
        "tls": _boolean("Encrypt the listener with TLS.", False),
        "authentication": _object("How clients authenticate.", {
            "type": _string("The mechanism.", enum=["scram-sha-512", "tls"]),
        }, required=("type",)),
    }, required=("name", "port", "type"))
    spec = _object("An Odradek cluster: its node pools, listeners and node settings.", {
        "image": _string("The node image; unset: the operator's own image, odradek/odradek:<version>."),
        "nodePools": _array("The cluster's node pools.", node_pool, minItems=1, **{
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
        "listeners": _array("The client listeners.", listener, minItems=1, maxItems=MAX_LISTENERS, **{
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-validations": [{"rule": "self.all(l, self.exists_one(m, m.port == l.port))",
                                          "message": "listener ports must be unique"}]}),
        "config": _node_config("Node settings for every node."),
        "rack": _object("Rack awareness: broker.rack from a label of the node each Pod runs on.", {
            "topologyKey": _string("The node label, e.g. topology.kubernetes.io/zone.", minLength=1),
        }, required=("topologyKey",)),
        "metrics": _object("The node's HTTP port: Prometheus metrics and the web console.", {
            "enabled": _boolean("Serve metrics.", True),
            "port": _integer("The port.", minimum=1024, maximum=65535, default=9644),
        }, default={}),
        "balancer": _object("The continuous partition balancer.", {
            "mode": _string("off, node_add (balance onto new nodes only) or continuous.",
                            enum=["off", "node_add", "continuous"], default="continuous"),
        }, default={}),
        "authorization": _object("ACLs checked by the nodes (unset: every request is allowed); the nodes and the "
                                 "operator are super users.", {
            "type": _string("The authorizer: simple (ACLs, as Kafka's StandardAuthorizer).", enum=["simple"]),
            "superUsers": _array("Principal names allowed everything: a SCRAM user's name, or CN=<user> for a "
                                 "user with a certificate.",
                                 _string("A principal name, without User:.", minLength=1, pattern=r"^[^;]+$"),
                                 **{"x-kubernetes-list-type": "set"}),
        }, required=("type",)),
    }, required=("nodePools", "listeners"))
    status = _object("The cluster as the operator last saw it.", {
        "observedGeneration": _observed_generation(),
        "clusterId": _string("The cluster id the nodes' storage is formatted with."),
        "conditions": _conditions(["Ready", "NotReady", "Warning"]),
        "listeners": _array("Where clients connect.", _object("A listener's addresses.", {
            "name": _string("The listener's name."),
            "type": _string("The listener's type."),
            "bootstrapServers": _string("host:port entries, comma-separated."),
        })),
        "nodeIds": {"type": "object", "description": "Each pool's node ids, by pool name.",
                    "additionalProperties": _array("The pool's node ids.", _integer("A node id.", minimum=0))},
        "readyNodes": _integer("How many nodes are ready.", minimum=0),
    })
    columns = [
        _ready_column(),
        {"name": "Nodes", "type": "integer", "description": "Ready nodes.", "jsonPath": ".status.readyNodes"},
        {"name": "ClusterId", "type": "string", "jsonPath": ".status.clusterId"},
        _age_column(),
    ]
    # Kubernetes lets a CRD restrict only metadata.name (and generateName), and nothing else of metadata: no description.
    metadata = {"type": "object", "properties": {
        "name": _string("The cluster's name: a DNS label, as Services are named after it.", pattern=SERVICE_NAME,
                        maxLength=63),
    }}
    return _definition("OdradekCluster", "odc", spec, status, columns, metadata=metadata)


def odradek_topic() -> dict:
    spec = _object("A topic of the cluster named by the odradek.io/cluster label.", {
        "topicName": _string("The topic's name; unset: metadata.name.", pattern=TOPIC_NAME),
        "partitions": _integer("The number of partitions; only ever raised.", minimum=1),
        "replicas": _integer("The replication factor.", minimum=1, maximum=32767),
        "config": _string_map("Topic settings (values are strings)."),
    }, required=("partitions", "replicas"))
    status = _object("The topic as the operator last saw it.", {
        "observedGeneration": _observed_generation(),
        "conditions": _conditions(["Ready", "NotReady", "Warning"]),
        "topicName": _string("The topic's name in the cluster."),
        "topicId": _string("The topic's id."),
        "partitions": _integer("The number of partitions.", minimum=0),
        "replicas": _integer("The replication factor.", minimum=0),
        "managedConfigKeys": _array("The config keys the operator set on the topic; removed from the spec, they go "
                                    "back to their defaults.", _string("A config key.")),
    })
    columns = [
        _cluster_column(),
        {"name": "Partitions", "type": "integer", "jsonPath": ".spec.partitions"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        _ready_column(),
    ]
    return _definition("OdradekTopic", "odt", spec, status, columns)


def odradek_user() -> dict:
    acl = _object("An ACL rule allowing the user operations on a resource.", {
        "resource": _object("The resource the rule covers.", {
            "type": _string("The resource's type.", enum=["topic", "group", "cluster", "transactionalId"]),
            "name": _string("The resource's name or name prefix (not needed for cluster)."),
            "patternType": _string("literal: the name itself; prefix: every name starting with it.",
                                   enum=["literal", "prefix"], default="literal"),
        }, required=("type",), anyOf=[{"properties": {"type": {"enum": ["cluster"]}}}, {"required": ["name"]}]),
        "operations": _array("The operations allowed.", _string("An operation.", enum=ACL_OPERATIONS),
                             minItems=1, **{"x-kubernetes-list-type": "set"}),
        "host": _string("The client host the rule applies to; * for any.", default="*"),
    }, required=("resource", "operations"))
    spec = _object("A user of the cluster named by the odradek.io/cluster label: credentials, ACLs and quotas.", {
        "authentication": _object("How the user authenticates.", {
            "type": _string("scram-sha-512 (the operator generates a password) or tls (a client certificate).",
                            enum=["scram-sha-512", "tls"]),
        }, required=("type",)),
        "authorization": _object("The user's ACLs.", {
            "type": _string("The authorizer.", enum=["simple"]),
            "acls": _array("The ACL rules.", acl),
        }, required=("type",)),
        "quotas": _object("The user's client quotas.", {
            "producerByteRate": _integer("Bytes per second the user may produce, per broker.", minimum=0),
            "consumerByteRate": _integer("Bytes per second the user may fetch, per broker.", minimum=0),
            "requestPercentage": _integer("Percent of a network or I/O thread the user may occupy.", minimum=0),
            "controllerMutationRate": {"type": "number", "minimum": 0,
                                       "description": "Partition mutations per second (creations, deletions)."},
        }),
    }, required=("authentication",))
    status = _object("The user as the operator last saw it.", {
        "observedGeneration": _observed_generation(),
        "conditions": _conditions(["Ready", "NotReady", "Warning"]),
        "username": _string("The user's name in the cluster."),
        "secret": _string("The Secret holding the user's password or certificate."),
    })
    columns = [
        _cluster_column(),
        {"name": "Authentication", "type": "string", "jsonPath": ".spec.authentication.type"},
        {"name": "Authorization", "type": "string", "jsonPath": ".spec.authorization.type"},
        _ready_column(),
    ]
    return _definition("OdradekUser", "odu", spec, status, columns)


def odradek_rebalance() -> dict:
    spec = _object("A partition rebalance of the cluster named by the odradek.io/cluster label; approve, refresh or "
                   "stop it with the odradek.io/rebalance annotation.", {
                       "mode": _string("full, add-brokers (move replicas onto brokers) or remove-brokers (off them).",
                                       enum=["full", "add-brokers", "remove-brokers"], default="full"),
                       "brokers": _array("The brokers to add or remove (add-brokers, remove-brokers).",
                                         _integer("A node id.", minimum=0), minItems=1,
                                         **{"x-kubernetes-list-type": "set"}),
                       "goals": _array("The goals to optimise for; unset: the balancer's defaults.",
                                       _string("A goal.", minLength=1)),
                   }, default={}, anyOf=[{"properties": {"mode": {"enum": ["full"]}}}, {"required": ["brokers"]}])
    status = _object("The rebalance as the operator last saw it.", {
        "observedGeneration": _observed_generation(),
        "conditions": _conditions(list(REBALANCE_CONDITIONS)),
        "optimizationResult": _object("The proposal's summary, as the balancer reports it.", {
            "numReplicaMovements": _integer("Replica movements.", minimum=0),
            "numLeaderMovements": _integer("Leadership movements.", minimum=0),
            "dataToMoveMB": _integer("Megabytes to move.", minimum=0),
        }, **{"x-kubernetes-preserve-unknown-fields": True}),
        "executionId": _string("The balancer's id of the running or last execution."),
    })
    columns = [_cluster_column(), {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"}] + [
        {"name": state, "type": "string", "jsonPath": f'.status.conditions[?(@.type=="{state}")].status'}
        for state in ("PendingProposal", "ProposalReady", "Rebalancing", "Ready", "NotReady", "Stopped")]
    return _definition("OdradekRebalance", "odr", spec, status, columns, spec_required=False)


def crds() -> list[dict]:
    """The four CustomResourceDefinitions, in the order they are applied."""
    return [odradek_cluster(), odradek_topic(), odradek_user(), odradek_rebalance()]


def render() -> str:
    """The CRDs as one multi-document YAML text, as in deploy/crds.yaml."""
    import yaml

    header = "# Generated by `python -m odradek.operator.crds`; do not edit.\n"
    return header + yaml.safe_dump_all(crds(), sort_keys=False, explicit_start=True, width=120)


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
