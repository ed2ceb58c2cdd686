"""The `odradek` command: argument parsing and output units, then real `python -m odradek` runs against a node."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import types
from datetime import UTC, datetime

import pytest

from odradek.cli import main as cli
from odradek.cli.output import headers_bytes, record_json, record_line, table
from odradek.cli.produce import LineError, LineReader
from odradek.sql.partitioning import partition_for

# ---------------------------------------------------------------------------------------------------
# Units: parsing


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_client_commands_default_to_localhost_9092_and_ten_seconds():
    args = parse("topics", "list")
    assert args.bootstrap_server == "localhost:9092"
    assert args.timeout == 10.0
    assert args.output == "table"
    assert args.command_config is None


def test_topics_create_collects_repeated_config_pairs_keeping_equals_in_values():
    args = parse("topics", "create", "orders", "--partitions", "3", "--replication-factor", "1",
                 "--config", "retention.ms=1000", "--config", "x=a=b", "--if-not-exists")
    assert (args.name, args.partitions, args.replication_factor) == ("orders", 3, 1)
    assert args.config == [("retention.ms", "1000"), ("x", "a=b")]
    assert args.if_not_exists


def test_topics_alter_takes_partitions_configs_and_deletions():
    args = parse("topics", "alter", "t", "--partitions", "6", "--config", "a=1", "--delete-config", "b",
                 "--delete-config", "c")
    assert args.partitions == 6 and args.config == [("a", "1")] and args.delete_config == ["b", "c"]


def test_client_options_may_follow_positionals():
    args = parse("topics", "delete", "a", "b", "--if-exists", "--bootstrap-server", "h:1", "--timeout", "2.5")
    assert args.names == ["a", "b"] and args.if_exists
    assert args.bootstrap_server == "h:1" and args.timeout == 2.5


def test_produce_flags():
    args = parse("produce", "t", "--key-separator", "\\t", "--header", "a=1", "--partition", "2",
                 "--acks", "1", "--compression", "zstd", "--property", "parse.headers=true")
    assert args.key_separator == "\t"
    assert args.header == [("a", "1")] and args.partition == 2
    assert args.acks == "1" and args.compression == "zstd"
    assert args.property == [("parse.headers", "true")]


def test_consume_flags():
    args = parse("consume", "t", "--offset", "5", "--partition", "0", "--max-messages", "3",
                 "--timeout-ms", "200", "--format", "json", "--isolation-level", "read_committed")
    assert (args.offset, args.partition, args.max_messages, args.timeout_ms) == (5, 0, 3, 200)
    assert args.format == "json" and args.isolation_level == "read_committed"
    assert parse("consume", "t", "--offset", "earliest").offset == "earliest"


def test_consume_start_positions_are_mutually_exclusive(capsys):
    assert cli.main(["consume", "t", "--from-beginning", "--offset", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: argument --offset: not allowed with argument --from-beginning")
    assert len(err.splitlines()) == 1


def test_from_timestamp_accepts_epoch_millis_and_iso8601():
    assert cli.timestamp_ms("1700000000123") == 1700000000123
    assert cli.timestamp_ms("2024-05-01T12:00:00Z") == int(datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000)
    assert cli.timestamp_ms("2024-05-01T14:00:00.250+02:00") == int(
        datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000) + 250
    naive = datetime(2024, 5, 1, 12, 0, 0)
    assert cli.timestamp_ms("2024-05-01T12:00:00") == int(naive.astimezone().timestamp() * 1000)
    with pytest.raises(argparse.ArgumentTypeError):
        cli.timestamp_ms("yesterday")


@pytest.mark.parametrize("argv, message", [
    (["topics", "create", "t", "--config", "retention.ms"], "error: argument --config: expected key=value"),
    (["topics", "create", "t", "--partitions", "0"], "error: argument --partitions: expected a positive integer"),
    (["topics", "create"], "error: the following arguments are required: NAME"),
    (["topics"], "error: the following arguments are required: ACTION"),
    (["consume", "t", "--format", "xml"], "error: argument --format: invalid choice: 'xml'"),
    (["produce", "t", "--acks", "2"], "error: argument --acks: invalid choice: '2'"),
])
def test_usage_errors_are_one_error_line_and_exit_1(capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert len(err.splitlines()) == 1


def test_help_exits_0(capsys):
    assert cli.main(["topics", "create", "--help"]) == 0
    assert "--if-not-exists" in capsys.readouterr().out


def test_server_dispatches_to_broker_node_run_server(monkeypatch):
    calls = []
    fake = types.ModuleType("odradek.broker.node")
    fake.run_server = lambda config_file, overrides: calls.append((config_file, overrides)) or 7
    monkeypatch.setitem(sys.modules, "odradek.broker.node", fake)
    assert cli.main(["server", "--config", "s.properties", "--set", "a=1", "--set", "b=2"]) == 7
    assert calls == [("s.properties", ["a=1", "b=2"])]


def test_client_commands_do_not_import_broker_code():
    code = ("import sys; from odradek.cli.main import build_parser; build_parser(); "
            "import odradek.cli.topics, odradek.cli.produce, odradek.cli.consume, odradek.cli.cluster; "
            "print(any(m.startswith('odradek.broker') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---------------------------------------------------------------------------------------------------
# Units: client configuration


def client_args(**overrides) -> argparse.Namespace:
    args = parse("topics", "list")
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def test_command_config_file_is_read_as_properties(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# comment\n! also a comment\n\nclient.id = from-file\nsasl.password=a=b\n")
    assert cli.read_properties(str(path)) == {"client.id": "from-file", "sasl.password": "a=b"}


def test_command_config_file_errors_name_the_line(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("client.id=x\nnonsense\n")
    with pytest.raises(cli.CliError, match=r"client.properties:2: expected key=value"):
        cli.read_properties(str(path))
    with pytest.raises(cli.CliError, match="cannot read"):
        cli.read_properties(str(tmp_path / "missing"))


def test_client_config_precedence_defaults_then_file_then_flags(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("acks=1\nlinger.ms=7\n")
    args = client_args(command_config=str(path), bootstrap_server="h:9")
    config = cli.client_config(args, {"acks": "all", "linger.ms": 5, "retries": 3}, {"linger.ms": 9})
    assert config["bootstrap.servers"] == "h:9"
    assert (config["acks"], config["linger.ms"], config["retries"]) == ("1", 9, 3)


def test_client_config_silences_librdkafka_unless_verbose():
    assert cli.client_config(client_args())["log_level"] == 0
    verbose = cli.client_config(client_args(verbose=True))
    assert "log_level" not in verbose and verbose["logger"].name == "odradek.cli.librdkafka"


# ---------------------------------------------------------------------------------------------------
# Units: console producer line parsing


def reader(*argv: str) -> LineReader:
    return LineReader.from_args(parse("produce", "t", *argv))


def test_lines_are_values_by_default():
    assert reader().parse(b"a:b\tc") == ([], None, b"a:b\tc")


def test_key_separator_splits_at_the_first_occurrence():
    assert reader("--key-separator", ":").parse(b"k:v:w") == ([], b"k", b"v:w")
    assert reader("--key-separator", "::").parse(b"k::") == ([], b"k", b"")


def test_line_without_key_separator_is_an_error_unless_ignored():
    with pytest.raises(LineError, match="no key separator ':'"):
        reader("--key-separator", ":").parse(b"novalue")
    ignoring = reader("--key-separator", ":", "--property", "ignore.error=true")
    assert ignoring.parse(b"novalue") == ([], None, b"novalue")


def test_parse_headers_like_kafka_console_producer():
    r = reader("--property", "parse.headers=true", "--property", "parse.key=true")
    assert r.parse(b"h1:a,h2:b:c\tkey\tvalue") == ([("h1", b"a"), ("h2", b"b:c")], b"key", b"value")
    assert r.parse(b"\tkey\tvalue") == ([], b"key", b"value")
    with pytest.raises(LineError, match="no header key separator"):
        r.parse(b"h1\tk\tv")


def test_static_headers_come_first_and_null_marker_makes_nulls():
    r = reader("--header", "src=cli", "--key-separator", "=", "--property", "null.marker=NULL",
               "--property", "parse.headers=true", "--property", "headers.delimiter=|")
    assert r.parse(b"h:NULL|NULL=NULL") == ([("src", b"cli"), ("h", None)], None, None)
    assert r.parse(b"h:x|k=NULLv") == ([("src", b"cli"), ("h", b"x")], b"k", b"NULLv")


def test_unknown_reader_property_is_rejected():
    with pytest.raises(cli.CliError, match="unknown --property 'parse.keys'"):
        reader("--property", "parse.keys=true")
    with pytest.raises(cli.CliError, match="parse.key must be true or false"):
        reader("--property", "parse.key=yes")


# ---------------------------------------------------------------------------------------------------
# Units: output


def test_table_aligns_columns_and_renders_missing_values_as_dash():
    assert table(["A", "LONGER"], [(1, [1, 2]), ("xyz", None), ("q", [])]).splitlines() == [
        "A    LONGER",
        "1    1,2",
        "xyz  -",
        "q    -",
    ]


def test_record_json_has_stable_keys_and_replaces_bad_utf8():
    line = record_json("t", 0, 5, 1700000000000, 1, b"k\xff", None, [("h", b"v"), ("n", None)])
    assert "\n" not in line
    doc = json.loads(line)
    assert list(doc) == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    assert doc == {"topic": "t", "partition": 0, "offset": 5, "timestamp": 1700000000000,
                   "timestamp_type": "CreateTime", "key": "k\ufffd", "value": None,
                   "headers": [{"key": "h", "value": "v"}, {"key": "n", "value": None}]}


def test_record_line_prints_headers_key_value_tab_separated():
    assert record_line(b"k", b"v", None, False, False) == b"v"
    assert record_line(None, b"v", None, True, False) == b"null\tv"
    assert record_line(b"k", None, [("a", b"1"), ("b", None)], True, True) == b"a:1,b:null\tk\tnull"
    assert headers_bytes([]) == b"NO_HEADERS"


# ---------------------------------------------------------------------------------------------------
# End to end: `python -m odradek ...` subprocesses


def run_cli(*argv: str, input: str | bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run([sys.executable, "-m", "odradek", *argv], input=data, capture_output=True,
                          timeout=timeout)
    proc.stdout_text = proc.stdout.decode("utf-8", errors="replace")
    proc.stderr_text = proc.stderr.decode("utf-8", errors="replace")
    return proc


def odradek(node, *argv: str, input: str | bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(*argv, "--bootstrap-server", node.bootstrap, input=input)
    if check:
        assert proc.returncode == 0, f"odradek {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr_text}"
        assert "Traceback" not in proc.stderr_text
    return proc


def assert_error_line(proc: subprocess.CompletedProcess, starts_with: str) -> None:
    """Exit code 1 and exactly one `error: ...` line on stderr, never a traceback."""
    assert proc.returncode == 1, proc.stderr_text
    lines = proc.stderr_text.splitlines()
    assert len(lines) == 1, proc.stderr_text
    assert lines[0].startswith(starts_with), lines[0]


def describe(node, topic: str) -> dict:
    doc = json.loads(odradek(node, "topics", "describe", topic, "--output", "json").stdout)
    [described] = doc["topics"]
    return described


def consume(node, topic: str, *argv: str) -> subprocess.CompletedProcess:
    return odradek(node, "consume", topic, "--timeout-ms", "5000", *argv)


def test_unreachable_server_is_one_error_line_after_the_timeout():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for argv in (["topics", "list"], ["cluster", "info"], ["consume", "t"], ["produce", "t"]):
        proc = run_cli(*argv, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "1", input="x\n")
        assert_error_line(proc, f"error: cannot reach 127.0.0.1:{port}")


def test_topic_lifecycle_create_describe_alter_delete(shared_node):
    created = odradek(shared_node, "topics", "create", "lifecycle", "--partitions", "2",
                      "--config", "retention.ms=123456", "--config", "cleanup.policy=compact")
    assert created.stdout_text == "Created topic lifecycle.\n"

    listed = json.loads(odradek(shared_node, "topics", "list", "--output", "json").stdout)
    [entry] = [t for t in listed["topics"] if t["name"] == "lifecycle"]
    assert entry == {"name": "lifecycle", "partitions": 2, "replication_factor": 1, "internal": False}
    assert "lifecycle" in odradek(shared_node, "topics", "list").stdout_text

    topic = describe(shared_node, "lifecycle")
    assert topic["partition_count"] == 2 and topic["replication_factor"] == 1
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    for p in topic["partitions"]:
        assert p["leader"] is not None and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]]
    assert topic["configs"] == {"cleanup.policy": "compact", "retention.ms": "123456"}

    table_text = odradek(shared_node, "topics", "describe", "lifecycle").stdout_text
    assert "Topic: lifecycle  PartitionCount: 2  ReplicationFactor: 1" in table_text
    assert "cleanup.policy=compact,retention.ms=123456" in table_text

    altered = odradek(shared_node, "topics", "alter", "lifecycle", "--partitions", "4",
                      "--config", "retention.ms=999", "--delete-config", "cleanup.policy")
    assert altered.stdout_text.startswith("Altered topic lifecycle:")
    topic = describe(shared_node, "lifecycle")
    assert topic["partition_count"] == 4
    assert topic["configs"] == {"retention.ms": "999"}

    assert odradek(shared_node, "topics", "delete", "lifecycle").stdout_text == "Deleted topic lifecycle.\n"
    listed = json.loads(odradek(shared_node, "topics", "list", "--output", "json").stdout)
    assert "lifecycle" not in [t["name"] for t in listed["topics"]]


def test_creating_an_existing_topic_fails_unless_if_not_exists(shared_node):
    odradek(shared_node, "topics", "create", "twice")
    assert_error_line(odradek(shared_node, "topics", "create", "twice", check=False),
                      "error: topic 'twice' already exists")
    assert odradek(shared_node, "topics", "create", "twice", "--if-not-exists").stdout_text == ""


def test_unknown_topics_are_error_lines(shared_node):
    assert_error_line(odradek(shared_node, "topics", "describe", "no-such-topic", check=False),
                      "error: topic 'no-such-topic' does not exist")
    assert_error_line(odradek(shared_node, "topics", "alter", "no-such-topic", "--partitions", "3", check=False),
                      "error: topic 'no-such-topic' does not exist")
    assert_error_line(odradek(shared_node, "topics", "delete", "no-such-topic", check=False),
                      "error: topic 'no-such-topic' does not exist")
    assert odradek(shared_node, "topics", "delete", "no-such-topic", "--if-exists").returncode == 0
    assert_error_line(odradek(shared_node, "consume", "no-such-topic", "--timeout-ms", "500", check=False),
                      "error: topic 'no-such-topic' does not exist")


def test_bad_config_values_are_error_lines(shared_node):
    assert_error_line(odradek(shared_node, "topics", "create", "bad-config", "--config", "retention.ms=soon",
                              check=False), "error: invalid --config for topic 'bad-config'")
    assert_error_line(odradek(shared_node, "topics", "create", "bad-config", "--config", "no.such.config=1",
                              check=False), "error: invalid --config for topic 'bad-config'")
    listed = json.loads(odradek(shared_node, "topics", "list", "--output", "json").stdout)
    assert "bad-config" not in [t["name"] for t in listed["topics"]]

    odradek(shared_node, "topics", "create", "bad-alter")
    assert_error_line(odradek(shared_node, "topics", "alter", "bad-alter", "--config", "cleanup.policy=sometimes",
                              check=False), "error: invalid --config for topic 'bad-alter'")


def test_partitions_can_only_grow(shared_node):
    odradek(shared_node, "topics", "create", "shrink", "--partitions", "3")
    assert_error_line(odradek(shared_node, "topics", "alter", "shrink", "--partitions", "2", check=False),
                      "error: cannot change partitions of topic 'shrink' (it has 3)")
    assert describe(shared_node, "shrink")["partition_count"] == 3


def test_bad_client_property_is_an_error_line(shared_node, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("no.such.client.property=1\n")
    assert_error_line(odradek(shared_node, "topics", "list", "--command-config", str(path), check=False),
                      "error: invalid client configuration")
    path.write_text("client.id=from-command-config\n")
    odradek(shared_node, "topics", "list", "--command-config", str(path))


KEYED_LINES = "k1:v1\nk2:hello world\nk3:ünïcode:with colon\n"


@pytest.fixture(scope="module")
def keyed_topic(shared_node):
    """Three keyed records with a header, produced once, read back in every format."""
    odradek(shared_node, "topics", "create", "keyed", "--partitions", "1")
    odradek(shared_node, "produce", "keyed", "--key-separator", ":", "--header", "source=cli", input=KEYED_LINES)
    return "keyed"


def test_consume_prints_values(shared_node, keyed_topic):
    proc = consume(shared_node, keyed_topic, "--from-beginning", "--max-messages", "3")
    assert proc.stdout_text.splitlines() == ["v1", "hello world", "ünïcode:with colon"]
    assert proc.stderr_text.strip() == "Processed a total of 3 messages"


def test_consume_prints_keys_and_headers(shared_node, keyed_topic):
    proc = consume(shared_node, keyed_topic, "--from-beginning", "--max-messages", "3", "--print-key")
    assert proc.stdout_text.splitlines() == ["k1\tv1", "k2\thello world", "k3\tünïcode:with colon"]
    proc = consume(shared_node, keyed_topic, "--from-beginning", "--max-messages", "1", "--format", "kv")
    assert proc.stdout_text == "k1\tv1\n"
    proc = consume(shared_node, keyed_topic, "--from-beginning", "--max-messages", "1", "--print-headers")
    assert proc.stdout_text == "source:cli\tv1\n"


def test_consume_json_is_one_object_per_record(shared_node, keyed_topic):
    before = int(time.time() * 1000)
    proc = consume(shared_node, keyed_topic, "--from-beginning", "--max-messages", "3", "--format", "json")
    records = [json.loads(line) for line in proc.stdout_text.splitlines()]
    assert [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in records] == [
        ("keyed", 0, 0, "k1", "v1"), ("keyed", 0, 1, "k2", "hello world"), ("keyed", 0, 2, "k3", "ünïcode:with colon")]
    for r in records:
        assert r["headers"] == [{"key": "source", "value": "cli"}]
        assert r["timestamp_type"] == "CreateTime"
        assert before - 600_000 < r["timestamp"] <= before


def test_consume_exits_when_idle_without_max_messages(shared_node, keyed_topic):
    proc = odradek(shared_node, "consume", keyed_topic, "--from-beginning", "--timeout-ms", "1500")
    assert proc.returncode == 0 and len(proc.stdout_text.splitlines()) == 3


def test_consume_from_offset(shared_node, keyed_topic):
    proc = consume(shared_node, keyed_topic, "--offset", "1", "--partition", "0", "--max-messages", "2")
    assert proc.stdout_text.splitlines() == ["hello world", "ünïcode:with colon"]
    proc = odradek(shared_node, "consume", keyed_topic, "--offset", "2", "--timeout-ms", "1000")
    assert proc.stdout_text.splitlines() == ["ünïcode:with colon"]


def test_consume_starts_at_the_end_by_default(shared_node, keyed_topic):
    proc = odradek(shared_node, "consume", keyed_topic, "--timeout-ms", "1000")
    assert proc.stdout_text == ""


def test_consume_stops_cleanly_on_sigterm(shared_node, keyed_topic):
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "consume", keyed_topic, "--from-beginning",
                             "--bootstrap-server", shared_node.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"v1\n"
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.decode().strip().startswith("Processed a total of")


def test_consume_into_a_closed_pipe_is_not_an_error(shared_node):
    odradek(shared_node, "topics", "create", "piped")
    odradek(shared_node, "produce", "piped", input="".join(f"{i:04} {'x' * 100}\n" for i in range(3000)))
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "consume", "piped", "--from-beginning",
                             "--timeout-ms", "3000", "--bootstrap-server", shared_node.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"0000 ")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 0
    assert "Traceback" not in err and "error" not in err.lower()


def test_consume_from_timestamp(shared_node):
    odradek(shared_node, "topics", "create", "timed")
    odradek(shared_node, "produce", "timed", input="old1\nold2\n")
    time.sleep(0.05)
    boundary = int(time.time() * 1000)
    time.sleep(0.05)
    odradek(shared_node, "produce", "timed", input="new1\nnew2\n")

    proc = consume(shared_node, "timed", "--from-timestamp", str(boundary), "--max-messages", "2")
    assert proc.stdout_text.splitlines() == ["new1", "new2"]
    iso = datetime.fromtimestamp(boundary / 1000, UTC).isoformat()
    proc = consume(shared_node, "timed", "--from-timestamp", iso, "--max-messages", "2")
    assert proc.stdout_text.splitlines() == ["new1", "new2"]
    proc = odradek(shared_node, "consume", "timed", "--from-timestamp", str(boundary + 3_600_000),
                   "--timeout-ms", "1000")
    assert proc.stdout_text == ""


def test_produce_to_one_partition_and_consume_all_partitions(shared_node):
    odradek(shared_node, "topics", "create", "spread", "--partitions", "3")
    odradek(shared_node, "produce", "spread", "--partition", "2", input="a\nb\n")
    odradek(shared_node, "produce", "spread", "--partition", "0", input="c\n")
    proc = consume(shared_node, "spread", "--from-beginning", "--max-messages", "3", "--format", "json")
    records = sorted((r["partition"], r["offset"], r["value"]) for r in map(json.loads, proc.stdout_text.splitlines()))
    assert records == [(0, 0, "c"), (2, 0, "a"), (2, 1, "b")]
    proc = consume(shared_node, "spread", "--from-beginning", "--partition", "2", "--max-messages", "2")
    assert proc.stdout_text.splitlines() == ["a", "b"]
    assert_error_line(odradek(shared_node, "produce", "spread", "--partition", "3", input="x\n", check=False),
                      "error: topic 'spread' has no partition 3")


def test_produce_places_keys_where_kafkas_console_producer_does(shared_node):
    """Kafka's default partitioner (murmur2 of the key), not librdkafka's (CRC32): a key written with the CLI
    shares its partition with the same key from any Java producer."""
    odradek(shared_node, "topics", "create", "murmur-keyed", "--partitions", "5")
    keys = [f"k{i}" for i in range(60)]
    odradek(shared_node, "produce", "murmur-keyed", "--key-separator", ":", input="".join(f"{k}:v\n" for k in keys))
    proc = consume(shared_node, "murmur-keyed", "--from-beginning", "--max-messages", str(len(keys)), "--format", "json")
    placed = {r["key"]: r["partition"] for r in map(json.loads, proc.stdout_text.splitlines())}
    assert placed == {k: partition_for(k.encode(), 5) for k in keys}


def test_produce_parses_headers_keys_and_null_marker_like_kafka(shared_node):
    odradek(shared_node, "topics", "create", "parsed")
    odradek(shared_node, "produce", "parsed", "--property", "parse.headers=true", "--property", "parse.key=true",
            "--property", "null.marker=NULL", input="h1:a,h2:b\tkey\tvalue\nh3:c\tNULL\tNULL\n")
    proc = consume(shared_node, "parsed", "--from-beginning", "--max-messages", "2", "--format", "json")
    records = [json.loads(line) for line in proc.stdout_text.splitlines()]
    assert [(r["key"], r["value"], r["headers"]) for r in records] == [
        ("key", "value", [{"key": "h1", "value": "a"}, {"key": "h2", "value": "b"}]),
        (None, None, [{"key": "h3", "value": "c"}]),
    ]
    proc = consume(shared_node, "parsed", "--from-beginning", "--max-messages", "2", "--print-key", "--print-headers")
    assert proc.stdout_text.splitlines() == ["h1:a,h2:b\tkey\tvalue", "h3:c\tnull\tnull"]


def test_produce_reads_a_file_and_skips_malformed_lines(shared_node, tmp_path):
    odradek(shared_node, "topics", "create", "from-file")
    path = tmp_path / "lines.txt"
    path.write_bytes(b"a=1\r\nmalformed\nb=2\n")
    proc = odradek(shared_node, "produce", "from-file", "--key-separator", "=", "--file", str(path), check=False)
    assert proc.returncode == 1
    assert "error: line 2: no key separator '='" in proc.stderr_text
    proc = consume(shared_node, "from-file", "--from-beginning", "--max-messages", "2", "--format", "kv")
    assert proc.stdout_text.splitlines() == ["a\t1", "b\t2"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_produce_compressed_and_consume(shared_node, codec):
    topic = f"compressed-{codec}"
    odradek(shared_node, "topics", "create", topic)
    lines = [f"line {i} " + "x" * (i % 50) for i in range(200)]
    odradek(shared_node, "produce", topic, "--compression", codec, "--acks", "1", input="\n".join(lines) + "\n")
    proc = consume(shared_node, topic, "--from-beginning", "--max-messages", "200")
    assert proc.stdout_text.splitlines() == lines


def test_produce_reports_delivery_failures_and_exits_non_zero(shared_node):
    odradek(shared_node, "topics", "create", "tiny", "--config", "max.message.bytes=1000")
    # One record per batch, so the broker rejects only the large one.
    proc = odradek(shared_node, "produce", "tiny", "--producer-property", "batch.num.messages=1",
                   input="small\n" + "x" * 5000 + "\n", check=False)
    assert proc.returncode == 1
    assert "error: record not delivered to tiny" in proc.stderr_text
    assert "error: 1 of 2 records not delivered" in proc.stderr_text
    assert "Traceback" not in proc.stderr_text
    proc = consume(shared_node, "tiny", "--from-beginning", "--max-messages", "1")
    assert proc.stdout_text == "small\n"


def test_produce_to_unknown_topic_without_auto_create(node_factory):
    node = node_factory({"auto.create.topics.enable": "false"})
    assert_error_line(odradek(node, "produce", "nowhere", input="x\n", check=False),
                      "error: topic 'nowhere' does not exist")


def test_cluster_info(shared_node):
    info = json.loads(odradek(shared_node, "cluster", "info", "--output", "json").stdout)
    assert list(info) == ["cluster_id", "controller", "brokers"]
    assert info["cluster_id"]
    [broker] = info["brokers"]
    assert (broker["host"], broker["port"]) == ("127.0.0.1", shared_node.port)
    assert info["controller"] == broker["id"]
    text = odradek(shared_node, "cluster", "info").stdout_text
    assert f"Cluster ID: {info['cluster_id']}" in text and str(shared_node.port) in text


def test_consume_with_group_subscribes(shared_node, keyed_topic):
    # A new group's first rebalance waits group.initial.rebalance.delay.ms (3 s by default) for more members.
    proc = run_cli("consume", keyed_topic, "--group", "cli-group", "--from-beginning", "--max-messages", "3",
                   "--timeout-ms", "15000", "--bootstrap-server", shared_node.bootstrap, timeout=30)
    assert proc.returncode == 0, proc.stderr_text
    assert proc.stdout_text.splitlines() == ["v1", "hello world", "ünïcode:with colon"]
