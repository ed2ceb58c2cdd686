"""OdradekRebalance's state machine (rebalance_handler), pass by pass, with the balancer's answers given: the
states Strimzi's KafkaRebalance has, the annotation consumed, a refusal terminal until refresh, a balancer that
does not answer asked again. tests/operator/test_nodes.py runs it against a real cluster's balancer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from odradek.balancer.control import ControlError
from odradek.balancer.model import BalancerError
from odradek.operator import rebalance_handler
from odradek.operator.rebalance_handler import ANNOTATION, next_action, parse_rebalance, reconcile_rebalance


def resource(spec: dict | None = None, status: dict | None = None, annotation: str | None = None,
             generation: int = 1) -> dict:
    metadata = {"name": "spread", "generation": generation}
    if annotation:
        metadata["annotations"] = {ANNOTATION: annotation}
    return {"metadata": metadata, "spec": spec or {"mode": "full"}, "status": status or {}}


def state(status: dict) -> tuple[str, str]:
    [condition] = status["conditions"]
    return condition["type"], condition["reason"]


class Balancer:
    """The balancer's answers, by method; an exception instance is raised."""

    def __init__(self, **answers) -> None:
        self.answers, self.calls = answers, []

    async def __call__(self, properties, method, *args, **kwargs):
        self.calls.append((method, args))
        answer = self.answers[method]
        if isinstance(answer, Exception):
            raise answer
        return answer


def proposal(moves: int) -> SimpleNamespace:
    return SimpleNamespace(proposal=SimpleNamespace(replica_moves=[object()] * moves, leadership_changes=[object()],
                                                    bytes_moved=3 << 20))


def progress(execution_id: str, status: str) -> SimpleNamespace:
    return SimpleNamespace(execution=SimpleNamespace(id=execution_id),
                           progress=SimpleNamespace(status=status, moves_done=2, moves_total=4, leadership_done=1))


def run_pass(monkeypatch, balancer: Balancer, given: dict) -> tuple[dict, bool]:
    monkeypatch.setattr(rebalance_handler, "balancer_call", balancer)
    return asyncio.run(reconcile_rebalance(given, {"bootstrap.servers": "unused:9091"}))


def test_the_modes_and_a_mode_without_brokers():
    assert parse_rebalance(resource({"mode": "add-brokers", "brokers": [4, 3, 4]})).nodes == (3, 4)
    assert parse_rebalance(resource({"mode": "remove-brokers", "brokers": [2]})).operation == "remove_nodes"
    assert parse_rebalance(resource({})).operation == "rebalance"
    with pytest.raises(ValueError, match="spec.brokers: mode add-brokers needs"):
        parse_rebalance(resource({"mode": "add-brokers"}))


@pytest.mark.parametrize(("state_now", "annotation", "spec_changed", "action"), [
    ("New", None, False, "propose"),
    ("PendingProposal", None, False, "propose"),
    ("ProposalReady", None, False, "nothing"),
    ("ProposalReady", "approve", False, "execute"),
    ("ProposalReady", None, True, "propose"),
    ("Rebalancing", None, True, "watch"),
    ("Rebalancing", "refresh", False, "watch"),
    ("Rebalancing", "stop", False, "stop"),
    ("Ready", "approve", False, "nothing"),
    ("Ready", "refresh", False, "propose"),
    ("NotReady", None, False, "nothing"),
    ("Stopped", None, True, "propose"),
])
def test_what_a_pass_does(state_now, annotation, spec_changed, action):
    assert next_action(state_now, annotation, spec_changed) == action


def test_proposed_approved_executed(monkeypatch):
    balancer = Balancer(propose=proposal(5), request=SimpleNamespace(execution_id="e1"),
                        status=progress("e1", "running"))
    status, consumed = run_pass(monkeypatch, balancer, resource())
    assert state(status) == ("ProposalReady", "ProposalComputed") and not consumed
    assert status["optimizationResult"] == {"numReplicaMovements": 5, "numLeaderMovements": 1, "dataToMoveMB": 3}

    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="approve"))
    assert state(status) == ("Rebalancing", "Approved") and consumed and status["executionId"] == "e1"
    assert balancer.calls[-1] == ("request", ("rebalance", (), None))

    status, _ = run_pass(monkeypatch, balancer, resource(status=status))
    assert state(status) == ("Rebalancing", "Executing")
    balancer.answers["status"] = progress("e1", "done")
    status, _ = run_pass(monkeypatch, balancer, resource(status=status))
    assert state(status) == ("Ready", "Executed")


def test_a_refusal_stays_until_a_refresh(monkeypatch):
    balancer = Balancer(propose=BalancerError("node 9 is not in the cluster"))
    status, _ = run_pass(monkeypatch, balancer, resource({"mode": "add-brokers", "brokers": [9]}))
    assert state(status) == ("NotReady", "Refused")
    assert status["conditions"][0]["message"] == "node 9 is not in the cluster"
    calls = len(balancer.calls)
    status, _ = run_pass(monkeypatch, balancer, resource({"mode": "add-brokers", "brokers": [9]}, status))
    assert len(balancer.calls) == calls, "a refused proposal is not asked again by itself"
    balancer.answers["propose"] = proposal(1)
    status, consumed = run_pass(monkeypatch, balancer, resource({"mode": "add-brokers", "brokers": [9]}, status,
                                                                annotation="refresh"))
    assert state(status) == ("ProposalReady", "ProposalComputed") and consumed


def test_a_balancer_that_does_not_answer_is_asked_again(monkeypatch):
    balancer = Balancer(propose=ControlError("no answer"), status=ControlError("no answer"),
                        request=ControlError("no answer"))
    status, _ = run_pass(monkeypatch, balancer, resource())
    assert state(status) == ("PendingProposal", "BalancerUnavailable")
    balancer.answers["propose"] = proposal(2)
    status, _ = run_pass(monkeypatch, balancer, resource(status=status))
    assert state(status)[0] == "ProposalReady"

    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="approve"))
    assert state(status) == ("ProposalReady", "BalancerUnavailable") and not consumed, "the approval waits"
    balancer.answers["request"] = SimpleNamespace(execution_id="e2")
    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="approve"))
    assert state(status)[0] == "Rebalancing" and consumed

    status, _ = run_pass(monkeypatch, balancer, resource(status=status))
    assert state(status) == ("Rebalancing", "BalancerUnavailable"), "a lost answer does not lose the execution"


def test_an_execution_the_balancer_has_moved_past_is_over(monkeypatch):
    balancer = Balancer(status=progress("e9", "running"))
    running = {"executionId": "e1", "observedGeneration": 1,
               "conditions": [{"type": "Rebalancing", "status": "True", "reason": "Approved", "message": "",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    status, _ = run_pass(monkeypatch, balancer, resource(status=running))
    assert state(status) == ("Ready", "Executed")


def test_a_spec_changed_after_a_proposal_is_proposed_again(monkeypatch):
    balancer = Balancer(propose=proposal(1))
    status, _ = run_pass(monkeypatch, balancer, resource())
    balancer.answers["propose"] = proposal(7)
    status, _ = run_pass(monkeypatch, balancer, resource({"mode": "remove-brokers", "brokers": [2]}, status,
                                                         generation=2))
    assert status["optimizationResult"]["numReplicaMovements"] == 7
    assert balancer.calls[-1] == ("propose", ("remove_nodes", (2,), None))


def test_an_approval_before_the_proposal_and_a_refresh_during_an_execution_wait_their_turn(monkeypatch):
    balancer = Balancer(propose=proposal(2), request=SimpleNamespace(execution_id="e1"),
                        status=progress("e1", "running"))
    status, consumed = run_pass(monkeypatch, balancer, resource(annotation="approve"))
    assert state(status)[0] == "ProposalReady" and not consumed, "approved before there was a proposal"
    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="approve"))
    assert state(status)[0] == "Rebalancing" and consumed

    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="refresh"))
    assert state(status)[0] == "Rebalancing" and not consumed, "a refresh does not lose the running execution"
    balancer.answers["status"] = progress("e1", "done")
    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="refresh"))
    assert state(status)[0] == "Ready" and not consumed
    status, consumed = run_pass(monkeypatch, balancer, resource(status=status, annotation="refresh"))
    assert state(status)[0] == "ProposalReady" and consumed
