"""The SQL server's REST API, in the style of ksqlDB's: statements, push and pull queries, info, health.

- `POST /ksql` `{"ksql": "...", "streamsProperties": {...}}`: DDL, INSERT, SHOW, DESCRIBE, EXPLAIN,
  TERMINATE; a JSON array with one entity per statement, or HTTP 400 with a `statement_error`.
- `POST /query` `{"ksql": "SELECT ...", "streamsProperties": {...}}`: a chunked JSON array, a header
  then `{"row": {"columns": [...]}}` per row; PRINT streams text lines.
- `POST /query-stream` `{"sql": "SELECT ...", "properties": {...}}`: a header line then one JSON array per
  row (`application/vnd.ksqlapi.delimited.v1`), or one JSON array with `Accept: application/json`.
- `POST /close-query` `{"queryId": ...}`, `GET /info`, `GET /healthcheck`.

Engine calls block (Spark, the cluster), so they run in threads; one statement at a time changes the
catalog (the engine's lock).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging

from aiohttp import web

from odradek.sql import ast
from odradek.sql.ast import type_text
from odradek.sql.engine import Engine, StatementError, describe_schema
from odradek.sql.parser import SqlSyntaxError, parse
from odradek.sql.planner import PlanError
from odradek.sql.pull import pull
from odradek.sql.push import PrintTopic, PushQuery

log = logging.getLogger(__name__)

KSQL_CONTENT_TYPE = "application/vnd.ksql.v1+json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
_BAD_STATEMENT = 40001
_QUERY_ENDPOINT = 40002
_SERVER_ERROR = 50000
_NOT_READY = 50301


def _version() -> str:
    try:
        return importlib.metadata.version("odradek")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _error(status: int, code: int, message: str, statement: str = "") -> web.Response:
    body = {"@type": "statement_error" if status == 400 else "generic_error", "error_code": code,
            "message": message, "statementText": statement, "entities": []}
    return web.json_response(body, status=status, content_type=KSQL_CONTENT_TYPE)


async def _body(request: web.Request) -> dict:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise StatementError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise StatementError("the request body must be a JSON object")
    return body


class SqlServer:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.queries: dict[str, PushQuery | PrintTopic] = {}
        self.app = web.Application(client_max_size=16 * 1024 * 1024, middlewares=[self._gate])
        self.app.add_routes([
            web.post("/ksql", self.ksql),
            web.post("/query", self.query),
            web.post("/query-stream", self.query_stream),
            web.post("/close-query", self.close_query),
            web.get("/info", self.info),
            web.get("/healthcheck", self.healthcheck),
        ])

    @web.middleware
    async def _gate(self, request: web.Request, handler):
        """Statements wait for the catalog (503 until the command topic is read); an unexpected error is
        one JSON line (500), not aiohttp's text page."""
        if request.path not in ("/info", "/healthcheck") and not self.engine.ready.is_set():
            return _error(503, _NOT_READY, "the server is not ready yet: it is reading its command topic")
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as e:
            log.exception("%s %s failed", request.method, request.path)
            line = next((text for text in str(e).splitlines() if text.strip()), type(e).__name__)
            return _error(500, _SERVER_ERROR, line)

    async def ksql(self, request: web.Request) -> web.Response:
        try:
            body = await _body(request)
            text = body.get("ksql")
            if not isinstance(text, str):
                raise StatementError("the request needs a 'ksql' string")
            entities = await asyncio.to_thread(self.engine.execute, text, body.get("streamsProperties") or {})
        except StatementError as e:
            return _error(400, _QUERY_ENDPOINT if "/query" in e.message else _BAD_STATEMENT, e.message, e.statement)
        return web.json_response(entities, content_type=KSQL_CONTENT_TYPE)

    async def info(self, request: web.Request) -> web.Response:
        cluster_id = await asyncio.to_thread(self._cluster_id)
        return web.json_response({"KsqlServerInfo": {
            "version": _version(), "kafkaClusterId": cluster_id, "ksqlServiceId": self.engine.config.service_id,
            "serverStatus": "RUNNING" if self.engine.ready.is_set() else "STARTING"}})

    def _cluster_id(self) -> str:
        try:
            return self.engine.admin.describe_cluster(request_timeout=10).result(10).cluster_id
        except Exception:  # the cluster is away: /info still answers
            return ""

    async def healthcheck(self, request: web.Request) -> web.Response:
        kafka = bool(await asyncio.to_thread(self._cluster_id))
        healthy = kafka and self.engine.ready.is_set()
        body = {"isHealthy": healthy, "details": {"metastore": {"isHealthy": self.engine.ready.is_set()},
                                                  "kafka": {"isHealthy": kafka}}}
        return web.json_response(body, status=200 if healthy else 503)

    async def close_query(self, request: web.Request) -> web.Response:
        try:
            body = await _body(request)
        except StatementError as e:
            return _error(400, _BAD_STATEMENT, e.message)
        running = self.queries.get(body.get("queryId"))
        if running is None:
            return _error(400, _BAD_STATEMENT, f"No query with id {body.get('queryId')}")
        await asyncio.to_thread(running.close)
        return web.Response(status=200)

    # ---------------------------------------------------------------- queries

    def _parse_query(self, text: str) -> ast.Select | ast.Print:
        try:
            statements = parse(text)
        except SqlSyntaxError as e:
            raise StatementError(str(e), text) from None
        if len(statements) != 1 or not isinstance(statements[0], ast.Select | ast.Print):
            raise StatementError("/query and /query-stream take exactly one SELECT or PRINT statement", text)
        return statements[0]

    def _start(self, statement, properties: dict, text: str):
        """A pull result, a started push query, or a PRINT (blocking: run it in a thread)."""
        if isinstance(statement, ast.Print):
            return PrintTopic(statement, self.engine.client_config)
        if statement.emit is None:
            source = self.engine.catalog.sources.get(statement.source.name)
            view = self.engine.views.get(statement.source.name)
            if source is None:
                raise PlanError(f"{statement.source.name} does not exist", statement.source.name)
            if view is None:
                raise PlanError(f"pull queries read tables; {source.name} is a stream: add EMIT CHANGES for a "
                                "push query")
            return pull(statement, source, view)
        self.engine.activate()
        with self.engine.lock:
            plan = self.engine.planner.plan(statement, self.engine.offset_reset(properties), persistent=False)
        query = PushQuery(plan, statement.limit, self.engine.config.trigger_interval_ms, text)
        self.engine.transient[query.id] = query
        return query

    def _discard(self, started) -> None:
        """Stop a query whose stream never began: its client left while it started (blocking)."""
        if isinstance(started, PushQuery):
            self.engine.transient.pop(started.id, None)
            started.close()
        elif isinstance(started, PrintTopic):
            started.discard()

    async def _open(self, text, properties):
        statement = self._parse_query(text)
        try:
            return statement, await asyncio.to_thread(self._start, statement, properties, text)
        except (PlanError, LookupError, RuntimeError, TimeoutError) as e:
            raise StatementError(str(e), text) from None

    async def query(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _body(request)
            text = body.get("ksql")
            if not isinstance(text, str):
                raise StatementError("the request needs a 'ksql' string")
            statement, started = await self._open(text, body.get("streamsProperties") or {})
        except StatementError as e:
            return _error(400, _BAD_STATEMENT, e.message, e.statement)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        header = None
        if not isinstance(started, PrintTopic):
            header = {"queryId": started.id if isinstance(started, PushQuery) else "",
                      "schema": describe_schema(started.columns)}
        try:
            await response.prepare(request)
            if header is not None:
                await response.write(("[" + json.dumps({"header": header}) + ",\n").encode())
        except ConnectionResetError:  # the client left while the query started
            await asyncio.to_thread(self._discard, started)
            return response
        if isinstance(started, PrintTopic):
            await self._stream(request, response, started, started.lines(), lambda line: line + "\n")
            return response
        if isinstance(started, PushQuery):
            limited = await self._stream(request, response, started, started.results(),
                                         lambda row: json.dumps({"row": {"columns": row}}) + ",\n")
            final = {"finalMessage": "Limit Reached"} if limited else {"finalMessage": "Query Completed"}
            await _write(response, json.dumps(final) + "]\n")
        else:
            rows = [json.dumps({"row": {"columns": row}}) for row in started.rows]
            await _write(response, ",\n".join(rows) + ("\n" if rows else "") + "]\n")
        return response  # aiohttp ends it, quietly when the client has left

    async def query_stream(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _body(request)
            text = body.get("sql")
            if not isinstance(text, str):
                raise StatementError("the request needs a 'sql' string")
            statement, started = await self._open(text, body.get("properties") or {})
            if isinstance(started, PrintTopic):
                await asyncio.to_thread(started.discard)
                raise StatementError("PRINT is served by /query", text)
        except StatementError as e:
            return _error(400, _BAD_STATEMENT, e.message, e.statement)
        as_json = "application/json" in request.headers.get("Accept", "") and DELIMITED not in request.headers.get(
            "Accept", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json" if as_json else DELIMITED})
        response.enable_chunked_encoding()
        header = {"queryId": started.id if isinstance(started, PushQuery) else None,
                  "columnNames": [c.name for c in started.columns],
                  "columnTypes": [type_text(c.type, rest=True) for c in started.columns]}
        if as_json:
            first = "[" + json.dumps(header)
            render = lambda row: ",\n" + json.dumps(row)  # noqa: E731
        else:
            first = json.dumps(header) + "\n"
            render = lambda row: json.dumps(row) + "\n"  # noqa: E731
        try:
            await response.prepare(request)
            await response.write(first.encode())
        except ConnectionResetError:  # the client left while the query started
            await asyncio.to_thread(self._discard, started)
            return response
        if isinstance(started, PushQuery):
            await self._stream(request, response, started, started.results(), render)
        else:
            for row in started.rows:
                if not await _write(response, render(row)):
                    break
        if as_json:
            await _write(response, "]\n")
        return response  # aiohttp ends it, quietly when the client has left

    async def _stream(self, request, response, running, items, render) -> bool:
        """Write items until the source ends (True) or the client leaves (False); then stop the query."""
        query_id = getattr(running, "id", None) or str(id(running))
        self.queries[query_id] = running
        iterator = iter(items)
        try:
            while True:
                item = await asyncio.to_thread(next, iterator, StopIteration)
                if item is StopIteration:
                    return not running.closed.is_set()
                if request.transport is None or request.transport.is_closing():
                    return False
                if item is not None and not await _write(response, render(item)):
                    return False
        except RuntimeError as e:  # the query failed: tell the client in the stream, as ksqlDB does
            await _write(response, json.dumps({"errorMessage": {"message": str(e)}}) + "\n")
            return False
        finally:
            self.queries.pop(query_id, None)
            self.engine.transient.pop(query_id, None)
            await asyncio.to_thread(running.close)
            iterator.close()  # a PRINT's generator closes its consumer


async def _write(response: web.StreamResponse, text: str) -> bool:
    try:
        await response.write(text.encode())
        return True
    except (ConnectionResetError, RuntimeError):
        return False
