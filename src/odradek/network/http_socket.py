"""The listening socket of one of the node's HTTP ports, bound before anything else starts so that a port in
use stops the node at start with one clear line."""

from __future__ import annotations

import socket

from odradek.config import ConfigError


def bind(setting: str, url: str, host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on host:port ("" is every interface), or ConfigError naming `setting`."""
    host = host or "0.0.0.0"
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{setting} {url}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock
