"""The partition balancer driven from outside the service: its state, the cluster's load, dry-run proposals, and
requests (rebalance, add nodes, remove nodes, demote, stop, resume) — what `odradek balancer`, the HTTP API and
the console share.

    admin = BalancerAdmin({"bootstrap.servers": "localhost:9092"})
    planned = admin.propose("remove_nodes", [3])       # a dry run, computed here
    result = admin.request("remove_nodes", [3])        # the service computes and starts it; accepted or refused
    progress = admin.wait(result.execution_id)          # until done or stopped
    admin.close()

A proposal is computed where it is asked for, from the same inputs the service uses: the cluster's metadata,
the load samples of the window (`__balancer_samples`), the service's goal settings and the nodes it keeps
empty. A request is a record in `__balancer_execution` (control.py); the balancer service, on the node that
leads that topic's partition, handles requests in order and answers each with a result record, which
`request` waits for. Every method blocks; errors are BalancerError (refused by the optimizer, or by the service)
or ControlError (the cluster did not answer), with one-line messages.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from odradek.balancer.control import (
    OPERATIONS,
    PROPOSAL_OPERATIONS,
    REFUSED,
    REQUEST_KEY,
    ControlError,
    ControlWriter,
    Request,
    RequestResult,
    ServiceState,
    read_control,
)
from odradek.balancer.execution import Execution, Progress
from odradek.balancer.executor import ExecutorError, ensure_execution_topic
from odradek.balancer.goals import BalancerSettings
from odradek.balancer.load_monitor import (
    LoadCoverage,
    LoadMonitor,
    build_model,
    metadata_from_client,
    read_samples,
)
from odradek.balancer.model import BalancerError, ClusterModel
from odradek.balancer.operations import plan
from odradek.balancer.optimizer import Proposal

TIMEOUT_S = 30.0
POLL_S = 0.3


@dataclass(frozen=True)
class BalancerStatus:
    service: ServiceState | None  # None: no service has run yet
    execution: Execution | None  # the last execution, whatever its status
    progress: Progress | None
    results: tuple[RequestResult, ...]  # newest first


@dataclass(frozen=True)
class LoadView:
    model: ClusterModel
    coverage: LoadCoverage
    settings: BalancerSettings
    removed: frozenset[int]


@dataclass(frozen=True)
class PlannedProposal:
    operation: str
    nodes: tuple[int, ...]
    proposal: Proposal
    view: LoadView  # what it was proposed on

    @property
    def coverage(self) -> LoadCoverage:
        return self.view.coverage


class BalancerAdmin:
    def __init__(self, properties: Mapping[str, str]):
        """properties: librdkafka client properties, bootstrap.servers included."""
        self.properties = dict(properties)
        self._admin = AdminClient(self.properties)
        self._writer: ControlWriter | None = None

    def status(self) -> BalancerStatus:
        snapshot = read_control(self.properties)
        execution = snapshot.execution
        progress = None if execution is None else execution.progress(_now_ms())
        results = tuple(sorted(snapshot.results.values(), key=lambda r: (r.handled_ms, r.id), reverse=True))
        return BalancerStatus(snapshot.service, execution, progress, results)

    def load(self) -> LoadView:
        """The cluster's model: placement now, the rates of the window, the sizes last sampled."""
        service = read_control(self.properties).service
        settings = BalancerSettings.from_properties(service.settings if service else {})
        window_ms = int((service.settings if service else {}).get("balancer.window.ms", 3_600_000))
        monitor = LoadMonitor(window_ms)
        now = _now_ms()
        try:
            read_samples(self.properties, monitor, TIMEOUT_S, now)
            metadata = self._admin.list_topics(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise ControlError(f"reading the cluster's load: {exc.args[0].str()}") from None
        racks = {n: s.rack for n, s in monitor.nodes.items()}
        built = build_model(metadata_from_client(metadata, racks), monitor, now)
        return LoadView(built.model, built.coverage, settings, frozenset(service.removed_nodes if service else ()))

    def propose(self, operation: str, nodes: Iterable[int] = (), goals: Sequence[str] | None = None) -> PlannedProposal:
        """The proposal the operation would carry out now (a dry run). BalancerError when it is refused."""
        if operation not in PROPOSAL_OPERATIONS:
            raise BalancerError(f"unknown operation {operation!r}: expected one of {', '.join(PROPOSAL_OPERATIONS)}")
        view = self.load()
        nodes = tuple(sorted(set(nodes)))
        proposal = plan(operation, nodes, view.model, view.settings, goals, view.removed)
        return PlannedProposal(operation, nodes, proposal, view)

    def request(self, operation: str, nodes: Iterable[int] = (), goals: Sequence[str] | None = None,
                timeout_s: float = 60.0, origin: str = "client") -> RequestResult:
        """Ask the balancer service for an operation and wait for its answer. BalancerError when refused
        (the reason in one line); ControlError when no service answered within timeout_s."""
        if operation not in OPERATIONS:
            raise BalancerError(f"unknown operation {operation!r}: expected one of {', '.join(OPERATIONS)}")
        request = Request(operation, tuple(sorted(set(nodes))), None if goals is None else tuple(goals),
                          origin=origin)
        try:
            ensure_execution_topic(self._admin)
        except (KafkaException, ExecutorError) as exc:
            raise ControlError(f"creating the balancer's topic: {exc}") from None
        if self._writer is None:
            self._writer = ControlWriter(self.properties)
        offset = self._writer.append(REQUEST_KEY, request.to_json())
        deadline = time.monotonic() + timeout_s
        while True:
            snapshot = read_control(self.properties)
            result = snapshot.results.get(request.id)
            if result is not None:
                if result.status == REFUSED:
                    raise BalancerError(result.error or f"{operation} refused")
                return result
            if time.monotonic() > deadline:
                handled = snapshot.service.requests_handled_to if snapshot.service else None
                raise ControlError(f"no answer from the balancer service within {timeout_s:g}s (request at offset "
                                   f"{offset}, handled up to {handled}): is a broker leading __balancer_execution?")
            time.sleep(POLL_S)

    def wait(self, execution_id: str | None = None, timeout_s: float | None = None,
             poll_s: float = 1.0) -> Progress:
        """Wait until the execution (by default the last) is done or stopped; its progress then. ControlError
        after timeout_s."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            execution = read_control(self.properties).execution
            if execution is not None and (execution_id is None or execution.id == execution_id):
                progress = execution.progress(_now_ms())
                if progress.status in ("done", "stopped"):
                    return progress
            if deadline is not None and time.monotonic() > deadline:
                raise ControlError(f"the execution did not finish within {timeout_s:g}s")
            time.sleep(poll_s)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _now_ms() -> int:
    return int(time.time() * 1000)
