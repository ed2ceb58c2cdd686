"""SCRAM-SHA-256/512 (RFC 5802/7677) as Kafka speaks it: credentials, both ends of a login, --add-scram."""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from odradek.config import ConfigError
from odradek.security.sasl_errors import SaslAuthenticationError


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM variant: its hash, and the type code Kafka gives it on the wire and in the metadata log."""

    name: str
    hash_name: str
    code: int  # UserScramCredentialRecord.Mechanism, AlterUserScramCredentials' mechanism; never changes
    min_iterations: int = 4096
    max_iterations: int = 16384

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    @staticmethod
    def by_name(name: str) -> ScramMechanism | None:
        return next((m for m in KAFKA_MECHANISMS if m.name == name), None)

    @staticmethod
    def by_code(code: int) -> ScramMechanism | None:
        return next((m for m in KAFKA_MECHANISMS if m.code == code), None)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", code=1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", code=2)
KAFKA_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and mechanism; the password itself is not recoverable from it."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(
        cls, mechanism: ScramMechanism, password: str, iterations: int = 4096, salt: bytes | None = None
    ) -> ScramCredential:
        salt = _random_salt() if salt is None else salt
        salted_password = _salted_password(mechanism, password, salt, iterations)
        return cls.from_salted_password(mechanism, salted_password, salt, iterations)

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salted_password: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        return cls(
            salt=salt,
            stored_key=mechanism.hash(mechanism.hmac(salted_password, b"Client Key")),
            server_key=mechanism.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )


def random_nonce() -> str:
    """A nonce as Kafka makes them (130 random bits in base 36); the usual nonce_source outside tests."""
    return _base36(secrets.randbits(130))


def _random_salt() -> bytes:
    # Kafka's default salt is a nonce's text.
    return random_nonce().encode()


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if number == 0:
            return digits


def _salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    # RFC 5802's Hi() is PBKDF2 with one block. Kafka does no SASLprep: the password is just UTF-8.
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# RFC 5802's grammar narrowed as Kafka's ScramMessages narrows it: ASCII only, so no non-ASCII user names.
_SAFE_CHAR = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"  # ASCII but NUL, ',' and '='
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = rf"(?:{_SAFE_CHAR}|=2C|=3D)+"
_BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

# No reserved "m=" anywhere: RFC 5802 says a peer that does not understand it must fail.
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2_header>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_SERVER_FIRST = re.compile(
    rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,9}}){_EXTENSIONS}"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel_binding>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS})"
    rf",p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(rf"e=(?P<error>{_SAFE_CHAR}+)|v=(?P<signature>{_BASE64}){_EXTENSIONS}")


def _sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _username(sasl_name: str) -> str:
    return re.sub("=2C|=3D", lambda escape: "," if escape[0] == "=2C" else "=", sasl_name)


def _ascii(message: bytes, what: str) -> str:
    try:
        return message.decode("ascii")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"Authentication failed: invalid SCRAM {what} message") from None


def _match(pattern: re.Pattern[str], message: bytes, what: str) -> re.Match[str]:
    matched = pattern.fullmatch(_ascii(message, what))
    if matched is None:
        raise SaslAuthenticationError(f"Authentication failed: invalid SCRAM {what} message")
    return matched


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


class _Stage(enum.Enum):
    CLIENT_FIRST = enum.auto()
    CLIENT_FINAL = enum.auto()
    DONE = enum.auto()


class ScramServer:
    """The broker's side of one SCRAM exchange: evaluate() the client-first, then the client-final message.

    An unknown user is not refused at client-first, which would tell an attacker the user does not exist:
    the server answers with a salt derived from fake_salt_key and fails at the proof, exactly as a wrong
    password fails. fake_salt_key must be one secret for the broker's lifetime (better: persisted), or
    asking twice tells a fake salt from a real one.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        nonce_source: Callable[[], str],
        fake_salt_key: bytes,
    ) -> None:
        self.mechanism = mechanism
        self.complete = False
        self.username: str | None = None
        self._lookup = lookup
        self._nonce_source = nonce_source
        self._fake_salt_key = fake_salt_key
        self._stage = _Stage.CLIENT_FIRST
        self._claimed_username = ""
        self._credential = ScramCredential(b"", b"", b"", 0)
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, client_message: bytes) -> bytes:
        stage, self._stage = self._stage, _Stage.DONE  # any failure ends the exchange
        if stage is _Stage.CLIENT_FIRST:
            server_first = self._on_client_first(client_message)
            self._stage = _Stage.CLIENT_FINAL
            return server_first
        if stage is _Stage.CLIENT_FINAL:
            return self._on_client_final(client_message)
        raise SaslAuthenticationError("Authentication failed: the SCRAM exchange is already over")

    @property
    def invalid_credentials_message(self) -> str:
        """Kafka's one message for an unknown user, a wrong password and any unusable credential."""
        return (
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {self.mechanism.name}"
        )

    def _on_client_first(self, message: bytes) -> bytes:
        if message[:2] in (b"y,", b"p="):
            raise SaslAuthenticationError("Authentication failed: SCRAM channel binding is not supported")
        first = _match(_CLIENT_FIRST, message, "client-first")
        username = _username(first["saslname"])
        # Checked before the lookup so that the answer is the same whether or not the user exists.
        if first["authzid"] is not None and _username(first["authzid"]) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        extensions = dict(item.split("=", 1) for item in first["extensions"].split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise SaslAuthenticationError("Authentication failed: delegation tokens are not supported")

        credential = self._lookup(username)
        if credential is None or credential.iterations < self.mechanism.min_iterations:
            # Empty keys: no proof can match them.
            credential = ScramCredential(self._fake_salt(username), b"", b"", self.mechanism.min_iterations)
        self._claimed_username = username
        self._credential = credential
        self._gs2_header = first["gs2_header"]
        self._client_first_bare = first["bare"]
        self._nonce = first["nonce"] + self._nonce_source()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def _on_client_final(self, message: bytes) -> bytes:
        final = _match(_CLIENT_FINAL, message, "client-final")
        if final["channel_binding"] != _b64(self._gs2_header.encode()):
            raise SaslAuthenticationError("Authentication failed: wrong SCRAM channel binding")
        # Kafka checks only that the nonce ends with the server-first one, and librdkafka before 2.1 sends the
        # client nonce twice (client nonce + server-first nonce): those clients work with Kafka, so here too
        if not final["nonce"].endswith(self._nonce):
            raise SaslAuthenticationError("Authentication failed: wrong nonce in SCRAM client-final message")
        auth_message = f"{self._client_first_bare},{self._server_first},{final['without_proof']}".encode()
        stored_key = self._credential.stored_key
        client_signature = self.mechanism.hmac(stored_key, auth_message)
        proof = base64.b64decode(final["proof"])
        if len(proof) != len(client_signature) or not hmac.compare_digest(
            self.mechanism.hash(_xor(client_signature, proof)), stored_key
        ):
            raise SaslAuthenticationError(self.invalid_credentials_message)
        self.complete = True
        self.username = self._claimed_username
        return f"v={_b64(self.mechanism.hmac(self._credential.server_key, auth_message))}".encode()

    def _fake_salt(self, username: str) -> bytes:
        # Shaped like Kafka's random salts, and per mechanism as real salts are.
        message = f"{self.mechanism.name}\0{username}".encode()
        digest = hmac.new(self._fake_salt_key, message, "sha256").digest()
        return _base36(int.from_bytes(digest[:17]) >> 6).encode()  # 130 bits


class ScramClient:
    """The client's side of one SCRAM exchange, for tests and for a broker that logs in to another."""

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, nonce_source: Callable[[], str]
    ) -> None:
        self.mechanism = mechanism
        self.complete = False
        self._password = password
        self._client_nonce = nonce_source()
        self._client_first_bare = f"n={_sasl_name(username)},r={self._client_nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        first = _match(_SERVER_FIRST, server_first, "server-first")
        if not first["nonce"].startswith(self._client_nonce):
            raise SaslAuthenticationError("SCRAM server nonce does not start with the client nonce")
        iterations = int(first["iterations"])
        # The upper bound keeps a hostile server from making us spin; Kafka never stores more.
        if not self.mechanism.min_iterations <= iterations <= self.mechanism.max_iterations:
            raise SaslAuthenticationError(
                f"SCRAM server asked for {iterations} iterations, outside "
                f"{self.mechanism.min_iterations}..{self.mechanism.max_iterations}"
            )
        salted = _salted_password(self.mechanism, self._password, base64.b64decode(first["salt"]), iterations)
        without_proof = f"c=biws,r={first['nonce']}"
        auth_message = f"{self._client_first_bare},{first.string},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        client_signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        self._server_signature = self.mechanism.hmac(self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(_xor(client_key, client_signature))}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        final = _match(_SERVER_FINAL, server_final, "server-final")
        if final["error"] is not None:
            raise SaslAuthenticationError(f"SCRAM server refused the authentication: {final['error']}")
        if not self._server_signature or not hmac.compare_digest(
            base64.b64decode(final["signature"]), self._server_signature
        ):
            raise SaslAuthenticationError("SCRAM server signature is wrong: the server lacks the credential")
        self.complete = True


_ADD_SCRAM_KEYS = ("name", "password", "saltedpassword", "salt", "iterations")


def parse_add_scram(text: str) -> tuple[str, ScramMechanism, ScramCredential]:
    """One `kafka-storage format --add-scram` argument: MECHANISM=[name=..,password=..] -> user, credential.

    Also iterations=N, salt=BASE64 (random when absent), and saltedpassword=BASE64 with salt instead of
    password. A value may be in double quotes. Messages never repeat the argument: it holds a password.
    """
    mechanism_name, equals, settings_text = text.strip().partition("=")
    if not equals:
        raise ConfigError("--add-scram: expected MECHANISM=[name=...,password=...]")
    mechanism = ScramMechanism.by_name(mechanism_name)
    if mechanism is None:
        supported = " or ".join(m.name for m in KAFKA_MECHANISMS)
        raise ConfigError(f"--add-scram: mechanism {mechanism_name!r} is not supported; use {supported}")
    if not (settings_text.startswith("[") and settings_text.endswith("]")):
        raise ConfigError(f"--add-scram {mechanism.name}: the settings must be enclosed in [ ]")

    settings: dict[str, str] = {}
    # Kafka splits as Java's String.split does, which drops trailing empty items.
    for item in settings_text[1:-1].rstrip(",").split(","):
        key, equals, value = item.partition("=")
        if not equals:
            raise ConfigError(f"--add-scram {mechanism.name}: settings are key=value; values cannot hold ','")
        if key in settings:
            raise ConfigError(f"--add-scram {mechanism.name}: {key!r} is given twice")
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        settings[key] = value
    unknown = sorted(settings.keys() - set(_ADD_SCRAM_KEYS))
    if unknown:
        raise ConfigError(
            f"--add-scram {mechanism.name}: unknown settings {', '.join(unknown)}; "
            f"known are {', '.join(_ADD_SCRAM_KEYS)}"
        )

    name = settings.get("name", "")
    if not name:
        raise ConfigError(f"--add-scram {mechanism.name}: 'name' (the user name) is required")
    where = f"--add-scram {mechanism.name} for {name!r}"
    iterations = _add_scram_iterations(settings.get("iterations"), mechanism, where)
    salt = None if "salt" not in settings else _add_scram_base64(settings["salt"], "salt", where)
    if ("password" in settings) == ("saltedpassword" in settings):
        raise ConfigError(f"{where}: give exactly one of 'password' and 'saltedpassword'")
    if "password" in settings:
        credential = ScramCredential.from_password(mechanism, settings["password"], iterations, salt)
        return name, mechanism, credential
    if salt is None:
        raise ConfigError(f"{where}: 'saltedpassword' needs the 'salt' it was computed with")
    salted_password = _add_scram_base64(settings["saltedpassword"], "saltedpassword", where)
    return name, mechanism, ScramCredential.from_salted_password(mechanism, salted_password, salt, iterations)


def _add_scram_iterations(text: str | None, mechanism: ScramMechanism, where: str) -> int:
    if text is None:
        return mechanism.min_iterations
    if re.fullmatch(r"[+-]?[0-9]+", text) is None:
        raise ConfigError(f"{where}: 'iterations' must be a whole number, not {text!r}")
    iterations = int(text)
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        raise ConfigError(
            f"{where}: 'iterations' must be between {mechanism.min_iterations} "
            f"and {mechanism.max_iterations}, not {iterations}"
        )
    return iterations


def _add_scram_base64(text: str, key: str, where: str) -> bytes:
    # Java's decoder, as Kafka uses it, does not require the '=' padding.
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        raise ConfigError(f"{where}: {key!r} is not valid base64") from None
