"""`odradek sql shell`: the interactive client of the SQL server, in the manner of ksqlDB's CLI.

Statements end with `;` (outside '...' strings, `...` identifiers, -- and /* */ comments); several may
share a line and one may span lines (the prompt is `odradek> `, then `      > ` until the `;`). They are
split here and sent one per request:

- SELECT to `POST /query-stream` (`Accept: application/vnd.ksqlapi.delimited.v1`: a header object, then
  one JSON array per row), PRINT to `POST /query` (text lines), everything else to `POST /ksql`.
- Client-side, as in ksqlDB's CLI: `SET 'name' = 'value';`, `UNSET 'name';`, `SHOW PROPERTIES;` (the
  session's properties), `RUN SCRIPT 'file';` (stops at the script's first error), `EXIT`/`QUIT`, `HELP`
  (those three need no `;`). The session's properties go in every request: `streamsProperties` for
  /ksql and /query, `properties` for /query-stream.

Output (`--output table`, the default): /ksql entities as ksqlDB's CLI prints them (` A | B ` columns
between dashed rules; DESCRIBE's `Name : ...` header and `(key)` / `(primary key)` marks; EXPLAIN's
description and execution plan; a status as its message; nothing for an empty answer such as INSERT
VALUES). Query results are a `+----+` bordered table printed as rows arrive. A push query's column widths
cannot wait for its rows, so they come from the column names and types (a BIGINT 13 characters, a VARCHAR
16, a STRUCT 30, ...), narrowed to the terminal's width when needed; a value longer than its column wraps
onto more lines of the same cell, so nothing is cut. A pull query (its header has no queryId) is complete
when it arrives, so its widths fit its values. `--output json`: /ksql's entity array as returned, and a
query's header and rows as JSON lines.

Errors (an HTTP 400's `message`, an `errorMessage` in a stream, an unreachable server) print as one
`error: ...` line on stderr. With --execute or --file the shell stops at the first error and exits 1.
Interactive, it reports the error and goes on; Ctrl-C stops a running query (closing its connection) or
clears the statement being typed, Ctrl-D leaves. History is kept in ~/.odradek_sql_history. When stdin is
not a terminal the statements are read from it without prompts or readline, going on past errors, and the
exit status is 1 if any statement failed.

Only the standard library talks HTTP (http.client, so streamed chunks are read as they come).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from odradek.cli.main import CliError, positive_float
from odradek.cli.output import dumps
from odradek.sql.statement_text import code_of, is_blank, split_statements

ENVIRONMENT_VARIABLE = "ODRADEK_SQL_SERVER"
DEFAULT_SERVER = "http://127.0.0.1:8088"
DEFAULT_TIMEOUT_S = 60.0
HISTORY_FILE = "~/.odradek_sql_history"
HISTORY_LENGTH = 2000
PROMPT = "odradek> "
CONTINUATION = "      > "
KSQL_CONTENT_TYPE = "application/vnd.ksql.v1+json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
MAX_SCRIPT_DEPTH = 16

HELP = """\
Statements end with ';' and may span lines. SELECT runs a query (a push query, EMIT CHANGES, runs
until its LIMIT or Ctrl-C); PRINT 'topic' [FROM BEGINNING] [LIMIT n] shows a topic's records; CREATE,
DROP, INSERT, SHOW, DESCRIBE, EXPLAIN and TERMINATE go to the server.

Shell commands:
  SET 'name' = 'value';   set a property for the next requests, e.g. SET 'auto.offset.reset' = 'earliest';
  UNSET 'name';           remove a property set with SET
  SHOW PROPERTIES;        the properties set in this session
  RUN SCRIPT 'file';      run the statements of a file (stops at its first error)
  HELP                    this text
  EXIT, QUIT, Ctrl-D      leave the shell

Ctrl-C stops a running query, or clears the statement being typed."""


# ---------------------------------------------------------------------------------------------------
# Parser


def add_shell_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", metavar="URL", default=None,
                        help=f"the SQL server (default ${ENVIRONMENT_VARIABLE}, else {DEFAULT_SERVER}); "
                             "user:password@ in the URL is sent as basic authentication")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", "-e", metavar="STATEMENTS",
                      help="run these statements, then exit (status 1 at the first error)")
    mode.add_argument("--file", "-f", metavar="FILE",
                      help="run the statements of FILE, then exit (status 1 at the first error)")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table",
                        help="table for people (default), json for scripts (the server's entities and rows)")
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_float, default=DEFAULT_TIMEOUT_S,
                        help=f"give up when the server does not answer a statement within this long; "
                             f"queries stream until they end (default {DEFAULT_TIMEOUT_S:g})")


def run_shell(args: argparse.Namespace) -> int:
    client = SqlClient(args.server or os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_SERVER, args.timeout)
    shell = Shell(client, json_output=args.output == "json")
    if args.execute is not None:
        return 0 if shell.run_text(args.execute) else 1
    if args.file is not None:
        return 0 if shell.run_text(read_script(args.file, CliError)) else 1
    if sys.stdin.isatty():
        return shell.interactive()
    return shell.repl(_stdin_reader(), prompts=False)


def read_script(path: str, error: type[Exception]) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


# ---------------------------------------------------------------------------------------------------
# Statements


_QUOTED = r"'((?:[^']|'')*)'"
_SET = re.compile(rf"SET\s+{_QUOTED}\s*=\s*{_QUOTED}\s*;?", re.I | re.S)
_UNSET = re.compile(rf"UNSET\s+{_QUOTED}\s*;?", re.I | re.S)
_RUN_SCRIPT = re.compile(rf"RUN\s+SCRIPT\s+{_QUOTED}\s*;?", re.I | re.S)
_SHOW_PROPERTIES = re.compile(r"(SHOW|LIST)\s+PROPERTIES\s*;?", re.I)
_WORD = re.compile(r"[A-Za-z_]+")
_CLIENT_WORDS = ("EXIT", "QUIT", "HELP")


def _unquote(text: str) -> str:
    return text.replace("''", "'")


def first_word(statement: str) -> str:
    match = _WORD.match(code_of(statement).lstrip())
    return match.group().upper() if match else ""


def client_word(line: str) -> str | None:
    """EXIT, QUIT or HELP when the line is only that word (any case, an optional ';')."""
    word = code_of(line).strip().rstrip(";").strip().upper()
    return word if word in _CLIENT_WORDS else None


# ---------------------------------------------------------------------------------------------------
# HTTP


class StatementFailed(Exception):
    """A statement the server refused, or a request that failed: printed as one `error:` line."""


class _ScriptFailed(StatementFailed):
    """A RUN SCRIPT one of whose statements failed (and was reported): its caller stops too."""


class SqlClient:
    """The server's REST API over http.client: one connection per request."""

    def __init__(self, url: str, timeout: float):
        if "://" not in url:
            url = "http://" + url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"--server: expected http://HOST:PORT, got '{url}'")
        try:
            port = parts.port
        except ValueError:
            raise CliError(f"--server: bad port in '{url}'") from None
        self.url = f"{parts.scheme}://{parts.hostname}" + (f":{port}" if port else "")
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, port
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        self.headers: dict[str, str] = {}
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self.headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def _unreachable(self, exc: BaseException) -> StatementFailed:
        if isinstance(exc, TimeoutError):
            return StatementFailed(f"no answer from the SQL server at {self.url} within {self.timeout:g}s")
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return StatementFailed(f"cannot reach the SQL server at {self.url}: {reason}")

    def open(self, method: str, path: str, body: Any = None, accept: str = "application/json",
             streaming: bool = False) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request and return the connection and the (successful) response, its body unread.

        A streaming request waits as long as the server takes (a push query starts, then rows come
        when they come); the others give up after the timeout.
        """
        connection = self._connection(self.timeout)
        headers = {"Accept": accept, **self.headers}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json" if path == "/query-stream" else KSQL_CONTENT_TYPE
        try:
            connection.connect()
            if streaming:
                connection.sock.settimeout(None)
            connection.request(method, self.base + path, body=data, headers=headers)
            response = connection.getresponse()
            if response.status >= 400:
                raise StatementFailed(_error_message(response.status, response.reason, response.read()))
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise self._unreachable(exc) from None
        except BaseException:
            connection.close()
            raise
        return connection, response

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """A request whose answer is one JSON document."""
        connection, response = self.open(method, path, body, accept=f"{KSQL_CONTENT_TYPE}, application/json")
        try:
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(exc) from None
        finally:
            connection.close()
        try:
            return json.loads(data) if data.strip() else None
        except ValueError:
            raise StatementFailed(f"the server's answer is not JSON: {_first_line(data)}") from None


def _first_line(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _error_message(status: int, reason: str, data: bytes) -> str:
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return _first_line(str(body["message"]))
    text = _first_line(data)
    return f"HTTP {status} {reason}" + (f": {text}" if text else "")


def _stream_error(item: Any) -> str | None:
    """The message of an error written into a stream ({"errorMessage": {...}} or an error entity)."""
    if not isinstance(item, dict):
        return None
    inner = item.get("errorMessage")
    if isinstance(inner, dict):
        return _first_line(str(inner.get("message") or inner))
    if inner is not None:
        return _first_line(str(inner))
    if "message" in item and ("@type" in item or "error_code" in item):
        return _first_line(str(item["message"]))
    return None


# ---------------------------------------------------------------------------------------------------
# Rendering: ksqlDB's tables


def value_text(value: Any) -> str:
    """A query result's value: strings as they are, null, true/false, JSON for the rest."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("\r", " ").replace("\n", " ")


def ksql_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """ksqlDB's CLI tables: ` A | B ` columns, a dashed rule under the header and after the rows."""
    cells = [list(headers)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [" " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " " for r in cells]
    rule = "-" * len(lines[0])
    return [lines[0].rstrip(), rule, *(line.rstrip() for line in lines[1:]), rule]


def _labelled(label: str, value: Any) -> str:
    return f"{label:<20} : {_cell(value)}"


def schema_text(schema: Any) -> str:
    """A field's type: our server sends it written out; ksqlDB nests STRUCT fields and ARRAY/MAP members."""
    if not isinstance(schema, dict):
        return _cell(schema)
    kind = str(schema.get("type", ""))
    if kind == "STRUCT" and schema.get("fields"):
        return "STRUCT<" + ", ".join(f"{f.get('name')} {schema_text(f.get('schema'))}"
                                     for f in schema["fields"]) + ">"
    if kind == "ARRAY" and schema.get("memberSchema"):
        return f"ARRAY<{schema_text(schema['memberSchema'])}>"
    if kind == "MAP" and schema.get("memberSchema"):
        return f"MAP<STRING, {schema_text(schema['memberSchema'])}>"
    return kind


def field_rows(fields: Sequence[dict], key_mark: str, window: str | None = None) -> list[list[str]]:
    rows = []
    for f in fields:
        text = schema_text(f.get("schema"))
        if f.get("type") == "KEY":
            text += f"  {key_mark}" + (f" (Window type: {window})" if window else "")
        rows.append([str(f.get("name", "")), text])
    return rows


def _query_status(query: dict) -> str:
    counts = query.get("statusCount")
    if isinstance(counts, dict) and counts:
        return ", ".join(f"{state}:{count}" for state, count in counts.items())
    return _cell(query.get("state"))


def _query_lines(title: str, queries: Sequence[dict]) -> list[str]:
    lines = ["", title, "-" * len(title)]
    lines += [f"{q.get('id')} ({_query_status(q)}) : {_cell(q.get('queryString'))}" for q in queries]
    return lines


def render_entity(entity: Any) -> list[str]:
    """The lines ksqlDB's CLI prints for one /ksql entity; JSON for a kind it does not know."""
    if not isinstance(entity, dict):
        return dumps(entity).splitlines()
    kind = entity.get("@type")
    if kind == "currentStatus":
        status = entity.get("commandStatus") or {}
        return ksql_table(["Message"], [[status.get("message") or status.get("status") or ""]])
    if kind in ("streams", "tables"):
        title = "Stream Name" if kind == "streams" else "Table Name"
        rows = [[s.get("name"), s.get("topic"), s.get("keyFormat"), s.get("valueFormat"), bool(s.get("isWindowed"))]
                for s in entity.get(kind) or []]
        return ksql_table([title, "Kafka Topic", "Key Format", "Value Format", "Windowed"], rows)
    if kind in ("kafka_topics", "kafka_topics_extended"):
        rows = []
        for t in entity.get("topics") or []:
            replicas = t.get("replicaInfo") or []
            distinct = sorted(set(replicas))
            rows.append([t.get("name"), len(replicas), ", ".join(str(r) for r in distinct)])
        return ksql_table(["Kafka Topic", "Partitions", "Partition Replicas"], rows)
    if kind == "queries":
        queries = entity.get("queries") or []
        rows = [[q.get("id"), q.get("queryType"), _query_status(q), q.get("sinks") or [],
                 q.get("sinkKafkaTopics") or [], q.get("queryString")] for q in queries]
        lines = ksql_table(["Query ID", "Query Type", "Status", "Sink Name", "Sink Kafka Topic", "Query String"], rows)
        lines += [f"{q.get('id')} failed: {q['error']}" for q in queries if q.get("error")]
        return lines + ["For detailed information on a Query run: EXPLAIN <Query ID>;"]
    if kind == "sourceDescription":
        return _render_description(entity.get("sourceDescription") or {})
    if kind == "queryDescription":
        return _render_explain(entity.get("queryDescription") or {})
    if kind == "properties" and isinstance(entity.get("properties"), dict):
        return ksql_table(["Property", "Value"], sorted(entity["properties"].items()))
    return dumps(entity).splitlines()


def _render_description(d: dict) -> list[str]:
    kind = str(d.get("type") or "")
    key_mark = "(primary key)" if kind == "TABLE" else "(key)"
    lines = [_labelled("Name", d.get("name"))]
    if d.get("extended"):
        lines.append(_labelled("Type", kind))
        lines.append(_labelled("Timestamp field", d.get("timestamp") or "Not set - using <ROWTIME>"))
        lines.append(_labelled("Key format", d.get("keyFormat")))
        lines.append(_labelled("Value format", d.get("valueFormat")))
        topic = str(d.get("topic") or "")
        if "partitions" in d:
            topic += f" (partitions: {d.get('partitions')}, replication: {d.get('replication')})"
        lines.append(_labelled("Kafka topic", topic))
        if d.get("windowType"):
            lines.append(_labelled("Window type", d.get("windowType")))
        lines.append(_labelled("Statement", d.get("statement")))
        lines.append("")
    lines += ksql_table(["Field", "Type"], field_rows(d.get("fields") or [], key_mark, d.get("windowType")))
    if not d.get("extended"):
        return lines + ["For runtime statistics and query details run: DESCRIBE <Stream,Table> EXTENDED;"]
    if d.get("readQueries"):
        lines += _query_lines(f"Queries that read from this {kind}", d["readQueries"])
    if d.get("writeQueries"):
        lines += _query_lines(f"Queries that write from this {kind}", d["writeQueries"])
    if d.get("readQueries") or d.get("writeQueries"):
        lines += ["", "For query topology and execution plan please run: EXPLAIN <QueryId>"]
    return lines


def _render_explain(d: dict) -> list[str]:
    lines = []
    if d.get("id"):
        lines.append(_labelled("ID", d.get("id")))
    lines.append(_labelled("SQL", d.get("statementText")))
    if d.get("state"):
        lines.append(_labelled("Status", d.get("state")))
    lines.append("")
    lines += ksql_table(["Field", "Type"], field_rows(d.get("fields") or [], "(key)"))
    sources = d.get("sources") or []
    if sources:
        title = "Sources that this query reads from:"
        lines += ["", title, "-" * len(title), *map(str, sources)]
    plan = str(d.get("executionPlan") or "").rstrip()
    if plan:
        lines += ["", "Execution plan", "--------------", *plan.splitlines()]
    return lines


# ---------------------------------------------------------------------------------------------------
# Rendering: query results

# How wide a push query's column is before its values are known (longer values wrap in their cell).
_TYPE_WIDTHS = {"BOOLEAN": 5, "INT": 11, "INTEGER": 11, "BIGINT": 13, "DOUBLE": 12, "DECIMAL": 12, "VARCHAR": 16,
                "STRING": 16, "BYTES": 16, "DATE": 10, "TIME": 12, "TIMESTAMP": 23}
_OTHER_TYPE_WIDTH = 30  # ARRAY, MAP, STRUCT


def type_width(type_name: str) -> int:
    match = _WORD.match(type_name.strip())
    return _TYPE_WIDTHS.get(match.group().upper() if match else "", _OTHER_TYPE_WIDTH)


def fit_widths(widths: Sequence[int], minimums: Sequence[int], limit: int) -> list[int]:
    """Narrow the widest columns (none below its minimum) until `|a|b|` lines fit in `limit` characters."""
    widths = [max(1, min(w, limit)) for w in widths]
    while sum(widths) + len(widths) + 1 > limit:
        i = max(range(len(widths)), key=lambda k: widths[k] - minimums[k])
        if widths[i] <= minimums[i]:
            break
        widths[i] -= 1
    return widths


def _terminal_width() -> int:
    return max(20, shutil.get_terminal_size((120, 24)).columns)


class RowTable:
    """A query result's table: `+---+` borders, `|value|` cells; a long value wraps within its cell."""

    def __init__(self, names: Sequence[str], widths: Sequence[int]):
        self.names = list(names)
        self.widths = list(widths)

    @classmethod
    def for_push(cls, names: Sequence[str], types: Sequence[str]) -> RowTable:
        natural = [max(len(n), type_width(t)) for n, t in zip(names, types, strict=False)]
        natural += [len(n) for n in names[len(natural):]]
        return cls(names, fit_widths(natural, [min(len(n), 8) or 1 for n in names], _terminal_width()))

    @classmethod
    def for_rows(cls, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> RowTable:
        natural = []
        for i, name in enumerate(names):
            texts = [value_text(row[i]) for row in rows if i < len(row)]
            natural.append(max([len(name)] + [len(line) for t in texts for line in t.splitlines() or [""]]))
        return cls(names, fit_widths(natural, [min(len(n), 8) or 1 for n in names], _terminal_width()))

    def border(self) -> str:
        return "+" + "+".join("-" * w for w in self.widths) + "+"

    def header(self) -> list[str]:
        return [self.border(), *self.line(self.names), self.border()]

    def line(self, texts: Sequence[str]) -> list[str]:
        texts = list(texts) + [""] * (len(self.widths) - len(texts))
        pieces = []
        for text, width in zip(texts, self.widths, strict=False):
            chunks = []
            for part in text.replace("\t", " ").replace("\r", "").split("\n"):
                chunks += [part[i:i + width] for i in range(0, len(part), width)] or [""]
            pieces.append(chunks)
        height = max((len(p) for p in pieces), default=1)
        return ["|" + "|".join((p[k] if k < len(p) else "").ljust(w) for p, w in zip(pieces, self.widths,
                                                                                       strict=True)) + "|"
                for k in range(height)]

    def row(self, values: Sequence[Any]) -> list[str]:
        return self.line([value_text(v) for v in values])


# ---------------------------------------------------------------------------------------------------
# The shell


class Shell:
    def __init__(self, client: SqlClient, json_output: bool = False,
                 out: Any = None, err: Any = None):
        self.client = client
        self.json_output = json_output
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.properties: dict[str, str] = {}
        self.exiting = False
        self.depth = 0

    # -------------------------------------------------------------- output

    def say(self, *lines: str) -> None:
        for line in lines:
            print(line, file=self.out)
        self.out.flush()

    def error(self, message: str) -> None:
        self.out.flush()
        print(f"error: {message}", file=self.err, flush=True)

    # -------------------------------------------------------------- running statements

    def run_text(self, text: str) -> bool:
        """Run a text's statements (the last may lack its ';'); False at the first that fails."""
        statements, rest, _open = split_statements(text)
        if not is_blank(rest):
            statements.append(rest.strip())
        for statement in statements:
            if not self.run_statement(statement):
                return False
            if self.exiting:
                break
        return True

    def run_statement(self, statement: str) -> bool:
        """Run one statement; an error is printed and gives False."""
        try:
            self._dispatch(statement)
            return True
        except _ScriptFailed:  # reported by the script's own statement
            return False
        except StatementFailed as exc:
            self.error(str(exc))
            return False

    def _dispatch(self, statement: str) -> None:
        code = code_of(statement).strip()
        word = first_word(statement)
        if client_word(statement) == "HELP":
            self.say(HELP)
        elif client_word(statement) in ("EXIT", "QUIT"):
            self.exiting = True
        elif word == "SET":
            self._set(code)
        elif word == "UNSET":
            self._unset(code)
        elif _SHOW_PROPERTIES.fullmatch(code):
            self._show_properties()
        elif word == "RUN" and re.match(r"RUN\s+SCRIPT\b", code, re.I):
            self._run_script(code)
        elif word == "SELECT":
            self.select(statement)
        elif word == "PRINT":
            self.print_topic(statement)
        else:
            self.ksql(statement)

    # -------------------------------------------------------------- client-side commands

    def _set(self, code: str) -> None:
        match = _SET.fullmatch(code)
        if match is None:
            raise StatementFailed("expected SET 'property' = 'value';")
        name, value = _unquote(match[1]), _unquote(match[2])
        self.properties[name] = value
        if not self.json_output:
            self.say(f"Successfully changed local property '{name}' to '{value}'. "
                     "Use the UNSET command to revert your change.")

    def _unset(self, code: str) -> None:
        match = _UNSET.fullmatch(code)
        if match is None:
            raise StatementFailed("expected UNSET 'property';")
        name = _unquote(match[1])
        if name not in self.properties:
            if not self.json_output:
                self.say(f"Local property '{name}' was not set.")
            return
        value = self.properties.pop(name)
        if not self.json_output:
            self.say(f"Successfully unset local property '{name}' (value was '{value}').")

    def _show_properties(self) -> None:
        if self.json_output:
            self.say(dumps(self.properties))
        else:
            self.say(*ksql_table(["Property", "Value"], sorted(self.properties.items())))

    def _run_script(self, code: str) -> None:
        match = _RUN_SCRIPT.fullmatch(code)
        if match is None:
            raise StatementFailed("expected RUN SCRIPT 'file';")
        if self.depth >= MAX_SCRIPT_DEPTH:
            raise StatementFailed(f"RUN SCRIPT nested more than {MAX_SCRIPT_DEPTH} deep")
        text = read_script(_unquote(match[1]), StatementFailed)
        self.depth += 1
        try:
            ok = self.run_text(text)
        finally:
            self.depth -= 1
        if not ok:  # the script's error is printed already; its caller must stop too
            raise _ScriptFailed()

    # -------------------------------------------------------------- /ksql

    def ksql(self, statement: str) -> None:
        entities = self.client.request("POST", "/ksql", {"ksql": statement, "streamsProperties": self.properties})
        if self.json_output:
            self.say(dumps(entities))
            return
        if not isinstance(entities, list):
            entities = [entities] if entities is not None else []
        for entity in entities:
            self.say(*render_entity(entity))
            for warning in (entity.get("warnings") or []) if isinstance(entity, dict) else []:
                message = warning.get("message") if isinstance(warning, dict) else warning
                print(f"warning: {message}", file=self.err, flush=True)

    # -------------------------------------------------------------- queries

    def _open_stream(self, path: str, body: dict, accept: str):
        """The connection and response of a query; None when Ctrl-C came before it started."""
        try:
            return self.client.open("POST", path, body, accept=accept, streaming=True)
        except KeyboardInterrupt:  # open() hung up: the server stops starting the query
            if not self.json_output:
                self.say("", "Query terminated")
            return None

    def select(self, statement: str) -> None:
        opened = self._open_stream("/query-stream", {"sql": statement, "properties": self.properties}, DELIMITED)
        if opened is None:
            return
        connection, response = opened
        table: RowTable | None = None
        try:
            header = self._next_json(response)
            if header is None:
                raise StatementFailed("the server ended the query without a header")
            problem = _stream_error(header)
            if problem is not None:
                raise StatementFailed(problem)
            if not isinstance(header, dict) or "columnNames" not in header:
                raise StatementFailed(f"unexpected query header: {_first_line(json.dumps(header))}")
            names = [str(n) for n in header.get("columnNames") or []]
            types = [str(t) for t in header.get("columnTypes") or []]
            push = bool(header.get("queryId"))
            if self.json_output:
                self.say(json.dumps(header, ensure_ascii=False))
            elif push:
                table = RowTable.for_push(names, types)
                self.say(*table.header())
            rows: list[list] = []
            while True:
                item = self._next_json(response)
                if item is None:
                    break
                problem = _stream_error(item)
                if problem is not None:
                    raise StatementFailed(problem)
                if self.json_output:
                    self.say(json.dumps(item, ensure_ascii=False))
                elif push:
                    self.say(*table.row(item if isinstance(item, list) else [item]))
                else:
                    rows.append(item if isinstance(item, list) else [item])
            if not self.json_output and not push:  # a pull query: complete, its widths fit its values
                table = RowTable.for_rows(names, rows)
                self.say(*table.header())
                for row in rows:
                    self.say(*table.row(row))
                self.say(table.border())
            elif table is not None:
                self.say(table.border(), "Query terminated")
        except KeyboardInterrupt:  # Ctrl-C: closing the connection stops the query on the server
            connection.close()
            if table is not None:
                self.say(table.border())
            if not self.json_output:
                self.say("Query terminated")
        except StatementFailed:
            if table is not None:
                self.say(table.border())
            raise
        finally:
            connection.close()

    def _next_json(self, response: http.client.HTTPResponse) -> Any:
        """The next JSON line of a stream; None at its end."""
        while True:
            line = self._next_line(response)
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                return json.loads(line)
            except ValueError:
                raise StatementFailed(f"unexpected line in the query's results: {_first_line(line)}") from None

    def _next_line(self, response: http.client.HTTPResponse) -> str | None:
        try:
            data = response.readline()
        except (OSError, http.client.HTTPException):
            raise StatementFailed(f"the connection to the SQL server at {self.client.url} was lost") from None
        if not data:
            return None
        return data.decode("utf-8", errors="replace").rstrip("\r\n")

    def print_topic(self, statement: str) -> None:
        opened = self._open_stream("/query", {"ksql": statement, "streamsProperties": self.properties},
                                   "application/json")
        if opened is None:
            return
        connection, response = opened
        try:
            while True:
                line = self._next_line(response)
                if line is None:
                    break
                if line.startswith("{"):
                    try:
                        problem = _stream_error(json.loads(line))
                    except ValueError:
                        problem = None
                    if problem is not None:
                        raise StatementFailed(problem)
                if line.strip():
                    self.say(line)
        except KeyboardInterrupt:
            connection.close()
            if not self.json_output:
                self.say("Topic printing ceased")
        finally:
            connection.close()

    # -------------------------------------------------------------- the prompt

    def banner(self) -> None:
        try:
            connection, response = self.client.open("GET", "/info")
            try:
                info = json.loads(response.read() or b"{}").get("KsqlServerInfo") or {}
            finally:
                connection.close()
        except (StatementFailed, ValueError, AttributeError, OSError, http.client.HTTPException) as exc:
            self.say(f"Odradek SQL shell, server {self.client.url}")
            print(f"warning: {exc}", file=self.err, flush=True)
        else:
            self.say(f"Odradek SQL shell, server {self.client.url} (version {info.get('version', '?')}, "
                     f"{info.get('serverStatus', 'status unknown')})")
        self.say("Statements end with ';'. Type HELP for help, EXIT or Ctrl-D to leave.", "")

    def interactive(self) -> int:
        """The prompt on a terminal: readline editing and history."""
        try:
            import readline
        except ImportError:  # no readline on this platform: plain input()
            readline = None
        history = os.path.expanduser(HISTORY_FILE)
        if readline is not None:
            try:
                readline.read_history_file(history)
            except OSError:
                pass
            readline.set_history_length(HISTORY_LENGTH)
        self.banner()
        try:
            return self.repl(input, prompts=True)
        finally:
            if readline is not None:
                try:
                    readline.write_history_file(history)
                    os.chmod(history, 0o600)  # statements may hold credentials
                except OSError:
                    pass

    def repl(self, read_line: Callable[[str], str], prompts: bool) -> int:
        """Read lines until EXIT or the end of input, running each statement once its ';' is typed.

        `read_line(prompt)` returns a line or raises EOFError; with prompts=False (stdin not a terminal)
        it is given an empty prompt and the status is 1 if any statement failed.
        """
        buffer = ""
        failed = False
        while not self.exiting:
            prompt = (CONTINUATION if buffer else PROMPT) if prompts else ""
            try:
                line = read_line(prompt)
            except EOFError:
                if prompts:
                    self.say("")
                break
            except KeyboardInterrupt:  # Ctrl-C at the prompt: forget the statement being typed
                self.say("")
                buffer = ""
                continue
            if not buffer and client_word(line):
                statements = [line.strip()]
            else:
                buffer += line + "\n"
                statements, rest, still_open = split_statements(buffer)
                buffer = rest if still_open or not is_blank(rest) else ""
            for statement in statements:
                try:
                    ok = self.run_statement(statement)
                except KeyboardInterrupt:
                    self.say("", "Interrupted")
                    ok = False
                failed = failed or not ok
                if self.exiting:
                    break
        if buffer and not self.exiting and not is_blank(buffer):  # the end of input ends the last statement
            failed = not self.run_statement(buffer.strip()) or failed
        return 1 if failed and not prompts else 0


def _stdin_reader() -> Callable[[str], str]:
    def read(prompt: str) -> str:
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")

    return read
