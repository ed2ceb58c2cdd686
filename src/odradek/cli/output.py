"""What the CLI prints: aligned tables for people, JSON for scripts, and record rendering for `consume`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def text(data: bytes | str | None) -> str | None:
    """Bytes as text: UTF-8 with undecodable bytes replaced by U+FFFD; None stays None."""
    if data is None or isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", errors="replace")


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) if value else "-"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces; None and empty lists shown as '-'."""
    cells = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def dumps(document: Any) -> str:
    """A JSON document for `--output json`: keys in a fixed order, non-ASCII kept as is."""
    return json.dumps(document, indent=2, ensure_ascii=False)


def print_json(document: Any) -> None:
    print(dumps(document))


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    print(table(headers, rows))


# ---------------------------------------------------------------------------------------------------
# Records (consume)

NULL_LITERAL = b"null"
NO_HEADERS = b"NO_HEADERS"
TIMESTAMP_TYPES = {0: None, 1: "CreateTime", 2: "LogAppendTime"}


def record_json(topic: str, partition: int, offset: int, timestamp: int | None, timestamp_type: int,
                key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None) -> str:
    """One record as a single-line JSON object (JSON Lines): stable keys, bytes as UTF-8 text."""
    return json.dumps({
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp,
        "timestamp_type": TIMESTAMP_TYPES.get(timestamp_type),
        "key": text(key),
        "value": text(value),
        "headers": [{"key": text(k), "value": text(v)} for k, v in headers or ()],
    }, ensure_ascii=False)


def headers_bytes(headers: list[tuple[str, bytes | None]] | None) -> bytes:
    """kafka-console-consumer's rendering: k1:v1,k2:v2, or NO_HEADERS."""
    if not headers:
        return NO_HEADERS
    return b",".join(
        k.encode() + b":" + (NULL_LITERAL if v is None else (v if isinstance(v, bytes) else str(v).encode()))
        for k, v in headers)


def record_line(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None,
                print_key: bool, print_headers: bool, separator: bytes = b"\t") -> bytes:
    """One record as raw bytes (value, optionally prefixed by headers and key), without the newline.

    Keys and values are written as they are stored, so `produce` and `consume` round-trip arbitrary
    text; a null key or value prints as `null`, as kafka-console-consumer does.
    """
    parts = []
    if print_headers:
        parts.append(headers_bytes(headers))
    if print_key:
        parts.append(NULL_LITERAL if key is None else key)
    parts.append(NULL_LITERAL if value is None else value)
    return separator.join(parts)


def write_line(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.write(b"\n")
