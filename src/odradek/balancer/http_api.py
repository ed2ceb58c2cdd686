"""Cruise Control's REST API on the node's HTTP port (metrics.listener): /kafkacruisecontrol/<endpoint>.

    GET  state, load, partition_load, proposals, user_tasks
    POST rebalance, add_broker, remove_broker, demote_broker, stop_proposal_execution

The endpoints, parameters and JSON field names are Cruise Control's, so its clients and scripts work here; the
work is balancer/admin.py's, run off the event loop with the node's own client identity. A POST that changes the
placement is a dry run unless `dryrun=false` (Cruise Control's default): a dry run answers with the proposal;
otherwise the request goes to the balancer service, and the answer says what it accepted (the header
User-Task-ID names the request, as in `user_tasks`). `json=true` answers JSON; without it, short plain text.

Rates are KB/s and sizes MB (2^20 bytes), as in Cruise Control. Odradek measures no CPU and no message rate, so
CpuPct, NumCore, cpu and msg_in are left out rather than reported as zero. Errors: 400 with {"errorMessage"} for a
bad parameter or a refused request, 503 when the cluster does not answer, 404 for an unknown endpoint.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from aiohttp import BasicAuth, web

from odradek.balancer.admin import BalancerAdmin, BalancerStatus, LoadView, PlannedProposal
from odradek.balancer.control import (
    ACCEPTED,
    ADD_NODES,
    DEMOTE,
    REBALANCE,
    REMOVE_NODES,
    STOP,
    ControlError,
    RequestResult,
)
from odradek.balancer.execution import RUNNING, STOPPING
from odradek.balancer.model import BalancerError, ClusterModel
from odradek.balancer.optimizer import apply

PREFIX = "/kafkacruisecontrol"
VERSION = 1
MB = 1 << 20
KB = 1 << 10
REQUEST_TIMEOUT_S = 30.0
SUBSTATES = ("executor", "monitor", "analyzer", "anomaly_detector", "balancer")
# POST endpoint -> the balancer operation
OPERATIONS = {"rebalance": REBALANCE, "add_broker": ADD_NODES, "remove_broker": REMOVE_NODES,
              "demote_broker": DEMOTE}
ENDPOINTS = {v: k for k, v in OPERATIONS.items()} | {STOP: "stop_proposal_execution", "resume": "resume"}
# partition_load's resource parameter -> the record field it sorts by
RESOURCES = {"disk": "disk", "nw_in": "networkInbound", "network_inbound": "networkInbound",
             "networkinbound": "networkInbound", "nw_out": "networkOutbound", "network_outbound": "networkOutbound",
             "networkoutbound": "networkOutbound"}


class ParameterError(Exception):
    """A parameter Cruise Control would refuse: answered 400."""


def add_balancer_api(app: web.Application, node) -> None:
    """Serve /kafkacruisecontrol/<endpoint> on the node's HTTP application."""
    api = BalancerApi(node)
    app.router.add_route("*", PREFIX + "/{endpoint}", api.handle)


class Unauthorized(Exception):
    """No credentials, or credentials the cluster refused: answered 401."""


class BalancerApi:
    """The endpoints. They reach the cluster as the web console does (console/settings.py): as a client of the
    node's client listener, and where that listener takes a SASL login, as the user whose HTTP Basic credentials
    came with the request (checked by the cluster; writing a request takes ALTER on the cluster), never as the
    node itself."""

    def __init__(self, node):
        from odradek.console.settings import from_node_config

        self.node = node
        self.settings = from_node_config(node.config)
        self.get = {"state": self.state, "load": self.load, "partition_load": self.partition_load,
                    "proposals": self.proposals, "user_tasks": self.user_tasks}
        self.post = {name: self.operation for name in (*OPERATIONS, "stop_proposal_execution")}

    async def properties(self, request: web.Request) -> dict[str, str]:
        """The client properties of the request's identity; Unauthorized without credentials the cluster takes."""
        if not self.settings.login_required:
            return {**self.settings.client_properties(), "bootstrap.servers": self.settings.bootstrap}
        if self.settings.note:
            raise Unauthorized(self.settings.note)
        try:
            auth = BasicAuth.decode(request.headers.get("Authorization", ""))
        except ValueError:
            raise Unauthorized("this cluster takes a login: send HTTP Basic credentials of a SASL user") from None
        refusals = []
        for mechanism in self.settings.login_mechanisms:  # HTTP Basic names no mechanism: the first that takes it
            properties = self.settings.client_properties(auth.login, auth.password, mechanism)
            refusal = await self._refusal(properties)
            if refusal is None:
                return {**properties, "bootstrap.servers": self.settings.bootstrap}
            refusals.append(refusal)
        raise Unauthorized(f"login refused: {'; '.join(refusals)}")

    async def _refusal(self, properties: dict[str, str]) -> str | None:
        """Why the cluster refuses the credentials, or None when it takes them (a request of their own, as the
        console's login makes: a refused SASL login answers at once)."""
        from odradek.console.cluster import ConsoleError, RawCluster

        probe = RawCluster(self.settings.bootstrap, properties, self.settings.timeout_s)
        try:
            await probe.metadata([])
            return None
        except ConsoleError as exc:
            if "authentication" in str(exc) or "SASL" in str(exc):
                return str(exc)
            raise ControlError(f"the cluster did not answer: {exc}") from None
        finally:
            await probe.close()

    async def admin(self, request: web.Request, work: Callable[[BalancerAdmin], object]):
        """`work(admin)` on a thread, with a BalancerAdmin of the request's identity."""
        properties = await self.properties(request)

        def run():
            admin = BalancerAdmin(properties)
            try:
                return work(admin)
            finally:
                admin.close()

        return await asyncio.to_thread(run)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        endpoint = request.match_info["endpoint"].lower()
        query = request.query
        as_json = query.get("json", "").lower() == "true"
        handlers = self.get if request.method == "GET" else self.post if request.method == "POST" else {}
        handler = handlers.get(endpoint)
        origin = request.headers.get("Origin")
        if request.method == "POST" and origin is not None and urlsplit(origin).netloc != request.host:
            # a browser's cross-site form or script: Cruise Control's clients send no Origin
            return _error(403, f"cross-origin request from {origin} refused", as_json)
        if handler is None:
            known = endpoint in self.get or endpoint in self.post
            method = "GET" if endpoint in self.get else "POST"
            message = (f"{endpoint} takes {method}, not {request.method}" if known else
                       f"unknown endpoint {endpoint!r}: expected one of {', '.join([*self.get, *self.post])}")
            return _error(405 if known else 404, message, as_json)
        try:
            body, headers = await handler(request, endpoint, query)
        except (ParameterError, BalancerError) as exc:
            return _error(400, str(exc), as_json)
        except Unauthorized as exc:
            response = _error(401, str(exc), as_json)
            response.headers["WWW-Authenticate"] = 'Basic realm="odradek"'
            return response
        except ControlError as exc:
            return _error(503, str(exc), as_json)
        body = {**body, "version": VERSION}
        if as_json:
            return web.json_response(body, headers=headers)
        return web.Response(text=plain_text(body), headers=headers)

    # GET

    async def state(self, request: web.Request, _: str, query: Mapping[str, str]):
        asked = _list(query, "substates") or list(SUBSTATES)
        asked = [s.lower() for s in asked]
        unknown = [s for s in asked if s not in SUBSTATES]
        if unknown:
            raise ParameterError(f"substates: unknown {', '.join(unknown)}: expected some of {', '.join(SUBSTATES)}")
        service = getattr(self.node, "balancer", None)

        def read(admin: BalancerAdmin):
            return admin.status(), admin.load() if "monitor" in asked else None

        status, view = await self.admin(request, read)
        body = {}
        if "monitor" in asked:
            body["MonitorState"] = monitor_state(status, view)
        if "executor" in asked:
            body["ExecutorState"] = executor_state(status)
        if "analyzer" in asked:
            body["AnalyzerState"] = {"isProposalReady": status.service is not None,
                                     "readyGoals": _goal_names(status)}
        if "anomaly_detector" in asked:
            mode = status.service.mode if status.service else None
            body["AnomalyDetectorState"] = {"selfHealingEnabled": {"BROKER_FAILURE": mode == "continuous",
                                                                   "DISK_FAILURE": mode == "continuous"}}
        if "balancer" in asked:
            body["BalancerState"] = {
                "mode": status.service.mode if status.service else None,
                "runningNode": status.service.node_id if status.service else None,
                "thisNode": self.node.node_id,
                "activeHere": bool(service is not None and service.active),
                "updatedMs": status.service.updated_ms if status.service else None,
                "removedBrokers": list(status.service.removed_nodes) if status.service else [],
                "lastAutomaticAction": status.service.last_automatic if status.service else None,
            }
        return body, None

    async def load(self, request: web.Request, _: str, query: Mapping[str, str]):
        view = await self.admin(request, lambda admin: admin.load())
        return broker_stats(view.model, self.hosts()), None

    async def partition_load(self, request: web.Request, _: str, query: Mapping[str, str]):
        resource = query.get("resource", "disk").lower()
        if resource not in RESOURCES:
            raise ParameterError(f"resource: expected disk, nw_in or nw_out (Odradek measures no cpu), got "
                                 f"{resource!r}")
        entries = _int(query, "entries", 2**31 - 1)
        try:
            topic = re.compile(query.get("topic") or ".*")
        except re.error as exc:
            raise ParameterError(f"topic: not a regular expression: {exc}") from None
        partitions = _partition_range(query.get("partition"))
        brokers = set(_ints(query, "brokerid"))
        view = await self.admin(request, lambda admin: admin.load())
        records = []
        for p in view.model.partitions:
            if not topic.fullmatch(p.topic) or partitions and not partitions[0] <= p.index <= partitions[1]:
                continue
            if brokers and not brokers & set(p.replicas):
                continue
            records.append({"topic": p.topic, "partition": p.index,
                            "leader": p.leader if p.leader is not None else -1,
                            "followers": [r for r in p.replicas if r != p.leader],
                            "disk": round(p.size_bytes / MB, 3), "networkInbound": round(p.bytes_in / KB, 3),
                            "networkOutbound": round(p.leader_network_out / KB, 3)})
        key = RESOURCES[resource]
        records.sort(key=lambda r: (-r[key], r["topic"], r["partition"]))
        return {"records": records[:entries]}, None

    async def proposals(self, request: web.Request, _: str, query: Mapping[str, str]):
        goals, hosts, verbose = _list(query, "goals") or None, self.hosts(), _flag(query, "verbose", False)
        return await self.admin(request, lambda admin: optimization_result(admin.propose(REBALANCE, (), goals), hosts,
                                                                           verbose)), None

    async def user_tasks(self, request: web.Request, _: str, query: Mapping[str, str]):
        wanted = set(_list(query, "user_task_ids"))
        entries = _int(query, "entries", 2**31 - 1)
        status = await self.admin(request, lambda admin: admin.status())
        tasks = [user_task(r, status) for r in status.results if not wanted or r.id in wanted]
        return {"userTasks": tasks[:entries]}, None

    # POST

    async def operation(self, request: web.Request, endpoint: str, query: Mapping[str, str]):
        if endpoint == "stop_proposal_execution":
            result = await self.admin(request, lambda admin: admin.request(STOP, timeout_s=REQUEST_TIMEOUT_S,
                                                                           origin="http"))
            return {"message": "Proposal execution stopped.", "UserTaskId": result.id}, {"User-Task-ID": result.id}
        operation = OPERATIONS[endpoint]
        nodes = _ints(query, "brokerid")
        if operation != REBALANCE and not nodes:
            raise ParameterError(f"{endpoint} needs brokerid: the broker ids, comma-separated")
        goals = _list(query, "goals") or None
        if _flag(query, "dryrun", True):  # shaped on the thread too: a large proposal is much work
            hosts, verbose = self.hosts(), _flag(query, "verbose", False)
            return await self.admin(request, lambda admin: optimization_result(
                admin.propose(operation, nodes, goals), hosts, verbose)), None
        result = await self.admin(request, lambda admin: admin.request(operation, nodes, goals, REQUEST_TIMEOUT_S,
                                                                       origin="http"))
        summary = {"numReplicaMovements": result.replica_moves, "numLeaderMovements": result.leadership_changes,
                   "dataToMoveMB": result.bytes_to_move // MB, "numIntraBrokerReplicaMovements": 0,
                   "intraBrokerDataToMoveMB": 0}
        message = (f"{endpoint} started: execution {result.execution_id}" if result.execution_id else
                   f"{endpoint} accepted: nothing to move")
        return ({"summary": summary, "UserTaskId": result.id, "executionId": result.execution_id,
                 "message": message}, {"User-Task-ID": result.id})

    def hosts(self) -> dict[int, str]:
        hosts = {}
        for broker in self.node.image.brokers.values():
            endpoint = next(iter(broker.endpoints.values()), None)
            hosts[broker.broker_id] = endpoint[0] if endpoint else ""
        return hosts


# ---------------------------------------------------------------------------------------------------
# Cruise Control's shapes


def broker_stats(model: ClusterModel, hosts: Mapping[int, str]) -> dict:
    """Cruise Control's BrokerStats: {"brokers": [...], "hosts": [...]} of the model's placement and load."""
    loads = model.node_loads()
    potential = {n.id: 0.0 for n in model.nodes}  # what each node would send if it led all its replicas
    for p in model.partitions:
        for node in p.replicas:
            potential[node] += p.leader_network_out
    brokers = []
    for node in sorted(model.nodes, key=lambda n: n.id):
        load = loads[node.id]
        capacity = node.disk_capacity_bytes
        brokers.append({
            "Host": hosts.get(node.id, ""), "Broker": node.id, "Rack": node.rack or "",
            "BrokerState": "ALIVE" if node.alive else "DEAD",
            "DiskMB": round(load.disk_bytes / MB, 3),
            "DiskPct": round(100 * load.disk_ratio, 3) if load.disk_ratio is not None else -1.0,
            "LeaderNwInRate": round(load.leader_bytes_in / KB, 3),
            "FollowerNwInRate": round((load.network_in - load.leader_bytes_in) / KB, 3),
            "NwOutRate": round(load.network_out / KB, 3), "PnwOutRate": round(potential[node.id] / KB, 3),
            "Replicas": load.replicas, "Leaders": load.leaders,
            "DiskCapacityMB": round(capacity / MB, 3) if capacity else -1.0,
            "NetworkInCapacity": round(node.network_in_capacity / KB, 3) if node.network_in_capacity else -1.0,
            "NetworkOutCapacity": round(node.network_out_capacity / KB, 3) if node.network_out_capacity else -1.0,
        })
    by_host: dict[str, dict] = {}
    for broker in brokers:
        host = by_host.setdefault(broker["Host"], {"Host": broker["Host"], "Rack": broker["Rack"]})
        for key in ("DiskMB", "LeaderNwInRate", "FollowerNwInRate", "NwOutRate", "PnwOutRate", "Replicas",
                    "Leaders"):
            host[key] = round(host.get(key, 0) + broker[key], 3)
    return {"brokers": brokers, "hosts": list(by_host.values())}


def optimization_result(planned: PlannedProposal, hosts: Mapping[int, str], verbose: bool) -> dict:
    """Cruise Control's OptimizationResult of a dry run."""
    proposal, view = planned.proposal, planned.view
    result = {
        "summary": {
            "numReplicaMovements": len(proposal.replica_moves), "dataToMoveMB": proposal.bytes_moved // MB,
            "numIntraBrokerReplicaMovements": 0, "intraBrokerDataToMoveMB": 0,
            "numLeaderMovements": len(proposal.leadership_changes),
            "monitoredPartitionsPercentage": round(100 * planned.coverage.ratio, 3),
            "excludedTopics": [], "excludedBrokersForReplicaMove": sorted(view.removed),
            "excludedBrokersForLeadership": list(planned.nodes) if planned.operation == DEMOTE else [],
        },
        "goalSummary": [{"goal": g.goal, "status": "VIOLATED" if not g.satisfied_after else
                         "FIXED" if not g.satisfied_before else "NO-ACTION",
                         "hard": g.hard, "violationBefore": g.violation_before, "violationAfter": g.violation_after,
                         "reason": g.reason} for g in proposal.goals],
        "loadAfterOptimization": broker_stats(apply(view.model, proposal), hosts),
    }
    if verbose:
        result["loadBeforeOptimization"] = broker_stats(view.model, hosts)
        leaders = {(p.topic, p.index): p.leader for p in view.model.partitions}
        replicas = {(p.topic, p.index): p.replicas for p in view.model.partitions}
        moved = {(m.topic, m.partition): (m.old_replicas, m.new_replicas) for m in proposal.replica_moves}
        for change in proposal.leadership_changes:  # a leadership change alone: the new leader first
            if (change.topic, change.partition) not in moved:
                old = replicas[(change.topic, change.partition)]
                moved[(change.topic, change.partition)] = (
                    old, (change.new_leader, *(r for r in old if r != change.new_leader)))
        result["proposals"] = [{"topicPartition": f"{topic}-{index}", "oldLeader": leaders.get((topic, index), -1),
                                "oldReplicas": list(old), "newReplicas": list(new)}
                               for (topic, index), (old, new) in sorted(moved.items())]
    return result


def executor_state(status: BalancerStatus) -> dict:
    """Cruise Control's ExecutorState of the last execution."""
    progress, execution = status.progress, status.execution
    if progress is None or execution is None:
        return {"state": "NO_TASK_IN_PROGRESS"}
    if execution.status == STOPPING:
        state = "STOPPING_EXECUTION"
    elif execution.status != RUNNING:
        state = "NO_TASK_IN_PROGRESS"
    elif progress.moves_done + progress.moves_failed < progress.moves_total:
        state = "INTER_BROKER_REPLICA_MOVEMENT_TASK_IN_PROGRESS"
    else:
        state = "LEADER_MOVEMENT_TASK_IN_PROGRESS"
    pending = progress.moves_total - progress.moves_done - progress.moves_in_flight - progress.moves_failed
    body = {"state": state, "executionId": execution.id, "status": progress.status,
            "numTotalPartitionMovements": progress.moves_total,
            "numFinishedPartitionMovements": progress.moves_done,
            "numInProgressPartitionMovements": progress.moves_in_flight,
            "numPendingPartitionMovements": max(pending, 0), "numDeadPartitionMovements": progress.moves_failed,
            "finishedDataMovement": progress.bytes_done // MB, "totalDataToMove": progress.bytes_total // MB,
            "numTotalLeadershipMovements": progress.leadership_total,
            "numFinishedLeadershipMovements": progress.leadership_done,
            "numPendingLeadershipMovements": max(progress.leadership_total - progress.leadership_done
                                                 - progress.leadership_failed, 0),
            "numCancelledLeadershipMovements": progress.leadership_failed,
            "etaMs": progress.eta_ms,
            "recentlyRemovedBrokers": list(status.service.removed_nodes) if status.service else []}
    if state != "NO_TASK_IN_PROGRESS":
        body["triggeredUserTaskId"] = execution.id
    return body


def monitor_state(status: BalancerStatus, view: LoadView | None) -> dict:
    """Cruise Control's LoadMonitorState: how many partitions have load samples in the window."""
    if view is None:
        return {"state": "NOT_STARTED"}
    coverage = view.coverage
    return {"state": "RUNNING" if status.service is not None else "NOT_STARTED", "trained": True,
            "trainingPct": 100.0, "numValidPartitions": coverage.sampled, "numTotalPartitions": coverage.partitions,
            "monitoringCoveragePct": round(100 * coverage.ratio, 3), "numFlawedPartitions": coverage.unsampled}


def user_task(result: RequestResult, status: BalancerStatus) -> dict:
    """Cruise Control's UserTaskInfo of one request's result."""
    execution = status.execution
    running = (execution is not None and execution.id == result.execution_id
               and execution.status in (RUNNING, STOPPING))
    task_status = "CompletedWithError" if result.status != ACCEPTED else "InExecution" if running else "Completed"
    endpoint = ENDPOINTS.get(result.operation, result.operation)
    url = f"POST {PREFIX}/{endpoint}" + (f"?brokerid={','.join(map(str, result.nodes))}" if result.nodes else "")
    task = {"UserTaskId": result.id, "RequestURL": url, "ClientIdentity": result.origin,
            "StartMs": str(result.requested_ms), "Status": task_status, "operation": result.operation,
            "brokers": list(result.nodes), "executionId": result.execution_id,
            "numReplicaMovements": result.replica_moves, "numLeaderMovements": result.leadership_changes,
            "dataToMoveMB": result.bytes_to_move // MB}
    if result.error:
        task["error"] = result.error
    if result.reason:
        task["reason"] = result.reason
    return task


def _goal_names(status: BalancerStatus) -> list[str]:
    from odradek.balancer.goals import BalancerSettings, default_goals

    settings = BalancerSettings.from_properties(status.service.settings if status.service else {})
    return [goal.name for goal in default_goals(settings)]


# ---------------------------------------------------------------------------------------------------
# Parameters, errors, plain text


def _flag(query: Mapping[str, str], name: str, default: bool) -> bool:
    value = query.get(name)
    if value is None or value == "":
        return default
    if value.lower() not in ("true", "false"):
        raise ParameterError(f"{name}: expected true or false, got {value!r}")
    return value.lower() == "true"


def _list(query: Mapping[str, str], name: str) -> list[str]:
    return [item.strip() for item in query.get(name, "").split(",") if item.strip()]


def _ints(query: Mapping[str, str], name: str) -> list[int]:
    try:
        return [int(item) for item in _list(query, name)]
    except ValueError:
        raise ParameterError(f"{name}: expected comma-separated integers, got {query.get(name)!r}") from None


def _int(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if not value:
        return default
    if not value.isdigit():
        raise ParameterError(f"{name}: expected a non-negative integer, got {value!r}")
    return int(value)


def _partition_range(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    low, _, high = value.partition("-")
    try:
        return int(low), int(high or low)
    except ValueError:
        raise ParameterError(f"partition: expected a partition or a range like 0-5, got {value!r}") from None


def _error(status: int, message: str, as_json: bool) -> web.Response:
    if as_json:
        return web.json_response({"errorMessage": message, "version": VERSION}, status=status)
    return web.Response(status=status, text=f"Error: {message}\n")


def plain_text(body: Mapping) -> str:
    """A short rendering: nested objects as indented `key: value` lines, lists of objects as tables."""
    lines: list[str] = []
    _render(body, lines, "")
    return "\n".join(lines) + "\n"


def _render(value: Mapping, lines: list[str], indent: str) -> None:
    for key, item in value.items():
        if key == "version":
            continue
        if isinstance(item, Mapping):
            lines.append(f"{indent}{key}:")
            _render(item, lines, indent + "  ")
        elif isinstance(item, list) and item and all(isinstance(i, Mapping) for i in item):
            lines.append(f"{indent}{key}:")
            lines.extend(indent + "  " + row for row in _table(item))
        else:
            lines.append(f"{indent}{key}: {_cell(item)}")


def _table(rows: Sequence[Mapping]) -> list[str]:
    columns = [c for c in rows[0] if not any(isinstance(r.get(c), Mapping) for r in rows)]
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    out.extend("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells)
    return out


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
