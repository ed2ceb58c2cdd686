"""OdradekRebalance, Strimzi's KafkaRebalance: a balancer proposal shown in status, carried out once approved.

    New or refreshed  -> the balancer proposes (a dry run) -> ProposalReady, with optimizationResult
    ProposalReady + `odradek.io/rebalance=approve` -> the request goes to the balancer service -> Rebalancing
    Rebalancing -> Ready when the execution is done, Stopped when it stopped
    Rebalancing + `odradek.io/rebalance=stop` -> the service stops it -> Stopped
    any state + `odradek.io/rebalance=refresh` -> a new proposal
A proposal or request the balancer refuses is NotReady with its one-line reason, until a refresh. When the balancer
does not answer at all, the state stays (PendingProposal while a proposal is wanted, Rebalancing while one runs)
with the reason in the message, and the next pass asks again. The annotation is consumed: the caller removes it
once a pass has acted on it. The decision (`next_action`) is sans-I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.balancer.control import ControlError
from odradek.balancer.model import BalancerError
from odradek.operator.connection import balancer_call
from odradek.operator.status import observed_generation, status_conditions

ANNOTATION = "odradek.io/rebalance"
MODES = {"full": "rebalance", "add-brokers": "add_nodes", "remove-brokers": "remove_nodes"}
STATES = ("New", "PendingProposal", "ProposalReady", "Rebalancing", "Stopped", "NotReady", "Ready")
MB = 1 << 20  # as Cruise Control's dataToMoveMB (and the balancer's REST API)


@dataclass(frozen=True)
class RebalanceSpec:
    operation: str
    nodes: tuple[int, ...]
    goals: tuple[str, ...] | None


def parse_rebalance(resource: Mapping) -> RebalanceSpec:
    """The balancer operation the resource asks for; ValueError (one line) for what the schema let through."""
    spec = resource.get("spec") or {}
    mode = spec.get("mode", "full")
    if mode not in MODES:
        raise ValueError(f"spec.mode: expected one of {', '.join(MODES)}, got {mode!r}")
    nodes = tuple(sorted(set(spec.get("brokers") or ())))
    if mode != "full" and not nodes:
        raise ValueError(f"spec.brokers: mode {mode} needs the brokers to add or remove")
    goals = spec.get("goals")
    return RebalanceSpec(MODES[mode], nodes if mode != "full" else (), tuple(goals) if goals else None)


def state_of(resource: Mapping) -> str:
    for condition in (resource.get("status") or {}).get("conditions") or []:
        if condition.get("type") in STATES and condition.get("status") == "True":
            return condition["type"]
    return "New"


def next_action(state: str, annotation: str | None, spec_changed: bool = False) -> str:
    """What a pass does: propose, execute, stop, watch (an execution running) or nothing. A spec changed since
    the last proposal (and not running) is proposed again, its old proposal no longer meaning anything."""
    if state == "Rebalancing":  # a refresh or a new spec waits for the execution: it would be lost track of
        return "stop" if annotation == "stop" else "watch"
    if annotation == "refresh" or spec_changed:
        return "propose"
    if state in ("New", "PendingProposal"):
        return "propose"
    if state == "ProposalReady" and annotation == "approve":
        return "execute"
    return "nothing"


def _acted_on(annotation: str | None, action: str) -> bool:
    """Whether the pass did what the annotation asked: one it could not act on yet (an approval before the
    proposal is ready) stays for a later pass; one that means nothing in the state is dropped."""
    if annotation is None:
        return False
    wanted = {"approve": "execute", "stop": "stop", "refresh": "propose"}.get(annotation)
    return (wanted is None or wanted == action or action == "nothing"
            or (action == "watch" and annotation != "refresh"))  # a refresh waits for the execution's end


async def reconcile_rebalance(resource: Mapping, client_config: Mapping[str, str]) -> tuple[dict, bool]:
    """The whole status to write, and whether the annotation was acted on (and should be removed)."""
    old = resource.get("status") or {}
    annotation = ((resource.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    status = {key: old[key] for key in ("optimizationResult", "executionId") if key in old}
    status |= observed_generation(resource)
    try:
        spec = parse_rebalance(resource)
    except ValueError as e:
        return status | {"conditions": status_conditions(old, [("NotReady", "InvalidSpec", str(e))])}, False
    spec_changed = "observedGeneration" in old and old["observedGeneration"] != status.get("observedGeneration")
    action = next_action(state_of(resource), annotation, spec_changed)
    state, reason, message = state_of(resource), None, None
    try:
        if action == "propose":
            planned = await balancer_call(client_config, "propose", spec.operation, spec.nodes, spec.goals)
            proposal = planned.proposal
            status["optimizationResult"] = {
                "numReplicaMovements": len(proposal.replica_moves),
                "numLeaderMovements": len(proposal.leadership_changes),
                "dataToMoveMB": proposal.bytes_moved // MB,
            }
            status.pop("executionId", None)
            state, reason = "ProposalReady", "ProposalComputed"
            message = (f"{len(proposal.replica_moves)} replica moves, {len(proposal.leadership_changes)} leadership "
                       f"changes; approve with the annotation {ANNOTATION}=approve")
        elif action == "execute":
            result = await balancer_call(client_config, "request", spec.operation, spec.nodes, spec.goals,
                                     origin="operator")
            status["executionId"] = result.execution_id or ""
            state, reason, message = "Rebalancing", "Approved", f"execution {result.execution_id} started"
        elif action == "stop":
            await balancer_call(client_config, "request", "stop", origin="operator")
            state, reason, message = "Stopped", "StopRequested", "stopped on request; moves in flight finish"
        elif action == "watch":
            balancer = await balancer_call(client_config, "status")
            execution, progress = balancer.execution, balancer.progress
            if execution is not None and execution.id != status.get("executionId"):
                # one execution at a time: a later one means this one ended (done or stopped) before it began
                state, reason = "Ready", "Executed"
                message = f"execution {status.get('executionId') or '-'} is over; the balancer has since run another"
            elif execution is not None and progress is not None:
                if progress.status == "done":
                    state, reason = "Ready", "Executed"
                    message = f"{progress.moves_done} replica moves and {progress.leadership_done} leadership changes done"
                elif progress.status == "stopped":
                    state, reason, message = "Stopped", "ExecutionStopped", "the balancer's execution was stopped"
                else:
                    reason = "Executing"
                    message = f"{progress.moves_done} of {progress.moves_total} replica moves done"
    except BalancerError as e:  # refused: it would be refused again, until the cluster or the spec changes
        state, reason, message = "NotReady", "Refused", str(e)
    except ControlError as e:  # no answer: asked again on the next pass
        state = "PendingProposal" if action == "propose" else state_of(resource)
        reason, message = "BalancerUnavailable", str(e)
        if action == "execute":  # not started: the approval stays to be acted on
            return status | {"conditions": status_conditions(old, [(state, reason, message)])}, False
    if reason is None:
        previous = next((c for c in old.get("conditions") or [] if c.get("type") == state), {})
        reason, message = previous.get("reason", state), previous.get("message", "")
    status["conditions"] = status_conditions(old, [(state, reason, message)])
    return status, _acted_on(annotation, action)
