"""The rolling-restart planner: from the cluster's observed state, the next safe step of a rolling restart,
with the safety rules of Strimzi's KafkaRoller.

    step = next_step(ClusterState(nodes, quorum, partitions, restarting=frozenset({3})))
    match step:
        case Restart(node_id, reason): ...      # delete that node's pod; add it to `restarting`
        case Wait(reason): ...                  # observe again later; `reason` goes into the status
        case Done(): ...                        # no node needs a restart

It is sans-I/O and keeps no state: the shell observes the cluster (pods, the metadata quorum's voter lags,
every partition's ISR), remembers which node it restarted (`restarting`) until `why_not_back` says it is back,
and asks again. The same observation always gives the same step.

The rules, in order:

1. One node at a time. While a node in `restarting` is not back (its pod is not ready, or it is not yet in the
   ISR of every partition it is a replica of, or it is a voter whose lag behind the quorum leader is unknown
   or above `max_lag` records), wait for it.
2. A broker is not restarted if that would take a partition below its min.insync.replicas: every partition
   whose ISR holds the node must keep len(ISR) - 1 >= min.insync.replicas (a partition already below it
   blocks too). A node outside a partition's ISR cannot lower that ISR by restarting. As in Strimzi, a
   partition with no more replicas than its min.insync.replicas is exempt: it loses acks=all writes whichever
   of its replicas restarts, so it cannot keep them through any roll, and holding the roll for it would hold
   it for good.
3. A controller is not restarted if the quorum would lose its majority: the voters caught up with the
   leader (lag <= `max_lag`; the leader itself always is), other than this node, must be a majority of all
   voters. A quorum of one or two voters has no majority to keep through a restart: there, a voter is
   restarted once every other voter is caught up.
4. The active controller goes last: it is restarted only when no other node needs a restart.
5. A node that is not running at all (crash loop, pod stuck not ready) and needs a restart is restarted
   first, lowest id first, whatever rules 2-4 say: it serves nothing, so restarting it cannot make anything
   worse.
6. Otherwise the first safe node in order: broker-only nodes, then controllers (dedicated or combined),
   lowest id first within each. When none is safe, wait, with each candidate's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

BROKER = "broker"
CONTROLLER = "controller"

# A voter at most this many records behind the quorum leader is caught up.
CAUGHT_UP_LAG = 100


@dataclass(frozen=True)
class NodeState:
    """One node as observed: its roles, its pod, and why it needs a restart (empty: it does not)."""

    node_id: int
    roles: frozenset[str]
    ready: bool = True
    running: bool = True  # False: not running at all (crash loop, pod stuck not ready)
    restart_reasons: tuple[str, ...] = ()  # e.g. ("configuration changed", "certificate renewed")

    @property
    def needs_restart(self) -> bool:
        return bool(self.restart_reasons)

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles


@dataclass(frozen=True)
class QuorumState:
    """The metadata quorum: its voters, the active controller (None: no leader), and each voter's lag behind
    the leader in records (None or absent: unknown)."""

    voters: frozenset[int]
    leader_id: int | None
    lag: Mapping[int, int | None] = field(default_factory=dict)

    def caught_up(self, max_lag: int) -> frozenset[int]:
        """The voters at most `max_lag` records behind the leader, the leader included."""
        if self.leader_id is None:
            return frozenset()
        return frozenset(v for v in self.voters
                         if v == self.leader_id or _within(self.lag.get(v), max_lag))


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync_replicas: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class ClusterState:
    """Everything the planner looks at. `restarting`: the nodes whose pod the shell deleted and that are not
    yet back (ids of nodes no longer in `nodes` are ignored)."""

    nodes: tuple[NodeState, ...]
    quorum: QuorumState
    partitions: tuple[PartitionState, ...] = ()
    restarting: frozenset[int] = frozenset()

    def __post_init__(self):
        ids = [n.node_id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate node ids in {sorted(ids)}")

    def node(self, node_id: int) -> NodeState:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)


@dataclass(frozen=True)
class Restart:
    node_id: int
    reason: str


@dataclass(frozen=True)
class Wait:
    reason: str


@dataclass(frozen=True)
class Done:
    pass


Step = Restart | Wait | Done


def next_step(state: ClusterState, *, max_lag: int = CAUGHT_UP_LAG) -> Step:
    """The next step of the rolling restart (rules 1-6 in the module's docstring)."""
    waiting = _not_back(state, max_lag)
    if waiting:
        return Wait("; ".join(waiting))
    candidates = sorted((n for n in state.nodes if n.needs_restart),
                        key=lambda n: (n.is_controller, n.node_id))
    if not candidates:
        return Done()
    for n in candidates:
        if not n.running:
            return Restart(n.node_id, "not running; " + ", ".join(n.restart_reasons))
    reasons = []
    for n in candidates:
        blocker = _blocker(state, n, max_lag)
        if blocker is None:
            return Restart(n.node_id, ", ".join(n.restart_reasons))
        reasons.append(blocker)
    return Wait("; ".join(reasons))


def why_not_restart(state: ClusterState, node_id: int, *, max_lag: int = CAUGHT_UP_LAG) -> str | None:
    """Why `node_id` cannot be restarted now ("node 2: ..."), or None if it could be, whether or not it
    needs a restart. A node that is not running can always be restarted once no other node is restarting."""
    waiting = _not_back(state, max_lag)
    if waiting:
        return f"node {node_id}: one node at a time, and " + "; ".join(waiting)
    node = state.node(node_id)
    if not node.running:
        return None
    return _blocker(state, node, max_lag)


def why_not_back(state: ClusterState, node_id: int, *, max_lag: int = CAUGHT_UP_LAG) -> str | None:
    """Why a restarted node is not back yet ("node 3 is restarting: ..."), or None once it is: its pod is
    ready, it is in the ISR of every partition it is a replica of, and as a voter it is caught up."""
    try:
        node = state.node(node_id)
    except KeyError:
        return None
    if not node.ready:
        return f"node {node_id} is restarting: pod not ready"
    outside = [p.name for p in _sorted(state.partitions) if node_id in p.replicas and node_id not in p.isr]
    if outside:
        return f"node {node_id} is restarting: not yet back in the ISR of {_names(outside)}"
    quorum = state.quorum
    if node_id in quorum.voters and quorum.leader_id is None:
        return f"node {node_id} is restarting: the quorum has no leader yet"
    if node_id in quorum.voters and node_id != quorum.leader_id:
        lag = quorum.lag.get(node_id)
        if lag is None:
            return f"node {node_id} is restarting: its quorum lag is unknown"
        if lag > max_lag:
            return f"node {node_id} is restarting: {lag} records behind the quorum leader (more than {max_lag})"
    return None


def _not_back(state: ClusterState, max_lag: int) -> list[str]:
    return [r for r in (why_not_back(state, i, max_lag=max_lag) for i in sorted(state.restarting)) if r]


def _blocker(state: ClusterState, node: NodeState, max_lag: int) -> str | None:
    """Rules 2, 3 and 4 for a running node, in that order."""
    if node.is_broker:
        below = [p for p in _sorted(state.partitions) if node.node_id in p.isr
                 and len(p.isr) - 1 < p.min_insync_replicas < len(p.replicas)]
        if below:
            p = below[0]
            isr = ", ".join(str(r) for r in sorted(p.isr))
            further = "further " if len(p.isr) < p.min_insync_replicas else ""
            text = (f"node {node.node_id}: restarting it would take {p.name} {further}below "
                    f"min.insync.replicas {p.min_insync_replicas} (in-sync {isr})")
            if len(below) > 1:
                text += f", and {len(below) - 1} other partition{'s' if len(below) > 2 else ''}"
            return text
    quorum = state.quorum
    if node.is_controller and node.node_id in quorum.voters:
        caught_up = quorum.caught_up(max_lag)
        others = caught_up - {node.node_id}
        small = len(quorum.voters) < 3 and others == quorum.voters - {node.node_id}  # no majority to keep
        if 2 * len(others) <= len(quorum.voters) and not small:
            listed = ", ".join(str(v) for v in sorted(others)) or "none"
            return (f"node {node.node_id}: restarting it would leave the quorum without a majority "
                    f"(caught-up voters besides it: {listed}, of {len(quorum.voters)} voters)")
    if node.node_id == quorum.leader_id:
        others = [n.node_id for n in state.nodes if n.needs_restart and n.node_id != node.node_id]
        if others:
            listed = ", ".join(str(i) for i in sorted(others))
            return (f"node {node.node_id}: the active controller restarts last "
                    f"(node{'s' if len(others) > 1 else ''} {listed} still need{'' if len(others) > 1 else 's'} "
                    f"a restart)")
    return None


def _within(lag: int | None, max_lag: int) -> bool:
    return lag is not None and lag <= max_lag


def _sorted(partitions: tuple[PartitionState, ...]) -> list[PartitionState]:
    return sorted(partitions, key=lambda p: (p.topic, p.partition))


def _names(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 5 else ", ".join(names[:5]) + f" and {len(names) - 5} more"
