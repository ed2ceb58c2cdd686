"""`odradek sql shell`, the SQL server's client: statement splitting, routing, properties, rendering, errors.

No SQL server here (it needs Spark): the shell talks to a real tiny HTTP server in a thread that answers
/ksql, /query-stream and /query with canned bodies in the shapes src/odradek/sql/server.py and engine.py
produce (entities, a delimited header then rows, PRINT's text lines, a 400 `statement_error`).
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odradek.cli import main as cli
from odradek.cli import sql_shell
from odradek.cli.sql_shell import CONTINUATION, PROMPT, Shell, SqlClient, split_statements

# ---------------------------------------------------------------------------------------------------
# A canned SQL server


@dataclass
class Stream:
    lines: list[str]
    hold: bool = False  # after the lines, keep the response open until the shell hangs up


@dataclass
class Canned:
    answers: dict = field(default_factory=dict)  # (path, statement) -> (status, JSON body) or Stream
    requests: list = field(default_factory=list)  # (path, body, headers)
    hung_up: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.ksql.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {"KsqlServerInfo": {"version": "9.9", "kafkaClusterId": "c", "ksqlServiceId": "default_",
                                            "serverStatus": "RUNNING"}})

    def do_POST(self):
        canned: Canned = self.server.canned
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        canned.requests.append((self.path, body, dict(self.headers)))
        statement = body.get("ksql", body.get("sql"))
        answer = canned.answers.get((self.path, statement))
        if answer is None:
            answer = (400, {"@type": "statement_error", "error_code": 40001, "statementText": statement,
                            "message": f"no canned answer for {statement}", "entities": []})
        if not isinstance(answer, Stream):
            self._send(*answer)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.ksqlapi.delimited.v1")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in answer.lines:
            data = (line + "\n").encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        if answer.hold:
            self.connection.settimeout(60)
            try:
                if self.rfile.read(1) == b"":
                    canned.hung_up.set()
            except OSError:
                pass
            return
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


@pytest.fixture(scope="module")
def http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def canned(http_server, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    http_server.canned = Canned()
    http_server.canned.url = f"http://127.0.0.1:{http_server.server_address[1]}"
    return http_server.canned


def shell(canned: Canned, *argv: str) -> int:
    args = cli.build_parser().parse_args(["sql", "shell", "--server", canned.url, *argv])
    return args.run(args)


def status(text: str, message: str) -> tuple[int, list]:
    return 200, [{"@type": "currentStatus", "statementText": text, "commandId": "stream/`X`/create",
                  "commandStatus": {"status": "SUCCESS", "message": message, "queryId": None},
                  "commandSequenceNumber": 1, "warnings": []}]


SHOW_STREAMS = (200, [{"@type": "streams", "statementText": "SHOW STREAMS;", "warnings": [], "streams": [
    {"type": "STREAM", "name": "PAGEVIEWS", "topic": "pageviews", "keyFormat": "KAFKA", "valueFormat": "JSON",
     "isWindowed": False},
    {"type": "STREAM", "name": "CLICKS_PER_USER_STREAM", "topic": "clicks", "keyFormat": "JSON",
     "valueFormat": "AVRO", "isWindowed": True}]}])
DESCRIBE = (200, [{"@type": "sourceDescription", "statementText": "DESCRIBE USERS;", "warnings": [],
                   "sourceDescription": {
                       "name": "USERS", "type": "TABLE", "topic": "users", "keyFormat": "KAFKA",
                       "valueFormat": "JSON", "statement": "CREATE TABLE USERS ...;", "windowType": None,
                       "timestamp": "", "readQueries": [], "writeQueries": [], "extended": False,
                       "fields": [{"name": "ID", "schema": {"type": "VARCHAR"}, "type": "KEY"},
                                  {"name": "REGION", "schema": {"type": "VARCHAR"}},
                                  {"name": "TAGS", "schema": {"type": "ARRAY<VARCHAR>"}}]}}])
PULL = Stream([json.dumps({"queryId": None, "columnNames": ["ID", "REGION"], "columnTypes": ["VARCHAR", "VARCHAR"]}),
               json.dumps(["u1", "north"]), json.dumps(["u22", None])])
PUSH_HEADER = json.dumps({"queryId": "transient_PAGEVIEWS_1_1", "columnNames": ["VIEWTIME", "PAGE"],
                          "columnTypes": ["BIGINT", "VARCHAR"]})


# ---------------------------------------------------------------------------------------------------
# Statements


def test_statements_split_on_semicolons_outside_strings_identifiers_and_comments():
    text = ("SHOW STREAMS; SELECT 'a;b', `we;ird` FROM T -- c;d\n WHERE X = 'it''s;' /* e;\n f */ ;"
            " ; -- only a comment;\nDESCRIBE T")
    statements, rest, still_open = split_statements(text)
    assert statements == ["SHOW STREAMS;",
                          "SELECT 'a;b', `we;ird` FROM T -- c;d\n WHERE X = 'it''s;' /* e;\n f */ ;"]
    assert (rest, still_open) == (" -- only a comment;\nDESCRIBE T", False)
    assert split_statements("SELECT 'open; string") == ([], "SELECT 'open; string", True)
    assert split_statements("SHOW TABLES; /* open; comment") == (["SHOW TABLES;"], " /* open; comment", True)
    assert sql_shell.first_word("-- hi\n/* there */ select 1;") == "SELECT"
    assert [sql_shell.client_word(w) for w in ("exit", " Quit; ", "help", "exits", "SHOW")] == [
        "EXIT", "QUIT", "HELP", None, None]


def test_the_shell_takes_its_arguments_and_reads_the_server_from_the_environment(monkeypatch):
    args = cli.build_parser().parse_args(["sql", "shell", "-e", "SHOW STREAMS;", "-o", "json"])
    assert (args.server, args.execute, args.file, args.output, args.timeout) == (
        None, "SHOW STREAMS;", None, "json", sql_shell.DEFAULT_TIMEOUT_S)
    assert args.run is sql_shell.run_shell
    client = SqlClient("http://alice:s%3Acret@sql.example:9000/ksql/", 5)
    assert (client.url, client.base, client.headers["Authorization"]) == (
        "http://sql.example:9000", "/ksql", "Basic YWxpY2U6czpjcmV0")
    assert SqlClient("localhost:8088", 5).url == "http://localhost:8088"


def test_the_shell_module_imports_neither_aiohttp_nor_pyspark():
    code = ("import sys; from odradek.cli import main; main.build_parser(); import odradek.cli.sql_shell; "
            "print(sorted(m for m in ('aiohttp', 'pyspark') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "[]", result.stderr


# ---------------------------------------------------------------------------------------------------
# Rendering


def test_show_streams_describe_and_statuses_print_as_ksqldb_tables(canned, capsys):
    canned.answers[("/ksql", "SHOW STREAMS;")] = SHOW_STREAMS
    canned.answers[("/ksql", "DESCRIBE USERS;")] = DESCRIBE
    canned.answers[("/ksql", "CREATE STREAM X (A INT) WITH (KAFKA_TOPIC='x', PARTITIONS=1);")] = status(
        "CREATE STREAM X ...", "Stream created")
    canned.answers[("/ksql", "INSERT INTO X (A) VALUES (1);")] = (200, [])
    assert shell(canned, "-e", "SHOW STREAMS;DESCRIBE USERS;\nCREATE STREAM X (A INT) WITH (KAFKA_TOPIC='x', "
                               "PARTITIONS=1); INSERT INTO X (A) VALUES (1);") == 0
    out = capsys.readouterr().out
    assert out == """\
 Stream Name            | Kafka Topic | Key Format | Value Format | Windowed
-----------------------------------------------------------------------------
 PAGEVIEWS              | pageviews   | KAFKA      | JSON         | false
 CLICKS_PER_USER_STREAM | clicks      | JSON       | AVRO         | true
-----------------------------------------------------------------------------
Name                 : USERS
 Field  | Type
---------------------------------
 ID     | VARCHAR  (primary key)
 REGION | VARCHAR
 TAGS   | ARRAY<VARCHAR>
---------------------------------
For runtime statistics and query details run: DESCRIBE <Stream,Table> EXTENDED;
 Message
----------------
 Stream created
----------------
"""
    assert [body["ksql"] for _, body, _ in canned.requests] == [
        "SHOW STREAMS;", "DESCRIBE USERS;", "CREATE STREAM X (A INT) WITH (KAFKA_TOPIC='x', PARTITIONS=1);",
        "INSERT INTO X (A) VALUES (1);"]


def test_show_queries_topics_and_explain(canned, capsys):
    query = {"queryString": "CREATE STREAM B AS SELECT * FROM A;", "sinks": ["B"], "sinkKafkaTopics": ["b"],
             "id": "CSAS_B_1", "statusCount": {"RUNNING": 1}, "queryType": "PERSISTENT", "state": "RUNNING"}
    canned.answers[("/ksql", "SHOW QUERIES;")] = (200, [{"@type": "queries", "queries": [query], "warnings": []}])
    canned.answers[("/ksql", "SHOW TOPICS;")] = (200, [{"@type": "kafka_topics", "warnings": [], "topics": [
        {"name": "pageviews", "replicaInfo": [3, 3]}]}])
    canned.answers[("/ksql", "EXPLAIN CSAS_B_1;")] = (200, [{"@type": "queryDescription", "warnings": [],
                                                            "queryDescription": {
        "id": "CSAS_B_1", "statementText": query["queryString"], "sources": ["A"], "state": "RUNNING",
        "fields": [{"name": "K", "schema": {"type": "INTEGER"}, "type": "KEY"}],
        "executionPlan": "Project [K#1]\n+- Relation A"}}])
    assert shell(canned, "-e", "SHOW QUERIES; SHOW TOPICS; EXPLAIN CSAS_B_1;") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("|") == [" Query ID ", " Query Type ", " Status    ", " Sink Name ", " Sink Kafka Topic ",
                                   " Query String"]
    assert lines[2].split(" | ") == [" CSAS_B_1", "PERSISTENT", "RUNNING:1", "B        ", "b               ",
                                     "CREATE STREAM B AS SELECT * FROM A;"]
    assert lines[5:9] == [" Kafka Topic | Partitions | Partition Replicas", "-" * 47,
                          " pageviews   | 2          | 3", "-" * 47]
    assert lines[9:12] == ["ID                   : CSAS_B_1",
                           "SQL                  : CREATE STREAM B AS SELECT * FROM A;",
                           "Status               : RUNNING"]
    assert " K     | INTEGER  (key)" in lines
    assert lines[-8:] == ["Sources that this query reads from:", "-" * 35, "A", "", "Execution plan", "-" * 14,
                          "Project [K#1]", "+- Relation A"]


def test_a_pull_query_prints_a_table_that_fits_its_values(canned, capsys):
    canned.answers[("/query-stream", "SELECT * FROM USERS WHERE ID IN ('u1', 'u22');")] = (PULL)
    assert shell(canned, "-e", "SELECT * FROM USERS WHERE ID IN ('u1', 'u22');") == 0
    assert capsys.readouterr().out == """\
+---+------+
|ID |REGION|
+---+------+
|u1 |north |
|u22|null  |
+---+------+
"""
    path, body, headers = canned.requests[0]
    assert (path, headers["Accept"]) == ("/query-stream", "application/vnd.ksqlapi.delimited.v1")
    assert body == {"sql": "SELECT * FROM USERS WHERE ID IN ('u1', 'u22');", "properties": {}}


def test_a_push_query_prints_rows_as_they_come_with_widths_from_the_types(canned, capsys):
    long = "x" * 20
    canned.answers[("/query-stream", "SELECT * FROM PAGEVIEWS EMIT CHANGES LIMIT 2;")] = Stream([
        PUSH_HEADER, json.dumps([1700000000000, "/home"]), json.dumps([2, long])])
    assert shell(canned, "-e", "SELECT * FROM PAGEVIEWS EMIT CHANGES LIMIT 2;") == 0
    assert capsys.readouterr().out == f"""\
+-------------+----------------+
|VIEWTIME     |PAGE            |
+-------------+----------------+
|1700000000000|/home           |
|2            |{long[:16]}|
|             |xxxx            |
+-------------+----------------+
Query terminated
"""


def test_ctrl_c_stops_a_push_query_by_hanging_up_and_the_prompt_goes_on(canned, capsys, monkeypatch):
    say = Shell.say

    def say_then_ctrl_c(self, *lines):  # Ctrl-C pressed as soon as the row is on the screen
        say(self, *lines)
        if any("/a" in line for line in lines):
            raise KeyboardInterrupt

    monkeypatch.setattr(Shell, "say", say_then_ctrl_c)
    canned.answers[("/query-stream", "SELECT * FROM PAGEVIEWS EMIT CHANGES;")] = Stream(
        [PUSH_HEADER, json.dumps([1, "/a"])], hold=True)
    canned.answers[("/ksql", "SHOW STREAMS;")] = SHOW_STREAMS
    monkeypatch.setattr(sys, "stdin", io.StringIO("SELECT * FROM PAGEVIEWS EMIT CHANGES;\nSHOW STREAMS;\n"))
    assert shell(canned) == 0
    out = capsys.readouterr().out
    assert "|1            |/a              |\n+-------------+----------------+\nQuery terminated\n" in out
    assert " PAGEVIEWS " in out
    assert canned.hung_up.wait(60)  # a bound for a loaded machine: it is set as soon as the server sees the hang-up


def test_print_streams_the_topics_lines(canned, capsys):
    lines = ["rowtime: 2024/05/01 12:00:00.000 Z, key: k1, value: {\"A\":1}, partition: 0",
             "rowtime: 2024/05/01 12:00:01.000 Z, key: <null>, value: v, partition: 1"]
    canned.answers[("/query", "PRINT 'pageviews' FROM BEGINNING LIMIT 2;")] = Stream(lines)
    assert shell(canned, "-e", "PRINT 'pageviews' FROM BEGINNING LIMIT 2;") == 0
    assert capsys.readouterr().out.splitlines() == lines
    assert canned.requests[0][:2] == ("/query", {"ksql": "PRINT 'pageviews' FROM BEGINNING LIMIT 2;",
                                                 "streamsProperties": {}})


def test_json_output_prints_the_entities_and_the_rows(canned, capsys):
    canned.answers[("/ksql", "SHOW STREAMS;")] = SHOW_STREAMS
    canned.answers[("/query-stream", "SELECT * FROM USERS;")] = PULL
    assert shell(canned, "-o", "json", "-e", "SHOW STREAMS;") == 0
    assert json.loads(capsys.readouterr().out) == SHOW_STREAMS[1]
    assert shell(canned, "-o", "json", "-e", "SELECT * FROM USERS;") == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        json.loads(line) for line in PULL.lines]


# ---------------------------------------------------------------------------------------------------
# Properties, scripts, errors


def test_set_unset_and_show_properties_send_the_sessions_properties(canned, capsys):
    canned.answers[("/ksql", "SHOW STREAMS;")] = SHOW_STREAMS
    canned.answers[("/query-stream", "SELECT * FROM USERS;")] = PULL
    canned.answers[("/query", "PRINT 'users';")] = Stream([])
    script = ("SET 'auto.offset.reset' = 'earliest'; set 'ksql.query.pull.table.scan.enabled'='true';"
              "SHOW STREAMS; SELECT * FROM USERS; PRINT 'users'; SHOW PROPERTIES;"
              "UNSET 'auto.offset.reset'; SHOW STREAMS; UNSET 'never.set';")
    assert shell(canned, "-e", script) == 0
    both = {"auto.offset.reset": "earliest", "ksql.query.pull.table.scan.enabled": "true"}
    assert [r[1] for r in canned.requests] == [
        {"ksql": "SHOW STREAMS;", "streamsProperties": both},
        {"sql": "SELECT * FROM USERS;", "properties": both},
        {"ksql": "PRINT 'users';", "streamsProperties": both},
        {"ksql": "SHOW STREAMS;", "streamsProperties": {"ksql.query.pull.table.scan.enabled": "true"}}]
    out = capsys.readouterr().out
    assert "Successfully changed local property 'auto.offset.reset' to 'earliest'." in out
    assert (" Property                           | Value\n"
            "-----------------------------------------------\n"
            " auto.offset.reset                  | earliest\n"
            " ksql.query.pull.table.scan.enabled | true\n") in out
    assert "Successfully unset local property 'auto.offset.reset' (value was 'earliest')." in out
    assert "Local property 'never.set' was not set." in out


def test_an_error_prints_one_line_and_ends_execute_mode_with_status_1(canned, capsys):
    canned.answers[("/ksql", "SHOW STREAMS;")] = SHOW_STREAMS
    canned.answers[("/ksql", "DROP STREAM NOPE;")] = (400, {
        "@type": "statement_error", "error_code": 40001, "message": "Stream NOPE does not exist.",
        "statementText": "DROP STREAM NOPE;", "entities": []})
    assert shell(canned, "-e", "SHOW STREAMS; DROP STREAM NOPE; SHOW TABLES;") == 1
    assert capsys.readouterr().err == "error: Stream NOPE does not exist.\n"
    assert [r[1]["ksql"] for r in canned.requests] == ["SHOW STREAMS;", "DROP STREAM NOPE;"]
    # an error in the stream of a running query is one line too
    canned.answers[("/query-stream", "SELECT * FROM PAGEVIEWS EMIT CHANGES;")] = Stream([
        PUSH_HEADER, json.dumps([1, "/a"]), json.dumps({"errorMessage": {"message": "the query stopped"}})])
    assert shell(canned, "-e", "SELECT * FROM PAGEVIEWS EMIT CHANGES;") == 1
    captured = capsys.readouterr()
    assert (captured.out.splitlines()[-1], captured.err) == ("+-------------+----------------+",
                                                              "error: the query stopped\n")
    # and so is a server nobody answers at
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli.main(["sql", "shell", "--server", f"http://127.0.0.1:{port}", "-e", "SHOW STREAMS;"]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot reach the SQL server at http://127.0.0.1:{port}: ")


def test_run_script_and_file_run_a_files_statements_and_stop_at_its_first_error(canned, capsys, tmp_path):
    canned.answers[("/ksql", "SHOW STREAMS;")] = canned.answers[("/ksql", "SHOW\n  STREAMS;")] = SHOW_STREAMS
    script = tmp_path / "setup.sql"
    script.write_text("-- the setup\nSET 'auto.offset.reset'='earliest';\nSHOW\n  STREAMS;\n")
    assert shell(canned, "-e", f"RUN SCRIPT '{script}'; SHOW STREAMS;") == 0
    assert [r[1] for r in canned.requests] == [{"ksql": "SHOW\n  STREAMS;", "streamsProperties": {
        "auto.offset.reset": "earliest"}}, {"ksql": "SHOW STREAMS;", "streamsProperties": {
            "auto.offset.reset": "earliest"}}]
    bad = tmp_path / "bad.sql"
    bad.write_text("SHOW TABLES;\nSHOW STREAMS;\n")
    canned.requests.clear()
    capsys.readouterr()
    assert shell(canned, "-e", f"RUN SCRIPT '{bad}'; SHOW STREAMS;") == 1
    assert capsys.readouterr().err == "error: no canned answer for SHOW TABLES;\n"
    assert [r[1]["ksql"] for r in canned.requests] == ["SHOW TABLES;"]
    assert shell(canned, "-f", str(script)) == 0
    assert shell(canned, "-e", "RUN SCRIPT 'no/such.sql';") == 1
    assert capsys.readouterr().err.startswith("error: cannot read no/such.sql: ")
    assert cli.main(["sql", "shell", "--server", canned.url, "-f", str(tmp_path / "missing.sql")]) == 1


# ---------------------------------------------------------------------------------------------------
# Interactive


def test_statements_typed_on_stdin_run_when_their_semicolon_comes(canned, capsys, monkeypatch):
    canned.answers[("/ksql", "SHOW STREAMS;")] = SHOW_STREAMS
    canned.answers[("/ksql", "DESCRIBE\nUSERS;")] = DESCRIBE
    canned.answers[("/query-stream", "SELECT * FROM USERS\n WHERE ID = 'a;b';")] = PULL
    lines = ["SHOW STREAMS; DESCRIBE", "USERS;", "-- a comment; not a statement", "SELECT * FROM USERS",
             " WHERE ID = 'a;b';", "DROP STREAM NOPE;", "exit", "SHOW TABLES;"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert shell(canned) == 1  # stdin is not a terminal: the shell went on past the error, then says so
    captured = capsys.readouterr()
    assert [r[1].get("ksql", r[1].get("sql")) for r in canned.requests] == [
        "SHOW STREAMS;", "DESCRIBE\nUSERS;", "SELECT * FROM USERS\n WHERE ID = 'a;b';", "DROP STREAM NOPE;"]
    assert PROMPT not in captured.out and "|u22|null  |" in captured.out and "(primary key)" in captured.out
    assert captured.err == "error: no canned answer for DROP STREAM NOPE;\n"


def test_the_prompt_continues_until_the_semicolon_and_ctrl_c_clears_the_statement(canned, capsys):
    canned.answers[("/ksql", "SHOW /* a\ncomment */ STREAMS\n;")] = SHOW_STREAMS
    typed = iter(["SHOW", "STREAMS", KeyboardInterrupt, "SHOW /* a", "comment */ STREAMS", ";", "", "help",
                  "SET 'a' = 'b'", "; quit;", "SHOW STREAMS;"])
    prompts = []

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        line = next(typed, EOFError)
        if isinstance(line, type):
            raise line()
        return line

    shell = Shell(SqlClient(canned.url, 5))
    assert shell.repl(read_line, prompts=True) == 0
    assert prompts == [PROMPT, CONTINUATION, CONTINUATION, PROMPT, CONTINUATION, CONTINUATION, PROMPT, PROMPT,
                       PROMPT, CONTINUATION]
    assert [r[1]["ksql"] for r in canned.requests] == ["SHOW /* a\ncomment */ STREAMS\n;"]
    assert shell.properties == {"a": "b"} and shell.exiting
    captured = capsys.readouterr()
    assert "RUN SCRIPT 'file';" in captured.out and " PAGEVIEWS " in captured.out and captured.err == ""
