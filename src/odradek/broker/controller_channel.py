"""How the broker side reaches the active controller, wherever it is.

A request goes to the controller-listener handler of this node when this node is the active controller,
otherwise as a Kafka request to the quorum leader's controller listener, retried across elections until
`timeout_s` (also when only some of its results say NOT_CONTROLLER, as Kafka's channel to the controller
does). Brokers send their own requests this way (registration, heartbeats, AlterPartition, producer
id blocks) and forward the admin requests of clients (CreateTopics, configs, ...), as Kafka brokers do.
"""

from __future__ import annotations

import asyncio
import inspect
import time

from odradek.broker.request_context import RequestContext
from odradek.network.client import NodeClients
from odradek.network.server import Connection
from odradek.protocol.errors import ErrorCode, KafkaError

LOCAL_CONNECTION_ID = -1
RETRY_BACKOFF_S = 0.05
CREATE_TOPICS_VERSION = 7


def from_controller_side(broker, ctx: RequestContext) -> bool:
    """True for requests that must be answered here, never forwarded again: they came to the controller."""
    return ctx.connection.id == LOCAL_CONNECTION_ID or any(
        listener.name == ctx.connection.listener for listener in broker.config.controller_listeners)


def _names_not_controller(body) -> bool:
    """Whether NOT_CONTROLLER is anywhere in a response, top level or per result (CreateAcls, CreateTopics, ...):
    Kafka's brokers retry such a request at the new controller rather than pass the error on."""
    if isinstance(body, dict):
        return body.get("error_code") == ErrorCode.NOT_CONTROLLER or any(
            isinstance(value, list | dict) and _names_not_controller(value) for value in body.values())
    if isinstance(body, list):
        return any(_names_not_controller(item) for item in body)
    return False


class ControllerChannel:
    def __init__(self, node):
        self.node = node
        self.clients = NodeClients(f"odradek-broker-{node.node_id}", security=node.controller_security)
        for voter, (host, port) in node.config.quorum_voters.items():
            if voter != node.node_id:
                self.clients.set_endpoint(voter, host, port)

    def close(self) -> None:
        self.clients.close()

    async def request(self, api_key: int, api_version: int, body: dict, timeout_s: float = 30.0) -> dict:
        node = self.node
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "no active controller answered in time")
            if node.controller.is_active:
                response = await self._local(api_key, api_version, body)
            else:
                leader = node.quorum.leader_id
                if leader < 0 or leader == node.node_id:
                    await asyncio.sleep(RETRY_BACKOFF_S)  # an election, or our own leadership not yet active
                    continue
                try:
                    response = await self.clients.request(leader, api_key, api_version, body, remaining)
                except (ConnectionError, TimeoutError):
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
            if _names_not_controller(response):
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            return response

    async def _local(self, api_key: int, api_version: int, body: dict) -> dict:
        listener = self.node.config.controller_listeners[0].name if self.node.config.controller_listeners \
            else "CONTROLLER"
        ctx = RequestContext(api_key, api_version, 0, "local", Connection("local", listener, LOCAL_CONNECTION_ID))
        result = self.node.controller_dispatcher.routes[api_key].handle(ctx, body)
        return await result if inspect.isawaitable(result) else result

    async def create_topic(self, name: str) -> None:
        """Create a topic with the defaults (auto-creation); raises its KafkaError."""
        response = await self.request(19, CREATE_TOPICS_VERSION, {
            "topics": [{"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": [],
                        "configs": []}], "timeout_ms": 30000, "validate_only": False})
        result = response["topics"][0]
        if result["error_code"] != ErrorCode.NONE:
            raise KafkaError(ErrorCode(result["error_code"]), result["error_message"])
