"""The optimizer: from a cluster model, goals and options to a proposal of replica moves and leadership
changes, each with the goal it serves; and `apply`, the model as it will be once a proposal is carried out.

`propose` takes the goals in priority order (the operation goals, DrainGoal and DemoteGoal, always first)
and lets each improve the placement with the actions the goals before it accept, as Cruise Control does: a
later goal never undoes an earlier one. Hard goals are in force from the start, so no action of any goal
breaks one; a soft goal's bounds come into force once it has been optimized. What each goal does:

- DrainGoal moves every replica off the nodes being removed or healed, largest partitions first (as bin
  packing does, so that they find room), each onto the node with the fewest replicas that every hard goal
  accepts; a replica is copied from the partition's leader, so a partition without one cannot be rebuilt.
- DemoteGoal hands each leadership of a demoted node to the in-sync replica with the fewest leaders.
- RackAwareGoal moves, for each partition outside its rack limits, a replica from a crowded rack to a
  sparse one (a follower rather than the leader).
- A per-node limit or balance goal takes load off the nodes above their upper bound (down to it: no more
  bytes than that takes) and fills the nodes below their lower bound up to their share (so that a new node
  gets its share, and later goals have room either way). Loads that follow leadership move by leadership
  changes first (nothing is copied), then by replica moves. Candidates come in the order that serves the
  need with the fewest bytes: for a byte load, the smallest partition whose load alone brings the node
  within bounds, else the largest that fits; for a count, small partitions. Counts and byte loads go in
  pairs (replicas with disk and network in, leaders with network out): when a node is off both, candidates
  are chosen to move both toward their shares (see _Search._per_unit_target), and a leadership-following
  byte load moves by leadership exchanges (a heavy one handed over, a light one taken) where single
  handovers would push the leader count the wrong way. Destinations are tried from the most headroom down.
- TopicReplicaDistributionGoal does the same per topic with replica counts.

Every action is checked against the goals in force in time independent of the cluster's size, and a node's
turn ends after MAX_FRUITLESS_CANDIDATES candidates in a row find no acceptable action. When every goal has
had its turn and any action was taken, the goals run again (a goal stuck earlier may have a way
now); the optimizer stops after a round without actions, so proposing again on the applied proposal gives
an empty proposal. Nothing depends on set or dict iteration order, and nothing is random: the same input
gives the same proposal.

Options: remove (drain nodes), demote (move leadership off nodes), heal (dead nodes whose replicas are
rebuilt elsewhere), move_onto (add-nodes: replicas and leadership move only onto these nodes), and
max_replica_moves (optimizing stops once that many replica moves were made).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from odradek.balancer.cluster_state import LEADERSHIP_RESOURCES, NO_LEADER, ClusterState, Resource
from odradek.balancer.goals import (
    DemoteGoal,
    DiskCapacityGoal,
    DistributionGoal,
    DrainGoal,
    Goal,
    NodeLimitGoal,
    RackAwareGoal,
    RackLimits,
    TopicReplicaDistributionGoal,
    default_goals,
)
from odradek.balancer.model import BalancerError, ClusterModel, NodeLoad

# Rounds of all goals before giving up on reaching a round without actions. Each goal's own violation
# only shrinks under later goals, so rounds converge; this bounds the work if a case converges slowly.
MAX_ROUNDS = 8

# A node's turn in a balance goal ends after this many candidates in a row (from one source, when filling)
# found no acceptable action, as
# Cruise Control's fast mode ends a broker's turn after a time; counted rather than timed, so that the same
# input still gives the same proposal. Without it a goal that the goals before it leave no room for (say
# replica counts with uneven racks) would try every replica against every node.
MAX_FRUITLESS_CANDIDATES = 50

# Leaderships tried on each side of an exchange (see _Search._exchange_leadership).
MAX_EXCHANGE_CANDIDATES = 10

# (byte load, count) pairs whose candidates are chosen together (see _Search._per_unit_target), by the load
# being balanced.
_PAIRED_LOADS = {
    Resource.REPLICAS: (Resource.DISK, Resource.REPLICAS), Resource.DISK: (Resource.DISK, Resource.REPLICAS),
    Resource.NETWORK_IN: (Resource.NETWORK_IN, Resource.REPLICAS),
    Resource.LEADERS: (Resource.NETWORK_OUT, Resource.LEADERS),
    Resource.NETWORK_OUT: (Resource.NETWORK_OUT, Resource.LEADERS),
}


@dataclass(frozen=True)
class ProposalOptions:
    """What a proposal is for, besides balance. Node ids; move_onto None means any node may receive."""

    remove: frozenset[int] = frozenset()
    demote: frozenset[int] = frozenset()
    heal: frozenset[int] = frozenset()
    move_onto: frozenset[int] | None = None
    max_replica_moves: int | None = None

    def __post_init__(self):
        for name in ("remove", "demote", "heal"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        if self.move_onto is not None:
            object.__setattr__(self, "move_onto", frozenset(self.move_onto))


class ReplicaChange:
    """What a change of a partition's replicas (old_replicas -> new_replicas) adds and removes."""

    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]

    @property
    def added(self) -> tuple[int, ...]:
        return tuple(n for n in self.new_replicas if n not in self.old_replicas)

    @property
    def removed(self) -> tuple[int, ...]:
        return tuple(n for n in self.old_replicas if n not in self.new_replicas)


@dataclass(frozen=True)
class ReplicaMove(ReplicaChange):
    """A reassignment: old_replicas become new_replicas (ordered, the preferred leader first), each new replica
    in new_log_dirs' dir. bytes_moved: the partition's size times the replicas added."""

    topic: str
    partition: int
    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]
    new_log_dirs: tuple[str, ...]
    goal: str
    bytes_moved: int



@dataclass(frozen=True)
class LeadershipChange:
    """After any move of the partition, new_leader leads it. The executor makes it the preferred leader (first
    in the replica list, which copies nothing) and runs a preferred-leader election."""

    topic: str
    partition: int
    old_leader: int | None
    new_leader: int
    goal: str


@dataclass(frozen=True)
class GoalReport:
    """A goal before and after the proposal; violation_* say where it does not hold, reason why the
    optimizer left it so."""

    goal: str
    hard: bool
    violation_before: str | None
    violation_after: str | None
    reason: str | None

    @property
    def satisfied_before(self) -> bool:
        return self.violation_before is None

    @property
    def satisfied_after(self) -> bool:
        return self.violation_after is None


@dataclass(frozen=True)
class Proposal:
    replica_moves: tuple[ReplicaMove, ...]
    leadership_changes: tuple[LeadershipChange, ...]
    loads_before: Mapping[int, NodeLoad]
    loads_after: Mapping[int, NodeLoad]
    goals: tuple[GoalReport, ...]
    stopped_at_move_limit: bool

    @property
    def is_empty(self) -> bool:
        return not self.replica_moves and not self.leadership_changes

    @property
    def bytes_moved(self) -> int:
        return sum(m.bytes_moved for m in self.replica_moves)

    def goal(self, name: str) -> GoalReport:
        return next(report for report in self.goals if report.goal == name)


def propose(model: ClusterModel, goals: Sequence[Goal] | None = None,
            options: ProposalOptions = ProposalOptions()) -> Proposal:
    """A proposal for the model. goals: in priority order, default_goals() when None; DrainGoal and DemoteGoal
    are added in front when missing. Raises BalancerError when nodes to remove cannot be drained."""
    goals = with_operation_goals(default_goals() if goals is None else goals)
    state = ClusterState(model, options.remove, options.demote, options.heal)
    violations_before = {goal.name: goal.violation(state) for goal in goals}
    search = _Search(state, goals, options)
    _refuse_impossible_removal(search)
    search.run()
    moves, changes = search.changes()
    after = _applied(model, moves, changes)
    after_state = ClusterState(after, options.remove, options.demote, options.heal)
    reports = []
    for goal in goals:
        violation = goal.violation(after_state)
        reports.append(GoalReport(goal.name, goal.hard, violations_before[goal.name], violation,
                                  search.reason(goal.name) if violation else None))
    return Proposal(tuple(moves), tuple(changes), model.node_loads(), after.node_loads(), tuple(reports),
                    search.stopped)


def check_goals(model: ClusterModel, goals: Sequence[Goal] | None = None,
                options: ProposalOptions = ProposalOptions()) -> dict[str, str | None]:
    """Each goal's violation (None: satisfied) in the model as it is, by goal name, in priority order."""
    state = ClusterState(model, options.remove, options.demote, options.heal)
    return {goal.name: goal.violation(state)
            for goal in with_operation_goals(default_goals() if goals is None else goals)}


def apply(model: ClusterModel, proposal: Proposal) -> ClusterModel:
    """The model once the proposal is carried out: replicas, log dirs, leaders and in-sync replicas (a
    replica added by a move is in sync once the move completes)."""
    return _applied(model, proposal.replica_moves, proposal.leadership_changes)


def with_operation_goals(goals: Sequence[Goal]) -> list[Goal]:
    """goals with DrainGoal and DemoteGoal in front when missing: removal, healing and demotion are what a
    proposal is asked for, not preferences a goals= list may leave out."""
    present = {goal.name for goal in goals}
    return [goal for goal in (DrainGoal(), DemoteGoal()) if goal.name not in present] + list(goals)


def _applied(model: ClusterModel, moves: Sequence[ReplicaMove],
             changes: Sequence[LeadershipChange]) -> ClusterModel:
    moves_by_partition = {(m.topic, m.partition): m for m in moves}
    changes_by_partition = {(c.topic, c.partition): c for c in changes}
    partitions = []
    for p in model.partitions:
        move = moves_by_partition.get((p.topic, p.index))
        change = changes_by_partition.get((p.topic, p.index))
        if move is None and change is None:
            partitions.append(p)
            continue
        replicas, log_dirs, in_sync, leader = p.replicas, p.log_dirs, p.in_sync, p.leader
        if move is not None:
            replicas, log_dirs = move.new_replicas, move.new_log_dirs
            if in_sync is not None:
                in_sync = tuple(n for n in replicas if n in in_sync or n not in p.replicas)
            if leader not in replicas:
                leader = replicas[0]
        if change is not None:
            leader = change.new_leader
            position = replicas.index(leader)
            order = [position] + [i for i in range(len(replicas)) if i != position]
            replicas = tuple(replicas[i] for i in order)
            log_dirs = tuple(log_dirs[i] for i in order) if log_dirs else ()
        partitions.append(replace(p, replicas=replicas, log_dirs=log_dirs, in_sync=in_sync, leader=leader))
    return ClusterModel(model.nodes, tuple(partitions))


def _refuse_impossible_removal(search: _Search) -> None:
    """BalancerError when the nodes left cannot hold the replicas of the nodes being removed: too few nodes
    or racks for a replication factor, or too little replica or disk capacity."""
    state = search.state
    removing = [n for n in range(state.node_count) if state.removing[n] and state.node_partitions[n]]
    if not removing:
        return
    nodes = ", ".join(str(state.node_ids[n]) for n in removing)
    what = f"cannot remove node{'s' if len(removing) > 1 else ''} {nodes}"
    receivers = sum(search.may_receive)
    for p in sorted({p for n in removing for p in state.node_partitions[n]}):
        staying = sum(1 for n in state.replicas[p] if not state.draining[n])
        if staying + receivers - sum(1 for n in state.replicas[p] if search.may_receive[n]) < len(state.replicas[p]):
            raise BalancerError(f"{what}: {receivers} nodes would remain to hold replication factor "
                                f"{len(state.replicas[p])} of {state.partition_name(p)}")
    if search.rack_limits is not None:
        racks_after = len(state.rack_sizes)
        racks_before = len({state.rack_of[n] for n in range(state.node_count) if state.alive[n]})
        widest = max(len(state.replicas[p]) for n in removing for p in state.node_partitions[n])
        if racks_after < widest <= racks_before:
            raise BalancerError(f"{what}: the remaining nodes span {racks_after} racks, fewer than replication "
                                f"factor {widest}, so partitions would lose their rack-aware placement")
    total_replicas = state.total(Resource.REPLICAS)
    capacities = [state.max_replicas[n] for n in range(state.node_count) if state.may_hold[n]]
    if None not in capacities and total_replicas > sum(capacities):
        raise BalancerError(f"{what}: {total_replicas} replicas, and the remaining nodes hold at most "
                            f"{sum(capacities)} (max replicas)")
    if search.dir_limits is not None:
        room = sum(limit for n in range(state.node_count) if state.may_hold[n] for limit in search.dir_limits[n])
        if state.total(Resource.DISK) > room:
            raise BalancerError(f"{what}: {state.total(Resource.DISK):,} bytes, and the remaining log dirs "
                                f"hold {room:,.0f} below their disk limit")


class _Candidates:
    """Partitions to move, each with the load it moves (its key), offered in an order that depends on the
    need; an offered candidate is not offered again (it was moved, or cannot be: during one node's turn loads
    only change in ways that keep a refused candidate refused)."""

    def __init__(self, items: list[tuple[int, int]]):
        self.items = sorted(items)  # (key, partition)
        self.keys = [key for key, _ in self.items]
        # Skip pointers over offered items, compressed as they are followed: the nearest item not yet
        # offered at or above i is found from up[i], at or below i from down[i + 1] (down[0]: none).
        self.up = list(range(len(self.items) + 1))
        self.down = list(range(len(self.items) + 1))

    @staticmethod
    def _follow(pointers: list[int], i: int) -> int:
        root = i
        while pointers[root] != root:
            root = pointers[root]
        while pointers[i] != root:
            pointers[i], i = root, pointers[i]
        return root

    def _above(self, i: int) -> int:
        """The first index >= i not offered, or len(items)."""
        return self._follow(self.up, i)

    def _below(self, i: int) -> int:
        """The last index <= i not offered, or -1."""
        return self._follow(self.down, i + 1) - 1

    def _offer(self, i: int) -> tuple[int, int]:
        self.up[i] = i + 1
        self.down[i + 1] = i
        return self.items[i]

    def meeting(self, need: float) -> Iterator[tuple[int, int]]:
        """First the smallest keys of at least need (smallest first), then the smaller ones, largest first."""
        if not self.items:
            return
        start = bisect_left(self.keys, min(need, self.keys[-1]))
        while (i := self._above(start)) < len(self.items):
            yield self._offer(i)
        while (i := self._below(start - 1)) >= 0:
            yield self._offer(i)

    def nearest(self, target: float) -> Iterator[tuple[int, int]]:
        """Keys nearest to target first."""
        split = bisect_left(self.keys, target)
        while True:
            below, above = self._below(split - 1), self._above(split)
            if below < 0 and above >= len(self.items):
                return
            if above >= len(self.items) or (below >= 0 and target - self.keys[below] <= self.keys[above] - target):
                yield self._offer(below)
            else:
                yield self._offer(above)


class _NodeOrder:
    """Nodes sorted by a key of the current loads, re-sorted only where a move changed them."""

    def __init__(self, nodes: Iterable[int], key: Callable[[int], tuple]):
        self.key = key
        self.keys = {n: key(n) for n in nodes}
        self.entries = sorted((k, n) for n, k in self.keys.items())

    def update(self, *nodes: int) -> None:
        for n in nodes:
            if n in self.keys:
                del self.entries[bisect_left(self.entries, (self.keys[n], n))]
                self.keys[n] = self.key(n)
                insort(self.entries, (self.keys[n], n))

    def __iter__(self) -> Iterator[int]:
        return (n for _, n in self.entries)


class _Search:
    """One proposal's search: the state, the constraints in force, and what each goal has done."""

    def __init__(self, state: ClusterState, goals: Sequence[Goal], options: ProposalOptions):
        self.state = state
        self.goals = goals
        count = state.node_count
        allowed = options.move_onto
        if allowed is not None:
            for node_id in sorted(allowed):
                if node_id not in state.index_of or not state.may_hold[state.index_of[node_id]]:
                    raise BalancerError(f"cannot move onto node {node_id}: not a live node that may hold replicas")
        self.may_receive = [state.may_hold[n] and (allowed is None or state.node_ids[n] in allowed)
                            for n in range(count)]
        self.may_receive_leadership = [self.may_receive[n] and state.may_lead[n] for n in range(count)]
        self.receivers = sorted(allowed) if allowed is not None else None
        self.moves_left = math.inf if options.max_replica_moves is None else options.max_replica_moves
        self.stopped = self.moves_left <= 0
        self.actions = 0
        self.original_replicas = [tuple(r) for r in state.replicas]
        self.original_dirs = [tuple(d) for d in state.dirs]
        self.original_leader = list(state.leader)
        self.original_in_sync = [frozenset(s) for s in state.in_sync]
        self.move_goal: dict[int, str] = {}
        self.leadership_goal: dict[int, str] = {}
        self.current_goal = ""
        self.refusals: dict[str, Counter[str]] = {goal.name: Counter() for goal in goals}
        self.notes: dict[str, list[str]] = {goal.name: [] for goal in goals}

        # Hard goals are in force throughout; soft goals once optimized, in each round.
        self.hard_limits = [(g.name, g.resource, g.limits(state), [-math.inf] * count)
                            for g in goals if isinstance(g, NodeLimitGoal)]
        self.limits = list(self.hard_limits)
        disk_goal = next((g for g in goals if isinstance(g, DiskCapacityGoal)), None)
        self.dir_limits = disk_goal.dir_limits(state) if disk_goal else None
        rack_goal = next((g for g in goals if isinstance(g, RackAwareGoal)), None)
        self.rack_limits = rack_goal.limits_by_replication_factor(state) if rack_goal else None
        self.topic_bounds: list[tuple[int, int]] | None = None
        # Each balanced load's share per node, to steer candidate choice (see _per_unit_target).
        self.shares = {g.resource: g.shares(state) for g in goals if isinstance(g, DistributionGoal)}

    # The round loop and what each kind of goal does.

    def run(self) -> None:
        for _ in range(MAX_ROUNDS):
            actions = self.actions
            self.limits = list(self.hard_limits)
            self.topic_bounds = None
            for goal in self.goals:  # what a goal reports is what its last turn met
                self.refusals[goal.name].clear()
                self.notes[goal.name].clear()
            for goal in self.goals:
                if self.stopped:
                    return
                self.current_goal = goal.name
                self._optimize(goal)
            if self.actions == actions:
                return

    def _optimize(self, goal: Goal) -> None:
        state = self.state
        if isinstance(goal, DrainGoal):
            self._drain()
        elif isinstance(goal, DemoteGoal):
            self._demote()
        elif isinstance(goal, RackAwareGoal):
            self._spread_over_racks()
        elif isinstance(goal, NodeLimitGoal):
            self._balance(goal.resource, goal.limits(state), [-math.inf] * state.node_count, None, False)
        elif isinstance(goal, DiskCapacityGoal):
            self._relieve_log_dirs()
        elif isinstance(goal, DistributionGoal):
            bounds = goal.bounds(state)
            self._balance(goal.resource, bounds.upper, bounds.lower, goal.shares(state), goal.leadership_only)
            self.limits.append((goal.name, goal.resource, bounds.upper, bounds.lower))
        elif isinstance(goal, TopicReplicaDistributionGoal):
            bounds = [goal.topic_bounds(state, t) for t in range(len(state.topics))]
            self._spread_topics(bounds)
            self.topic_bounds = bounds
        else:
            raise BalancerError(f"goal {goal.name} has no optimizer")

    def _drain(self) -> None:
        state = self.state
        load = state.load
        draining = sorted(((p, n) for n in range(state.node_count) if state.draining[n]
                           for p in state.node_partitions[n]), key=lambda pn: (-state.size[pn[0]], pn))
        unrecoverable = 0
        destinations = _NodeOrder(
            (n for n in range(state.node_count) if self.may_receive[n]),
            lambda n: (load[Resource.REPLICAS][n], load[Resource.DISK][n] / (state.disk_capacity[n] or 1)))
        for p, source in draining:
            if self.stopped:
                return
            if state.leader[p] == NO_LEADER:
                unrecoverable += 1
                continue
            destination = self._move_to_first(p, source, destinations)
            if destination is None and state.removing[source]:
                raise BalancerError(self._undrainable(p, source))
            destinations.update(destination)
        if unrecoverable:
            self._note(f"{unrecoverable} replicas on draining nodes belong to partitions without a leader to copy "
                       "from")

    def _undrainable(self, p: int, source: int) -> str:
        state = self.state
        refused: Counter[str] = Counter()
        for n in range(state.node_count):
            if n == source:
                continue
            if p in state.node_partitions[n]:
                refused["hold it already"] += 1
            elif not self.may_receive[n]:
                refused["may not receive replicas"] += 1
            else:
                refused[f"{self._move_refusal(p, source, n, self._placement_dir(p, n))} refuses"] += 1
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(refused.items()))
        return (f"cannot remove node {state.node_ids[source]}: no node can take its replica of "
                f"{state.partition_name(p)} ({why})")

    def _demote(self) -> None:
        state = self.state
        leaders = state.load[Resource.LEADERS]
        stuck = 0
        for node in range(state.node_count):
            if not state.demoted[node]:
                continue
            for p in sorted(p for p in state.node_partitions[node] if state.leader[p] == node):
                candidates = sorted((n for n in state.replicas[p] if n != node and n in state.in_sync[p]
                                     and self.may_receive_leadership[n]),
                                    key=lambda n: (leaders[n], state.replicas[p].index(n)))
                if candidates and not self._lead_to_first(p, node, candidates):
                    stuck += 1
        if stuck:
            self._note(f"{stuck} leaderships could not move to another in-sync replica")

    def _spread_over_racks(self) -> None:
        state = self.state
        replica_load = state.load[Resource.REPLICAS]
        # Within a rack, destinations by replica count at the start (a tie-break; racks are what matters).
        nodes_by_rack: dict[int, list[int]] = {}
        for n in sorted(range(state.node_count), key=lambda n: (replica_load[n], n)):
            if self.may_receive[n]:
                nodes_by_rack.setdefault(state.rack_of[n], []).append(n)
        for p in range(len(state.replicas)):
            limits = self.rack_limits[len(state.replicas[p])]
            while not self.stopped and limits.excess([state.rack_of[n] for n in state.replicas[p]]):
                if not self._improve_rack_spread(p, limits, nodes_by_rack):
                    break

    def _improve_rack_spread(self, p: int, limits: RackLimits, nodes_by_rack: dict[int, list[int]]) -> bool:
        """One move of p from a rack with too many of its replicas to one with too few."""
        state = self.state
        counts: dict[int, int] = {}
        for n in state.replicas[p]:
            counts[state.rack_of[n]] = counts.get(state.rack_of[n], 0) + 1
        if state.leader[p] == NO_LEADER:
            return False

        def gain_leaving(rack: int) -> int:
            return limits.term(rack, counts[rack]) - limits.term(rack, counts[rack] - 1)

        def gain_arriving(rack: int) -> int:
            return limits.term(rack, counts.get(rack, 0)) - limits.term(rack, counts.get(rack, 0) + 1)

        sources = sorted((n for n in state.replicas[p] if not state.frozen[n]),
                         key=lambda n: (-gain_leaving(state.rack_of[n]), state.leader[p] == n,
                                        -state.replicas[p].index(n)))
        racks = sorted(nodes_by_rack, key=lambda rack: (-gain_arriving(rack), rack))
        for source in sources:
            for rack in racks:
                if gain_leaving(state.rack_of[source]) + gain_arriving(rack) <= 0:
                    break
                if self._move_to_first(p, source, nodes_by_rack[rack]) is not None:
                    return True
        return False

    def _relieve_log_dirs(self) -> None:
        state = self.state
        limits = self.dir_limits
        for node in range(state.node_count):
            for log_dir in range(len(state.dir_paths[node])):
                if state.frozen[node] or state.dir_usage[node][log_dir] <= limits[node][log_dir]:
                    continue
                candidates = _Candidates([
                    (state.size[p], p) for p in state.node_partitions[node]
                    if state.dirs[p][state.replicas[p].index(node)] == log_dir and self._movable(p)])
                destinations = _NodeOrder((n for n in range(state.node_count) if self.may_receive[n]),
                                          lambda n: (state.load[Resource.DISK][n] / (state.disk_capacity[n] or 1),))
                while not self.stopped and state.dir_usage[node][log_dir] > limits[node][log_dir]:
                    need = state.dir_usage[node][log_dir] - limits[node][log_dir]
                    destination = next((d for _, p in self._offer(candidates, Resource.DISK, node, need, shedding=True)
                                        if (d := self._move_to_first(p, node, destinations)) is not None), None)
                    if destination is None:
                        break
                    destinations.update(destination)

    def _balance(self, resource: Resource, upper: list[float], lower: list[float], shares: list[float | None] | None,
                 leadership_only: bool) -> None:
        """Bring every node's load of resource within [lower, upper]: shed from the nodes above down to the
        upper bound (no more bytes than that takes), fill the nodes below up to their share (so that a new node
        gets its share, and the goals after this one have room either way), until a sweep changes nothing.
        shares: None for a limit (no lower bound)."""
        state = self.state
        load = state.load[resource]
        progress = True
        while progress and not self.stopped:
            progress = False
            above = sorted((n for n in range(state.node_count) if load[n] > upper[n] and not state.frozen[n]),
                           key=lambda n: (upper[n] - load[n], n))
            for node in above:
                progress |= self._shed(resource, node, upper, lower, leadership_only)
            below = sorted((n for n in range(state.node_count) if load[n] < lower[n]),
                           key=lambda n: (load[n] - lower[n], n))
            for node in below:
                progress |= self._fill(resource, node, upper, lower, shares)

    def _shed(self, resource: Resource, source: int, upper: list[float], lower: list[float],
              leadership_only: bool) -> bool:
        state = self.state
        load = state.load[resource]
        progressed = False
        if resource in LEADERSHIP_RESOURCES:
            progressed = self._shed_leadership(resource, source, upper, lower)
        if leadership_only or load[source] <= upper[source]:
            return progressed
        candidates = self._replica_candidates(resource, source)
        destinations = _NodeOrder((n for n in range(state.node_count) if self.may_receive[n]),
                                  lambda n: (load[n] - upper[n],))
        while not self.stopped and load[source] > upper[source]:
            moved = False
            fruitless = 0
            for _, p in self._offer(candidates, resource, source, load[source] - upper[source], shedding=True):
                x = state.contribution(p, source, resource)
                if load[source] - x < lower[source]:
                    continue
                fitting = []
                for n in destinations:
                    if load[n] + x > upper[n]:
                        break
                    fitting.append(n)
                if all(p in state.node_partitions[n] for n in fitting):
                    continue  # held wherever it would fit (RF3 on three nodes): no action tried, none counted
                destination = self._move_to_first(p, source, fitting)
                if destination is not None:
                    destinations.update(source, destination)
                    moved = progressed = True
                    break
                fruitless += 1
                if fruitless == MAX_FRUITLESS_CANDIDATES:
                    break
            if not moved:
                break
        return progressed

    def _fill(self, resource: Resource, node: int, upper: list[float], lower: list[float],
              shares: list[float | None]) -> bool:
        state = self.state
        load = state.load[resource]
        if not self.may_receive[node]:
            return False
        progressed = False
        if resource in LEADERSHIP_RESOURCES:
            progressed = self._fill_leadership(resource, node, upper, lower, shares)
        target = max(lower[node], shares[node])
        by_source: dict[int, _Candidates] = {}
        sources = _NodeOrder((n for n in range(state.node_count) if n != node and not state.frozen[n]),
                             lambda n: (lower[n] - load[n],))
        while not self.stopped and load[node] < target:
            moved = False
            for source in sources:
                floor = self._giving_floor(source, node, load, lower, shares)
                if load[source] <= floor:
                    continue
                if source not in by_source:
                    by_source[source] = self._replica_candidates(resource, source)
                fruitless = 0  # per source: another source (in another rack, say) may have what this one lacks
                for _, p in self._offer(by_source[source], resource, node, target - load[node], shedding=False):
                    x = state.contribution(p, source, resource)
                    if load[node] + x > upper[node] or load[source] - x < floor or p in state.node_partitions[node]:
                        continue
                    if self._move_to_first(p, source, [node]) is not None:
                        sources.update(source)
                        moved = progressed = True
                        break
                    fruitless += 1
                    if fruitless == MAX_FRUITLESS_CANDIDATES:
                        break
                if moved:
                    break
            if not moved:
                break
        return progressed

    @staticmethod
    def _giving_floor(source: int, node: int, load: list[int], lower: list[float],
                      shares: list[float | None]) -> float:
        """How low source's load may go to fill node: its lower bound while node is below its own, then (node
        topping up to its share) source's share, so that every move narrows the gap between the two."""
        if load[node] < lower[node] or shares[source] is None:
            return lower[source]
        return max(lower[source], shares[source])

    def _replica_candidates(self, resource: Resource, node: int) -> _Candidates:
        """The replicas on node whose move takes some of its load of resource, keyed by the size for counts (the
        bytes a move copies), else by the load the move takes."""
        state = self.state
        leader, partitions = state.leader, state.node_partitions[node]
        if resource in (Resource.REPLICAS, Resource.DISK):
            keys = state.size
        elif resource == Resource.LEADERS:
            return _Candidates([(state.size[p], p) for p in partitions if leader[p] == node])
        elif resource == Resource.NETWORK_IN:
            keys = state.bytes_in
        else:
            keys = state.leader_out if resource == Resource.NETWORK_OUT else state.bytes_in
            return _Candidates([(keys[p], p) for p in partitions if leader[p] == node and keys[p] > 0])
        # A partition without a leader has nothing to copy from (see _movable).
        return _Candidates([(keys[p], p) for p in partitions if leader[p] != NO_LEADER
                            and (keys[p] > 0 or resource == Resource.REPLICAS)])

    def _offer(self, candidates: _Candidates, resource: Resource, node: int, need: float, shedding: bool,
               leadership: bool = False) -> Iterator[tuple[int, int]]:
        """The order to try a node's candidates in. A count is served by any candidate: take the one whose
        load keeps the paired byte load on course (see _per_unit_target), or the smallest. A byte load one
        move can bring within bounds: the smallest candidate that does (fewest bytes). A byte load that takes
        many moves: candidates near the load per move that keeps the paired count on course, else the
        largest first (fewest moves)."""
        if resource == Resource.LEADERS and not leadership:
            return candidates.nearest(0)  # leader replica moves: keyed by size, the smallest first
        target = self._per_unit_target(resource, node, shedding)
        if resource in (Resource.REPLICAS, Resource.LEADERS):
            return candidates.nearest(target or 0)
        if target is not None and candidates.keys and need > candidates.keys[-1]:
            return candidates.nearest(target)
        return candidates.meeting(need)

    def _per_unit_target(self, resource: Resource, node: int, shedding: bool) -> float | None:
        """Replica counts go with disk (and network in), leader counts with network out: when a node is off
        its share of both loads of a pair the same way, moves whose byte load is the byte surplus over the
        count surplus (deficit over deficit when filling) bring both toward their shares together, so that
        balancing one does not leave the other for later goals to fix; when the count is at its share, moves of
        the average load keep it there. None when not both are balanced goals, or when the count is off the
        other way (then the fewest moves serve both)."""
        pair = _PAIRED_LOADS.get(resource)
        if pair is None or pair[0] not in self.shares or pair[1] not in self.shares:
            return None
        byte_load, count = pair
        byte_share, count_share = self.shares[byte_load][node], self.shares[count][node]
        if byte_share is None or count_share is None:
            return None
        count_off = self.state.load[count][node] - count_share
        bytes_off = self.state.load[byte_load][node] - byte_share
        if not shedding:
            count_off, bytes_off = -count_off, -bytes_off
        if bytes_off <= 0 or count_off <= -1:
            return None
        if count_off < 1:  # the count is at its share: keep it there, with moves of the average load
            return byte_share / count_share if count_share else None
        return bytes_off / count_off

    def _shed_leadership(self, resource: Resource, source: int, upper: list[float], lower: list[float]) -> bool:
        state = self.state
        load = state.load[resource]
        candidates = self._leadership_candidates(resource, [p for p in state.node_partitions[source]
                                                            if state.leader[p] == source])
        # Handing a leadership over lowers the leader count too: where that is short already, exchange first.
        exchange_first = self._leaders_short(source, shedding=True)
        progressed = False
        while not self.stopped and load[source] > upper[source]:
            if exchange_first:
                moved = (self._exchange_leadership(resource, source, upper, lower, shedding=True)
                         or self._hand_over_one(candidates, resource, source, upper, lower))
            else:
                moved = (self._hand_over_one(candidates, resource, source, upper, lower)
                         or self._exchange_leadership(resource, source, upper, lower, shedding=True))
            if not moved and resource == Resource.LEADERS:
                moved = self._after_network_exchange(source, shedding=True, action=lambda: self._hand_over_one(
                    self._leadership_candidates(resource, [p for p in state.node_partitions[source]
                                                           if state.leader[p] == source]),
                    resource, source, upper, lower))
            if not moved:
                break
            progressed = True
        return progressed

    def _hand_over_one(self, candidates: _Candidates, resource: Resource, source: int, upper: list[float],
                       lower: list[float]) -> bool:
        state = self.state
        load = state.load[resource]
        fruitless = 0
        for _, p in self._offer(candidates, resource, source, load[source] - upper[source], shedding=True,
                                leadership=True):
            x = state.leadership_contribution(p, resource)
            if load[source] - x < lower[source]:
                continue
            followers = sorted((n for n in state.replicas[p] if n != source and n in state.in_sync[p]
                                and self.may_receive_leadership[n] and load[n] + x <= upper[n]),
                               key=lambda n: (load[n] - upper[n], n))
            if self._lead_to_first(p, source, followers):
                return True
            fruitless += 1
            if fruitless == MAX_FRUITLESS_CANDIDATES:
                break
        return False

    def _leaders_short(self, node: int, shedding: bool) -> bool:
        """Whether node's leader count is already short of its share the way shedding (or taking, when
        filling) a leadership-following load by single handovers would take it further."""
        if Resource.LEADERS not in self.shares or self.shares[Resource.LEADERS][node] is None:
            return False
        off = self.state.load[Resource.LEADERS][node] - self.shares[Resource.LEADERS][node]
        return off <= -1 if shedding else off >= 1

    def _takeable(self, node: int) -> list[int]:
        """The partitions whose leadership node could take: it holds an in-sync follower."""
        state = self.state
        return [p for p in state.node_partitions[node]
                if state.leader[p] not in (node, NO_LEADER) and node in state.in_sync[p]]

    def _exchange_leadership(self, resource: Resource, node: int, upper: list[float], lower: list[float],
                             shedding: bool, then: Callable[[], bool] | None = None) -> bool:
        """Hand one of node's leaderships to a follower and take a lighter one (a heavier one when filling)
        from another leader: node's load of a leadership-following resource moves toward its bounds while
        its leader count stays. Tries the heaviest (lightest) it leads against the lightest (heaviest) it could
        take, a bounded number of each. With then: keeps an exchange only if then() acts after it."""
        state = self.state
        load = state.load[resource]
        if resource == Resource.LEADERS or not self.may_receive_leadership[node]:
            return False
        led = sorted((state.leadership_contribution(p, resource), p) for p in state.node_partitions[node]
                     if state.leader[p] == node)
        takeable = sorted((state.leadership_contribution(p, resource), p) for p in self._takeable(node))
        if shedding:
            led.reverse()
        else:
            takeable.reverse()
        for x_give, give in led[:MAX_EXCHANGE_CANDIDATES]:
            for x_take, take in takeable[:MAX_EXCHANGE_CANDIDATES]:
                change = x_take - x_give
                if shedding and (change >= 0 or load[node] + change < lower[node]):
                    continue
                if not shedding and (change <= 0 or load[node] + change > upper[node]):
                    continue
                other = state.leader[take]
                if load[other] - x_take < lower[other]:
                    continue
                followers = sorted((n for n in state.replicas[give] if n != node and n in state.in_sync[give]
                                    and self.may_receive_leadership[n] and load[n] + x_give <= upper[n]),
                                   key=lambda n: (load[n] - upper[n], n))
                for follower in followers:
                    if self._exchange(give, follower, take, node):
                        if then is None or then():
                            return True
                        state.change_leader(take, other)  # back as it was
                        state.change_leader(give, node)
                        self.actions -= 2
                        self._attribute_leadership(give)
                        self._attribute_leadership(take)
        return False

    def _after_network_exchange(self, node: int, shedding: bool, action: Callable[[], bool]) -> bool:
        """A leader count blocked by network out (in force): an exchange that moves node's network out the
        other way first (so that handing over, or taking, one leadership then fits), and the action; both or
        neither."""
        bounds = next(((upper, lower) for _, resource, upper, lower in self.limits[len(self.hard_limits):]
                       if resource == Resource.NETWORK_OUT), None)
        if bounds is None:
            return False
        upper, lower = bounds
        return self._exchange_leadership(Resource.NETWORK_OUT, node, upper, lower, shedding=not shedding,
                                         then=action)

    def _exchange(self, give: int, follower: int, take: int, node: int) -> bool:
        """Leadership of give to follower and of take to node, both or neither: kept when the goals in force
        accept them together."""
        state = self.state
        taken_from = state.leader[take]
        touched = {node, follower, taken_from}
        before = {(r, n): state.load[r][n] for r in LEADERSHIP_RESOURCES for n in touched}
        state.change_leader(give, follower)
        state.change_leader(take, node)
        refusal = DemoteGoal.name if state.demoted[follower] or state.demoted[node] else None
        for name, resource, upper, lower in self.limits:
            if refusal is not None:
                break
            if resource in LEADERSHIP_RESOURCES:
                for n in touched:
                    now, then = state.load[resource][n], before[(resource, n)]
                    if (now > upper[n] and now > then) or (now < lower[n] and now < then):
                        refusal = name
                        break
        if refusal is None:
            for p in (give, take):
                self.actions += 1
                self._attribute_leadership(p)
            return True
        state.change_leader(take, taken_from)
        state.change_leader(give, node)
        self.refusals[self.current_goal][refusal] += 1
        return False

    def _leadership_candidates(self, resource: Resource, partitions: list[int]) -> _Candidates:
        """Leaderships to hand over, keyed by the load they move; leader counts keyed by the network out that
        goes with them, so that the smallest disturb the network goals least."""
        state = self.state
        if resource == Resource.LEADERS:
            return _Candidates([(state.leader_out[p], p) for p in partitions])
        return _Candidates([(x, p) for p in partitions if (x := state.leadership_contribution(p, resource)) > 0])

    def _fill_leadership(self, resource: Resource, node: int, upper: list[float], lower: list[float],
                         shares: list[float | None]) -> bool:
        state = self.state
        load = state.load[resource]
        if not self.may_receive_leadership[node]:
            return False
        candidates = self._leadership_candidates(resource, self._takeable(node))
        target = max(lower[node], shares[node])
        exchange_first = self._leaders_short(node, shedding=False)
        progressed = False
        while not self.stopped and load[node] < target:
            if exchange_first:
                moved = (self._exchange_leadership(resource, node, upper, lower, shedding=False)
                         or self._take_over_one(candidates, resource, node, target, upper, lower, shares))
            else:
                moved = (self._take_over_one(candidates, resource, node, target, upper, lower, shares)
                         or self._exchange_leadership(resource, node, upper, lower, shedding=False))
            if not moved and resource == Resource.LEADERS:
                moved = self._after_network_exchange(node, shedding=False, action=lambda: self._take_over_one(
                    self._leadership_candidates(resource, self._takeable(node)), resource, node, target, upper,
                    lower, shares))
            if not moved:
                break
            progressed = True
        return progressed

    def _take_over_one(self, candidates: _Candidates, resource: Resource, node: int, target: float,
                       upper: list[float], lower: list[float], shares: list[float | None]) -> bool:
        state = self.state
        load = state.load[resource]
        fruitless = 0
        for _, p in self._offer(candidates, resource, node, target - load[node], shedding=False, leadership=True):
            x = state.leadership_contribution(p, resource)
            source = state.leader[p]
            if load[node] + x > upper[node] or load[source] - x < self._giving_floor(source, node, load, lower, shares):
                continue
            if self._lead_to_first(p, source, [node]):
                return True
            fruitless += 1
            if fruitless == MAX_FRUITLESS_CANDIDATES:
                break
        return False

    def _spread_topics(self, bounds: list[tuple[int, int]]) -> None:
        state = self.state
        replica_load = state.load[Resource.REPLICAS]
        for topic, (lower, upper) in enumerate(bounds):
            counts = state.topic_counts[topic]
            progress = True
            while progress and not self.stopped:
                progress = False
                above = sorted((n for n, c in counts.items() if c > upper and state.may_hold[n]),
                               key=lambda n: (-counts[n], n))
                for source in above:
                    progress |= self._shed_topic(topic, source, lower, upper)
                if lower == 0:
                    continue
                below = sorted((n for n in range(state.node_count) if self.may_receive[n] and counts.get(n, 0) < lower),
                               key=lambda n: (counts.get(n, 0), replica_load[n], n))
                for node in below:
                    sources = sorted((n for n, c in counts.items() if c > lower and not state.frozen[n]),
                                     key=lambda n: (-counts[n], n))
                    for source in sources:
                        partitions = sorted((state.size[p], p) for p in state.topic_partitions[topic]
                                            if p in state.node_partitions[source]
                                            and p not in state.node_partitions[node] and self._movable(p))
                        if any(self._move_to_first(p, source, [node]) is not None
                               for _, p in partitions[:MAX_FRUITLESS_CANDIDATES]):
                            progress = True
                            break

    def _shed_topic(self, topic: int, source: int, lower: int, upper: int) -> bool:
        state = self.state
        counts = state.topic_counts[topic]
        replica_load = state.load[Resource.REPLICAS]
        partitions = sorted((state.size[p], p) for p in state.topic_partitions[topic]
                            if p in state.node_partitions[source] and self._movable(p))
        progressed = False
        fruitless = 0
        for _, p in partitions:
            if (self.stopped or counts.get(source, 0) <= upper or counts.get(source, 0) - 1 < lower
                    or fruitless == MAX_FRUITLESS_CANDIDATES):
                break
            destinations = sorted((n for n in range(state.node_count) if self.may_receive[n]
                                   and counts.get(n, 0) + 1 <= upper),
                                  key=lambda n: (counts.get(n, 0), replica_load[n], n))
            if self._move_to_first(p, source, destinations) is not None:
                progressed = True
                fruitless = 0
            else:
                fruitless += 1
        return progressed

    # Actions and their acceptance.

    def _movable(self, p: int) -> bool:
        """A move copies from the leader: a partition without one stays as it is."""
        return self.state.leader[p] != NO_LEADER

    def _move_to_first(self, p: int, source: int, destinations: Iterable[int]) -> int | None:
        """Move p's replica on source to the first destination (that does not hold p yet) the goals in force
        accept; which one, or None."""
        for destination in destinations:
            if p in self.state.node_partitions[destination]:
                continue
            log_dir = self._placement_dir(p, destination)
            refusal = self._move_refusal(p, source, destination, log_dir)
            if refusal is None:
                self._move(p, source, destination, log_dir)
                return destination
            self.refusals[self.current_goal][refusal] += 1
        return None

    def _lead_to_first(self, p: int, leader: int, candidates: Iterable[int]) -> bool:
        for candidate in candidates:
            refusal = self._leadership_refusal(p, leader, candidate)
            if refusal is None:
                self._lead(p, candidate)
                return True
            self.refusals[self.current_goal][refusal] += 1
        return False

    def _move_refusal(self, p: int, source: int, destination: int, destination_dir: int) -> str | None:
        """The name of a goal in force that refuses moving p's replica from source to destination, or None."""
        state = self.state
        leads = state.leader[p] == source
        bytes_in = state.bytes_in[p]
        deltas = (1, int(leads), state.size[p], bytes_in, state.leader_out[p] if leads else 0, bytes_in if leads else 0)
        load = state.load
        for name, resource, upper, lower in self.limits:
            x = deltas[resource]
            if x and (load[resource][destination] + x > upper[destination]
                      or load[resource][source] - x < lower[source]):
                return name
        if (self.dir_limits is not None and state.dir_usage[destination][destination_dir] + state.size[p]
                > self.dir_limits[destination][destination_dir]):
            return DiskCapacityGoal.name
        if self.rack_limits is not None and state.rack_of[source] != state.rack_of[destination]:
            leaving, arriving = state.rack_of[source], state.rack_of[destination]
            limits = self.rack_limits[len(state.replicas[p])]
            in_leaving = in_arriving = 0
            for n in state.replicas[p]:
                if state.rack_of[n] == leaving:
                    in_leaving += 1
                elif state.rack_of[n] == arriving:
                    in_arriving += 1
            if (limits.term(leaving, in_leaving - 1) + limits.term(arriving, in_arriving + 1)
                    > limits.term(leaving, in_leaving) + limits.term(arriving, in_arriving)):
                return RackAwareGoal.name
        if self.topic_bounds is not None:
            lower, upper = self.topic_bounds[state.topic_of[p]]
            counts = state.topic_counts[state.topic_of[p]]
            if counts.get(destination, 0) + 1 > upper or (state.may_hold[source] and counts[source] - 1 < lower):
                return TopicReplicaDistributionGoal.name
        if leads and state.demoted[destination]:
            return DemoteGoal.name
        return None

    def _leadership_refusal(self, p: int, leader: int, candidate: int) -> str | None:
        state = self.state
        load = state.load
        for name, resource, upper, lower in self.limits:
            if resource in LEADERSHIP_RESOURCES:
                x = state.leadership_contribution(p, resource)
                if x and (load[resource][candidate] + x > upper[candidate] or load[resource][leader] - x < lower[leader]):
                    return name
        if state.demoted[candidate]:
            return DemoteGoal.name
        return None

    def _placement_dir(self, p: int, destination: int) -> int:
        """The log dir a replica moving onto destination goes to: its old dir if destination held p before this
        proposal, else the dir with the most room below its limit."""
        state = self.state
        for node, log_dir in zip(self.original_replicas[p], self.original_dirs[p], strict=True):
            if node == destination:
                return log_dir
        capacities, usage = state.dir_capacity[destination], state.dir_usage[destination]
        if len(capacities) == 1:
            return 0
        limits = self.dir_limits[destination] if self.dir_limits is not None else capacities

        def room(d: int) -> float:
            return math.inf if limits[d] is None or capacities[d] is None else limits[d] - usage[d]

        return min(range(len(capacities)), key=lambda d: (-room(d), usage[d], d))

    def _move(self, p: int, source: int, destination: int, log_dir: int) -> None:
        state = self.state
        state.move_replica(p, source, destination, log_dir)
        if destination in self.original_replicas[p] and destination not in self.original_in_sync[p]:
            state.in_sync[p].discard(destination)  # back where it was out of sync: it still is
        self.actions += 1
        self.moves_left -= 1
        self.stopped = self.moves_left <= 0
        if set(state.replicas[p]) == set(self.original_replicas[p]):
            self.move_goal.pop(p, None)
        else:
            self.move_goal.setdefault(p, self.current_goal)
        self._attribute_leadership(p)

    def _lead(self, p: int, new_leader: int) -> None:
        self.state.change_leader(p, new_leader)
        self.actions += 1
        self._attribute_leadership(p)

    def _attribute_leadership(self, p: int) -> None:
        if self.state.leader[p] == self.original_leader[p]:
            self.leadership_goal.pop(p, None)
        else:
            self.leadership_goal.setdefault(p, self.current_goal)

    def _note(self, text: str) -> None:
        self.notes[self.current_goal].append(text)

    def reason(self, goal: str) -> str:
        """Why the optimizer left goal unsatisfied, as far as it knows."""
        parts = list(self.notes[goal])
        refusals = self.refusals[goal]
        if refusals:
            parts.append("actions refused by " + ", ".join(f"{name} ({count})" for name, count in
                                                           sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0]))))
        if self.stopped:
            parts.append("stopped at the move limit")
        if self.receivers is not None:
            parts.append(f"only nodes {', '.join(map(str, self.receivers))} may receive load")
        return "; ".join(parts) or "no action improves it"

    def changes(self) -> tuple[list[ReplicaMove], list[LeadershipChange]]:
        """The proposal: for each partition, its placement now against its placement before."""
        state = self.state
        ids = state.node_ids
        moves, changes = [], []
        for p in range(len(state.replicas)):
            original, current = self.original_replicas[p], state.replicas[p]
            set_changed = set(original) != set(current)
            leader, original_leader = state.leader[p], self.original_leader[p]
            if not set_changed and leader == original_leader:
                continue
            partition = state.partitions[p]
            if set_changed:
                order = list(current)
                if leader != original_leader:
                    order.remove(leader)
                    order.insert(0, leader)
                dirs = [state.dirs[p][current.index(n)] for n in order]
                added = sum(1 for n in order if n not in original)
                moves.append(ReplicaMove(
                    partition.topic, partition.index, partition.replicas, tuple(ids[n] for n in order),
                    tuple(state.dir_paths[n][d] for n, d in zip(order, dirs, strict=True)), self.move_goal[p],
                    state.size[p] * added))
            if leader != original_leader:
                changes.append(LeadershipChange(partition.topic, partition.index, partition.leader, ids[leader],
                                                self.leadership_goal[p]))
        return moves, changes
