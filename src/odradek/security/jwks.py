"""A listener's OAUTHBEARER token validator built from its settings, and the I/O around it: the JWKS that signed
tokens are checked against, read from a file: or http(s): URL by a worker thread and read again every
`sasl.oauthbearer.jwks.endpoint.refresh.ms`, or sooner when a token names a key id the keys lack (as Kafka's
RefreshingHttpsJwks does). The validators themselves are sans-I/O, in security/oauthbearer.py.
"""

from __future__ import annotations

import collections
import logging
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable

from odradek.config import BROKER_CONFIG_BY_NAME, BrokerConfig, ConfigError
from odradek.security.jaas import parse_jaas_config
from odradek.security.oauthbearer import (
    LOGIN_MODULE,
    UNSECURED_VALIDATOR_CLASS,
    VALIDATOR_CLASSES,
    Jwk,
    JwtValidator,
    Token,
    TokenRejected,
    UnsecuredJwtValidator,
    Validate,
    parse_jwks,
)
from odradek.security.tls import client_context

log = logging.getLogger(__name__)

JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
_MISSING_KEY_IDS = 16  # key ids remembered as missing, each for a minute (Kafka's numbers)
_MISSING_KEY_ID_WAIT_S = 60.0
_MISSING_KEY_ID_MAX_LENGTH = 1000
_FETCH_TIMEOUT_S = 10.0
_MAX_JWKS_BYTES = 4 * 1024 * 1024


def oauthbearer_validator(config: BrokerConfig, listener: str) -> Validate:
    """The token validator of a listener's OAUTHBEARER: Kafka's unsecured one unless
    listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class names OAuthBearerValidatorCallbackHandler.
    ConfigError for settings Kafka would refuse at startup."""
    def setting(name: str):
        return config.listener_setting(listener, name, mechanism="oauthbearer")

    key = f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
    text = setting("sasl.jaas.config")
    if not text:
        raise ConfigError(f"OAUTHBEARER on listener {listener} needs its login module: set {key}={LOGIN_MODULE} "
                          "required;")
    entry = parse_jaas_config(text, key=key)
    if entry.login_module != LOGIN_MODULE:
        raise ConfigError(f"{key}: OAUTHBEARER needs {LOGIN_MODULE}, not {entry.login_module}")
    handler = (setting("sasl.server.callback.handler.class") or "").strip()
    if not handler or handler == UNSECURED_VALIDATOR_CLASS:
        validator = UnsecuredJwtValidator(entry.options, key)
    elif handler in VALIDATOR_CLASSES:
        validator = _jwt_validator(setting, entry.options, listener)
    else:
        raise ConfigError(f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class: "
                          f"{handler} is not supported; Odradek offers {VALIDATOR_CLASSES[0]} (signed JWTs) and "
                          "the default, unsecured JWTs")

    def validate(token: str, now_ms: int) -> Token:
        try:
            return validator.validate(token, now_ms)
        except TokenRejected as rejected:
            log.info("OAUTHBEARER token refused on listener %s: %s", listener, rejected.reason)
            raise

    return validate


def _jwt_validator(setting, jaas_options: dict[str, str], listener: str) -> JwtValidator:
    url = str(setting(JWKS_URL) or "").strip()
    if not url:
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} value must be non-null")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if not scheme:
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} contains a URL ({url}) that is missing the "
                          "protocol")
    if scheme not in ("http", "https", "file"):
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} contains a URL ({url}) that contains an invalid "
                          f'protocol ({scheme}); only "http", "https", and "file" protocol are supported')
    refresh_ms = int(setting("sasl.oauthbearer.jwks.endpoint.refresh.ms"))
    if refresh_ms <= 0:
        raise ConfigError("The OAuth configuration option sasl.oauthbearer.jwks.endpoint.refresh.ms value must be "
                          "positive")
    audiences = [item.strip() for item in str(setting("sasl.oauthbearer.expected.audience") or "").split(",")
                 if item.strip()]
    issuer = str(setting("sasl.oauthbearer.expected.issuer") or "").strip() or None
    claims = {}
    for name in ("sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name"):
        claims[name] = str(setting(name) or "").strip()
        if not claims[name]:
            raise ConfigError(f"The OAuth configuration option {name} value must not contain only whitespace")
    validator = JwtValidator(expected_issuer=issuer, expected_audiences=audiences,
                             sub_claim=claims["sasl.oauthbearer.sub.claim.name"],
                             scope_claim=claims["sasl.oauthbearer.scope.claim.name"],
                             clock_skew_s=int(setting("sasl.oauthbearer.clock.skew.seconds")))
    if scheme == "file":
        path = _file_path(url)
        fetch = lambda: _read_file(path)  # noqa: E731
    else:
        context = _https_context(jaas_options) if scheme == "https" else None
        fetch = lambda: _http_get(url, context)  # noqa: E731
    source = JwksSource(url, fetch, validator, refresh_ms, int(setting("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")),
                        int(setting("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")), listener)
    if scheme == "file":  # read at startup, as Kafka does: a file that is no JWKS stops the node
        try:
            source.load(fetch())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"The OAuth validator configuration encountered an error when initializing the "
                              f"VerificationKeyResolver: {JWKS_URL} {url}: {exc}") from None
    validator.on_unknown_key = source.expedite
    source.start()
    return validator


def _file_path(url: str) -> str:
    path = os.path.abspath(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    if not os.path.exists(path):
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} contains a file ({path}) that doesn't exist")
    if os.path.isdir(path):
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} references a directory ({path}), not a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"The OAuth configuration option {JWKS_URL} contains a file ({path}) that doesn't have "
                          "read permission")
    return path


def _read_file(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read(_MAX_JWKS_BYTES)


def _https_context(jaas_options: dict[str, str]) -> ssl.SSLContext:
    """How the JWKS endpoint is trusted: the ssl.* options of the listener's OAuthBearerLoginModule (as Kafka
    reads them there), for instance ssl.truststore.location for a private authority; else the system's."""
    def setting(name: str):
        return jaas_options[name] if name in jaas_options else BROKER_CONFIG_BY_NAME[name].default
    return client_context(setting)


def _http_get(url: str, context: ssl.SSLContext | None) -> str:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=_FETCH_TIMEOUT_S, context=context) as response:
        return response.read(_MAX_JWKS_BYTES).decode("utf-8")


class JwksSource:
    """Keeps `validator.keys` current: a daemon thread reads the JWKS (`fetch`) at once unless it was loaded
    already, then every `refresh_ms`; a failed read is retried with exponential backoff from `backoff_ms` for up
    to `backoff_max_ms` (Kafka's Retry), and keeps the keys it had. `expedite(kid)`, for a token naming a key id
    the keys lack, reads it again at once, at most once a minute for each such id."""

    def __init__(self, url: str, fetch: Callable[[], str], validator: JwtValidator, refresh_ms: int,
                 backoff_ms: int, backoff_max_ms: int, listener: str = "", clock: Callable[[], float] = time.monotonic):
        self.url = url
        self.fetch = fetch
        self.validator = validator
        self.refresh_s = refresh_ms / 1000
        self.backoff_s = max(backoff_ms, 1) / 1000
        self.backoff_max_s = max(backoff_max_ms, 0) / 1000
        self.listener = listener
        self.clock = clock
        self.loaded = False
        self._missing: collections.OrderedDict[str, float] = collections.OrderedDict()  # kid -> next check
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def load(self, text: str) -> list[Jwk]:
        """Make the keys of this JWKS text the validator's; ValueError when it is not a JWKS."""
        keys, skipped = parse_jwks(text)
        for reason in skipped:
            log.warning("Ignoring a key of the JWKS from %s: %s", self.url, reason)
        with self._lock:
            for key in keys:
                if key.kid is not None:
                    self._missing.pop(key.kid, None)
        self.validator.keys = tuple(keys)
        if not self.loaded or log.isEnabledFor(logging.DEBUG):
            log.info("OAUTHBEARER on listener %s: %d key(s) from %s", self.listener, len(keys), self.url)
        self.loaded = True
        return keys

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"jwks-{self.listener or self.url}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=_FETCH_TIMEOUT_S + 1)

    def expedite(self, kid: str) -> bool:
        """Ask for a read now because a token named this key id; False when it was asked for within the last
        minute (or is absurdly long), so unknown key ids cannot make the node hammer the endpoint."""
        if len(kid) > _MISSING_KEY_ID_MAX_LENGTH:
            log.warning("Key ID %s (trimmed to first %d characters out of %d total) was too long to cache",
                        kid[:_MISSING_KEY_ID_MAX_LENGTH], _MISSING_KEY_ID_MAX_LENGTH, len(kid))
            return False
        now = self.clock()
        with self._lock:
            next_check = self._missing.get(kid)
            if next_check is not None and next_check > now:
                self._missing.move_to_end(kid)
                return False
            self._missing[kid] = now + _MISSING_KEY_ID_WAIT_S
            self._missing.move_to_end(kid)
            while len(self._missing) > _MISSING_KEY_IDS:
                self._missing.popitem(last=False)
        log.info("Reading the JWKS from %s again: a token names key id %s, which it lacked", self.url, kid[:100])
        self._wake.set()
        return True

    def _run(self) -> None:
        delay = self.refresh_s if self.loaded else 0.0
        while not self._stop.is_set():
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            refreshed = self._refresh()
            # until the first keys arrive, keep trying; tokens are refused meanwhile
            delay = self.refresh_s if refreshed or self.loaded else max(self.backoff_max_s, self.backoff_s)

    def _refresh(self) -> bool:
        deadline = self.clock() + self.backoff_max_s
        attempt = 0
        while True:
            attempt += 1
            try:
                self.load(self.fetch())
                return True
            except Exception as exc:  # any failure to read or parse: keep the keys we have
                wait = min(self.backoff_s * 2 ** (attempt - 1), deadline - self.clock())
                if wait <= 0 or self._stop.is_set():
                    log.warning("Reading the JWKS from %s failed (%s); keeping the %d key(s) already read",
                                self.url, exc, len(self.validator.keys))
                    return False
                log.info("Reading the JWKS from %s failed (attempt %d: %s); retrying in %.0f ms", self.url,
                         attempt, exc, wait * 1000)
                if self._stop.wait(wait):
                    return False
