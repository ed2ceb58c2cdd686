"""Balancer goals: what a good placement is, in Cruise Control's priority order, and how far each may bend.

A goal judges a ClusterState: `violation(state)` is None when the goal is satisfied, else one line saying
where it is not. Hard goals are never broken by a proposal (and a proposal repairs what the current
placement breaks, or reports that it cannot); soft goals balance a load within a threshold around each
node's share of it. The optimizer (optimizer.py) reads the limits and bounds goals compute here.

In priority order (`default_goals`):

| goal | hard | what it asks | setting (default) |
| --- | --- | --- | --- |
| DrainGoal | yes | nodes being removed, and dead nodes being healed, hold no replica | - |
| DemoteGoal | yes | a demoted node leads no partition another in-sync replica could lead | - |
| RackAwareGoal | yes | replicas of a partition spread over racks (see RackLimits) | - |
| ReplicaCapacityGoal | yes | at most Node.max_replicas replicas on a node | - |
| DiskCapacityGoal | yes | each log dir below ratio x its capacity | balancer.disk.max.ratio (0.85) |
| NetworkInboundCapacityGoal | yes | network in below ratio x capacity | balancer.network.inbound.max.ratio (0.80) |
| NetworkOutboundCapacityGoal | yes | network out below ratio x capacity | balancer.network.outbound.max.ratio (0.80) |
| ReplicaDistributionGoal | no | replica counts | balancer.replica.count.balance.threshold (1.10) |
| DiskUsageDistributionGoal | no | bytes on disk, relative to capacity | balancer.disk.balance.threshold (1.10) |
| NetworkInboundUsageDistributionGoal | no | network in | balancer.network.inbound.balance.threshold (1.10) |
| NetworkOutboundUsageDistributionGoal | no | network out | balancer.network.outbound.balance.threshold (1.10) |
| TopicReplicaDistributionGoal | no | each topic's replica counts | balancer.topic.replica.count.balance.threshold (3.00), .min.gap (2), .max.gap (40) |
| LeaderReplicaDistributionGoal | no | leader counts | balancer.leader.replica.count.balance.threshold (1.10) |
| LeaderBytesInDistributionGoal | no | leaders' bytes in, upper bound only, by leadership changes only | balancer.network.inbound.balance.threshold (1.10) |

A balance threshold t bounds a node's load to [share x (2 - t), share x t], where its share is the total
spread evenly over the nodes that may carry it (by capacity, for disk and network, when every such node
declares one). Counts are whole: the upper bound is at least the share rounded up and the lower bound at
most the share rounded down, so a balanced placement always exists. The names of the goals are Cruise
Control's where it has the goal (`goals_by_name` also takes its fully qualified class names), and so are
the settings, prefixed with `balancer.`, but for the capacity limits, named as the issue names them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

from odradek.balancer.cluster_state import LEADERSHIP_RESOURCES, NO_LEADER, ClusterState, Resource
from odradek.balancer.model import BalancerError

# Float bounds are compared with loads in whole units: this keeps 3 x 1.1 = 3.3000000000000003 from
# rounding up to 4.
_ROUNDING_SLACK = 1e-9


@dataclass(frozen=True)
class BalancerSettings:
    """The goals' limits and thresholds; SETTING_NAMES gives each field's configuration name."""

    disk_max_ratio: float = 0.85
    network_inbound_max_ratio: float = 0.80
    network_outbound_max_ratio: float = 0.80
    replica_count_balance_threshold: float = 1.10
    leader_replica_count_balance_threshold: float = 1.10
    disk_balance_threshold: float = 1.10
    network_inbound_balance_threshold: float = 1.10
    network_outbound_balance_threshold: float = 1.10
    topic_replica_count_balance_threshold: float = 3.00
    topic_replica_count_balance_min_gap: int = 2
    topic_replica_count_balance_max_gap: int = 40

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            name = SETTING_NAMES[f.name]
            if f.name.endswith("_max_ratio") and not 0 < value <= 1:
                raise BalancerError(f"{name}={value}: expected a ratio in (0, 1]")
            if f.name.endswith("_threshold") and value < 1:
                raise BalancerError(f"{name}={value}: expected 1.0 or more (1.10 allows 10% around the mean)")
            if f.name.endswith("_gap") and value < 0:
                raise BalancerError(f"{name}={value}: expected 0 or more")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> BalancerSettings:
        """Settings from configuration text ({"balancer.disk.max.ratio": "0.8", ...}); other keys are ignored."""
        values = {}
        for f in fields(cls):
            text = properties.get(SETTING_NAMES[f.name])
            if text is not None:
                try:
                    values[f.name] = int(text) if f.type == "int" else float(text)
                except ValueError:
                    raise BalancerError(f"{SETTING_NAMES[f.name]}={text!r}: expected a number") from None
        return cls(**values)


SETTING_NAMES = {f.name: "balancer." + f.name.replace("_", ".") for f in fields(BalancerSettings)}


class Goal:
    """A goal: a name (Cruise Control's where it has one), hard or soft, and a judgement of a state."""

    name: ClassVar[str]
    hard: ClassVar[bool]

    def violation(self, state: ClusterState) -> str | None:
        raise NotImplementedError


@dataclass(frozen=True)
class DrainGoal(Goal):
    """Nodes being removed, and dead nodes being healed, hold no replica. The remove and heal options of a
    proposal (and Node.being_removed) say which; with none, the goal holds trivially."""

    name: ClassVar[str] = "DrainGoal"
    hard: ClassVar[bool] = True

    def violation(self, state: ClusterState) -> str | None:
        held = [(state.node_ids[n], len(state.node_partitions[n])) for n in range(state.node_count)
                if state.draining[n] and state.node_partitions[n]]
        if not held:
            return None
        return ", ".join(f"node {node} still holds {count} replicas" for node, count in held)


@dataclass(frozen=True)
class DemoteGoal(Goal):
    """A demoted node (Node.leadership_excluded, or the demote option) leads no partition that another live,
    in-sync replica on a node that may lead could lead instead."""

    name: ClassVar[str] = "DemoteGoal"
    hard: ClassVar[bool] = True

    def violation(self, state: ClusterState) -> str | None:
        led: dict[int, int] = {}
        for p, leader in enumerate(state.leader):
            if leader != NO_LEADER and state.demoted[leader] and any(
                    n != leader and state.may_lead[n] for n in state.in_sync[p]):
                led[leader] = led.get(leader, 0) + 1
        if not led:
            return None
        return ", ".join(f"node {state.node_ids[n]} leads {count} partitions another in-sync replica could lead"
                         for n, count in sorted(led.items()))


@dataclass(frozen=True)
class RackLimits:
    """How many of one partition's replicas a rack may hold: at most `most`, and at least fewest[rack]."""

    most: int
    fewest: Mapping[int, int]

    def excess(self, racks: Sequence[int]) -> int:
        """How far a partition whose replicas are in these racks is from the limits: 0 when within them."""
        if self.most == 1 and not self.fewest:  # the common case: at least as many racks as replicas
            return len(racks) - len(set(racks))
        counts: dict[int, int] = {}
        for rack in racks:
            counts[rack] = counts.get(rack, 0) + 1
        over = sum(max(0, count - self.most) for count in counts.values())
        return over + sum(max(0, least - counts.get(rack, 0)) for rack, least in self.fewest.items())

    def term(self, rack: int, count: int) -> int:
        """One rack's part of excess()."""
        return max(0, count - self.most) + max(0, self.fewest.get(rack, 0) - count)


@dataclass(frozen=True)
class RackAwareGoal(Goal):
    """Replicas of a partition spread over racks as evenly as the racks allow.

    The racks are those of the nodes that may hold replicas (a node without a rack is a rack of its own),
    n_1..n_k nodes each. For replication factor RF, let L be the smallest level with sum(min(n_i, L)) >= RF:
    no rack may hold more than L of the partition's replicas, and each rack must hold at least
    min(n_i, L - 1). With at least RF racks, L is 1: no two replicas share a rack. With fewer, the replicas
    spread evenly (RF 3 over 2 racks: 2 and 1), and a rack too small to take its even part takes all it can.
    Cruise Control's RackAwareGoal asks for RF racks and fails with fewer; this is its RackAwareDistributionGoal,
    which that name also maps onto.
    """

    name: ClassVar[str] = "RackAwareGoal"
    hard: ClassVar[bool] = True

    def limits(self, state: ClusterState, replication_factor: int) -> RackLimits:
        sizes = state.rack_sizes
        level = 1
        while level < replication_factor and sum(min(s, level) for s in sizes.values()) < replication_factor:
            level += 1
        return RackLimits(level, {rack: min(size, level - 1) for rack, size in sorted(sizes.items())
                                  if min(size, level - 1) > 0})

    def limits_by_replication_factor(self, state: ClusterState) -> dict[int, RackLimits]:
        return {rf: self.limits(state, rf) for rf in sorted({len(r) for r in state.replicas})}

    def violation(self, state: ClusterState) -> str | None:
        limits = self.limits_by_replication_factor(state)
        rack_of = state.rack_of
        broken = [p for p, replicas in enumerate(state.replicas)
                  if limits[len(replicas)].excess([rack_of[n] for n in replicas])]
        if not broken:
            return None
        example = broken[0]
        racks = sorted(state.rack_names[state.rack_of[n]] for n in state.replicas[example])
        return (f"{len(broken)} partitions spread unevenly over racks, e.g. {state.partition_name(example)} "
                f"in racks {', '.join(racks)}")


@dataclass(frozen=True)
class NodeLimitGoal(Goal):
    """A hard upper limit on one per-node load."""

    resource: ClassVar[Resource]
    hard: ClassVar[bool] = True

    def limits(self, state: ClusterState) -> list[float]:
        """Per node index; math.inf where there is no limit."""
        raise NotImplementedError

    def violation(self, state: ClusterState) -> str | None:
        limits, load = self.limits(state), state.load[self.resource]
        over = [n for n in range(state.node_count) if load[n] > limits[n]]
        if not over:
            return None
        return ", ".join(f"node {state.node_ids[n]} carries {describe(self.resource, load[n])}, above "
                         f"{describe(self.resource, limits[n])}" for n in over[:3]) + _and_more(len(over), 3)


@dataclass(frozen=True)
class ReplicaCapacityGoal(NodeLimitGoal):
    """No node holds more than its Node.max_replicas replicas."""

    name: ClassVar[str] = "ReplicaCapacityGoal"
    resource: ClassVar[Resource] = Resource.REPLICAS

    def limits(self, state: ClusterState) -> list[float]:
        return [math.inf if m is None else m for m in state.max_replicas]


class NetworkCapacityGoal(NodeLimitGoal):
    """No node's network load in one direction above max_ratio of its capacity in that direction."""

    capacity: ClassVar[str]  # the ClusterState field with each node's capacity (None: unlimited)
    max_ratio: float

    def limits(self, state: ClusterState) -> list[float]:
        return [math.inf if c is None else c * self.max_ratio for c in getattr(state, self.capacity)]


@dataclass(frozen=True)
class NetworkInboundCapacityGoal(NetworkCapacityGoal):
    """No node's network in above max_ratio of its Node.network_in_capacity."""

    max_ratio: float = BalancerSettings.network_inbound_max_ratio
    name: ClassVar[str] = "NetworkInboundCapacityGoal"
    resource: ClassVar[Resource] = Resource.NETWORK_IN
    capacity: ClassVar[str] = "network_in_capacity"


@dataclass(frozen=True)
class NetworkOutboundCapacityGoal(NetworkCapacityGoal):
    """No node's network out above max_ratio of its Node.network_out_capacity."""

    max_ratio: float = BalancerSettings.network_outbound_max_ratio
    name: ClassVar[str] = "NetworkOutboundCapacityGoal"
    resource: ClassVar[Resource] = Resource.NETWORK_OUT
    capacity: ClassVar[str] = "network_out_capacity"


@dataclass(frozen=True)
class DiskCapacityGoal(Goal):
    """Every log dir holds less than max_ratio of its capacity (per log dir, not per node: a node whose
    other dir is empty does not save a full one)."""

    max_ratio: float = BalancerSettings.disk_max_ratio
    name: ClassVar[str] = "DiskCapacityGoal"
    hard: ClassVar[bool] = True

    def dir_limits(self, state: ClusterState) -> list[list[float]]:
        """Per node index, per log dir index; math.inf for a dir of unknown capacity."""
        return [[math.inf if c is None else c * self.max_ratio for c in capacities]
                for capacities in state.dir_capacity]

    def violation(self, state: ClusterState) -> str | None:
        limits = self.dir_limits(state)
        over = [(n, d) for n in range(state.node_count) for d, used in enumerate(state.dir_usage[n])
                if used > limits[n][d]]
        if not over:
            return None
        return ", ".join(
            f"node {state.node_ids[n]} log dir {state.dir_paths[n][d]!r} holds "
            f"{describe(Resource.DISK, state.dir_usage[n][d])} of {describe(Resource.DISK, state.dir_capacity[n][d])}"
            f" (limit {self.max_ratio:.0%})" for n, d in over[:3]) + _and_more(len(over), 3)


@dataclass(frozen=True)
class Bounds:
    """A distribution goal's bounds per node index (math.inf and -math.inf for nodes it does not balance)."""

    upper: list[float]
    lower: list[float]


@dataclass(frozen=True)
class DistributionGoal(Goal):
    """A soft goal keeping one per-node load within threshold of each node's share (see the module docstring).

    Loads that follow leadership are shared among the nodes that may lead, the others among the nodes that
    may hold replicas; nodes outside that set are not bounded (a draining node is emptied by DrainGoal).
    """

    threshold: float = 1.10
    hard: ClassVar[bool] = False
    resource: ClassVar[Resource]
    whole_units: ClassVar[bool] = False  # counts rather than bytes
    leadership_only: ClassVar[bool] = False  # balanced by leadership changes alone, upper bound only

    def members(self, state: ClusterState) -> list[bool]:
        return state.may_lead if self.resource in LEADERSHIP_RESOURCES else state.may_hold

    def weights(self, state: ClusterState) -> list[float]:
        """Each node's part of the total: its capacity for the resource when all members declare one."""
        capacities = {
            Resource.DISK: state.disk_capacity, Resource.NETWORK_IN: state.network_in_capacity,
            Resource.LEADER_BYTES_IN: state.network_in_capacity, Resource.NETWORK_OUT: state.network_out_capacity,
        }.get(self.resource)
        members = self.members(state)
        if capacities is None or any(members[n] and not capacities[n] for n in range(state.node_count)):
            return [1.0] * state.node_count
        return [float(c or 0) for c in capacities]

    def shares(self, state: ClusterState) -> list[float | None]:
        """Each node's share of the total load, per node index; None for nodes the goal does not balance."""
        members, weights = self.members(state), self.weights(state)
        member_weight = sum(w for w, member in zip(weights, members, strict=True) if member)
        total = state.total(self.resource)
        return [total * weights[n] / member_weight if members[n] else None for n in range(state.node_count)]

    def bounds(self, state: ClusterState) -> Bounds:
        upper, lower = [math.inf] * state.node_count, [-math.inf] * state.node_count
        for n, share in enumerate(self.shares(state)):
            if share is None:
                continue
            high, low = share * self.threshold, share * (2 - self.threshold)
            if self.whole_units:
                upper[n] = max(math.ceil(share - _ROUNDING_SLACK), math.floor(high + _ROUNDING_SLACK))
                low_bound = min(math.floor(share + _ROUNDING_SLACK), math.ceil(low - _ROUNDING_SLACK))
            else:
                upper[n], low_bound = high, low
            if not self.leadership_only:
                lower[n] = max(0, low_bound)
        return Bounds(upper, lower)

    def violation(self, state: ClusterState) -> str | None:
        bounds, load = self.bounds(state), state.load[self.resource]
        outside = [n for n in range(state.node_count) if not bounds.lower[n] <= load[n] <= bounds.upper[n]]
        if not outside:
            return None

        def bound(value: float) -> str:
            return describe(self.resource, max(value, 0))

        return ", ".join(
            f"node {state.node_ids[n]} carries {describe(self.resource, load[n])}, outside "
            f"{bound(bounds.lower[n]) if bounds.lower[n] > -math.inf else '0'}..{bound(bounds.upper[n])}"
            for n in outside[:3]) + _and_more(len(outside), 3)


@dataclass(frozen=True)
class ReplicaDistributionGoal(DistributionGoal):
    threshold: float = BalancerSettings.replica_count_balance_threshold
    name: ClassVar[str] = "ReplicaDistributionGoal"
    resource: ClassVar[Resource] = Resource.REPLICAS
    whole_units: ClassVar[bool] = True


@dataclass(frozen=True)
class DiskUsageDistributionGoal(DistributionGoal):
    threshold: float = BalancerSettings.disk_balance_threshold
    name: ClassVar[str] = "DiskUsageDistributionGoal"
    resource: ClassVar[Resource] = Resource.DISK


@dataclass(frozen=True)
class NetworkInboundUsageDistributionGoal(DistributionGoal):
    threshold: float = BalancerSettings.network_inbound_balance_threshold
    name: ClassVar[str] = "NetworkInboundUsageDistributionGoal"
    resource: ClassVar[Resource] = Resource.NETWORK_IN


@dataclass(frozen=True)
class NetworkOutboundUsageDistributionGoal(DistributionGoal):
    threshold: float = BalancerSettings.network_outbound_balance_threshold
    name: ClassVar[str] = "NetworkOutboundUsageDistributionGoal"
    resource: ClassVar[Resource] = Resource.NETWORK_OUT


@dataclass(frozen=True)
class LeaderReplicaDistributionGoal(DistributionGoal):
    threshold: float = BalancerSettings.leader_replica_count_balance_threshold
    name: ClassVar[str] = "LeaderReplicaDistributionGoal"
    resource: ClassVar[Resource] = Resource.LEADERS
    whole_units: ClassVar[bool] = True


@dataclass(frozen=True)
class LeaderBytesInDistributionGoal(DistributionGoal):
    """Leaders' bytes in below threshold x share, by leadership changes only (it moves no data), as in
    Cruise Control, which also bounds it with the network inbound balance threshold."""

    threshold: float = BalancerSettings.network_inbound_balance_threshold
    name: ClassVar[str] = "LeaderBytesInDistributionGoal"
    resource: ClassVar[Resource] = Resource.LEADER_BYTES_IN
    leadership_only: ClassVar[bool] = True


@dataclass(frozen=True)
class TopicReplicaDistributionGoal(Goal):
    """Each topic's replicas spread over the nodes that may hold replicas: a node holds at most
    share x threshold of a topic's replicas and at least share x (2 - threshold), where the gap between a
    bound and the share is kept between min_gap and max_gap replicas (bounds rounded outwards)."""

    threshold: float = BalancerSettings.topic_replica_count_balance_threshold
    min_gap: int = BalancerSettings.topic_replica_count_balance_min_gap
    max_gap: int = BalancerSettings.topic_replica_count_balance_max_gap
    name: ClassVar[str] = "TopicReplicaDistributionGoal"
    hard: ClassVar[bool] = False

    def topic_bounds(self, state: ClusterState, topic: int) -> tuple[int, int]:
        """(lower, upper) for every node that may hold replicas."""
        members = sum(state.may_hold)
        if not members:
            return 0, 0
        total = sum(count for node, count in state.topic_counts[topic].items() if not state.frozen[node])
        share = total / members
        gap = min(max(share * (self.threshold - 1), self.min_gap), self.max_gap)
        upper = math.ceil(share + gap - _ROUNDING_SLACK)
        lower = max(0, math.floor(share - gap + _ROUNDING_SLACK))
        return lower, upper

    def topic_violations(self, state: ClusterState, topic: int) -> list[int]:
        """Nodes outside the topic's bounds."""
        lower, upper = self.topic_bounds(state, topic)
        counts = state.topic_counts[topic]
        if lower == 0:  # only nodes holding replicas of the topic can be above
            return sorted(n for n, count in counts.items() if state.may_hold[n] and count > upper)
        return [n for n in range(state.node_count) if state.may_hold[n] and not lower <= counts.get(n, 0) <= upper]

    def violation(self, state: ClusterState) -> str | None:
        broken = [(t, nodes) for t in range(len(state.topics)) if (nodes := self.topic_violations(state, t))]
        if not broken:
            return None
        topic, nodes = broken[0]
        lower, upper = self.topic_bounds(state, topic)
        return (f"{len(broken)} topics spread unevenly, e.g. {state.topics[topic]}: node {state.node_ids[nodes[0]]} "
                f"holds {state.topic_counts[topic].get(nodes[0], 0)} of its replicas, outside {lower}..{upper}")


GOAL_TYPES: dict[str, type[Goal]] = {goal.name: goal for goal in (
    DrainGoal, DemoteGoal, RackAwareGoal, ReplicaCapacityGoal, DiskCapacityGoal, NetworkInboundCapacityGoal,
    NetworkOutboundCapacityGoal, ReplicaDistributionGoal, DiskUsageDistributionGoal,
    NetworkInboundUsageDistributionGoal, NetworkOutboundUsageDistributionGoal, TopicReplicaDistributionGoal,
    LeaderReplicaDistributionGoal, LeaderBytesInDistributionGoal)}

# Cruise Control goal names that this module serves with a goal of another name.
GOAL_ALIASES = {"RackAwareDistributionGoal": "RackAwareGoal"}


def default_goals(settings: BalancerSettings = BalancerSettings()) -> list[Goal]:
    """Every goal, in priority order, with the settings' limits and thresholds."""
    return [
        DrainGoal(), DemoteGoal(), RackAwareGoal(), ReplicaCapacityGoal(),
        DiskCapacityGoal(settings.disk_max_ratio),
        NetworkInboundCapacityGoal(settings.network_inbound_max_ratio),
        NetworkOutboundCapacityGoal(settings.network_outbound_max_ratio),
        ReplicaDistributionGoal(settings.replica_count_balance_threshold),
        DiskUsageDistributionGoal(settings.disk_balance_threshold),
        NetworkInboundUsageDistributionGoal(settings.network_inbound_balance_threshold),
        NetworkOutboundUsageDistributionGoal(settings.network_outbound_balance_threshold),
        TopicReplicaDistributionGoal(settings.topic_replica_count_balance_threshold,
                                     settings.topic_replica_count_balance_min_gap,
                                     settings.topic_replica_count_balance_max_gap),
        LeaderReplicaDistributionGoal(settings.leader_replica_count_balance_threshold),
        LeaderBytesInDistributionGoal(settings.network_inbound_balance_threshold),
    ]


def goals_by_name(names: Iterable[str], settings: BalancerSettings = BalancerSettings()) -> list[Goal]:
    """The named goals, in priority order (as Cruise Control runs a goals= subset). Names may be Cruise
    Control's fully qualified class names (com.linkedin.kafka.cruisecontrol.analyzer.goals.RackAwareGoal)."""
    wanted = set()
    for name in names:
        short = name.strip().rsplit(".", 1)[-1]
        short = GOAL_ALIASES.get(short, short)
        if short not in GOAL_TYPES:
            raise BalancerError(f"unknown goal {name!r}: expected one of {', '.join(GOAL_TYPES)}")
        wanted.add(short)
    return [goal for goal in default_goals(settings) if goal.name in wanted]


def describe(resource: Resource, value: float) -> str:
    """A load in its unit, for messages."""
    if resource in (Resource.REPLICAS, Resource.LEADERS):
        return f"{value:,.0f} {'replicas' if resource == Resource.REPLICAS else 'leaders'}"
    if value == math.inf:
        return "unlimited"
    if resource == Resource.DISK:
        return f"{value / 2**30:,.2f} GiB"
    return f"{value / 2**20:,.2f} MiB/s"


def _and_more(count: int, shown: int) -> str:
    return f" and {count - shown} more" if count > shown else ""
