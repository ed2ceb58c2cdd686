"""How the CLI's own Kafka requests connect: TLS and SASL from --command-config, and the brokers Metadata names.

Most commands hand --command-config's properties to librdkafka. Commands that send requests librdkafka has no
API for (`quotas`) speak the protocol themselves through `NodeConnection`; `client_security` translates the
same librdkafka-named properties for them, so one file serves every command:

    security.protocol                   plaintext (default), ssl, sasl_plaintext, sasl_ssl
    ssl.ca.location                     CA file or directory (default: the system's authorities)
    ssl.ca.pem                          CA certificates inline
    ssl.certificate.location, ssl.key.location, ssl.key.password    a client certificate (mutual TLS)
    ssl.endpoint.identification.algorithm   https (default: the name must match) or none
    enable.ssl.certificate.verification     true (default) or false
    sasl.mechanism (or sasl.mechanisms) PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with sasl.username, sasl.password
    client.id                           the requests' client id (default odradek-cli)

Other properties are librdkafka's business and ignored here.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from odradek.cli.main import CliError, read_properties
from odradek.network.client import ClientSecurity, NodeConnection

METADATA = 3
CLIENT_ID = "odradek-cli"
PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

T = TypeVar("T")


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The TLS context and SASL login that librdkafka-named client properties ask for; None for plaintext.
    A setting this cannot honour is a CliError, never ignored."""
    protocol = properties.get("security.protocol", "plaintext").strip().lower()
    if protocol not in PROTOCOLS:
        raise _invalid(f"security.protocol={protocol} (expected {', '.join(PROTOCOLS)})")
    if protocol == "plaintext":
        return None
    context = _ssl_context(properties) if protocol.endswith("ssl") else None
    if not protocol.startswith("sasl"):
        return ClientSecurity(ssl_context=context)
    mechanism = (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "").strip().upper()
    if mechanism not in MECHANISMS:
        raise _invalid(f"sasl.mechanism={mechanism or 'GSSAPI (librdkafka default)'}: the CLI's own requests log "
                       f"in with {', '.join(MECHANISMS)}")
    username, password = properties.get("sasl.username"), properties.get("sasl.password")
    if not username or password is None:
        raise _invalid(f"sasl.mechanism={mechanism} needs sasl.username and sasl.password")
    from odradek.security.client_login import PlainLogin, ScramLogin
    from odradek.security.scram import ScramClient, ScramMechanism, random_nonce

    if mechanism == "PLAIN":
        return ClientSecurity(context, mechanism, lambda: PlainLogin(username, password))
    scram = ScramMechanism.by_name(mechanism)
    return ClientSecurity(context, mechanism,
                          lambda: ScramLogin(ScramClient(scram, username, password, random_nonce)))


def _ssl_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = properties.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "none"):
        raise _invalid(f"ssl.endpoint.identification.algorithm={algorithm} (expected https or none)")
    verify = properties.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise _invalid(f"enable.ssl.certificate.verification={verify} (expected true or false)")
    context.check_hostname = algorithm == "https" and verify == "true"
    if verify == "false":
        context.verify_mode = ssl.CERT_NONE
    location, pem = properties.get("ssl.ca.location"), properties.get("ssl.ca.pem")
    try:
        if pem:
            context.load_verify_locations(cadata=pem)
        elif location and location != "probe":
            if os.path.isdir(location):
                context.load_verify_locations(capath=location)
            else:
                context.load_verify_locations(cafile=location)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError) as exc:
        raise _invalid(f"cannot load the CA certificates of ssl.ca.{'pem' if pem else 'location'}: "
                       f"{_reason(exc)}") from None
    certificate, key = properties.get("ssl.certificate.location"), properties.get("ssl.key.location")
    if certificate or key:
        try:
            context.load_cert_chain(certificate or key, key, properties.get("ssl.key.password") or None)
        except (OSError, ssl.SSLError) as exc:
            raise _invalid(f"cannot load ssl.certificate.location / ssl.key.location: {_reason(exc)}") from None
    return context


def _invalid(text: str) -> CliError:
    return CliError(f"invalid client configuration: {text}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


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
