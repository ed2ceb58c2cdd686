"""The rolling-restart planner: each safety rule on hand-written clusters, then a seeded simulation of whole
rolls over generated clusters that checks the roll's invariants step by step."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from random import Random

import pytest

from odradek.operator.rolling import (
    BROKER,
    CAUGHT_UP_LAG,
    CONTROLLER,
    ClusterState,
    Done,
    NodeState,
    PartitionState,
    QuorumState,
    Restart,
    Wait,
    next_step,
    why_not_back,
    why_not_restart,
)

B = frozenset({BROKER})
C = frozenset({CONTROLLER})
BC = frozenset({BROKER, CONTROLLER})
CHANGED = ("configuration changed",)


def node(node_id, roles=BC, *, restart=False, ready=True, running=True):
    return NodeState(node_id, roles, ready=ready and running, running=running,
                     restart_reasons=CHANGED if restart else ())


def part(name, replicas, isr=None, min_isr=1):
    topic, _, index = name.rpartition("-")
    return PartitionState(topic, int(index), tuple(replicas), tuple(replicas if isr is None else isr), min_isr)


def quorum(voters, leader, **lag):
    lags = {int(k[1:]): v for k, v in lag.items()}  # n2=500 -> {2: 500}
    return QuorumState(frozenset(voters), leader, {v: lags.get(v, 0) for v in voters})


def three_combined(*, restart=(), partitions=(), leader=0, restarting=(), **lag):
    """Nodes 0, 1, 2, each broker and controller, all voters."""
    nodes = tuple(node(i, restart=i in restart) for i in range(3))
    return ClusterState(nodes, quorum({0, 1, 2}, leader, **lag), tuple(partitions), frozenset(restarting))


def with_nodes(state, *replaced):
    by_id = {n.node_id: n for n in state.nodes}
    by_id.update({n.node_id: n for n in replaced})
    return ClusterState(tuple(by_id.values()), state.quorum, state.partitions, state.restarting)


def with_restart(n, restart):
    return NodeState(n.node_id, n.roles, n.ready, n.running, CHANGED if restart else ())


# --- done ----------------------------------------------------------------------------------------------------

def test_the_plan_is_done_when_no_node_needs_a_restart():
    assert next_step(three_combined(partitions=[part("orders-0", [0, 1, 2], min_isr=2)])) == Done()


def test_a_restart_names_why_the_node_needs_it():
    state = ClusterState((NodeState(4, B, restart_reasons=("configuration changed", "certificate renewed")),
                          node(0, C)), quorum({0}, 0))
    assert next_step(state) == Restart(4, "configuration changed, certificate renewed")


# --- rule 1: one node at a time --------------------------------------------------------------------------------

def test_a_restarted_node_whose_pod_is_not_ready_holds_the_roll():
    state = with_nodes(three_combined(restart={0, 2}, restarting={1}), node(1, ready=False))
    assert next_step(state) == Wait("node 1 is restarting: pod not ready")
    assert why_not_back(state, 1) == "node 1 is restarting: pod not ready"


def test_a_restarted_node_holds_the_roll_until_it_is_back_in_every_isr_it_belongs_to():
    partitions = [part("orders-0", [1, 2], isr=[2]), part("orders-1", [0, 1], isr=[0, 1]),
                  part("audit-3", [1, 0], isr=[0])]
    state = three_combined(restart={0}, partitions=partitions, restarting={1})
    assert next_step(state) == Wait("node 1 is restarting: not yet back in the ISR of audit-3, orders-0")


def test_a_restarted_controller_holds_the_roll_until_its_quorum_lag_is_small():
    lagging = three_combined(restart={2}, restarting={1}, n1=CAUGHT_UP_LAG + 1)
    assert next_step(lagging) == Wait(
        f"node 1 is restarting: {CAUGHT_UP_LAG + 1} records behind the quorum leader (more than {CAUGHT_UP_LAG})")
    unknown = three_combined(restart={2}, restarting={1}, n1=None)
    assert next_step(unknown) == Wait("node 1 is restarting: its quorum lag is unknown")
    assert next_step(three_combined(restart={2}, restarting={1}, n1=CAUGHT_UP_LAG)) == Restart(2, CHANGED[0])
    assert next_step(lagging, max_lag=1000) == Restart(2, CHANGED[0])


def test_a_restarted_node_that_is_back_no_longer_holds_the_roll():
    state = three_combined(restart={2}, partitions=[part("orders-0", [1, 2])], restarting={1})
    assert why_not_back(state, 1) is None
    assert next_step(state) == Restart(2, CHANGED[0])
    assert next_step(three_combined(restarting={1})) == Done()


def test_a_restarted_node_no_longer_in_the_cluster_holds_nothing():
    assert next_step(three_combined(restart={1}, restarting={7})) == Restart(1, CHANGED[0])


def test_a_stuck_node_waits_for_the_restarted_one_too():
    state = with_nodes(three_combined(restarting={1}), node(1, ready=False), node(2, restart=True, running=False))
    assert next_step(state) == Wait("node 1 is restarting: pod not ready")


# --- rule 2: min.insync.replicas ---------------------------------------------------------------------------------

def test_a_broker_whose_restart_would_take_a_partition_below_min_isr_waits():
    state = three_combined(restart={2}, leader=1,
                           partitions=[part("orders-0", [0, 1, 2], isr=[1, 2], min_isr=2)])
    reason = "node 2: restarting it would take orders-0 below min.insync.replicas 2 (in-sync 1, 2)"
    assert next_step(state) == Wait(reason)
    assert why_not_restart(state, 2) == reason
    assert why_not_restart(state, 0) is None  # outside the ISR


def test_a_partition_already_below_min_isr_blocks_its_in_sync_replicas():
    state = three_combined(restart={1}, partitions=[part("orders-0", [0, 1, 2], isr=[1], min_isr=2)])
    assert next_step(state) == Wait(
        "node 1: restarting it would take orders-0 further below min.insync.replicas 2 (in-sync 1)")


def test_a_replica_outside_the_isr_can_be_restarted_whatever_the_isr():
    state = three_combined(restart={2}, partitions=[part("orders-0", [0, 1, 2], isr=[1], min_isr=2)])
    assert next_step(state) == Restart(2, CHANGED[0])


def test_a_partition_with_no_spare_replica_does_not_hold_the_roll():
    # as in Strimzi: it loses acks=all writes whichever replica restarts, in any roll
    state = three_combined(restart={0}, partitions=[part("logs-0", [0]), part("logs-1", [0]),
                                                    part("orders-0", [0, 1], min_isr=2)])
    assert next_step(state) == Restart(0, CHANGED[0])


def test_a_partition_with_a_spare_in_sync_replica_does_not_block():
    state = three_combined(restart={1}, partitions=[part("orders-0", [0, 1, 2], min_isr=2)])
    assert next_step(state) == Restart(1, CHANGED[0])


def test_a_controller_only_node_is_not_held_by_partitions():
    state = ClusterState((node(0, C, restart=True), node(1, B), node(2, C), node(3, C)), quorum({0, 2, 3}, 2),
                         (part("orders-0", [1], min_isr=2),))
    assert next_step(state) == Restart(0, CHANGED[0])


# --- rule 3: the quorum keeps its majority ------------------------------------------------------------------------

def test_a_controller_is_not_restarted_when_the_quorum_would_lose_its_majority():
    state = three_combined(restart={1}, n2=CAUGHT_UP_LAG + 1)
    assert next_step(state) == Wait("node 1: restarting it would leave the quorum without a majority "
                                    "(caught-up voters besides it: 0, of 3 voters)")


def test_a_voter_of_unknown_lag_is_not_caught_up():
    assert isinstance(next_step(three_combined(restart={1}, n2=None)), Wait)


def test_a_lagging_voter_can_be_restarted_since_it_does_not_count_towards_the_majority():
    assert next_step(three_combined(restart={2}, n2=CAUGHT_UP_LAG + 1)) == Restart(2, CHANGED[0])


def test_no_controller_is_restarted_without_a_quorum_leader():
    state = three_combined(restart={1}, leader=None)
    assert next_step(state) == Wait("node 1: restarting it would leave the quorum without a majority "
                                    "(caught-up voters besides it: none, of 3 voters)")


def test_a_quorum_of_one_or_two_voters_restarts_a_voter_once_the_others_are_caught_up():
    assert next_step(ClusterState((node(0, restart=True),), quorum({0}, 0))) == Restart(0, CHANGED[0])
    two = (node(0), node(1, restart=True))
    assert next_step(ClusterState(two, quorum({0, 1}, 0))) == Restart(1, CHANGED[0])
    assert next_step(ClusterState(two, quorum({0, 1}, 0, n1=None))) == Restart(1, CHANGED[0])  # the other: 0
    behind = ClusterState((node(0, restart=True), node(1)), quorum({0, 1}, 1, n0=CAUGHT_UP_LAG + 1))
    assert next_step(behind) == Restart(0, CHANGED[0])  # the leader, 1, is caught up
    other_behind = ClusterState((node(0, restart=True), node(1), node(2, B)), quorum({0, 1}, 0, n1=None))
    assert isinstance(next_step(other_behind), Wait)  # the leader would leave a voter of unknown lag alone


def test_five_voters_tolerate_one_lagging_voter_during_a_restart_but_not_two():
    nodes = tuple(node(i, C, restart=i == 4) for i in range(5)) + (node(5, B),)
    one = ClusterState(nodes, quorum(range(5), 0, n1=None))
    assert next_step(one) == Restart(4, CHANGED[0])
    two = ClusterState(nodes, quorum(range(5), 0, n1=None, n2=500))
    assert next_step(two) == Wait("node 4: restarting it would leave the quorum without a majority "
                                  "(caught-up voters besides it: 0, 3, of 5 voters)")


# --- rule 4: the active controller goes last ------------------------------------------------------------------------

def test_the_active_controller_is_restarted_after_every_other_node():
    assert next_step(three_combined(restart={0, 1, 2}, leader=1)) == Restart(0, CHANGED[0])
    assert next_step(three_combined(restart={1, 2}, leader=1)) == Restart(2, CHANGED[0])
    assert next_step(three_combined(restart={1}, leader=1)) == Restart(1, CHANGED[0])


def test_the_active_controller_waits_for_other_nodes_even_when_they_are_blocked():
    state = three_combined(restart={0, 2}, leader=0,
                           partitions=[part("orders-0", [0, 1, 2], isr=[1, 2], min_isr=2)])
    assert next_step(state) == Wait(
        "node 0: the active controller restarts last (node 2 still needs a restart); "
        "node 2: restarting it would take orders-0 below min.insync.replicas 2 (in-sync 1, 2)")


# --- rule 5: a node that is not running goes first -------------------------------------------------------------------

def test_a_node_that_is_not_running_is_restarted_first_whatever_the_isr():
    state = with_nodes(three_combined(restart={0, 1}, partitions=[part("orders-0", [1, 2], min_isr=2)]),
                       node(0, B, restart=True), node(2, restart=True, running=False))
    assert next_step(state) == Restart(2, "not running; configuration changed")
    assert why_not_restart(state, 2) is None


def test_a_controller_that_is_not_running_is_restarted_even_without_a_quorum_majority():
    state = with_nodes(three_combined(n1=None, n2=None), node(2, restart=True, running=False))
    assert next_step(state) == Restart(2, "not running; configuration changed")


def test_a_node_that_is_not_running_and_needs_no_restart_is_left_alone():
    state = with_nodes(three_combined(n2=None), node(2, running=False))
    assert next_step(state) == Done()


# --- rule 6: order among the rest ----------------------------------------------------------------------------------------

def test_broker_only_nodes_go_before_controllers_lowest_id_first():
    nodes = (node(1, C, restart=True), node(2, BC, restart=True), node(5, B, restart=True),
             node(4, B, restart=True), node(3, C))
    state = ClusterState(nodes, quorum({1, 2, 3}, 3))
    assert next_step(state) == Restart(4, CHANGED[0])
    done = {4, 5}
    remaining = ClusterState(tuple(with_restart(n, n.node_id not in done and n.needs_restart) for n in nodes),
                             state.quorum)
    assert next_step(remaining) == Restart(1, CHANGED[0])


def test_a_blocked_broker_is_skipped_for_a_safe_controller():
    nodes = (node(1, C, restart=True), node(2, C), node(3, C), node(4, B, restart=True), node(5, B), node(6, B))
    state = ClusterState(nodes, quorum({1, 2, 3}, 2), (part("orders-0", [4, 5, 6], isr=[4, 5], min_isr=2),))
    assert next_step(state) == Restart(1, CHANGED[0])


def test_when_no_node_is_safe_the_wait_gives_every_reason():
    state = three_combined(restart={0, 1, 2}, leader=0,
                           partitions=[part("orders-0", [0, 1, 2], isr=[1, 2], min_isr=2)])
    assert next_step(state) == Wait(
        "node 0: the active controller restarts last (nodes 1, 2 still need a restart); "
        "node 1: restarting it would take orders-0 below min.insync.replicas 2 (in-sync 1, 2); "
        "node 2: restarting it would take orders-0 below min.insync.replicas 2 (in-sync 1, 2)")


def test_why_not_restart_names_the_node_being_waited_for():
    state = with_nodes(three_combined(restart={0}, restarting={1}), node(1, ready=False))
    assert why_not_restart(state, 0) == "node 0: one node at a time, and node 1 is restarting: pod not ready"


def test_duplicate_node_ids_are_refused():
    with pytest.raises(ValueError, match="duplicate node ids"):
        ClusterState((node(1), node(1)), quorum({1}, 1))


# --- the simulation --------------------------------------------------------------------------------------------------------

@dataclass
class SimNode:
    node_id: int
    roles: frozenset[str]
    ready: bool = True
    running: bool = True
    reasons: tuple[str, ...] = ()


@dataclass
class SimPartition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: list[int]
    min_isr: int


@dataclass
class Returning:
    """A node the planner restarted, on its way back: pod ready, then ISRs and quorum lag in some order."""

    stages: list[str]
    delay: int


@dataclass
class Sim:
    """A cluster the planner rolls: Restart takes the node out of every ISR and the quorum; Wait lets time pass,
    during which restarted nodes come back stage by stage, shrunk ISRs and lagging voters heal, and (early on)
    some noise shrinks ISRs, lets followers fall behind or moves the quorum leadership."""

    seed: int
    rng: Random
    nodes: dict[int, SimNode]
    partitions: list[SimPartition]
    voters: frozenset[int]
    leader: int | None
    lag: dict[int, int | None]
    layout: str
    healthy: bool  # every node needing a restart can be restarted once the cluster has healed
    restarting: set[int] = field(default_factory=set)  # what the shell tells the planner
    returning: dict[int, Returning] = field(default_factory=dict)  # the simulator's own view
    log: list[str] = field(default_factory=list)

    def observe(self) -> ClusterState:
        nodes = tuple(NodeState(n.node_id, n.roles, n.ready, n.running, n.reasons) for n in self.nodes.values())
        partitions = tuple(PartitionState(p.topic, p.partition, p.replicas, tuple(p.isr), p.min_isr)
                           for p in self.partitions)
        return ClusterState(nodes, QuorumState(self.voters, self.leader, dict(self.lag)), partitions,
                            frozenset(self.restarting))

    def caught_up(self) -> set[int]:
        if self.leader is None:
            return set()
        return {v for v in self.voters if v == self.leader
                or (self.nodes[v].running and self.lag[v] is not None and self.lag[v] <= CAUGHT_UP_LAG)}

    def has_majority(self) -> bool:
        return 2 * len(self.caught_up()) > len(self.voters)

    def fail(self, message: str):
        pytest.fail(f"seed {self.seed} ({self.layout}): {message}\n" + "\n".join(self.log[-30:]))

    def restart(self, node_id: int):
        isr_before = {(p.topic, p.partition): len(p.isr) for p in self.partitions}
        majority_before = self.has_majority()
        n = self.nodes[node_id]
        n.ready, n.running, n.reasons = False, True, ()
        for p in self.partitions:
            if node_id in p.isr:
                p.isr.remove(node_id)
        if node_id in self.voters:
            self.lag[node_id] = None
            if self.leader == node_id:
                successors = sorted(self.caught_up() - {node_id})
                self.leader = successors[0] if successors else None
                if self.leader is not None:
                    self.lag[self.leader] = 0
        self.restarting.add(node_id)
        later = ["isr", "lag"] if node_id in self.voters else ["isr"]
        self.rng.shuffle(later)
        self.returning[node_id] = Returning(["ready", *later], self.rng.randint(0, 3))
        for p in self.partitions:  # (a)
            before = isr_before[(p.topic, p.partition)]
            if before >= p.min_isr > len(p.isr) and len(p.replicas) > p.min_isr:  # not exempt
                self.fail(f"restarting node {node_id} took {p.topic}-{p.partition} below min.insync.replicas "
                          f"{p.min_isr} (in-sync {before} -> {len(p.isr)})")
        if majority_before and not self.has_majority() and len(self.voters) >= 3:  # (b); 1-2 voters: none to keep
            self.fail(f"restarting node {node_id} lost the quorum's majority")

    def tick(self) -> bool:
        """Time passes; whether anything changed or still can."""
        changed = False
        for node_id, back in list(self.returning.items()):
            if back.delay > 0:
                back.delay -= 1
                changed = True
                continue
            stage = back.stages.pop(0)
            if stage == "ready":
                self.nodes[node_id].ready = True
            elif stage == "isr":
                for p in self.partitions:
                    if node_id in p.replicas and node_id not in p.isr:
                        p.isr.append(node_id)
            else:
                self.lag[node_id] = self.rng.randint(0, CAUGHT_UP_LAG)
            back.delay = self.rng.randint(0, 2)
            if not back.stages or self.is_back(node_id):
                del self.returning[node_id]
            changed = True
        state = self.observe()
        self.restarting = {i for i in self.restarting if why_not_back(state, i) is not None}
        if len(self.log) < 40 and self.rng.random() < 0.15:
            self.noise()
            changed = True
        heals = self.heals()
        if heals and self.rng.random() < 0.6:
            self.rng.choice(heals)()
        return changed or bool(heals)

    def is_back(self, node_id: int) -> bool:
        """Ready, in the ISR of every partition it is a replica of, and caught up if a voter."""
        return (self.nodes[node_id].ready
                and all(node_id in p.isr for p in self.partitions if node_id in p.replicas)
                and (node_id not in self.voters or node_id in self.caught_up()))

    def heals(self) -> list:
        heals = []
        down = set(self.returning) | {n.node_id for n in self.nodes.values() if not n.running}
        for n in self.nodes.values():
            if n.running and not n.ready and n.node_id not in down:
                heals.append(lambda n=n: setattr(n, "ready", True))
        for p in self.partitions:
            for r in p.replicas:
                if r not in p.isr and r not in down and self.nodes[r].ready:
                    heals.append(lambda p=p, r=r: p.isr.append(r))
        for v in self.voters:
            if v not in down and v != self.leader and (self.lag[v] is None or self.lag[v] > CAUGHT_UP_LAG):
                heals.append(lambda v=v: self.lag.__setitem__(v, 0))
        if self.leader is None:
            running = sorted(v for v in self.voters if v not in down)
            if running:
                heals.append(lambda: self.elect(self.rng.choice(running)))
        return heals

    def elect(self, leader: int):
        self.leader = leader
        self.lag[leader] = 0

    def noise(self):
        kind = self.rng.choice(["shrink", "fall behind", "move leadership"])
        if kind == "shrink":
            p = self.rng.choice(self.partitions)
            members = [r for r in p.isr if r not in self.returning]
            if members:
                p.isr.remove(self.rng.choice(members))
        elif kind == "fall behind":
            followers = sorted(self.voters - {self.leader} - set(self.returning))
            if followers:
                self.lag[self.rng.choice(followers)] = CAUGHT_UP_LAG * 5
        else:
            others = sorted(self.caught_up() - {self.leader})
            if others:
                self.elect(self.rng.choice(others))


def generate(seed: int) -> Sim:
    rng = Random(seed)
    count = rng.randint(3, 6)
    ids = sorted(rng.sample(range(count + 3), count))
    healthy = rng.random() < 0.7
    layout = rng.choice(["combined", "dedicated", "mixed"])
    voter_count = 3 if healthy else rng.choice([1, 2, 3, 3])
    if healthy and layout != "combined" and count - voter_count < 2:
        layout = "combined"  # room for two brokers, so that every partition can have a spare replica
    controllers = rng.sample(ids, voter_count)
    nodes = {}
    for i in ids:
        if i not in controllers:
            roles = B
        elif layout == "combined" or (layout == "mixed" and rng.random() < 0.5):
            roles = BC
        else:
            roles = C
        nodes[i] = SimNode(i, roles)
    brokers = [i for i in ids if BROKER in nodes[i].roles]
    if not brokers:
        nodes[controllers[0]].roles = BC
        brokers = [controllers[0]]
    partitions = []
    for t in range(rng.randint(1, 3)):
        if healthy:
            rf = rng.randint(2, min(3, len(brokers)))
            min_isr = rng.randint(1, min(2, rf - 1))
        else:
            rf = rng.randint(1, min(3, len(brokers)))
            min_isr = rng.randint(1, 2)
        for i in range(rng.randint(1, 4)):
            replicas = tuple(rng.sample(brokers, rf))
            isr = list(replicas)
            if rng.random() < 0.3:
                isr.remove(rng.choice(isr))
            partitions.append(SimPartition(f"t{t}", i, replicas, isr, min_isr))
    for n in nodes.values():
        if rng.random() < 0.5:
            n.reasons = tuple(rng.sample(["configuration changed", "certificate renewed"], rng.randint(1, 2)))
        if rng.random() < (0.1 if healthy else 0.3):  # a down node with no restart asked stays down
            n.running = n.ready = False
            if healthy or rng.random() < 0.3:
                n.reasons = n.reasons or ("configuration changed",)
        elif rng.random() < 0.1:
            n.ready = False
        if not n.ready:
            for p in partitions:
                if n.node_id in p.isr:
                    p.isr.remove(n.node_id)
    voters = frozenset(controllers)
    lag = {v: None if not nodes[v].running else rng.choice([0, 0, 0, 5, CAUGHT_UP_LAG * 5, None])
           for v in voters}
    running = sorted(v for v in voters if nodes[v].running)
    leader = rng.choice(running) if running else None
    if leader is not None:
        lag[leader] = 0
    return Sim(seed, rng, nodes, partitions, voters, leader, lag, layout, healthy)


def roll(sim: Sim) -> tuple[object, Counter]:
    """Runs the planner to Done, or until it waits on a cluster that can no longer change."""
    restarts: Counter = Counter()
    for _ in range(2000):
        state = sim.observe()
        step = next_step(state)
        if next_step(state) != step:
            sim.fail("the planner is not deterministic")
        sim.log.append(f"{step}  isr={[(p.topic, p.partition, p.isr) for p in sim.partitions]} "
                       f"leader={sim.leader} lag={sim.lag}")
        if isinstance(step, Done):
            if any(n.reasons for n in sim.nodes.values()) or not all(map(sim.is_back, sim.returning)):
                sim.fail("Done while a node still needs a restart or is not back")
            return step, restarts
        if isinstance(step, Wait):
            if not step.reason:
                sim.fail("a Wait without a reason")
            if not sim.tick():
                return step, restarts
            continue
        n = step.node_id
        if not all(map(sim.is_back, sim.returning)):  # (c)
            sim.fail(f"restarted node {n} while node(s) {sorted(sim.returning)} restarted earlier are not back")
        if not sim.nodes[n].reasons:
            sim.fail(f"restarted node {n}, which needed no restart")
        if n == sim.leader:  # (d)
            others = sorted(i for i, o in sim.nodes.items() if o.reasons and i != n)
            if others:
                sim.fail(f"restarted the active controller {n} before nodes {others}")
        restarts[n] += 1
        sim.restart(n)
    sim.fail("the roll did not settle in 2000 steps")
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", range(400))
def test_a_simulated_roll_keeps_every_partition_and_the_quorum_available(seed):
    sim = generate(seed)
    needing = {n.node_id for n in sim.nodes.values() if n.reasons}
    last, restarts = roll(sim)
    if any(count > 1 for count in restarts.values()) or not set(restarts) <= needing:
        sim.fail(f"restarts {dict(restarts)}, needed by {sorted(needing)}")
    if sim.healthy:  # (e)
        if last != Done():
            sim.fail(f"a healthy cluster's roll ended with {last}")
        if dict(restarts) != dict.fromkeys(needing, 1):
            sim.fail(f"restarts {dict(restarts)}, needed by {sorted(needing)}")


def test_the_generated_clusters_cover_every_layout_and_outcome():
    seen = Counter()
    for seed in range(400):
        sim = generate(seed)
        seen[sim.layout] += 1
        seen["healthy" if sim.healthy else "unhealthy"] += 1
        seen["stuck"] += any(not n.running for n in sim.nodes.values())
        seen["shrunk"] += any(len(p.isr) < len(p.replicas) for p in sim.partitions)
        last, _ = roll(sim)
        seen["ends waiting" if isinstance(last, Wait) else "ends done"] += 1
    assert all(seen[k] >= 20 for k in ("combined", "dedicated", "mixed", "healthy", "unhealthy", "stuck",
                                       "shrunk", "ends done")), seen
    assert seen["ends waiting"] >= 10, seen  # rarer: partitions with no spare replica and small quorums roll
