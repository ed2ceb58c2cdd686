"""Checks of a placement written independently of the goals' own code: what a proposal must never break,
computed from a ClusterModel directly."""

import math
from collections import Counter

from odradek.balancer import ClusterModel, ProposalOptions

DISK_MAX_RATIO = 0.85  # the default balancer.disk.max.ratio


def hard_breaches(before: ClusterModel, after: ClusterModel, options: ProposalOptions | None = None) -> list[str]:
    """Every way `after` breaks a hard goal or the shape of the partitions in `before`."""
    options = options or ProposalOptions()
    breaches = []
    nodes = {n.id: n for n in after.nodes}
    draining = set(options.remove) | set(options.heal) | {n.id for n in after.nodes if n.being_removed}
    holding = [n for n in after.nodes if n.alive and n.id not in draining]
    rack_sizes = Counter(n.rack if n.rack is not None else f"node {n.id}" for n in holding)
    old = {(p.topic, p.index): p for p in before.partitions}
    for p in after.partitions:
        if len(p.replicas) != len(old[(p.topic, p.index)].replicas):
            breaches.append(f"{p.name} changed replication factor")
        if len(set(p.replicas)) != len(p.replicas):
            breaches.append(f"{p.name} has a node twice: {p.replicas}")
        if p.leader is not None and p.leader not in p.replicas:
            breaches.append(f"{p.name} is led by {p.leader}, not a replica")
        if old[(p.topic, p.index)].leader is not None and p.leader is None:
            breaches.append(f"{p.name} lost its leader")
        if p.leader is not None and p.leader != old[(p.topic, p.index)].leader and p.leader not in p.in_sync_replicas:
            breaches.append(f"{p.name} is led by {p.leader}, not in sync")
        for replica in p.replicas:
            if replica in draining and old[(p.topic, p.index)].leader is not None:
                breaches.append(f"{p.name} still has a replica on draining node {replica}")
        racks = Counter(nodes[r].rack if nodes[r].rack is not None else f"node {r}" for r in p.replicas)
        rf = len(p.replicas)
        if len(rack_sizes) >= rf and max(racks.values()) > 1:
            breaches.append(f"{p.name} has two replicas in one rack: {dict(racks)}")
        elif len(rack_sizes) < rf and min(rack_sizes.values()) * len(rack_sizes) >= rf:
            # equal-enough racks: counts as even as can be
            if max(racks.values()) > math.ceil(rf / len(rack_sizes)) or any(
                    racks.get(rack, 0) < rf // len(rack_sizes) for rack in rack_sizes):
                breaches.append(f"{p.name} is spread unevenly over {len(rack_sizes)} racks: {dict(racks)}")
    loads = after.node_loads()
    for node in after.nodes:
        load = loads[node.id]
        if node.max_replicas is not None and load.replicas > node.max_replicas:
            breaches.append(f"node {node.id} holds {load.replicas} replicas, above {node.max_replicas}")
        for log_dir in node.log_dirs:
            used = load.log_dir_bytes[log_dir.path]
            if log_dir.capacity_bytes is not None and used > DISK_MAX_RATIO * log_dir.capacity_bytes:
                breaches.append(f"node {node.id} dir {log_dir.path} holds {used} of {log_dir.capacity_bytes}")
    return breaches


def count_spread(after: ClusterModel, attribute: str, nodes: set[int] | None = None) -> tuple[int, int]:
    """(fewest, most) replicas or leaders ('replicas'/'leaders') over the given nodes (default: all alive)."""
    loads = after.node_loads()
    chosen = nodes if nodes is not None else {n.id for n in after.nodes if n.alive}
    values = [getattr(loads[n], attribute) for n in chosen]
    return min(values), max(values)
