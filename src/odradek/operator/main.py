"""The operator process: kopf handlers for OdradekCluster resources in one namespace, and run_operator() to run them.

Every handler (create, resume, a spec update, a periodic timer) does the same thing: read the resource afresh,
reconcile it (cluster_handler.reconcile_cluster) and write the status when it changed. The timer is what notices
Pods becoming ready or going away; passes of one cluster never overlap (a lock per cluster). Deleting a cluster
runs delete_cluster behind kopf's finalizer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping

import kopf

from odradek.operator.cluster_handler import delete_cluster, reconcile_cluster
from odradek.operator.kube import CLUSTERS, Connection, Kube, KubeError

GROUP, VERSION = CLUSTERS.api_version.split("/")
PLURAL = CLUSTERS.plural
FINALIZER = "odradek.io/operator"
ANNOTATION_PREFIX = "odradek.io"  # kopf's progress and last-handled spec, in annotations under this prefix
RECONCILE_INTERVAL_S = 10.0
RECONCILE_IDLE_S = 5.0

log = logging.getLogger(__name__)


def build_registry(server: str | None = None, *, reconcile_interval: float = RECONCILE_INTERVAL_S,
                   reconcile_idle: float = RECONCILE_IDLE_S) -> kopf.OperatorRegistry:
    """The handlers, on a registry of their own. `server`: the API server's URL (no TLS checks, no token: a test
    server or `kubectl proxy`); None for the Pod's service account."""
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
            try:
                resource = await memo.kube.get(CLUSTERS, namespace, name)
            except KubeError as e:
                if e.status == 404:
                    return
                raise
            if resource["metadata"].get("deletionTimestamp"):
                return  # on_delete's turn
            status = await reconcile_cluster(memo.kube, namespace, resource)
            old = resource.get("status") or {}
            if any(old.get(key) != value for key, value in status.items()):
                await memo.kube.merge_patch(CLUSTERS, namespace, name, {"status": status}, subresource="status")

    @kopf.on.delete(GROUP, VERSION, PLURAL, backoff=retry, registry=registry)
    async def on_delete(namespace: str, name: str, body: Mapping, memo: kopf.Memo, **_) -> None:
        async with _lock(memo, namespace, name):
            await delete_cluster(memo.kube, namespace, name, body)

    return registry


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # The operator serves exactly the namespaces it is given: kopf's scanning of namespaces (to follow globs and
    # namespaces coming and going) is not needed, and would need the right to list namespaces.
    settings.scanning.disabled = True
    settings.persistence.finalizer = FINALIZER
    # Annotations only: the CRD's status schema has no field for kopf's own records.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX)
    return settings


def run_operator(namespace: str, server: str | None = None, stop_flag: threading.Event | None = None,
                 ready_flag: threading.Event | None = None, *, reconcile_interval: float = RECONCILE_INTERVAL_S,
                 reconcile_idle: float = RECONCILE_IDLE_S) -> None:
    """Run the operator on `namespace` until stop_flag is set (or SIGINT/SIGTERM in the main thread), on an event
    loop of its own: kopf takes every task started on its loop for its own and cancels them when it stops."""
    registry = build_registry(server, reconcile_interval=reconcile_interval, reconcile_idle=reconcile_idle)
    asyncio.run(kopf.operator(registry=registry, settings=operator_settings(), standalone=True, clusterwide=False,
                              namespaces=[namespace], memo=kopf.Memo(), stop_flag=stop_flag, ready_flag=ready_flag))


def _lock(memo: kopf.Memo, namespace: str, name: str) -> asyncio.Lock:
    return memo.locks.setdefault((namespace, name), asyncio.Lock())
