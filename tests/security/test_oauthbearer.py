"""SASL OAUTHBEARER as Kafka's broker serves it: the client's message (OAuthBearerClientInitialResponse), the exchange
and its JSON error challenge (OAuthBearerSaslServer), unsecured JWTs (OAuthBearerUnsecuredValidatorCallbackHandler),
signed JWTs checked against a JWKS (OAuthBearerValidatorCallbackHandler), the JWKS read from a file or an https
endpoint and read again, a listener's settings, and fuzzed client messages that can only fail to authenticate."""

from __future__ import annotations

import base64
import http.server
import json
import random
import ssl
import threading
import time
from pathlib import Path

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.protocol.errors import ErrorCode
from odradek.security.authenticator import SaslAuthenticator
from odradek.security.jwks import JwksSource
from odradek.security.listener import ListenerSecurity
from odradek.security.oauthbearer import (
    INVALID_CREDENTIALS,
    LOGIN_MODULE,
    JwtValidator,
    OAuthBearerServer,
    TokenRejected,
    UnsecuredJwtValidator,
    client_initial_response,
    parse_client_initial_response,
    parse_jwks,
    unsecured_jwt,
)
from odradek.security.sasl_errors import SaslAuthenticationError
from tests.security.certificates import CertificateAuthority
from tests.security.jwts import SigningKey, b64, b64_json, claims, jwks

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def unsecured(claim_set: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64_json(header or {'alg': 'none'})}.{b64_json(claim_set)}.{signature}"


def good_claims(**more) -> dict:
    return {"sub": "alice", "iat": NOW_S, "exp": NOW_S + 3600, **more}


# --- the client's message ------------------------------------------------------------------------------------


def test_the_client_message_carries_token_authorization_id_and_extensions():
    message = parse_client_initial_response(b"n,a=alice,\x01auth=Bearer abc.def.\x01traceId=42\x01logicalCluster=lc-1"
                                            b"\x01\x01")
    assert (message.token, message.authorization_id) == ("abc.def.", "alice")
    assert message.extensions == {"traceId": "42", "logicalCluster": "lc-1"}
    assert parse_client_initial_response(client_initial_response("t.o.k", "bob", {"a": "b c"})) == message.__class__(
        "t.o.k", "bob", {"a": "b c"})


def test_the_scheme_is_bearer_in_any_case_and_the_token_may_end_in_padding():
    assert parse_client_initial_response(b"n,,\x01auth=bEaReR  a/b+c~d_e-f.g==\x01\x01").token == "a/b+c~d_e-f.g=="


@pytest.mark.parametrize("message", [
    b"", b"\x01", b"n,,\x01\x01", b"n,,\x01auth=Bearer tok\x01",  # no auth; no closing ^A
    b"y,,\x01auth=Bearer tok\x01\x01", b"n,,auth=Bearer tok\x01\x01",  # channel binding; no ^A after the header
    b"n,,\x01auth=Basic dG9r\x01\x01", b"n,,\x01auth=Bearer\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01",
    b"n,,\x01auth=Bearer t=o\x01\x01", b"n,,\x01key1=v\x01auth=Bearer t\x01\x01", b"n,,\x01k=\x01auth=Bearer t\x01\x01",
    b"n,a=al,ice,\x01auth=Bearer t\x01\x01", b"n,,\x01auth=Bearer \xff\x01\x01", b"n,,\x01auth=Bearer t\x01\x01\x01",
])
def test_what_is_not_a_client_message_gets_kafkas_generic_answer(message):
    server = OAuthBearerServer(UnsecuredJwtValidator({}).validate)
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(message, NOW_MS)
    assert str(failure.value) == INVALID_CREDENTIALS
    assert str(failure.value) == ("Authentication failed during authentication due to invalid credentials with SASL "
                                  "mechanism OAUTHBEARER")


# --- the exchange -------------------------------------------------------------------------------------------


def test_a_valid_token_completes_the_exchange_with_an_empty_answer():
    server = OAuthBearerServer(UnsecuredJwtValidator({}).validate)
    assert server.evaluate(client_initial_response(unsecured(good_claims()), extensions={"x": "y"}), NOW_MS) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.token.expires_ms == (NOW_S + 3600) * 1000
    assert server.extensions == {"x": "y"}


def test_a_refused_token_gets_the_json_challenge_and_fails_with_it_on_the_clients_ctrl_a():
    server = OAuthBearerServer(UnsecuredJwtValidator({}).validate)
    expired = unsecured(good_claims(exp=NOW_S - 1))
    assert server.evaluate(client_initial_response(expired), NOW_MS) == b'{"status":"invalid_token"}'
    assert not server.complete
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(b"\x01", NOW_MS)
    assert str(failure.value) == '{"status":"invalid_token"}'


def test_a_lone_ctrl_a_without_a_challenge_is_not_a_client_message():
    with pytest.raises(SaslAuthenticationError, match="invalid credentials with SASL mechanism OAUTHBEARER"):
        OAuthBearerServer(UnsecuredJwtValidator({}).validate).evaluate(b"\x01", NOW_MS)


def test_after_a_challenge_the_client_may_send_another_token_as_kafka_allows():
    server = OAuthBearerServer(UnsecuredJwtValidator({}).validate)
    assert server.evaluate(client_initial_response("garbage"), NOW_MS).startswith(b'{"status"')
    assert server.evaluate(client_initial_response(unsecured(good_claims())), NOW_MS) == b""
    assert server.authorization_id == "alice"


def test_the_authorization_id_must_be_the_tokens_principal():
    token = unsecured(good_claims())
    assert OAuthBearerServer(UnsecuredJwtValidator({}).validate).evaluate(
        client_initial_response(token, "alice"), NOW_MS) == b""
    with pytest.raises(SaslAuthenticationError) as failure:
        OAuthBearerServer(UnsecuredJwtValidator({}).validate).evaluate(client_initial_response(token, "bob"), NOW_MS)
    assert str(failure.value) == ("Authentication failed: Client requested an authorization id (bob) that is different "
                                  "from the token's principal name (alice)")


def test_a_finished_exchange_takes_no_more_messages():
    server = OAuthBearerServer(UnsecuredJwtValidator({}).validate)
    server.evaluate(client_initial_response(unsecured(good_claims())), NOW_MS)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(client_initial_response(unsecured(good_claims())), NOW_MS)


# --- unsecured JWTs (Kafka's default validator) --------------------------------------------------------------


def refusal(validator, token: str) -> TokenRejected:
    with pytest.raises(TokenRejected) as failure:
        validator.validate(token, NOW_MS)
    return failure.value


@pytest.mark.parametrize("issued_at", [True, False])
def test_unsecured_token_with_a_principal_claim_of_another_name(issued_at):
    options = {"unsecuredValidatorPrincipalClaimName": "principal", "unsecuredValidatorAllowableClockSkewMs": "1"}
    claim_set = {"principal": "username", "exp": NOW_S + 3600, **({"iat": NOW_MS / 1000.0} if issued_at else {})}
    token = UnsecuredJwtValidator(options).validate(unsecured(claim_set), NOW_MS)
    assert token.principal == "username"
    assert token.issued_ms == (NOW_MS if issued_at else None)


@pytest.mark.parametrize("claim_set, reason", [
    ({"exp": NOW_S + 60}, "No principal name in JWT claim: sub"),
    ({"sub": " \t", "exp": NOW_S + 60}, "No principal name in JWT claim: sub"),
    ({"sub": 1, "exp": NOW_S + 60}, "The 'sub' claim was not of type String: Integer"),
    ({"sub": "alice"}, "No expiration time in JWT"),
    ({"sub": "alice", "exp": "soon"}, "The 'exp' claim was not of type Number: String"),
    ({"sub": "alice", "exp": True}, "The 'exp' claim was not of type Number: String"),  # Jackson's text of true
    ({"sub": "alice", "exp": NOW_S}, "minus allowable clock skew (0 ms) was on or after the Expiration Time"),
    ({"sub": "alice", "exp": 0, "iat": NOW_S}, "was on or after the Expiration Time"),
    ({"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S + 1}, "was after the indicated time"),
    ({"sub": "alice", "exp": NOW_S + 60, "iat": "now"}, "The 'iat' claim was not of type Number"),
    ({"sub": "alice", "exp": NOW_S + 60, "scope": 5}, "The 'scope' claim was not of type List: Integer"),
])
def test_unsecured_tokens_kafka_refuses(claim_set, reason):
    rejected = refusal(UnsecuredJwtValidator({}), unsecured(claim_set))
    assert reason in rejected.reason
    assert rejected.challenge() == '{"status":"invalid_token"}'


def test_clock_skew_lets_in_a_token_issued_a_little_later_and_one_just_expired():
    validator = UnsecuredJwtValidator({"unsecuredValidatorAllowableClockSkewMs": " 5000 "})
    assert validator.validate(unsecured(good_claims(iat=NOW_S + 5)), NOW_MS).principal == "alice"
    assert validator.validate(unsecured(good_claims(iat=NOW_S - 60, exp=NOW_S - 4)), NOW_MS).principal == "alice"
    refusal(validator, unsecured(good_claims(iat=NOW_S - 60, exp=NOW_S - 5)))
    refusal(validator, unsecured(good_claims(iat=NOW_S + 6)))


def test_expiry_must_come_after_issue():
    assert "was not after the Issued At time" in refusal(
        UnsecuredJwtValidator({"unsecuredValidatorAllowableClockSkewMs": "100000"}),
        unsecured(good_claims(iat=NOW_S + 10, exp=NOW_S + 10))).reason


def test_required_scope_present_as_a_string_or_a_list():
    validator = UnsecuredJwtValidator({"unsecuredValidatorRequiredScope": "scope1"})
    assert validator.validate(unsecured(good_claims(scope="scope1")), NOW_MS).scope == {"scope1"}
    assert validator.validate(unsecured(good_claims(scope=[" scope1 ", "x", ""])), NOW_MS).scope == {"scope1", "x"}


def test_missing_required_scope_is_insufficient_scope_with_the_scope_required():
    validator = UnsecuredJwtValidator({"unsecuredValidatorRequiredScope": "scope1 scope2"})
    rejected = refusal(validator, unsecured(good_claims(scope="scope1")))
    assert rejected.challenge() == '{"status":"insufficient_scope", "scope":"[scope1, scope2]"}'
    # a string scope is one item, spaces and all, as Kafka reads it
    refusal(validator, unsecured(good_claims(scope="scope1 scope2")))
    assert validator.validate(unsecured(good_claims(scope=["scope2", "scope1"])), NOW_MS)


def test_scope_claim_of_another_name():
    validator = UnsecuredJwtValidator({"unsecuredValidatorScopeClaimName": "scp",
                                       "unsecuredValidatorRequiredScope": "write"})
    assert validator.validate(unsecured(good_claims(scp=["write"])), NOW_MS).scope == {"write"}


@pytest.mark.parametrize("token, reason", [
    ("a..b", "contains '..'"),
    ("abc", "3 dot-separated"),
    ("a.b.c.d", "3 dot-separated"),
    (unsecured(good_claims()) + ".", "contains '..'"),
    ("!!!." + b64_json(good_claims()) + ".", "malformed Base64 URL encoded value"),
    (b64(b"{not json") + "." + b64_json(good_claims()) + ".", "malformed JSON"),
    (b64_json({"typ": "JWT"}) + "." + b64_json(good_claims()) + ".", "must have an Algorithm value"),
    (unsecured(good_claims(), {"alg": "RS256"}), "must have 'none' for an algorithm"),
    (unsecured(good_claims(), signature="c2ln"), "must not contain a digital signature"),
    (b64_json({"alg": "none"}) + "." + b64(b"[1, 2]") + ".", "No expiration time in JWT"),
    (b64_json({"alg": "none"}) + "." + b64(b'{"exp": NaN}') + ".", "malformed JSON"),
])
def test_garbage_unsecured_tokens_are_invalid(token, reason):
    assert reason in refusal(UnsecuredJwtValidator({}), token).reason


def test_a_signed_token_is_no_unsecured_token():
    key = SigningKey.generate("ES256")
    assert "must have 'none'" in refusal(UnsecuredJwtValidator({}), key.token(good_claims())).reason


@pytest.mark.parametrize("options, message", [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "must not be negative"),
    ({"unsecuredValidatorAllowableClockSkewMs": "soon"}, 'For input string: "soon"'),
    ({"unsecuredValidatorRequiredScope": "ok bad\\scope"}, "Invalid scope value: bad\\scope"),
])
def test_unsecured_validator_options_kafka_refuses_are_config_errors(options, message):
    with pytest.raises(ConfigError, match=message.replace("\\", "\\\\")):
        UnsecuredJwtValidator(options)


def test_unsecured_jwt_is_what_librdkafka_sends():
    token = unsecured_jwt({"sub": "alice", "exp": NOW_S + 10})
    assert token.endswith(".") and UnsecuredJwtValidator({}).validate(token, NOW_MS).principal == "alice"


# --- signed JWTs ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keys() -> dict[str, SigningKey]:
    algorithms = ("RS256", "RS384", "RS512", "PS256", "PS512", "ES256", "ES384", "ES512", "EdDSA")
    return {alg: SigningKey.generate(alg, kid=f"kid-{alg}") for alg in algorithms}


def jwt_validator(*signing_keys: SigningKey, **settings) -> JwtValidator:
    found, skipped = parse_jwks(jwks(*signing_keys))
    assert not skipped
    return JwtValidator(keys=found, **settings)


@pytest.mark.parametrize("alg", ["RS256", "RS384", "RS512", "PS256", "PS512", "ES256", "ES384", "ES512", "EdDSA"])
def test_a_token_signed_with_a_key_of_the_jwks_is_valid(keys, alg):
    validator = jwt_validator(*keys.values())
    token = validator.validate(keys[alg].token(good_claims(scope="read write")), NOW_MS)
    assert (token.principal, token.scope) == ("alice", {"read write"})
    assert (token.expires_ms, token.issued_ms) == ((NOW_S + 3600) * 1000, NOW_S * 1000)


def test_a_token_signed_by_another_key_with_the_same_key_id_is_refused(keys):
    impostor = SigningKey.generate("RS256", kid="kid-RS256")
    rejected = refusal(jwt_validator(keys["RS256"]), impostor.token(good_claims()))
    assert "invalid signature" in rejected.reason
    assert rejected.challenge() == '{"status":"invalid_token"}'


def test_a_changed_payload_breaks_the_signature(keys):
    header, _, signature = keys["ES256"].token(good_claims()).split(".")
    forged = f"{header}.{b64_json(good_claims(sub='admin'))}.{signature}"
    assert "invalid signature" in refusal(jwt_validator(keys["ES256"]), forged).reason


def test_an_unknown_key_id_is_refused_and_reported_so_the_keys_are_read_again(keys):
    reported = []
    validator = jwt_validator(keys["RS256"], on_unknown_key=reported.append)
    stranger = SigningKey.generate("RS256", kid="rotated-in")
    assert "Unable to find a suitable verification key" in refusal(validator, stranger.token(good_claims())).reason
    assert reported == ["rotated-in"]


def test_unsigned_and_hmac_tokens_are_refused_when_tokens_are_validated(keys):
    validator = jwt_validator(*keys.values())
    assert "'none' is not a permitted algorithm" in refusal(validator, unsecured(good_claims()) + "c2ln").reason
    assert "three sections" in refusal(validator, unsecured(good_claims())).reason  # "x.y." has two, as Kafka splits
    hmac_token = f"{b64_json({'alg': 'HS256'})}.{b64_json(good_claims())}.{b64(b'mac')}"
    assert "not supported" in refusal(validator, hmac_token).reason


@pytest.mark.parametrize("settings, claim_set, reason", [
    ({"expected_issuer": "https://idp"}, good_claims(iss="https://other"),
     "Issuer (iss) claim value (https://other) doesn't match expected value of https://idp"),
    ({"expected_issuer": "https://idp"}, good_claims(), "No Issuer (iss) claim present but was expecting https://idp"),
    ({"expected_audiences": ["kafka"]}, good_claims(aud="billing"), "doesn't contain an acceptable identifier"),
    ({"expected_audiences": ["kafka"]}, good_claims(), "No Audience (aud) claim present."),
    ({}, good_claims(aud="kafka"), "present in the JWT but no expected audience"),
    ({}, good_claims(exp=NOW_S - 30), "The JWT is no longer valid"),
    ({"clock_skew_s": 0}, good_claims(exp=NOW_S), "The JWT is no longer valid"),
    ({}, good_claims(nbf=NOW_S + 31), "The JWT is not yet valid"),
    ({}, {"sub": "alice", "iat": NOW_S}, "No Expiration Time (exp) claim present."),
    ({}, {"sub": "alice", "exp": NOW_S + 60}, "No Issued At (iat) claim present."),
    ({}, good_claims(exp="tomorrow"), "'exp' claim is not the expected type"),
    ({}, good_claims(sub=" "), "sub value must not contain only whitespace"),
    ({}, good_claims(sub=""), "sub value must be non-empty"),
    ({}, good_claims(sub=7), "'sub' claim is not the expected type"),
    ({"sub_claim": "client_id"}, good_claims(), "client_id value must be non-null"),
    ({}, good_claims(scope=["a", " a"]), "scope value must not contain duplicates - a already present"),
    ({}, good_claims(scope=["a", ""]), "scope value must be non-empty"),
])
def test_signed_tokens_kafka_refuses(keys, settings, claim_set, reason):
    assert reason in refusal(jwt_validator(keys["RS256"], **settings), keys["RS256"].token(claim_set)).reason


def test_clock_skew_issuer_audience_and_claim_names_that_match(keys):
    validator = jwt_validator(keys["ES256"], expected_issuer="https://idp", expected_audiences=["kafka", "other"],
                              sub_claim="client_id", scope_claim="scp", clock_skew_s=30)
    matching = {"iss": "https://idp", "aud": ["x", "kafka"], "client_id": " svc-1 ", "scp": ["produce"]}
    token = validator.validate(keys["ES256"].token(good_claims(**matching, iat=NOW_S - 60, exp=NOW_S - 29)), NOW_MS)
    assert (token.principal, token.scope) == ("svc-1", {"produce"})
    assert validator.validate(keys["ES256"].token(good_claims(**matching, nbf=NOW_S + 30)), NOW_MS)


def test_rsa_keys_shorter_than_2048_bits_are_refused():
    small = SigningKey.generate("RS256", rsa_bits=1024)
    assert "at least 2048 bits" in refusal(jwt_validator(small), small.token(good_claims())).reason


def test_a_token_without_a_key_id_uses_the_one_signing_key_and_keys_for_encryption_are_not_used(keys):
    anonymous = SigningKey("ES256", None, keys["ES256"].private)
    assert jwt_validator(anonymous).validate(anonymous.token(good_claims()), NOW_MS).principal == "alice"
    found, _ = parse_jwks(json.dumps({"keys": [anonymous.jwk(use="enc")]}))
    assert "Unable to find" in refusal(JwtValidator(keys=found), anonymous.token(good_claims())).reason


def test_a_jwks_keeps_the_keys_it_can_use_and_says_why_it_skipped_the_others(keys):
    document = {"keys": [keys["RS256"].jwk(), {"kty": "oct", "k": "c2VjcmV0"}, {"kty": "EC", "crv": "P-256", "x": "AA",
                                                                               "y": "AA", "kid": "broken"}, "junk"]}
    found, skipped = parse_jwks(json.dumps(document))
    assert [key.kid for key in found] == ["kid-RS256"]
    assert len(skipped) == 3 and "unsupported key type oct" in skipped[0] and "(broken)" in skipped[1]
    for text in ("[]", "{}", "not json", '{"keys": 5}'):
        with pytest.raises(ValueError):
            parse_jwks(text)


def test_the_jwks_example_in_the_security_docs_is_a_jwks():
    text = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    example = text[text.index("```json\n") + len("```json\n"):]
    found, skipped = parse_jwks(example[:example.index("```")])
    assert [(key.kty, key.kid) for key in found] == [("RSA", "2024-06"), ("EC", "ec-1")] and not skipped


# --- a listener's settings, and the JWKS read and read again ---------------------------------------------------


@pytest.fixture(autouse=True)
def _stop_jwks_threads(monkeypatch):
    """Each JWKS reader a test starts is stopped when it ends."""
    started = []
    start = JwksSource.start

    def recording_start(self):
        started.append(self)
        start(self)

    monkeypatch.setattr(JwksSource, "start", recording_start)
    yield
    for source in started:
        source.close()



def listener_config(**settings) -> BrokerConfig:
    """A node with one SASL_PLAINTEXT listener offering OAUTHBEARER; a setting given as None is left out."""
    settings = {"listeners": "SASL://127.0.0.1:9092", "listener.security.protocol.map": "SASL:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl.oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required;", **settings}
    return BrokerConfig({key: value for key, value in settings.items() if value is not None})


def signed_settings(url: str, **more) -> dict:
    return {"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CLASS,
            "listener.name.sasl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url, **more}


def authenticate(security: ListenerSecurity, token: str, version: int = 2):
    authenticator = SaslAuthenticator(security.mechanisms, security.max_reauth_ms)
    assert authenticator.handshake("OAUTHBEARER")[0] == ErrorCode.NONE
    result = authenticator.authenticate(client_initial_response(token), 0, version)
    if result.error_code == ErrorCode.NONE and result.token:  # the JSON challenge: answer it as clients do
        result = authenticator.authenticate(b"\x01", 0, version)
    return authenticator, result


def test_a_listener_takes_unsecured_tokens_by_default_and_the_token_bounds_the_session():
    security = ListenerSecurity(listener_config(**{"connections.max.reauth.ms": "600000"}), "SASL", lambda *_: None)
    authenticator, result = authenticate(security, unsecured_jwt(claims("alice", lifetime_s=30)))
    assert (result.error_code, authenticator.principal) == (ErrorCode.NONE, "User:alice")
    assert 28_000 < result.session_lifetime_ms <= 30_000  # the token's exp, sooner than connections.max.reauth.ms
    authenticator, result = authenticate(security, unsecured_jwt(claims("alice", lifetime_s=3600)))
    assert result.session_lifetime_ms == 600_000
    _, result = authenticate(security, unsecured_jwt(claims("alice", lifetime_s=-10)))
    assert (result.error_code, result.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                         '{"status":"invalid_token"}')


def test_the_unsecured_validator_reads_its_options_from_the_login_module():
    jaas = f'{LOGIN_MODULE} required unsecuredValidatorRequiredScope="produce" unsecuredValidatorPrincipalClaimName="p";'
    security = ListenerSecurity(listener_config(**{"listener.name.sasl.oauthbearer.sasl.jaas.config": jaas}), "SASL",
                                lambda *_: None)
    _, result = authenticate(security, unsecured_jwt(claims("x", p="carol", scope=["produce"])))
    assert result.error_code == ErrorCode.NONE
    _, result = authenticate(security, unsecured_jwt(claims("x", p="carol")))
    assert result.error_message == '{"status":"insufficient_scope", "scope":"[produce]"}'


def test_a_listener_validates_signed_tokens_with_a_jwks_file(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(keys["RS256"], keys["ES256"]))
    security = ListenerSecurity(listener_config(**signed_settings(path.as_uri(), **{
        "listener.name.sasl.oauthbearer.sasl.oauthbearer.expected.issuer": "https://idp",
        "sasl.oauthbearer.expected.audience": "kafka, spare"})), "SASL", lambda *_: None)
    authenticator, result = authenticate(security, keys["ES256"].token(claims("bob", iss="https://idp", aud="kafka")))
    assert (result.error_code, authenticator.principal) == (ErrorCode.NONE, "User:bob")
    for bad in (keys["ES256"].token(claims("bob", iss="https://evil", aud="kafka")),
                SigningKey.generate("ES256", kid="kid-ES256").token(claims("bob", iss="https://idp", aud="kafka")),
                unsecured_jwt(claims("bob", iss="https://idp", aud="kafka"))):
        _, result = authenticate(security, bad)
        assert (result.error_code, result.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                             '{"status":"invalid_token"}')


@pytest.mark.parametrize("settings, message", [
    ({"listener.name.sasl.oauthbearer.sasl.jaas.config": None}, "needs its login module"),
    ({"listener.name.sasl.oauthbearer.sasl.jaas.config":
      "org.apache.kafka.common.security.plain.PlainLoginModule required;"}, "OAUTHBEARER needs"),
    ({"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"}, "is not supported"),
    (signed_settings(""), "sasl.oauthbearer.jwks.endpoint.url value must be non-null"),
    (signed_settings("ftp://idp/jwks"), 'invalid protocol (ftp); only "http", "https", and "file"'),
    (signed_settings("file:///no/such/jwks.json"), "that doesn't exist"),
    (signed_settings("file:///tmp"), "references a directory"),
    (signed_settings("https://idp/jwks", **{"sasl.oauthbearer.jwks.endpoint.refresh.ms": "0"}), "must be positive"),
])
def test_settings_kafka_refuses_at_startup(settings, message):
    config = listener_config(**settings)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ListenerSecurity(config, "SASL", lambda *_: None)


def test_a_jwks_file_that_is_no_jwks_stops_the_node(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text("<html>")
    with pytest.raises(ConfigError, match="error when initializing the VerificationKeyResolver"):
        ListenerSecurity(listener_config(**signed_settings(path.as_uri())), "SASL", lambda *_: None)


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_jwks_file_is_read_again_every_refresh_interval(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(keys["RS256"]))
    security = ListenerSecurity(listener_config(**signed_settings(
        path.as_uri(), **{"sasl.oauthbearer.jwks.endpoint.refresh.ms": "100"})), "SASL", lambda *_: None)
    rotated = SigningKey.generate("RS256", kid="rotated")
    path.write_text(jwks(rotated))
    wait_for(lambda: authenticate(security, rotated.token(claims()))[1].error_code == ErrorCode.NONE)
    assert authenticate(security, keys["RS256"].token(claims()))[1].error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_token_naming_an_unknown_key_id_makes_the_jwks_be_read_at_once(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(keys["RS256"]))
    security = ListenerSecurity(listener_config(**signed_settings(path.as_uri())), "SASL", lambda *_: None)
    rotated = SigningKey.generate("ES256", kid="rotated")
    path.write_text(jwks(keys["RS256"], rotated))
    # refused (the keys are as read at startup), which starts a read; the next attempt gets in
    assert authenticate(security, rotated.token(claims()))[1].error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    wait_for(lambda: authenticate(security, rotated.token(claims()))[1].error_code == ErrorCode.NONE)


def test_unknown_key_ids_are_read_again_at_most_once_a_minute_each():
    now = [1000.0]
    source = JwksSource("file:///jwks", lambda: "{}", JwtValidator(), 3_600_000, 100, 10_000, clock=lambda: now[0])
    assert source.expedite("a") and not source.expedite("a") and source.expedite("b")
    now[0] += 60
    assert source.expedite("a")
    assert not source.expedite("k" * 1001)


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    body = b"{}"
    requests = 0

    def do_GET(self):  # noqa: N802
        type(self).requests += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def https_jwks(tmp_path, monkeypatch):
    """An https JWKS endpoint with a certificate from a private authority: (url, CA file, handler class)."""
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")  # urllib would take a proxy from the environment
    authority = CertificateAuthority(tmp_path / "ca")
    issued = authority.issue("idp")
    handler = type("Handler", (_JwksHandler,), {"body": b"{}", "requests": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(issued.keystore))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://localhost:{server.server_address[1]}/jwks", authority.path, handler
    server.shutdown()
    server.server_close()


def test_keys_are_fetched_from_an_https_endpoint_trusted_through_the_login_modules_ssl_options(https_jwks, keys):
    url, ca, handler = https_jwks
    handler.body = jwks(keys["PS256"]).encode()
    jaas = f'{LOGIN_MODULE} required ssl.truststore.location="{ca}";'
    security = ListenerSecurity(listener_config(**signed_settings(url, **{
        "listener.name.sasl.oauthbearer.sasl.jaas.config": jaas})), "SASL", lambda *_: None)
    wait_for(lambda: authenticate(security, keys["PS256"].token(claims()))[1].error_code == ErrorCode.NONE)
    # a new key at the endpoint is fetched when a token names it
    handler.body = jwks(keys["PS256"], keys["EdDSA"]).encode()
    before = handler.requests
    assert authenticate(security, keys["EdDSA"].token(claims()))[1].error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    wait_for(lambda: authenticate(security, keys["EdDSA"].token(claims()))[1].error_code == ErrorCode.NONE)
    assert handler.requests > before  # fetched again (more than once when a slow machine retries meanwhile)


def test_an_untrusted_https_endpoint_gives_no_keys(https_jwks, keys):
    url, _, handler = https_jwks
    handler.body = jwks(keys["PS256"]).encode()
    security = ListenerSecurity(listener_config(**signed_settings(url, **{
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "200"})), "SASL", lambda *_: None)
    time.sleep(0.5)
    assert handler.requests == 0  # the TLS handshake failed: the system's authorities do not know this one
    assert authenticate(security, keys["PS256"].token(claims()))[1].error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


# --- fuzzing --------------------------------------------------------------------------------------------------

_VALUES = [None, True, 0, -1, 1.5, 10**30, 1e300, "", " ", "alice", "none", "RS256", "ES256", [], ["a", 1], {}, {"a": 1},
           NOW_S, NOW_S + 60, NOW_S - 60, "kid-RS256", ["kafka"], "x" * 2000]
_NAMES = ["alg", "kid", "crit", "typ", "sub", "exp", "iat", "nbf", "iss", "aud", "scope", "jti"]


def _random_json(rng: random.Random) -> object:
    if rng.random() < 0.1:
        return rng.choice([[], "text", 5, None, [[[]]]])
    return {rng.choice(_NAMES): rng.choice(_VALUES) for _ in range(rng.randrange(6))}


def _random_token(rng: random.Random, keys: dict[str, SigningKey]) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return f"{b64_json(_random_json(rng))}.{b64_json(_random_json(rng))}.{rng.choice(['', b64(rng.randbytes(64))])}"
    if kind == 1:
        key = rng.choice(list(keys.values()))
        claim_set = _random_json(rng)
        return key.token(claim_set if isinstance(claim_set, dict) else {}, **({"crit": ["x"]} if rng.random() < .1
                                                                              else {}))
    if kind == 2:
        return unsecured_jwt(_random_json(rng) if rng.random() < .5 else good_claims())
    alphabet = "abcXYZ019-_~+/.="
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 80)))


def _mutate(rng: random.Random, message: bytes) -> bytes:
    data = bytearray(message)
    for _ in range(rng.randrange(1, 4)):
        action = rng.randrange(4)
        at = rng.randrange(len(data) + 1)
        if action == 0 and data:
            del data[min(at, len(data) - 1)]
        elif action == 1:
            data[at:at] = rng.choice([b"\x01", b"=", b",", b"a=", b"\xff", rng.randbytes(rng.randrange(1, 8))])
        elif action == 2 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        else:
            data = data[:at]
    return bytes(data)


def test_fuzzed_client_messages_only_ever_fail_to_authenticate(keys, seed):
    rng = random.Random(seed)
    validators = [UnsecuredJwtValidator({"unsecuredValidatorRequiredScope": "a"}).validate, UnsecuredJwtValidator({}).validate,
                  jwt_validator(*keys.values(), on_unknown_key=lambda kid: None).validate,
                  jwt_validator(*keys.values(), expected_issuer="i", expected_audiences=["kafka"]).validate]
    for attempt in range(3000):
        token = _random_token(rng, keys)
        message = client_initial_response(token, rng.choice(["", "alice", "a=2Cb"]),
                                          rng.choice([{}, {"k": "v"}, {"auth": "x"}]))
        if rng.random() < 0.5:
            message = _mutate(rng, message)
        server = OAuthBearerServer(rng.choice(validators))
        try:
            for step in (message, rng.choice([b"\x01", message, b""])):
                answer = server.evaluate(step, NOW_MS)
                assert isinstance(answer, bytes)
                if server.complete:
                    break
        except SaslAuthenticationError:
            pass
        except Exception as exc:  # noqa: BLE001 - anything else is a bug; say how to replay it
            raise AssertionError(f"attempt {attempt} with seed {seed} (replay with --seed {seed}): {message!r} "
                                 f"raised {exc!r}") from exc


def test_the_standard_base64_alphabet_is_accepted_too():
    # Kafka's unsecured validator decodes with Java's basic Base64 decoder, jose4j with a lenient one
    standard = base64.b64encode(json.dumps(good_claims(sub="a?>b")).encode()).decode()
    assert "+" in standard
    token = f"{b64_json({'alg': 'none'})}.{standard.rstrip('=')}."
    assert UnsecuredJwtValidator({}).validate(token, NOW_MS).principal == "a?>b"
