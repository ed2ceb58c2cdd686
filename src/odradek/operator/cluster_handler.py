"""Reconciling an OdradekCluster: its Kubernetes objects made to match render(), and the status to write back.

One pass reads what exists (every object labelled for the cluster), creates what is missing, patches what drifted
(ConfigMaps' data, Services' and the PodDisruptionBudget's spec), deletes what no node needs any more, and
reports. A Pod is never patched: one whose configuration hash differs waits for a rolling restart, reported as a
RestartPending warning. Nothing relies on ownerReference garbage collection (the objects carry them for real
clusters): removed nodes and deleted clusters are cleaned up here.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping

from odradek.operator.cluster_spec import SpecError, assign_node_ids, parse_cluster
from odradek.operator.kube import (
    CLAIMS,
    CONFIG_MAPS,
    DISRUPTION_BUDGETS,
    PODS,
    SERVICE_ACCOUNTS,
    SERVICES,
    AlreadyExists,
    Kube,
    Resource,
    resource_of,
)
from odradek.operator.render import (
    CLUSTER_LABEL,
    CONFIG_HASH_ANNOTATION,
    DELETE_CLAIM_ANNOTATION,
    NODE_ID_LABEL,
    bootstrap_service_name,
    render,
)

log = logging.getLogger(__name__)

# Every kind of object a cluster has, in the order they are created (a Pod's ConfigMap and claim before it).
OWNED = (SERVICE_ACCOUNTS, SERVICES, DISRUPTION_BUDGETS, CONFIG_MAPS, CLAIMS, PODS)
# Kinds patched in place when they drift: the part of the object the operator owns.
_PATCHED = {CONFIG_MAPS: "data", SERVICES: "spec", DISRUPTION_BUDGETS: "spec"}


async def reconcile_cluster(kube: Kube, namespace: str, resource: Mapping) -> dict:
    """Make the cluster's objects match its spec; the status to write (the whole status, not a patch)."""
    old_status = resource.get("status") or {}
    generation = resource.get("metadata", {}).get("generation")
    status: dict = {key: old_status[key] for key in ("clusterId", "nodeIds") if key in old_status}
    if generation is not None:
        status["observedGeneration"] = generation
    try:
        spec = parse_cluster(resource)
        node_ids = assign_node_ids(spec, old_status.get("nodeIds") or {})
    except SpecError as e:
        status["conditions"] = _conditions(old_status, [("NotReady", "InvalidSpec", str(e))])
        return status
    cluster_id = old_status.get("clusterId") or new_cluster_id()
    status |= {"clusterId": cluster_id, "nodeIds": node_ids}

    desired = render(spec, node_ids, cluster_id, namespace)
    for obj in desired:
        _adopt(obj, resource)
    existing = await _existing(kube, namespace, spec.name)
    wanted = {(resource_of(obj), obj["metadata"]["name"]) for obj in desired}
    for (kind, name), obj in existing.items():
        if (kind, name) not in wanted and not obj["metadata"].get("deletionTimestamp"):
            if kind == CLAIMS and _annotation(obj, DELETE_CLAIM_ANNOTATION) != "true":
                continue  # a removed node's data stays unless its pool said deleteClaim: true
            log.info("cluster %s/%s: deleting %s %s", namespace, spec.name, kind.plural, name)
            await kube.delete(kind, namespace, name)

    restart_pending: list[int] = []
    ready = 0
    for obj in desired:
        kind, name = resource_of(obj), obj["metadata"]["name"]
        current = existing.get((kind, name))
        if current is None:
            log.info("cluster %s/%s: creating %s %s", namespace, spec.name, kind.plural, name)
            try:
                await kube.create(obj)
            except AlreadyExists:
                pass  # created since it was listed (another pass, or a Pod still terminating)
            continue
        if kind == PODS:
            if _annotation(current, CONFIG_HASH_ANNOTATION) != _annotation(obj, CONFIG_HASH_ANNOTATION):
                restart_pending.append(int(obj["metadata"]["labels"][NODE_ID_LABEL]))
            if _pod_ready(current):
                ready += 1
        elif kind == CLAIMS:
            wanted_flag = _annotation(obj, DELETE_CLAIM_ANNOTATION)
            if _annotation(current, DELETE_CLAIM_ANNOTATION) != wanted_flag:
                await kube.merge_patch(kind, namespace, name,
                                       {"metadata": {"annotations": {DELETE_CLAIM_ANNOTATION: wanted_flag}}})
        elif kind in _PATCHED:
            part = _PATCHED[kind]
            if not _contains(current.get(part) or {}, obj[part]):
                log.info("cluster %s/%s: patching %s %s", namespace, spec.name, kind.plural, name)
                patch = dict(obj[part])
                if kind == CONFIG_MAPS:  # a merge patch keeps keys it does not name: drop stale ones
                    patch |= {key: None for key in current.get("data") or {} if key not in patch}
                await kube.merge_patch(kind, namespace, name, {part: patch})

    total = sum(len(ids) for ids in node_ids.values())
    status["readyNodes"] = ready
    status["listeners"] = [
        {"name": listener.name, "type": listener.type,
         "bootstrapServers": f"{bootstrap_service_name(spec.name)}.{namespace}.svc:{listener.port}"}
        for listener in spec.listeners if listener.type == "internal"]
    wanted_conditions = ([("Ready", "AllNodesReady", f"{ready} of {total} nodes ready")] if ready == total else
                         [("NotReady", "NodesNotReady", f"{ready} of {total} nodes ready")])
    if restart_pending:
        ids = ", ".join(str(node_id) for node_id in sorted(restart_pending))
        wanted_conditions.append(("Warning", "RestartPending",
                                  f"RestartPending: nodes {ids} run an older configuration and wait for a "
                                  "rolling restart"))
    status["conditions"] = _conditions(old_status, wanted_conditions)
    return status


async def delete_cluster(kube: Kube, namespace: str, name: str, resource: Mapping) -> None:
    """Delete every object labelled for the cluster; its PersistentVolumeClaims only where the pool's
    storage.deleteClaim is true (the claim's annotation says so, as render() wrote it)."""
    for (kind, obj_name), obj in (await _existing(kube, namespace, name)).items():
        if kind == CLAIMS and _annotation(obj, DELETE_CLAIM_ANNOTATION) != "true":
            continue
        log.info("cluster %s/%s deleted: deleting %s %s", namespace, name, kind.plural, obj_name)
        await kube.delete(kind, namespace, obj_name)


def new_cluster_id() -> str:
    """A cluster id as `odradek storage random-uuid` prints it: never starting with '-', which the init
    container's `--cluster-id <id>` would read as an option."""
    from odradek.broker.node import new_cluster_id as random_id

    cluster_id = random_id()
    while cluster_id.startswith("-"):
        cluster_id = random_id()
    return cluster_id


async def _existing(kube: Kube, namespace: str, cluster: str) -> dict[tuple[Resource, str], dict]:
    found = {}
    for kind in OWNED:
        for obj in await kube.list(kind, namespace, {CLUSTER_LABEL: cluster}):
            found[kind, obj["metadata"]["name"]] = obj
    return found


def _adopt(obj: dict, owner: Mapping) -> None:
    """An ownerReference to the OdradekCluster, so that a real cluster's garbage collector removes what this
    operator misses; not on claims kept after deletion (deleteClaim false), or the collector would delete them."""
    uid = owner.get("metadata", {}).get("uid")
    if uid is None or (obj["kind"] == "PersistentVolumeClaim" and _annotation(obj, DELETE_CLAIM_ANNOTATION) != "true"):
        return
    obj["metadata"]["ownerReferences"] = [{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"], "uid": uid,
        "controller": True, "blockOwnerDeletion": True}]


def _annotation(obj: Mapping, key: str) -> str | None:
    return (obj.get("metadata", {}).get("annotations") or {}).get(key)


def _pod_ready(pod: Mapping) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _contains(current: object, wanted: object) -> bool:
    """Whether `current` has everything `wanted` says: the API server adds defaults (a Service's clusterIP, a
    port's nodePort), so only the fields the operator sets are compared."""
    if isinstance(wanted, Mapping):
        return isinstance(current, Mapping) and all(k in current and _contains(current[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (isinstance(current, list) and len(current) == len(wanted)
                and all(_contains(c, w) for c, w in zip(current, wanted, strict=True)))
    return current == wanted


def _conditions(old_status: Mapping, wanted: list[tuple[str, str, str]]) -> list[dict]:
    """Conditions of status True, Strimzi's way (Ready, or NotReady with a reason; Warning beside either);
    lastTransitionTime kept from the previous status while a condition does not change."""
    previous = {c.get("type"): c for c in old_status.get("conditions") or []}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = []
    for type_, reason, message in wanted:
        condition = {"type": type_, "status": "True", "reason": reason, "message": message}
        before = previous.get(type_, {})
        same = all(before.get(k) == condition[k] for k in ("status", "reason"))
        condition["lastTransitionTime"] = before.get("lastTransitionTime", now) if same else now
        conditions.append(condition)
    return conditions
