"""The Balancer page: the partition balancer's service, its execution's progress, the recent results of requests,
and every node's load, as balancer/admin.py reads them (with the person's own cluster identity)."""

from __future__ import annotations

from aiohttp import web

from odradek.console.html import byte_rate, definitions, html, join, notice, number, size, table, timestamp
from odradek.console.links import destination_properties
from odradek.console.web import Context

RESULTS_SHOWN = 20


def read_balancer(properties: dict):
    """(status, load view, why the load is unavailable) from the cluster; blocking."""
    from odradek.balancer.admin import BalancerAdmin
    from odradek.balancer.control import ControlError
    from odradek.balancer.model import BalancerError

    admin = BalancerAdmin(properties)
    try:
        status = admin.status()
        try:
            return status, admin.load(), None
        except (ControlError, BalancerError) as exc:
            return status, None, str(exc)
    finally:
        admin.close()


async def balancer_page(ctx: Context) -> web.StreamResponse:
    from odradek.balancer.control import ControlError

    try:
        status, view, load_error = await ctx.cluster.run_blocking(read_balancer, destination_properties(ctx.cluster))
    except ControlError as exc:
        return ctx.page("Partition balancer", notice(f"Cannot read the balancer's state: {exc}", "error"),
                        active="/balancer")
    service, progress = status.service, status.progress
    body: list[object] = [
        notice("No balancer service has run yet: is balancer.mode set, or has a request been made?", "warn")
        if service is None else "",
        definitions([("Mode", service.mode if service else "–"), ("Running on node", service.node_id if service else "–"),
                     ("Removed nodes", ", ".join(map(str, service.removed_nodes)) or "none" if service else "–"),
                     ("Sample coverage", f"{service.samples_coverage:.0%}"
                      if service and service.samples_coverage is not None else "–"),
                     ("Updated", timestamp(service.updated_ms) if service else "–")]),
        html("<p>Last automatic action: {}</p>", service.last_automatic) if service and service.last_automatic else "",
        html("<h2>Execution</h2>"),
    ]
    if progress is None:
        body.append(html('<p class="empty" id="execution">no execution yet</p>'))
    else:
        body.append(table(["Execution", "Status", "Moves done", "In flight", "Failed", "Bytes", "Leadership changes",
                           "ETA"],
                          [(status.execution.id, progress.status,
                            f"{number(progress.moves_done)} of {number(progress.moves_total)}",
                            number(progress.moves_in_flight), number(progress.moves_failed),
                            f"{size(progress.bytes_done)} of {size(progress.bytes_total)}",
                            f"{number(progress.leadership_done)} of {number(progress.leadership_total)}",
                            "–" if progress.eta_ms is None else f"{progress.eta_ms / 1000:.0f} s")],
                          id="execution"))
    body.append(html("<h2>Recent results</h2>"))
    body.append(table(["Handled", "Operation", "Nodes", "From", "Result", "Moves", "Leadership changes", "Data"],
                      [(timestamp(r.handled_ms), r.operation, ", ".join(map(str, r.nodes)) or "–", r.origin,
                        r.status if r.status != "refused" else f"refused: {r.error}",
                        number(r.replica_moves), number(r.leadership_changes), size(r.bytes_to_move))
                       for r in status.results[:RESULTS_SHOWN]], id="results", empty="no requests yet"))
    body.append(html("<h2>Load by node</h2>"))
    if view is None:
        body.append(notice(f"Load unavailable: {load_error}", "warn"))
    else:
        loads = view.model.node_loads()
        body.append(table(["Node", "Rack", "State", "Replicas", "Leaders", "Disk", "Disk used", "Bytes in",
                           "Bytes out"],
                          [(n.id, n.rack or "–", ("alive" if n.alive else "down")
                            + (", removed" if n.id in view.removed else ""),
                            number(loads[n.id].replicas), number(loads[n.id].leaders), size(loads[n.id].disk_bytes),
                            "–" if loads[n.id].disk_ratio is None else f"{loads[n.id].disk_ratio:.1%}",
                            byte_rate(loads[n.id].network_in), byte_rate(loads[n.id].network_out))
                           for n in sorted(view.model.nodes, key=lambda n: n.id)], id="node-load"))
        body.append(html("<p>Rates are averages over the sampled window; {} of {} partitions sampled.</p>",
                         number(view.coverage.sampled), number(view.coverage.partitions)))
    return ctx.page("Partition balancer", join(body),
                    active="/balancer")


ROUTES = (("GET", "/balancer", balancer_page, "page"),)
