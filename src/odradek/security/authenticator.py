"""One connection's SASL authentication on a SASL listener, as Kafka's SaslServerAuthenticator runs it.

The client may ask ApiVersions, then names a mechanism with SaslHandshake (v1) and exchanges tokens in
SaslAuthenticate requests until the mechanism is done; any other request before that closes the connection.
A failed exchange is answered with SASL_AUTHENTICATION_FAILED and the connection is closed after
`connection.failed.authentication.delay.ms`. With `connections.max.reauth.ms` set (KIP-368) the session
lifetime is told to the client, which re-authenticates on the same connection (the same principal, or
it fails) before the session expires; a request on an expired session closes the connection.

Sans-I/O: the time comes in as arguments; broker/handlers/sasl.py and the dispatcher's gate drive it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from odradek.protocol.errors import ErrorCode
from odradek.security.sasl_errors import SaslAuthenticationError

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


class MechanismServer(Protocol):
    """The server side of one SASL mechanism for one exchange."""

    def evaluate(self, token: bytes) -> bytes:
        """The next server token; raises SaslAuthenticationError when authentication fails."""

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def lifetime_ms(self) -> int | None:
        """When the credential itself expires (an OAUTHBEARER token), as ms from now; None: it does not."""


@dataclass
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None
    token: bytes
    session_lifetime_ms: int
    close: bool  # the connection closes once this answer is written


class SaslAuthenticator:
    HANDSHAKE, AUTHENTICATE, AUTHENTICATED, FAILED = "handshake", "authenticate", "authenticated", "failed"

    def __init__(self, mechanisms: dict[str, Callable[[], MechanismServer]], max_reauth_ms: int):
        self.mechanisms = mechanisms  # enabled mechanism name -> a new exchange's server
        self.max_reauth_ms = max_reauth_ms
        self.state = self.HANDSHAKE
        self.principal: str | None = None  # "User:<authorization id>" once authenticated
        self.mechanism: str | None = None
        self.session_expires_ms: int | None = None
        self._session_limit = ""  # what ends the session: connections.max.reauth.ms or the credential's expiry
        self._exchange: MechanismServer | None = None
        self._reauthenticating = False

    def refusal(self, api_key: int, now_ms: int) -> str | None:
        """Why a request with this api key cannot be handled now (the connection is then closed), or None."""
        if self.state == self.AUTHENTICATED:
            if self.session_expires_ms is not None and now_ms >= self.session_expires_ms \
                    and api_key != SASL_HANDSHAKE:
                return f"the SASL session expired ({self._session_limit}) and the client did not re-authenticate"
            return None
        if api_key not in BEFORE_AUTHENTICATION:
            return f"unexpected request with api key {api_key} before SASL authentication completed"
        return None

    def handshake(self, mechanism: str) -> tuple[ErrorCode, list[str], bool]:
        """(error code, enabled mechanisms, close the connection after answering)."""
        enabled = list(self.mechanisms)
        if self.state not in (self.HANDSHAKE, self.AUTHENTICATED):
            return ErrorCode.ILLEGAL_SASL_STATE, enabled, True
        if mechanism not in self.mechanisms:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled, True
        if self.state == self.AUTHENTICATED and mechanism != self.mechanism:
            return ErrorCode.ILLEGAL_SASL_STATE, enabled, True  # re-authentication keeps the mechanism (KIP-368)
        self.state = self.AUTHENTICATE
        self._exchange = self.mechanisms[mechanism]()
        self._reauthenticating = self.principal is not None
        self.mechanism = mechanism
        return ErrorCode.NONE, enabled, False

    def authenticate(self, token: bytes, now_ms: int, version: int) -> AuthenticateResult:
        if self.state != self.AUTHENTICATE or self._exchange is None:
            self.state = self.FAILED
            return AuthenticateResult(ErrorCode.ILLEGAL_SASL_STATE,
                                      "SaslAuthenticate request received while not in the SASL exchange", b"", 0, True)
        try:
            answer = self._exchange.evaluate(bytes(token))
        except SaslAuthenticationError as exc:
            return self._fail(str(exc))
        if not self._exchange.complete:
            return AuthenticateResult(ErrorCode.NONE, None, answer, 0, False)
        principal = f"User:{self._exchange.authorization_id}"
        if self._reauthenticating and principal != self.principal:
            return self._fail(f"Cannot change principals during re-authentication from {self.principal}: {principal}")
        self.principal = principal
        self.state = self.AUTHENTICATED
        credential_lifetime_ms = self._exchange.lifetime_ms
        lifetime = self._session_lifetime_ms(credential_lifetime_ms)
        self._session_limit = ("the token's expiry" if credential_lifetime_ms is not None
                               and lifetime == max(credential_lifetime_ms, 0) else "connections.max.reauth.ms")
        # a v0 client cannot be told the lifetime, and so never re-authenticates: its session does not expire
        self.session_expires_ms = now_ms + lifetime if lifetime and version >= 1 else None
        self._exchange = None
        return AuthenticateResult(ErrorCode.NONE, None, answer, lifetime if version >= 1 else 0, False)

    def _session_lifetime_ms(self, credential_lifetime_ms: int | None) -> int:
        limits = [limit for limit in (self.max_reauth_ms, credential_lifetime_ms) if limit]
        return max(min(limits), 0) if limits else 0

    def _fail(self, message: str) -> AuthenticateResult:
        self.state = self.FAILED
        self._exchange = None
        return AuthenticateResult(ErrorCode.SASL_AUTHENTICATION_FAILED, message, b"", 0, True)
