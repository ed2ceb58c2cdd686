"""What each balancer operation asks of the optimizer, and when continuous mode acts by itself; sans-I/O.

    plan(operation, nodes, model, settings, goals, removed)      -> Proposal (or BalancerError, one line)
    automatic_action(model, mode, settings, now_ms, unavailable_since_ms, removed, timeout_ms)
                                                                  -> (operation, nodes, reason) or None

Operations:
    rebalance      every goal (or the `goals` named), nodes removed earlier kept empty
    add_nodes      replicas and leaderships move only onto the nodes given (live ones)
    remove_nodes   drain the nodes given: they hold no replica once done; BalancerError when the rest cannot
                   hold every partition's replication factor, racks or capacities
    demote         leadership leaves the nodes given; no replica moves
    heal           rebuild the replicas of unavailable nodes on live ones (continuous mode's self-healing)

Modes (`balancer.mode`): `off` (only operators' requests), `node_add` (a new node, one holding less than half
an even share of the replicas, gets its share by itself),
`continuous` (also: a node unavailable longer than balancer.node.unavailable.timeout.ms has its replicas rebuilt
elsewhere, and a log dir above balancer.disk.max.ratio sheds partitions). Self-healing needs at least 3 nodes:
with fewer, a dead node's replicas have nowhere to go that a replication factor above one could use, so
`continuous` acts as `node_add`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from odradek.balancer.control import ADD_NODES, DEMOTE, HEAL, REBALANCE, REMOVE_NODES
from odradek.balancer.goals import BalancerSettings, default_goals, goals_by_name
from odradek.balancer.model import BalancerError, ClusterModel
from odradek.balancer.optimizer import Proposal, ProposalOptions, propose

MIN_NODES_FOR_SELF_HEALING = 3
UNDERFILLED = 0.5  # a live node holding less than this share of the replicas counts as new


def plan(operation: str, nodes: Iterable[int], model: ClusterModel, settings: BalancerSettings | None = None,
         goals: Sequence[str] | None = None, removed: Iterable[int] = ()) -> Proposal:
    """The proposal for an operation on the model. `removed`: nodes removed earlier, which every proposal keeps
    empty (an add_nodes of one of them takes it back)."""
    settings = settings or BalancerSettings()
    nodes = frozenset(nodes)
    known = {n.id for n in model.nodes}
    unknown = sorted(nodes - known)
    if unknown:
        raise BalancerError(f"unknown node{'s' if len(unknown) > 1 else ''} {', '.join(map(str, unknown))}: "
                            f"the cluster has {', '.join(map(str, sorted(known)))}")
    if operation != REBALANCE and not nodes:
        raise BalancerError(f"{operation} needs at least one node id")
    removed = frozenset(removed) & known
    goal_list = default_goals(settings) if goals is None else goals_by_name(goals, settings)
    alive = {n.id for n in model.nodes if n.alive}
    if operation == REBALANCE:
        options = ProposalOptions(remove=removed)
    elif operation == ADD_NODES:
        down = sorted(nodes - alive)
        if down:
            raise BalancerError(f"cannot add node{'s' if len(down) > 1 else ''} {', '.join(map(str, down))}: "
                                "not alive")
        options = ProposalOptions(remove=removed - nodes, move_onto=nodes)
    elif operation == REMOVE_NODES:
        options = ProposalOptions(remove=removed | nodes)
    elif operation == DEMOTE:
        goal_list = []  # only DemoteGoal, added in front by the optimizer: leadership moves, replicas stay
        options = ProposalOptions(remove=removed, demote=nodes)
    elif operation == HEAL:
        options = ProposalOptions(remove=removed, heal=nodes)
    else:
        raise BalancerError(f"unknown operation {operation!r}")
    return propose(model, goal_list, options)


def automatic_action(model: ClusterModel, mode: str, settings: BalancerSettings, now_ms: int,
                     unavailable_since_ms: Mapping[int, int], removed: Iterable[int],
                     timeout_ms: int) -> tuple[str, tuple[int, ...], str] | None:
    """The operation continuous mode (or node_add mode) starts now, with its nodes and the reason, or None.
    Checked in this order: unavailable nodes past the timeout that still hold replicas (heal), new nodes (live
    ones holding less than half an even share of the replicas: add_nodes), log dirs above the disk ratio
    (rebalance)."""
    if mode == "off":
        return None
    removed = frozenset(removed)
    held = {n.id: 0 for n in model.nodes}
    for partition in model.partitions:
        for node in partition.replicas:
            held[node] = held.get(node, 0) + 1
    continuous = mode == "continuous" and len(model.nodes) >= MIN_NODES_FOR_SELF_HEALING
    if continuous:
        overdue = tuple(sorted(n.id for n in model.nodes if not n.alive and held.get(n.id)
                               and now_ms - unavailable_since_ms.get(n.id, now_ms) >= timeout_ms))
        if overdue:
            return HEAL, overdue, (f"node{'s' if len(overdue) > 1 else ''} {', '.join(map(str, overdue))} "
                                   f"unavailable for more than {timeout_ms} ms")
    live = [n for n in model.nodes if n.alive and n.id not in removed]
    if live:
        share = sum(len(p.replicas) for p in model.partitions) / len(live)
        empty = tuple(sorted(n.id for n in live if held[n.id] < share * UNDERFILLED))
        if empty and share >= 1:
            return ADD_NODES, empty, (f"node{'s' if len(empty) > 1 else ''} {', '.join(map(str, empty))} "
                                      f"{'hold' if len(empty) > 1 else 'holds'} less than half a share of replicas")
    if continuous:
        for load in model.node_loads().values():
            full = _fullest_dir(model, load.node, load.log_dir_bytes)
            if full is not None and full[1] > settings.disk_max_ratio and load.node not in removed:
                return REBALANCE, (), (f"log dir {full[0]} of node {load.node} is {full[1]:.0%} full, above "
                                       f"balancer.disk.max.ratio {settings.disk_max_ratio}")
    return None


def _fullest_dir(model: ClusterModel, node_id: int, dir_bytes: Mapping[str, int]) -> tuple[str, float] | None:
    node = next(n for n in model.nodes if n.id == node_id)
    ratios = [(d.path, dir_bytes.get(d.path, 0) / d.capacity_bytes) for d in node.log_dirs if d.capacity_bytes]
    return max(ratios, key=lambda r: r[1], default=None)
