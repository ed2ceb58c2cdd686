"""HTML for the console's pages: escaping by construction, the layout, tables, pagers, forms and SVG charts.

Every string that reaches a page goes through `esc` unless it is `Html`, and the only way to make `Html` from
text that came from the cluster or the request is `html()`, whose template is a literal of this package and
whose arguments are escaped. So a topic name, a record value or a header cannot inject markup.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote, urlencode


class Html(str):
    """Markup that is already safe: written into a page as it is."""

    __slots__ = ()


def esc(value: object) -> Html:
    """`value` as text in HTML (attribute values included): Html stays as it is, None is empty."""
    if isinstance(value, Html):
        return value
    if value is None:
        return Html("")
    return Html(escape(str(value), quote=True))


def html(template: str, *args: object, **kwargs: object) -> Html:
    """`template` (a literal of this package) with every argument escaped, unless it is Html already."""
    return Html(template.format(*(esc(a) for a in args), **{k: esc(v) for k, v in kwargs.items()}))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(esc(sep).join(esc(p) for p in parts))


def url(path: str, /, **query: object) -> str:
    """A path with its query; None values are left out. Not escaped for HTML: pass it through html()."""
    pairs = [(k, v) for k, v in query.items() if v is not None and v != ""]
    return f"{path}?{urlencode(pairs)}" if pairs else path


def segment(text: str) -> str:
    """One path segment (a topic name), percent-encoded."""
    return quote(text, safe="")


# ---------------------------------------------------------------------------------------------------
# Numbers and times


def number(value: int | float | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def size(value: int | None) -> str:
    """Bytes in binary units: 1.5 MiB."""
    if value is None or value < 0:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return ""  # pragma: no cover


def byte_rate(value: float | None) -> str:
    """Bytes per second in binary units: 1.5 MiB/s."""
    return "–" if value is None else f"{size(round(value))}/s"


def timestamp(ms: int | None) -> str:
    """Epoch milliseconds as UTC ISO 8601 with milliseconds; '–' when unknown (-1)."""
    if ms is None or ms < 0:
        return "–"
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


# ---------------------------------------------------------------------------------------------------
# Building blocks


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, id: str | None = None,
          empty: str | None = "none", classes: str = "") -> Html:
    """A table; cells are escaped unless Html. An empty table says `empty` instead (None: an empty table)."""
    body = [html("<tr>{}</tr>", join(html("<td>{}</td>", cell) for cell in row)) for row in rows]
    if not body and empty is not None:
        return html('<p class="empty"{}>{}</p>', html(' id="{}"', id) if id else "", empty)
    head = join(html("<th>{}</th>", h) for h in headers)
    return html('<table class="{}"{}><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', classes,
                html(' id="{}"', id) if id else "", head, join(body))


def definitions(pairs: Iterable[tuple[str, object]]) -> Html:
    """Labelled numbers in boxes: the facts at the top of a page."""
    return html('<div class="facts">{}</div>', join(
        html('<div class="fact"><span class="fact-label">{}</span><span class="fact-value">{}</span></div>', k, v)
        for k, v in pairs))


def link(href: str, text: object, **attrs: str) -> Html:
    extra = join(html(' {}="{}"', k.rstrip("_").replace("_", "-"), v) for k, v in attrs.items())  # class_: class
    return html('<a href="{}"{}>{}</a>', href, extra, text)


def hidden(name: str, value: object) -> Html:
    return html('<input type="hidden" name="{}" value="{}">', name, value)


def form(action: str, csrf: str, body: Html, *, method: str = "post", classes: str = "", confirm: str = "",
         id: str | None = None) -> Html:
    """A form; POST forms carry the session's CSRF token. `confirm` asks the browser before submitting."""
    token = hidden("csrf", csrf) if method == "post" else Html("")
    attrs = html(' data-confirm="{}"', confirm) if confirm else Html("")
    if id:
        attrs = html('{} id="{}"', attrs, id)
    return html('<form method="{}" action="{}" class="{}"{}>{}{}</form>', method, action, classes, attrs, token, body)


def field(label: str, control: Html, hint: str = "") -> Html:
    return html('<label>{}<span class="hint">{}</span>{}</label>', label, hint, control)


def text_input(name: str, value: object = "", *, placeholder: str = "", required: bool = False,
               kind: str = "text", id: str | None = None, size_: int | None = None) -> Html:
    return html('<input type="{}" name="{}" value="{}" placeholder="{}"{}{}{}>', kind, name, value, placeholder,
                Html(" required") if required else "", html(' id="{}"', id) if id else "",
                html(' size="{}"', size_) if size_ else "")


def select(name: str, options: Iterable[tuple[str, str]], selected: str | None = None,
           id: str | None = None) -> Html:
    items = join(html('<option value="{}"{}>{}</option>', value, Html(" selected") if value == selected else "", label)
                 for value, label in options)
    return html('<select name="{}"{}>{}</select>', name, html(' id="{}"', id) if id else "", items)


def textarea(name: str, value: object = "", *, rows: int = 3, placeholder: str = "", id: str | None = None) -> Html:
    return html('<textarea name="{}" rows="{}" placeholder="{}"{}>{}</textarea>', name, rows, placeholder,
                html(' id="{}"', id) if id else "", value)


def button(text: str, *, name: str = "", value: str = "", classes: str = "", id: str | None = None) -> Html:
    return html('<button type="submit"{}{} class="{}"{}>{}</button>', html(' name="{}"', name) if name else "",
                html(' value="{}"', value) if value else "", classes, html(' id="{}"', id) if id else "", text)


def notice(text: object, kind: str = "info") -> Html:
    return html('<p class="notice {}">{}</p>', kind, text)


# ---------------------------------------------------------------------------------------------------
# Paging


@dataclass(frozen=True)
class Page:
    """One page of a long list: `items` are rows `start`..`start + len(items)` of `total`."""

    items: list
    number: int  # 1-based
    size: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))

    @property
    def start(self) -> int:
        return (self.number - 1) * self.size


def paginate(items: Sequence, number: int | str | None, size: int) -> Page:
    """Page `number` (1-based; out of range or junk: the nearest page) of `items`, `size` rows each."""
    try:
        wanted = int(number) if number is not None else 1
    except ValueError:
        wanted = 1
    pages = max(1, math.ceil(len(items) / size))
    wanted = min(max(1, wanted), pages)
    start = (wanted - 1) * size
    return Page(list(items[start:start + size]), wanted, size, len(items))


def pager(page: Page, path: str, query: dict[str, object], noun: str = "rows") -> Html:
    """'rows 101–200 of 10,000' with previous/next links that keep the other query parameters."""
    if page.total == 0:
        return Html("")
    first, last = page.start + 1, page.start + len(page.items)
    links = []
    if page.number > 1:
        links.append(link(url(path, **{**query, "page": page.number - 1}), "← previous", rel="prev"))
    if page.number < page.pages:
        links.append(link(url(path, **{**query, "page": page.number + 1}), "next →", rel="next"))
    return html('<p class="pager">{} {}–{} of {} (page {} of {}) {}</p>', noun, number(first), number(last),
                number(page.total), page.number, page.pages, join(links, " "))


# ---------------------------------------------------------------------------------------------------
# Charts


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, unit: str, width: int = 640,
               height: int = 180, id: str | None = None) -> Html:
    """An inline SVG line chart of (time in seconds, value) points, one polyline per named series, with the
    maximum on the y axis and the time span on the x axis. Fewer than two points: a note instead."""
    points = [p for _, values in series for p in values]
    if len({t for t, _ in points}) < 2:
        return html('<p class="empty chart-empty"{}>collecting samples for the chart…</p>',
                    html(' id="{}"', id) if id else "")
    left, right, top, bottom = 56, 8, 8, 22
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    high = max(max(v for _, v in points), 0)
    high = high * 1.1 if high > 0 else 1.0
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(t: float) -> float:
        return left + (t - t0) / (t1 - t0) * plot_w

    def y(v: float) -> float:
        return top + plot_h - (max(v, 0) / high) * plot_h

    lines = []
    for index, (name, values) in enumerate(series):
        if not values:
            continue
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values)
        lines.append(html('<polyline class="series s{}" points="{}"><title>{}</title></polyline>', index % 6,
                          coords, name))
    legend = join(html('<span class="legend s{}">{}</span>', i % 6, name) for i, (name, _) in enumerate(series)
                  if len(series) > 1)
    span = t1 - t0
    span_text = f"last {span / 60:.0f} min" if span >= 120 else f"last {span:.0f} s"
    axis = html('<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/><line class="axis" x1="{}" y1="{}" x2="{}" '
                'y2="{}"/><text class="label" x="{}" y="{}" text-anchor="end">{}</text>'
                '<text class="label" x="{}" y="{}" text-anchor="end">0</text>'
                '<text class="label" x="{}" y="{}" text-anchor="end">{} · now</text>',
                left, top, left, top + plot_h, left, top + plot_h, left + plot_w, top + plot_h,
                left - 4, top + 10, _short(high), left - 4, top + plot_h, left + plot_w, height - 6, span_text)
    return html('<figure class="chart"{}><svg viewBox="0 0 {} {}" width="100%" role="img" aria-label="{}">{}{}</svg>'
                '<figcaption>{} {}</figcaption></figure>', html(' id="{}"', id) if id else "", width, height, unit,
                axis, join(lines), unit, legend)


def _short(value: float) -> str:
    for divisor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= divisor:
            return f"{value / divisor:.1f}{suffix}"
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
