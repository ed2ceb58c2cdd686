"""A minimal blocking Kafka protocol client built on Odradek's own codec, for tests that craft requests by hand."""

import socket
import ssl
import struct

from odradek.protocol.headers import encode_request_header
from odradek.protocol.messages import API_BY_KEY
from odradek.security.client_login import PlainLogin, ScramLogin
from odradek.security.scram import ScramClient, ScramMechanism, random_nonce


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, ssl_context: ssl.SSLContext | None = None):
        """Connects to host:port, over TLS when given an `ssl_context`."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def sasl_plain(self, username: str, password: str) -> None:
        self.sasl_login("PLAIN", username, password)

    def sasl_login(self, mechanism: str, username: str, password: str) -> None:
        """Log in with SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512: SaslHandshake v1, then SaslAuthenticate until
        the exchange is over."""
        handshake = self.request(17, 1, {"mechanism": mechanism})
        if handshake["error_code"]:
            raise ConnectionError(f"SaslHandshake refused {mechanism}: error {handshake['error_code']}")
        login = (PlainLogin(username, password) if mechanism == "PLAIN" else
                 ScramLogin(ScramClient(ScramMechanism.by_name(mechanism), username, password, random_nonce)))
        token = login.first()
        while token is not None:
            answer = self.request(36, 2, {"auth_bytes": token})
            if answer["error_code"]:
                raise ConnectionError(f"SASL {mechanism} login of {username} failed: {answer['error_message']}")
            token = login.next(answer["auth_bytes"])

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def _recv_exactly(self, count: int) -> bytes:
        chunks, received = [], 0
        while received < count:
            chunk = self.sock.recv(count - received)
            if not chunk:
                raise ConnectionError("connection closed by the node")
            chunks.append(chunk)
            received += len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, body: dict, client_id: str = "raw-test") -> dict:
        self.correlation_id += 1
        api = API_BY_KEY[api_key]
        header = encode_request_header(api_key, version, self.correlation_id, client_id)
        self.send_frame(header + api.encode_request(version, body))
        frame = self.recv_frame()
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        assert correlation_id == self.correlation_id
        # ApiVersions always answers with header v0; flexible versions of other APIs add a tagged-field section.
        position = 4
        if api_key != 18 and api.is_flexible(version):
            position += 1  # empty tagged fields
        return api.decode_response(version, memoryview(frame), position)
