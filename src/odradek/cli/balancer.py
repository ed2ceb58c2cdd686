"""`odradek balancer status|proposal|rebalance|add-nodes|remove-nodes|demote|stop|resume`: the partition balancer,
driven from outside its service.

What each command does is in balancer/admin.py (`BalancerAdmin`), shared with the HTTP API and the console; here
are its arguments and how its answer is printed: tables for people (byte figures human-readable), JSON for
scripts (exact figures). The parser imports no client code; the balancer is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import functools
import time
from dataclasses import asdict

from odradek.cli.main import ArgumentParser, CliError, client_config
from odradek.cli.output import print_json, print_table

REQUEST_ANSWER_S = 60.0
# The CLI's names of the operations, and the balancer's.
PROPOSAL_OPERATIONS = {"rebalance": "rebalance", "add-nodes": "add_nodes", "remove-nodes": "remove_nodes",
                       "demote": "demote"}


def node_ids(text: str) -> tuple[int, ...]:
    """Comma-separated node ids: `3` or `3,4`."""
    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        ids = ()
    if not ids or any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"expected node ids separated by commas (3 or 3,4), got '{text}'")
    return ids


def goal_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected goal names separated by commas, got '{text}'")
    return names


def add_balancer_parser(commands, client, output) -> None:
    balancer = commands.add_parser("balancer", help="the partition balancer: status, proposals, rebalance, "
                                                    "add, remove and demote nodes",
                                   description="Drive the partition balancer (docs/balancer.md): its status, dry-run "
                                               "proposals, and requests to its service, which runs on the node "
                                               "leading __balancer_execution.")
    sub = balancer.add_subparsers(dest="balancer_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    def parser(name: str, text: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[client, output], help=text, description=description)
        p.add_argument("--json", action="store_const", const="json", dest="output", default=argparse.SUPPRESS,
                       help="print JSON (the same as --output json)")
        return p

    p = parser("status", "the service, the last execution's progress and recent requests",
               "Show the balancer service (the node running it, its mode, removed and unavailable nodes, load "
               "sample coverage), the last execution's progress and the results of recent requests.")
    p.set_defaults(run=status)

    p = parser("proposal", "what an operation would do now (a dry run)",
               "Compute the proposal an operation would carry out now, from the cluster's placement and load "
               "samples, and print it: replica moves, leadership changes, goals before and after, and each node's "
               "load before and after. Changes nothing.")
    p.add_argument("--operation", choices=tuple(PROPOSAL_OPERATIONS), default="rebalance",
                   help="the operation (default rebalance)")
    p.add_argument("--nodes", type=node_ids, default=(), metavar="IDS",
                   help="the nodes the operation is about, comma-separated (add-nodes, remove-nodes, demote)")
    add_goals_argument(p)
    p.set_defaults(run=proposal)

    for name, text, description in (
            ("rebalance", "move replicas and leaderships until the goals hold",
             "Ask the balancer to rebalance the cluster: move replicas and leaderships until the goals hold (nodes "
             "removed earlier are kept empty)."),
            ("add-nodes", "give new nodes their share of replicas and leaderships",
             "Ask the balancer to move replicas and leaderships onto the nodes given, and only onto them."),
            ("remove-nodes", "drain nodes of every replica before they leave",
             "Ask the balancer to move every replica off the nodes given; it keeps them empty until they are "
             "added again. Refused when the other nodes cannot hold the partitions."),
            ("demote", "move leadership off nodes",
             "Ask the balancer to move the leadership of every partition off the nodes given (no replica moves).")):
        p = parser(name, text, description)
        if name != "rebalance":
            p.add_argument("nodes", type=node_ids, metavar="IDS", help="node ids, comma-separated: 3 or 3,4")
        p.add_argument("--dry-run", action="store_true", help="print the proposal and change nothing")
        add_goals_argument(p)
        p.add_argument("--wait", action="store_true",
                       help="wait until the execution is done or stopped and print its progress; exit code 1 "
                            "unless it is done with no failed move")
        p.set_defaults(run=functools.partial(operate, PROPOSAL_OPERATIONS[name]))

    for name, text in (("stop", "stop the execution under way: no new move starts, moves in flight finish"),
                       ("resume", "resume a stopped execution where it stopped")):
        p = parser(name, text, text[0].upper() + text[1:] + ".")
        p.set_defaults(run=functools.partial(stop_or_resume, name))


def add_goals_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--goals", type=goal_names, metavar="G1,G2",
                   help="only these goals, comma-separated (default: every goal of the balancer's settings)")


def one_line_errors(command):
    """A command whose BalancerError or ControlError is the CLI's one-line error; the admin closed after."""

    @functools.wraps(command)
    def run(*args):
        from odradek.balancer.control import ControlError
        from odradek.balancer.model import BalancerError

        try:
            return command(*args)
        except (BalancerError, ControlError) as exc:
            raise CliError(str(exc)) from None

    return run


def answer_timeout(args: argparse.Namespace) -> float:
    """How long to wait for the service's answer: it handles requests between the steps of an execution, every
    balancer.check.interval.ms, so longer than a client call's --timeout."""
    return max(args.timeout, REQUEST_ANSWER_S)


def open_admin(args: argparse.Namespace):
    from odradek.balancer.admin import BalancerAdmin

    return BalancerAdmin(client_config(args))


# ---------------------------------------------------------------------------------------------------
# Commands


@one_line_errors
def status(args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        state = admin.status()
    finally:
        admin.close()
    now = _now_ms()
    if args.output == "json":
        print_json({
            "service": None if state.service is None else asdict(state.service),
            "execution": None if state.execution is None else {
                "id": state.execution.id, "status": state.execution.status,
                "created_ms": state.execution.created_ms, "finished_ms": state.execution.finished_ms,
                "progress": asdict(state.progress)},
            "results": [asdict(result) for result in state.results],
        })
        return 0
    service = state.service
    if service is None:
        print("Balancer service: none has reported yet (it runs on the broker leading __balancer_execution)")
    else:
        unavailable = [f"{node} (since {_ago(now, since)})" for node, since in sorted(service.unavailable_since_ms.items())]
        coverage = None if service.samples_coverage is None else f"{service.samples_coverage:.0%}"
        print_table(("SERVICE-NODE", "MODE", "REMOVED", "UNAVAILABLE", "SAMPLE-COVERAGE", "LAST-AUTOMATIC", "UPDATED"),
                    [(service.node_id, service.mode, list(service.removed_nodes), unavailable, coverage,
                      service.last_automatic, _ago(now, service.updated_ms))])
    print()
    if state.execution is None:
        print("Execution: none yet")
    else:
        print_progress(state.execution.id, state.progress)
    print()
    if not state.results:
        print("Requests: none yet")
    else:
        print_table(("REQUEST", "OPERATION", "NODES", "ORIGIN", "STATUS", "ERROR/REASON", "MOVES", "LEADERSHIP",
                     "BYTES", "HANDLED"),
                    [(r.id[:8], _cli_name(r.operation), list(r.nodes), r.origin, r.status, r.error or r.reason,
                      r.replica_moves, r.leadership_changes, human_bytes(r.bytes_to_move), _ago(now, r.handled_ms))
                     for r in state.results])
    return 0


@one_line_errors
def proposal(args: argparse.Namespace) -> int:
    operation = PROPOSAL_OPERATIONS[args.operation]
    if operation != "rebalance" and not args.nodes:
        raise CliError(f"--operation {args.operation} needs --nodes")
    show_proposal(args, operation, args.nodes)
    return 0


@one_line_errors
def operate(operation: str, args: argparse.Namespace) -> int:
    nodes = getattr(args, "nodes", ())
    if args.dry_run:
        show_proposal(args, operation, nodes)
        return 0
    admin = open_admin(args)
    try:
        result = admin.request(operation, nodes, args.goals, timeout_s=answer_timeout(args))
        progress = None
        if args.wait and result.execution_id is not None:
            if args.output != "json":
                print(accepted_line(result), flush=True)
            progress = admin.wait(result.execution_id)
    finally:
        admin.close()
    if args.output == "json":
        print_json({"result": asdict(result), "progress": None if progress is None else asdict(progress)})
    elif progress is None:
        print(accepted_line(result))
    else:
        print_progress(result.execution_id, progress)
    if progress is not None and (progress.status != "done" or progress.moves_failed):
        raise CliError(f"execution {result.execution_id} {progress.status}: {progress.moves_failed} of "
                       f"{progress.moves_total} replica moves failed")
    return 0


@one_line_errors
def stop_or_resume(operation: str, args: argparse.Namespace) -> int:
    admin = open_admin(args)
    try:
        result = admin.request(operation, timeout_s=answer_timeout(args))
    finally:
        admin.close()
    if args.output == "json":
        print_json(asdict(result))
    else:
        done = "stopping: no new move starts, moves in flight finish" if operation == "stop" else "resumed"
        print(f"{operation}: accepted: execution {result.execution_id} {done}")
    return 0


# ---------------------------------------------------------------------------------------------------
# Printing


def accepted_line(result) -> str:
    if result.execution_id is None:
        return "nothing to do: the placement already meets the goals"
    return (f"accepted: execution {result.execution_id}: {result.replica_moves} replica moves "
            f"({human_bytes(result.bytes_to_move)}), {result.leadership_changes} leadership changes")


def print_progress(execution_id: str, progress) -> None:
    print_table(("EXECUTION", "STATUS", "MOVES-DONE", "IN-FLIGHT", "FAILED", "MOVES-TOTAL", "BYTES-DONE",
                 "BYTES-TOTAL", "LEADERSHIP", "ETA"),
                [(execution_id, progress.status, progress.moves_done, progress.moves_in_flight, progress.moves_failed,
                  progress.moves_total, human_bytes(progress.bytes_done), human_bytes(progress.bytes_total),
                  f"{progress.leadership_done}/{progress.leadership_total}"
                  + (f" ({progress.leadership_failed} failed)" if progress.leadership_failed else ""),
                  None if progress.eta_ms is None else _duration(progress.eta_ms))])


def show_proposal(args: argparse.Namespace, operation: str, nodes) -> None:
    admin = open_admin(args)
    try:
        planned = admin.propose(operation, nodes, args.goals)
    finally:
        admin.close()
    p, coverage = planned.proposal, planned.coverage
    if args.output == "json":
        print_json({
            "operation": planned.operation,
            "nodes": list(planned.nodes),
            "coverage": {"partitions": coverage.partitions, "sampled": coverage.sampled, "ratio": coverage.ratio,
                         "unsampled_partitions": list(coverage.unsampled_partitions)},
            "replica_moves": [asdict(m) for m in p.replica_moves],
            "leadership_changes": [asdict(c) for c in p.leadership_changes],
            "bytes_moved": p.bytes_moved,
            "stopped_at_move_limit": p.stopped_at_move_limit,
            "goals": [asdict(g) for g in p.goals],
            "loads": [{"node": node, "before": _load(p.loads_before.get(node)), "after": _load(p.loads_after.get(node))}
                      for node in sorted(set(p.loads_before) | set(p.loads_after))],
        })
        return
    what = _cli_name(planned.operation) + (f" {','.join(map(str, planned.nodes))}" if planned.nodes else "")
    print(f"Proposal for {what}: {len(p.replica_moves)} replica moves ({human_bytes(p.bytes_moved)}), "
          f"{len(p.leadership_changes)} leadership changes"
          + (" (stopped at the move limit)" if p.stopped_at_move_limit else ""))
    print(f"Load samples: {coverage.sampled} of {coverage.partitions} partitions ({coverage.ratio:.0%})"
          + (f"; unsampled: {', '.join(coverage.unsampled_partitions[:5])}"
             + (", ..." if coverage.unsampled > 5 else "") if coverage.unsampled else ""))
    print()
    if p.replica_moves:
        print_table(("TOPIC", "PARTITION", "OLD-REPLICAS", "NEW-REPLICAS", "GOAL", "BYTES"),
                    [(m.topic, m.partition, list(m.old_replicas), list(m.new_replicas), m.goal, human_bytes(m.bytes_moved))
                     for m in p.replica_moves])
    else:
        print("Replica moves: none")
    print()
    if p.leadership_changes:
        print_table(("TOPIC", "PARTITION", "OLD-LEADER", "NEW-LEADER", "GOAL"),
                    [(c.topic, c.partition, c.old_leader, c.new_leader, c.goal) for c in p.leadership_changes])
    else:
        print("Leadership changes: none")
    print()
    print_table(("GOAL", "HARD", "BEFORE", "AFTER", "REASON"),
                [(g.goal, g.hard, g.violation_before or "ok", g.violation_after or "ok", g.reason) for g in p.goals])
    print()
    rows = []
    for node in sorted(set(p.loads_before) | set(p.loads_after)):
        before, after = p.loads_before.get(node), p.loads_after.get(node)
        rows.append((node, _change(before, after, "replicas", str), _change(before, after, "leaders", str),
                     _change(before, after, "disk_bytes", human_bytes),
                     _change(before, after, "network_in", human_rate), _change(before, after, "network_out", human_rate)))
    print_table(("NODE", "REPLICAS", "LEADERS", "DISK", "NETWORK-IN", "NETWORK-OUT"), rows)


def _load(load) -> dict | None:
    if load is None:
        return None
    return {"replicas": load.replicas, "leaders": load.leaders, "disk_bytes": load.disk_bytes,
            "disk_capacity_bytes": load.disk_capacity_bytes, "network_in": load.network_in,
            "network_out": load.network_out, "leader_bytes_in": load.leader_bytes_in}


def _change(before, after, field: str, render) -> str:
    """`before -> after`, or the one figure when it does not change."""
    old = "-" if before is None else render(getattr(before, field))
    new = "-" if after is None else render(getattr(after, field))
    return old if old == new else f"{old} -> {new}"


def human_bytes(count: float) -> str:
    """1000-based units, as 1.2 MB; whole bytes below 1 kB."""
    if count < 1000:
        return f"{count:.0f} B"
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        count /= 1000
        if count < 1000 or unit == "PB":
            return f"{count:.1f} {unit}"
    raise AssertionError("unreachable")


def human_rate(bytes_per_s: float) -> str:
    return human_bytes(bytes_per_s) + "/s"


def _duration(ms: int) -> str:
    seconds = max(0, round(ms / 1000))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _ago(now_ms: int, then_ms: int | None) -> str | None:
    return None if not then_ms else f"{_duration(now_ms - then_ms)} ago"


def _cli_name(operation: str) -> str:
    return operation.replace("_", "-")


def _now_ms() -> int:
    return int(time.time() * 1000)
