"""The Kafka protocol server: framing, size limits, in-order request processing per connection, sendfile.

Each connection is served by one task that reads size-prefixed frames, hands each to the dispatcher and
writes the responses in request order, as Kafka does. Responses of requests answered at once are
coalesced into one write; a handler that has to wait (long-poll fetch, a transaction check) first flushes
what is pending, and the next request is read once it has been answered. One kind of waiting response is
pipelined: a Deferred, a request that has taken effect and only waits to be answered (a produce with
acks=all waiting for the in-sync replicas). Further produce requests are handled meanwhile, so a client
that pipelines acks=all produce requests (librdkafka, not idempotent) is not held to one replication
round trip per request; any other request waits until the deferred responses before it are written.
Record data of fetch responses (FileRegion parts) goes from the segment file to the socket with os.sendfile.
A TLS listener runs the same loop over a TlsTransport (network/transport.py); the listener's security hook
then gives the connection its principal (from the client certificate) and, on a SASL listener, its
authenticator. A client over one of its quotas is muted (KIP-219): answered at once, its next request waits
until `muted_until`; the acceptor asks `admit_rate` (connection creation rates) before taking a connection.
With `request_metrics` (metrics.listener set) each request's moments are taken for Kafka's request time
histograms: read, dispatched, dispatcher returned, answer ready, answer written (metrics/requests.py).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from odradek.network.transport import PlainTransport, TlsTransport
from odradek.protocol.file_region import FileRegion

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
READ_CHUNK = 256 * 1024
FLUSH_THRESHOLD = 1024 * 1024
PRODUCE_API_KEY = 0  # the only requests handled while deferred responses are pending
MAX_DEFERRED = 1000  # pending deferred responses per connection before the next request waits for the oldest


@dataclass
class Connection:
    """What a handler may know about the client connection a request arrived on."""

    peer: str
    listener: str
    id: int
    state: dict = field(default_factory=dict)
    idle_since: float | None = None  # event-loop time since which it waits for a request; None while serving
    closed_for_idleness: bool = False  # a request that arrives after this is never handled
    principal: str = "User:ANONYMOUS"  # who the client is, as Kafka's principal builder names it
    authenticator: object | None = None  # a SASL listener's SaslAuthenticator (security/authenticator.py)
    close_after_response: bool = False  # set by a handler: the connection closes once its answer is written,
    close_delay_s: float = 0.0  # this long after (a failed authentication: Kafka's delay against guessing)
    muted_until: float = 0.0  # time.monotonic() until which a client over a quota is not served (KIP-219)


class CloseConnection(Exception):
    """Raised by the dispatcher for a request that cannot be answered: the connection is closed."""


class Deferred:
    """The answer to a request that has already taken effect and only waits to be told (acks=all waiting for
    the in-sync replicas): the connection goes on handling produce requests while it waits."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable):
        self.awaitable = awaitable


# secure(connection, peer certificate or None): called once the connection is established (after the TLS
# handshake on a TLS listener) to give it its principal and authenticator.
Secure = Callable[[Connection, "dict | None"], None]

# admit_rate(listener, peer address) -> 0.0 to admit a new connection, or the seconds after which to close it
# unanswered (connection creation rate quotas; it may first wait, which holds the listener's accepting back).
AdmitRate = Callable[[str, str], Awaitable[float]]

# dispatch(connection, frame) -> list of response parts (bytes | FileRegion), an awaitable of it, a Deferred
# of it, or None for a request that gets no response (Produce with acks=0). The size prefix is added here.
Dispatch = Callable[[Connection, bytearray], "list | Awaitable[list] | Deferred | None"]


class ConnectionLimits:
    """max.connections and max.connections.per.ip, shared by a node's client listeners: a connection past
    either limit is closed as soon as it is accepted. The limits are read at each accept (they are dynamic)."""

    def __init__(self, limits: Callable[[], tuple[int, int, dict[str, int]]]):
        self.limits = limits  # () -> (max.connections, max.connections.per.ip, its per-address overrides)
        self.total = 0
        self.by_host: dict[str, int] = {}

    def admit(self, host: str) -> str | None:
        """Count a new connection from `host`, or say why it is refused."""
        most, most_per_host, overrides = self.limits()
        most_for_host = overrides.get(host, most_per_host)
        if self.total >= most:
            return f"the node already has the configured maximum of {most} connections (max.connections)"
        if self.by_host.get(host, 0) >= most_for_host:
            return f"{host} already has the configured maximum of {most_for_host} connections (max.connections.per.ip)"
        self.total += 1
        self.by_host[host] = self.by_host.get(host, 0) + 1
        return None

    def release(self, host: str) -> None:
        self.total -= 1
        self.by_host[host] -= 1
        if not self.by_host[host]:
            del self.by_host[host]


class KafkaServer:
    def __init__(self, host: str, port: int, dispatch: Dispatch, *, max_request_size: int, listener: str = "PLAINTEXT",
                 limits: ConnectionLimits | None = None, max_idle_ms: int = -1,
                 ssl_context: ssl.SSLContext | None = None, secure: Secure | None = None,
                 admit_rate: AdmitRate | None = None, request_metrics=None):
        self.host = host
        self.port = port
        self.dispatch = dispatch
        self.max_request_size = max_request_size
        self.listener = listener
        self.limits = limits
        self._server_socket: socket.socket | None = None
        self._accept_task: asyncio.Task | None = None
        self._connections: set[asyncio.Task] = set()
        self._sockets: dict[int, tuple[Connection, socket.socket]] = {}
        self._next_id = 0
        self.max_idle_ms = max_idle_ms  # connections.max.idle.ms
        self.ssl_context = ssl_context  # replaced when the listener's certificate is reloaded: new connections use it
        self.secure = secure
        self.admit_rate = admit_rate
        self.request_metrics = request_metrics  # metrics/requests.py RequestMetrics, or None
        self._idle_task: asyncio.Task | None = None

    @property
    def connection_count(self) -> int:
        return len(self._sockets)

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(1024)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._server_socket = sock
        self._accept_task = asyncio.create_task(self._accept_loop())
        if self.max_idle_ms >= 0:
            self._idle_task = asyncio.create_task(self._close_idle_connections())

    async def close(self) -> None:
        if self._idle_task:
            self._idle_task.cancel()
        if self._accept_task:
            self._accept_task.cancel()
        if self._server_socket:
            self._server_socket.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            client, address = await loop.sock_accept(self._server_socket)
            if self.admit_rate is not None:
                refused_s = await self.admit_rate(self.listener, address[0])
                if refused_s > 0:  # as Kafka, the client learns of it only when the socket closes
                    loop.call_later(refused_s, client.close)
                    continue
            refused = self.limits.admit(address[0]) if self.limits is not None else None
            if refused is not None:
                log.info("Rejected connection from %s: %s", address[0], refused)
                client.close()
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._next_id += 1
            connection = Connection(f"{address[0]}:{address[1]}", self.listener, self._next_id)
            task = asyncio.create_task(self._serve(client, connection))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
            if self.limits is not None:
                task.add_done_callback(lambda _, host=address[0]: self.limits.release(host))

    async def _close_idle_connections(self) -> None:
        """Kafka's connections.max.idle.ms: a connection that has waited that long for its next request is
        shut down (its serving task then ends as on a client's close)."""
        loop = asyncio.get_running_loop()
        max_idle_s = self.max_idle_ms / 1000
        while True:
            await asyncio.sleep(min(max(max_idle_s / 4, 0.05), 30))
            now = loop.time()
            for connection, sock in list(self._sockets.values()):
                if connection.idle_since is not None and now - connection.idle_since > max_idle_s:
                    log.debug("closing connection from %s: idle for more than %d ms (connections.max.idle.ms)",
                              connection.peer, self.max_idle_ms)
                    connection.idle_since = None
                    connection.closed_for_idleness = True
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

    async def _establish(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, connection: Connection):
        """The connection's transport once TLS (if any) is established, or None if the handshake failed."""
        if self.ssl_context is None:
            transport = PlainTransport(loop, sock)
        else:
            transport = TlsTransport(loop, sock, self.ssl_context)
            connection.idle_since = loop.time()  # a client that never completes the handshake is idle
            try:
                await transport.handshake()
            except ssl.SSLError as exc:
                log.info("Failed authentication with %s (SSL handshake failed: %s)", connection.peer,
                         exc.reason or exc)
                return None
        if self.secure is not None:
            self.secure(connection, transport.peer_certificate())
        return transport

    async def _serve(self, sock: socket.socket, connection: Connection) -> None:
        loop = asyncio.get_running_loop()
        buffer = bytearray()
        start = 0
        self._sockets[connection.id] = (connection, sock)
        writer = None
        metrics = self.request_metrics
        timing = None
        try:
            transport = await self._establish(loop, sock, connection)
            if transport is None:
                return
            writer = _ResponseWriter(loop, transport, sock, connection, metrics)
            while True:
                connection.idle_since = loop.time()
                chunk = await transport.recv(READ_CHUNK)
                received = time.perf_counter() if metrics is not None else 0.0
                connection.idle_since = None
                # A request that reached the socket just as the connection was closed for idleness can still be
                # read, but its answer cannot be written: handling it would apply it unacknowledged (a retried
                # produce would be written twice).
                if not chunk or connection.closed_for_idleness:
                    return
                if start:
                    del buffer[:start]
                    start = 0
                buffer += chunk
                while len(buffer) - start >= 4:
                    (size,) = _SIZE.unpack_from(buffer, start)
                    if size < 8 or size > self.max_request_size:
                        log.warning("closing connection from %s: request size %d is outside 8..%d (socket.request.max.bytes)",
                                    connection.peer, size, self.max_request_size)
                        return
                    end = start + 4 + size
                    if len(buffer) < end:
                        if size <= READ_CHUNK:
                            break
                        buffer += await _recv_exactly(transport, end - len(buffer))
                        received = time.perf_counter() if metrics is not None else 0.0
                    frame = buffer[start + 4:end]
                    start = end
                    if writer.deferred and (_API_KEY.unpack_from(frame)[0] != PRODUCE_API_KEY
                                            or writer.deferred >= MAX_DEFERRED):
                        await writer.drain()
                    if connection.muted_until:
                        await _sit_out_throttle(connection, writer)
                    if metrics is not None:
                        timing = metrics.begin(frame, received)
                    result = self.dispatch(connection, frame)
                    if timing is not None:
                        metrics.local_done(timing)
                    if isinstance(result, Deferred):
                        awaitable = result.awaitable if timing is None else _timed(result.awaitable, metrics, timing)
                        writer.add_deferred(loop.create_task(awaitable), timing)
                        timing = None
                        continue
                    if inspect.isawaitable(result):
                        await writer.flush()
                        result = await result
                        if timing is not None:
                            metrics.ready(timing)
                    if result is not None:
                        writer.add(result, timing)
                        if writer.pending_size >= FLUSH_THRESHOLD or writer.has_region:
                            await writer.flush()
                    elif timing is not None:  # no response (acks=0): done when handled
                        metrics.finish_without_response(timing)
                    timing = None
                    if connection.close_after_response:
                        await writer.flush()
                        await asyncio.sleep(connection.close_delay_s)
                        return
                await writer.flush()
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", connection.peer, exc)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an unexpected error", connection.peer)
        finally:
            if writer is not None:
                writer.abandon()
            del self._sockets[connection.id]
            sock.close()


async def _sit_out_throttle(connection: Connection, writer: _ResponseWriter) -> None:
    """A client over a quota was answered at once, with the throttle time; its next request waits out the rest."""
    delay = connection.muted_until - time.monotonic()
    connection.muted_until = 0.0
    if delay > 0:
        await writer.flush()
        await asyncio.sleep(delay)


async def _timed(awaitable, metrics, timing: list):
    """A deferred answer that notes when it is ready."""
    try:
        return await awaitable
    finally:
        metrics.ready(timing)


async def _recv_exactly(transport, count: int) -> bytearray:
    data = bytearray()
    while len(data) < count:
        chunk = await transport.recv(count - len(data))
        if not chunk:
            raise ConnectionError("connection closed mid-request")
        data += chunk
    return data


class _ResponseWriter:
    """Writes responses in request order, coalescing those that are ready into one write; a deferred
    response holds back those after it until it is ready. FileRegions go out with os.sendfile."""

    def __init__(self, loop: asyncio.AbstractEventLoop, transport, sock: socket.socket, connection: Connection,
                 metrics=None):
        self.loop = loop
        self.transport = transport
        self.sock = sock
        self.connection = connection
        self.entries: collections.deque = collections.deque()  # response parts, or a Task of them (deferred)
        self.metrics = metrics  # RequestMetrics: `timings` holds each entry's timing record (or None)
        self.timings: collections.deque = collections.deque()
        self.deferred = 0  # tasks among the entries
        self.pending_size = 0
        self.has_region = False
        self._lock = asyncio.Lock()  # the serving task and a finished deferred response both flush

    def add(self, parts: list, timing: list | None = None) -> None:
        self.entries.append(parts)
        if self.metrics is not None:
            self.timings.append(timing)
        for part in parts:
            if isinstance(part, FileRegion):
                self.has_region = True
            else:
                self.pending_size += len(part)

    def add_deferred(self, task: asyncio.Task, timing: list | None = None) -> None:
        self.entries.append(task)
        self.deferred += 1
        if self.metrics is not None:
            self.timings.append(timing)
        task.add_done_callback(self._deferred_done)

    def _deferred_done(self, task: asyncio.Task) -> None:
        if self.entries and self.entries[0] is task:
            self.loop.create_task(self._flush_from_callback())

    async def _flush_from_callback(self) -> None:
        try:
            await self.flush()
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", self.connection.peer, exc)
            self._shut_down()
        except (ConnectionError, OSError):
            self._shut_down()
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.connection.peer)
            self._shut_down()

    def _shut_down(self) -> None:
        """Ends the serving task, which is waiting for the next request, as a client's close would."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    async def drain(self) -> None:
        """Wait until every deferred response has been written."""
        while self.deferred:
            oldest = next(entry for entry in self.entries if isinstance(entry, asyncio.Task))
            await asyncio.wait([oldest])
            await self.flush()

    async def flush(self) -> None:
        """Write the responses that are ready, from the oldest up to the first deferred one still waiting."""
        async with self._lock:
            out: list = []
            written: list = []  # timing records of the responses this flush writes
            while self.entries:
                head = self.entries[0]
                if isinstance(head, asyncio.Task):
                    if not head.done():
                        break
                    self.entries.popleft()
                    self.deferred -= 1
                    timing = self.timings.popleft() if self.metrics is not None else None
                    parts = head.result()  # CloseConnection from the handler ends the connection
                    if parts is None:
                        continue
                else:
                    parts = self.entries.popleft()
                    timing = self.timings.popleft() if self.metrics is not None else None
                if timing is not None:
                    written.append(timing)
                size = 0
                for part in parts:
                    size += part.size if isinstance(part, FileRegion) else len(part)
                out.append(_SIZE.pack(size))
                for part in parts:
                    if isinstance(part, FileRegion):
                        await self._send(out)
                        await self.transport.sendfile(part)
                    else:
                        out.append(part)
            self.pending_size = 0
            self.has_region = False
            await self._send(out)
            if written:
                self.metrics.sent(written)

    async def _send(self, out: list) -> None:
        if out:
            data = b"".join(out)
            out.clear()
            await self.transport.sendall(data)
            if self.connection.idle_since is not None:  # a deferred answer written: activity, as Kafka counts it
                self.connection.idle_since = self.loop.time()

    def abandon(self) -> None:
        """The connection is closing: deferred responses still waiting will not be written."""
        for entry in self.entries:
            if isinstance(entry, asyncio.Task):
                entry.cancel()
        self.entries.clear()
        self.timings.clear()
        self.deferred = 0
