"""One step of a rolling restart as the cluster handler takes it (`_roll`), from the nodes' Pods as a real API
server shows them mid-roll: a Pod gone and not yet created again, a Pod terminating in its grace period, a crash
loop, a restart superseded by a newer change; and an operator restarted mid-roll (its memory empty). The rule
checked: no node is restarted while another is not back."""

from __future__ import annotations

import asyncio

from odradek.operator.cluster_handler import ClusterMemory, _roll
from odradek.operator.observe import Observation, ObserveError
from odradek.operator.rolling import NodeState, PartitionState, QuorumState

ROLES = frozenset({"broker", "controller"})
PODS = {0: "c-0", 1: "c-1", 2: "c-2"}


class DeletesOnly:
    """The Kubernetes API as _roll uses it: it only deletes Pods."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete(self, kind, namespace, name) -> bool:
        self.deleted.append(name)
        return True


def observation(isr: tuple[int, ...] = (0, 1, 2), min_isr: int = 1) -> Observation:
    partitions = tuple(PartitionState("t", p, (0, 1, 2), isr, min_isr) for p in range(3))
    return Observation(QuorumState(frozenset({0, 1, 2}), 2, {0: 0, 1: 0, 2: 0}), partitions, frozenset({0, 1, 2}))


def roll(nodes: list[NodeState], observed, memory: ClusterMemory) -> tuple[list[str], list]:
    kube = DeletesOnly()
    warnings = asyncio.run(_roll(kube, "ns", "c", nodes, PODS, observed, memory))
    return kube.deleted, warnings


def changed(node_id: int, **state) -> NodeState:
    return NodeState(node_id, ROLES, restart_reasons=("configuration changed",), **state)


def test_a_node_whose_pod_is_gone_is_waited_for_until_back_in_every_isr():
    memory = ClusterMemory(restarting={1})
    gone = NodeState(1, ROLES, ready=False)  # deleted, not created again yet
    deleted, warnings = roll([changed(0), gone, changed(2)], observation(isr=(0, 2)), memory)
    assert deleted == [] and "node 1 is restarting" in warnings[0][2]

    # its Pod ready again, but not yet back in the ISR: still waited for, though min ISR 1 would not stop a roll
    deleted, _ = roll([changed(0), NodeState(1, ROLES), changed(2)], observation(isr=(0, 2)), memory)
    assert deleted == [] and memory.restarting == {1}

    deleted, _ = roll([changed(0), NodeState(1, ROLES), changed(2)], observation(), memory)
    assert deleted == ["c-0"] and memory.restarting == {0}


def test_an_operator_restarted_mid_roll_waits_for_a_terminating_pod():
    terminating = NodeState(1, ROLES, ready=False)  # in its grace period: the handler counts it not ready
    deleted, warnings = roll([changed(0), terminating, changed(2)], observation(isr=(0, 2)), ClusterMemory())
    assert deleted == [] and "node 1" in warnings[0][2]


def test_a_crash_looping_node_that_needs_a_restart_goes_first():
    deleted, _ = roll([NodeState(0, ROLES), changed(1, ready=False, running=False), changed(2)], observation(),
                      ClusterMemory())
    assert deleted == ["c-1"]


def test_a_restart_superseded_by_a_newer_change_makes_the_node_a_candidate_again():
    memory = ClusterMemory(restarting={0})
    # node 0 came back with the old change's configuration while a newer one arrived; it is not awaited forever
    deleted, _ = roll([changed(0, ready=False, running=False), NodeState(1, ROLES), NodeState(2, ROLES)],
                      observation(), memory)
    assert deleted == ["c-0"]


def test_without_an_observation_only_a_node_serving_nothing_restarts():
    error = ObserveError("no broker answered")
    deleted, warnings = roll([changed(0), changed(1), changed(2)], error, ClusterMemory())
    assert deleted == [] and "no broker answered" in warnings[0][2]
    deleted, _ = roll([changed(0), changed(1, ready=False, running=False), changed(2)], error, ClusterMemory())
    assert deleted == ["c-1"]
