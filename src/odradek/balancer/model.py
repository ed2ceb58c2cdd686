"""The balancer's load model: nodes with their capacities, partitions with their load, and the load each node
carries as derived from them.

The model is plain, immutable data built by the caller (the controller from its metadata image and the
nodes' own numbers, a tool from metrics); it does no I/O and keeps no history. In particular it does not
window: `Partition.bytes_in`, `bytes_out`, `produce_requests` and `fetch_requests` are averages the caller
has already taken over a window, for example the last hour, so that a burst of traffic does not make the
balancer move data. Sizes on disk are current values.

How a partition loads its nodes:

- every replica holds `size_bytes` on disk, in one of its node's log dirs;
- the leader receives the producers' `bytes_in`, and every follower fetches the same bytes from the leader,
  so each replica adds `bytes_in` to its node's network in;
- the leader sends `bytes_out` to consumers and `bytes_in` once to each follower, so its node's network out
  grows by `bytes_out + bytes_in * (replication factor - 1)`; a follower sends nothing;
- the leader serves the produce and consumer fetch requests (`produce_requests`, `fetch_requests`).

A leader on a dead node counts as no leader: the controller elects another in-sync replica when a node
dies, and the caller passes what it elected (or None when the partition is offline).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class BalancerError(Exception):
    """The balancer refuses: an inconsistent model or options, or an operation the cluster cannot carry out
    (for example nodes to remove whose replicas the remaining nodes cannot hold). The message is one line."""


@dataclass(frozen=True)
class LogDir:
    """One of a node's log directories. capacity_bytes None: unknown, treated as unlimited."""

    path: str
    capacity_bytes: int | None = None


@dataclass(frozen=True)
class Node:
    """A node that may hold replicas.

    being_removed: the node is being drained (it may hold no replica once the proposal is carried out);
    leadership_excluded: the node is demoted (it may lead no partition another in-sync replica can lead).
    The proposal options can add nodes to both sets for one proposal. Capacities of None are unlimited;
    network capacities are bytes/s.
    """

    id: int
    rack: str | None = None
    alive: bool = True
    being_removed: bool = False
    leadership_excluded: bool = False
    log_dirs: tuple[LogDir, ...] = (LogDir(""),)
    network_in_capacity: float | None = None
    network_out_capacity: float | None = None
    max_replicas: int | None = None

    @property
    def disk_capacity_bytes(self) -> int | None:
        """The sum of the log dirs' capacities; None when any of them is unknown."""
        if any(d.capacity_bytes is None for d in self.log_dirs):
            return None
        return sum(d.capacity_bytes for d in self.log_dirs)


@dataclass(frozen=True)
class Partition:
    """A partition's placement and load. replicas is ordered: the first is the preferred leader.

    in_sync None means every replica is in sync. log_dirs, when given, names each replica's log dir (in the
    order of replicas); empty means each replica lives in its node's first log dir. Rates are windowed
    averages (see the module docstring): bytes_in and bytes_out in bytes/s, requests per second.
    """

    topic: str
    index: int
    replicas: tuple[int, ...]
    leader: int | None
    size_bytes: int = 0
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    produce_requests: float = 0.0
    fetch_requests: float = 0.0
    in_sync: tuple[int, ...] | None = None
    log_dirs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def in_sync_replicas(self) -> tuple[int, ...]:
        return self.replicas if self.in_sync is None else self.in_sync

    @property
    def leader_network_out(self) -> float:
        """What the leader sends: the consumers' bytes and one copy of the produced bytes per follower."""
        return leader_network_out(self.bytes_in, self.bytes_out, len(self.replicas))


def leader_network_out(bytes_in: float, bytes_out: float, replication_factor: int) -> float:
    return bytes_out + bytes_in * (replication_factor - 1)


@dataclass(frozen=True)
class NodeLoad:
    """The load one node carries, derived from the partitions (see the module docstring for how)."""

    node: int
    replicas: int
    leaders: int
    disk_bytes: int
    disk_capacity_bytes: int | None
    log_dir_bytes: Mapping[str, int]
    network_in: float
    network_out: float
    leader_bytes_in: float
    produce_requests: float
    fetch_requests: float
    topic_replicas: Mapping[str, int]

    @property
    def disk_ratio(self) -> float | None:
        """Bytes on disk over capacity; None when the capacity is unknown."""
        if not self.disk_capacity_bytes:
            return None
        return self.disk_bytes / self.disk_capacity_bytes


@dataclass(frozen=True)
class ClusterModel:
    """Nodes (dead ones included, with alive=False) and every partition. Checked on construction: a model
    that names an unknown node or log dir, repeats a replica or a partition, or has a leader or in-sync
    replica outside the replicas raises BalancerError."""

    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    _nodes_by_id: Mapping[int, Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "partitions", tuple(self.partitions))
        by_id: dict[int, Node] = {}
        for node in self.nodes:
            if node.id in by_id:
                raise BalancerError(f"node {node.id} appears twice in the model")
            if not node.log_dirs:
                raise BalancerError(f"node {node.id} has no log dir")
            by_id[node.id] = node
        object.__setattr__(self, "_nodes_by_id", by_id)
        seen: set[tuple[str, int]] = set()
        for p in self.partitions:
            if (p.topic, p.index) in seen:
                raise BalancerError(f"partition {p.name} appears twice in the model")
            seen.add((p.topic, p.index))
            if not p.replicas or len(set(p.replicas)) != len(p.replicas):
                raise BalancerError(f"partition {p.name} has replicas {list(p.replicas)}: expected distinct nodes")
            for replica in p.replicas:
                if replica not in by_id:
                    raise BalancerError(f"partition {p.name} has a replica on node {replica}, not in the model")
            if p.leader is not None and p.leader not in p.replicas:
                raise BalancerError(f"partition {p.name} has leader {p.leader}, not one of its replicas")
            if not set(p.in_sync_replicas) <= set(p.replicas):
                raise BalancerError(f"partition {p.name} has in-sync replicas outside its replicas")
            if p.log_dirs:
                if len(p.log_dirs) != len(p.replicas):
                    raise BalancerError(f"partition {p.name} names {len(p.log_dirs)} log dirs for "
                                        f"{len(p.replicas)} replicas")
                for replica, path in zip(p.replicas, p.log_dirs, strict=True):
                    if all(d.path != path for d in by_id[replica].log_dirs):
                        raise BalancerError(f"partition {p.name}: node {replica} has no log dir {path!r}")

    def node(self, node_id: int) -> Node:
        return self._nodes_by_id[node_id]

    def log_dir_of(self, partition: Partition, position: int) -> str:
        """The log dir holding partition.replicas[position]."""
        if partition.log_dirs:
            return partition.log_dirs[position]
        return self._nodes_by_id[partition.replicas[position]].log_dirs[0].path

    def node_loads(self) -> dict[int, NodeLoad]:
        """Every node's load, by node id (in id order)."""
        replicas = {n.id: 0 for n in self.nodes}
        leaders = dict(replicas)
        dir_bytes = {n.id: {d.path: 0 for d in n.log_dirs} for n in self.nodes}
        network_in = {n.id: 0.0 for n in self.nodes}
        network_out, leader_bytes_in = dict(network_in), dict(network_in)
        produce_requests, fetch_requests = dict(network_in), dict(network_in)
        topic_replicas: dict[int, dict[str, int]] = {n.id: {} for n in self.nodes}
        for p in self.partitions:
            leader = p.leader if p.leader is not None and self._nodes_by_id[p.leader].alive else None
            for position, node in enumerate(p.replicas):
                replicas[node] += 1
                dir_bytes[node][self.log_dir_of(p, position)] += p.size_bytes
                network_in[node] += p.bytes_in
                topic_replicas[node][p.topic] = topic_replicas[node].get(p.topic, 0) + 1
            if leader is not None:
                leaders[leader] += 1
                network_out[leader] += p.leader_network_out
                leader_bytes_in[leader] += p.bytes_in
                produce_requests[leader] += p.produce_requests
                fetch_requests[leader] += p.fetch_requests
        return {
            n.id: NodeLoad(
                node=n.id, replicas=replicas[n.id], leaders=leaders[n.id],
                disk_bytes=sum(dir_bytes[n.id].values()), disk_capacity_bytes=n.disk_capacity_bytes,
                log_dir_bytes=dir_bytes[n.id], network_in=network_in[n.id], network_out=network_out[n.id],
                leader_bytes_in=leader_bytes_in[n.id], produce_requests=produce_requests[n.id],
                fetch_requests=fetch_requests[n.id], topic_replicas=dict(sorted(topic_replicas[n.id].items())),
            )
            for n in sorted(self.nodes, key=lambda n: n.id)
        }
