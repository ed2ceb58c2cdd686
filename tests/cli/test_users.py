"""SCRAM users from the command line: `odradek users list|add|remove` against a node with a SASL_PLAINTEXT
listener, where a confluent-kafka producer then logs in with the password given (and not with another);
and `odradek storage format --add-scram`, whose users can log in at the cluster's first start.

Parsing, the bootstrap file and the controller's use of it are unit tests; the rest runs
`python -m odradek` against real node processes.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import subprocess
import sys
import time
import types

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ScramMechanism

from odradek.cli import main as cli
from odradek.cli import users
from odradek.config import BrokerConfig, ConfigError
from odradek.controller import bootstrap
from odradek.controller.controller import Controller
from odradek.controller.metadata_image import MetadataImage
from tests.conftest import NodeProcess, free_port

LOGIN_TOPIC = "logins"

# ---------------------------------------------------------------------------------------------------
# Units: parsing and the pure parts


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_users_add_defaults_to_scram_sha_256_and_4096_iterations():
    args = parse("users", "add", "alice", "--password", "alice-secret")
    assert (args.name, args.password, args.password_file) == ("alice", "alice-secret", None)
    assert (args.mechanism, args.iterations) == ("SCRAM-SHA-256", 4096)
    assert args.bootstrap_server == "localhost:9092" and args.command_config is None
    args = parse("users", "add", "bob", "--password-file", "pw.txt", "--mechanism", "SCRAM-SHA-512",
                 "--iterations", "8192", "--bootstrap-server", "h:1", "--command-config", "c.properties")
    assert (args.password_file, args.mechanism, args.iterations) == ("pw.txt", "SCRAM-SHA-512", 8192)
    assert (args.bootstrap_server, args.command_config) == ("h:1", "c.properties")


def test_users_list_takes_names_and_output_and_remove_an_optional_mechanism():
    assert parse("users", "list").names == []
    args = parse("users", "list", "alice", "bob", "-o", "json")
    assert args.names == ["alice", "bob"] and args.output == "json"
    assert parse("users", "remove", "alice").mechanism is None
    assert parse("users", "remove", "alice", "--mechanism", "SCRAM-SHA-512").mechanism == "SCRAM-SHA-512"


@pytest.mark.parametrize("argv, message", [
    (["users", "add", "alice"], "error: one of the arguments --password --password-file is required"),
    (["users", "add", "alice", "--password", "a", "--password-file", "f"],
     "error: argument --password-file: not allowed with argument --password"),
    (["users", "add", "alice", "--password", "a", "--mechanism", "PLAIN"], "error: argument --mechanism: invalid choice"),
    (["users", "add", "alice", "--password", "a", "--iterations", "0"],
     "error: argument --iterations: expected a positive integer"),
    (["users", "remove"], "error: the following arguments are required: NAME"),
    (["users"], "error: the following arguments are required: ACTION"),
    (["storage", "format", "--cluster-id", "x", "--add-scram"], "error: argument --add-scram/-S: expected one argument"),
])
def test_usage_errors_are_one_error_line_and_exit_1(capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert len(err.splitlines()) == 1


def test_password_comes_from_the_flag_or_the_first_line_of_a_file_or_stdin(tmp_path, monkeypatch):
    path = tmp_path / "password"
    path.write_text("from file\r\nsecond line\n")
    assert users.read_password(argparse.Namespace(password="flag", password_file=None)) == "flag"
    assert users.read_password(argparse.Namespace(password=None, password_file=str(path))) == "from file"
    monkeypatch.setattr(sys, "stdin", io.StringIO("from stdin\n"))
    assert users.read_password(argparse.Namespace(password=None, password_file="-")) == "from stdin"
    with pytest.raises(cli.CliError, match="the password is empty"):
        users.read_password(argparse.Namespace(password="", password_file=None))
    with pytest.raises(cli.CliError, match="cannot read .*nope"):
        users.read_password(argparse.Namespace(password=None, password_file=str(tmp_path / "nope")))


def test_user_rows_are_sorted_by_user_then_mechanism_with_kafka_names():
    def info(mechanism, iterations):
        return types.SimpleNamespace(mechanism=mechanism, iterations=iterations)

    described = {
        "bob": types.SimpleNamespace(scram_credential_infos=[info(ScramMechanism.SCRAM_SHA_512, 8192),
                                                             info(ScramMechanism.SCRAM_SHA_256, 4096)]),
        "alice": types.SimpleNamespace(scram_credential_infos=[info(ScramMechanism.SCRAM_SHA_256, 4096)]),
    }
    assert users.user_rows(described) == [
        {"user": "alice", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]},
        {"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                                        {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]},
    ]


# ---------------------------------------------------------------------------------------------------
# Units: the bootstrap file and the controller's first activation


def scram_record(name: str, mechanism: int = 1) -> dict:
    return {"type": "UserScramCredentialRecord", "name": name, "mechanism": mechanism, "salt": "c2FsdA==",
            "stored_key": "c3RvcmVk", "server_key": "c2VydmVy", "iterations": 4096}


def test_bootstrap_records_round_trip_and_a_dir_without_the_file_has_none(tmp_path):
    assert bootstrap.read_records(str(tmp_path)) == []
    records = [scram_record("alice"), scram_record("alice", 2)]
    bootstrap.write_records(str(tmp_path), records)
    assert bootstrap.read_records(str(tmp_path)) == records
    bootstrap.write_records(str(tmp_path), [])
    assert bootstrap.read_records(str(tmp_path)) == []


def test_a_bootstrap_file_holds_only_credentials_and_a_damaged_one_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot hold 'TopicRecord'"):
        bootstrap.write_records(str(tmp_path), [{"type": "TopicRecord", "name": "t", "topic_id": "x"}])
    path = tmp_path / bootstrap.BOOTSTRAP_FILE
    path.write_text('{"records": [{"type": "ClusterRecord", "cluster_id": "x"}]}')
    with pytest.raises(ConfigError, match="cannot hold 'ClusterRecord'"):
        bootstrap.read_records(str(tmp_path))
    path.write_text('{"records": ')
    with pytest.raises(ConfigError, match="cannot read"):
        bootstrap.read_records(str(tmp_path))
    path.write_text("[]")
    with pytest.raises(ConfigError, match="not a bootstrap file"):
        bootstrap.read_records(str(tmp_path))


class AppliedQuorum:
    """Just enough of a metadata quorum: every proposal is committed and applied at once."""

    is_active = True

    def __init__(self, image: MetadataImage):
        self.image = image
        self.entries: list[list[dict]] = []

    async def propose(self, records: list[dict], timeout_s: float) -> int:
        self.entries.append(records)
        for record in json.loads(json.dumps(records)):
            self.image.apply(record, len(self.entries) - 1)
        return len(self.entries) - 1


def test_the_first_activation_of_a_new_cluster_commits_the_bootstrap_records_with_the_cluster_id(tmp_path):
    bootstrap.write_records(str(tmp_path), [scram_record("alice")])
    image = MetadataImage()
    quorum = AppliedQuorum(image)
    controller = Controller(BrokerConfig({"log.dirs": str(tmp_path)}), image, quorum)

    asyncio.run(controller.activate("cluster-x"))
    [first] = quorum.entries
    assert first[0] == {"type": "ClusterRecord", "cluster_id": "cluster-x"}
    assert first[1] == scram_record("alice")
    assert set(image.scram_credentials) == {("alice", 1)}

    # A later activation (a restart, another leader) finds the cluster named: the file is not read again,
    # so a credential removed since stays removed.
    image.apply({"type": "RemoveUserScramCredentialRecord", "name": "alice", "mechanism": 1})
    (tmp_path / bootstrap.BOOTSTRAP_FILE).write_text("damaged")
    asyncio.run(controller.activate("cluster-x"))
    assert len(quorum.entries) == 1 and image.scram_credentials == {}


# ---------------------------------------------------------------------------------------------------
# End to end helpers


def run_cli(*argv: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "odradek", *argv], capture_output=True, timeout=timeout,
                          input=None if input is None else input.encode())
    proc.stdout_text = proc.stdout.decode("utf-8", errors="replace")
    proc.stderr_text = proc.stderr.decode("utf-8", errors="replace")
    return proc


def odradek(node, *argv: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(*argv, "--bootstrap-server", node.bootstrap, input=input)
    assert "Traceback" not in proc.stderr_text, proc.stderr_text
    if check:
        assert proc.returncode == 0, f"odradek {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr_text}"
    return proc


def assert_error_line(proc: subprocess.CompletedProcess, starts_with: str) -> None:
    """Exit code 1 and exactly one `error: ...` line on stderr, never a traceback."""
    assert proc.returncode == 1, proc.stderr_text
    lines = proc.stderr_text.splitlines()
    assert len(lines) == 1, proc.stderr_text
    assert lines[0].startswith(starts_with), lines[0]


def listed(node, *names: str) -> dict[str, dict[str, int]]:
    """`users list -o json` as {user: {mechanism: iterations}}."""
    document = json.loads(odradek(node, "users", "list", *names, "--output", "json").stdout)
    return {row["user"]: {c["mechanism"]: c["iterations"] for c in row["credentials"]} for row in document["users"]}


def sasl_settings(plaintext_port: int, sasl_port: int, data_dir) -> dict[str, str]:
    """A lone node with a SCRAM listener for the logins and a PLAINTEXT one for the CLI."""
    return {
        "listeners": f"SASL://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{plaintext_port}",
        "listener.security.protocol.map": "SASL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "log.dirs": str(data_dir),
    }


def sasl_node(data_dir) -> NodeProcess:
    port, sasl_port = free_port(), free_port()
    node = NodeProcess(data_dir, port=port, settings=sasl_settings(port, sasl_port, data_dir))
    node.sasl_port = sasl_port
    return node


def logs_in(node, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """Whether a confluent-kafka producer on the SASL listener gets a record written (True) or is refused
    with an authentication error (False)."""
    errors: list[KafkaError] = []
    delivered: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{node.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "acks": "all", "message.timeout.ms": 20000, "reconnect.backoff.ms": 1000,
                         "error_cb": errors.append})
    producer.produce(LOGIN_TOPIC, b"logged in", on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + 25
    refused = []
    while not delivered and not refused and time.monotonic() < deadline:
        producer.poll(0.2)
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    producer.purge()
    producer.flush(1)
    if refused:
        assert f"invalid credentials with SASL mechanism {mechanism}" in refused[0].str(), refused[0].str()
        return False
    assert delivered == [None], f"neither delivered nor refused: {delivered} {errors[:3]}"
    return True


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    node = sasl_node(tmp_path_factory.mktemp("users") / "data").start()
    odradek(node, "topics", "create", LOGIN_TOPIC)
    yield node
    node.stop()


# ---------------------------------------------------------------------------------------------------
# End to end: `odradek users`


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_added_user_logs_in_with_its_password_and_not_with_another(secured, mechanism):
    user = f"alice-{mechanism[-3:]}"
    added = odradek(secured, "users", "add", user, "--password", "alice-secret", "--mechanism", mechanism)
    assert added.stdout_text == f"Set the {mechanism} credential of user '{user}' (4096 iterations).\n"
    assert logs_in(secured, user, "alice-secret", mechanism)
    assert not logs_in(secured, user, "not-the-password", mechanism)
    other = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-256"
    assert not logs_in(secured, user, "alice-secret", other)  # a credential is per mechanism


def test_adding_again_changes_the_password_and_the_iterations(secured, tmp_path):
    odradek(secured, "users", "add", "carol", "--password", "old-secret")
    password_file = tmp_path / "password"
    password_file.write_text("new-secret\n")
    odradek(secured, "users", "add", "carol", "--password-file", str(password_file), "--iterations", "8192")
    assert listed(secured, "carol") == {"carol": {"SCRAM-SHA-256": 8192}}
    assert logs_in(secured, "carol", "new-secret")
    assert not logs_in(secured, "carol", "old-secret")
    odradek(secured, "users", "add", "carol", "--password-file", "-", input="from-stdin\n")
    assert logs_in(secured, "carol", "from-stdin")


def test_list_shows_each_users_mechanisms_and_iterations(secured):
    odradek(secured, "users", "add", "dave", "--password", "d", "--mechanism", "SCRAM-SHA-512", "--iterations", "16384")
    odradek(secured, "users", "add", "dave", "--password", "d")
    odradek(secured, "users", "add", "erin", "--password", "e")
    assert listed(secured, "dave", "erin") == {"dave": {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 16384},
                                               "erin": {"SCRAM-SHA-256": 4096}}
    everyone = listed(secured)
    assert {"dave", "erin"} <= set(everyone) and everyone["dave"] == {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 16384}
    table = odradek(secured, "users", "list", "dave", "erin", "dave").stdout_text.splitlines()
    assert table[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert [line.split() for line in table[1:]] == [["dave", "SCRAM-SHA-256", "4096"], ["dave", "SCRAM-SHA-512", "16384"],
                                                    ["erin", "SCRAM-SHA-256", "4096"]]


def test_remove_one_mechanism_then_every_one_left(secured):
    odradek(secured, "users", "add", "frank", "--password", "f")
    odradek(secured, "users", "add", "frank", "--password", "f", "--mechanism", "SCRAM-SHA-512")
    removed = odradek(secured, "users", "remove", "frank", "--mechanism", "SCRAM-SHA-512")
    assert removed.stdout_text == "Removed the SCRAM-SHA-512 credential of user 'frank'.\n"
    assert listed(secured, "frank") == {"frank": {"SCRAM-SHA-256": 4096}}
    assert not logs_in(secured, "frank", "f", "SCRAM-SHA-512")
    assert logs_in(secured, "frank", "f", "SCRAM-SHA-256")

    odradek(secured, "users", "add", "frank", "--password", "f", "--mechanism", "SCRAM-SHA-512")
    removed = odradek(secured, "users", "remove", "frank")
    assert removed.stdout_text == ("Removed the SCRAM-SHA-256 credential of user 'frank'.\n"
                                   "Removed the SCRAM-SHA-512 credential of user 'frank'.\n")
    assert "frank" not in listed(secured)
    assert not logs_in(secured, "frank", "f", "SCRAM-SHA-256")


def test_refusals_of_the_node_are_one_error_line(secured):
    assert_error_line(odradek(secured, "users", "add", "gina", "--password", "g", "--iterations", "4095", check=False),
                      "error: cannot set the SCRAM-SHA-256 credential of user 'gina': Too few iterations")
    assert_error_line(odradek(secured, "users", "add", "gina", "--password", "g", "--iterations", "16385", check=False),
                      "error: cannot set the SCRAM-SHA-256 credential of user 'gina': Too many iterations")
    assert "gina" not in listed(secured)
    odradek(secured, "users", "add", "gina", "--password", "g")
    assert_error_line(odradek(secured, "users", "remove", "gina", "--mechanism", "SCRAM-SHA-512", check=False),
                      "error: cannot remove the SCRAM-SHA-512 credential of user 'gina': "
                      "Attempt to delete a user credential that does not exist")
    assert_error_line(odradek(secured, "users", "remove", "nobody", check=False),
                      "error: user 'nobody' has no SCRAM credentials")
    assert_error_line(odradek(secured, "users", "list", "gina", "nobody", "ghost", check=False),
                      "error: user 'nobody' has no SCRAM credentials; user 'ghost' has no SCRAM credentials")


def test_bad_input_is_one_error_line(secured, tmp_path):
    assert_error_line(odradek(secured, "users", "add", "", "--password", "x", check=False),
                      "error: cannot set the SCRAM-SHA-256 credential of user ''")
    assert_error_line(odradek(secured, "users", "add", "hank", "--password", "", check=False),
                      "error: the password is empty")
    assert_error_line(odradek(secured, "users", "add", "hank", "--password-file", str(tmp_path / "nope"), check=False),
                      "error: cannot read")
    assert_error_line(odradek(secured, "users", "list", "", check=False), "error: cannot describe users")


def test_an_unreachable_cluster_is_one_error_line():
    port = free_port()  # nothing listens there
    for argv in (["users", "list"], ["users", "add", "x", "--password", "p"], ["users", "remove", "x"]):
        proc = run_cli(*argv, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "1")
        assert_error_line(proc, f"error: cannot reach 127.0.0.1:{port}")


# ---------------------------------------------------------------------------------------------------
# End to end: `odradek storage format --add-scram`


def format_args(node: NodeProcess, cluster_id: str) -> list[str]:
    sets = [arg for key, value in node.settings.items() for arg in ("--set", f"{key}={value}")]
    return ["storage", "format", "--cluster-id", cluster_id, *sets]


def cluster_id() -> str:
    return run_cli("storage", "random-uuid").stdout_text.strip()


def test_users_of_a_node_formatted_with_add_scram_log_in_at_its_first_start(tmp_path):
    node = sasl_node(tmp_path / "data")
    formatted = run_cli(*format_args(node, cluster_id()),
                        "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]",
                        "-S", 'SCRAM-SHA-256=[name=bob,password="bob-secret"]')
    assert formatted.returncode == 0, formatted.stderr_text
    assert "Bootstrap SCRAM credentials: alice (SCRAM-SHA-512), bob (SCRAM-SHA-256)" in formatted.stdout_text
    assert "alice-secret" not in formatted.stdout_text + formatted.stderr_text
    node.start()
    try:
        odradek(node, "topics", "create", LOGIN_TOPIC)
        assert listed(node) == {"alice": {"SCRAM-SHA-512": 8192}, "bob": {"SCRAM-SHA-256": 4096}}
        assert logs_in(node, "alice", "alice-secret", "SCRAM-SHA-512")
        assert logs_in(node, "bob", "bob-secret")
        assert not logs_in(node, "alice", "bob-secret", "SCRAM-SHA-512")

        # The bootstrap records count once, for the new cluster: a removed user stays removed after a restart.
        odradek(node, "users", "remove", "bob")
        node.restart()
        assert listed(node) == {"alice": {"SCRAM-SHA-512": 8192}}
        assert logs_in(node, "alice", "alice-secret", "SCRAM-SHA-512")
    finally:
        node.stop()


def test_add_scram_on_a_formatted_dir_is_refused_like_formatting(tmp_path):
    node = sasl_node(tmp_path / "data")
    args = format_args(node, cluster_id())
    first = run_cli(*args, "-S", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert first.returncode == 0, first.stderr_text
    written = (node.data_dir / bootstrap.BOOTSTRAP_FILE).read_bytes()

    again = run_cli(*args, "-S", "SCRAM-SHA-256=[name=mallory,password=m]")
    assert_error_line(again, f"error: already formatted: {node.data_dir}")
    skipped = run_cli(*args, "--ignore-formatted", "-S", "SCRAM-SHA-256=[name=mallory,password=m]")
    assert skipped.returncode == 0, skipped.stderr_text
    assert skipped.stdout_text == "All of the log dirs are already formatted.\n"
    assert (node.data_dir / bootstrap.BOOTSTRAP_FILE).read_bytes() == written
    # As Kafka, the credentials are checked before the dirs, so a bad one is an error even then.
    assert_error_line(run_cli(*args, "-g", "-S", "SCRAM-SHA-256=[name=mallory]"),
                      "error: --add-scram SCRAM-SHA-256 for 'mallory': give exactly one of")


@pytest.mark.parametrize("argument, message", [
    ("SCRAM-SHA-1=[name=alice,password=hunter2]", "error: --add-scram: mechanism 'SCRAM-SHA-1' is not supported"),
    ("SCRAM-SHA-256=[name=alice,password=hunter2,iterations=1000]",
     "error: --add-scram SCRAM-SHA-256 for 'alice': 'iterations' must be between 4096 and 16384, not 1000"),
    ("SCRAM-SHA-256=[name=alice]", "error: --add-scram SCRAM-SHA-256 for 'alice': give exactly one of"),
    ("SCRAM-SHA-256=[password=hunter2]", "error: --add-scram SCRAM-SHA-256: 'name' (the user name) is required"),
    ("SCRAM-SHA-256=name=alice,password=hunter2", "error: --add-scram SCRAM-SHA-256: the settings must be enclosed"),
])
def test_a_bad_add_scram_is_one_error_line_and_formats_nothing(tmp_path, argument, message):
    node = sasl_node(tmp_path / "data")
    proc = run_cli(*format_args(node, cluster_id()), "--add-scram", argument)
    assert_error_line(proc, message)
    assert "hunter2" not in proc.stderr_text
    assert not node.data_dir.exists() or not any(node.data_dir.iterdir())
