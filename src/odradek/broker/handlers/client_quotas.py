"""DescribeClientQuotas (from this node's metadata image) and AlterClientQuotas (on the active controller): the
client quotas of users, client ids and addresses, as kafka-configs --entity-type users/clients/ips manages them."""

import asyncio
import ipaddress
import socket

from odradek.broker.controller_channel import from_controller_side
from odradek.controller import client_quotas
from odradek.network.quotas import IP
from odradek.protocol.errors import KafkaError

RESOLVE_TIMEOUT_S = 5.0


def handle_describe_client_quotas(broker, ctx, request: dict) -> dict:
    return {"throttle_time_ms": 0, **client_quotas.describe(broker.image, request["components"], request["strict"])}


async def handle_alter_client_quotas(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    hosts = list({name for entry in request["entries"] for name in _host_names(entry)})
    resolved = await asyncio.gather(*map(_resolves, hosts))
    resolvable = {host for host, resolves in zip(hosts, resolved, strict=True) if resolves}
    try:
        entries = await broker.controller.alter_client_quotas(request["entries"], request["validate_only"],
                                                              resolvable.__contains__)
    except KafkaError as exc:
        entries = [{"error_code": exc.code, "error_message": exc.message,
                    "entity": client_quotas.entity_data(client_quotas.entity_of(entry["entity"]))}
                   for entry in request["entries"]]
    return {"throttle_time_ms": 0, "entries": entries}


def _host_names(entry: dict) -> list[str]:
    """The ip entity's name when it is no address: Kafka takes a host name that resolves."""
    name = client_quotas.entity_of(entry["entity"]).get(IP)
    if not name:
        return []
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return [name]
    return []


async def _resolves(host: str) -> bool:
    try:
        await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM),
                               RESOLVE_TIMEOUT_S)
    except (OSError, ValueError, TimeoutError):
        return False
    return True
