"""SASL PLAIN (RFC 4616) as Kafka serves it: the client sends authzid NUL username NUL password, once.

The server's users are the user_<name>="<password>" options of PlainLoginModule in sasl.jaas.config.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from odradek.security.jaas import JaasEntry
from odradek.security.sasl_errors import SaslAuthenticationError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"


class PlainServer:
    """The server side of one PLAIN exchange; `authenticate(username, password)` says whether they match."""

    def __init__(self, authenticate: Callable[[str, str], bool]):
        self._authenticate = authenticate

    def evaluate(self, response: bytes) -> str:
        """The authenticated username; SaslAuthenticationError with the message Kafka gives the client."""
        tokens = response.decode("utf-8", errors="replace").split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        try:
            authenticated = self._authenticate(username, password)
        except Exception as exc:  # a failing credential store must not tell the client more than this
            raise SaslAuthenticationError(
                "Authentication failed: credentials for user could not be verified") from exc
        # one message for an unknown user and a wrong password, so clients cannot probe for user names
        if not authenticated:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        return username


def plain_users_from_jaas(entry: JaasEntry) -> dict[str, str]:
    """Username -> password from PlainLoginModule's user_<name> options; none for another login module."""
    if entry.login_module != PLAIN_LOGIN_MODULE:
        return {}
    return {key.removeprefix(_USER_PREFIX): value for key, value in entry.options.items()
            if key.startswith(_USER_PREFIX)}


def password_checker(users: Mapping[str, str]) -> Callable[[str, str], bool]:
    """An `authenticate` for PlainServer over fixed users, comparing passwords in constant time."""

    def authenticate(username: str, password: str) -> bool:
        expected = users.get(username)
        return expected is not None and hmac.compare_digest(password.encode(), expected.encode())

    return authenticate


def plain_client_response(username: str, password: str, authzid: str = "") -> bytes:
    """The client's one message: what a broker sends when it authenticates to another with PLAIN."""
    return f"{authzid}\0{username}\0{password}".encode()
