"""The Links pages and the cluster links' REST API: the console's face of links/admin.py.

The pages list the links, show a link's mirror partitions with their lag, and pause, resume, promote, delete and
create links through forms; `/api/links...` does the same for scripts, JSON in and out, with a JSON error
(`error_code`: the HTTP status, `message`: one line) for what it cannot do. Every operation is a blocking
client of the cluster (links/admin.py), run on the console's worker threads with the person's own cluster
identity, so on a SASL cluster the ACLs of whoever is logged in apply.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from odradek.console.cluster import CLIENT_ID, ClusterClient, ConsoleError
from odradek.console.html import (
    Html,
    button,
    definitions,
    field,
    form,
    html,
    join,
    link,
    notice,
    number,
    segment,
    table,
    text_input,
    textarea,
)
from odradek.console.pages import key_values, topic_url
from odradek.console.web import Context, rest_error
from odradek.links.definition import ACTIVE, LinkDefinition, LinkError

CREATE_FIELDS = {"name", "source_bootstrap", "topics", "groups", "source_config", "sync_configs", "sync_acls"}


def operations():
    """links/admin.py, imported on first use: a node whose console nobody opens never loads the client library."""
    from odradek.links import admin

    return admin


def link_url(name: str, tail: str = "") -> str:
    return f"/links/{segment(name)}{tail}"


def destination_properties(cluster: ClusterClient) -> dict:
    """librdkafka settings for links/admin.py: the cluster as this person's console clients reach it."""
    return {"bootstrap.servers": cluster.settings.bootstrap, "client.id": CLIENT_ID,
            "socket.connection.setup.timeout.ms": max(1000, int(cluster.timeout_s * 1000)),
            "log.connection.close": False, "log_level": 0, **cluster.properties}


async def call(ctx: Context, operation: Callable, *args):
    """`operation(destination properties, *args, timeout)` of links/admin.py on the console's worker threads."""
    cluster = ctx.cluster
    return await cluster.run_blocking(operation, destination_properties(cluster), *args, cluster.timeout_s)


def http_status(error: LinkError) -> int:
    admin = operations()
    for kind, status in ((admin.NoSuchLink, 404), (admin.LinkConflict, 409), (admin.ClusterUnreachable, 504),
                         (admin.ClusterFailure, 502)):
        if isinstance(error, kind):
            return status
    return 400


def console_errors(handler: Callable[[Context], Awaitable[web.StreamResponse]]):
    """A page handler whose LinkError is a ConsoleError: the page says what failed, a form goes back saying it."""

    async def handle(ctx: Context) -> web.StreamResponse:
        try:
            return await handler(ctx)
        except LinkError as exc:
            raise ConsoleError(str(exc)) from None

    return handle


def rest(handler: Callable[[Context], Awaitable[web.StreamResponse]]):
    """A REST handler whose LinkError is answered with its HTTP status and message."""

    async def handle(ctx: Context) -> web.StreamResponse:
        try:
            return await handler(ctx)
        except LinkError as exc:
            return rest_error(http_status(exc), str(exc))

    return handle


# ---------------------------------------------------------------------------------------------------
# Pages


@console_errors
async def links_page(ctx: Context) -> web.StreamResponse:
    admin = operations()
    try:
        rows, failure = await call(ctx, admin.list_links), None
    except LinkError as exc:
        rows, failure = [], str(exc)
    body = [notice(f"Cannot read the links: {failure}", "error") if failure else "",
            html("<p>Each link mirrors topics of another cluster (its source) here, byte for byte at the same "
                 "offsets: the mirror topics are read-only until they are promoted.</p>"),
            table(["Link", "Source", "Topic patterns", "State", "Active mirrors", "Promoted"],
                  [(link(link_url(r["name"]), r["name"], class_="link-name"), r["source"], r["topics"], r["state"],
                    number(r["mirrors"]), number(r["promoted"])) for r in rows],
                  id="links", empty="no links"),
            html("<h2>Create a link</h2>"), create_form(ctx.csrf)]
    return ctx.page("Cluster links", join(body), active="/links")


def create_form(csrf: str) -> Html:
    return form("/links", csrf, join([
        field("Name", text_input("name", required=True, id="new-link-name")),
        field("Source bootstrap", text_input("source_bootstrap", required=True, placeholder="source:9092",
                                             id="new-link-source")),
        field("Topic patterns", text_input("topics", required=True, placeholder="orders,pay.*"),
              "regular expressions a whole source topic name must match, comma-separated"),
        field("Group patterns", text_input("groups", placeholder="app.*"),
              "consumer groups whose committed offsets are copied, comma-separated"),
        html('<label class="inline"><input type="checkbox" name="sync_configs" value="1"> keep copying the source '
             'topics\' config changes</label>'),
        html('<label class="inline"><input type="checkbox" name="sync_acls" value="1"> copy the source\'s ACLs for '
             'the mirror topics and the link\'s groups</label>'),
        field("Source client properties", textarea("source_config", rows=3,
                                                   placeholder="security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512"),
              "one key=value a line, librdkafka names; only the source gets them"),
        button("Create link", id="create-link")]), classes="panel", id="create-link-form")


@console_errors
async def create_link(ctx: Context) -> web.StreamResponse:
    admin = operations()
    data = await ctx.form()
    source_config = {key: value.strip() for key, value in key_values(data.get("source_config", ""), "source config")}
    definition = LinkDefinition(data.get("name", "").strip(), data.get("source_bootstrap", "").strip(),
                                admin.patterns(data.get("topics", "")), admin.patterns(data.get("groups", "")),
                                source_config=source_config, sync_configs=data.get("sync_configs") == "1",
                                sync_acls=data.get("sync_acls") == "1")
    selected = await call(ctx, admin.create_link, definition)
    listed = f" ({', '.join(selected)})" if selected else ""
    return ctx.redirect(link_url(definition.name),
                        f"Created link {definition.name}: {len(selected)} source topics selected now{listed}")


@console_errors
async def link_page(ctx: Context) -> web.StreamResponse:
    admin = operations()
    name = ctx.request.match_info["name"]
    try:
        described = await call(ctx, admin.describe_link, name)
    except admin.NoSuchLink as exc:
        return ctx.page(f"Link {name}", join([notice(str(exc), "error"), link("/links", "All links")]),
                        active="/links", status=404)
    partitions = described["partitions"]
    active = sorted({p["topic"] for p in partitions if p["state"] == ACTIVE})
    promoted = sorted({p["topic"] for p in partitions if p["state"] != ACTIVE})
    facts = definitions([
        ("Source", described["source"]), ("Topic patterns", ", ".join(described["topics"])),
        ("Group patterns", ", ".join(described["groups"]) or "–"),
        ("State", html('<span id="link-state">{}</span>', "PAUSED" if described["paused"] else "ACTIVE")),
        ("Sync configs", "yes" if described["sync_configs"] else "no"),
        ("Sync ACLs", "yes" if described["sync_acls"] else "no"),
        ("Active mirrors", number(len(active))), ("Promoted", number(len(promoted))),
    ])
    silent = any(p["source_end"] is None for p in partitions)
    rows = [(link(topic_url(p["topic"]), p["topic"]), p["partition"], p["state"], number(p["source_end"]),
             number(p["mirror_end"]), number(p["lag"]),
             "–" if p["lag_seconds"] is None else f"{p['lag_seconds']:.1f}") for p in partitions]
    pause = form(link_url(name, "/resume" if described["paused"] else "/pause"), ctx.csrf,
                 button("Resume" if described["paused"] else "Pause", id="pause-link"), classes="inline")
    choices = join(html('<label class="inline"><input type="checkbox" name="topic" value="{}"> {}</label>', topic, topic)
                   for topic in active)
    promote = form(link_url(name, "/promote"), ctx.csrf, join([
        html("<p>Promoting waits (up to the console's timeout) until the mirrors hold the source's records, copies "
             "the groups' offsets once more, and makes the mirror topics ordinary, writable topics that no longer "
             "follow the source. It cannot be undone.</p>"),
        html('<fieldset><legend>Only these topics <span class="hint">none ticked: every active mirror topic'
             '</span></legend>{}</fieldset>', choices),
        field("Type the link's name to promote", text_input("confirm", "", required=True, id="promote-confirm")),
        button("Promote", classes="danger", id="promote-link")]), classes="danger-zone")
    delete = form(link_url(name, "/delete"), ctx.csrf, button("Delete link", classes="danger", id="delete-link"),
                  confirm=f"Delete link {name}? Its promoted topics stay as they are.", classes="inline")
    body = [facts,
            notice("The source does not answer: its end offsets and the lag are unknown.", "warn") if silent else "",
            html("<h2>Mirror partitions</h2>"),
            table(["Topic", "Partition", "State", "Source end", "Mirror end", "Lag", "Lag (s)"], rows, id="mirror-partitions",
                  empty="no mirror topics yet"),
            html("<h2>Mirroring</h2>"), pause,
            html("<h2>Promote (fail over)</h2>"), promote if active else html("<p>No active mirror topic.</p>"),
            html("<h2>Delete</h2>"),
            delete if not active else html("<p>A link is deleted once it feeds no active mirror topic: promote "
                                           "them first.</p>")]
    return ctx.page(f"Link {name}", join(body), active="/links")


def pause_action(paused: bool):
    @console_errors
    async def handle(ctx: Context) -> web.StreamResponse:
        name = ctx.request.match_info["name"]
        await call(ctx, operations().set_paused, name, paused)
        return ctx.redirect(link_url(name), f"{'Paused' if paused else 'Resumed'} link {name}")

    return handle


@console_errors
async def promote_link(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["name"]
    data = await ctx.request.post()
    if str(data.get("confirm", "")).strip() != name:
        raise ConsoleError(f"type '{name}' to promote its mirror topics")
    chosen = [t for t in data.getall("topic", []) if isinstance(t, str)]
    promoted = await call(ctx, operations().promote, name, chosen or None)
    for warning in promoted["warnings"]:
        ctx.flash(f"Warning: {warning}", "warn")
    return ctx.redirect(link_url(name), f"Promoted {len(promoted['topics'])} mirror topics of link {name}: "
                                        f"{', '.join(promoted['topics']) or '–'}")


@console_errors
async def delete_link(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["name"]
    await call(ctx, operations().delete_link, name)
    return ctx.redirect("/links", f"Deleted link {name}")


# ---------------------------------------------------------------------------------------------------
# REST API


async def json_body(ctx: Context) -> dict:
    """The request's JSON object ({} for an empty body); a LinkError (400) for anything else."""
    text = await ctx.request.text()
    if not text.strip():
        return {}
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise LinkError(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise LinkError("the body must be a JSON object")
    return body


def strings(body: dict, key: str) -> tuple[str, ...]:
    """A list of strings, or one comma-separated string (as the CLI's flags take them)."""
    value = body.get(key, [])
    if isinstance(value, str):
        return operations().patterns(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LinkError(f"{key}: expected a list of strings")
    return tuple(value)


def definition_from_json(body: dict) -> LinkDefinition:
    unknown = sorted(set(body) - CREATE_FIELDS)
    if unknown:
        raise LinkError(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; a link has "
                        f"{', '.join(sorted(CREATE_FIELDS))}")
    for key in ("name", "source_bootstrap"):
        if not isinstance(body.get(key), str):
            raise LinkError(f"{key}: required, a string")
    source_config = body.get("source_config", {})
    if not isinstance(source_config, dict) or not all(isinstance(v, str) for v in source_config.values()):
        raise LinkError("source_config: expected an object of string values (librdkafka properties)")
    for key in ("sync_configs", "sync_acls"):
        if not isinstance(body.get(key, False), bool):
            raise LinkError(f"{key}: expected true or false")
    return LinkDefinition(body["name"], body["source_bootstrap"], strings(body, "topics"), strings(body, "groups"),
                          source_config=source_config, sync_configs=body.get("sync_configs", False),
                          sync_acls=body.get("sync_acls", False))


@rest
async def list_api(ctx: Context) -> web.StreamResponse:
    return web.json_response(await call(ctx, operations().list_links))


@rest
async def create_api(ctx: Context) -> web.StreamResponse:
    definition = definition_from_json(await json_body(ctx))
    selected = await call(ctx, operations().create_link, definition)
    return web.json_response({"name": definition.name, "selected_topics": selected}, status=201,
                             headers={"Location": f"/api/links/{segment(definition.name)}"})


@rest
async def describe_api(ctx: Context) -> web.StreamResponse:
    return web.json_response(await call(ctx, operations().describe_link, ctx.request.match_info["name"]))


def pause_api(paused: bool):
    @rest
    async def handle(ctx: Context) -> web.StreamResponse:
        name = ctx.request.match_info["name"]
        await json_body(ctx)  # nothing to say, but a body that is not JSON is refused like anywhere else
        await call(ctx, operations().set_paused, name, paused)
        return web.json_response({"name": name, "paused": paused})

    return handle


@rest
async def promote_api(ctx: Context) -> web.StreamResponse:
    body = await json_body(ctx)
    unknown = sorted(set(body) - {"topics"})
    if unknown:
        raise LinkError(f"unknown field {', '.join(unknown)}; promote takes topics")
    topics = strings(body, "topics") if body.get("topics") is not None else None
    if topics == ():
        raise LinkError("topics: name at least one mirror topic, or leave it out for every active one")
    return web.json_response(await call(ctx, operations().promote, ctx.request.match_info["name"], topics))


@rest
async def delete_api(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["name"]
    await call(ctx, operations().delete_link, name)
    return web.json_response({"name": name, "deleted": True})


ROUTES = (
    ("GET", "/links", links_page, "page"),
    ("POST", "/links", create_link, "page"),
    ("GET", "/links/{name}", link_page, "page"),
    ("POST", "/links/{name}/pause", pause_action(True), "page"),
    ("POST", "/links/{name}/resume", pause_action(False), "page"),
    ("POST", "/links/{name}/promote", promote_link, "page"),
    ("POST", "/links/{name}/delete", delete_link, "page"),
    ("GET", "/api/links", list_api, "rest"),
    ("POST", "/api/links", create_api, "rest"),
    ("GET", "/api/links/{name}", describe_api, "rest"),
    ("POST", "/api/links/{name}/pause", pause_api(True), "rest"),
    ("POST", "/api/links/{name}/resume", pause_api(False), "rest"),
    ("POST", "/api/links/{name}/promote", promote_api, "rest"),
    ("DELETE", "/api/links/{name}", delete_api, "rest"),
)
