"""Reconciling an OdradekCluster: its Kubernetes objects made to match render(), and the status to write back.

One pass reads what exists (every object labelled for the cluster), creates what is missing, patches what drifted
(ConfigMaps' data, Services' and the PodDisruptionBudget's spec), deletes what no node needs any more, and
reports. Nothing relies on ownerReference garbage collection (the objects carry them for real clusters): removed
nodes and deleted clusters are cleaned up here.

Three things take more than one pass, each step decided from what the cluster reports (observe.py):
- A rolling restart: a Pod is never patched; one whose configuration hash differs is deleted (and so recreated
  with the new configuration) when rolling.next_step says it is that node's turn, one node at a time.
- Scaling down: a removed broker keeps its Pod until the partition balancer has moved every replica off it
  (a remove_nodes request); a refused request is reported and the node kept.
- Scaling up: a new broker is given load by an add_nodes request once it has registered.
What a pass must remember for the next (which node is restarting, which requests were made) is a ClusterMemory;
an operator restarted mid-way starts with an empty one and asks again, which is safe.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.balancer.control import ControlError
from odradek.balancer.model import BalancerError
from odradek.operator.certificates import desired_secrets, node_certificate_hashes, operator_secret_name
from odradek.operator.cluster_spec import ClusterSpec, Listener, SpecError, assign_node_ids, parse_cluster
from odradek.operator.connection import AddressMap, admin_properties, balancer_call, operator_tls
from odradek.operator.kube import (
    CLAIMS,
    CLUSTER_ROLE_BINDINGS,
    CONFIG_MAPS,
    DISRUPTION_BUDGETS,
    NETWORK_POLICIES,
    NODES,
    PODS,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    AlreadyExists,
    Kube,
    KubeError,
    Resource,
    resource_of,
)
from odradek.operator.observe import Observation, ObserveError, observe
from odradek.operator.render import (
    CERTIFICATE_HASH_ANNOTATION,
    CLUSTER_LABEL,
    CONFIG_HASH_ANNOTATION,
    CONFIG_KEY,
    DELETE_CLAIM_ANNOTATION,
    NODE_ID_LABEL,
    ExternalAddresses,
    Node,
    bootstrap_service_name,
    config_hash,
    nodes,
    rack_binding,
    rack_binding_name,
    render,
)
from odradek.operator.rolling import (
    ClusterState,
    NodeState,
    QuorumState,
    Restart,
    Wait,
    next_step,
    why_not_back,
)
from odradek.operator.status import observed_generation, status_conditions

log = logging.getLogger(__name__)

# Every kind of object a cluster has, in the order they are created (a Pod's ConfigMap and claim before it).
OWNED = (SECRETS, SERVICE_ACCOUNTS, SERVICES, NETWORK_POLICIES, DISRUPTION_BUDGETS, CONFIG_MAPS, CLAIMS, PODS)
# Kinds patched in place when they drift: the part of the object the operator owns.
_PATCHED = {CONFIG_MAPS: "data", SECRETS: "data", SERVICES: "spec", DISRUPTION_BUDGETS: "spec",
            NETWORK_POLICIES: "spec"}
BALANCER_TIMEOUT_S = 20.0  # how long a pass waits for the balancer service's answer to a request
DRAIN_RETRY_S = 60.0
POD_SPEC_HASH_ANNOTATION = "odradek.io/pod-spec-hash"
_NOT_STARTING = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                           "CreateContainerError", "InvalidImageName"})
_NODE_ADDRESS_TYPES = ("ExternalDNS", "ExternalIP", "InternalDNS", "InternalIP", "Hostname")
INSTANCE_LABEL = "app.kubernetes.io/instance"  # on what render() makes; a user's Secret has the cluster label only
# A Pod annotation that differs from the rendered one, and why the node restarts for it.
_RESTART_REASONS = ((CONFIG_HASH_ANNOTATION, "configuration changed"),
                    (CERTIFICATE_HASH_ANNOTATION, "certificates changed"),
                    (POD_SPEC_HASH_ANNOTATION, "pod spec changed"))


@dataclass
class ClusterMemory:
    """What passes over one cluster remember: nodes restarted and not yet back, new brokers not yet given load,
    when removed nodes were last asked to be drained, and which were found empty once."""

    restarting: set[int] = field(default_factory=set)
    filling: set[int] = field(default_factory=set)
    drain_requested_at: float | None = None  # time.monotonic() of the last remove_nodes request
    empty_once: set[int] = field(default_factory=set)  # removed nodes one observation found empty


async def reconcile_cluster(kube: Kube, namespace: str, resource: Mapping, memory: ClusterMemory | None = None,
                            address_map: AddressMap | None = None) -> dict:
    """Make the cluster's objects match its spec, one safe step at a time; the status to write (the whole
    status, not a patch). `address_map`: where the Pods' addresses are reached (tests); None: as they are."""
    memory = memory if memory is not None else ClusterMemory()
    old_status = resource.get("status") or {}
    status: dict = {key: old_status[key] for key in ("clusterId", "nodeIds") if key in old_status}
    status |= observed_generation(resource)
    try:
        spec = parse_cluster(resource)
        node_ids = assign_node_ids(spec, old_status.get("nodeIds") or {})
    except SpecError as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "InvalidSpec", str(e))])
        return status
    cluster_id = old_status.get("clusterId") or new_cluster_id()
    status |= {"clusterId": cluster_id, "nodeIds": node_ids}

    existing = await _existing(kube, namespace, spec.name)
    cluster_nodes = nodes(spec, node_ids)
    external = await _external_addresses(kube, spec, cluster_nodes, existing)
    desired = desired_objects(spec, node_ids, cluster_id, namespace,
                              {name: obj.get("data") or {} for (kind, name), obj in existing.items() if kind == SECRETS},
                              datetime.datetime.now(datetime.UTC), external)
    if (refusal := _quorum_change(existing, desired)) is not None:
        status["conditions"] = status_conditions(old_status, [("NotReady", "InvalidSpec", refusal)])
        return status
    for obj in desired:
        _adopt(obj, resource)
    await _keep_rack_binding(kube, namespace, spec)
    wanted = {(resource_of(obj), obj["metadata"]["name"]) for obj in desired}
    # A removed node keeps its objects (a Pod or ConfigMap says it is still there, running or not) until it holds
    # no replica: the balancer moves them off first.
    desired_ids = {node.node_id for node in cluster_nodes}
    leaving = {node_id for (kind, _), obj in existing.items() if kind in (PODS, CONFIG_MAPS)
               and (node_id := _node_id(obj)) is not None and node_id not in desired_ids}
    for (kind, name), obj in existing.items():
        if (kind, name) not in wanted and not obj["metadata"].get("deletionTimestamp"):
            if kind == CLAIMS and _annotation(obj, DELETE_CLAIM_ANNOTATION) != "true":
                continue  # a removed node's data stays unless its pool said deleteClaim: true
            if _node_id(obj) in leaving:
                continue
            log.info("cluster %s/%s: deleting %s %s", namespace, spec.name, kind.plural, name)
            await kube.delete(kind, namespace, name)

    pods: dict[int, dict | None] = {}
    unchanged_claims: list[str] = []
    for obj in desired:
        kind, name = resource_of(obj), obj["metadata"]["name"]
        current = existing.get((kind, name))
        if kind == PODS:
            pods[_node_id(obj)] = current
        if current is None:
            log.info("cluster %s/%s: creating %s %s", namespace, spec.name, kind.plural, name)
            try:
                await kube.create(obj)
            except AlreadyExists:
                pass  # created since it was listed (another pass, or a Pod still terminating)
            continue
        if kind == CLAIMS:
            wanted_flag = _annotation(obj, DELETE_CLAIM_ANNOTATION)
            owners = obj["metadata"].get("ownerReferences")
            if _annotation(current, DELETE_CLAIM_ANNOTATION) != wanted_flag or \
                    bool(current["metadata"].get("ownerReferences")) != bool(owners):
                # the owner reference goes with deleteClaim: a kept claim must not be garbage collected
                await kube.merge_patch(kind, namespace, name, {"metadata": {
                    "annotations": {DELETE_CLAIM_ANNOTATION: wanted_flag}, "ownerReferences": owners}})
            if not _claim_matches(current, obj):
                unchanged_claims.append(name)
        elif kind in _PATCHED:
            part = _PATCHED[kind]
            if not _contains(current.get(part) or {}, obj[part]):
                log.info("cluster %s/%s: patching %s %s", namespace, spec.name, kind.plural, name)
                patch = dict(obj[part])
                if part == "data":  # a merge patch keeps keys it does not name: drop stale ones
                    patch |= {key: None for key in current.get("data") or {} if key not in patch}
                await kube.merge_patch(kind, namespace, name, {part: patch})

    wanted_pods = {_node_id(obj): obj for obj in desired if obj["kind"] == "Pod"}
    node_states = []
    for node in cluster_nodes:
        pod = pods[node.node_id]
        if pod is not None and (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded") \
                and not pod["metadata"].get("deletionTimestamp"):
            # a bare Pod that ended (evicted, say) is never started again: the next pass creates it anew
            log.info("cluster %s/%s: deleting ended pod %s", namespace, spec.name, node.name)
            await kube.delete(PODS, namespace, node.name)
            pod = None
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            # going or coming: not ready, and what the roll waits for (it has or gets the configuration wanted)
            node_states.append(NodeState(node.node_id, frozenset(node.pool.roles), ready=False))
            continue
        reasons = tuple(reason for annotation, reason in _RESTART_REASONS
                        if _annotation(pod, annotation) != _annotation(wanted_pods[node.node_id], annotation))
        node_states.append(NodeState(node.node_id, frozenset(node.pool.roles), ready=_pod_ready(pod),
                                     running=not _crash_looping(pod), restart_reasons=reasons))
    ready = sum(1 for node in node_states if node.ready)
    if old_status.get("nodeIds"):  # a running cluster: its new brokers get load (a new cluster's are all new)
        before = old_status["nodeIds"]
        memory.filling |= {node_id for pool in spec.node_pools if pool.is_broker for node_id in node_ids[pool.name]
                           if node_id not in before.get(pool.name, [])}

    warnings: list[tuple[str, str, str]] = []
    if unchanged_claims:
        warnings.append(("Warning", "StorageChangeIgnored",
                         f"StorageChangeIgnored: claims {', '.join(unchanged_claims)} keep their size and class: "
                         "the operator does not resize or move claims"))
    if leaving or memory.restarting or memory.filling or any(n.needs_restart for n in node_states):
        properties = admin_properties(spec, node_ids, namespace, operator_tls(namespace, spec.name, _data_of(desired, operator_secret_name(spec.name))),
                                      address_map)
        try:
            observed: Observation | ObserveError = await observe(properties)
        except ObserveError as e:
            observed = e
        warnings += await _roll(kube, namespace, spec.name, node_states,
                                {node.node_id: node.name for node in nodes(spec, node_ids)}, observed, memory)
        if not isinstance(observed, ObserveError):
            warnings += await _drain(kube, namespace, existing, leaving, observed, properties, memory)
            await _fill(observed, properties, memory)
        elif leaving:
            warnings.append(("Warning", "ScaleDownPending",
                             f"ScaleDownPending: nodes {_ids(leaving)} wait to be drained: {observed}"))

    total = len(node_states)
    status["readyNodes"] = ready
    status["listeners"] = _listener_status(spec, namespace, cluster_nodes, external)
    wanted_conditions = ([("Ready", "AllNodesReady", f"{ready} of {total} nodes ready")] if ready == total else
                         [("NotReady", "NodesNotReady", f"{ready} of {total} nodes ready")])
    status["conditions"] = status_conditions(old_status, wanted_conditions + warnings)
    return status


def desired_objects(spec: ClusterSpec, node_ids: Mapping[str, list[int]], cluster_id: str, namespace: str,
                    secrets: Mapping[str, Mapping[str, str]], now: datetime.datetime,
                    external_addresses: ExternalAddresses | None = None) -> list[dict]:
    """Every object the cluster should have: its certificates' Secrets (from the existing Secrets' data, by
    name), then render()'s objects, each Pod annotated with its certificates' hash and its own spec's hash (a
    new image or new resources restart the node as a new configuration does)."""
    cluster_nodes = nodes(spec, node_ids)
    wanted_secrets = desired_secrets(spec, cluster_nodes, namespace, secrets, now, external_addresses)
    objects = wanted_secrets + render(spec, node_ids, cluster_id, namespace, external_addresses,
                                      certificate_hashes=node_certificate_hashes(wanted_secrets, cluster_nodes))
    for obj in objects:
        if obj["kind"] == "Pod":
            spec_text = json.dumps(obj["spec"], sort_keys=True, separators=(",", ":"))
            obj["metadata"]["annotations"][POD_SPEC_HASH_ANNOTATION] = config_hash(spec_text)
    return objects


def _listener_status(spec: ClusterSpec, namespace: str, cluster_nodes: list[Node],
                     external: Mapping[tuple[int, str], tuple[str, int]]) -> list[dict]:
    """Each listener's bootstrap servers: the bootstrap Service of internal ones; for nodeport and loadbalancer
    listeners every broker's external address, once Kubernetes has given them all (until then the listener is
    left out: a partial list would send clients to brokers they cannot reach)."""
    found = []
    for listener in spec.listeners:
        if listener.type == "internal":
            servers = [f"{bootstrap_service_name(spec.name)}.{namespace}.svc:{listener.port}"]
        else:
            brokers = [node.node_id for node in cluster_nodes if node.pool.is_broker]
            if not brokers or any((node_id, listener.name) not in external for node_id in brokers):
                continue
            servers = [f"{host}:{port}" for host, port in (external[node_id, listener.name] for node_id in brokers)]
        found.append({"name": listener.name, "type": listener.type, "bootstrapServers": ",".join(servers)})
    return found


def _quorum_change(existing: Mapping[tuple[Resource, str], dict], desired: list[dict]) -> str | None:
    """Why the spec cannot be applied when it changes the controllers: the metadata quorum's voters are static
    (controller.quorum.voters), and nodes restarted with another voter set could elect two leaders. The voters
    are compared by node id: the addresses may change with the operator's version."""
    running = {_voter_ids(obj.get("data") or {}) for (kind, _), obj in existing.items() if kind == CONFIG_MAPS}
    running.discard(())
    wanted = {_voter_ids(obj["data"]) for obj in desired if obj["kind"] == "ConfigMap"}
    if not running or running == wanted:
        return None
    before, after = (", ".join(map(str, ids)) for ids in (sorted(running)[0], sorted(wanted)[0]))
    return (f"spec.nodePools: the controllers cannot change once the cluster runs (the metadata quorum's voters "
            f"are static): nodes {before} are the voters, the spec asks for {after}")


def _voter_ids(config_map_data: Mapping[str, str]) -> tuple[int, ...]:
    for line in config_map_data.get(CONFIG_KEY, "").splitlines():
        if line.startswith("controller.quorum.voters="):
            return tuple(sorted(int(entry.partition("@")[0]) for entry in line.partition("=")[2].split(",")))
    return ()


async def _external_addresses(kube: Kube, spec: ClusterSpec, cluster_nodes: list[Node],
                              existing: Mapping[tuple[Resource, str], dict]) -> dict[tuple[int, str], tuple[str, int]]:
    """Where clients outside Kubernetes reach each broker's nodeport and loadbalancer listeners, as far as
    Kubernetes has said yet: a load balancer's ingress hostname or IP, or the address of the Kubernetes node the
    Pod runs on with the Service's node port. A broker without one yet advertises its DNS name there."""
    found = {}
    for node in cluster_nodes:
        for listener in spec.listeners:
            service = existing.get((SERVICES, f"{node.name}-{listener.name}"))
            if service is None:
                continue
            if listener.type == "loadbalancer":
                ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
                host = next((i.get("hostname") or i.get("ip") for i in ingress if i.get("hostname") or i.get("ip")),
                            None)
                if host:
                    found[node.node_id, listener.name] = (host, listener.port)
            elif listener.type == "nodeport":
                node_port = next((p.get("nodePort") for p in (service.get("spec") or {}).get("ports") or []), None)
                pod = existing.get((PODS, node.name))
                host = await _kubernetes_node_address(kube, ((pod or {}).get("spec") or {}).get("nodeName"))
                if host is None:  # not scheduled (yet, or again while it restarts): the address it has stays
                    host = _advertised_host(existing.get((CONFIG_MAPS, f"{node.name}-config")), listener)
                if node_port and host:
                    found[node.node_id, listener.name] = (host, node_port)
    return found


def _advertised_host(config_map: Mapping | None, listener: Listener) -> str | None:
    """The host a node's configuration advertises on an external listener, unless it is its DNS name (the
    fallback before Kubernetes gave an address)."""
    text = ((config_map or {}).get("data") or {}).get(CONFIG_KEY, "")
    for line in text.splitlines():
        if line.startswith("advertised.listeners="):
            for entry in line.partition("=")[2].split(","):
                name, _, address = entry.partition("://")
                host = address.rpartition(":")[0]
                if name == listener.listener_name and not host.endswith(".svc"):
                    return host
    return None


async def _kubernetes_node_address(kube: Kube, node_name: str | None) -> str | None:
    """A Kubernetes node's address, in Strimzi's order of preference."""
    if not node_name:
        return None
    try:
        addresses = ((await kube.get(NODES, None, node_name)).get("status") or {}).get("addresses") or []
    except KubeError as e:
        if e.status == 404:
            return None
        raise
    by_type = {a.get("type"): a.get("address") for a in addresses}
    return next((by_type[kind] for kind in _NODE_ADDRESS_TYPES if by_type.get(kind)), None)


async def _roll(kube: Kube, namespace: str, cluster: str, node_states: list[NodeState], pod_names: Mapping[int, str],
                observed: Observation | ObserveError, memory: ClusterMemory) -> list[tuple[str, str, str]]:
    """One step of a rolling restart: delete the Pod of the node whose turn it is (the next pass creates it
    with the new configuration), or say what the roll waits for."""
    by_id = {node.node_id: node for node in node_states}
    # a node asked to restart again (its restart superseded by a newer change) is a candidate, not awaited
    memory.restarting = {i for i in memory.restarting if i in by_id and not by_id[i].needs_restart}
    # not ready and not waiting for a restart: restarted, or new; the roll waits for it either way
    restarting = frozenset(memory.restarting | {n.node_id for n in node_states if not n.ready and not n.needs_restart})
    if isinstance(observed, ObserveError):
        # Nothing is known of partitions or the quorum: only a node that serves nothing may go.
        voters = frozenset(n.node_id for n in node_states if n.is_controller)
        state = ClusterState(tuple(node_states), QuorumState(voters, None), (), restarting)
        down = [n for n in node_states if n.needs_restart and not n.running]
        step = next_step(state) if down else None
        if not isinstance(step, Restart):
            if any(n.needs_restart for n in node_states):
                return [("Warning", "RestartPending", f"RestartPending: nodes {_ids(_pending(node_states))} wait "
                                                      f"for a rolling restart: {observed}")]
            return []
    else:
        state = ClusterState(tuple(node_states), observed.quorum, observed.partitions, restarting)
        memory.restarting = {node_id for node_id in memory.restarting if why_not_back(state, node_id)}
        state = ClusterState(tuple(node_states), observed.quorum, observed.partitions,
                             frozenset(memory.restarting) | (restarting - memory.restarting))
        step = next_step(state)
    if isinstance(step, Restart):
        pod_name = pod_names[step.node_id]
        log.info("cluster %s/%s: restarting node %d (%s)", namespace, cluster, step.node_id, step.reason)
        await kube.delete(PODS, namespace, pod_name)
        memory.restarting.add(step.node_id)
        return [("Warning", "RollingRestart", f"RollingRestart: restarting node {step.node_id} ({step.reason})")]
    if isinstance(step, Wait):
        pending = _pending(node_states)
        if pending:
            return [("Warning", "RestartPending",
                     f"RestartPending: nodes {_ids(pending)} wait for a rolling restart: {step.reason}")]
        return [("Warning", "RollingRestart", f"RollingRestart: {step.reason}")]
    return []


async def _drain(kube: Kube, namespace: str, existing: Mapping[tuple[Resource, str], dict], leaving: set[int],
                 observed: Observation, properties: Mapping[str, str],
                 memory: ClusterMemory) -> list[tuple[str, str, str]]:
    """Removed nodes: deleted once two observations in a row find no replica on them (one broker's metadata can
    lag), else drained by a remove_nodes request to the balancer, asked again only when no execution runs and
    the last request is DRAIN_RETRY_S old."""
    holding = {node_id: observed.replicas_on(node_id) for node_id in sorted(leaving)}
    memory.empty_once &= leaving
    for node_id, replicas in holding.items():
        if replicas:
            memory.empty_once.discard(node_id)
            continue
        if node_id not in memory.empty_once:
            memory.empty_once.add(node_id)
            continue
        memory.empty_once.discard(node_id)
        for (kind, name), obj in existing.items():
            if _node_id(obj) == node_id and not (kind == CLAIMS and _annotation(obj, DELETE_CLAIM_ANNOTATION) != "true"):
                log.info("cluster %s/%s: node %d drained, deleting %s %s", namespace,
                         obj["metadata"]["labels"].get(CLUSTER_LABEL), node_id, kind.plural, name)
                await kube.delete(kind, namespace, name)
    busy = {node_id: replicas for node_id, replicas in holding.items() if replicas}
    if not busy:
        return [("Warning", "ScaleDownPending", f"ScaleDownPending: nodes {_ids(leaving)} are empty and go next")
                ] if memory.empty_once else []
    left = f"nodes {_ids(busy)} hold {sum(len(r) for r in busy.values())} replicas"
    try:
        balancer = await balancer_call(properties, "status")
    except ControlError as e:
        return [("Warning", "ScaleDownPending", f"ScaleDownPending: {left}; the balancer does not answer: {e}")]
    if balancer.progress is not None and balancer.progress.status not in ("done", "stopped"):
        return [("Warning", "ScaleDownPending", f"ScaleDownPending: {left}; the balancer is moving replicas "
                                                f"(execution {balancer.execution.id})")]
    if memory.drain_requested_at is not None and time.monotonic() - memory.drain_requested_at < DRAIN_RETRY_S:
        return [("Warning", "ScaleDownPending", f"ScaleDownPending: {left}; draining through the balancer")]
    memory.drain_requested_at = time.monotonic()
    try:
        await balancer_call(properties, "request", "remove_nodes", sorted(busy), None,
                            timeout_s=BALANCER_TIMEOUT_S, origin="operator")
    except BalancerError as e:  # the others cannot take it: the node is kept, and the reason shown
        return [("Warning", "ScaleDownBlocked", f"ScaleDownBlocked: {left} and cannot be drained: {e}")]
    except ControlError as e:  # no answer yet: the request stays in the balancer's topic, and is looked at again
        return [("Warning", "ScaleDownPending", f"ScaleDownPending: {left}; the balancer has not answered: {e}")]
    return [("Warning", "ScaleDownPending", f"ScaleDownPending: {left}; draining through the balancer")]


async def _fill(observed: Observation, properties: Mapping[str, str], memory: ClusterMemory) -> None:
    """New brokers, once registered: an add_nodes request gives them load (and takes them out of the balancer's
    removed nodes, where an earlier scale-down of the same id left them). Asked again on a later pass when the
    balancer did not answer; a refusal (nothing to move, an execution running) is final: continuous mode fills
    new nodes too."""
    registered = sorted(memory.filling & observed.brokers)
    if not registered:
        return
    try:
        await balancer_call(properties, "request", "add_nodes", registered, None, timeout_s=BALANCER_TIMEOUT_S,
                            origin="operator")
    except ControlError as e:
        log.info("balancer add_nodes %s not answered, asked again later: %s", registered, e)
        return
    except BalancerError as e:
        log.info("balancer add_nodes %s refused: %s", registered, e)
    memory.filling -= set(registered)


def _crash_looping(pod: Mapping) -> bool:
    """A Pod whose containers (or init containers) wait to be started again after failing, or cannot start at
    all: it serves nothing, whatever its phase says (a crash loop keeps phase Running, a failing init Pending)."""
    status = pod.get("status") or {}
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if ((container.get("state") or {}).get("waiting") or {}).get("reason") in _NOT_STARTING:
            return True
    return False


def _pending(node_states: list[NodeState]) -> list[int]:
    return [n.node_id for n in node_states if n.needs_restart]


def _data_of(objects: list[dict], name: str) -> Mapping[str, str]:
    return next(obj["data"] for obj in objects if obj["metadata"]["name"] == name)


def _claim_matches(current: Mapping, wanted: Mapping) -> bool:
    """The claim's size and class are the spec's (a class the spec leaves unset is the cluster's default, which
    the API server fills in)."""
    def storage(claim: Mapping) -> str | None:
        return (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")

    wanted_class = wanted["spec"].get("storageClassName")
    return storage(current) == storage(wanted) and (
        wanted_class is None or (current.get("spec") or {}).get("storageClassName") == wanted_class)


def _ids(node_ids) -> str:
    return ", ".join(str(node_id) for node_id in sorted(node_ids))


def _node_id(obj: Mapping) -> int | None:
    value = (obj.get("metadata", {}).get("labels") or {}).get(NODE_ID_LABEL)
    return int(value) if value is not None else None


async def _keep_rack_binding(kube: Kube, namespace: str, spec: ClusterSpec) -> None:
    """The cluster-scoped ClusterRoleBinding of rack awareness: there exactly while spec.rack is (no owner
    reference can tie a cluster-scoped object to a namespaced one)."""
    binding = rack_binding(spec, namespace)
    name = rack_binding_name(spec.name, namespace)
    if binding is None:
        await kube.delete(CLUSTER_ROLE_BINDINGS, None, name)
        return
    try:
        await kube.get(CLUSTER_ROLE_BINDINGS, None, name)
    except KubeError as e:
        if e.status != 404:
            raise
        log.info("cluster %s/%s: creating clusterrolebindings %s", namespace, spec.name, name)
        with contextlib.suppress(AlreadyExists):
            await kube.create(binding)


async def delete_cluster(kube: Kube, namespace: str, name: str, resource: Mapping) -> None:
    """Delete every object labelled for the cluster, and its rack ClusterRoleBinding; its PersistentVolumeClaims
    only where the pool's storage.deleteClaim is true (the claim's annotation says so, as render() wrote it)."""
    await kube.delete(CLUSTER_ROLE_BINDINGS, None, rack_binding_name(name, namespace))
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
        for obj in await kube.list(kind, namespace, {CLUSTER_LABEL: cluster, INSTANCE_LABEL: cluster}):
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
