"""The optimizer's working copy of a ClusterModel: nodes and partitions by index, loads in per-node arrays,
updated in place by each replica move or leadership change in time proportional to the replication factor.

Goals read it to judge a placement and the optimizer changes it; nothing here decides anything. Rates are
rounded to whole bytes/s here, so that loads added and subtracted in any order give the same totals (the
same state, reached by different paths, compares equal and is judged the same way).

Node roles for one proposal (from the model's flags and the proposal's options):

- may_hold: alive and not being removed: the nodes replicas may move onto, and whose load the distribution
  goals balance;
- may_lead: may_hold and not demoted;
- draining: being removed, or dead and being healed: every replica on it is to move elsewhere;
- frozen: dead and not being healed: its replicas stay where they are and its load counts nowhere.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import IntEnum

from odradek.balancer.model import BalancerError, ClusterModel, leader_network_out

NO_LEADER = -1


class Resource(IntEnum):
    """The per-node loads the goals limit or balance; load[resource][node index]."""

    REPLICAS = 0
    LEADERS = 1
    DISK = 2
    NETWORK_IN = 3
    NETWORK_OUT = 4
    LEADER_BYTES_IN = 5


# Loads that follow leadership: a leadership change moves them without copying data.
LEADERSHIP_RESOURCES = frozenset({Resource.LEADERS, Resource.NETWORK_OUT, Resource.LEADER_BYTES_IN})


class ClusterState:
    def __init__(self, model: ClusterModel, removing: Collection[int] = (), demoting: Collection[int] = (),
                 healing: Collection[int] = ()):
        for name, ids in (("remove", removing), ("demote", demoting), ("heal", healing)):
            unknown = sorted(set(ids) - {n.id for n in model.nodes})
            if unknown:
                raise BalancerError(f"cannot {name} node {unknown[0]}: not in the cluster")
        for node_id in sorted(healing):
            if model.node(node_id).alive:
                raise BalancerError(f"cannot heal node {node_id}: it is alive (only dead nodes are healed)")
        self.nodes = sorted(model.nodes, key=lambda n: n.id)
        self.node_ids = [n.id for n in self.nodes]
        self.index_of = {node_id: i for i, node_id in enumerate(self.node_ids)}
        count = len(self.nodes)

        rack_numbers: dict[object, int] = {}
        # A node without a rack is a failure domain of its own.
        self.rack_of = [rack_numbers.setdefault(n.rack if n.rack is not None else ("node", n.id), len(rack_numbers))
                        for n in self.nodes]
        self.rack_names = {number: key if isinstance(key, str) else f"(node {key[1]})"
                           for key, number in rack_numbers.items()}
        self.alive = [n.alive for n in self.nodes]
        self.removing = [n.being_removed or n.id in removing for n in self.nodes]
        self.demoted = [n.leadership_excluded or n.id in demoting for n in self.nodes]
        self.may_hold = [self.alive[i] and not self.removing[i] for i in range(count)]
        self.may_lead = [self.may_hold[i] and not self.demoted[i] for i in range(count)]
        self.draining = [self.removing[i] or self.node_ids[i] in healing for i in range(count)]
        self.frozen = [not self.alive[i] and not self.draining[i] for i in range(count)]
        # Nodes that may hold replicas, by rack: what rack-aware placement has to work with.
        self.rack_sizes: dict[int, int] = {}
        for i in range(count):
            if self.may_hold[i]:
                self.rack_sizes[self.rack_of[i]] = self.rack_sizes.get(self.rack_of[i], 0) + 1

        self.dir_paths = [[d.path for d in n.log_dirs] for n in self.nodes]
        self.dir_capacity = [[d.capacity_bytes for d in n.log_dirs] for n in self.nodes]
        self.disk_capacity = [n.disk_capacity_bytes for n in self.nodes]
        self.network_in_capacity = [n.network_in_capacity for n in self.nodes]
        self.network_out_capacity = [n.network_out_capacity for n in self.nodes]
        self.max_replicas = [n.max_replicas for n in self.nodes]

        partitions = sorted(model.partitions, key=lambda p: (p.topic, p.index))
        self.partitions = partitions
        self.topics: list[str] = sorted({p.topic for p in partitions})
        topic_number = {t: i for i, t in enumerate(self.topics)}
        self.topic_of = [topic_number[p.topic] for p in partitions]
        self.replicas = [[self.index_of[r] for r in p.replicas] for p in partitions]
        self.dirs = [[self.dir_paths[self.index_of[r]].index(path) for r, path in zip(p.replicas, p.log_dirs,
                                                                                     strict=True)]
                     if p.log_dirs else [0] * len(p.replicas) for p in partitions]
        self.leader = [self.index_of[p.leader] if p.leader is not None and model.node(p.leader).alive else NO_LEADER
                       for p in partitions]
        self.in_sync = [{self.index_of[r] for r in p.in_sync_replicas} for p in partitions]
        self.size = [p.size_bytes for p in partitions]
        self.bytes_in = [round(p.bytes_in) for p in partitions]
        self.leader_out = [round(leader_network_out(p.bytes_in, p.bytes_out, len(p.replicas))) for p in partitions]

        self.load = [[0] * count for _ in Resource]
        self.dir_usage = [[0] * len(paths) for paths in self.dir_paths]
        self.node_partitions: list[set[int]] = [set() for _ in range(count)]
        self.topic_counts: list[dict[int, int]] = [{} for _ in self.topics]
        self.topic_partitions: list[list[int]] = [[] for _ in self.topics]
        replicas, disk, network_in = (self.load[r] for r in (Resource.REPLICAS, Resource.DISK, Resource.NETWORK_IN))
        for p in range(len(partitions)):
            counts = self.topic_counts[self.topic_of[p]]
            self.topic_partitions[self.topic_of[p]].append(p)
            for node, log_dir in zip(self.replicas[p], self.dirs[p], strict=True):
                replicas[node] += 1
                disk[node] += self.size[p]
                network_in[node] += self.bytes_in[p]
                self.dir_usage[node][log_dir] += self.size[p]
                self.node_partitions[node].add(p)
                counts[node] = counts.get(node, 0) + 1
            if self.leader[p] != NO_LEADER:
                self._add_leadership(p, self.leader[p], 1)

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def partition_name(self, p: int) -> str:
        return self.partitions[p].name

    def total(self, resource: Resource) -> int:
        """The resource's load over the nodes that are not frozen: what the distribution goals share out."""
        return sum(load for load, frozen in zip(self.load[resource], self.frozen, strict=True) if not frozen)

    def move_replica(self, p: int, source: int, destination: int, destination_dir: int) -> None:
        """Replace the replica on source by one on destination (in destination_dir), in the same position.
        Leadership follows a moved leader replica; the new replica counts as in sync, as it is once the
        reassignment completes."""
        position = self.replicas[p].index(source)
        source_dir = self.dirs[p][position]
        self.replicas[p][position] = destination
        self.dirs[p][position] = destination_dir
        size, bytes_in = self.size[p], self.bytes_in[p]
        load = self.load
        load[Resource.REPLICAS][source] -= 1
        load[Resource.REPLICAS][destination] += 1
        load[Resource.DISK][source] -= size
        load[Resource.DISK][destination] += size
        load[Resource.NETWORK_IN][source] -= bytes_in
        load[Resource.NETWORK_IN][destination] += bytes_in
        self.dir_usage[source][source_dir] -= size
        self.dir_usage[destination][destination_dir] += size
        self.node_partitions[source].discard(p)
        self.node_partitions[destination].add(p)
        counts = self.topic_counts[self.topic_of[p]]
        counts[source] -= 1
        if not counts[source]:
            del counts[source]
        counts[destination] = counts.get(destination, 0) + 1
        self.in_sync[p].discard(source)
        self.in_sync[p].add(destination)
        if self.leader[p] == source:
            self.change_leader(p, destination)

    def change_leader(self, p: int, new_leader: int) -> None:
        self._add_leadership(p, self.leader[p], -1)
        self.leader[p] = new_leader
        self._add_leadership(p, new_leader, 1)

    def _add_leadership(self, p: int, node: int, sign: int) -> None:
        self.load[Resource.LEADERS][node] += sign
        self.load[Resource.NETWORK_OUT][node] += sign * self.leader_out[p]
        self.load[Resource.LEADER_BYTES_IN][node] += sign * self.bytes_in[p]

    def contribution(self, p: int, node: int, resource: Resource) -> int:
        """What moving the replica of p off node takes from node's load of resource."""
        if resource == Resource.REPLICAS:
            return 1
        if resource == Resource.DISK:
            return self.size[p]
        if resource == Resource.NETWORK_IN:
            return self.bytes_in[p]
        if self.leader[p] != node:
            return 0
        return self.leadership_contribution(p, resource)

    def leadership_contribution(self, p: int, resource: Resource) -> int:
        """What p's leadership adds to its leader's load of resource."""
        if resource == Resource.LEADERS:
            return 1
        if resource == Resource.NETWORK_OUT:
            return self.leader_out[p]
        if resource == Resource.LEADER_BYTES_IN:
            return self.bytes_in[p]
        return 0
