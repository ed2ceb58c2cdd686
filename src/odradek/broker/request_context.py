"""What a handler knows about the request it is answering."""

from dataclasses import dataclass

from odradek.network.server import Connection


@dataclass(frozen=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: Connection
