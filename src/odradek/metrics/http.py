"""The node's HTTP port (metrics.listener): GET /metrics in Prometheus text format, Cruise Control's REST API
(/kafkacruisecontrol/..., balancer/http_api.py), and the web console.

An aiohttp application on the node's own event loop, started first and stopped first with the node. Its
socket is bound here, so a port in use stops the node at start with one clear line. The web console adds its
routes to the same application (`odradek.console.web.add_console`).
"""

from __future__ import annotations

import logging

from aiohttp import web

from odradek.balancer.http_api import add_balancer_api
from odradek.config import parse_metrics_listener
from odradek.console.web import add_console
from odradek.metrics.node import NodeMetrics
from odradek.metrics.registry import CONTENT_TYPE
from odradek.network import http_socket

log = logging.getLogger(__name__)

METRICS_KEY = web.AppKey("metrics", NodeMetrics)


async def _metrics(request: web.Request) -> web.Response:
    try:
        names = request.query.getall("name[]", None)  # only these families, as Prometheus' clients answer it
        text = await request.app[METRICS_KEY].scrape(set(names) if names is not None else None)
    except Exception:
        log.exception("rendering /metrics failed")
        return web.Response(status=500, text="rendering the metrics failed; see the node's log\n")
    response = web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response.enable_compression()
    return response


def build_app(node, metrics: NodeMetrics) -> web.Application:
    """The HTTP application: /metrics, the balancer's Cruise Control API, and the console's pages."""
    app = web.Application()
    app[METRICS_KEY] = metrics
    app.router.add_get("/metrics", _metrics)
    add_balancer_api(app, node)
    add_console(app, node)
    return app


class MetricsServer:
    def __init__(self, node):
        self.node = node
        self.url = node.config["metrics.listener"]
        self.host, self.port = parse_metrics_listener(self.url)
        self.metrics: NodeMetrics | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        sock = http_socket.bind("metrics.listener", self.url, self.host, self.port)
        self.port = sock.getsockname()[1]  # the port the system chose, for port 0
        self.metrics = NodeMetrics(self.node)
        self._runner = web.AppRunner(build_app(self.node, self.metrics), access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        log.info("Metrics of node %d at http://%s:%d/metrics", self.node.node_id, self.host or "0.0.0.0",
                 self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.metrics is not None:
            self.metrics.close()
