"""How the CLI's own Kafka requests connect: TLS and SASL from --command-config, and the brokers Metadata names.

Most commands hand --command-config's properties to librdkafka. Commands that send requests librdkafka has no
API for (`quotas`) speak the protocol themselves through `NodeConnection`; `client_security` translates the
same librdkafka-named properties for them (security/client_properties.py lists them), so one file serves
every command; `client.id` is the requests' client id (default odradek-cli).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from odradek.cli.main import CliError, read_properties
from odradek.network.client import ClientSecurity, NodeConnection

METADATA = 3
CLIENT_ID = "odradek-cli"

T = TypeVar("T")


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """security/client_properties.py's translation of the properties, its errors as CliErrors."""
    from odradek.security.client_properties import client_security as translate

    try:
        return translate(properties)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def command_properties(args: argparse.Namespace) -> dict[str, str]:
    return read_properties(args.command_config) if args.command_config else {}


# ---------------------------------------------------------------------------------------------------
# Raw requests


class Brokers:
    """Raw requests to the bootstrap server and to the brokers its Metadata names, one connection each, all
    with --command-config's security. Every failure to connect or log in is a CliError of one line."""

    def __init__(self, args: argparse.Namespace):
        if not args.verbose:  # NodeConnection logs a refused login as a warning; the CliError says it once
            quiet = logging.getLogger("odradek.network.client")
            if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
                quiet.addHandler(logging.NullHandler())
        properties = command_properties(args)
        self.security = client_security(properties)
        self.client_id = properties.get("client.id") or CLIENT_ID
        self.bootstrap_servers = [_address(s) for s in args.bootstrap_server.split(",") if s.strip()]
        self.bootstrap_text = args.bootstrap_server
        self.timeout = args.timeout
        self.bootstrap_address: tuple[str, int] | None = None  # the bootstrap server that answered
        self._connections: dict[tuple[str, int], NodeConnection] = {}

    async def metadata(self) -> dict:
        """Metadata (no topics) from the first bootstrap server that answers; `bootstrap_address` is then that one."""
        body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        unreachable = None
        for address in self.bootstrap_servers:
            try:
                response = await self._request(address, METADATA, 12, body)
            except _Unreachable as exc:
                unreachable = exc
                continue
            self.bootstrap_address = address
            return response
        raise CliError(f"cannot reach {self.bootstrap_text}{self._why(unreachable)}")

    def node_address(self, metadata: dict, node_id: int) -> tuple[str, int]:
        """Where a broker Metadata names listens; the bootstrap server for a node it does not name (-1)."""
        for broker in metadata["brokers"]:
            if broker["node_id"] == node_id:
                return broker["host"], broker["port"]
        return self.bootstrap_address

    async def request(self, address: tuple[str, int], api_key: int, version: int, body: dict) -> dict:
        try:
            return await self._request(address, api_key, version, body)
        except _Unreachable as exc:
            raise CliError(f"cannot reach broker {address[0]}:{address[1]}{self._why(exc)}") from None

    def _why(self, unreachable: _Unreachable | None) -> str:
        if unreachable is not None and unreachable.detail:
            return f": {unreachable.detail}"
        return f" (no answer within {self.timeout:g}s)"

    async def _request(self, address: tuple[str, int], api_key: int, version: int, body: dict) -> dict:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = NodeConnection(
                *address, client_id=self.client_id, connect_timeout_s=self.timeout, security=self.security)
        try:
            return await connection.request(api_key, version, body, self.timeout)
        except ConnectionError as exc:
            text = str(exc)
            if text.startswith("authentication to ") or " does not offer SASL mechanism " in text:
                raise CliError(text) from None  # the node answered: no other server will think otherwise
            raise _Unreachable(_tls_failure(exc)) from None
        except OSError:  # TimeoutError
            raise _Unreachable(None) from None

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()


class _Unreachable(Exception):
    def __init__(self, detail: str | None):
        super().__init__(detail)
        self.detail = detail


def _tls_failure(exc: BaseException) -> str | None:
    """Why a TLS handshake failed (an untrusted or misnamed certificate), if that is why the connection did."""
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"TLS: {cause.verify_message or cause.reason}"
    if isinstance(cause, ssl.SSLError):
        return f"TLS: {cause.reason or cause}"
    return None


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise CliError(f"--bootstrap-server: expected HOST:PORT, got '{text.strip()}'")
    return host.strip("[]"), int(port)


def run_requests(args: argparse.Namespace, work: Callable[[Brokers], Awaitable[T]]) -> T:
    """Runs `work` with a Brokers for the command's connection options, and closes its connections."""
    brokers = Brokers(args)

    async def go() -> T:
        try:
            return await work(brokers)
        finally:
            brokers.close()

    return asyncio.run(go())
