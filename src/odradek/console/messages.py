"""The message browser: record filters, JSON paths, how a key or value is shown, and bounded paged scans.

All of it is pure: `scan` is handed a `read` function that returns the records of offset windows (the console
backs it with a confluent-kafka consumer running off the event loop), so tests drive it with lists.

A scan never reads more than a page plus the filter's scan budget: offset windows are planned so that the
offsets they span add up to at most `page_size + budget` (`page_size` alone without a filter), and when the
budget runs out before a filtered page is full the result says so and carries the position to go on from.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

FORMATS = ("auto", "text", "json", "hex")
FIELDS = ("any", "key", "value", "headers")
MAX_SHOWN_BYTES = 64 * 1024  # a longer key or value is cut when shown, saying how much was left out


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp: int  # epoch ms; -1 when the record has none
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    value_size: int | None = None  # the full size when `value` was cut to MAX_SHOWN_BYTES for keeping

    def cut(self) -> Record:
        """This record with its key and value no longer than MAX_SHOWN_BYTES + 1 (what showing needs)."""
        key, value = self.key, self.value
        if (key is None or len(key) <= MAX_SHOWN_BYTES) and (value is None or len(value) <= MAX_SHOWN_BYTES):
            return self
        return Record(self.partition, self.offset, self.timestamp,
                      key[:MAX_SHOWN_BYTES + 1] if key is not None else None,
                      value[:MAX_SHOWN_BYTES + 1] if value is not None else None, self.headers,
                      len(value) if value is not None else None)


# ---------------------------------------------------------------------------------------------------
# JSON paths


class Wildcard:
    def __repr__(self) -> str:
        return "*"


WILDCARD = Wildcard()
OPERATORS = ("==", "!=", ">=", "<=", "~=", ">", "<")
_NAME = re.compile(r"[^.\[\]\s=!<>~]+")


@dataclass(frozen=True)
class JsonPredicate:
    """`$.a.b[0].c`, `$.items[*].sku`, `$['odd key']`, optionally compared: `== 42`, `!= "x"`, `> 3`, `~= text`
    (contains, case-insensitive). Without a comparison the path must exist. With wildcards, one match
    satisfying the comparison is enough. The operand is JSON (42, "x", true, null) or else plain text."""

    steps: tuple[str | int | Wildcard, ...]
    op: str | None = None
    operand: object = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> JsonPredicate:
        source = text.strip()
        if not source.startswith("$"):
            raise ValueError("a JSON path starts with $, as in $.user.id == 42")
        steps: list[str | int | Wildcard] = []
        i = 1
        while i < len(source) and source[i] not in " =!<>~":
            if source[i] == ".":
                i += 1
                if i < len(source) and source[i] == "*":
                    steps.append(WILDCARD)
                    i += 1
                    continue
                match = _NAME.match(source, i)
                if not match:
                    raise ValueError(f"expected a name after '.' at position {i} of {source!r}")
                steps.append(match.group())
                i = match.end()
            elif source[i] == "[":
                close = _closing_bracket(source, i)
                inner = source[i + 1:close].strip()
                if inner == "*":
                    steps.append(WILDCARD)
                elif re.fullmatch(r"-?\d+", inner):
                    steps.append(int(inner))
                elif len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
                    steps.append(inner[1:-1])
                else:
                    raise ValueError(f"expected [index], [*] or ['name'] in {source!r}, got [{inner}]")
                i = close + 1
            else:
                raise ValueError(f"unexpected {source[i]!r} at position {i} of {source!r}")
        rest = source[i:].strip()
        if not rest:
            return cls(tuple(steps), text=source)
        op = next((o for o in OPERATORS if rest.startswith(o)), None)
        if op is None:
            raise ValueError(f"expected a comparison ({', '.join(OPERATORS)}) after the path, got {rest!r}")
        operand_text = rest[len(op):].strip()
        if not operand_text:
            raise ValueError(f"expected a value after {op}")
        try:
            operand = json.loads(operand_text)
        except ValueError:
            operand = operand_text[1:-1] if len(operand_text) >= 2 and operand_text[0] == operand_text[-1] == "'" \
                else operand_text
        if op in (">", "<", ">=", "<=") and not (_is_number(operand) or isinstance(operand, str)):
            raise ValueError(f"{op} compares numbers or strings")
        return cls(tuple(steps), op, operand, source)

    def select(self, document: object) -> list[object]:
        """The values the path reaches in a parsed JSON document."""
        current = [document]
        for step in self.steps:
            reached = []
            for value in current:
                if step is WILDCARD:
                    if isinstance(value, dict):
                        reached.extend(value.values())
                    elif isinstance(value, list):
                        reached.extend(value)
                elif isinstance(step, int):
                    if isinstance(value, list) and -len(value) <= step < len(value):
                        reached.append(value[step])
                elif isinstance(value, dict) and step in value:
                    reached.append(value[step])
            current = reached
        return current

    def test(self, document: object) -> bool:
        found = self.select(document)
        if self.op is None:
            return bool(found)
        return any(_compare(value, self.op, self.operand) for value in found)

    def matches(self, data: bytes | None) -> bool:
        if data is None:
            return False
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return False
        return self.test(document)


def _closing_bracket(source: str, start: int) -> int:
    quote = None
    for j in range(start + 1, len(source)):
        c = source[j]
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "]":
            return j
    raise ValueError(f"unclosed [ in {source!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def _compare(value: object, op: str, operand: object) -> bool:
    if op == "==":
        return _equal(value, operand)
    if op == "!=":
        return not _equal(value, operand)
    if op == "~=":
        needle = (operand if isinstance(operand, str) else json.dumps(operand)).casefold()
        hay = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return needle in hay.casefold()
    if _is_number(value) and _is_number(operand) or isinstance(value, str) and isinstance(operand, str):
        return {">": value > operand, "<": value < operand, ">=": value >= operand, "<=": value <= operand}[op]
    return False


# ---------------------------------------------------------------------------------------------------
# Filters


def text_of(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


@dataclass(frozen=True)
class RecordFilter:
    """What a record must contain to be shown: `text` in its key, value, headers (name or value) or any of
    them (case-insensitive), and/or a JSON path predicate on its value. Empty: every record."""

    text: str = ""
    field: str = "any"
    path: JsonPredicate | None = None

    @classmethod
    def parse(cls, text: str = "", field: str = "any", json_path: str = "") -> RecordFilter:
        if field not in FIELDS:
            raise ValueError(f"filter field {field!r}: expected one of {', '.join(FIELDS)}")
        path = JsonPredicate.parse(json_path) if json_path.strip() else None
        return cls(text, field, path)

    @property
    def active(self) -> bool:
        return bool(self.text) or self.path is not None

    def matches(self, record: Record) -> bool:
        if self.text:
            needle = self.text.casefold()
            places = []
            if self.field in ("any", "key"):
                places.append(text_of(record.key))
            if self.field in ("any", "value"):
                places.append(text_of(record.value))
            if self.field in ("any", "headers"):
                places.extend(f"{name}: {text_of(value)}" for name, value in record.headers)
            if not any(needle in place.casefold() for place in places):
                return False
        return self.path is None or self.path.matches(record.value)

    def describe(self) -> str:
        parts = []
        if self.text:
            parts.append(f"{'any field' if self.field == 'any' else self.field} contains {self.text!r}")
        if self.path is not None:
            parts.append(f"value matches {self.path.text}")
        return " and ".join(parts) or "every record"


# ---------------------------------------------------------------------------------------------------
# Showing keys and values


@dataclass(frozen=True)
class Shown:
    text: str
    format: str  # text, json, hex or null: what `auto` chose
    note: str = ""


def show(data: bytes | None, fmt: str = "auto", full_size: int | None = None) -> Shown:
    """A key or value as text: UTF-8 text, pretty-printed JSON or a hex dump; cut at MAX_SHOWN_BYTES."""
    if data is None:
        return Shown("null", "null")
    total = full_size if full_size is not None else len(data)
    note = f"first {MAX_SHOWN_BYTES:,} of {total:,} bytes" if total > MAX_SHOWN_BYTES else ""
    part = data[:MAX_SHOWN_BYTES]
    if fmt == "auto":
        fmt = _guess(part, cut=bool(note))
    if fmt == "json":
        try:
            return Shown(json.dumps(json.loads(part), indent=2, ensure_ascii=False), "json", note)
        except (ValueError, UnicodeDecodeError):
            return Shown(part.decode("utf-8", "replace"), "text", _join(note, "not JSON; shown as text"))
    if fmt == "hex":
        return Shown(hexdump(part), "hex", note)
    return Shown(part.decode("utf-8", "replace"), "text", note)


def _guess(data: bytes, cut: bool) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if not cut:
            return "hex"
        try:  # cut inside a multi-byte character
            text = data[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return "hex"
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return "hex"
    stripped = text.lstrip()
    if not cut and stripped[:1] in ("{", "["):
        try:
            json.loads(text)
        except ValueError:
            return "text"
        return "json"
    return "text"


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex bytes, and the printable ASCII."""
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start:start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  |{ascii_}|")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Positions (the cursor of the next page), carried in links as "0:120,3:77"


def format_positions(positions: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


def parse_positions(text: str) -> dict[int, int]:
    positions = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        partition, sep, offset = item.partition(":")
        if not sep or not partition.isdigit() or not offset.isdigit():
            raise ValueError(f"bad position {item!r}: expected PARTITION:OFFSET")
        positions[int(partition)] = int(offset)
    return positions


# ---------------------------------------------------------------------------------------------------
# Scans


@dataclass(frozen=True)
class Window:
    """Offsets [start, end) of one partition to read."""

    start: int
    end: int

    @property
    def span(self) -> int:
        return self.end - self.start


# Reads every record of each window (offset order within a partition); raises on a partition it cannot finish.
Read = Callable[[dict[int, Window]], Mapping[int, Iterable[Record]]]


@dataclass
class ScanResult:
    records: list[Record]  # the page, in the order shown
    positions: dict[int, int]  # where the next page starts (newest first: exclusive upper bounds)
    more: bool  # whether there is anything past `positions` (before the bounds were reached)
    scanned: int = 0  # records read
    budget_exhausted: bool = False  # a filtered page stopped short because the scan budget ran out
    windows: list[dict[int, Window]] = field(default_factory=list)  # what was read, round by round


def scan(read: Read, bounds: Mapping[int, tuple[int, int]], start: Mapping[int, int], *, newest_first: bool,
         page_size: int, record_filter: RecordFilter | None = None, budget: int = 0) -> ScanResult:
    """One page of records matching `record_filter` from the partitions of `bounds` ({partition: (log start,
    end)}), beginning at `start` ({partition: position}; missing: the end when newest first, else the log
    start). Newest first reads backwards from each position (exclusive); otherwise forwards (inclusive).

    Reads at most `page_size` offsets without a filter, `page_size + budget` with one, in rounds: each round
    reads a window below (above) every partition's position, growing while a filtered page stays short. The
    page merges the partitions by timestamp (newest or oldest first) and keeps each partition in offset order;
    matches that did not fit are read again for the next page, whose positions `positions` holds."""
    record_filter = record_filter or RecordFilter()
    low = {p: b[0] for p, b in bounds.items()}
    high = {p: max(b[0], b[1]) for p, b in bounds.items()}
    position = {}
    for p in bounds:
        default = high[p] if newest_first else low[p]
        position[p] = min(max(start.get(p, default), low[p]), high[p])
    allowance = page_size + (budget if record_filter.active else 0)
    matches: dict[int, list[Record]] = {p: [] for p in bounds}
    result = ScanResult([], {}, False)
    want = page_size
    while True:
        found = sum(len(m) for m in matches.values())
        need = page_size - found
        open_ = sorted((p for p in bounds if (position[p] > low[p] if newest_first else position[p] < high[p])),
                       key=lambda p: -position[p] if newest_first else position[p])
        if need <= 0 or not open_ or allowance <= 0:
            break
        open_ = open_[:allowance]  # at least one offset each
        each = max(1, min(allowance // len(open_), math.ceil(want / len(open_))))
        windows = {}
        for p in open_:
            if newest_first:
                windows[p] = Window(max(low[p], position[p] - each), position[p])
            else:
                windows[p] = Window(position[p], min(high[p], position[p] + each))
        allowance -= sum(w.span for w in windows.values())
        result.windows.append(windows)
        records = read(windows)
        for p, window in windows.items():
            kept = []
            for record in records.get(p, ()):
                if window.start <= record.offset < window.end:
                    result.scanned += 1
                    if record_filter.matches(record):
                        kept.append(record.cut())
            if newest_first:
                matches[p].extend(sorted(kept, key=lambda r: -r.offset))
                position[p] = window.start
            else:
                matches[p].extend(sorted(kept, key=lambda r: r.offset))
                position[p] = window.end
            if len(matches[p]) > page_size:  # the page cannot take more of one partition than this
                dropped = matches[p][page_size]
                position[p] = dropped.offset + 1 if newest_first else dropped.offset  # read again next page
                del matches[p][page_size:]
        want = min(want * 2, 1 << 20) if record_filter.active else need

    page = _merge(matches, page_size, newest_first)
    taken: dict[int, int] = {}
    for record in page:
        taken[record.partition] = taken.get(record.partition, 0) + 1
    more = False
    for p in bounds:
        left = matches[p][taken.get(p, 0):]
        if left:  # matches that did not fit: the next page starts at the first of them
            result.positions[p] = left[0].offset + 1 if newest_first else left[0].offset
            more = True
        else:
            result.positions[p] = position[p]
            more = more or (position[p] > low[p] if newest_first else position[p] < high[p])
    result.records = page
    result.more = more
    result.budget_exhausted = record_filter.active and len(page) < page_size and allowance <= 0 and more
    return result


def _merge(matches: Mapping[int, list[Record]], page_size: int, newest_first: bool) -> list[Record]:
    """The first `page_size` records of the partitions' lists merged by timestamp, each list's order kept."""
    sign = -1 if newest_first else 1
    heads = [(sign * records[0].timestamp, p, 0) for p, records in matches.items() if records]
    heapq.heapify(heads)
    page = []
    while heads and len(page) < page_size:
        _, p, i = heapq.heappop(heads)
        page.append(matches[p][i])
        if i + 1 < len(matches[p]):
            heapq.heappush(heads, (sign * matches[p][i + 1].timestamp, p, i + 1))
    return page
