"""The Schemas pages: the subjects of the console's schema registry, and a subject's versions, schema, diffs,
references and a compatibility check.

The registry is asked over HTTP (schema_registry.py); a registry that is not configured, down or slow makes a
page that says so. The pages are read-only: the compatibility check registers nothing.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web

from odradek.console.cluster import ConsoleError
from odradek.console.html import (
    Html,
    button,
    definitions,
    field,
    form,
    hidden,
    html,
    join,
    link,
    notice,
    number,
    pager,
    paginate,
    segment,
    select,
    table,
    text_input,
    textarea,
    url,
)
from odradek.console.schema_registry import SCHEMA_TYPES, RegistryClient, RegistryRefused
from odradek.console.web import Context

SUBJECTS_PAGE = 50
VERSIONS_PAGE = 100
NOT_CONFIGURED = ("No schema registry is configured for this console: start `odradek console` with "
                  "--schema-registry URL, or set schema.registry.listener on the node that serves it.")


def subject_url(subject: str, tail: str = "", **query: object) -> str:
    return url(f"/schemas/{segment(subject)}{tail}", **query)


# ---------------------------------------------------------------------------------------------------
# Schema text


def pretty(schema: str, schema_type: str) -> str:
    """An Avro or JSON schema indented, two spaces a level (as it is when it is not JSON); a .proto as it is."""
    if schema_type.upper() in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema), indent=2, ensure_ascii=False)
        except ValueError:
            return schema
    return schema


def schema_diff(old: str, new: str, old_name: str, new_name: str) -> list[str]:
    """A unified diff of two schema texts, line by line (no line ends)."""
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""))


def diff_kind(index: int, line: str) -> str:
    if index < 2 and line.startswith(("--- ", "+++ ")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "same"


def render_diff(lines: Sequence[str]) -> Html:
    """The diff as a <pre>, each line a span marked add, del, hunk, file or same; escaped like any text."""
    if not lines:
        return html('<p class="empty" id="schema-diff">the two versions have the same schema</p>')
    kinds = [diff_kind(i, line) for i, line in enumerate(lines)]
    added, removed = kinds.count("add"), kinds.count("del")
    spans = join(html('<span class="{}">{}</span>', kind, line or " ") for kind, line in zip(kinds, lines, strict=True))
    return html('<p class="scan" id="diff-summary">{} line{} added, {} removed</p>'
                '<pre class="data schema diff" id="schema-diff">{}</pre>',
                added, "" if added == 1 else "s", removed, spans)


def parse_references(text: str) -> list[dict]:
    """The check form's references: a JSON list of {"name", "subject", "version"}; empty: none."""
    if not text.strip():
        return []
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConsoleError(f"references: not JSON ({exc})") from None
    if not isinstance(value, list) or not all(
            isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
            and isinstance(r.get("version"), int) for r in value):
        raise ConsoleError('references: expected a list of {"name": ..., "subject": ..., "version": N}')
    return value


# ---------------------------------------------------------------------------------------------------
# Pages


def not_configured(ctx: Context) -> web.StreamResponse:
    return ctx.page("Schemas", html('<p class="notice warn" id="no-registry">{}</p>', NOT_CONFIGURED),
                    active="/schemas", status=404)


def unavailable(ctx: Context, title: str, exc: ConsoleError) -> web.StreamResponse:
    return ctx.page(title, html('<p class="notice error" id="registry-error">{}</p>', str(exc)), active="/schemas",
                    status=502)


def level_text(own: str | None, global_level: str) -> str:
    return own if own else f"{global_level or '–'} (global)"


async def describe(registry: RegistryClient, subject: str) -> tuple[dict | None, str | None, str | None]:
    """(latest version, the subject's own compatibility level, None) or (None, None, why)."""
    try:
        latest, level = await asyncio.gather(registry.version(subject, "latest"), registry.subject_level(subject))
    except ConsoleError as exc:
        return None, None, str(exc)
    return latest, level, None


async def subjects(ctx: Context) -> web.StreamResponse:
    registry = ctx.console.registry
    if registry is None:
        return not_configured(ctx)
    try:
        names, global_level = await asyncio.gather(registry.subjects(), registry.global_level())
    except ConsoleError as exc:
        return unavailable(ctx, "Schemas", exc)
    search = ctx.query.get("q", "").strip()
    page = paginate(sorted(n for n in names if search.lower() in n.lower()), ctx.query.get("page"), SUBJECTS_PAGE)
    described = await asyncio.gather(*(describe(registry, s) for s in page.items))
    rows = []
    for subject, (latest, level, error) in zip(page.items, described, strict=True):
        name = link(subject_url(subject), subject, class_="subject-link")
        if latest is None:
            rows.append((name, html('<span class="bad">{}</span>', error), "", "", ""))
            continue
        rows.append((name, latest.get("version", "–"), latest.get("id", "–"), latest["schemaType"],
                     level_text(level, global_level)))
    search_form = form("/schemas", "", join([text_input("q", search, placeholder="subject contains",
                                                        id="subject-search"), button("Filter")]),
                       method="get", classes="inline")
    facts = definitions([("Registry", registry.base), ("Subjects", html('<span id="subject-count">{}</span>',
                                                                          number(len(names)))),
                         ("Global compatibility", html('<span id="global-level">{}</span>', global_level or "–"))])
    body = join([facts, search_form, pager(page, "/schemas", {"q": search}, "subjects"),
                 table(["Subject", "Latest version", "Id", "Type", "Compatibility"], rows, id="subjects",
                       empty="no subjects")])
    return ctx.page("Schemas", body, active="/schemas")


@dataclass(frozen=True)
class Check:
    """A compatibility check the person posted: what they pasted, and the registry's answer."""

    schema: str
    schema_type: str
    references: str
    result: Html


def version_param(value: str | None, versions: Sequence[int], what: str, ctx: Context) -> int | None:
    """A version of the subject from the query ('latest' is the last); None when not given or not one."""
    if value is None or value.strip() == "":
        return None
    if value.strip() == "latest":
        return versions[-1]
    try:
        version = int(value.strip())
    except ValueError:
        version = None
    if version not in versions:
        ctx.flash(f"{what}: the subject has no version {value.strip()!r}", "warn")
        return None
    return version


async def subject(ctx: Context) -> web.StreamResponse:
    return await subject_page(ctx, None)


async def subject_page(ctx: Context, check: Check | None) -> web.StreamResponse:
    registry = ctx.console.registry
    if registry is None:
        return not_configured(ctx)
    name = ctx.request.match_info["subject"]
    title = f"Subject {name}"
    try:
        versions, own_level, global_level = await asyncio.gather(
            registry.versions(name), registry.subject_level(name), registry.global_level())
    except RegistryRefused as exc:
        if exc.status == 404:
            return ctx.page(title, html('<p class="notice error" id="registry-error">{} {}</p>', str(exc),
                                        link("/schemas", "All subjects")), active="/schemas", status=404)
        return unavailable(ctx, title, exc)
    except ConsoleError as exc:
        return unavailable(ctx, title, exc)
    if not versions:
        return ctx.page(title, notice("the subject has no versions", "warn"), active="/schemas", status=404)
    query = ctx.query
    selected = version_param(query.get("version"), versions, "version", ctx) or versions[-1]
    newest_first = list(reversed(versions))
    page = paginate(newest_first, query.get("page"), VERSIONS_PAGE)
    diff_to = version_param(query.get("to"), versions, "diff to", ctx) or selected
    diff_from = version_param(query.get("from"), versions, "diff from", ctx)
    if diff_from is None:
        older = [v for v in versions if v < diff_to]
        diff_from = older[-1] if older else None
    wanted = sorted({*page.items, selected, diff_to, *([diff_from] if diff_from is not None else [])})
    try:
        fetched = await asyncio.gather(*(registry.version(name, v) for v in wanted))
    except ConsoleError as exc:
        return unavailable(ctx, title, exc)
    records = dict(zip(wanted, fetched, strict=True))
    shown = records[selected]
    level = level_text(own_level, global_level)

    facts = definitions([
        ("Versions", number(len(versions))), ("Latest version", versions[-1]),
        ("Shown", html('<span id="shown-version">version {}</span>', selected)),
        ("Schema id", html('<span id="schema-id">{}</span>', shown.get("id", "–"))),
        ("Type", html('<span id="schema-type">{}</span>', shown["schemaType"])),
        ("Compatibility", html('<span id="subject-level">{}</span>', level)),
    ])
    version_rows = []
    for v in page.items:
        record = records[v]
        previous = [p for p in versions if p < v]
        version_rows.append((
            link(subject_url(name, version=v), html("<b>{}</b>", v) if v == selected else v,
                 class_="version-link"),
            record.get("id", "–"), record["schemaType"], number(len(record["references"])),
            link(subject_url(name, version=v, **{"from": previous[-1], "to": v}) + "#diff",
                 f"diff with {previous[-1]}") if previous else "–"))
    body = [html('<p>{}</p>', link("/schemas", "← all subjects")), facts,
            html("<h2>Versions</h2>"), pager(page, subject_url(name), {"version": selected}, "versions"),
            table(["Version", "Id", "Type", "References", ""], version_rows, id="versions"),
            html("<h2>Version {}</h2>", selected),
            html('<pre class="data schema {}" id="schema-text">{}</pre>', shown["schemaType"].lower(),
                 pretty(str(shown["schema"]), shown["schemaType"]))]

    body.append(html("<h2>References</h2>"))
    reference_rows = [(r.get("name", ""), link(subject_url(str(r.get("subject", "")), version=r.get("version")),
                                               r.get("subject", "")), r.get("version", ""))
                      for r in shown["references"] if isinstance(r, dict)]
    body.append(table(["Name", "Subject", "Version"], reference_rows, id="references",
                      empty="this version references no other schema"))

    body.append(html('<h2 id="diff">Diff</h2>'))
    if len(versions) < 2:
        body.append(html('<p class="empty" id="schema-diff">only one version: nothing to compare</p>'))
    else:
        choices = [(str(v), f"version {v}") for v in newest_first]
        body.append(form(subject_url(name) + "#diff", "", join([
            hidden("version", selected),
            field("From", select("from", choices, str(diff_from) if diff_from is not None else None, id="diff-from")),
            field("To", select("to", choices, str(diff_to), id="diff-to")),
            button("Compare", id="diff-submit")]), method="get", classes="inline"))
        if diff_from is None:
            body.append(html('<p class="empty" id="schema-diff">version {} is the first: choose a version to compare '
                             'it with</p>', diff_to))
        else:
            old, new = records[diff_from], records[diff_to]
            body.append(render_diff(schema_diff(pretty(str(old["schema"]), old["schemaType"]),
                                                pretty(str(new["schema"]), new["schemaType"]),
                                                f"version {diff_from}", f"version {diff_to}")))

    body.append(html('<h2 id="check">Check compatibility</h2><p>Is a schema compatible with this subject under its '
                     'compatibility level, {}? The registry checks it against the versions that level names, and '
                     'registers nothing.</p>', level))
    if check is None:
        references = json.dumps(shown["references"], indent=2) if shown["references"] else ""
        check = Check(pretty(str(shown["schema"]), shown["schemaType"]), shown["schemaType"], references, Html(""))
    body.append(check.result)
    body.append(form(subject_url(name, "/check", version=selected) + "#check", ctx.csrf, join([
        field("Schema", textarea("schema", check.schema, rows=14, id="check-schema")),
        field("Type", select("schema_type", [(t, t) for t in SCHEMA_TYPES], check.schema_type, id="check-type")),
        field("References", textarea("references", check.references, rows=3, id="check-references",
                                     placeholder='[{"name": "other.proto", "subject": "other", "version": 1}]'),
              "optional, as JSON"),
        button("Check compatibility", id="check-submit")]), classes="panel", id="check-form"))
    return ctx.page(title, join(body), active="/schemas")


async def check_compatibility(ctx: Context) -> web.StreamResponse:
    registry = ctx.console.registry
    if registry is None:
        return not_configured(ctx)
    name = ctx.request.match_info["subject"]
    data = await ctx.form()
    schema = data.get("schema", "").replace("\r\n", "\n")
    schema_type = data.get("schema_type", "AVRO").strip().upper() or "AVRO"
    references_text = data.get("references", "")
    try:
        if not schema.strip():
            raise ConsoleError("paste a schema to check")
        if schema_type not in SCHEMA_TYPES:
            raise ConsoleError(f"type: expected one of {', '.join(SCHEMA_TYPES)}")
        answer = await registry.check(name, schema, schema_type, parse_references(references_text))
    except RegistryRefused as exc:
        code = f" (error {exc.error_code})" if exc.error_code is not None else ""
        result = html('<p class="notice error" id="check-result">The registry refused the check: {}{}</p>',
                      str(exc), code)
    except ConsoleError as exc:
        result = html('<p class="notice error" id="check-result">{}</p>', str(exc))
    else:
        if answer["is_compatible"]:
            result = html('<p class="notice good" id="check-result">Compatible with {}.</p>', name)
        else:
            reasons = join(html("<li>{}</li>", m) for m in answer["messages"]) or \
                html("<li>the registry gave no reason</li>")
            result = html('<div class="notice error" id="check-result"><p>Not compatible with {}:</p>'
                          '<ul id="check-reasons">{}</ul></div>', name, reasons)
    return await subject_page(ctx, Check(schema, schema_type, references_text, result))


ROUTES = (
    ("GET", "/schemas", subjects, "page"),
    ("GET", "/schemas/{subject}", subject, "page"),
    ("POST", "/schemas/{subject}/check", check_compatibility, "page"),
)
