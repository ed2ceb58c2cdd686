"""Compatibility levels, as Confluent defines them.

BACKWARD: consumers on the new schema read data written with the previous one (the new schema reads the
old). FORWARD: consumers on the previous schema read data written with the new one. FULL: both. The plain
levels check the latest version only, the _TRANSITIVE ones every earlier version. NONE checks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.registry.schema_types import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def errors(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """Why `new` may not follow `previous` (oldest first) at `level`; empty when it may."""
    if level == "NONE" or not previous:
        return []
    checked = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    found: list[str] = []
    for old in reversed(checked):  # the latest first, as Confluent reports them
        if base in ("BACKWARD", "FULL"):
            found += new.read_errors(old)
        if base in ("FORWARD", "FULL"):
            found += old.read_errors(new)
    return list(dict.fromkeys(found))
