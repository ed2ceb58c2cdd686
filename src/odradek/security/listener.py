"""A client listener's security, built from its settings: the TLS context, and what each new connection gets
(its principal from a client certificate; on a SASL listener, a SaslAuthenticator over the enabled mechanisms).
"""

from __future__ import annotations

import logging
import secrets
import ssl
import time
from collections.abc import Callable

from odradek.config import BrokerConfig, ConfigError
from odradek.network.server import Connection
from odradek.security.authenticator import MechanismServer, SaslAuthenticator
from odradek.security.jaas import parse_jaas_config
from odradek.security.jwks import oauthbearer_validator
from odradek.security.oauthbearer import LONG_MAX, OAuthBearerServer
from odradek.security.plain import PLAIN_LOGIN_MODULE, PlainServer, password_checker, plain_users_from_jaas
from odradek.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    principal_from_certificate,
)
from odradek.security.scram import ScramCredential, ScramMechanism, ScramServer, random_nonce
from odradek.security.tls import listener_settings, server_context

log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ScramLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]  # (user, mechanism) -> its credential


class ListenerSecurity:
    def __init__(self, config: BrokerConfig, listener: str, scram_lookup: ScramLookup):
        self.listener = listener
        self.protocol = config.security_protocols()[listener]
        setting = listener_settings(config, listener)
        self.uses_tls = self.protocol in ("SSL", "SASL_SSL")
        self.uses_sasl = self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        self.ssl_context: ssl.SSLContext | None = server_context(setting) if self.uses_tls else None
        self.mapper = SslPrincipalMapper(str(setting("ssl.principal.mapping.rules")))
        self.max_reauth_ms = int(setting("connections.max.reauth.ms"))
        self.mechanisms: dict[str, Callable[[], MechanismServer]] = {}
        if self.uses_sasl:
            self.mechanisms = self._mechanisms(config, setting, scram_lookup)

    def reload_tls(self, config: BrokerConfig) -> ssl.SSLContext:
        """A new context from the (changed) keystore settings: a renewed certificate, for new connections."""
        self.ssl_context = server_context(listener_settings(config, self.listener))
        return self.ssl_context

    def secure(self, connection: Connection, peer_certificate: dict | None) -> None:
        """Give a new connection its principal (SSL) or its authenticator (SASL)."""
        if self.uses_sasl:
            connection.authenticator = SaslAuthenticator(self.mechanisms, self.max_reauth_ms)
            return
        connection.principal = str(ANONYMOUS)
        if peer_certificate and peer_certificate.get("subject"):
            try:
                connection.principal = str(principal_from_certificate(peer_certificate["subject"], self.mapper))
            except NoMatchingRule as exc:
                # Kafka fails such a client's authentication; closing it at its first request does the same
                log.info("Failed authentication with %s: %s", connection.peer, exc)
                connection.authenticator = _Refused(str(exc))

    def _mechanisms(self, config: BrokerConfig, setting, scram_lookup: ScramLookup) -> dict:
        enabled = [name.strip().upper() for name in str(setting("sasl.enabled.mechanisms") or "").split(",")
                   if name.strip()]
        unsupported = [name for name in enabled if name not in SUPPORTED_MECHANISMS]
        if unsupported or not enabled:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {self.listener}: {', '.join(unsupported) or 'none'}"
                              f" {'is' if len(unsupported) == 1 else 'are'} not supported; Odradek offers "
                              f"{', '.join(SUPPORTED_MECHANISMS)}")
        mechanisms: dict[str, Callable[[], MechanismServer]] = {}
        for name in enabled:
            handler = config.listener_setting(self.listener, "sasl.server.callback.handler.class",
                                              mechanism=name.lower())
            if handler and name != "OAUTHBEARER":
                # A custom callback (LDAP for PLAIN, say) is a Java class: checking the JAAS users instead would
                # let in whom the operator meant to keep out.
                raise ConfigError(f"listener.name.{self.listener.lower()}.{name.lower()}.sasl.server.callback."
                                  f"handler.class={handler}: Java callback handlers are not supported; {name} "
                                  f"takes its users from {'the JAAS config' if name == 'PLAIN' else 'the metadata log'}")
            if name == "PLAIN":
                check = password_checker(self._plain_users(config))
                mechanisms[name] = lambda check=check: _PlainExchange(PlainServer(check))
            elif name == "OAUTHBEARER":
                validate = oauthbearer_validator(config, self.listener)
                mechanisms[name] = lambda validate=validate: _OAuthBearerExchange(OAuthBearerServer(validate))
            else:
                mechanism = ScramMechanism.by_name(name)
                secret = secrets.token_bytes(32)  # salts shown for unknown users; see ScramServer
                mechanisms[name] = (lambda mechanism=mechanism, secret=secret: _ScramExchange(ScramServer(
                    mechanism, lambda user: scram_lookup(user, mechanism), random_nonce, secret)))
        return mechanisms

    def _plain_users(self, config: BrokerConfig) -> dict[str, str]:
        key = f"listener.name.{self.listener.lower()}.plain.sasl.jaas.config"
        text = config.listener_setting(self.listener, "sasl.jaas.config", mechanism="plain")
        if not text:
            raise ConfigError(f"PLAIN on listener {self.listener} needs its users: set {key}={PLAIN_LOGIN_MODULE} "
                              'required user_alice="alice-secret";')
        entry = parse_jaas_config(text, key=key)
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(f"{key}: PLAIN needs {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
        return plain_users_from_jaas(entry)


class _PlainExchange:
    lifetime_ms = None

    def __init__(self, server: PlainServer):
        self.server = server
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        self.authorization_id = self.server.evaluate(token)
        self.complete = True
        return b""


class _ScramExchange:
    lifetime_ms = None

    def __init__(self, server: ScramServer):
        self.server = server

    def evaluate(self, token: bytes) -> bytes:
        return self.server.evaluate(token)

    @property
    def complete(self) -> bool:
        return self.server.complete

    @property
    def authorization_id(self) -> str:
        return self.server.username or ""


class _OAuthBearerExchange:
    """The token's `exp` bounds the session: lifetime_ms counts from the evaluation that accepted it."""

    def __init__(self, server: OAuthBearerServer):
        self.server = server
        self.lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        now_ms = int(time.time() * 1000)
        answer = self.server.evaluate(token, now_ms)
        if self.server.complete:
            # at least 1 ms: a token let in by clock skew ends its session at once, as in Kafka (0 is "no limit")
            self.lifetime_ms = max(min(self.server.token.expires_ms, LONG_MAX) - now_ms, 1)
        return answer

    @property
    def complete(self) -> bool:
        return self.server.complete

    @property
    def authorization_id(self) -> str:
        return self.server.authorization_id


class _Refused:
    """The authenticator of a TLS connection whose certificate gives no principal: every request closes it."""

    def __init__(self, reason: str):
        self.reason = reason

    def refusal(self, api_key: int, now_ms: int) -> str:
        return self.reason
