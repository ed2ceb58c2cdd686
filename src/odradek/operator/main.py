"""The operator process: kopf handlers for OdradekCluster, OdradekTopic, OdradekUser and OdradekRebalance
resources in one namespace, and run_operator() to run them.

Every handler (create, resume, a spec update, a periodic timer) does the same thing: read the resource afresh,
reconcile it (cluster_handler, topic_handler, user_handler, rebalance_handler) and write the status when it
changed. The timer is what notices Pods becoming ready or going away, and a rebalance's approval annotation;
passes over one resource never overlap (a lock each). Deleting a cluster, topic or user runs its delete handler
behind kopf's finalizer. Topics, users and rebalances reach their cluster (the odradek.io/cluster label) through
its brokers' REPLICATION listener.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping

import kopf

from odradek.operator.certificates import operator_secret_name
from odradek.operator.cluster_handler import ClusterMemory, delete_cluster, reconcile_cluster
from odradek.operator.cluster_spec import SpecError, parse_cluster
from odradek.operator.connection import AddressMap, admin_properties, operator_tls
from odradek.operator.kube import (
    CLUSTERS,
    REBALANCES,
    SECRETS,
    TOPICS,
    USERS,
    Connection,
    Kube,
    KubeError,
    Resource,
)
from odradek.operator.rebalance_handler import ANNOTATION as REBALANCE_ANNOTATION
from odradek.operator.rebalance_handler import reconcile_rebalance
from odradek.operator.render import CLUSTER_LABEL
from odradek.operator.status import status_conditions
from odradek.operator.topic_handler import delete_topic, reconcile_topic
from odradek.operator.user_handler import delete_user, reconcile_user

GROUP, VERSION = CLUSTERS.api_version.split("/")
PLURAL = CLUSTERS.plural
FINALIZER = "odradek.io/operator"
ANNOTATION_PREFIX = "odradek.io"  # kopf's progress and last-handled spec, in annotations under this prefix
RECONCILE_INTERVAL_S = 10.0
RECONCILE_IDLE_S = 5.0

log = logging.getLogger(__name__)


def build_registry(server: str | None = None, *, reconcile_interval: float = RECONCILE_INTERVAL_S,
                   reconcile_idle: float = RECONCILE_IDLE_S,
                   address_map: AddressMap | None = None) -> kopf.OperatorRegistry:
    """The handlers, on a registry of their own. `server`: the API server's URL (no TLS checks, no token: a test
    server or `kubectl proxy`); None for the Pod's service account. `address_map`: where the nodes' addresses
    are reached (tests running every node on one machine); None: their DNS names."""
    registry = kopf.OperatorRegistry()
    retry = min(reconcile_interval, RECONCILE_INTERVAL_S)  # a failed pass is retried this much later

    @kopf.on.login(registry=registry)
    def login(**kwargs) -> kopf.ConnectionInfo | None:
        if server is not None:
            return kopf.ConnectionInfo(server=server, insecure=True)
        return kopf.login_with_service_account(**kwargs)

    @kopf.on.startup(registry=registry)
    async def startup(memo: kopf.Memo, **_) -> None:
        memo.kube = Kube(Connection(server=server, insecure=True) if server is not None else Connection.in_cluster())
        memo.locks = {}
        memo.clusters = {}  # (namespace, name) -> ClusterMemory

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_) -> None:
        await memo.kube.close()

    @kopf.on.create(GROUP, VERSION, PLURAL, backoff=retry, registry=registry)
    @kopf.on.resume(GROUP, VERSION, PLURAL, backoff=retry, registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, field="spec", backoff=retry, registry=registry)
    @kopf.timer(GROUP, VERSION, PLURAL, interval=reconcile_interval, idle=reconcile_idle, backoff=retry,
                registry=registry)
    async def reconcile(namespace: str, name: str, memo: kopf.Memo, **_) -> None:
        async with _lock(memo, namespace, name):
            resource = await _live(memo.kube, CLUSTERS, namespace, name)
            if resource is None:
                return
            memory = memo.clusters.setdefault((namespace, name), ClusterMemory())
            status = await reconcile_cluster(memo.kube, namespace, resource, memory, address_map)
            await _write_status(memo.kube, CLUSTERS, namespace, resource, status)

    @kopf.on.delete(GROUP, VERSION, PLURAL, backoff=retry, registry=registry)
    async def on_delete(namespace: str, name: str, body: Mapping, memo: kopf.Memo, **_) -> None:
        async with _lock(memo, namespace, name):
            await delete_cluster(memo.kube, namespace, name, body)
            memo.clusters.pop((namespace, name), None)

    for kind in (TOPICS, USERS, REBALANCES):
        _register_cluster_resource(registry, kind, retry, reconcile_interval, reconcile_idle, address_map)
    return registry


def _register_cluster_resource(registry: kopf.OperatorRegistry, kind: Resource, retry: float,
                               reconcile_interval: float, reconcile_idle: float,
                               address_map: AddressMap | None) -> None:
    """The handlers of a resource of a cluster (its odradek.io/cluster label): topics, users and rebalances,
    reconciled against that cluster through the operator's admin connection."""
    group, version = kind.api_version.split("/")

    @kopf.on.create(group, version, kind.plural, backoff=retry, registry=registry)
    @kopf.on.resume(group, version, kind.plural, backoff=retry, registry=registry)
    @kopf.on.update(group, version, kind.plural, field="spec", backoff=retry, registry=registry)
    @kopf.timer(group, version, kind.plural, interval=reconcile_interval, idle=reconcile_idle, backoff=retry,
                registry=registry)
    async def reconcile(namespace: str, name: str, memo: kopf.Memo, **_) -> None:
        async with _lock(memo, namespace, f"{kind.plural}/{name}"):
            resource = await _live(memo.kube, kind, namespace, name)
            if resource is None:
                return
            client_config = await _client_config(memo.kube, namespace, resource, address_map)
            if isinstance(client_config, str):
                old = resource.get("status") or {}
                status = {"conditions": status_conditions(old, [("NotReady", "ClusterNotReady", client_config)])}
                await _write_status(memo.kube, kind, namespace, resource, status)
                return
            consumed = False
            if kind == TOPICS:
                others = await memo.kube.list(TOPICS, namespace, {CLUSTER_LABEL: _cluster_of(resource)})
                status = await reconcile_topic(namespace, resource, client_config, others=others)
            elif kind == USERS:
                status = await reconcile_user(memo.kube, namespace, resource, client_config)
            else:
                status, consumed = await reconcile_rebalance(resource, client_config)
            await _write_status(memo.kube, kind, namespace, resource, status)
            if consumed:
                await memo.kube.merge_patch(kind, namespace, name,
                                            {"metadata": {"annotations": {REBALANCE_ANNOTATION: None}}})

    if kind == REBALANCES:
        return  # deleting a rebalance leaves the balancer's execution be, as Strimzi's KafkaRebalance does

    @kopf.on.delete(group, version, kind.plural, backoff=retry, registry=registry)
    async def on_delete(namespace: str, name: str, body: Mapping, memo: kopf.Memo, **_) -> None:
        async with _lock(memo, namespace, f"{kind.plural}/{name}"):
            client_config = await _client_config(memo.kube, namespace, body, address_map)
            if isinstance(client_config, str):
                log.warning("%s %s/%s deleted while its cluster is not ready (%s): nothing removed from it",
                            kind.plural, namespace, name, client_config)
                return
            if kind == TOPICS:
                await delete_topic(body, client_config)
            else:
                await delete_user(memo.kube, namespace, body, client_config)


async def _live(kube: Kube, kind: Resource, namespace: str, name: str) -> dict | None:
    """The resource read afresh, or None when it is gone or being deleted (the delete handler's turn)."""
    try:
        resource = await kube.get(kind, namespace, name)
    except KubeError as e:
        if e.status == 404:
            return None
        raise
    return None if resource["metadata"].get("deletionTimestamp") else resource


def _cluster_of(resource: Mapping) -> str | None:
    return ((resource.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL)


async def _client_config(kube: Kube, namespace: str, resource: Mapping,
                         address_map: AddressMap | None) -> dict[str, str] | str:
    """The admin connection to the resource's cluster, or why there is none yet (one line)."""
    cluster = _cluster_of(resource)
    if not cluster:
        return f"the resource has no {CLUSTER_LABEL} label naming its OdradekCluster"
    try:
        found = await kube.get(CLUSTERS, namespace, cluster)
    except KubeError as e:
        if e.status == 404:
            return f"OdradekCluster {cluster} does not exist"
        raise
    node_ids = (found.get("status") or {}).get("nodeIds")
    try:
        spec = parse_cluster(found)
    except SpecError as e:
        return f"OdradekCluster {cluster} is invalid: {e}"
    if not node_ids:
        return f"OdradekCluster {cluster} has no nodes yet"
    try:
        secret = await kube.get(SECRETS, namespace, operator_secret_name(cluster))
    except KubeError as e:
        if e.status == 404:
            return f"OdradekCluster {cluster} has no certificates yet"
        raise
    return admin_properties(spec, node_ids, namespace, operator_tls(namespace, cluster, secret.get("data") or {}),
                            address_map)


async def _write_status(kube: Kube, kind: Resource, namespace: str, resource: Mapping, status: dict) -> None:
    """Write the whole status when it changed."""
    old = resource.get("status") or {}
    if old == status:
        return
    await kube.merge_patch(kind, namespace, resource["metadata"]["name"], {"status": _replacing(old, status)},
                           subresource="status")


def _replacing(old: Mapping, new: Mapping) -> dict:
    """A merge patch turning `old` into `new`: keys `new` lacks, at any depth, set to null (a merge patch keeps
    what it does not name, and a status keeping a removed pool's node ids would differ from every pass's)."""
    patch = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        patch[key] = _replacing(before, value) if isinstance(value, Mapping) and isinstance(before, Mapping) else value
    return patch


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # The operator serves exactly the namespaces it is given: kopf's scanning of namespaces (to follow globs and
    # namespaces coming and going) is not needed, and would need the right to list namespaces.
    settings.scanning.disabled = True
    settings.persistence.finalizer = FINALIZER
    # A deleted resource's timer ends within a pass; kopf looks whether it has every `cancellation_polling`
    # seconds (60 by default), and only then removes the finalizer: a deletion would wait a minute for nothing.
    settings.background.cancellation_polling = 1.0
    # Annotations only: the CRD's status schema has no field for kopf's own records.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX)
    return settings


def run_operator(namespace: str, server: str | None = None, stop_flag: threading.Event | None = None,
                 ready_flag: threading.Event | None = None, *, reconcile_interval: float = RECONCILE_INTERVAL_S,
                 reconcile_idle: float = RECONCILE_IDLE_S, address_map: AddressMap | None = None) -> None:
    """Run the operator on `namespace` until stop_flag is set (or SIGINT/SIGTERM in the main thread), on an event
    loop of its own: kopf takes every task started on its loop for its own and cancels them when it stops."""
    registry = build_registry(server, reconcile_interval=reconcile_interval, reconcile_idle=reconcile_idle,
                              address_map=address_map)
    asyncio.run(kopf.operator(registry=registry, settings=operator_settings(), standalone=True, clusterwide=False,
                              namespaces=[namespace], memo=kopf.Memo(), stop_flag=stop_flag, ready_flag=ready_flag))


def _lock(memo: kopf.Memo, namespace: str, name: str) -> asyncio.Lock:
    return memo.locks.setdefault((namespace, name), asyncio.Lock())
