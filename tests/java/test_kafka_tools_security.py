"""Kafka 4.0's own tools and Java clients over Odradek's secured listeners: TLS with a client certificate,
SASL_SSL with PLAIN and SCRAM-SHA-512, configured as a Kafka user configures them (--command-config,
--producer.config, --consumer.config with Java's property names)."""

from pathlib import Path

import pytest

from tests.conftest import NodeProcess, free_port
from tests.reference_kafka import requires_reference
from tests.security.certificates import CertificateAuthority

pytestmark = requires_reference

PROTOCOLS = {"SASL": "SASL_PLAINTEXT", "SASLTLS": "SASL_SSL"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("java-secured")
    authority = CertificateAuthority(directory / "ca")
    node_keys = authority.issue("node")
    ports = {"MTLS": free_port(), "TLS": free_port(), "SASL": free_port(), "SASLTLS": free_port(),
             "ADMIN": free_port()}
    node = NodeProcess(directory / "data", port=ports["ADMIN"], settings={
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "MTLS:SSL,TLS:SSL,SASL:SASL_PLAINTEXT,SASLTLS:SASL_SSL,ADMIN:PLAINTEXT",
        "inter.broker.listener.name": "ADMIN",
        "ssl.keystore.location": str(node_keys.keystore), "ssl.truststore.location": str(authority.path),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasltls.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "group.initial.rebalance.delay.ms": "0",
    }).start()
    node.ports = ports
    node.authority = authority
    node.client_keys = authority.issue("java-client")
    node.directory = directory
    yield node
    node.stop()


def client_config(node, path: Path, listener: str, mechanism: str | None = None, username: str = "",
                  password: str = "") -> str:
    """A Java client properties file for one of the node's listeners; returns its path."""
    lines = ["ssl.truststore.type=PEM", f"ssl.truststore.location={node.authority.path}"]
    if listener == "MTLS":
        lines += ["security.protocol=SSL", "ssl.keystore.type=PEM",
                  f"ssl.keystore.location={node.client_keys.keystore}"]
    elif listener == "TLS":
        lines += ["security.protocol=SSL"]
    elif mechanism == "OAUTHBEARER":  # Kafka's own unsecured token for user `username`, for development
        lines += [f"security.protocol={PROTOCOLS[listener]}", "sasl.mechanism=OAUTHBEARER",
                  "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                  f'required unsecuredLoginStringClaim_sub="{username}";']
    else:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        lines += [f"security.protocol={PROTOCOLS[listener]}", f"sasl.mechanism={mechanism}",
                  f'sasl.jaas.config={module} required username="{username}" password="{password}";']
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def bootstrap(node, listener: str) -> tuple[str, str]:
    return ("--bootstrap-server", f"127.0.0.1:{node.ports[listener]}")


def test_kafka_configs_creates_a_scram_user_who_then_produces_and_consumes_with_the_console_tools(
        kafka_tools, secured):
    admin = client_config(secured, secured.directory / "admin.properties", "SASLTLS", "PLAIN", "admin", "admin-secret")
    created = kafka_tools.ok("kafka-configs", *bootstrap(secured, "SASLTLS"), "--command-config", admin, "--alter",
                             "--entity-type", "users", "--entity-name", "erin",
                             "--add-config", "SCRAM-SHA-512=[iterations=8192,password=erin-secret]")
    assert created.lines == ["Completed updating config for user erin."], created
    erin = client_config(secured, secured.directory / "erin.properties", "SASLTLS", "SCRAM-SHA-512", "erin",
                         "erin-secret")
    kafka_tools.ok("kafka-topics", *bootstrap(secured, "SASLTLS"), "--command-config", erin, "--create",
                   "--topic", "java-scram", "--partitions", "1", "--replication-factor", "1")
    kafka_tools.ok("kafka-console-producer", *bootstrap(secured, "SASLTLS"), "--producer.config", erin,
                   "--topic", "java-scram", input="one\ntwo\nthree\n")
    consumed = kafka_tools.ok("kafka-console-consumer", *bootstrap(secured, "SASLTLS"), "--consumer.config", erin,
                              "--topic", "java-scram", "--from-beginning", "--max-messages", "3")
    assert consumed.stdout.splitlines() == ["one", "two", "three"], consumed


def test_console_tools_over_mutual_tls_with_a_pem_keystore(kafka_tools, secured):
    config = client_config(secured, secured.directory / "mtls.properties", "MTLS")
    kafka_tools.ok("kafka-console-producer", *bootstrap(secured, "MTLS"), "--producer.config", config,
                   "--topic", "java-mtls", input="a\nb\n")
    consumed = kafka_tools.ok("kafka-console-consumer", *bootstrap(secured, "MTLS"), "--consumer.config", config,
                              "--topic", "java-mtls", "--from-beginning", "--max-messages", "2")
    assert consumed.stdout.splitlines() == ["a", "b"], consumed


def test_a_java_client_with_a_wrong_password_is_told_so(kafka_tools, secured):
    wrong = client_config(secured, secured.directory / "wrong.properties", "SASLTLS", "PLAIN", "admin", "guess")
    refused = kafka_tools.run("kafka-topics", *bootstrap(secured, "SASLTLS"), "--command-config", wrong, "--list")
    assert refused.returncode != 0, refused
    assert "SaslAuthenticationException: Authentication failed: Invalid username or password" in str(refused), refused


@pytest.mark.parametrize("listener, mechanism, username, password", [
    ("TLS", None, "", ""),
    ("SASL", "PLAIN", "admin", "admin-secret"),
    ("SASL", "SCRAM-SHA-256", "frank", "frank-secret"),
    ("SASL", "OAUTHBEARER", "grace", ""),
])
def test_console_tools_over_each_kind_of_listener(kafka_tools, secured, listener, mechanism, username, password):
    if mechanism == "SCRAM-SHA-256":
        admin = client_config(secured, secured.directory / "admin-plain.properties", "SASL", "PLAIN", "admin",
                              "admin-secret")
        kafka_tools.ok("kafka-configs", *bootstrap(secured, "SASL"), "--command-config", admin, "--alter",
                       "--entity-type", "users", "--entity-name", username,
                       "--add-config", f"SCRAM-SHA-256=[password={password}]")
    config = client_config(secured, secured.directory / f"{listener}-{mechanism}.properties", listener, mechanism,
                           username, password)
    topic = f"java-{listener.lower()}-{(mechanism or 'tls').lower()}"
    kafka_tools.ok("kafka-console-producer", *bootstrap(secured, listener), "--producer.config", config,
                   "--topic", topic, input="x\ny\n")
    consumed = kafka_tools.ok("kafka-console-consumer", *bootstrap(secured, listener), "--consumer.config", config,
                              "--topic", topic, "--from-beginning", "--max-messages", "2")
    assert consumed.stdout.splitlines() == ["x", "y"], consumed
