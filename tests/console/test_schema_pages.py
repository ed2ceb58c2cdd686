"""The console's Schemas pages against a real node that serves both the console (metrics.listener) and a schema
registry (schema.registry.listener): subjects, versions, diffs, the compatibility check, escaping; and a
console without a registry, or with one that does not answer."""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import urllib.parse

import pytest
from aiohttp import web

from odradek.cli.console import registry_address
from odradek.config import BrokerConfig
from odradek.console.cluster import ConsoleError
from odradek.console.schema_registry import RegistryClient, RegistryRefused, RegistryUnavailable
from odradek.console.schemas import parse_references, pretty, render_diff, schema_diff
from odradek.console.settings import from_node_config
from tests.conftest import NodeProcess, free_port
from tests.console.harness import Browser, ConsoleProcess, register_schema
from tests.registry.conftest import RegistryHttp, wait_until_serving

FIELDS_V1 = [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": FIELDS_V1}
ORDER_V2 = {**ORDER_V1, "fields": [*FIELDS_V1, NOTE]}
COMPATIBLE = {**ORDER_V1, "fields": [*FIELDS_V1, NOTE, {"name": "coupon", "type": ["null", "string"], "default": None}]}
INCOMPATIBLE = {**ORDER_V1, "fields": [*FIELDS_V1, NOTE, {"name": "customer", "type": "string"}]}  # no default
EVIL = '<img src=x onerror="alert(1)">&\'x'


@pytest.fixture(scope="module")
def schema_node(tmp_path_factory):
    """A node serving the console and a schema registry, with subjects registered over HTTP."""
    http_port, registry_port = free_port(), free_port()
    node = NodeProcess(tmp_path_factory.mktemp("schema-pages") / "data", settings={
        "metrics.listener": f"http://127.0.0.1:{http_port}",
        "schema.registry.listener": f"http://127.0.0.1:{registry_port}"}).start()
    node.console_url = f"http://127.0.0.1:{http_port}"
    node.registry_url = f"http://127.0.0.1:{registry_port}"
    try:
        wait_until_serving(node.registry_url)
        node.ids = {"v1": register_schema(node.registry_url, "orders-value", ORDER_V1),
                    "v2": register_schema(node.registry_url, "orders-value", ORDER_V2),
                    "key": register_schema(node.registry_url, "orders-key", "\"string\""),
                    "json": register_schema(node.registry_url, "events-value",
                                            {"type": "object", "properties": {"kind": {"type": "string"}}}, "JSON")}
        status, answer = RegistryHttp(node.registry_url).put("/config/orders-key", {"compatibility": "NONE"})
        assert status == 200, answer
    except Exception:
        print(node.log_text()[-5000:])
        node.stop()
        raise
    yield node
    node.stop()


def element(body: str, id_: str, tag: str) -> str:
    """The unescaped text inside <tag ... id="id_">...</tag>."""
    found = re.search(rf'<{tag}[^>]*\bid="{id_}"[^>]*>(.*?)</{tag}>', body, re.S)
    assert found, f"no {tag}#{id_} in:\n{body}"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def diff_lines(body: str) -> list[tuple[str, str]]:
    found = re.search(r'<pre[^>]*id="schema-diff"[^>]*>(.*?)</pre>', body, re.S)
    assert found, body
    return [(kind, html.unescape(text)) for kind, text in re.findall(r'<span class="(\w+)">(.*?)</span>',
                                                                      found.group(1), re.S)]


def subject_row(body: str, subject: str) -> list[str]:
    link = f'<a href="/schemas/{urllib.parse.quote(subject, safe="")}" class="subject-link">'
    found = re.search(rf"<tr><td>{re.escape(link)}.*?</tr>", body, re.S)
    assert found, f"no row of {subject}:\n{body}"
    return [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td>(.*?)</td>", found.group(0))]


# ---------------------------------------------------------------------------------------------------
# Against the node


def test_subjects_with_latest_version_type_and_compatibility(schema_node):
    browser = Browser(schema_node.console_url)
    status, _, body = browser.get("/schemas")
    assert status == 200, body
    assert '<a href="/schemas" class="active">Schemas</a>' in body  # in the navigation, as the page shown
    assert element(body, "global-level", "span") == "BACKWARD"
    ids = schema_node.ids
    assert subject_row(body, "orders-value") == ["orders-value", "2", str(ids["v2"]), "AVRO", "BACKWARD (global)"]
    assert subject_row(body, "orders-key") == ["orders-key", "1", str(ids["key"]), "AVRO", "NONE"]
    assert subject_row(body, "events-value") == ["events-value", "1", str(ids["json"]), "JSON", "BACKWARD (global)"]
    status, _, filtered = browser.get("/schemas?q=ORDERS")
    assert "orders-value" in filtered and "orders-key" in filtered and "events-value" not in filtered


def test_a_subjects_versions_schema_text_and_diff(schema_node):
    browser = Browser(schema_node.console_url)
    status, _, body = browser.get("/schemas/orders-value")
    assert status == 200, body
    assert element(body, "shown-version", "span") == "version 2"
    assert element(body, "schema-id", "span") == str(schema_node.ids["v2"])
    assert element(body, "subject-level", "span") == "BACKWARD (global)"
    text = element(body, "schema-text", "pre")
    assert json.loads(text) == ORDER_V2 and '\n  "type": "record",\n' in text  # indented
    assert '"name": "note"' in text
    versions = re.findall(r'class="version-link">(?:<b>)?(\d+)', body)
    assert versions == ["2", "1"]
    assert 'id="references"' in body and "references no other schema" in body

    # The latest version against the one before: the field added, nothing of it removed.
    lines = diff_lines(body)
    assert ("file", "--- version 1") in lines and ("file", "+++ version 2") in lines
    added = [text for kind, text in lines if kind == "add"]
    removed = [text for kind, text in lines if kind == "del"]
    assert any('"name": "note"' in line for line in added), lines
    assert any('"default": null' in line for line in added), lines
    assert all(line.startswith("+") for line in added) and all(line.startswith("-") for line in removed)
    assert not any("note" in line for line in removed), lines
    assert element(body, "diff-summary", "p").startswith(f"{len(added)} lines added, {len(removed)} removed")

    # An older version, and a diff the other way round.
    status, _, old = browser.get("/schemas/orders-value?version=1")
    assert element(old, "shown-version", "span") == "version 1"
    assert json.loads(element(old, "schema-text", "pre")) == ORDER_V1
    assert "only" not in element(old, "schema-diff", "p") and "first" in element(old, "schema-diff", "p")
    _, _, backwards = browser.get("/schemas/orders-value?version=2&from=2&to=1")
    assert any('"name": "note"' in text for kind, text in diff_lines(backwards) if kind == "del")
    _, _, same = browser.get("/schemas/orders-value?from=2&to=2")
    assert "same schema" in element(same, "schema-diff", "p")
    _, _, missing = browser.get("/schemas/orders-value?version=7")
    assert "has no version &#x27;7&#x27;" in missing and element(missing, "shown-version", "span") == "version 2"

    # A subject of one version, and one that does not exist.
    _, _, single = browser.get("/schemas/orders-key")
    assert element(single, "schema-text", "pre") == '"string"' and "nothing to compare" in single
    assert element(single, "subject-level", "span") == "NONE"
    status, _, none = browser.get("/schemas/no-such-subject")
    assert status == 404 and "Subject &#x27;no-such-subject&#x27; not found" in none


def test_the_compatibility_check_shows_the_registrys_answer(schema_node):
    browser = Browser(schema_node.console_url)
    _, _, page = browser.get("/schemas/orders-value")
    assert 'id="check-form"' in page and json.loads(element(page, "check-schema", "textarea")) == ORDER_V2
    check = "/schemas/orders-value/check?version=2"

    status, _, body = browser.post(check, {"schema": json.dumps(COMPATIBLE), "schema_type": "AVRO"})
    assert status == 200, body
    assert element(body, "check-result", "p") == "Compatible with orders-value."
    assert json.loads(element(body, "check-schema", "textarea")) == COMPATIBLE  # what was pasted stays

    status, _, body = browser.post(check, {"schema": json.dumps(INCOMPATIBLE, indent=2), "schema_type": "AVRO"})
    assert status == 200, body
    result = element(body, "check-result", "div")
    assert result.startswith("Not compatible with orders-value"), result
    reasons = re.findall(r"<li>(.*?)</li>", re.search(r'<ul id="check-reasons">(.*?)</ul>', body, re.S).group(1))
    assert any("customer" in r and "READER_FIELD_MISSING_DEFAULT_VALUE" in html.unescape(r) for r in reasons), reasons

    status, _, body = browser.post(check, {"schema": "{not json", "schema_type": "AVRO"})
    assert status == 200, body  # a verbose check names an invalid schema as its reason, as Confluent's does
    assert element(body, "check-result", "div").startswith("Not compatible with orders-value")
    assert "Invalid schema" in re.search(r'<ul id="check-reasons">(.*?)</ul>', body, re.S).group(1)
    status, _, body = browser.post(check, {"schema": json.dumps(COMPATIBLE), "schema_type": "AVRO",
                                           "references": "[1]"})
    assert "references: expected a list" in element(body, "check-result", "p")

    # The check registered nothing; a post without the form's CSRF token is refused.
    assert RegistryHttp(schema_node.registry_url).get("/subjects/orders-value/versions") == (200, [1, 2])
    status, _, body = browser.post(check, {"schema": json.dumps(COMPATIBLE)}, csrf=False)
    assert status == 403 and "CSRF" in body


def test_pages_escape_subject_names_and_schemas(schema_node):
    schema = {"type": "record", "name": "Evil", "doc": "</pre><script>alert(2)</script>",
              "fields": [{"name": "x", "type": "int"}]}
    register_schema(schema_node.registry_url, EVIL, schema)
    browser = Browser(schema_node.console_url)
    _, _, body = browser.get("/schemas?q=onerror")
    assert "<img" not in body and "<script>" not in body
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#x27;x" in body
    href = "/schemas/" + urllib.parse.quote(EVIL, safe="")
    assert subject_row(body, EVIL)[0] == EVIL and f'href="{html.escape(href)}"' in body

    status, _, page = browser.get(href)
    assert status == 200, page
    assert "<img" not in page and "<script>" not in page
    assert re.search(r"<h1>Subject &lt;img src=x onerror=&quot;alert\(1\)&quot;&gt;&amp;&#x27;x</h1>", page)
    assert json.loads(element(page, "schema-text", "pre")) == schema
    status, _, checked = browser.post(href + "/check", {"schema": json.dumps(schema), "schema_type": "AVRO"})
    assert status == 200 and element(checked, "check-result", "p") == f"Compatible with {EVIL}."
    assert "<img" not in checked and "<script>" not in checked


def test_without_a_registry_or_with_one_that_does_not_answer(schema_node, tmp_path):
    """`odradek console` without --schema-registry has no Schemas pages; with a URL nothing answers at, its
    pages say so (502, never a 500)."""
    bare = ConsoleProcess(schema_node.bootstrap, tmp_path / "bare.log")
    dead_url = f"http://127.0.0.1:{free_port()}"
    dead = ConsoleProcess(schema_node.bootstrap, tmp_path / "dead.log", ("--schema-registry", dead_url))
    try:
        bare.wait_ready()
        dead.wait_ready()
        browser = Browser(bare.url)
        status, _, body = browser.get("/")
        assert status == 200 and 'href="/topics"' in body and 'href="/schemas"' not in body
        status, _, body = browser.get("/schemas")
        assert status == 404 and "No schema registry is configured" in element(body, "no-registry", "p")
        assert browser.get("/schemas/orders-value")[0] == 404

        browser = Browser(dead.url)
        _, _, body = browser.get("/")
        assert 'href="/schemas"' in body
        for path in ("/schemas", "/schemas/orders-value"):
            status, _, body = browser.get(path)
            assert status == 502, body
            assert f"cannot reach the schema registry at {dead_url}" in element(body, "registry-error", "p")
        assert f"schemas from {dead_url}" in dead.log_text()
    finally:
        bare.stop()
        dead.stop()


# ---------------------------------------------------------------------------------------------------
# The parts on their own


def test_a_registry_that_is_slow_or_is_not_one():
    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(3)
        return web.json_response([])

    async def not_a_registry(_: web.Request) -> web.Response:
        return web.Response(text="<html>hello</html>", content_type="text/html")

    async def refuses(_: web.Request) -> web.Response:
        return web.json_response({"error_code": 40401, "message": "Subject 'x' not found."}, status=404)

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/slow/subjects", slow)
        app.router.add_get("/html/subjects", not_a_registry)
        app.router.add_get("/refuses/subjects/x/versions", refuses)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        clients = []
        try:
            slow_client = RegistryClient(base + "/slow", timeout_s=0.5)
            clients.append(slow_client)
            with pytest.raises(RegistryUnavailable, match="did not answer within 0.5 s"):
                await slow_client.subjects()
            html_client = RegistryClient(base + "/html")
            clients.append(html_client)
            with pytest.raises(RegistryUnavailable, match="not JSON: is it a schema registry"):
                await html_client.subjects()
            refusing = RegistryClient(base + "/refuses/")
            clients.append(refusing)
            with pytest.raises(RegistryRefused) as refused:
                await refusing.versions("x")
            assert (refused.value.status, refused.value.error_code) == (404, 40401)
            missing = RegistryClient(base + "/nothing")
            clients.append(missing)
            with pytest.raises(RegistryUnavailable, match="answered GET /subjects with HTTP 404"):
                await missing.subjects()
        finally:
            for client in clients:
                await client.close()
            await runner.cleanup()

    asyncio.run(main())


def test_registry_urls_from_the_node_and_the_command_line():
    def settings(listener: str):
        return from_node_config(BrokerConfig({"listeners": "PLAINTEXT://:19092,CONTROLLER://127.0.0.1:19093",
                                              "log.dirs": "/tmp/x", "schema.registry.listener": listener}))

    assert settings("").schema_registry == ""
    assert settings("http://0.0.0.0:18081").schema_registry == "http://127.0.0.1:18081"
    assert settings("http://:18081").schema_registry == "http://127.0.0.1:18081"
    assert settings("http://10.1.2.3:18081/").schema_registry == "http://10.1.2.3:18081"
    assert settings("http://[::1]:18081").schema_registry == "http://[::1]:18081"
    assert RegistryClient("http://127.0.0.1:0", port=lambda: 18099).base == "http://127.0.0.1:18099"
    assert RegistryClient("http://127.0.0.1:8081/", port=lambda: 18099).base == "http://127.0.0.1:8081"

    assert registry_address("http://127.0.0.1:8081/") == "http://127.0.0.1:8081"
    assert registry_address("https://registry.example.com/prefix") == "https://registry.example.com/prefix"
    for bad in ("127.0.0.1:8081", "ftp://h:1", "http://user:pw@h:8081", "http://h:port", "http://h:1/?x=1"):
        with pytest.raises(argparse.ArgumentTypeError):
            registry_address(bad)


def test_schema_text_diffs_and_references():
    assert pretty('{"type":"string"}', "AVRO") == '{\n  "type": "string"\n}'
    assert pretty("not json {", "JSON") == "not json {"
    proto = 'syntax = "proto3";\nmessage A {\n  int32 x = 1;\n}\n'
    assert pretty(proto, "PROTOBUF") == proto

    out = render_diff(schema_diff('{\n  "a": "<b>"\n}', '{\n  "a": "<b>",\n  "c": "</pre>"\n}', "version 1",
                                  "version 2"))
    assert "<b>" not in out and out.count("</pre>") == 1
    assert '<span class="del">-  &quot;a&quot;: &quot;&lt;b&gt;&quot;</span>' in out
    assert '<span class="add">+  &quot;c&quot;: &quot;&lt;/pre&gt;&quot;</span>' in out
    assert '<span class="hunk">@@' in out and '<span class="file">--- version 1</span>' in out
    assert "2 lines added, 1 removed" in out
    assert "same schema" in render_diff([])

    assert parse_references("") == []
    refs = [{"name": "a.proto", "subject": "a", "version": 1}]
    assert parse_references(json.dumps(refs)) == refs
    for bad in ("{", "{}", '[{"name": "a.proto"}]', '[{"name": "a", "subject": "a", "version": "1"}]'):
        with pytest.raises(ConsoleError):
            parse_references(bad)
