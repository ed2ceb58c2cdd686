"""An OdradekCluster resource, parsed and checked: frozen values with their defaults, and the pools' node ids."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from odradek.config import LISTENER_PREFIX, unprefixed
from odradek.operator import image as operator_image

BROKER, CONTROLLER = "broker", "controller"
CONTROLLER_PORT = 9090  # the CONTROLLER listener: the metadata quorum
REPLICATION_PORT = 9091  # the REPLICATION listener: brokers fetching from each other
LISTENER_PORTS = (9092, 65535)
RESERVED_PORTS = {CONTROLLER_PORT: "the controller listener", REPLICATION_PORT: "the replication listener"}
LISTENER_TYPES = ("internal", "nodeport", "loadbalancer", "ingress")
EXTERNAL_TYPES = ("nodeport", "loadbalancer")  # one Service per broker plus a bootstrap Service each
AUTHENTICATION_TYPES = ("scram-sha-512", "tls")
BALANCER_MODES = ("off", "node_add", "continuous")
DEFAULT_METRICS_PORT = 9644

# Settings the operator writes itself: a value in spec.config or a pool's config would fight it.
OPERATOR_OWNED = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
    "controller.listener.names", "node.id", "broker.id", "process.roles", "controller.quorum.voters",
    "controller.quorum.bootstrap.servers", "log.dirs", "log.dir", "broker.rack", "metrics.listener",
    "balancer.mode", "ssl.keystore.location", "ssl.truststore.location", "ssl.client.auth",
    "ssl.endpoint.identification.algorithm", "authorizer.class.name", "super.users",
})
# Refused on every listener too (listener.name.<listener>.<setting>): the rules make the principals of the
# certificates, which super.users (the nodes', the operator's) and OdradekUsers' ACLs (User:CN=<name>) name.
PRINCIPAL_SETTINGS = frozenset({"ssl.principal.mapping.rules"})
# The operator's own listeners: every per-listener setting of theirs (their mutual TLS) is the operator's.
OPERATOR_LISTENER_PREFIXES = (f"{LISTENER_PREFIX}controller.", f"{LISTENER_PREFIX}replication.")
AUTHORIZATION_TYPES = ("simple",)

_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # a DNS-1035 label: it starts Service names
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LISTENER_NAME = re.compile(r"^[a-z0-9]{1,11}$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?|[kmunE][0-9]*|e[0-9]+)?$")
_MAX_NODE_ID_DIGITS = 5  # names are checked to fit ids up to 99999
_DNS_LABEL_MAX = 63


class SpecError(ValueError):
    """An OdradekCluster the operator cannot run; the one-line message names the field."""


@dataclass(frozen=True)
class Storage:
    size: str
    storage_class: str | None = None
    delete_claim: bool = False


@dataclass(frozen=True)
class NodePool:
    name: str
    replicas: int
    roles: tuple[str, ...]  # sorted: ("broker",), ("controller",) or ("broker", "controller")
    storage: Storage
    resources: Mapping[str, Mapping[str, str]]  # requests/limits -> cpu/memory, as the container takes them
    config: Mapping[str, str]

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles

    @property
    def process_roles(self) -> str:
        return ",".join(self.roles)


@dataclass(frozen=True)
class Listener:
    name: str  # lowercase, as in the resource; the listener name in server.properties is its upper case
    port: int
    type: str
    tls: bool = False
    authentication: str | None = None  # scram-sha-512, tls or None

    @property
    def listener_name(self) -> str:
        return self.name.upper()

    @property
    def security_protocol(self) -> str:
        if self.authentication == "scram-sha-512":
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def is_external(self) -> bool:
        return self.type in EXTERNAL_TYPES


@dataclass(frozen=True)
class Metrics:
    enabled: bool = True
    port: int = DEFAULT_METRICS_PORT


@dataclass(frozen=True)
class Authorization:
    """Strimzi's simple authorization: ACLs checked by the nodes; `super_users` are principal names (`admin`,
    `CN=ops`), allowed everything, beside the nodes and the operator."""

    super_users: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    image: str
    node_pools: tuple[NodePool, ...]
    listeners: tuple[Listener, ...]
    config: Mapping[str, str]
    rack_topology_key: str | None
    metrics: Metrics
    balancer_mode: str
    authorization: Authorization | None = None  # None: no authorizer, every request is allowed

    def pool(self, name: str) -> NodePool:
        return next(pool for pool in self.node_pools if pool.name == name)


def parse_cluster(resource: Mapping) -> ClusterSpec:
    """An OdradekCluster (metadata and spec, as a dict) as a ClusterSpec; a SpecError for the first problem."""
    metadata = _mapping(resource.get("metadata"), "metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not _CLUSTER_NAME.match(name) or len(name) > _DNS_LABEL_MAX:
        raise SpecError(f"metadata.name: expected a DNS label starting with a letter, got {name!r}")
    spec = _mapping(resource.get("spec"), "spec")
    metrics = _parse_metrics(spec.get("metrics"))
    listeners = _parse_listeners(spec.get("listeners"), metrics)
    pools = _parse_pools(spec.get("nodePools"))
    _check_name_lengths(name, pools, listeners)
    rack = spec.get("rack")
    topology_key = None
    if rack is not None:
        topology_key = _mapping(rack, "spec.rack").get("topologyKey")
        if not isinstance(topology_key, str) or not topology_key:
            raise SpecError(f"spec.rack.topologyKey: expected a node label name, got {topology_key!r}")
    balancer = _mapping(spec.get("balancer", {}), "spec.balancer")
    mode = balancer.get("mode", "continuous")
    if mode not in BALANCER_MODES:
        raise SpecError(f"spec.balancer.mode: expected one of {', '.join(BALANCER_MODES)}, got {mode!r}")
    given_image = spec.get("image")
    if given_image is not None and (not isinstance(given_image, str) or not given_image.strip()):
        raise SpecError(f"spec.image: expected an image reference, got {given_image!r}")
    return ClusterSpec(name=name, image=given_image or operator_image.image(), node_pools=pools,
                       listeners=listeners, config=_parse_config(spec.get("config"), "spec.config"),
                       rack_topology_key=topology_key, metrics=metrics, balancer_mode=mode,
                       authorization=_parse_authorization(spec.get("authorization")))


def assign_node_ids(spec: ClusterSpec, previous: Mapping[str, list[int]]) -> dict[str, list[int]]:
    """Each pool's node ids: the ids it had (status.nodeIds), its highest ones dropped when it shrinks, and new
    ids above every id in `previous` or given out here when it grows, pools taken in spec order."""
    owner: dict[int, str] = {}
    for pool_name, ids in previous.items():
        for node_id in ids:
            if not isinstance(node_id, int) or isinstance(node_id, bool) or node_id < 0:
                raise SpecError(f"status.nodeIds.{pool_name}: expected node ids, got {node_id!r}")
            if node_id in owner:
                raise SpecError(f"status.nodeIds: node id {node_id} is in pools {owner[node_id]} and {pool_name}")
            owner[node_id] = pool_name
    next_id = max(owner, default=-1) + 1
    assigned: dict[str, list[int]] = {}
    for pool in spec.node_pools:
        kept = sorted(previous.get(pool.name, ()))[:pool.replicas]
        added = list(range(next_id, next_id + pool.replicas - len(kept)))
        next_id += len(added)
        assigned[pool.name] = kept + added
    return assigned


def _parse_pools(value) -> tuple[NodePool, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("spec.nodePools: expected at least one node pool")
    pools: list[NodePool] = []
    for index, item in enumerate(value):
        path = f"spec.nodePools[{index}]"
        item = _mapping(item, path)
        name = item.get("name")
        if not isinstance(name, str) or not _DNS_LABEL.match(name):
            raise SpecError(f"{path}.name: expected a DNS label, got {name!r}")
        if any(pool.name == name for pool in pools):
            raise SpecError(f"{path}.name: node pool {name} is named twice")
        replicas = item.get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise SpecError(f"{path}.replicas: expected a whole number >= 0, got {replicas!r}")
        roles = item.get("roles")
        if not isinstance(roles, list) or not roles or not set(roles) <= {BROKER, CONTROLLER} \
                or len(set(roles)) != len(roles):
            raise SpecError(f"{path}.roles: expected broker, controller or both, got {roles!r}")
        pools.append(NodePool(name=name, replicas=replicas, roles=tuple(sorted(roles)),
                              storage=_parse_storage(item.get("storage"), f"{path}.storage"),
                              resources=_parse_resources(item.get("resources"), f"{path}.resources"),
                              config=_parse_config(item.get("config"), f"{path}.config")))
    for role in (CONTROLLER, BROKER):
        having = [pool for pool in pools if role in pool.roles]
        if not having:
            raise SpecError(f"spec.nodePools: no node pool has the {role} role")
        if sum(pool.replicas for pool in having) == 0:
            raise SpecError(f"spec.nodePools: the {role} pools ({', '.join(p.name for p in having)}) "
                            "have 0 replicas; a cluster needs at least one " + role)
    return tuple(pools)


def _parse_storage(value, path: str) -> Storage:
    value = _mapping(value, path)
    size = value.get("size")
    if not isinstance(size, str) or not _QUANTITY.match(size):
        raise SpecError(f"{path}.size: expected a quantity such as 10Gi, got {size!r}")
    storage_class = value.get("class")
    if storage_class is not None and (not isinstance(storage_class, str) or not storage_class):
        raise SpecError(f"{path}.class: expected a storage class name, got {storage_class!r}")
    delete_claim = value.get("deleteClaim", False)
    if not isinstance(delete_claim, bool):
        raise SpecError(f"{path}.deleteClaim: expected true or false, got {delete_claim!r}")
    return Storage(size=size, storage_class=storage_class, delete_claim=delete_claim)


def _parse_resources(value, path: str) -> Mapping[str, Mapping[str, str]]:
    if value is None:
        return MappingProxyType({})
    value = _mapping(value, path)
    resources = {}
    for kind, amounts in value.items():
        if kind not in ("requests", "limits"):
            raise SpecError(f"{path}.{kind}: expected requests or limits")
        amounts = _mapping(amounts, f"{path}.{kind}")
        checked = {}
        for resource, amount in amounts.items():
            text = str(amount) if isinstance(amount, int | float) and not isinstance(amount, bool) else amount
            if resource not in ("cpu", "memory") or not isinstance(text, str) or not _QUANTITY.match(text):
                raise SpecError(f"{path}.{kind}.{resource}: expected a cpu or memory quantity, got {amount!r}")
            checked[resource] = text
        resources[kind] = MappingProxyType(checked)
    return MappingProxyType(resources)


def _parse_listeners(value, metrics: Metrics) -> tuple[Listener, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("spec.listeners: expected at least one listener")
    listeners: list[Listener] = []
    for index, item in enumerate(value):
        path = f"spec.listeners[{index}]"
        item = _mapping(item, path)
        name = item.get("name")
        if not isinstance(name, str) or not _LISTENER_NAME.match(name):
            raise SpecError(f"{path}.name: expected up to 11 lowercase letters and digits, got {name!r}")
        if name.upper() in ("CONTROLLER", "REPLICATION"):
            raise SpecError(f"{path}.name: {name} is the name of the operator's own listener")
        if any(listener.name == name for listener in listeners):
            raise SpecError(f"{path}.name: listener {name} is named twice")
        port = item.get("port")
        if isinstance(port, int) and port in RESERVED_PORTS:
            raise SpecError(f"{path}.port: {port} is reserved for {RESERVED_PORTS[port]}")
        if not isinstance(port, int) or isinstance(port, bool) or not LISTENER_PORTS[0] <= port <= LISTENER_PORTS[1]:
            raise SpecError(f"{path}.port: expected a port from {LISTENER_PORTS[0]} to {LISTENER_PORTS[1]}, "
                            f"got {port!r}")
        if metrics.enabled and port == metrics.port:
            raise SpecError(f"{path}.port: {port} is the metrics port")
        clash = next((listener for listener in listeners if listener.port == port), None)
        if clash is not None:
            raise SpecError(f"{path}.port: {port} is also the port of listener {clash.name}")
        kind = item.get("type")
        if kind not in LISTENER_TYPES:
            raise SpecError(f"{path}.type: expected one of {', '.join(LISTENER_TYPES)}, got {kind!r}")
        if kind == "ingress":
            raise SpecError(f"{path}.type: ingress listeners are not supported yet (use nodeport or loadbalancer)")
        tls = item.get("tls", False)
        if not isinstance(tls, bool):
            raise SpecError(f"{path}.tls: expected true or false, got {tls!r}")
        authentication = None
        if item.get("authentication") is not None:
            authentication = _mapping(item["authentication"], f"{path}.authentication").get("type")
            if authentication not in AUTHENTICATION_TYPES:
                raise SpecError(f"{path}.authentication.type: expected one of {', '.join(AUTHENTICATION_TYPES)}, "
                                f"got {authentication!r}")
            if authentication == "tls" and not tls:
                raise SpecError(f"{path}.authentication.type: tls (client certificates) needs tls: true")
        listeners.append(Listener(name=name, port=port, type=kind, tls=tls, authentication=authentication))
    return tuple(listeners)


def _parse_authorization(value) -> Authorization | None:
    if value is None:
        return None
    value = _mapping(value, "spec.authorization")
    kind = value.get("type")
    if kind not in AUTHORIZATION_TYPES:
        raise SpecError(f"spec.authorization.type: expected one of {', '.join(AUTHORIZATION_TYPES)}, got {kind!r}")
    names = value.get("superUsers", [])
    if not isinstance(names, list):
        raise SpecError(f"spec.authorization.superUsers: expected a list of user names, got {names!r}")
    for index, name in enumerate(names):
        # super.users separates principals with ";"; the operator writes the "User:" itself
        if not isinstance(name, str) or not name.strip() or ";" in name or name.startswith("User:"):
            raise SpecError(f"spec.authorization.superUsers[{index}]: expected a user name without ';' or a "
                            f"User: prefix, got {name!r}")
    return Authorization(super_users=tuple(names))


def _parse_metrics(value) -> Metrics:
    if value is None:
        return Metrics()
    value = _mapping(value, "spec.metrics")
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise SpecError(f"spec.metrics.enabled: expected true or false, got {enabled!r}")
    port = value.get("port", DEFAULT_METRICS_PORT)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise SpecError(f"spec.metrics.port: expected a port number, got {port!r}")
    if enabled and port in RESERVED_PORTS:
        raise SpecError(f"spec.metrics.port: {port} is reserved for {RESERVED_PORTS[port]}")
    return Metrics(enabled=enabled, port=port)


def _parse_config(value, path: str) -> Mapping[str, str]:
    if value is None:
        return MappingProxyType({})
    value = _mapping(value, path)
    config = {}
    for key, setting in value.items():
        if not isinstance(key, str) or not key or re.search(r"[\s=:#!]", key):
            raise SpecError(f"{path}: {key!r} is not a setting name")
        owner = _owned(key)
        if owner:
            raise SpecError(f"{path}.{key}: {owner}")
        if isinstance(setting, bool):
            text = "true" if setting else "false"
        elif isinstance(setting, int | float | str):
            text = str(setting)
        else:
            raise SpecError(f"{path}.{key}: expected a string, number or boolean, got {setting!r}")
        if "\n" in text or "\r" in text or text.endswith("\\"):
            raise SpecError(f"{path}.{key}: a value cannot hold a line break or end with a backslash")
        config[key] = text
    return MappingProxyType(config)


def _owned(key: str) -> str | None:
    """Why spec.config cannot set `key`, when it cannot."""
    if key in OPERATOR_OWNED:
        return f"the operator sets {key} itself"
    if key.startswith(OPERATOR_LISTENER_PREFIXES):
        return f"the operator sets the {key.split('.')[2]} listener's settings itself"
    if unprefixed(key) in PRINCIPAL_SETTINGS:
        return f"{unprefixed(key)} stays the default: super.users and OdradekUsers' ACLs name the principals it makes"
    return None


def _check_name_lengths(cluster: str, pools: tuple[NodePool, ...], listeners: tuple[Listener, ...]) -> None:
    """Pod and Service names are DNS labels: `<cluster>-<pool>-<id>[-<listener>]` must fit in 63 characters."""
    suffix = max((len(listener.name) + 1 for listener in listeners if listener.is_external), default=0)
    for index, pool in enumerate(pools):
        longest = len(cluster) + 1 + len(pool.name) + 1 + _MAX_NODE_ID_DIGITS + suffix
        if longest > _DNS_LABEL_MAX:
            raise SpecError(f"spec.nodePools[{index}].name: {cluster}-{pool.name}-<node id>"
                            f"{'-<listener>' if suffix else ''} can be {longest} characters, more than "
                            f"{_DNS_LABEL_MAX}; shorten the cluster or pool name")
    for listener in listeners:
        if listener.is_external and len(f"{cluster}-{listener.name}-bootstrap") > _DNS_LABEL_MAX:
            raise SpecError(f"spec.listeners: {cluster}-{listener.name}-bootstrap is longer than "
                            f"{_DNS_LABEL_MAX} characters; shorten the cluster or listener name")


def _mapping(value, path: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise SpecError(f"{path}: expected an object, got {value!r}")
    return value
