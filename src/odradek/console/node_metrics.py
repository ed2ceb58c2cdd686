"""The nodes' own throughput counters, for the console's charts: bytes in, bytes out and records in, per topic
and in total, read from each node's Prometheus /metrics.

Where a node serves its metrics is its `metrics.listener` setting, asked of the node itself with
DescribeConfigs (an empty or wildcard host there is the host clients reach the node at) and asked again every
minute, as nodes come and go. A node whose listener is a loopback address while clients reach it elsewhere, or
that names the same URL as another node, cannot be told apart from here and is left out. A scrape asks for the
three counters only (`?name[]=`), so the answer is small; the node still collects its other metrics to pick
them out. A node without a metrics listener, or that does not answer, is named with the reason; the rates are
then those of the nodes that did answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from odradek.config import ConfigError, parse_metrics_listener

PREFIX = "kafka_server_brokertopicmetrics_"
BYTES_IN, BYTES_OUT, MESSAGES_IN = PREFIX + "bytesin_total", PREFIX + "bytesout_total", PREFIX + "messagesin_total"
COUNTERS = (BYTES_IN, BYTES_OUT, MESSAGES_IN)
LISTENERS_MAX_AGE_S = 60.0  # how often the nodes' metrics.listener settings are asked again
SCRAPE_TIMEOUT_S = 2.0  # the three counters answer in milliseconds; a node that does not is left out this time
ALL_TOPICS = ""  # the topic of a node's all-topics counters, which carry no topic label

CounterKey = tuple[str, str]  # (counter name, topic or ALL_TOPICS)


@dataclass
class NodeCounters:
    values: dict[int, dict[CounterKey, float]] = field(default_factory=dict)  # node -> its counters
    missing: dict[int, str] = field(default_factory=dict)  # node -> why its counters are not among the values


def parse_samples(text: str, names: Collection[str]) -> list[tuple[str, dict[str, str], float]]:
    """The samples of the named families in Prometheus text format 0.0.4: (name, labels, value)."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
            if name not in names:
                continue
            labels, rest = _labels(line, brace + 1)
        else:
            name, _, rest = line.partition(" ")
            if name not in names:
                continue
            labels = {}
        value = rest.split()[0] if rest.split() else ""
        try:
            samples.append((name, labels, float(value)))
        except ValueError:
            raise ValueError(f"not a Prometheus sample: {line[:200]!r}") from None
    return samples


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _labels(line: str, at: int) -> tuple[dict[str, str], str]:
    """The label pairs from `at` (just after the '{') and what follows the closing '}'."""
    labels: dict[str, str] = {}
    while True:
        while at < len(line) and line[at] in " ,":
            at += 1
        if at < len(line) and line[at] == "}":
            return labels, line[at + 1:]
        equals = line.find("=", at)
        if equals == -1 or equals + 1 >= len(line) or line[equals + 1] != '"':
            raise ValueError(f"not a Prometheus sample: {line[:200]!r}")
        name = line[at:equals].strip()
        at = equals + 2
        value = []
        while at < len(line) and line[at] != '"':
            if line[at] == "\\" and at + 1 < len(line):
                value.append(_ESCAPES.get(line[at + 1], "\\" + line[at + 1]))
                at += 2
            else:
                value.append(line[at])
                at += 1
        if at >= len(line):
            raise ValueError(f"not a Prometheus sample: {line[:200]!r}")
        labels[name] = "".join(value)
        at += 1


def metrics_url(host: str, listener: str) -> str:
    """The /metrics URL of a node reached at `host` whose metrics.listener is `listener`; ValueError with the
    reason when there is none to scrape."""
    if not listener:
        raise ValueError("no metrics.listener")
    try:
        listen_host, port = parse_metrics_listener(listener)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    if port == 0:
        raise ValueError(f"metrics.listener {listener} names no fixed port")
    if listen_host in ("", "0.0.0.0", "::"):
        listen_host = host
    elif _is_loopback(listen_host) and not _is_loopback(host):
        raise ValueError(f"metrics.listener {listener} listens on a loopback address of a node clients reach at {host}")
    shown = f"[{listen_host}]" if ":" in listen_host else listen_host
    return f"http://{shown}:{port}/metrics"


def _is_loopback(host: str) -> bool:
    from odradek.console.web import is_loopback

    return is_loopback(host)


def metrics_urls(found: dict[int, tuple[str, str]]) -> tuple[dict[int, str], dict[int, str]]:
    """{node: (host clients reach it at, metrics.listener)} -> ({node: /metrics URL}, {node: why it has none});
    nodes whose URLs are the same cannot be told apart, so none of them gets one."""
    urls: dict[int, str] = {}
    unreachable: dict[int, str] = {}
    for node, (host, listener) in found.items():
        try:
            urls[node] = metrics_url(host, listener)
        except ValueError as exc:
            unreachable[node] = str(exc)
    for node, url in list(urls.items()):
        others = sorted(other for other, theirs in urls.items() if theirs == url and other != node)
        if others:
            unreachable[node] = f"{url} is also the metrics URL of node {', '.join(map(str, others))}"
    for node in unreachable:
        urls.pop(node, None)
    return urls, unreachable


class NodeMetricsReader:
    """Reads the counters of every node through `cluster` (a ClusterClient, for the nodes and their
    metrics.listener settings) and HTTP."""

    def __init__(self, cluster, timeout_s: float = SCRAPE_TIMEOUT_S, clock: Callable[[], float] = time.monotonic):
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.clock = clock
        self._urls: dict[int, str] = {}
        self._unreachable: dict[int, str] = {}  # nodes with no URL to scrape, and why
        self._urls_at: float | None = None
        self._session = None

    async def _discover(self) -> None:
        found, errors = await self.cluster.metrics_listeners()
        urls, unreachable = metrics_urls(found)
        for node, reason in errors.items():
            unreachable[node] = f"its metrics.listener is unknown ({reason})"
        self._urls, self._unreachable, self._urls_at = urls, unreachable, self.clock()

    async def read(self) -> NodeCounters:
        if self._urls_at is None or self.clock() - self._urls_at > LISTENERS_MAX_AGE_S:
            await self._discover()
        counters = NodeCounters(missing=dict(self._unreachable))
        urls = dict(self._urls)
        results = await asyncio.gather(*(self._scrape(url) for url in urls.values()), return_exceptions=True)
        for (node, url), result in zip(urls.items(), results, strict=True):
            if isinstance(result, BaseException):
                counters.missing[node] = f"{url}: {_reason(result)}"
                continue
            counters.values[node] = {(name, labels.get("topic", ALL_TOPICS)): value for name, labels, value in result}
        return counters

    async def _scrape(self, url: str) -> list[tuple[str, dict[str, str], float]]:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        async with self._session.get(url, params=[("name[]", name) for name in COUNTERS]) as response:
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            return parse_samples(await response.text(), COUNTERS)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__
