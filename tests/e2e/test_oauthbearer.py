"""SASL OAUTHBEARER on a real node, as Kafka clients use it: confluent-kafka (librdkafka) and kafka-python produce
and consume with unsecured JWTs (development) and with JWTs signed by a key of the node's JWKS; expired tokens and
tokens signed by another key are refused with Kafka's JSON error; the token's expiry and connections.max.reauth.ms
bound a session, and clients re-authenticate on the same connection (KIP-368) before it ends."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid

import pytest
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

try:
    from kafka.net.sasl.oauth import AbstractTokenProvider
except ImportError:  # kafka-python before 3.0
    from kafka.sasl.oauth import AbstractTokenProvider

from odradek.security.oauthbearer import LOGIN_MODULE, client_initial_response, unsecured_jwt
from tests.conftest import NodeProcess, free_port
from tests.e2e import client_roundtrip
from tests.e2e.raw_client import RawClient
from tests.kafka_python_reads import take
from tests.security.jwts import SigningKey, claims, jwks

ISSUER = "https://idp.example.test"
AUDIENCE = "odradek"
REAUTH_MS = 3000
RECORDS = 5
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 18, 17, 36, 3


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One node: UNSECURED takes unsecured JWTs; SIGNED and REAUTH take JWTs signed by the test's key (a JWKS file),
    REAUTH with connections.max.reauth.ms; ADMIN is PLAINTEXT, between nodes."""
    directory = tmp_path_factory.mktemp("oauthbearer")
    key = SigningKey.generate("RS256", kid="idp-key-1")
    jwks_file = directory / "jwks.json"
    jwks_file.write_text(jwks(key))
    ports = {name: free_port() for name in ("UNSECURED", "SIGNED", "REAUTH", "ADMIN")}
    settings = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "UNSECURED:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT,"
                                          "ADMIN:PLAINTEXT",
        "inter.broker.listener.name": "ADMIN",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.jaas.config": f"{LOGIN_MODULE} required;",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.reauth.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    started = NodeProcess(directory / "data", port=ports["ADMIN"], settings=settings).start()
    started.ports = ports
    started.key = key
    yield started
    started.stop()


def signed_token(key: SigningKey, subject: str = "alice", lifetime_s: float = 3600, **more) -> str:
    return key.token(claims(subject, lifetime_s, iss=ISSUER, aud=AUDIENCE, **more))


def values() -> list[bytes]:
    return [f"bearer record {i}".encode() for i in range(RECORDS)]


# --- confluent-kafka (librdkafka) ------------------------------------------------------------------------------


def librdkafka_settings(node, listener: str, token: str | None = None, **overrides) -> dict:
    settings = {"bootstrap.servers": f"127.0.0.1:{node.ports[listener]}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER"}
    if token is None:
        settings |= {"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice"}
    else:
        # librdkafka is told the token lasts an hour whatever its exp says, so it sends even an expired one
        settings["oauth_cb"] = lambda _config: (token, time.time() + 3600)
    return settings | overrides


def confluent_roundtrip(settings: dict) -> None:
    assert client_roundtrip.confluent_roundtrip(settings, "oauth-ck", values()) == values()


def test_confluent_kafka_with_an_unsecured_jwt(node):
    confluent_roundtrip(librdkafka_settings(node, "UNSECURED"))


def test_confluent_kafka_with_a_signed_jwt(node):
    confluent_roundtrip(librdkafka_settings(node, "SIGNED", signed_token(node.key)))


def librdkafka_refusal(settings: dict) -> str:
    """The authentication error librdkafka reports with these settings."""
    errors = []
    producer = Producer({**settings, "error_cb": errors.append, "message.timeout.ms": 5000,
                         "reconnect.backoff.ms": 1000})
    producer.produce("never-written", b"x")
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.purge()
    refused = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert refused, f"not refused: {errors[:3]}"
    return refused[0]


@pytest.mark.parametrize("case", ["expired", "other key", "wrong issuer", "unsigned"])
def test_confluent_kafka_with_a_bad_signed_jwt_is_refused_with_kafkas_json_error(node, case):
    token = {"expired": lambda: signed_token(node.key, lifetime_s=-60, iat=int(time.time()) - 3600),
             "other key": lambda: signed_token(SigningKey.generate("RS256", kid="idp-key-1")),
             "wrong issuer": lambda: node.key.token(claims("alice", iss="https://evil.test", aud=AUDIENCE)),
             "unsigned": lambda: unsecured_jwt(claims("alice", iss=ISSUER, aud=AUDIENCE))}[case]()
    assert '{"status":"invalid_token"}' in librdkafka_refusal(librdkafka_settings(node, "SIGNED", token))


def test_an_expired_unsecured_jwt_is_refused(node):
    expired = unsecured_jwt(claims("alice", lifetime_s=-60, now=time.time() - 3600))
    assert '{"status":"invalid_token"}' in librdkafka_refusal(librdkafka_settings(node, "UNSECURED", expired))


# --- kafka-python ------------------------------------------------------------------------------------------------


class FixedToken(AbstractTokenProvider):
    def __init__(self, token: str):
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token

    def extensions(self) -> dict:
        return {"traceId": "e2e"}


def kafka_python_settings(node, listener: str, token: str) -> dict:
    return {"bootstrap_servers": f"127.0.0.1:{node.ports[listener]}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": FixedToken(token)}


@pytest.mark.parametrize("listener", ["UNSECURED", "SIGNED"])
def test_kafka_python_produces_and_consumes(node, listener):
    token = unsecured_jwt(claims("bob")) if listener == "UNSECURED" else signed_token(node.key, "bob")
    topic = f"oauth-kp-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(acks="all", **kafka_python_settings(node, listener, token))
    for value in values():
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             **kafka_python_settings(node, listener, token))
    got = [message.value for message in take(consumer, len(values()))]
    consumer.close()
    assert got == values()


def test_kafka_python_with_a_token_signed_by_another_key_is_refused(node, caplog):
    forged = signed_token(SigningKey.generate("RS256", kid="idp-key-1"))
    with caplog.at_level("ERROR", logger="kafka"), pytest.raises(KafkaPythonError):
        KafkaProducer(request_timeout_ms=5000, max_block_ms=5000, bootstrap_timeout_ms=5000,
                      **kafka_python_settings(node, "SIGNED", forged))
    assert 'SaslAuthenticationFailedError: {"status":"invalid_token"}' in caplog.text


# --- sessions: the token's lifetime, connections.max.reauth.ms and re-authentication (KIP-368) -------------------


def authenticate(client: RawClient, token: str) -> dict:
    assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})["error_code"] == 0
    return client.request(SASL_AUTHENTICATE, 2, {"auth_bytes": client_initial_response(token)})


def metadata(client: RawClient) -> dict:
    return client.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})


def test_a_session_lasts_as_long_as_the_token_and_then_ends(node):
    with RawClient(f"127.0.0.1:{node.ports['SIGNED']}") as client:
        answer = authenticate(client, signed_token(node.key, lifetime_s=3))
        assert answer["error_code"] == 0
        assert 1000 < answer["session_lifetime_ms"] <= 3000  # the token's exp: no connections.max.reauth.ms here
        assert metadata(client)["brokers"]
        time.sleep(answer["session_lifetime_ms"] / 1000 + 0.2)
        with pytest.raises((ConnectionError, OSError)):
            metadata(client)
    assert "the SASL session expired (the token's expiry)" in node.log_text()


def test_a_client_that_re_authenticates_keeps_its_connection_past_the_first_session(node):
    with RawClient(f"127.0.0.1:{node.ports['REAUTH']}") as client:
        first = authenticate(client, signed_token(node.key))
        assert (first["error_code"], first["session_lifetime_ms"]) == (0, REAUTH_MS)
        ends = time.monotonic() + REAUTH_MS / 1000
        time.sleep(REAUTH_MS / 1000 * 0.6)
        again = authenticate(client, signed_token(node.key))  # a fresh token, the same principal
        assert (again["error_code"], again["session_lifetime_ms"]) == (0, REAUTH_MS)
        time.sleep(max(ends - time.monotonic(), 0) + 0.5)
        assert metadata(client)["brokers"]  # past the first session's end, on the same connection


def test_re_authentication_as_another_principal_is_refused(node):
    with RawClient(f"127.0.0.1:{node.ports['REAUTH']}") as client:
        assert authenticate(client, signed_token(node.key, "alice"))["error_code"] == 0
        answer = authenticate(client, signed_token(node.key, "mallory"))
        assert answer["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals during re-authentication" in answer["error_message"]


def test_confluent_kafka_re_authenticates_on_the_same_connection(node):
    stats = []
    settings = librdkafka_settings(node, "REAUTH", signed_token(node.key), **{
        "statistics.interval.ms": 500, "stats_cb": lambda text: stats.append(json.loads(text))})
    log_before = len(node.log_text())
    producer = Producer({**settings, "acks": "all"})
    topic = f"oauth-reauth-{uuid.uuid4().hex[:6]}"
    delivered = []
    deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce(topic, b"tick", on_delivery=lambda error, message: delivered.append(error))
        producer.poll(0.2)
    assert producer.flush(30) == 0
    assert delivered and not any(delivered)
    brokers = [b for b in stats[-1]["brokers"].values() if b.get("nodeid", -1) >= 0]
    assert brokers and all((b["connects"], b["disconnects"]) == (1, 0) for b in brokers), \
        [(b["name"], b["connects"], b["disconnects"]) for b in brokers]
    assert "the SASL session expired" not in node.log_text()[log_before:]


def test_kafka_python_re_authenticates_and_keeps_producing(node):
    topic = f"oauth-kp-reauth-{uuid.uuid4().hex[:6]}"
    log_before = len(node.log_text())
    producer = KafkaProducer(acks="all", **kafka_python_settings(node, "REAUTH", signed_token(node.key)))
    deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        producer.send(topic, b"tick").get(timeout=10)
        sent += 1
        time.sleep(0.2)
    producer.close()
    assert sent > 10
    assert "the SASL session expired" not in node.log_text()[log_before:]
    assert "Traceback" not in node.log_text()


# --- aiokafka and kcat ------------------------------------------------------------------------------------------


class AioToken(AioTokenProvider):
    def __init__(self, token: str):
        self.value = token

    async def token(self) -> str:
        return self.value


def test_aiokafka_produces_and_consumes_with_a_signed_jwt(node):
    settings = {"bootstrap_servers": f"127.0.0.1:{node.ports['SIGNED']}", "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": AioToken(signed_token(node.key, "carol"))}
    assert asyncio.run(client_roundtrip.aiokafka_roundtrip(settings, "oauth-aio", values())) == values()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by `make test`")
def test_kcat_produces_and_consumes_with_an_unsecured_jwt(node):
    topic = f"oauth-kcat-{uuid.uuid4().hex[:6]}"
    options = ["-b", f"127.0.0.1:{node.ports['UNSECURED']}", "-Xsecurity.protocol=SASL_PLAINTEXT",
               "-Xsasl.mechanism=OAUTHBEARER", "-Xenable.sasl.oauthbearer.unsecure.jwt=true",
               "-Xsasl.oauthbearer.config=principal=dave"]
    lines = [value.decode() for value in values()]
    subprocess.run(["kcat", *options, "-P", "-t", topic], input="\n".join(lines) + "\n", text=True, check=True,
                   timeout=60, capture_output=True)
    out = subprocess.run(["kcat", *options, "-C", "-t", topic, "-o", "beginning", "-e"], text=True, check=True,
                         timeout=60, capture_output=True).stdout
    assert out.splitlines() == lines
