"""Client quotas from the command line: `odradek quotas describe|alter`. Parsing, the entity text and the
translation of --command-config into TLS and SASL as units; then real `python -m odradek` runs against a node
(users, client ids, defaults, addresses, deletions, --validate-only, the node's refusals, unreachable clusters),
against a three-node cluster through a node that is not the controller, against a SASL_SSL listener, and one
check that Kafka's own kafka-configs.sh --describe reads the quotas the CLI set as the CLI prints them."""

from __future__ import annotations

import argparse
import json
import re
import socket
import ssl
import subprocess
import sys
import time

import pytest

from odradek.cli import main as cli
from odradek.cli import quotas
from odradek.cli.connection import client_security
from odradek.cli.main import CliError
from tests.conftest import NodeProcess, free_port
from tests.reference_kafka import requires_reference
from tests.security.certificates import CertificateAuthority

# ---------------------------------------------------------------------------------------------------
# Units: parsing and the pure parts


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_quotas_commands_take_entity_flags_and_the_common_options():
    args = parse("quotas", "describe")
    assert quotas.entity_of(args) == {} and not args.strict
    assert (args.output, args.bootstrap_server, args.timeout) == ("table", "localhost:9092", 10.0)
    args = parse("quotas", "describe", "--client-id-default", "--user", "alice", "--strict", "-o", "json",
                 "--command-config", "c.properties")
    assert quotas.entity_of(args) == {"user": "alice", "client-id": None}
    assert list(quotas.entity_of(args)) == ["user", "client-id"]  # Kafka's order, whatever the flags' order
    assert (args.strict, args.output, args.command_config) == (True, "json", "c.properties")
    args = parse("quotas", "alter", "--ip-default", "--add", "connection_creation_rate=10", "--validate-only")
    assert quotas.entity_of(args) == {"ip": None} and args.validate_only


def test_add_takes_repeated_or_comma_separated_pairs_and_delete_keys():
    args = parse("quotas", "alter", "--user", "a", "--add", "producer_byte_rate=1024,consumer_byte_rate=2e3",
                 "--add", "request_percentage=12.5", "--delete", "controller_mutation_rate")
    assert args.add == [[("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2000.0)],
                        [("request_percentage", 12.5)]]
    assert quotas.alteration_ops(args, quotas.entity_of(args)) == [
        {"key": "producer_byte_rate", "value": 1024.0, "remove": False},
        {"key": "consumer_byte_rate", "value": 2000.0, "remove": False},
        {"key": "request_percentage", "value": 12.5, "remove": False},
        {"key": "controller_mutation_rate", "value": 0.0, "remove": True}]


@pytest.mark.parametrize("argv, message", [
    (["quotas", "describe", "--user", "a", "--user-default"],
     "error: argument --user-default: not allowed with argument --user"),
    (["quotas", "alter", "--user", "a", "--add", "producer_byte_rate"],
     "error: argument --add: expected KEY=VALUE, got 'producer_byte_rate'"),
    (["quotas", "alter", "--user", "a", "--add", "producer_byte_rate=fast"],
     "error: argument --add: the value of producer_byte_rate must be a number, got 'fast'"),
    (["quotas", "alter", "--user", "a", "--add", "producer_byte_rate=nan"],
     "error: argument --add: the value of producer_byte_rate must be a number, got 'nan'"),
    (["quotas", "alter", "--user", "a", "--delete", "a,,b"], "error: argument --delete: expected KEY[,KEY...]"),
    (["quotas"], "error: the following arguments are required: ACTION"),
])
def test_usage_errors_are_one_error_line_and_exit_1(capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--user", "a"], "give --add KEY=VALUE or --delete KEY"),
    (["--user", "a", "--add", "producer_byte_rate=1", "--delete", "producer_byte_rate"],
     "producer_byte_rate: both added and deleted"),
    (["--user", "a", "--delete", "producer_byte_rat"], "cannot delete producer_byte_rat: the quotas of users"),
    (["--ip", "10.0.0.1", "--delete", "producer_byte_rate"], "cannot delete producer_byte_rate: the quotas of addr"),
])
def test_alterations_kafka_would_not_send_are_refused_before_connecting(argv, message):
    args = parse("quotas", "alter", *argv)
    with pytest.raises(CliError, match=re.escape(message)):
        quotas.alteration_ops(args, quotas.entity_of(args))


def test_entities_are_written_as_kafka_writes_them_and_rows_sorted_by_them():
    def entry(entity: list[tuple], **values) -> dict:
        return {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in values.items()]}

    rows = quotas.quota_rows([
        entry([("ip", "10.0.0.1")], connection_creation_rate=10.0),
        entry([("client-id", None)], request_percentage=12.5),
        entry([("client-id", "app"), ("user", "bob")], producer_byte_rate=4096.0, consumer_byte_rate=8192.0),
        entry([("user", "alice")], producer_byte_rate=1024.0),
        entry([("user", None)], producer_byte_rate=10485760.0),
    ])
    assert [(quotas.entity_text(entity), list(values)) for entity, values in rows] == [
        ("user=<default>", ["producer_byte_rate"]),
        ("user=alice", ["producer_byte_rate"]),
        ("user=bob, client-id=app", ["consumer_byte_rate", "producer_byte_rate"]),
        ("client-id=<default>", ["request_percentage"]),
        ("ip=10.0.0.1", ["connection_creation_rate"]),
    ]
    assert [quotas.value_text(v) for v in (1024.0, 12.5, 10485760.0, 0.001)] == ["1024", "12.5", "10485760", "0.001"]


# ---------------------------------------------------------------------------------------------------
# Units: --command-config to TLS and SASL


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    authority = CertificateAuthority(tmp_path_factory.mktemp("quotas-ca"))
    authority.node = authority.issue("node")
    authority.client = authority.issue("client", key_password="client-key-secret")
    return authority


def test_plaintext_needs_no_security_and_tls_checks_the_server_and_its_name(authority):
    assert client_security({}) is None
    assert client_security({"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN"}) is None
    security = client_security({"security.protocol": "ssl", "ssl.ca.location": str(authority.path)})
    assert security.sasl_login is None
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED and security.ssl_context.check_hostname
    security = client_security({"security.protocol": "SSL", "ssl.ca.location": str(authority.path),
                                "ssl.endpoint.identification.algorithm": "none",
                                "ssl.certificate.location": str(authority.client.certificate),
                                "ssl.key.location": str(authority.client.key), "ssl.key.password": "client-key-secret"})
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED and not security.ssl_context.check_hostname
    security = client_security({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})
    assert security.ssl_context.verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_logs_in_with_the_mechanism_and_the_credentials_given(authority, mechanism):
    security = client_security({"security.protocol": "SASL_SSL", "ssl.ca.location": str(authority.path),
                                "sasl.mechanism": mechanism.lower(), "sasl.username": "ops", "sasl.password": "pw"})
    assert security.sasl_mechanism == mechanism and security.ssl_context is not None
    first = security.sasl_login().first()
    assert first == b"\0ops\0pw" if mechanism == "PLAIN" else first.startswith(b"n,,n=ops,r=")
    security = client_security({"security.protocol": "sasl_plaintext", "sasl.mechanisms": mechanism,
                                "sasl.username": "ops", "sasl.password": "pw"})
    assert security.ssl_context is None and security.sasl_mechanism == mechanism


@pytest.mark.parametrize("properties, message", [
    ({"security.protocol": "tls"}, "security.protocol=tls (expected plaintext, ssl, sasl_plaintext, sasl_ssl)"),
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism=GSSAPI (librdkafka default)"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism=OAUTHBEARER"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "ops"},
     "sasl.mechanism=PLAIN needs sasl.username and sasl.password"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "cannot load the CA certificates"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
     "ssl.endpoint.identification.algorithm=dns"),
])
def test_settings_the_cli_cannot_honour_are_errors(properties, message):
    with pytest.raises(CliError, match=f"^invalid client configuration: .*{re.escape(message)}"):
        client_security(properties)


def test_a_client_key_without_its_password_is_an_error(authority):
    with pytest.raises(CliError, match="cannot load ssl.certificate.location / ssl.key.location"):
        client_security({"security.protocol": "SSL", "ssl.certificate.location": str(authority.client.certificate),
                         "ssl.key.location": str(authority.client.key), "ssl.key.password": "wrong"})


# ---------------------------------------------------------------------------------------------------
# End to end


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "odradek", *argv], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def odradek(bootstrap: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(*argv, "--bootstrap-server", bootstrap)
    if check:
        assert proc.returncode == 0, f"odradek {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def assert_error_line(proc: subprocess.CompletedProcess, expected: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith(expected) and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


def described(bootstrap: str, *argv: str) -> dict:
    """`quotas describe -o json` as {entity text: {key: value}}."""
    document = json.loads(odradek(bootstrap, "quotas", "describe", *argv, "-o", "json").stdout)
    return {quotas.entity_text(q["entity"]): q["values"] for q in document["quotas"]}


@pytest.fixture(scope="module")
def quota_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("quotas-cli") / "data").start()
    yield node
    node.stop()


def test_alter_then_describe_users_client_ids_defaults_and_addresses(quota_node):
    bs = quota_node.bootstrap
    assert odradek(bs, "quotas", "alter", "--user", "alice", "--add", "producer_byte_rate=1048576",
                   "--add", "consumer_byte_rate=2097152").stdout == (
        "Altered the quotas of user=alice: set producer_byte_rate=1048576, consumer_byte_rate=2097152.\n")
    assert odradek(bs, "quotas", "alter", "--client-id", "reporting", "--user", "alice", "--add",
                   "request_percentage=12.5").stdout == (
        "Altered the quotas of user=alice, client-id=reporting: set request_percentage=12.5.\n")
    odradek(bs, "quotas", "alter", "--user-default", "--client-id-default", "--add", "controller_mutation_rate=2")
    odradek(bs, "quotas", "alter", "--client-id-default", "--add", "producer_byte_rate=1000")
    odradek(bs, "quotas", "alter", "--ip", "192.0.2.7", "--add", "connection_creation_rate=20")
    odradek(bs, "quotas", "alter", "--ip-default", "--add", "connection_creation_rate=100")

    assert odradek(bs, "quotas", "describe").stdout.splitlines() == [
        "ENTITY                               KEY                       VALUE",
        "user=<default>, client-id=<default>  controller_mutation_rate  2",
        "user=alice                           consumer_byte_rate        2097152",
        "user=alice                           producer_byte_rate        1048576",
        "user=alice, client-id=reporting      request_percentage        12.5",
        "client-id=<default>                  producer_byte_rate        1000",
        "ip=<default>                         connection_creation_rate  100",
        "ip=192.0.2.7                         connection_creation_rate  20",
    ]
    assert json.loads(odradek(bs, "quotas", "describe", "--user", "alice", "-o", "json").stdout) == {"quotas": [
        {"entity": {"user": "alice"}, "values": {"consumer_byte_rate": 2097152, "producer_byte_rate": 1048576}},
        {"entity": {"user": "alice", "client-id": "reporting"}, "values": {"request_percentage": 12.5}},
    ]}
    assert described(bs, "--user", "alice", "--strict") == {
        "user=alice": {"consumer_byte_rate": 2097152, "producer_byte_rate": 1048576}}
    assert described(bs, "--client-id-default") == {
        "user=<default>, client-id=<default>": {"controller_mutation_rate": 2},
        "client-id=<default>": {"producer_byte_rate": 1000}}
    assert described(bs, "--client-id-default", "--user-default", "--strict") == {
        "user=<default>, client-id=<default>": {"controller_mutation_rate": 2}}
    assert described(bs, "--ip", "192.0.2.7") == {"ip=192.0.2.7": {"connection_creation_rate": 20}}
    assert described(bs, "--user", "nobody") == {}
    assert odradek(bs, "quotas", "describe", "--user", "nobody").stdout == ""


def test_delete_removes_keys_and_an_entity_without_keys_is_gone(quota_node):
    bs = quota_node.bootstrap
    odradek(bs, "quotas", "alter", "--user", "dora", "--add", "producer_byte_rate=100,consumer_byte_rate=200")
    assert odradek(bs, "quotas", "alter", "--user", "dora", "--delete", "producer_byte_rate", "--add",
                   "consumer_byte_rate=300").stdout == (
        "Altered the quotas of user=dora: set consumer_byte_rate=300; deleted producer_byte_rate.\n")
    assert described(bs, "--user", "dora") == {"user=dora": {"consumer_byte_rate": 300}}
    odradek(bs, "quotas", "alter", "--user", "dora", "--delete", "consumer_byte_rate")
    assert described(bs, "--user", "dora") == {}
    # Deleting a quota that is not set changes nothing, as in Kafka.
    odradek(bs, "quotas", "alter", "--user", "dora", "--delete", "consumer_byte_rate")


def test_validate_only_checks_with_the_node_and_changes_nothing(quota_node):
    bs = quota_node.bootstrap
    assert odradek(bs, "quotas", "alter", "--user", "erin", "--add", "producer_byte_rate=100",
                   "--validate-only").stdout == (
        "Validated, not altered (--validate-only), the quotas of user=erin: set producer_byte_rate=100.\n")
    assert described(bs, "--user", "erin") == {}
    refused = odradek(bs, "quotas", "alter", "--user", "erin", "--add", "producer_byte_rate=1.5", "--validate-only",
                      check=False)
    assert_error_line(refused, "error: cannot alter the quotas of user=erin: "
                               "producer_byte_rate cannot be a fractional value\n")


@pytest.mark.parametrize("argv, message", [
    (["--user", "carol", "--add", "producer_byte_rate=1.5"], "user=carol: producer_byte_rate cannot be a fractional value"),
    (["--user", "carol", "--add", "no_such_quota=1"], "user=carol: Invalid configuration key no_such_quota"),
    (["--user", "carol", "--add", "request_percentage=0"], "user=carol: Quota request_percentage must be greater than 0"),
    (["--ip", "192.0.2.8", "--add", "producer_byte_rate=10"], "ip=192.0.2.8: Invalid configuration key producer_byte_rate"),
    (["--ip", "no such host", "--add", "connection_creation_rate=10"],
     "ip=no such host: no such host is not a valid IP or resolvable host"),
    (["--user", "carol", "--ip", "192.0.2.8", "--add", "connection_creation_rate=10"],
     "user=carol, ip=192.0.2.8: Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    (["--user", "", "--add", "producer_byte_rate=10"], "user=: Empty user not supported"),
])
def test_the_nodes_refusals_are_one_error_line_with_kafkas_message(quota_node, argv, message):
    assert_error_line(odradek(quota_node.bootstrap, "quotas", "alter", *argv, check=False),
                      f"error: cannot alter the quotas of {message}\n")
    assert described(quota_node.bootstrap, "--user", "carol") == {}


def test_bad_input_is_refused_before_anything_is_sent(quota_node):
    bs = quota_node.bootstrap
    assert_error_line(odradek(bs, "quotas", "alter", "--user", "carol", "--add", "producer_byte_rate=lots",
                              check=False),
                      "error: argument --add: the value of producer_byte_rate must be a number, got 'lots'")
    assert_error_line(odradek(bs, "quotas", "alter", "--add", "producer_byte_rate=1", check=False),
                      "error: give the entity: --user, --client-id, --ip or their -default\n")
    assert_error_line(odradek(bs, "quotas", "describe", "--user", "carol", "--ip", "192.0.2.8", check=False),
                      "error: cannot describe quotas: Invalid entity filter component combination. IP filter component "
                      "should not be used with user or clientId filter component\n")


def test_an_unreachable_cluster_is_one_error_line():
    port = free_port()  # nothing listens there
    for argv in (["quotas", "describe"], ["quotas", "alter", "--user", "a", "--add", "producer_byte_rate=1"]):
        assert_error_line(run_cli(*argv, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "1"),
                          f"error: cannot reach 127.0.0.1:{port} (no answer within 1s)\n")
    with socket.socket() as silent:  # accepts connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        # the CLI gives up by its own timeout (the message says so) instead of waiting for an answer
        assert_error_line(run_cli("quotas", "describe", "--bootstrap-server", address, "--timeout", "1"),
                          f"error: cannot reach {address} (no answer within 1s)\n")


def test_the_next_bootstrap_server_is_tried_when_the_first_does_not_answer(quota_node):
    bootstrap = f"127.0.0.1:{free_port()},{quota_node.bootstrap}"
    odradek(bootstrap, "quotas", "alter", "--user", "fern", "--add", "producer_byte_rate=64")
    assert described(bootstrap, "--user", "fern") == {"user=fern": {"producer_byte_rate": 64}}


def test_alter_through_any_node_of_a_cluster_is_described_by_every_node(cluster_factory):
    cluster = cluster_factory(3)
    for node in cluster.brokers:  # each one takes the alteration, whichever the active controller is
        odradek(node.bootstrap, "quotas", "alter", "--user", f"via-{node.port}", "--add", "producer_byte_rate=1024")
    expected = {f"user=via-{node.port}": {"producer_byte_rate": 1024} for node in cluster.brokers}
    for node in cluster.brokers:
        deadline = time.monotonic() + 15
        while (seen := described(node.bootstrap)) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert seen == expected, node.bootstrap


# ---------------------------------------------------------------------------------------------------
# End to end: a SASL_SSL listener

SCRAM_USER, SCRAM_PASSWORD = "ops", "ops-secret"
PLAIN_USERS = {"admin": "admin-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory, authority):
    """A node with a SASL_SSL listener (PLAIN and SCRAM) and a PLAINTEXT one; a SCRAM user added with the CLI."""
    directory = tmp_path_factory.mktemp("quotas-secured")
    node_keys = authority.issue("secured-node", key_password="node-key-secret")
    ports = {"SECURE": free_port(), "ADMIN": free_port()}
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items()) + ";")
    node = NodeProcess(directory / "data", port=ports["ADMIN"], settings={
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "SECURE:SASL_SSL,ADMIN:PLAINTEXT",
        "inter.broker.listener.name": "ADMIN",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(node_keys.keystore),
        "ssl.key.password": "node-key-secret",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.secure.plain.sasl.jaas.config": jaas,
    }).start()
    odradek(node.bootstrap, "users", "add", SCRAM_USER, "--password", SCRAM_PASSWORD, "--mechanism", "SCRAM-SHA-512")
    node.secure_bootstrap = f"127.0.0.1:{ports['SECURE']}"
    node.ca = authority.path
    yield node
    node.stop()


def command_config(tmp_path, name: str, **properties: str) -> str:
    path = tmp_path / f"{name}.properties"
    path.write_text("# written by test_quotas_cli\n" + "".join(f"{k}={v}\n" for k, v in properties.items()))
    return str(path)


def test_quotas_over_sasl_ssl_with_scram_and_plain(secured, tmp_path):
    scram = command_config(tmp_path, "scram", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.ca), "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD})
    plain = command_config(tmp_path, "plain", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.ca), "sasl.mechanism": "PLAIN",
        "sasl.username": "admin", "sasl.password": PLAIN_USERS["admin"], "client.id": "quota-admin"})
    bs = secured.secure_bootstrap
    odradek(bs, "quotas", "alter", "--user", SCRAM_USER, "--client-id-default", "--add", "producer_byte_rate=4096",
            "--command-config", scram)
    odradek(bs, "quotas", "alter", "--user", "admin", "--add", "request_percentage=50", "--command-config", plain)
    expected = {f"user={SCRAM_USER}, client-id=<default>": {"producer_byte_rate": 4096},
                "user=admin": {"request_percentage": 50}}
    assert described(bs, "--command-config", plain) == expected
    assert described(bs, "--command-config", scram) == expected
    assert described(secured.bootstrap) == expected  # the same quotas, seen from the plaintext listener


def test_refused_logins_and_untrusted_nodes_are_one_error_line(secured, tmp_path, authority):
    bs = secured.secure_bootstrap
    wrong = command_config(tmp_path, "wrong", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.ca), "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER, "sasl.password": "not-the-password"})
    assert_error_line(odradek(bs, "quotas", "describe", "--command-config", wrong, check=False),
                      f"error: authentication to {bs} failed: ")
    stranger = CertificateAuthority(tmp_path / "other-ca", "Other CA")
    untrusted = command_config(tmp_path, "untrusted", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(stranger.path), "sasl.mechanism": "PLAIN",
        "sasl.username": "admin", "sasl.password": PLAIN_USERS["admin"]})
    refused = odradek(bs, "quotas", "describe", "--command-config", untrusted, "--timeout", "2", check=False)
    assert_error_line(refused, f"error: cannot reach {bs}: TLS: ")
    assert "certificate" in refused.stderr
    no_mechanism = command_config(tmp_path, "oauth", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})
    assert_error_line(odradek(bs, "quotas", "describe", "--command-config", no_mechanism, check=False),
                      "error: invalid client configuration: sasl.mechanism=OAUTHBEARER")


# ---------------------------------------------------------------------------------------------------
# Kafka's kafka-configs.sh reads what the CLI set


def kafka_entity_text(entity: dict) -> str:
    """How kafka-configs --describe names an entity: user-principal 'alice', the default client-id."""
    words = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    return ", ".join(f"{words[t]} '{name}'" if name is not None else f"the default {words[t]}"
                     for t, name in entity.items())


@pytest.fixture(scope="module")
def kafka_tools(tmp_path_factory):
    from tests.java.tool_shell import KafkaTools

    tools = KafkaTools(tmp_path_factory.mktemp("quotas-kafka-tools"))
    yield tools
    tools.close()


@requires_reference
def test_kafka_configs_describes_the_quotas_the_cli_set_as_the_cli_does(quota_node, kafka_tools):
    bs = quota_node.bootstrap
    odradek(bs, "quotas", "alter", "--user", "kafka-alice", "--add", "producer_byte_rate=10485760,request_percentage=12.5")
    odradek(bs, "quotas", "alter", "--user", "kafka-alice", "--client-id", "kafka-app", "--add", "consumer_byte_rate=8192")
    odradek(bs, "quotas", "alter", "--user-default", "--client-id-default", "--add", "controller_mutation_rate=2")
    odradek(bs, "quotas", "alter", "--ip", "192.0.2.99", "--add", "connection_creation_rate=7")
    ours = json.loads(odradek(bs, "quotas", "describe", "-o", "json").stdout)["quotas"]
    ours = {kafka_entity_text(q["entity"]): q["values"] for q in ours}
    theirs = {}
    # kafka-configs filters strictly, by entity type; with no name, any name of the type (defaults included).
    for entity_args in (["--entity-type", "users"], ["--entity-type", "users", "--entity-type", "clients"],
                        ["--entity-type", "clients"], ["--entity-type", "ips"]):
        result = kafka_tools.ok("kafka-configs", "--bootstrap-server", bs, "--describe", *entity_args)
        for line in result.lines:
            match = re.fullmatch(r"Quota configs for (.+) are (.+)", line)
            assert match, result
            theirs[match.group(1)] = {key: float(value) for key, value in
                                      (item.split("=") for item in match.group(2).split(", "))}
    assert theirs == ours
    assert theirs["user-principal 'kafka-alice'"] == {"producer_byte_rate": 10485760, "request_percentage": 12.5}
    assert theirs["the default user-principal, the default client-id"] == {"controller_mutation_rate": 2}
