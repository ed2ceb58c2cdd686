"""The console's pages: one handler per page or form, each asking the cluster what it shows.

Long lists (topics, partitions, groups, offsets, transactions, ACLs) are paged, and what a page asks the
cluster is limited to the rows it shows (offsets and sizes of the page's partitions only). Live parts of a
page (the overview's numbers, a group's lag) are fragments the page's script fetches again every few seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web

from odradek.console.cluster import ConsoleError, kafka_reason
from odradek.console.html import (
    Html,
    button,
    byte_rate,
    definitions,
    field,
    form,
    hidden,
    html,
    join,
    line_chart,
    link,
    notice,
    number,
    pager,
    paginate,
    segment,
    select,
    size,
    table,
    text_input,
    textarea,
    timestamp,
    url,
)
from odradek.console.messages import (
    FIELDS,
    FORMATS,
    Record,
    RecordFilter,
    ScanResult,
    format_positions,
    parse_positions,
    scan,
    show,
)
from odradek.console.web import Context

T = TypeVar("T")

PAGE_SIZE = 50  # rows of a list page
PARTITIONS_PAGE = 100
PAGE_SIZES = (20, 50, 100, 200)
MAX_MERGED_PARTITIONS = 256  # 'all partitions' in the message browser up to this many
TAIL_PAGE = 100
LIVE_MS = 5000  # how often live fragments are fetched again


# ---------------------------------------------------------------------------------------------------
# Small helpers


async def attempt(work: Awaitable[T]) -> tuple[T | None, str | None]:
    """(result, None), or (None, why) when the cluster said no: parts of a page that may fail alone."""
    try:
        return await work, None
    except ConsoleError as exc:
        return None, str(exc)


def int_param(value: str | None, name: str, default: int | None = None, low: int | None = None,
              high: int | None = None) -> int | None:
    if value is None or value.strip() == "":
        return default
    try:
        number_ = int(value.strip())
    except ValueError:
        raise ConsoleError(f"{name}: expected a whole number, got {value.strip()!r}") from None
    if low is not None and number_ < low or high is not None and number_ > high:
        span = f"{low if low is not None else '…'}–{high if high is not None else '…'}"
        raise ConsoleError(f"{name}: expected a number in {span}, got {number_}")
    return number_


def key_values(text: str, what: str) -> list[tuple[str, str]]:
    """`name=value` lines (blank lines skipped); the value may contain '='."""
    pairs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ConsoleError(f"{what}: expected name=value, got {line.strip()!r}")
        pairs.append((name.strip(), value))
    return pairs


def is_internal(topic: str) -> bool:
    return topic.startswith("__")


def topic_url(topic: str, tail: str = "") -> str:
    return f"/topics/{segment(topic)}{tail}"


def group_url(group: str, path: str = "/group", **query: object) -> str:
    return url(path, id=group, **query)


def live(path: str, body: Html, id: str, interval_ms: int = LIVE_MS) -> Html:
    return html('<section id="{}" class="live" data-refresh="{}" data-interval="{}">{}</section>', id, path,
                interval_ms, body)


def under_replicated(partition) -> bool:
    return len(partition.isrs) < len(partition.replicas)


def replication_factor(topic) -> int | None:
    partitions = list(topic.partitions.values())
    return len(partitions[0].replicas) if partitions else None


def error_text(error) -> str:
    return kafka_reason(Exception(error))


# ---------------------------------------------------------------------------------------------------
# Overview


async def overview(ctx: Context) -> web.StreamResponse:
    body = live("/fragment/overview", await overview_live(ctx), "overview-live")
    return ctx.page("Cluster", body, active="/")


async def overview_fragment(ctx: Context) -> web.StreamResponse:
    return ctx.fragment(await overview_live(ctx))


async def overview_live(ctx: Context) -> Html:
    cluster = ctx.cluster
    cluster.sampler.touch()
    metadata = await cluster.metadata()
    (described, described_error), (quorum, quorum_error), (dirs, dirs_error) = await asyncio.gather(
        attempt(cluster.describe_cluster()), attempt(cluster.quorum()), attempt(cluster.log_dirs({})))
    partitions = [p for t in metadata.topics.values() if t.error is None for p in t.partitions.values()]
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    for p in partitions:
        leaders[p.leader] = leaders.get(p.leader, 0) + 1
        for r in p.replicas:
            replicas[r] = replicas.get(r, 0) + 1
    if described is not None:
        nodes = [(n.id, n.host, n.port, n.rack) for n in sorted(described.nodes, key=lambda n: n.id)]
        controller = described.controller.id if described.controller is not None else None
        cluster_id = described.cluster_id
    else:
        nodes = [(b.id, b.host, b.port, None) for b in sorted(metadata.brokers.values(), key=lambda b: b.id)]
        controller = metadata.controller_id if metadata.controller_id >= 0 else None
        cluster_id = metadata.cluster_id
    sampler = cluster.sampler
    rate = sampler.records_in.last
    facts = definitions([
        ("Cluster id", cluster_id or "–"),
        ("Controller", controller if controller is not None else "–"),
        ("Brokers", html('<span id="broker-count">{}</span>', len(nodes))),
        ("Topics", html('<span id="topic-count">{}</span>', number(len(metadata.topics)))),
        ("Partitions", html('<span id="partition-count">{}</span>', number(len(partitions)))),
        ("Under-replicated", html('<span id="under-replicated" class="{}">{}</span>',
                                  "bad" if any(under_replicated(p) for p in partitions) else "good",
                                  number(sum(1 for p in partitions if under_replicated(p))))),
        ("Offline", html('<span id="offline" class="{}">{}</span>', "bad" if any(p.leader < 0 for p in partitions)
                         else "good", number(sum(1 for p in partitions if p.leader < 0)))),
        ("Records in", html('<span id="records-in">{}</span>', f"{number(rate)}/s" if rate is not None
                                                                 else "measuring…")),
        ("Bytes in / out", html('<span id="bytes-in">{}</span> / <span id="bytes-out">{}</span>',
                                *(byte_rate(last) if last is not None else "measuring…"
                                  for last in (sampler.bytes_in.last, sampler.bytes_out.last)))),
    ])
    chart = line_chart([("records/s", sampler.records_in.values())], unit="records/s written (all topics)",
                       id="throughput-chart")
    bytes_chart = line_chart([("in", sampler.bytes_in.values()), ("out", sampler.bytes_out.values())],
                             unit="bytes/s produced (in) and fetched by consumers (out), from the nodes' /metrics",
                             id="bytes-chart")
    brokers = table(["Node", "Host", "Port", "Rack", "Leader of", "Replicas", ""],
                    [(n, host, port, rack or "–", number(leaders.get(n, 0)), number(replicas.get(n, 0)),
                      "controller" if n == controller else "") for n, host, port, rack in nodes], id="brokers")
    if quorum is not None:
        voters = ", ".join(str(v["replica_id"]) for v in quorum["current_voters"])
        quorum_part = html('<p>Metadata quorum: leader <b id="quorum-leader">{}</b>, epoch {}, high watermark {}, '
                           'voters {}. {}</p>', quorum["leader_id"], quorum["leader_epoch"],
                           number(quorum["high_watermark"]), voters, link("/quorum", "Details"))
    else:
        quorum_part = notice(f"Metadata quorum unavailable: {quorum_error}", "warn")
    if dirs is not None and dirs[1]:
        disk = table(["Node", "Log dir", "Usable", "Total", "State"],
                     [(d.broker, d.path, size(d.usable_bytes), size(d.total_bytes), d.error or "online")
                      for d in dirs[1]], id="log-dirs")
    else:
        disk = notice(f"Log dirs unavailable: {dirs_error or (dirs[2][0] if dirs and dirs[2] else 'none reported')}",
                      "warn")
    warnings = []
    if described_error:
        warnings.append(notice(f"DescribeCluster failed ({described_error}); nodes from Metadata", "warn"))
    if sampler.last_error:
        warnings.append(notice(f"The last sample failed: {sampler.last_error}", "warn"))
    if sampler.byte_rates_note:
        warnings.append(notice(f"Bytes per second leave out {sampler.byte_rates_note}", "warn"))
    return join([facts, *warnings, html("<h2>Throughput</h2>"), chart, bytes_chart, html("<h2>Nodes</h2>"), brokers,
                 quorum_part, html("<h2>Disks</h2>"), disk])


# ---------------------------------------------------------------------------------------------------
# Topics


async def topics(ctx: Context) -> web.StreamResponse:
    cluster = ctx.cluster
    cluster.sampler.touch()
    metadata = await cluster.metadata()
    search = ctx.query.get("q", "").strip()
    show_internal = ctx.query.get("internal") == "1"
    names = sorted(n for n in metadata.topics if (show_internal or not is_internal(n)) and search.lower() in n.lower())
    page = paginate(names, ctx.query.get("page"), PAGE_SIZE)
    wanted = [(n, p) for n in page.items for p in metadata.topics[n].partitions]
    (marks, _), (dirs, dirs_error) = await asyncio.gather(
        attempt(cluster.watermarks(wanted)),
        attempt(cluster.log_dirs({n: list(metadata.topics[n].partitions) for n in page.items})))
    sizes = dirs[0] if dirs is not None else {}
    rows = []
    for name in page.items:
        topic = metadata.topics[name]
        parts = topic.partitions.values()
        records = None
        if marks is not None:
            known = [marks.get((name, p.id)) for p in parts]
            if all(known):
                records = sum(high - low for low, high in known)
        topic_size = sum(sizes.get((name, p.id), 0) for p in parts) if dirs is not None else None
        rate = cluster.sampler.topic_rates.get(name)
        rows.append((link(topic_url(name), name, class_="topic-link"),
                     error_text(topic.error) if topic.error is not None else number(len(topic.partitions)),
                     replication_factor(topic) or "–", number(sum(1 for p in parts if under_replicated(p))),
                     number(records), size(topic_size), f"{rate:,.1f}/s" if rate is not None else "–",
                     byte_rate(cluster.sampler.topic_bytes_in.get(name)),
                     byte_rate(cluster.sampler.topic_bytes_out.get(name))))
    search_form = form("/topics", "", join([
        text_input("q", search, placeholder="name contains", id="topic-search"),
        html('<label class="inline"><input type="checkbox" name="internal" value="1"{}> internal topics</label>',
             Html(" checked") if show_internal else ""),
        button("Filter")]), method="get", classes="inline")
    create = form("/topics", ctx.csrf, join([
        field("Name", text_input("name", required=True, id="new-topic-name")),
        field("Partitions", text_input("partitions", "", kind="number", placeholder="broker default",
                                       id="new-topic-partitions")),
        field("Replication factor", text_input("replication_factor", "", kind="number", placeholder="broker default")),
        field("Configs", textarea("configs", rows=2, placeholder="retention.ms=86400000"), "one name=value a line"),
        button("Create topic", id="create-topic")]), classes="panel", id="create-topic-form")
    body = join([
        search_form,
        pager(page, "/topics", {"q": search, "internal": "1" if show_internal else None}, "topics"),
        table(["Topic", "Partitions", "Replication", "Under-replicated", "Records", "Size", "Records in", "Bytes in",
               "Bytes out"], rows, id="topics", empty="no topics"),
        notice(f"Sizes unavailable: {dirs_error}", "warn") if dirs_error else "",
        html("<h2>Create a topic</h2>"), create,
    ])
    return ctx.page("Topics", body, active="/topics")


async def create_topic(ctx: Context) -> web.StreamResponse:
    data = await ctx.form()
    name = data.get("name", "").strip()
    if not name:
        raise ConsoleError("a topic needs a name")
    partitions = int_param(data.get("partitions"), "partitions", low=1)
    replication = int_param(data.get("replication_factor"), "replication factor", low=1)
    configs = dict(key_values(data.get("configs", ""), "configs"))
    await ctx.cluster.create_topic(name, partitions, replication, configs)
    return ctx.redirect(topic_url(name), f"Created topic {name}")


async def topic_metadata(ctx: Context, name: str):
    metadata = await ctx.cluster.metadata()
    topic = metadata.topics.get(name)
    if topic is None:
        metadata = await ctx.cluster.metadata(max_age_s=0)
        topic = metadata.topics.get(name)
    if topic is None:
        raise ConsoleError(f"there is no topic '{name}' (or you may not describe it)")
    if topic.error is not None:
        raise ConsoleError(f"cannot describe topic '{name}': {error_text(topic.error)}")
    return topic


def topic_tabs(name: str, active: str) -> Html:
    tabs = (("", "Partitions & configs"), ("/messages", "Messages"), ("/produce", "Produce"))
    return html('<nav class="tabs">{}</nav>', join(
        html('<a href="{}"{}>{}</a>', topic_url(name, tail), Html(' class="active"') if tail == active else "", label)
        for tail, label in tabs))


async def topic(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    cluster = ctx.cluster
    cluster.sampler.touch()
    meta = await topic_metadata(ctx, name)
    ids = sorted(meta.partitions)
    page = paginate(ids, ctx.query.get("page"), PARTITIONS_PAGE)
    wanted = [(name, p) for p in page.items]
    (marks, marks_error), (dirs, dirs_error), (configs, configs_error) = await asyncio.gather(
        attempt(cluster.watermarks(wanted)), attempt(cluster.log_dirs({name: page.items})),
        attempt(cluster.topic_configs(name)))
    sizes = dirs[0] if dirs is not None else {}
    rows = []
    for p in page.items:
        partition = meta.partitions[p]
        mark = marks.get((name, p)) if marks is not None else None
        rows.append((p, partition.leader if partition.leader >= 0 else html('<span class="bad">offline</span>'),
                     ",".join(map(str, partition.replicas)),
                     html('<span class="{}">{}</span>', "bad" if under_replicated(partition) else "",
                          ",".join(map(str, partition.isrs))),
                     number(mark[0]) if mark else "–", number(mark[1]) if mark else "–",
                     number(mark[1] - mark[0]) if mark else "–",
                     size(sizes.get((name, p))) if dirs is not None else "–"))
    sampler = cluster.sampler
    rate = sampler.topic_rates.get(name)
    facts = definitions([("Partitions", html('<span id="partition-total">{}</span>', len(ids))),
                         ("Replication factor", replication_factor(meta) or "–"),
                         ("Records in", f"{rate:,.1f}/s" if rate is not None else "measuring…"),
                         ("Bytes in / out", html('<span id="topic-bytes-in">{}</span> / '
                                                 '<span id="topic-bytes-out">{}</span>',
                                                 byte_rate(sampler.topic_bytes_in.get(name)),
                                                 byte_rate(sampler.topic_bytes_out.get(name))))])
    warnings = [notice(f"Offsets unavailable: {marks_error}", "warn") if marks_error else "",
                notice(f"Sizes unavailable: {dirs_error}", "warn") if dirs_error else ""]
    body = [topic_tabs(name, ""), facts, *warnings, html("<h2>Partitions</h2>"),
            pager(page, topic_url(name), {}, "partitions"),
            table(["Partition", "Leader", "Replicas", "In-sync replicas", "Log start", "High watermark", "Records",
                   "Size"], rows, id="partitions"),
            html("<h2>Configs</h2>")]
    if configs is None:
        body.append(notice(f"Configs unavailable: {configs_error}", "warn"))
    else:
        body.append(configs_table(name, configs, ctx.csrf))
    body += [
        html("<h2>Add partitions</h2>"),
        form(topic_url(name, "/partitions"), ctx.csrf, join([
            field("New partition count", text_input("count", len(ids) + 1, kind="number", id="partition-count-input")),
            button("Add partitions")]), classes="inline"),
        html("<h2>Delete</h2>"),
        form(topic_url(name, "/delete"), ctx.csrf, join([
            field("Type the topic's name to delete it and all its records",
                  text_input("confirm", "", required=True, id="delete-confirm")),
            button("Delete topic", classes="danger", id="delete-topic")]), classes="inline danger-zone"),
    ]
    return ctx.page(f"Topic {name}", join(body), active="/topics")


def config_source(source) -> str:
    """DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...: confluent-kafka gives a ConfigSource or its number."""
    from confluent_kafka.admin import ConfigSource

    if source is None:
        return ""
    if isinstance(source, int) and not hasattr(source, "name"):
        try:
            source = ConfigSource(source)
        except ValueError:
            return str(source)
    return getattr(source, "name", str(source))


def configs_table(name: str, configs: Sequence, csrf: str) -> Html:
    rows = []
    for entry in configs:
        source = config_source(entry.source)
        overridden = source == "DYNAMIC_TOPIC_CONFIG"
        value = "(sensitive)" if entry.is_sensitive else entry.value
        if entry.is_read_only or entry.is_sensitive:
            editor = value if value is not None else "null"
        else:
            editor = form(topic_url(name, "/configs"), csrf, join([
                hidden("name", entry.name), text_input("value", value if value is not None else "", size_=24),
                button("Save", name="action", value="set"),
                button("Reset", name="action", value="delete", classes="link") if overridden else ""]),
                classes="inline config")
        rows.append((html('<span class="{}">{}</span>', "override" if overridden else "", entry.name), editor,
                     source.lower().replace("_", " ")))
    return table(["Name", "Value", "Source"], rows, id="configs")


async def alter_configs(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    data = await ctx.form()
    config = data.get("name", "").strip()
    if not config:
        raise ConsoleError("which config?")
    if data.get("action") == "delete":
        await ctx.cluster.alter_topic_configs(name, {}, [config])
        message = f"{config} is back to its default"
    else:
        await ctx.cluster.alter_topic_configs(name, {config: data.get("value", "")}, [])
        message = f"Set {config}={data.get('value', '')}"
    return ctx.redirect(topic_url(name), message)


async def add_partitions(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    data = await ctx.form()
    count = int_param(data.get("count"), "partition count", low=1)
    if count is None:
        raise ConsoleError("how many partitions?")
    await ctx.cluster.add_partitions(name, count)
    return ctx.redirect(topic_url(name), f"{name} now has {count} partitions")


async def delete_topic(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    data = await ctx.form()
    if data.get("confirm", "").strip() != name:
        raise ConsoleError(f"type '{name}' to delete it")
    await ctx.cluster.delete_topic(name)
    return ctx.redirect("/topics", f"Deleted topic {name}")


# ---------------------------------------------------------------------------------------------------
# Messages


@dataclass(frozen=True)
class BrowseQuery:
    partition: int | None  # None: every partition
    start: str  # newest, oldest, offset, timestamp
    offset: int | None
    timestamp: int | None
    record_filter: RecordFilter
    format: str
    page_size: int
    positions: dict[int, int] | None  # the cursor of a next page
    params: dict[str, str]  # the query, minus the cursor, for links

    @property
    def newest_first(self) -> bool:
        return self.start == "newest"


def parse_browse(query: Mapping[str, str], partition_count: int) -> BrowseQuery:
    """The message browser's form: ConsoleError for what does not parse."""
    from odradek.cli.main import timestamp_ms

    raw_partition = query.get("partition", "")
    if raw_partition in ("", "all"):
        partition = None if partition_count <= MAX_MERGED_PARTITIONS else 0
    else:
        partition = int_param(raw_partition, "partition", low=0, high=max(0, partition_count - 1))
    start = query.get("start", "newest")
    if start not in ("newest", "oldest", "offset", "timestamp"):
        raise ConsoleError(f"start: expected newest, oldest, offset or timestamp, got {start!r}")
    offset = int_param(query.get("offset"), "offset", low=0)
    if start == "offset" and offset is None:
        raise ConsoleError("start at which offset?")
    stamp = None
    if start == "timestamp":
        text = query.get("timestamp", "").strip()
        if not text:
            raise ConsoleError("start at which time?")
        try:
            stamp = timestamp_ms(text)
        except Exception as exc:
            raise ConsoleError(f"timestamp: {exc}") from None
    try:
        record_filter = RecordFilter.parse(query.get("q", ""), query.get("field", "any") or "any",
                                           query.get("path", ""))
    except ValueError as exc:
        raise ConsoleError(f"filter: {exc}") from None
    fmt = query.get("format", "auto") or "auto"
    if fmt not in FORMATS:
        raise ConsoleError(f"format: expected one of {', '.join(FORMATS)}")
    page_size = int_param(query.get("size"), "page size", 50, 1, max(PAGE_SIZES))
    try:
        positions = parse_positions(query["cursor"]) if query.get("cursor") else None
    except ValueError as exc:
        raise ConsoleError(str(exc)) from None
    params = {k: v for k, v in query.items() if k not in ("cursor",) and v != ""}
    if partition is not None:
        params["partition"] = str(partition)
    return BrowseQuery(partition, start, offset, stamp, record_filter, fmt, page_size, positions, params)


async def browse(ctx: Context, name: str, query: BrowseQuery, meta
                 ) -> tuple[ScanResult, list[int], dict[int, tuple[int, int]]]:
    """(the page, the partitions that did not answer, {partition: (log start, end)} when the scan began)."""
    cluster = ctx.cluster
    partitions = [query.partition] if query.partition is not None else sorted(meta.partitions)
    marks = await cluster.watermarks([(name, p) for p in partitions])
    bounds = {p: marks[(name, p)] for p in partitions if marks.get((name, p)) is not None}
    silent = [p for p in partitions if p not in bounds]
    if query.positions is not None:
        start = {p: o for p, o in query.positions.items() if p in bounds}
    elif query.start == "offset":
        start = {p: query.offset for p in bounds}
    elif query.start == "timestamp":
        found = await cluster.offsets([(name, p) for p in bounds], query.timestamp)
        start = {p: found.get((name, p)) if found.get((name, p)) is not None else bounds[p][1] for p in bounds}
    else:
        start = {}
    budget = ctx.console.settings.scan_budget

    def work() -> ScanResult:
        return scan(lambda windows: cluster.read_blocking(name, windows), bounds, start,
                    newest_first=query.newest_first, page_size=query.page_size,
                    record_filter=query.record_filter, budget=budget)

    return await cluster.run_blocking(work), silent, bounds


def record_json(record: Record, fmt: str) -> dict:
    key, value = show(record.key, fmt), show(record.value, fmt, record.value_size)
    return {"partition": record.partition, "offset": record.offset, "timestamp": record.timestamp,
            "time": timestamp(record.timestamp), "key": key.text if record.key is not None else None,
            "key_format": key.format, "value": value.text if record.value is not None else None,
            "value_format": value.format, "value_note": value.note,
            "headers": [[n, show(v, "text").text if v is not None else None] for n, v in record.headers]}


def records_table(records: Sequence[Record], fmt: str) -> Html:
    rows = []
    for record in records:
        item = record_json(record, fmt)
        key = html('<pre class="data {}">{}</pre>', item["key_format"], item["key"]) if item["key"] is not None \
            else html('<span class="null">null</span>')
        value = html('<pre class="data {}">{}</pre>{}', item["value_format"], item["value"],
                     html('<span class="note">{}</span>', item["value_note"]) if item["value_note"] else "") \
            if item["value"] is not None else html('<span class="null">null</span>')
        headers = join(html('<div><b>{}</b>: {}</div>', n, v if v is not None else "null") for n, v in item["headers"])
        rows.append((record.partition, record.offset, item["time"], key, value, headers))
    shown = table(["Partition", "Offset", "Timestamp", "Key", "Value", "Headers"], rows, id="messages",
                  empty=None, classes="records")
    return shown if rows else join([shown, html('<p class="empty" id="no-records">no records</p>')])


async def messages(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    meta = await topic_metadata(ctx, name)
    count = len(meta.partitions)
    try:
        query = parse_browse(ctx.query, count)
    except ConsoleError as exc:
        ctx.flash(str(exc), "error")
        query = parse_browse({}, count)
    result, silent, bounds = await browse(ctx, name, query, meta)
    if count <= MAX_MERGED_PARTITIONS:
        partition_control = select("partition", [("all", "all partitions")] + [(str(p), f"partition {p}")
                                                                             for p in sorted(meta.partitions)],
                                   "all" if query.partition is None else str(query.partition), id="browse-partition")
    else:  # a select of thousands of options would be most of the page
        partition_control = text_input("partition", query.partition, kind="number", id="browse-partition", size_=6)
    q = ctx.query
    controls = form(topic_url(name, "/messages"), "", join([
        field("Partition", partition_control),
        field("Start", select("start", [("newest", "newest first"), ("oldest", "oldest first"),
                                        ("offset", "from offset"), ("timestamp", "from time")], query.start,
                              id="browse-start")),
        field("Offset", text_input("offset", q.get("offset", ""), kind="number", id="browse-offset", size_=8)),
        field("Time", text_input("timestamp", q.get("timestamp", ""), placeholder="2024-05-01T12:00:00Z or ms",
                                 id="browse-timestamp")),
        field("Contains", text_input("q", q.get("q", ""), placeholder="text", id="browse-filter")),
        field("in", select("field", [(f, f) for f in FIELDS], query.record_filter.field, id="browse-field")),
        field("JSON path", text_input("path", q.get("path", ""), placeholder='$.user.id == 42', id="browse-path")),
        field("Show as", select("format", [(f, f) for f in FORMATS], query.format, id="browse-format")),
        field("Page", select("size", [(str(s), str(s)) for s in PAGE_SIZES], str(query.page_size))),
        button("Search", id="browse-submit")]), method="get", classes="browse")
    nav = []
    if result.more:
        nav.append(link(url(topic_url(name, "/messages"), **query.params, cursor=format_positions(result.positions)),
                        "older records →" if query.newest_first else "newer records →", id="next-page"))
    if query.positions is not None:
        nav.append(link(url(topic_url(name, "/messages"), **query.params), "back to the first page"))
    summary = html('<p class="scan" id="scan-summary">{} shown; {} records read ({}).</p>', number(len(result.records)),
                   number(result.scanned), query.record_filter.describe())
    notes = []
    if result.budget_exhausted:
        notes.append(notice(f"The scan budget ({number(ctx.console.settings.scan_budget)} records) ran out before "
                            f"the page filled: follow the link to scan on.", "warn"))
    if query.partition is not None and count > MAX_MERGED_PARTITIONS and ctx.query.get("partition") in (None, "", "all"):
        notes.append(notice(f"This topic has {count} partitions: choose one (merging more than "
                            f"{MAX_MERGED_PARTITIONS} in a page is not offered).", "warn"))
    if silent:
        notes.append(notice(f"Partitions {', '.join(map(str, silent))} did not answer; their records are missing.",
                            "warn"))
    tail_positions = {p: high for p, (_, high) in bounds.items()}
    tail_url = url(f"/api/topics/{segment(name)}/tail", **{k: v for k, v in query.params.items()
                                                           if k in ("q", "field", "path", "format")})
    tail = html('<p class="tail"><button type="button" id="live-tail" data-tail="{}" data-positions="{}">'
                'Live tail</button> <span id="tail-status"></span></p>', tail_url, format_positions(tail_positions))
    body = join([topic_tabs(name, "/messages"), controls, *notes, tail, summary,
                 html('<p class="pager">{}</p>', join(nav, " · ")), records_table(result.records, query.format)])
    return ctx.page(f"Messages of {name}", body, active="/topics")


async def messages_api(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    meta = await topic_metadata(ctx, name)
    query = parse_browse(ctx.query, len(meta.partitions))
    result, silent, _ = await browse(ctx, name, query, meta)
    return web.json_response({
        "records": [record_json(r, query.format) for r in result.records],
        "next": format_positions(result.positions) if result.more else None, "scanned": result.scanned,
        "budget_exhausted": result.budget_exhausted, "silent_partitions": silent})


async def tail_api(ctx: Context) -> web.StreamResponse:
    """Records after `positions` (up to the current end), oldest first, with the positions to ask from next."""
    name = ctx.request.match_info["topic"]
    try:
        positions = parse_positions(ctx.query.get("positions", ""))
        record_filter = RecordFilter.parse(ctx.query.get("q", ""), ctx.query.get("field", "any") or "any",
                                           ctx.query.get("path", ""))
    except ValueError as exc:
        raise ConsoleError(str(exc)) from None
    fmt = ctx.query.get("format", "auto")
    fmt = fmt if fmt in FORMATS else "auto"
    if not positions or len(positions) > MAX_MERGED_PARTITIONS:
        raise ConsoleError("tail which partitions?")
    cluster = ctx.cluster
    marks = await cluster.watermarks([(name, p) for p in positions])
    bounds = {p: (max(m[0], min(positions[p], m[1])), m[1]) for (_, p), m in marks.items() if m is not None}
    budget = ctx.console.settings.scan_budget

    def work() -> ScanResult:
        return scan(lambda windows: cluster.read_blocking(name, windows), bounds, positions, newest_first=False,
                    page_size=TAIL_PAGE, record_filter=record_filter, budget=budget)

    result = await cluster.run_blocking(work)
    return web.json_response({"records": [record_json(r, fmt) for r in result.records],
                              "positions": format_positions({**positions, **result.positions}),
                              "more": result.more})


# ---------------------------------------------------------------------------------------------------
# Produce


async def produce_form(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    meta = await topic_metadata(ctx, name)
    count = len(meta.partitions)
    partition_control = select("partition", [("", "by key (the producer's partitioner)")] +
                               [(str(p), str(p)) for p in range(count)], id="produce-partition") \
        if count <= 1000 else text_input("partition", "", kind="number", placeholder="by key", id="produce-partition")
    body = join([topic_tabs(name, "/produce"), form(topic_url(name, "/produce"), ctx.csrf, join([
        field("Key", text_input("key", "", placeholder="empty: no key", id="produce-key")),
        field("Value", textarea("value", rows=6, id="produce-value")),
        html('<label class="inline"><input type="checkbox" name="null_value" value="1" id="produce-null"> '
             'null value (a tombstone)</label>'),
        field("Headers", textarea("headers", rows=2, placeholder="name=value", id="produce-headers"),
              "one name=value a line"),
        field("Partition", partition_control),
        button("Produce", id="produce-submit")]), classes="panel", id="produce-form")])
    return ctx.page(f"Produce to {name}", body, active="/topics")


async def produce(ctx: Context) -> web.StreamResponse:
    name = ctx.request.match_info["topic"]
    data = await ctx.form()
    meta = await topic_metadata(ctx, name)
    partition = int_param(data.get("partition"), "partition", low=0, high=len(meta.partitions) - 1)
    key = data.get("key", "")
    value = None if data.get("null_value") == "1" else data.get("value", "").replace("\r\n", "\n")
    headers = [(n, v.encode()) for n, v in key_values(data.get("headers", ""), "headers")]
    where = await ctx.cluster.produce(name, key.encode() if key else None,
                                      value.encode() if value is not None else None, headers, partition)
    landed, offset = where
    return ctx.redirect(url(topic_url(name, "/messages"), partition=landed, start="offset", offset=offset),
                        f"Produced a record to partition {landed} at offset {offset}")


# ---------------------------------------------------------------------------------------------------
# Consumer groups


def group_state(description) -> str:
    from odradek.cli.groups import state_name

    return state_name(getattr(description, "state", None))


async def groups(ctx: Context) -> web.StreamResponse:
    from odradek.cli.groups import type_name

    cluster = ctx.cluster
    listings = await cluster.groups()
    search = ctx.query.get("q", "").strip()
    chosen = [g for g in listings if search.lower() in g.group_id.lower()]
    page = paginate(chosen, ctx.query.get("page"), PAGE_SIZE)
    described = await asyncio.gather(*(attempt(cluster.describe_group(g.group_id)) for g in page.items))
    committed = await asyncio.gather(*(attempt(cluster.committed(g.group_id)) for g in page.items))
    wanted = sorted({tp for offsets, _ in committed if offsets for tp in offsets})
    ends, _ = await attempt(cluster.offsets(wanted, "latest"))
    rows = []
    for listing, (description, _), (offsets, _) in zip(page.items, described, committed, strict=True):
        lag = None
        if offsets is not None and ends is not None:
            lag = sum(max(0, ends[tp] - o) for tp, o in offsets.items() if ends.get(tp) is not None)
        members = len(description.members) if description is not None else None
        rows.append((link(group_url(listing.group_id), listing.group_id, class_="group-link"),
                     type_name(getattr(listing, "type", None)) or "–", group_state(listing),
                     number(members), number(lag)))
    search_form = form("/groups", "", join([text_input("q", search, placeholder="group id contains"),
                                            button("Filter")]), method="get", classes="inline")
    body = join([search_form, pager(page, "/groups", {"q": search}, "groups"),
                 table(["Group", "Type", "State", "Members", "Lag"], rows, id="groups", empty="no consumer groups")])
    return ctx.page("Consumer groups", body, active="/groups")


async def group_details(ctx: Context, group: str):
    """(description, members, rows, total lag) of a group; ConsoleError when it does not exist."""
    from odradek.cli.groups import members_of, partition_rows

    cluster = ctx.cluster
    description, committed = await asyncio.gather(cluster.describe_group(group), cluster.committed(group))
    if description is None or group_state(description) == "Dead" and not committed:
        raise ConsoleError(f"there is no group '{group}'")
    members = members_of(description)
    wanted = sorted(set(committed) | {tp for m in members for tp in m.assignment})
    ends = await cluster.offsets(wanted, "latest")
    rows = partition_rows(group, members, committed, ends)
    total = sum(r.lag for r in rows if r.lag is not None and r.lag > 0)
    series = cluster.sampler.watch_group(group)
    now = cluster.sampler.clock()
    if not series.points or now - series.points[-1][0] >= 1:
        series.add(now, total)
    return description, members, rows, total


async def group_live(ctx: Context, group: str) -> Html:
    from odradek.cli.groups import assignment_text, coordinator_of, type_name

    description, members, rows, total = await group_details(ctx, group)
    page = paginate([r for r in rows if r.topic is not None], ctx.query.get("page"), PARTITIONS_PAGE)
    coordinator = coordinator_of(description)
    state = group_state(description)
    facts = definitions([
        ("State", html('<span id="group-state">{}</span>', state)),
        ("Type", type_name(getattr(description, "type", None)) or "–"),
        ("Coordinator", f"{coordinator['id']} ({coordinator['host']}:{coordinator['port']})" if coordinator else "–"),
        ("Assignor", description.partition_assignor or "–"),
        ("Members", html('<span id="member-count">{}</span>', len(members))),
        ("Total lag", html('<span id="group-lag">{}</span>', total)),
    ])
    chart = line_chart([("lag", ctx.cluster.sampler.group_lags.get(group).values()
                         if ctx.cluster.sampler.group_lags.get(group) else [])],
                       unit="records of lag (all partitions)", id="lag-chart")
    member_rows = [(m.consumer_id, m.group_instance_id or "–", m.client_id, m.host, assignment_text(m.assignment))
                   for m in members]
    offsets = [(r.topic, r.partition, number(r.current_offset), number(r.log_end_offset),
                html('<span class="lag">{}</span>', number(r.lag)), r.consumer_id or "–") for r in page.items]
    return join([facts, html("<h2>Lag over time</h2>"), chart, html("<h2>Members</h2>"),
                 table(["Member", "Instance", "Client", "Host", "Assignment"], member_rows, id="members",
                       empty="no active members"),
                 html("<h2>Offsets</h2>"), pager(page, "/group", {"id": group}, "partitions"),
                 table(["Topic", "Partition", "Committed", "Log end", "Lag", "Member"], offsets, id="group-offsets",
                       empty="no committed offsets")])


async def group(ctx: Context) -> web.StreamResponse:
    group_id = ctx.query.get("id", "")
    metadata = await ctx.cluster.metadata()
    live_part = await group_live(ctx, group_id)
    topics = sorted(n for n in metadata.topics if not is_internal(n))
    reset = form("/group/reset", "", join([
        hidden("id", group_id),
        field("Partitions", select("topic", [("", "every partition with a committed offset")] +
                                   [(t, f"topic {t}") for t in topics[:5000]], id="reset-topic")),
        field("Reset to", select("to", [("earliest", "earliest"), ("latest", "latest"), ("offset", "offset"),
                                        ("timestamp", "time"), ("shift", "shift by")], "earliest", id="reset-to")),
        field("Value", text_input("value", "", placeholder="offset, time or ±count", id="reset-value")),
        button("Preview (dry run)", id="reset-preview")]), method="get", classes="inline")
    delete = form(group_url(group_id, "/group/delete"), ctx.csrf, button("Delete group", classes="danger",
                                                                         id="delete-group"),
                  confirm=f"Delete group {group_id} and its committed offsets?", classes="inline danger-zone")
    body = join([live(url("/fragment/group", id=group_id, page=ctx.query.get("page")), live_part, "group-live", 3000),
                 html("<h2>Reset offsets</h2><p>Kafka resets the offsets of a group without active members only: "
                      "stop its consumers first. The preview changes nothing.</p>"), reset,
                 html("<h2>Delete</h2>"), delete])
    return ctx.page(f"Group {group_id}", body, active="/groups")


async def group_fragment(ctx: Context) -> web.StreamResponse:
    return ctx.fragment(await group_live(ctx, ctx.query.get("id", "")))


async def group_api(ctx: Context) -> web.StreamResponse:
    group_id = ctx.query.get("id", "")
    description, members, rows, total = await group_details(ctx, group_id)
    return web.json_response({"group": group_id, "state": group_state(description), "members": len(members),
                              "lag": total, "partitions": [r.as_json() for r in rows if r.topic is not None]})


def reset_spec(to: str, value: str):
    """The form's target as the CLI's ResetSpec; ConsoleError for a bad value."""
    from odradek.cli.groups import ResetSpec
    from odradek.cli.main import timestamp_ms

    value = (value or "").strip()
    if to in ("earliest", "latest"):
        return ResetSpec(to)
    if to == "offset":
        offset = int_param(value, "offset", low=0)
        if offset is None:
            raise ConsoleError("reset to which offset?")
        return ResetSpec("offset", offset)
    if to == "shift":
        shift = int_param(value, "shift")
        if shift is None:
            raise ConsoleError("shift by how many?")
        return ResetSpec("shift", shift)
    if to == "timestamp":
        if not value:
            raise ConsoleError("reset to which time?")
        try:
            return ResetSpec("datetime", timestamp_ms(value))
        except Exception as exc:
            raise ConsoleError(f"time: {exc}") from None
    raise ConsoleError(f"reset to: expected earliest, latest, offset, timestamp or shift, got {to!r}")


def reset_words(spec) -> str:
    return {"earliest": "to the earliest offsets", "latest": "to the latest offsets",
            "offset": f"to offset {spec.value}", "datetime": f"to the first offsets at or after {timestamp(spec.value)}",
            "shift": f"by {spec.value:+d}" if spec.value is not None else ""}[spec.kind]


def format_plan(plan: Sequence) -> str:
    return "\n".join(f"{e.topic}:{e.partition}:{e.new_offset}" for e in plan)


def parse_plan(text: str) -> dict[tuple[str, int], int]:
    """`topic:partition:offset` lines, as the preview hands them to the apply form."""
    plan = {}
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        head, _, offset = line.rpartition(":")
        topic, _, partition = head.rpartition(":")
        if not topic or not partition.isdigit() or not offset.isdigit():
            raise ConsoleError(f"bad plan line {line!r}")
        plan[(topic, int(partition))] = int(offset)
    if not plan:
        raise ConsoleError("the plan is empty")
    return plan


async def reset_preview(ctx: Context) -> web.StreamResponse:
    from odradek.cli.groups import INACTIVE_STATES, ResetInputs, partitions_to_reset, reset_plan
    from odradek.cli.main import CliError

    group_id = ctx.query.get("id", "")
    cluster = ctx.cluster
    spec = reset_spec(ctx.query.get("to", ""), ctx.query.get("value", ""))
    topic_name = ctx.query.get("topic", "").strip()
    description, committed = await asyncio.gather(cluster.describe_group(group_id), cluster.committed(group_id))
    metadata = await cluster.metadata()
    counts = {n: len(t.partitions) for n, t in metadata.topics.items() if t.error is None}
    try:
        partitions = partitions_to_reset([(topic_name, None)] if topic_name else None, not topic_name, counts,
                                         committed)
        if not partitions:
            raise ConsoleError(f"group '{group_id}' has no committed offsets to reset; choose a topic")
        marks = await cluster.watermarks(partitions)
        missing = [f"{t}-{p}" for (t, p), m in marks.items() if m is None]
        if missing:
            raise ConsoleError(f"the offsets of {', '.join(missing)} are unavailable")
        inputs = ResetInputs(committed, marks)
        if spec.kind == "datetime":
            inputs.offsets_for_time = await cluster.offsets(partitions, spec.value)
        plan = reset_plan(partitions, spec, inputs)
    except CliError as exc:
        raise ConsoleError(str(exc)) from None
    state = group_state(description) if description is not None else "Dead"
    rows = [(e.topic, e.partition, number(e.current_offset), number(e.new_offset),
             number(e.new_offset - e.current_offset) if e.current_offset is not None else "–") for e in plan]
    if state in INACTIVE_STATES:
        apply = form(group_url(group_id, "/group/reset"), ctx.csrf, join([
            hidden("plan", format_plan(plan)), button("Apply this plan", id="reset-apply")]), classes="inline")
    else:
        apply = notice(f"The group is {state}: Kafka resets the offsets of a group without active members "
                       "only. Stop its consumers, then preview again.", "warn")
    body = join([html('<p id="dry-run">Dry run of a reset {} for group {}: nothing has changed yet.</p>',
                      reset_words(spec), link(group_url(group_id), group_id)),
                 table(["Topic", "Partition", "Committed", "New offset", "Change"], rows, id="reset-plan"), apply])
    return ctx.page(f"Reset offsets of {group_id}", body, active="/groups")


async def reset_apply(ctx: Context) -> web.StreamResponse:
    from odradek.cli.groups import INACTIVE_STATES

    group_id = ctx.query.get("id", "")
    data = await ctx.form()
    plan = parse_plan(data.get("plan", ""))
    description = await ctx.cluster.describe_group(group_id)
    state = group_state(description) if description is not None else "Dead"
    if state not in INACTIVE_STATES:
        raise ConsoleError(f"the group is {state}: Kafka resets the offsets of a group without active members only")
    await ctx.cluster.commit_offsets(group_id, plan)
    return ctx.redirect(group_url(group_id), f"Reset the offsets of {len(plan)} partitions")


async def delete_group(ctx: Context) -> web.StreamResponse:
    group_id = ctx.query.get("id", "")
    await ctx.cluster.delete_group(group_id)
    return ctx.redirect("/groups", f"Deleted group {group_id}")


# ---------------------------------------------------------------------------------------------------
# Transactions and producers


async def transactions(ctx: Context) -> web.StreamResponse:
    cluster = ctx.cluster
    rows, errors = await cluster.transactions()
    page = paginate(rows, ctx.query.get("page"), PAGE_SIZE)
    now = int(time.time() * 1000)
    table_rows = [(r["transactional_id"], r["state"], r["producer_id"], r["epoch"] if r["epoch"] is not None else "–",
                   r["coordinator"], f"{r['timeout_ms']:,} ms" if r["timeout_ms"] is not None else "–",
                   f"{(now - r['start_ms']) / 1000:,.1f} s" if r["start_ms"] is not None and r["start_ms"] >= 0 else "–",
                   ", ".join(r["partitions"]) or "–") for r in page.items]
    body = [*(notice(f"ListTransactions: {e}", "warn") for e in errors),
            pager(page, "/transactions", {}, "transactional ids"),
            table(["Transactional id", "State", "Producer id", "Epoch", "Coordinator", "Timeout", "Open for",
                   "Partitions"], table_rows, id="transactions", empty="no transactional ids"),
            html("<h2>Producers of a partition</h2><p>The idempotent and transactional producers a partition's leader "
                 "knows (DescribeProducers), with the first offset of each one's open transaction.</p>")]
    topic_name, partition_text = ctx.query.get("topic", ""), ctx.query.get("partition", "")
    body.append(form("/transactions", "", join([
        field("Topic", text_input("topic", topic_name, required=True)),
        field("Partition", text_input("partition", partition_text or "0", kind="number")),
        button("Describe producers")]), method="get", classes="inline"))
    if topic_name:
        partition = int_param(partition_text, "partition", 0, low=0)
        producers, error = await attempt(cluster.producers(topic_name, partition))
        if error:
            body.append(notice(error, "error"))
        else:
            body.append(table(["Producer id", "Epoch", "Last sequence", "Last write", "Coordinator epoch",
                               "Open transaction from"],
                              [(p["producer_id"], p["producer_epoch"], p["last_sequence"], timestamp(p["last_timestamp"]),
                                p["coordinator_epoch"], p["current_txn_start_offset"]
                                if p["current_txn_start_offset"] >= 0 else "–") for p in producers],
                              id="producers", empty="no active producers"))
    return ctx.page("Transactions", join(body), active="/transactions")


# ---------------------------------------------------------------------------------------------------
# Quorum and reassignments


async def quorum(ctx: Context) -> web.StreamResponse:
    cluster = ctx.cluster
    (state, error), (moves, moves_error) = await asyncio.gather(attempt(cluster.quorum()),
                                                                attempt(cluster.reassignments()))
    body = []
    if state is None:
        body.append(notice(f"DescribeQuorum: {error}", "warn"))
    else:
        hw = state["high_watermark"]

        def rows(replicas):
            return [(r["replica_id"], "leader" if r["replica_id"] == state["leader_id"] else "",
                     number(r["log_end_offset"]), number(max(0, hw - r["log_end_offset"])),
                     timestamp(r.get("last_fetch_timestamp")), timestamp(r.get("last_caught_up_timestamp")))
                    for r in replicas]

        headers = ["Node", "", "Log end", "Lag", "Last fetch", "Last caught up"]
        body += [definitions([("Leader", state["leader_id"]), ("Epoch", state["leader_epoch"]),
                              ("High watermark", number(hw))]),
                 html("<h2>Voters</h2>"), table(headers, rows(state["current_voters"]), id="voters"),
                 html("<h2>Observers</h2>"), table(headers, rows(state["observers"]), id="observers",
                                                   empty="no observers")]
    body.append(html("<h2>Partition reassignments</h2>"))
    if moves is None:
        body.append(notice(f"ListPartitionReassignments: {moves_error}", "warn"))
    else:
        body.append(table(["Topic", "Partition", "Replicas", "Adding", "Removing"],
                          [(m["topic"], m["partition_index"], ",".join(map(str, m["replicas"])),
                            ",".join(map(str, m["adding_replicas"])) or "–",
                            ",".join(map(str, m["removing_replicas"])) or "–") for m in moves],
                          id="reassignments", empty="no reassignment in progress"))
    return ctx.page("Quorum and reassignments", join(body), active="/quorum")


# ---------------------------------------------------------------------------------------------------
# ACLs and users


ACL_RESOURCES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
RESOURCE_TYPES = {"CLUSTER": "BROKER"}  # confluent-kafka calls Kafka's CLUSTER resource type BROKER


def resource_name(restype) -> str:
    """Kafka's name of a confluent-kafka ResourceType."""
    return {v: k for k, v in RESOURCE_TYPES.items()}.get(restype.name, restype.name)
ACL_OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
                  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")


def acl_binding(data: Mapping[str, str], *, as_filter: bool = False):
    """An AclBinding (or the AclBindingFilter matching exactly it) from form fields."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    try:
        resource = ResourceType[RESOURCE_TYPES.get(data.get("resource", ""), data.get("resource", ""))]
        if resource.name not in {RESOURCE_TYPES.get(r, r) for r in ACL_RESOURCES}:
            raise KeyError(data.get("resource", ""))
        pattern = ResourcePatternType[data.get("pattern", "LITERAL")]
        operation = AclOperation[data.get("operation", "")]
        permission = AclPermissionType[data.get("permission", "ALLOW")]
    except KeyError as exc:
        raise ConsoleError(f"unknown ACL setting {exc.args[0]!r}") from None
    name = data.get("name", "").strip() or ("kafka-cluster" if resource == ResourceType.BROKER else "")
    principal = data.get("principal", "").strip()
    host = data.get("host", "").strip() or "*"
    if not name or ":" not in principal:
        raise ConsoleError("an ACL needs a resource name and a principal as Type:name (User:alice)")
    kind = AclBindingFilter if as_filter else AclBinding
    try:
        return kind(resource, name, pattern, principal, host, operation, permission)
    except (ValueError, TypeError) as exc:
        raise ConsoleError(f"invalid ACL: {exc}") from None


async def security(ctx: Context) -> web.StreamResponse:
    from odradek.cli.users import user_rows

    cluster = ctx.cluster
    async def acls():
        try:
            return await cluster.acls(), None
        except ConsoleError as exc:
            if exc.code == "SECURITY_DISABLED":
                return None, ("The cluster has no authorizer (authorizer.class.name is not set): every client may do "
                              "everything, and there are no ACLs.")
            return None, str(exc)

    (bindings, acl_error), (users, users_error) = await asyncio.gather(acls(), attempt(cluster.scram_users()))
    body = [html("<h2>ACLs</h2>")]
    if bindings is None:
        body.append(notice(acl_error, "warn"))
    else:
        page = paginate(bindings, ctx.query.get("page"), 100)
        rows = []
        for b in page.items:
            fields = {"resource": resource_name(b.restype), "name": b.name, "pattern": b.resource_pattern_type.name,
                      "principal": b.principal, "host": b.host, "operation": b.operation.name,
                      "permission": b.permission_type.name}
            remove = form("/security/acls/delete", ctx.csrf, join([*(hidden(k, v) for k, v in fields.items()),
                                                                   button("Delete", classes="link danger")]),
                          confirm="Delete this ACL?", classes="inline")
            rows.append((*fields.values(), remove))
        body += [pager(page, "/security", {}, "ACLs"),
                 table(["Resource", "Name", "Pattern", "Principal", "Host", "Operation", "Permission", ""], rows,
                       id="acls", empty="no ACLs")]
    body.append(form("/security/acls", ctx.csrf, join([
        field("Resource", select("resource", [(r, r.lower().replace("_", " ")) for r in ACL_RESOURCES], "TOPIC")),
        field("Name", text_input("name", "", placeholder="orders, or * for every one")),
        field("Pattern", select("pattern", [("LITERAL", "literal"), ("PREFIXED", "prefixed")], "LITERAL")),
        field("Principal", text_input("principal", "", placeholder="User:alice", required=True)),
        field("Host", text_input("host", "*")),
        field("Operation", select("operation", [(o, o.lower().replace("_", " ")) for o in ACL_OPERATIONS], "READ")),
        field("Permission", select("permission", [("ALLOW", "allow"), ("DENY", "deny")], "ALLOW")),
        button("Add ACL")]), classes="panel"))
    body.append(html("<h2>SCRAM users</h2>"))
    if users is None:
        body.append(notice(users_error, "warn"))
    else:
        rows = []
        for row in user_rows(users):
            for credential in row["credentials"]:
                remove = form("/security/users/delete", ctx.csrf, join([
                    hidden("user", row["user"]), hidden("mechanism", credential["mechanism"]),
                    button("Delete", classes="link danger")]), confirm="Delete this credential?", classes="inline")
                rows.append((row["user"], credential["mechanism"], number(credential["iterations"]), remove))
        body.append(table(["User", "Mechanism", "Iterations", ""], rows, id="users", empty="no SCRAM users"))
    body.append(form("/security/users", ctx.csrf, join([
        field("User", text_input("user", "", required=True)),
        field("Password", text_input("password", "", required=True, kind="password")),
        field("Mechanism", select("mechanism", [("SCRAM-SHA-256", "SCRAM-SHA-256"), ("SCRAM-SHA-512", "SCRAM-SHA-512")],
                                  "SCRAM-SHA-256")),
        field("Iterations", text_input("iterations", "4096", kind="number")),
        button("Add user or set password")]), classes="panel"))
    return ctx.page("ACLs and users", join(body), active="/security")


async def create_acl(ctx: Context) -> web.StreamResponse:
    binding = acl_binding(await ctx.form())
    await ctx.cluster.create_acl(binding)
    return ctx.redirect("/security", f"Added: {binding.permission_type.name} {binding.principal} "
                                     f"{binding.operation.name} on {resource_name(binding.restype)} {binding.name}")


async def delete_acl(ctx: Context) -> web.StreamResponse:
    deleted = await ctx.cluster.delete_acls(acl_binding(await ctx.form(), as_filter=True))
    return ctx.redirect("/security", f"Deleted {deleted} ACL{'s' if deleted != 1 else ''}")


async def upsert_user(ctx: Context) -> web.StreamResponse:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from odradek.security.scram import random_nonce

    data = await ctx.form()
    user, password = data.get("user", "").strip(), data.get("password", "")
    if not user or not password:
        raise ConsoleError("a user needs a name and a password")
    mechanism = data.get("mechanism", "SCRAM-SHA-256")
    if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConsoleError(f"unknown mechanism {mechanism!r}")
    iterations = int_param(data.get("iterations"), "iterations", 4096, 4096, 16384)
    upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")],
                                                                       iterations),
                                             password.encode(), random_nonce().encode())
    await ctx.cluster.alter_scram(upsertion, f"cannot set the {mechanism} credential of '{user}'")
    return ctx.redirect("/security", f"Set the {mechanism} credential of {user}")


async def delete_user(ctx: Context) -> web.StreamResponse:
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    data = await ctx.form()
    user, mechanism = data.get("user", ""), data.get("mechanism", "")
    if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConsoleError(f"unknown mechanism {mechanism!r}")
    deletion = UserScramCredentialDeletion(user, ScramMechanism[mechanism.replace("-", "_")])
    await ctx.cluster.alter_scram(deletion, f"cannot delete the {mechanism} credential of '{user}'")
    return ctx.redirect("/security", f"Deleted the {mechanism} credential of {user}")


# ---------------------------------------------------------------------------------------------------

ROUTES = (
    ("GET", "/", overview, "page"),
    ("GET", "/fragment/overview", overview_fragment, "fragment"),
    ("GET", "/topics", topics, "page"),
    ("POST", "/topics", create_topic, "page"),
    ("GET", "/topics/{topic}", topic, "page"),
    ("POST", "/topics/{topic}/configs", alter_configs, "page"),
    ("POST", "/topics/{topic}/partitions", add_partitions, "page"),
    ("POST", "/topics/{topic}/delete", delete_topic, "page"),
    ("GET", "/topics/{topic}/messages", messages, "page"),
    ("GET", "/topics/{topic}/produce", produce_form, "page"),
    ("POST", "/topics/{topic}/produce", produce, "page"),
    ("GET", "/api/topics/{topic}/messages", messages_api, "api"),
    ("GET", "/api/topics/{topic}/tail", tail_api, "api"),
    ("GET", "/groups", groups, "page"),
    ("GET", "/group", group, "page"),
    ("GET", "/fragment/group", group_fragment, "fragment"),
    ("GET", "/api/group", group_api, "api"),
    ("GET", "/group/reset", reset_preview, "page"),
    ("POST", "/group/reset", reset_apply, "page"),
    ("POST", "/group/delete", delete_group, "page"),
    ("GET", "/transactions", transactions, "page"),
    ("GET", "/quorum", quorum, "page"),
    ("GET", "/security", security, "page"),
    ("POST", "/security/acls", create_acl, "page"),
    ("POST", "/security/acls/delete", delete_acl, "page"),
    ("POST", "/security/users", upsert_user, "page"),
    ("POST", "/security/users/delete", delete_user, "page"),
)
