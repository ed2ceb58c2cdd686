"""The client side of the Kafka protocol between nodes: pipelined connections and a pool of them by node id.

Raft RPCs, follower fetches, broker heartbeats and forwarded admin requests go through `NodeClients`.
Each `NodeConnection` is one TCP connection with any number of requests in flight; a read loop task matches
responses to waiting callers by correlation id. `request()` always waits for a response, so it is not for
Produce with acks=0 (which gets none).

Errors: if the connection cannot be opened, breaks, hits EOF or carries a malformed frame, every request in
flight on it fails with ConnectionError and it is closed; the next request opens a new one. A request that
gets no answer within its timeout fails with TimeoutError and also closes the connection, failing the
others in flight with ConnectionError. That is what Kafka's NetworkClient does, for two reasons: the node
answers in order, so whatever was queued behind the late answer is late too; and a silent peer (half-open
connection, frozen process) is only noticed by timeouts, so keeping the connection would keep timing out
instead of trying a fresh one.
"""

import asyncio
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_request_header, parse_response_header
from odradek.protocol.messages import API_BY_KEY
from odradek.protocol.types import INT32

__all__ = ["ClientSecurity", "NodeClients", "NodeConnection", "SaslLogin", "UnknownNodeError"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_EXCHANGE_TIMEOUT_S = 10


class SaslLogin(Protocol):
    """The client side of one SASL exchange."""

    def first(self) -> bytes: ...

    def next(self, server_token: bytes) -> bytes | None:
        """The next client token, or None when the exchange is done (after checking the server's last token)."""


@dataclass(frozen=True)
class ClientSecurity:
    """How a node reaches a listener of another node: over TLS, and with a SASL login, or neither."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_login: Callable[[], SaslLogin] | None = None  # a new exchange for every connection


class UnknownNodeError(LookupError):
    """A request for a node id that has no endpoint."""


class AuthenticationError(ConnectionError):
    """The node refused the client's SASL mechanism or credentials, or failed to prove itself: unlike a lost
    connection, asking again with the same settings fails the same way."""


class NodeConnection:
    """One lazily opened, pipelined connection to host:port."""

    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout_s: float = 5.0,
                 security: ClientSecurity | None = None):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.security = security
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        # correlation id -> future of the response frame; only the read loop and _fail remove entries, so a
        # correlation id the loop does not find means the peer answered something never asked.
        self._pending: dict[int, asyncio.Future] = {}
        self._last_correlation_id = 0
        self._connect_lock = asyncio.Lock()

    async def request(self, api_key: int, api_version: int, body: dict, timeout_s: float) -> dict:
        """Send one request and return its decoded response body.

        Raises ConnectionError (connection failed or lost), TimeoutError (no answer within timeout_s, counted
        from the send; connecting has its own connect_timeout_s) or the codec's errors for a body that does
        not encode or a response that does not decode. Records fields of the response are memoryviews into
        that response's own frame, an immutable bytes object that nothing reuses; holding one keeps the
        whole frame alive.
        """
        api = API_BY_KEY[api_key]
        payload = api.encode_request(api_version, body)  # before connecting: a bad body must not cost one
        writer = await self._connected()
        self._last_correlation_id = correlation_id = (self._last_correlation_id + 1) & 0x7FFFFFFF
        header = encode_request_header(api_key, api_version, correlation_id, self.client_id)
        future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = future
        # Two synchronous writes, no await between them: frames of concurrent requests cannot interleave,
        # and a large payload is not copied to prepend the size.
        writer.write(INT32.pack(len(header) + len(payload)) + header)
        writer.write(payload)
        try:
            async with asyncio.timeout(timeout_s):
                await writer.drain()
                frame = await future
        except TimeoutError:
            if self._writer is writer:  # else it is already closed, and maybe replaced by a fresh one
                self._fail("closed: a request on it timed out")
            raise TimeoutError(f"{api.name} v{api_version} to {self._address()}: "
                               f"no response within {timeout_s}s") from None
        finally:
            # No-op once answered. Otherwise (cancelled caller, lost connection) the read loop drops the
            # late answer, and _fail does not leave an exception nobody retrieves.
            future.cancel()
        _, position = parse_response_header(frame, api_key, api_version)
        return api.decode_response(api_version, memoryview(frame), position)

    def close(self) -> None:
        """Close the connection; requests in flight fail with ConnectionError. A later request reconnects."""
        self._fail("closed")

    def _address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connect_lock:  # concurrent first requests share one connection attempt
            if self._writer is None:
                context = self.security.ssl_context if self.security else None
                try:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(
                        self.host, self.port, ssl=context, server_hostname=self.host if context else None),
                        self.connect_timeout_s)
                except OSError as exc:  # TimeoutError and ssl.SSLError are OSErrors
                    raise ConnectionError(f"cannot connect to {self._address()}: {exc!r}") from exc
                if self.security is not None and self.security.sasl_login is not None:
                    try:
                        await self._authenticate(reader, writer)
                    except BaseException:
                        writer.close()
                        raise
                self._writer = writer
                self._read_task = asyncio.create_task(self._read_loop(reader))
            return self._writer

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The SASL exchange (SaslHandshake v1, then SaslAuthenticate) before any other request."""
        mechanism = self.security.sasl_mechanism
        handshake = await self._exchange(reader, writer, SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if handshake["error_code"]:
            raise AuthenticationError(f"{self._address()} does not offer SASL mechanism {mechanism} "
                                  f"({ErrorCode(handshake['error_code']).name}; it offers "
                                  f"{', '.join(handshake['mechanisms']) or 'none'})")
        login = self.security.sasl_login()
        token = login.first()
        while token is not None:
            answer = await self._exchange(reader, writer, SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if answer["error_code"]:
                log.warning("Authentication to %s with %s failed: %s", self._address(), mechanism,
                            answer["error_message"])
                raise AuthenticationError(f"authentication to {self._address()} failed: {answer['error_message']}")
            try:
                token = login.next(bytes(answer["auth_bytes"]))
            except ValueError as exc:  # the server's proof does not check out: not the node we meant
                raise AuthenticationError(f"authentication to {self._address()} failed: {exc}") from exc

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int,
                        api_version: int, body: dict) -> dict:
        """One request answered before the read loop runs (the SASL exchange)."""
        api = API_BY_KEY[api_key]
        self._last_correlation_id = correlation_id = (self._last_correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request_header(api_key, api_version, correlation_id, self.client_id) + \
            api.encode_request(api_version, body)
        writer.write(INT32.pack(len(frame)) + frame)
        try:
            async with asyncio.timeout(SASL_EXCHANGE_TIMEOUT_S):
                await writer.drain()
                (size,) = INT32.unpack(await reader.readexactly(4))
                response = await reader.readexactly(size)
        except (OSError, asyncio.IncompleteReadError) as exc:  # TimeoutError is an OSError
            raise ConnectionError(f"{api.name} to {self._address()}: {exc!r}") from exc
        _, position = parse_response_header(response, api_key, api_version)
        return api.decode_response(api_version, memoryview(response), position)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                (size,) = INT32.unpack(await reader.readexactly(4))
                if size < 4:
                    raise ConnectionError(f"malformed response frame of {size} bytes")
                # readexactly returns a fresh bytes object per frame, which decoded records may reference.
                frame = await reader.readexactly(size)
                (correlation_id,) = INT32.unpack_from(frame)
                future = self._pending.pop(correlation_id, None)
                if future is None:
                    raise ConnectionError(f"response for unknown correlation id {correlation_id}")
                if not future.done():
                    future.set_result(frame)
        except asyncio.IncompleteReadError as exc:
            self._fail("closed by the peer", exc)
        except Exception as exc:  # whatever broke the loop, the waiting callers must not hang
            self._fail(f"lost: {exc!r}", exc)

    def _fail(self, reason: str, cause: BaseException | None = None) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._read_task is not None:
            if self._read_task is not asyncio.current_task():
                self._read_task.cancel()
            self._read_task = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                # One exception object per caller: a shared one would collect every caller's traceback.
                error = ConnectionError(f"connection to {self._address()} {reason}")
                error.__cause__ = cause
                future.set_exception(error)


class NodeClients:
    """Connections to the other nodes by node id, opened on first use."""

    def __init__(self, client_id: str, *, connect_timeout_s: float = 5.0, security: ClientSecurity | None = None):
        self.client_id = client_id  # e.g. "odradek-node-1", shows up in the peers' request logs
        self.connect_timeout_s = connect_timeout_s
        self.security = security  # of the listener these connections go to
        self._endpoints: dict[int, tuple[str, int]] = {}
        self._connections: dict[int, NodeConnection] = {}

    @property
    def endpoints(self) -> Mapping[int, tuple[str, int]]:
        return MappingProxyType(self._endpoints)

    def set_endpoint(self, node_id: int, host: str, port: int) -> None:
        """Add or move a node; moving it closes its old connection (its requests in flight fail)."""
        if self._endpoints.get(node_id) == (host, port):
            return
        self._endpoints[node_id] = (host, port)
        old = self._connections.pop(node_id, None)
        if old is not None:
            old.close()

    async def request(self, node_id: int, api_key: int, api_version: int, body: dict, timeout_s: float) -> dict:
        """NodeConnection.request to that node; UnknownNodeError if it has no endpoint."""
        connection = self._connections.get(node_id)
        if connection is None:
            if node_id not in self._endpoints:
                raise UnknownNodeError(f"no endpoint known for node {node_id}")
            host, port = self._endpoints[node_id]
            connection = self._connections[node_id] = NodeConnection(
                host, port, client_id=self.client_id, connect_timeout_s=self.connect_timeout_s,
                security=self.security)
        return await connection.request(api_key, api_version, body, timeout_s)

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
