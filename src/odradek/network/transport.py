"""Byte transports of a client connection: the plain socket (records sent with os.sendfile) and TLS.

TLS runs in memory (ssl.SSLObject over two MemoryBIOs) on the same non-blocking socket the event loop
already serves, so one serving loop handles both; a TLS connection cannot use sendfile, so a FileRegion is
read from its segment with os.pread and encrypted like any other bytes.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl

from odradek.protocol.file_region import FileRegion

TLS_READ_CHUNK = 256 * 1024
TLS_FILE_CHUNK = 256 * 1024


class TruncatedRegion(ConnectionError):
    """The segment file ended before the promised fetch size: the frame can no longer be completed."""


class PlainTransport:
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket):
        self.loop = loop
        self.sock = sock

    async def recv(self, size: int) -> bytes:
        return await self.loop.sock_recv(self.sock, size)

    async def sendall(self, data: bytes) -> None:
        await self.loop.sock_sendall(self.sock, data)

    async def sendfile(self, region: FileRegion) -> None:
        position, remaining = region.position, region.size
        out = self.sock.fileno()
        while remaining:
            try:
                sent = os.sendfile(out, region.fd, position, remaining)
            except BlockingIOError:
                await _writable(self.loop, self.sock)
                continue
            if sent == 0:
                raise TruncatedRegion("segment file ended before the promised fetch size")
            position += sent
            remaining -= sent

    def peer_certificate(self) -> dict | None:
        return None


class TlsTransport:
    """A server-side TLS session over a non-blocking socket; `handshake` first."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, context: ssl.SSLContext):
        self.loop = loop
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._sending = asyncio.Lock()  # the reader (TLS 1.3 tickets) and the response writer both send

    async def handshake(self) -> None:
        """Raises ssl.SSLError for a peer that does not speak TLS or is not trusted, ConnectionError if it leaves."""
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._send_pending()
                if not await self._receive():
                    raise ConnectionError("closed during the TLS handshake") from None
            except ssl.SSLError:
                await self._send_pending()  # the alert that tells the client why
                raise
        await self._send_pending()

    def peer_certificate(self) -> dict | None:
        return self._tls.getpeercert() or None

    async def recv(self, size: int) -> bytes:
        """Up to `size` decrypted bytes; b"" when the peer closed."""
        while True:
            try:
                data = self._tls.read(size)
            except ssl.SSLWantReadError:
                await self._send_pending()  # TLS 1.3 session tickets, key updates
                if not await self._receive():
                    return b""
                continue
            except ssl.SSLZeroReturnError:
                return b""
            chunks = [data]
            received = len(data)
            while received < size and self._tls.pending():  # what is already decrypted, without waiting
                more = self._tls.read(size - received)
                chunks.append(more)
                received += len(more)
            return b"".join(chunks) if len(chunks) > 1 else data

    async def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._tls.write(view)
            view = view[written:]
        await self._send_pending()

    async def sendfile(self, region: FileRegion) -> None:
        position, remaining = region.position, region.size
        while remaining:
            chunk = os.pread(region.fd, min(remaining, TLS_FILE_CHUNK), position)
            if not chunk:
                raise TruncatedRegion("segment file ended before the promised fetch size")
            await self.sendall(chunk)
            position += len(chunk)
            remaining -= len(chunk)

    async def _receive(self) -> bool:
        data = await self.loop.sock_recv(self.sock, TLS_READ_CHUNK)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def _send_pending(self) -> None:
        async with self._sending:
            if self._outgoing.pending:
                await self.loop.sock_sendall(self.sock, self._outgoing.read())


async def _writable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    future = loop.create_future()
    fd = sock.fileno()
    loop.add_writer(fd, lambda: future.done() or future.set_result(None))
    try:
        await future
    finally:
        loop.remove_writer(fd)
