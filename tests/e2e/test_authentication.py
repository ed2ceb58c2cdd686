"""TLS, mutual TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on one node's listeners, as Kafka clients
configure them: confluent-kafka, kcat, kafka-python, aiokafka, and the Spark connector's own producer and fetch
client each produce and consume over every kind of listener; wrong passwords, unknown users, untrusted or missing certificates and plaintext clients on TLS
ports are refused; garbage and cut-off handshakes cost only their connection."""

import asyncio
import logging
import random
import shutil
import socket
import ssl
import subprocess
import time
import uuid
from dataclasses import dataclass

import pytest
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from tests.conftest import NodeProcess, free_port
from tests.e2e.client_roundtrip import aiokafka_roundtrip, confluent_roundtrip
from tests.e2e.raw_client import RawClient
from tests.kafka_python_reads import take
from tests.security.certificates import CertificateAuthority

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS = {("carol", "SCRAM-SHA-256"): "carol-secret", ("dave", "SCRAM-SHA-512"): "dave-secret"}
LISTENERS = ("TLS", "MTLS", "SASL", "SASLTLS", "MAPPED", "REAUTH", "ADMIN")
REAUTH_MS = 1500
RECORDS = 5


@dataclass(frozen=True)
class Secured:
    """One way in: a listener and the client settings for it (librdkafka's names)."""

    listener: str
    protocol: str
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    client_certificate: bool = False


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """One node with a listener of each kind, and a PLAINTEXT one for setting up; SCRAM users created."""
    directory = tmp_path_factory.mktemp("secured")
    authority = CertificateAuthority(directory / "ca")
    node_keys = authority.issue("node", key_password="node-key-secret")
    client_keys = authority.issue("alice")
    stranger = CertificateAuthority(directory / "other-ca", "Other CA").issue("mallory")
    ports = {name: free_port() for name in LISTENERS}
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items()) + ";")
    settings = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "TLS:SSL,MTLS:SSL,SASL:SASL_PLAINTEXT,SASLTLS:SASL_SSL,MAPPED:SSL,"
                                          "REAUTH:SASL_PLAINTEXT,ADMIN:PLAINTEXT",
        "inter.broker.listener.name": "ADMIN",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(node_keys.keystore),
        "ssl.key.password": "node-key-secret",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(authority.path),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mapped.ssl.client.auth": "required",
        "listener.name.mapped.ssl.principal.mapping.rules": "RULE:^CN=(admin.*)$/$1/",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl.plain.sasl.jaas.config": jaas,
        "listener.name.sasltls.plain.sasl.jaas.config": jaas,
        "listener.name.reauth.plain.sasl.jaas.config": jaas,
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    node = NodeProcess(directory / "data", port=ports["ADMIN"], settings=settings).start()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 4096),
                                            password.encode()) for (user, m), password in SCRAM_USERS.items()]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(15)
    node.ports = ports
    node.ca = authority.path
    node.client_keys = client_keys
    node.stranger_keys = stranger
    yield node
    node.stop()


WAYS_IN = [
    Secured("TLS", "SSL"),
    Secured("MTLS", "SSL", client_certificate=True),
    Secured("SASL", "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    Secured("SASL", "SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "carol-secret"),
    Secured("SASLTLS", "SASL_SSL", "SCRAM-SHA-512", "dave", "dave-secret"),
    Secured("SASLTLS", "SASL_SSL", "PLAIN", "admin", "admin-secret"),
]
WAY_IDS = [f"{w.listener}-{w.mechanism or ('mtls' if w.client_certificate else 'tls')}" for w in WAYS_IN]


def librdkafka_settings(node, way: Secured, **overrides) -> dict:
    settings = {"bootstrap.servers": f"127.0.0.1:{node.ports[way.listener]}", "security.protocol": way.protocol}
    if way.protocol in ("SSL", "SASL_SSL"):
        settings["ssl.ca.location"] = str(node.ca)
    if way.client_certificate:
        settings |= {"ssl.certificate.location": str(node.client_keys.certificate),
                     "ssl.key.location": str(node.client_keys.key)}
    if way.mechanism:
        settings |= {"sasl.mechanism": way.mechanism, "sasl.username": way.username, "sasl.password": way.password}
    return settings | overrides


def values(count: int = RECORDS) -> list[bytes]:
    return [f"secret record {i}".encode() for i in range(count)]


@pytest.mark.parametrize("way", WAYS_IN, ids=WAY_IDS)
def test_confluent_kafka_produces_and_consumes(secured, way):
    assert confluent_roundtrip(librdkafka_settings(secured, way), "auth-ck", values()) == values()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by `make test`")
@pytest.mark.parametrize("way", WAYS_IN, ids=WAY_IDS)
def test_kcat_produces_and_consumes(secured, way):
    topic = f"auth-kcat-{uuid.uuid4().hex[:6]}"
    options = [f"-X{key}={value}" for key, value in librdkafka_settings(secured, way).items()
               if key != "bootstrap.servers"]
    bootstrap = f"127.0.0.1:{secured.ports[way.listener]}"
    lines = [value.decode() for value in values()]
    subprocess.run(["kcat", "-b", bootstrap, *options, "-P", "-t", topic], input="\n".join(lines) + "\n",
                   text=True, check=True, timeout=60, capture_output=True)
    out = subprocess.run(["kcat", "-b", bootstrap, *options, "-C", "-t", topic, "-o", "beginning", "-e"],
                         text=True, check=True, timeout=60, capture_output=True).stdout
    assert out.splitlines() == lines


@pytest.mark.parametrize("way", WAYS_IN, ids=WAY_IDS)
def test_the_spark_connectors_own_producer_and_fetch_client_write_and_read(secured, way):
    """The clients of Odradek's own that Spark tasks use (spark/produce.py, spark/fetch.py) take the same
    librdkafka-named settings, client certificates included."""
    import pyarrow as pa

    from odradek.spark.fetch import fetch_range
    from odradek.spark.produce import ColumnProducer

    settings = librdkafka_settings(secured, way)
    topic = f"auth-own-{uuid.uuid4().hex[:6]}"
    producer = ColumnProducer(settings)
    try:
        batch = pa.RecordBatch.from_pydict({"value": values(), "partition": pa.array([0] * RECORDS, pa.int32())})
        assert producer.write([batch], topic) == RECORDS
    finally:
        producer.close()
    got = [v for columns in fetch_range(settings, topic, 0, 0, RECORDS, include_headers=False, timeout_s=60,
                                        on_lost=pytest.fail)
           for c in columns for v in c.values.to_pylist()]
    assert got == values()


def kafka_python_settings(node, way: Secured) -> dict:
    settings = {"bootstrap_servers": f"127.0.0.1:{node.ports[way.listener]}", "security_protocol": way.protocol}
    if way.protocol in ("SSL", "SASL_SSL"):
        settings |= {"ssl_cafile": str(node.ca)}
    if way.client_certificate:
        settings |= {"ssl_certfile": str(node.client_keys.certificate), "ssl_keyfile": str(node.client_keys.key)}
    if way.mechanism:
        settings |= {"sasl_mechanism": way.mechanism, "sasl_plain_username": way.username,
                     "sasl_plain_password": way.password}
    return settings


@pytest.mark.parametrize("way", WAYS_IN, ids=WAY_IDS)
def test_kafka_python_produces_and_consumes(secured, way):
    topic = f"auth-kp-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(acks="all", **kafka_python_settings(secured, way))
    for value in values():
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             **kafka_python_settings(secured, way))
    got = [message.value for message in take(consumer, len(values()))]
    consumer.close()
    assert got == values()


def test_aiokafka_produces_and_consumes(secured):
    """aiokafka over each kind of listener in one event loop."""

    async def roundtrip(way: Secured):
        settings = {"bootstrap_servers": f"127.0.0.1:{secured.ports[way.listener]}", "security_protocol": way.protocol}
        if way.protocol in ("SSL", "SASL_SSL"):
            certificate = (dict(certfile=str(secured.client_keys.certificate), keyfile=str(secured.client_keys.key))
                           if way.client_certificate else {})
            settings["ssl_context"] = create_ssl_context(cafile=str(secured.ca), **certificate)
        if way.mechanism:
            settings |= {"sasl_mechanism": way.mechanism, "sasl_plain_username": way.username,
                         "sasl_plain_password": way.password}
        assert await aiokafka_roundtrip(settings, "auth-aio", values()) == values(), way

    async def scenario():
        for way in WAYS_IN:
            await roundtrip(way)

    asyncio.run(scenario())


def _is_refusal(error: KafkaError) -> bool:
    # with TLS 1.3 the client learns of a refused certificate from an alert after its own handshake ends
    return error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or \
        (error.code() == KafkaError._TRANSPORT and "SSL alert" in error.str())


def authentication_error(settings: dict) -> str:
    """What librdkafka reports when it cannot get in with these settings."""
    errors = []
    producer = Producer({**settings, "error_cb": errors.append, "message.timeout.ms": 5000,
                         "reconnect.backoff.ms": 1000})
    producer.produce("never-written", b"x")
    deadline = time.monotonic() + 20
    while not any(map(_is_refusal, errors)) and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.purge()
    refused = [e for e in errors if _is_refusal(e)]
    assert refused, f"not refused: {errors[:3]}"
    return refused[0].str()


@pytest.mark.parametrize("mechanism, user", [("PLAIN", "alice"), ("PLAIN", "nobody"), ("SCRAM-SHA-256", "carol"),
                                             ("SCRAM-SHA-256", "nobody"), ("SCRAM-SHA-512", "carol")])
def test_wrong_password_or_unknown_user_is_refused_alike(secured, mechanism, user):
    way = Secured("SASL", "SASL_PLAINTEXT", mechanism, user, "not-the-password")
    message = authentication_error(librdkafka_settings(secured, way))
    expected = ("Invalid username or password" if mechanism == "PLAIN"
                else f"invalid credentials with SASL mechanism {mechanism}")
    assert expected in message
    assert user not in message  # which of user or password was wrong is never told


def test_a_mechanism_the_listener_does_not_offer_is_refused(secured):
    way = Secured("SASL", "SASL_PLAINTEXT", "OAUTHBEARER")
    settings = librdkafka_settings(secured, way) | {"sasl.oauthbearer.config": "principal=alice",
                                                    "enable.sasl.oauthbearer.unsecure.jwt": True}
    assert "unsupported sasl mechanism" in authentication_error(settings).lower()


def test_mutual_tls_refuses_a_client_without_a_certificate_or_with_an_untrusted_one(secured):
    without = Secured("MTLS", "SSL")
    assert "certificate required" in authentication_error(librdkafka_settings(secured, without))
    untrusted = librdkafka_settings(secured, without) | {
        "ssl.certificate.location": str(secured.stranger_keys.certificate),
        "ssl.key.location": str(secured.stranger_keys.key)}
    assert "unknown ca" in authentication_error(untrusted)
    # and a client that does not trust the node's authority refuses the node
    assert "certificate verify failed" in authentication_error(
        librdkafka_settings(secured, Secured("TLS", "SSL")) | {"ssl.ca.location": str(secured.stranger_keys.certificate)})


def test_a_certificate_no_mapping_rule_applies_to_is_refused_at_the_first_request(secured):
    context = ssl.create_default_context(cafile=str(secured.ca))
    context.load_cert_chain(str(secured.client_keys.certificate), str(secured.client_keys.key))
    with socket.create_connection(("127.0.0.1", secured.ports["MAPPED"]), timeout=10) as plain, \
            context.wrap_socket(plain, server_hostname="localhost") as tls:
        tls.sendall(_frame(18, 3, {"client_software_name": "raw", "client_software_version": "1"}))
        assert tls.recv(65536) == b""  # CN=alice matches no rule: closed unanswered
    assert "No rules apply to CN=alice" in secured.log_text()


def _sasl_plain_login(client: RawClient, username: str, password: str) -> dict:
    assert client.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    return client.request(36, 2, {"auth_bytes": f"\0{username}\0{password}".encode()})


def test_a_session_ends_with_connections_max_reauth_ms_unless_the_client_re_authenticates(secured):
    metadata = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    with RawClient(f"127.0.0.1:{secured.ports['REAUTH']}", timeout=10) as client:
        login = _sasl_plain_login(client, "alice", "alice-secret")
        assert login["error_code"] == 0 and 0 < login["session_lifetime_ms"] <= REAUTH_MS
        assert client.request(3, 12, metadata)["brokers"]
        time.sleep(login["session_lifetime_ms"] / 1000)  # the session is over once its lifetime has passed
        with pytest.raises(ConnectionError):
            client.request(3, 12, metadata)
    # a client that re-authenticates (as the same user) keeps its connection
    with RawClient(f"127.0.0.1:{secured.ports['REAUTH']}", timeout=10) as client:
        for _ in range(3):
            login = _sasl_plain_login(client, "alice", "alice-secret")
            assert login["error_code"] == 0 and login["session_lifetime_ms"] > 0
            assert client.request(3, 12, metadata)["brokers"]
        refused = _sasl_plain_login(client, "admin", "admin-secret")  # another principal: refused
        assert refused["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals during re-authentication" in refused["error_message"]


def test_librdkafka_re_authenticates_and_goes_on_producing(secured):
    """librdkafka re-authenticates before the session lifetime the node tells it (KIP-368)."""
    way = Secured("REAUTH", "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    topic = f"auth-reauth-{uuid.uuid4().hex[:6]}"
    errors, delivered = [], []
    expiries = secured.log_text().count("the SASL session expired (connections.max.reauth.ms)")
    producer = Producer(librdkafka_settings(secured, way, acks="all", error_cb=errors.append))
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < deadline:  # records spread over three session lifetimes
        producer.produce(topic, str(sent).encode(), on_delivery=lambda err, msg: delivered.append(err))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0
    assert delivered == [None] * sent, [e for e in delivered if e is not None][:3]
    assert not [e for e in errors if "expired" in e.str() or e.code() == KafkaError._AUTHENTICATION], errors
    assert secured.log_text().count("the SASL session expired (connections.max.reauth.ms)") == expiries  # never cut off: it re-authenticated


def test_kafka_python_with_a_wrong_password_gets_an_authentication_error(secured, caplog):
    way = Secured("SASLTLS", "SASL_SSL", "SCRAM-SHA-512", "dave", "wrong")
    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaPythonError):
        KafkaProducer(request_timeout_ms=5000, max_block_ms=5000, bootstrap_timeout_ms=5000,
                      **kafka_python_settings(secured, way))
    # kafka-python logs the refusal and retries until its bootstrap times out
    assert "SaslAuthenticationFailedError: Authentication failed during authentication due to invalid " \
           "credentials with SASL mechanism SCRAM-SHA-512" in caplog.text


def test_plaintext_clients_on_tls_and_sasl_ports_get_nothing(secured):
    # Kafka's protocol in the clear to a TLS port is not a TLS handshake: closed, never answered
    for listener in ("TLS", "MTLS", "SASLTLS"):
        with RawClient(f"127.0.0.1:{secured.ports[listener]}", timeout=10) as client:
            with pytest.raises((ConnectionError, OSError)):
                client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    # on a SASL listener every request but ApiVersions and the SASL exchange closes the connection
    with RawClient(f"127.0.0.1:{secured.ports['SASL']}", timeout=10) as client:
        versions = client.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        assert versions["error_code"] == 0
        with pytest.raises(ConnectionError):
            client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
    # the node is fine
    test_confluent_kafka_produces_and_consumes(secured, WAYS_IN[0])


def test_garbage_and_cut_off_handshakes_cost_only_their_connection(secured, seed):
    rng = random.Random(seed)
    tls_hello = _client_hello()
    for _ in range(60):
        listener = rng.choice(("TLS", "MTLS", "SASLTLS", "SASL"))
        with socket.create_connection(("127.0.0.1", secured.ports[listener]), timeout=10) as sock:
            kind = rng.randrange(3)
            if kind == 0:
                sock.sendall(rng.randbytes(rng.randrange(1, 4096)))
            elif kind == 1:
                sock.sendall(tls_hello[:rng.randrange(1, len(tls_hello))])
            else:  # a SASL exchange with garbage tokens
                token = rng.randbytes(rng.randrange(0, 300))
                sock.sendall(_frame(17, 1, {"mechanism": rng.choice(["PLAIN", "SCRAM-SHA-256"])})
                             + _frame(36, 2, {"auth_bytes": token}))
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(10)
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass
    # every listener still serves its clients
    for way in (WAYS_IN[0], WAYS_IN[3], WAYS_IN[4]):
        test_confluent_kafka_produces_and_consumes(secured, way)
    assert "Traceback" not in secured.log_text(), f"seed {seed}"


def _frame(api_key: int, version: int, body: dict) -> bytes:
    from odradek.protocol.headers import encode_request_header
    from odradek.protocol.messages import API_BY_KEY

    payload = encode_request_header(api_key, version, 1, "fuzz") + API_BY_KEY[api_key].encode_request(version, body)
    return len(payload).to_bytes(4, "big") + payload


def _client_hello() -> bytes:
    """The first bytes a TLS client sends, from Python's own TLS stack."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def test_scram_credentials_are_described_and_survive_a_kill(secured):
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    described = {user: future.result(15)
                 for user, future in admin.describe_user_scram_credentials(["carol", "dave"]).items()}
    assert {user: [(info.mechanism, info.iterations) for info in d.scram_credential_infos]
            for user, d in described.items()} == {"carol": [(ScramMechanism.SCRAM_SHA_256, 4096)],
                                                  "dave": [(ScramMechanism.SCRAM_SHA_512, 4096)]}
    secured.kill()
    secured.start()
    test_confluent_kafka_produces_and_consumes(secured, WAYS_IN[3])


def _served_certificate_serial(port: int, ca) -> int:
    from cryptography import x509

    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain, \
            context.wrap_socket(plain, server_hostname="localhost") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


@pytest.fixture
def renewable(tmp_path):
    """A node whose TLS listener's keystore file can be renewed in place."""
    authority = CertificateAuthority(tmp_path / "ca")
    keystore = tmp_path / "node.pem"
    keystore.write_bytes(authority.issue("node-first").keystore.read_bytes())
    tls_port, plain_port = free_port(), free_port()
    node = NodeProcess(tmp_path / "data", port=plain_port, settings={
        "listeners": f"TLS://127.0.0.1:{tls_port},PLAINTEXT://127.0.0.1:{plain_port}",
        "listener.security.protocol.map": "TLS:SSL,PLAINTEXT:PLAINTEXT", "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.tls.ssl.keystore.location": str(keystore)}).start()
    node.authority, node.keystore, node.tls_port = authority, keystore, tls_port
    yield node
    node.stop()


def test_a_renewed_certificate_is_served_after_alter_configs_without_a_restart(renewable, tmp_path):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    node, authority, keystore, tls_port = renewable, renewable.authority, renewable.keystore, renewable.tls_port
    first = _served_certificate_serial(tls_port, authority.path)
    tls_settings = {"bootstrap.servers": f"127.0.0.1:{tls_port}", "security.protocol": "SSL",
                    "ssl.ca.location": str(authority.path), "acks": "all"}
    producer = Producer(tls_settings)
    producer.produce("renewal", b"before")
    assert producer.flush(30) == 0

    admin = AdminClient({k: v for k, v in tls_settings.items() if k != "acks"})

    def alter(location: str) -> None:
        entry = ConfigEntry("listener.name.tls.ssl.keystore.location", location,
                            incremental_operation=AlterConfigOpType.SET)
        for future in admin.incremental_alter_configs([ConfigResource("broker", "1",
                                                                      incremental_configs=[entry])]).values():
            future.result(30)

    renewed = authority.issue("node-renewed")
    keystore.write_bytes(renewed.keystore.read_bytes())  # the file renewed in place, as cert managers do
    alter(str(keystore))
    deadline = time.monotonic() + 30
    while _served_certificate_serial(tls_port, authority.path) == first and time.monotonic() < deadline:
        time.sleep(0.2)
    second = _served_certificate_serial(tls_port, authority.path)
    assert second != first
    producer.produce("renewal", b"after")  # the connection opened before the renewal goes on
    assert producer.flush(30) == 0

    alter(str(tmp_path / "missing.pem"))  # a keystore that does not load: the listener keeps its certificate
    deadline = time.monotonic() + 30
    while "keeps its certificate" not in node.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "keeps its certificate" in node.log_text()
    assert _served_certificate_serial(tls_port, authority.path) == second
