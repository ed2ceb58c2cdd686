"""The schema registry a node serves on schema.registry.listener.

It is a client of the node's own client listener, like the console. Reads are answered here. A write is
done here when this node leads `_schemas`' partition (the elected writer), and forwarded otherwise to that
node's registry, whose URL is its schema.registry.listener setting (asked with DescribeConfigs); when that
node serves no registry, the write is done here (the writers' fencing keeps one writer at a time either way).
A forwarded write is answered once this node has read it too, so whoever wrote through this node reads it
here next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp import web
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from odradek.config import parse_metrics_listener
from odradek.network import http_socket
from odradek.registry import api, errors
from odradek.registry.store import SchemaStore

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Odradek-Forwarded"  # a forwarded write is done where it arrives, never forwarded again
FORWARD_TIMEOUT_S = 60.0
READ_BACK_TIMEOUT_S = 10.0
URL_CACHE_S = 60.0


class RegistryServer:
    def __init__(self, node):
        from odradek.security.internal_client import internal_client_properties

        config = node.config
        self.node_id = node.node_id
        self.url = config["schema.registry.listener"]
        self.host, self.port = parse_metrics_listener(self.url, "schema.registry.listener", "8081")
        # a client of the node's own cluster on its inter-broker listener, logged in as the node itself
        bootstrap, properties = internal_client_properties(config)
        self.store = SchemaStore(bootstrap, properties, config["schema.registry.topic"],
                                 config["schema.registry.topic.replication.factor"])
        self._urls: dict[int, tuple[float, str]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._sock = None

    def bind(self) -> None:
        """Take the port now, before the node starts anything else."""
        self._sock = http_socket.bind("schema.registry.listener", self.url, self.host, self.port)
        self.port = self._sock.getsockname()[1]

    async def start(self) -> None:
        """Serve, once the node's client listener is up."""
        self.store.start()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        self._runner = web.AppRunner(api.build_app(self.store, self.write), access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()
        log.info("Schema registry of node %d at http://%s:%d/ (topic %s)", self.node_id, self.host or "0.0.0.0",
                 self.port, self.store.topic)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        elif self._sock is not None:
            self._sock.close()
        if self._session is not None:
            await self._session.close()
        await asyncio.get_running_loop().run_in_executor(None, self.store.close)

    async def write(self, request: web.Request, plan) -> web.Response:
        loop = asyncio.get_running_loop()
        if not request.headers.get(FORWARDED_HEADER):
            try:
                leader = await loop.run_in_executor(None, self.store.leader)
            except KafkaException as exc:
                raise errors.unknown_leader(f"Leader not known: {exc.args[0].str()}") from None
            if leader is None:
                raise errors.unknown_leader(f"Leader not known: {self.store.topic} has no leader")
            if leader != self.node_id:
                base = await self._url_of(leader)
                if base is not None:
                    return await self._forward(request, leader, base)
                # the leader serves no registry: write from here (the writers' fencing keeps that safe)
        write, offset = await self.store.write(plan)
        return api.write_reply(write, offset)

    async def _forward(self, request: web.Request, leader: int, base: str) -> web.Response:
        body = await request.read()
        headers = {FORWARDED_HEADER: str(self.node_id)}
        if "Content-Type" in request.headers:
            headers["Content-Type"] = request.headers["Content-Type"]
        try:
            async with self._session.request(request.method, base + request.path_qs, data=body,
                                             headers=headers) as response:
                answer = await response.read()
                status = response.status
                offset = response.headers.get(api.OFFSET_HEADER)
        except (TimeoutError, aiohttp.ClientError) as exc:
            self._urls.pop(leader, None)
            raise errors.forwarding_failed(f"Error while forwarding the request to the leader (node {leader} at "
                                           f"{base}): {exc or type(exc).__name__}") from None
        if offset is not None and offset.isdigit() and int(offset) > 0:
            read = await asyncio.get_running_loop().run_in_executor(
                None, self.store.wait_applied, int(offset) - 1, READ_BACK_TIMEOUT_S)
            if not read:
                raise errors.timeout(f"The leader, node {leader}, wrote the change, but this node did not read it "
                                     f"in {READ_BACK_TIMEOUT_S:g}s")
        return web.Response(status=status, body=answer, content_type=api.CONTENT_TYPE,
                            headers={api.OFFSET_HEADER: offset} if offset else None)

    async def _url_of(self, node_id: int) -> str | None:
        cached = self._urls.get(node_id)
        if cached is not None and time.monotonic() - cached[0] < URL_CACHE_S:
            return cached[1]
        url = await asyncio.get_running_loop().run_in_executor(None, self._ask_url, node_id)
        self._urls[node_id] = (time.monotonic(), url)
        return url

    def _ask_url(self, node_id: int) -> str | None:
        """The registry URL of another node, from its schema.registry.listener setting (its host filled in
        from the cluster's metadata when the setting binds every interface); None when it serves none."""
        admin = self.store.admin
        resource = ConfigResource(ResourceType.BROKER, str(node_id))
        try:
            config = admin.describe_configs([resource])[resource].result(timeout=10)
            metadata = admin.list_topics(timeout=10)
        except KafkaException as exc:
            raise errors.forwarding_failed(f"Cannot find the leader's registry: {exc.args[0].str()}") from None
        entry = config.get("schema.registry.listener")
        if entry is None or not entry.value:
            return None
        parts = urlsplit(entry.value)
        host = parts.hostname or ""
        if host in ("", "0.0.0.0", "::") and node_id in metadata.brokers:
            host = metadata.brokers[node_id].host
        netloc = f"[{host}]:{parts.port}" if ":" in host else f"{host}:{parts.port}"
        return urlunsplit(("http", netloc, "", "", ""))

