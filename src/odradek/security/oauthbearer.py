"""SASL OAUTHBEARER (RFC 7628) as Kafka's broker serves it: the client's one message carries a bearer token (a JWT),
which a validator accepts or refuses; the token's `exp` bounds the session (KIP-368) and its subject is the principal.

The exchange (Kafka's OAuthBearerSaslServer): the client sends `n,[a=<authzid>],^Aauth=Bearer <token>^A[k=v^A...]^A`.
A valid token completes the exchange with an empty answer. A refused token is answered with a JSON error
challenge (`{"status":"invalid_token"}`, or `insufficient_scope` with the scope required); the client then sends
a lone ^A and the exchange fails with that JSON as the message. A message that is not an OAUTHBEARER client
message fails with Kafka's generic message, which tells the client nothing more.

Two validators, as Kafka's two server callback handlers:
- UnsecuredJwtValidator (Kafka's default, OAuthBearerUnsecuredValidatorCallbackHandler): unsigned JWTs
  (`alg` "none"), for development only: anyone can write such a token for any principal.
- JwtValidator (OAuthBearerValidatorCallbackHandler): signed JWTs checked with the keys of a JWKS, their
  issuer, audience, expiry and issue time, as Kafka's jose4j-based validator checks them.

Sans-I/O: the time comes in as an argument and the JWKS keys are handed to JwtValidator; security/jwks.py
reads and refreshes them.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from odradek.config import ConfigError
from odradek.security.sasl_errors import SaslAuthenticationError

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# what Kafka answers when the client's message is not one (a SaslException's own text is never sent)
INVALID_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
                      "OAUTHBEARER"
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)

# ---------------------------------------------------------------------------------------------------------------
# The client's message


@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authorization_id: str = ""  # "" when the client names none
    extensions: dict[str, str] = field(default_factory=dict)  # SASL extensions (KIP-342): key=value pairs


_SEPARATOR = "\x01"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # RFC 7628's saslname: no "," or "=" but as =2C, =3D
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEPARATOR})*){_SEPARATOR}")
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


def parse_client_initial_response(response: bytes) -> ClientInitialResponse:
    """The client's message as Kafka's OAuthBearerClientInitialResponse reads it; SaslAuthenticationError with
    Kafka's generic message when it is not one."""
    match = _CLIENT_INITIAL_RESPONSE.fullmatch(response.decode("utf-8", errors="replace"))
    if not match:
        raise SaslAuthenticationError(INVALID_CREDENTIALS)  # "Invalid OAUTHBEARER client first message"
    properties: dict[str, str] = {}
    for pair in filter(None, match.group("kvpairs").split(_SEPARATOR)):
        key, _, value = pair.partition("=")
        properties[key] = value  # the last of a repeated key wins, as in Kafka
    auth = properties.pop("auth", None)
    if auth is None:
        raise SaslAuthenticationError(INVALID_CREDENTIALS)  # "'auth' not specified"
    auth_match = _AUTH.fullmatch(auth)
    if not auth_match or auth_match.group("scheme").lower() != "bearer":
        raise SaslAuthenticationError(INVALID_CREDENTIALS)  # "invalid 'auth' format", or not the Bearer scheme
    return ClientInitialResponse(auth_match.group("token"), match.group("authzid") or "", properties)


def client_initial_response(token: str, authorization_id: str = "",
                            extensions: Mapping[str, str] | None = None) -> bytes:
    """The message a client sends (what Kafka's OAuthBearerSaslClient writes)."""
    pairs = "".join(f"{_SEPARATOR}{key}={value}" for key, value in (extensions or {}).items())
    authzid = f"a={authorization_id}" if authorization_id else ""
    return f"n,{authzid},{_SEPARATOR}auth=Bearer {token}{pairs}{_SEPARATOR}{_SEPARATOR}".encode()


# ---------------------------------------------------------------------------------------------------------------
# Tokens and refusals


@dataclass(frozen=True)
class Token:
    """A validated token."""

    value: str
    principal: str
    scope: frozenset[str]
    expires_ms: int  # `exp`, as ms since the epoch
    issued_ms: int | None = None  # `iat`, when the token has one


class TokenRejected(Exception):
    """A token the validator refuses. The client is told only `challenge()`; `reason` is for the node's log."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope

    def challenge(self) -> str:
        """Kafka's JSON error challenge, written as Kafka writes it (by string formatting)."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


Validate = Callable[[str, int], Token]  # (token, now in ms since the epoch) -> the token, or TokenRejected


# ---------------------------------------------------------------------------------------------------------------
# The exchange


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange; `evaluate` raises SaslAuthenticationError when it fails."""

    def __init__(self, validate: Validate):
        self._validate = validate
        self._error: str | None = None  # the JSON challenge sent for a refused token
        self.complete = False
        self.token: Token | None = None
        self.extensions: dict[str, str] = {}

    @property
    def authorization_id(self) -> str:
        return self.token.principal if self.token else ""

    def evaluate(self, response: bytes, now_ms: int) -> bytes:
        if self.complete:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        if response == _SEPARATOR.encode() and self._error is not None:
            raise SaslAuthenticationError(self._error)  # the client's answer to our error challenge
        self._error = None
        message = parse_client_initial_response(response)
        try:
            token = self._validate(message.token, now_ms)
        except TokenRejected as rejected:
            self._error = rejected.challenge()
            return self._error.encode()
        if message.authorization_id and message.authorization_id != token.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({message.authorization_id}) that "
                f"is different from the token's principal name ({token.principal})")
        # both of Kafka's validators accept every extension; they are kept, not interpreted
        self.token, self.extensions, self.complete = token, message.extensions, True
        return b""


# ---------------------------------------------------------------------------------------------------------------
# JWT pieces


def _java_split_dots(text: str) -> list[str]:
    """text.split("\\.") in Java: trailing empty strings are dropped."""
    parts = text.split(".")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return [] if parts == [""] and text else parts


def _java_trim(text: str) -> str:
    """Java's String.trim: every character up to U+0020 goes, and nothing else."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _is_blank(text: str | None) -> bool:
    return text is None or not _java_trim(text)


_BASE64 = re.compile(r"[A-Za-z0-9_\-+/]*={0,2}")


def _base64url_decode(text: str) -> bytes:
    """Base64url as JWS writes it (no padding); the standard alphabet and padding are accepted too, as the
    decoders of Kafka's validators accept them."""
    if not _BASE64.fullmatch(text):
        raise ValueError("not Base64URL")
    text = text.rstrip("=").replace("+", "-").replace("/", "_")
    if len(text) % 4 == 1:
        raise ValueError("not Base64URL")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        raise ValueError("not Base64URL") from None


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def _json(data: bytes) -> object:
    """Strict JSON (no NaN or Infinity); ValueError for anything else."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, RecursionError):
        raise ValueError("malformed JSON") from None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds_to_ms(seconds: float) -> int:
    """Math.round(seconds * 1000) in Java, saturating at the ends of a long."""
    ms = seconds * 1000
    if isinstance(ms, float):
        if math.isnan(ms):
            return 0
        if math.isinf(ms):
            return LONG_MAX if ms > 0 else LONG_MIN
        ms = math.floor(ms + 0.5)
    return max(LONG_MIN, min(LONG_MAX, ms))


def _seconds_text(seconds: float) -> str:
    """A claim's seconds as Java's %f prints its double value."""
    try:
        return f"{float(seconds):f}"
    except OverflowError:
        return "Infinity" if seconds > 0 else "-Infinity"


def _java_type(value: object) -> str:
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, int):
        return "Integer" if -(2**31) <= value < 2**31 else "Long" if LONG_MIN <= value <= LONG_MAX else "BigInteger"
    return type(value).__name__


# ---------------------------------------------------------------------------------------------------------------
# Unsecured JWTs


UNSECURED_VALIDATOR_CLASS = \
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _as_text(value: object) -> str:
    """Jackson's JsonNode.asText of a value that is not a number or an array."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if _is_number(value):
        return str(value)
    return ""  # objects and arrays


def _jackson_claims(value: object) -> dict[str, object]:
    """A JSON header or claims object as Kafka's OAuthBearerUnsecuredJws reads it with Jackson: numbers stay
    numbers, arrays become lists of their elements' text, everything else its text (null is "null"); a JSON
    value that is not an object has no members."""
    if not isinstance(value, dict):
        return {}
    claims: dict[str, object] = {}
    for name, member in value.items():
        if isinstance(member, list):
            claims[name] = [_as_text(element) for element in member]
        elif _is_number(member):
            claims[name] = member
        else:
            claims[name] = _as_text(member)
    return claims


class UnsecuredJwtValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: an unsigned JWT with a principal claim (`sub`) and an
    expiry, issued no later than now, not expired, with the required scope. Its options are those of the
    listener's OAuthBearerLoginModule: unsecuredValidatorPrincipalClaimName, unsecuredValidatorScopeClaimName,
    unsecuredValidatorRequiredScope (space-separated), unsecuredValidatorAllowableClockSkewMs."""

    def __init__(self, options: Mapping[str, str], key: str = "sasl.jaas.config"):
        def option(name: str, default: str) -> str:
            value = options.get(name)
            return default if _is_blank(value) else _java_trim(value)

        self.principal_claim = option("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = option("unsecuredValidatorScopeClaimName", "scope")
        self.required_scope: list[str] = []
        for item in option("unsecuredValidatorRequiredScope", "").split(" "):
            if item and not _SCOPE_ITEM.fullmatch(item):
                raise ConfigError(f"{key}: unsecuredValidatorRequiredScope: Invalid scope value: {item}")
            if item:
                self.required_scope.append(item)
        skew = option("unsecuredValidatorAllowableClockSkewMs", "0")
        if not re.fullmatch(r"[+-]?[0-9]+", skew) or not -(2**31) <= int(skew) < 2**31:
            raise ConfigError(f'{key}: unsecuredValidatorAllowableClockSkewMs: For input string: "{skew}"')
        if int(skew) < 0:
            raise ConfigError(f"{key}: Allowable clock skew millis must not be negative: {skew}")
        self.clock_skew_ms = int(skew)

    def validate(self, token: str, now_ms: int) -> Token:
        if ".." in token:
            raise TokenRejected("Malformed compact serialization contains '..'")
        splits = _java_split_dots(token)
        if token.endswith("."):
            splits.append("")
        if len(splits) != 3:
            raise TokenRejected("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
                                "values")
        header, claims = self._decode(splits[0]), self._decode(splits[1])
        if "alg" not in header:
            raise TokenRejected("JWS header must have an Algorithm value")
        if header["alg"] != "none":
            raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenRejected("Unsecured JWS must not contain a digital signature")
        scope = self._scope(claims)
        expires = self._claim(claims, "exp", "Number")
        if expires is None:
            raise TokenRejected("No expiration time in JWT")
        principal = self._claim(claims, self.principal_claim, "String")
        if _is_blank(principal):
            raise TokenRejected(f"No principal name in JWT claim: {self.principal_claim}")
        issued = self._claim(claims, "iat", "Number")
        skew = self.clock_skew_ms
        if issued is not None and 1000 * issued > now_ms + skew:
            raise TokenRejected(f"The Issued At value ({_seconds_text(issued)} seconds) was after the indicated time "
                                f"({now_ms} ms) plus allowable clock skew ({skew} ms)")
        if now_ms - skew >= 1000 * expires:
            raise TokenRejected(f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or "
                                f"after the Expiration Time value ({_seconds_text(expires)} seconds)")
        if issued is not None and expires <= issued:
            raise TokenRejected(f"The Expiration Time time ({_seconds_text(expires)} seconds) was not after the Issued "
                                f"At time ({_seconds_text(issued)} seconds)")
        for required in self.required_scope:
            if required not in scope:
                wanted = f"[{', '.join(self.required_scope)}]"
                raise TokenRejected(f"The provided scope ([{', '.join(sorted(scope))}]) was missing a required scope "
                                    f"({required}).  All required scope elements: {wanted}",
                                    status="insufficient_scope", scope=wanted)
        return Token(token, principal, scope, _seconds_to_ms(expires),
                     None if issued is None else _seconds_to_ms(issued))

    @staticmethod
    def _decode(split: str) -> dict[str, object]:
        try:
            data = _base64url_decode(split)
        except ValueError:
            raise TokenRejected("malformed Base64 URL encoded value") from None
        try:
            return _jackson_claims(_json(data))
        except ValueError:
            raise TokenRejected("malformed JSON") from None

    @staticmethod
    def _claim(claims: dict[str, object], name: str, kind: str):
        value = claims.get(name)
        if value is not None and (kind == "String" and not isinstance(value, str)
                                  or kind == "Number" and not _is_number(value)
                                  or kind == "List" and not isinstance(value, list)):
            raise TokenRejected(f"The '{name}' claim was not of type {kind}: {_java_type(value)}")
        return value

    def _scope(self, claims: dict[str, object]) -> frozenset[str]:
        value = claims.get(self.scope_claim)
        if isinstance(value, str):  # one scope item, even with spaces in it, as Kafka reads it
            return frozenset() if _is_blank(value) else frozenset([_java_trim(value)])
        items = self._claim(claims, self.scope_claim, "List") or []
        return frozenset(_java_trim(item) for item in items if not _is_blank(item))


def unsecured_jwt(claims: Mapping[str, object]) -> str:
    """An unsigned JWT with these claims, as Kafka's unsecured login and librdkafka write one."""
    def encode(value: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{encode({'alg': 'none'})}.{encode(claims)}."


# ---------------------------------------------------------------------------------------------------------------
# Signed JWTs and their keys


VALIDATOR_CLASSES = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                     "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")

_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_EC_CURVES = {"P-256": (ec.SECP256R1, 32), "P-384": (ec.SECP384R1, 48), "P-521": (ec.SECP521R1, 66)}
_EC_ALGORITHM_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
SIGNATURE_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


def _key_type(algorithm: str) -> str:
    return "EC" if algorithm.startswith("ES") else "OKP" if algorithm == "EdDSA" else "RSA"


@dataclass(frozen=True)
class Jwk:
    """One public key of a JWKS (RFC 7517)."""

    kty: str  # RSA, EC or OKP
    key: object  # the cryptography public key
    kid: str | None = None
    use: str | None = None
    key_ops: tuple[str, ...] | None = None
    alg: str | None = None
    crv: str | None = None


def parse_jwks(text: str) -> tuple[list[Jwk], list[str]]:
    """The keys of a JWKS document, and why each key that cannot be used was skipped (a kind of key this does
    not know, a malformed one), as jose4j skips them; ValueError when the document is not a JWKS."""
    document = _json(text.encode())
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("The JSON JWKS content does not include the keys member")
    keys: list[Jwk] = []
    skipped: list[str] = []
    for number, entry in enumerate(document["keys"]):
        try:
            keys.append(_jwk(entry))
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            kid = entry.get("kid") if isinstance(entry, dict) else None
            skipped.append(f"key {number}{f' ({kid})' if kid else ''}: {exc}")
    return keys, skipped


def _jwk(entry: object) -> Jwk:
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")

    def text(name: str, required: bool = True) -> str | None:
        value = entry.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{name} is {'missing' if value is None else 'not a string'}")
        return value

    def number(name: str) -> int:
        return int.from_bytes(_base64url_decode(text(name)), "big")

    kty = text("kty")
    if kty == "RSA":
        key = rsa.RSAPublicNumbers(number("e"), number("n")).public_key()
    elif kty == "EC":
        crv = text("crv")
        if crv not in _EC_CURVES:
            raise ValueError(f"unsupported curve {crv}")
        key = ec.EllipticCurvePublicNumbers(number("x"), number("y"), _EC_CURVES[crv][0]()).public_key()
    elif kty == "OKP":
        crv = text("crv")
        if crv not in ("Ed25519", "Ed448"):
            raise ValueError(f"unsupported curve {crv}")
        kind = ed25519.Ed25519PublicKey if crv == "Ed25519" else ed448.Ed448PublicKey
        key = kind.from_public_bytes(_base64url_decode(text("x")))
    else:
        raise ValueError(f"unsupported key type {kty}")
    operations = entry.get("key_ops")
    return Jwk(kty, key, kid=text("kid", False), use=text("use", False), alg=text("alg", False),
               key_ops=tuple(operations) if isinstance(operations, list) else None, crv=entry.get("crv"))


def select_key(keys: Iterable[Jwk], algorithm: str, kid: str | None) -> Jwk | None:
    """The key a JWS is verified with, chosen as jose4j's VerificationJwkSelector does: the token's key id (when
    it names one), the key type of its algorithm, keys for signatures; among several, one for this algorithm,
    then (EC) one of its curve; the first that remains."""
    candidates = [key for key in keys
                  if (kid is None or key.kid == kid) and key.kty == _key_type(algorithm)
                  and key.use in (None, "sig") and (key.key_ops is None or "verify" in key.key_ops)]
    if len(candidates) > 1:
        candidates = [key for key in candidates if key.alg in (None, algorithm)]
    if len(candidates) > 1 and algorithm in _EC_ALGORITHM_CURVES:
        candidates = [key for key in candidates if key.crv in (None, _EC_ALGORITHM_CURVES[algorithm])]
    return candidates[0] if candidates else None


def verify_signature(key: Jwk, algorithm: str, signed: bytes, signature: bytes) -> None:
    """TokenRejected unless `signature` is `key`'s signature of `signed` with `algorithm`."""
    public = key.key
    try:
        if algorithm.startswith(("RS", "PS")):
            if not isinstance(public, rsa.RSAPublicKey):
                raise TokenRejected(f"the key for {algorithm} is not an RSA key")
            if public.key_size < 2048:  # jose4j refuses shorter RSA keys
                raise TokenRejected(f"RSA keys must be at least 2048 bits, this one has {public.key_size}")
            digest = _HASHES[algorithm[2:]]()
            scheme = (padding.PKCS1v15() if algorithm.startswith("RS")
                      else padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size))
            public.verify(signature, signed, scheme, digest)
        elif algorithm in _EC_ALGORITHM_CURVES:
            curve, size = _EC_CURVES[_EC_ALGORITHM_CURVES[algorithm]]
            if not isinstance(public, ec.EllipticCurvePublicKey) or not isinstance(public.curve, curve):
                raise TokenRejected(f"the key for {algorithm} is not a {_EC_ALGORITHM_CURVES[algorithm]} key")
            if len(signature) != 2 * size:
                raise TokenRejected(f"an {algorithm} signature has {2 * size} bytes, not {len(signature)}")
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            public.verify(encode_dss_signature(r, s), signed, ec.ECDSA(_HASHES[algorithm[2:]]()))
        elif algorithm == "EdDSA":
            if not isinstance(public, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
                raise TokenRejected("the key for EdDSA is not an Ed25519 or Ed448 key")
            public.verify(signature, signed)
        else:
            raise TokenRejected(f"the algorithm {algorithm} is not supported")
    except InvalidSignature:
        raise TokenRejected("JWT rejected due to invalid signature") from None
    except ValueError as exc:  # a signature that does not fit the key at all
        raise TokenRejected(f"JWT rejected due to invalid signature ({exc})") from None


class JwtValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (its ValidatorAccessTokenValidator over jose4j): a JWS signed
    with a key of the JWKS (`keys`, kept current by the caller), not "none"; with `exp` and `iat`; not expired
    and not before its `nbf`, allowing `clock_skew_s`; from `expected_issuer` and for one of
    `expected_audiences` when they are set (and, as jose4j has it, with no `aud` at all when no audience is
    expected); its subject (`sub_claim`) a non-blank string, and its scope (`scope_claim`) a string or a list of
    distinct non-blank strings. A token naming a key id no key has is refused and reported to
    `on_unknown_key`, so the keys can be fetched again."""

    def __init__(self, *, expected_issuer: str | None = None, expected_audiences: Iterable[str] = (),
                 sub_claim: str = "sub", scope_claim: str = "scope", clock_skew_s: int = 30,
                 keys: Iterable[Jwk] = (), on_unknown_key: Callable[[str], object] | None = None):
        self.expected_issuer = expected_issuer
        self.expected_audiences = frozenset(expected_audiences)
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.clock_skew_s = clock_skew_s
        self.keys: tuple[Jwk, ...] = tuple(keys)  # replaced whole when the JWKS is read again
        self.on_unknown_key = on_unknown_key

    def validate(self, token: str, now_ms: int) -> Token:
        token = _java_trim(token)
        if not token:
            raise TokenRejected("Empty JWT provided; expected three sections (header, payload, and signature)")
        splits = _java_split_dots(token)
        if len(splits) != 3:
            raise TokenRejected(f"Malformed JWT provided; expected three sections (header, payload, and signature), "
                                f"but {len(splits)} sections provided")
        for section, name in zip(splits, ("header", "payload", "signature"), strict=True):
            if not _java_trim(section):
                raise TokenRejected(f"Malformed JWT provided; expected at least three sections (header, payload, "
                                    f"and signature), but {name} section missing")
        header = self._object(splits[0], "header")
        algorithm = header.get("alg")
        if not isinstance(algorithm, str):
            raise TokenRejected("the JWS header has no algorithm (alg)")
        if algorithm == "none":
            raise TokenRejected("'none' is not a permitted algorithm")
        if algorithm not in SIGNATURE_ALGORITHMS:
            raise TokenRejected(f"the algorithm {algorithm} is not supported")
        if "crit" in header:
            raise TokenRejected(f"unrecognized critical header parameters {header['crit']}")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("the JWS header's key id (kid) is not a string")
        try:
            signature = _base64url_decode(splits[2])
        except ValueError:
            raise TokenRejected("the JWS signature is not Base64URL") from None
        key = select_key(self.keys, algorithm, kid)
        if key is None:
            if kid is not None and self.on_unknown_key is not None:
                self.on_unknown_key(kid)
            raise TokenRejected(f"Unable to find a suitable verification key for JWS w/ header "
                                f"{json.dumps(header)} among {len(self.keys)} key(s)")
        verify_signature(key, algorithm, f"{splits[0]}.{splits[1]}".encode("ascii"), signature)
        claims = self._object(splits[1], "payload")
        return self._token(token, claims, now_ms // 1000)

    @staticmethod
    def _object(section: str, name: str) -> dict:
        try:
            value = _json(_base64url_decode(section))
        except ValueError:
            raise TokenRejected(f"the JWT {name} is not Base64URL-encoded JSON") from None
        if not isinstance(value, dict):
            raise TokenRejected(f"the JWT {name} is not a JSON object")
        return value

    def _token(self, token: str, claims: dict, now_s: int) -> Token:
        audiences = self._audiences(claims)
        if audiences is not None and not self.expected_audiences & set(audiences):
            if self.expected_audiences:
                raise TokenRejected(f"Audience (aud) claim {audiences} doesn't contain an acceptable identifier. "
                                    f"Expected one of {sorted(self.expected_audiences)} as an aud value.")
            raise TokenRejected(f"Audience (aud) claim {audiences} present in the JWT but no expected audience "
                                "value(s) were provided to the JWT Consumer (set sasl.oauthbearer.expected.audience)")
        if audiences is None and self.expected_audiences:
            raise TokenRejected("No Audience (aud) claim present.")
        issuer = self._string(claims, "iss")
        if self.expected_issuer is not None and issuer != self.expected_issuer:
            raise TokenRejected(f"No Issuer (iss) claim present but was expecting {self.expected_issuer}"
                                if issuer is None else
                                f"Issuer (iss) claim value ({issuer}) doesn't match expected value of "
                                f"{self.expected_issuer}")
        expires, issued, not_before = (self._date(claims, name) for name in ("exp", "iat", "nbf"))
        if expires is None:
            raise TokenRejected("No Expiration Time (exp) claim present.")
        if issued is None:
            raise TokenRejected("No Issued At (iat) claim present.")
        skew = self.clock_skew_s
        if now_s - skew >= expires:
            raise TokenRejected(f"The JWT is no longer valid - the evaluation time {now_s} is on or after the "
                                f"Expiration Time (exp={expires}) claim value (allowing {skew} s of clock skew).")
        if expires < issued:
            raise TokenRejected(f"The Expiration Time (exp={expires}) claim value cannot be before the Issued At "
                                f"(iat={issued}) claim value.")
        if not_before is not None and expires < not_before:
            raise TokenRejected(f"The Expiration Time (exp={expires}) claim value cannot be before the Not Before "
                                f"(nbf={not_before}) claim value.")
        if not_before is not None and now_s + skew < not_before:
            raise TokenRejected(f"The JWT is not yet valid as the evaluation time {now_s} is before the Not Before "
                                f"(nbf={not_before}) claim time (allowing {skew} s of clock skew).")
        self._string(claims, "sub")
        self._string(claims, "jti")
        raw_scope = claims.get(self.scope_claim)
        items = [raw_scope] if isinstance(raw_scope, str) else raw_scope if isinstance(raw_scope, list) else []
        scope: set[str] = set()
        for item in items:
            item = self._non_blank(self.scope_claim, item)
            if item in scope:
                raise TokenRejected(f"{self.scope_claim} value must not contain duplicates - {item} already present")
            scope.add(item)
        principal = self._non_blank(self.sub_claim, self._string(claims, self.sub_claim))
        if expires < 0:
            raise TokenRejected(f'exp value must be non-negative; value given was "{expires * 1000}"')
        if issued < 0:
            raise TokenRejected(f'iat value must be null or non-negative; value given was "{issued * 1000}"')
        return Token(token, principal, frozenset(scope), min(expires * 1000, LONG_MAX), issued * 1000)

    @staticmethod
    def _string(claims: dict, name: str) -> str | None:
        value = claims.get(name)
        if value is not None and not isinstance(value, str):
            raise TokenRejected(f"The value of the '{name}' claim is not the expected type")
        return value

    @staticmethod
    def _date(claims: dict, name: str) -> int | None:
        """A NumericDate claim in whole seconds, as jose4j reads it (a fraction is dropped)."""
        value = claims.get(name)
        if value is None:
            return None
        if not _is_number(value) or isinstance(value, float) and not math.isfinite(value):
            raise TokenRejected(f"The value of the '{name}' claim is not the expected type")
        return max(LONG_MIN // 1000, min(LONG_MAX // 1000, int(value)))

    @staticmethod
    def _audiences(claims: dict) -> list[str] | None:
        value = claims.get("aud")
        if value is None:
            return None
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
        raise TokenRejected("The value of the 'aud' claim is not a string or an array of strings")

    @staticmethod
    def _non_blank(name: str, value: object) -> str:
        if value is None:
            raise TokenRejected(f"{name} value must be non-null")
        if not isinstance(value, str):
            raise TokenRejected(f"{name} value must be a string")
        if not value:
            raise TokenRejected(f"{name} value must be non-empty")
        if not _java_trim(value):
            raise TokenRejected(f"{name} value must not contain only whitespace")
        return _java_trim(value)
