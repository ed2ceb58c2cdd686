"""How far a streaming query is behind the log end, from its progress report.

Spark's Kafka source puts minOffsetsBehindLatest, maxOffsetsBehindLatest and avgOffsetsBehindLatest in
each progress report's source metrics. Python data sources have no way to report metrics (Spark 4.0 to
4.3), so the "odradek" source's `metrics` map stays empty; its progress does carry the per-partition
`endOffset` (what the batch read to) and `latestOffset` (the log end it saw), and the same three figures
follow from them.
"""

from __future__ import annotations

import json


def offsets_behind_latest(source_progress) -> dict[str, str]:
    """Spark's Kafka source metrics for one entry of a progress report's `sources`, or {} before any batch.

    Takes the entry as a dict or a pyspark SourceProgress; values are strings, as in Spark's metrics map."""
    end, latest = (_offsets(_field(source_progress, name)) for name in ("endOffset", "latestOffset"))
    if not end or not latest:
        return {}
    behind = [offset - end[tp] for tp, offset in latest.items() if tp in end]
    if not behind:
        return {}
    return {"minOffsetsBehindLatest": str(min(behind)), "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": str(sum(behind) / len(behind))}


def _field(source_progress, name: str):
    if isinstance(source_progress, dict):
        return source_progress.get(name)
    return getattr(source_progress, name, None)


def _offsets(value) -> dict[tuple[str, str], int]:
    """Spark's Kafka offset JSON, {"topic": {"partition": offset}}, flattened; the source's markers skipped."""
    if value is None:
        return {}
    parsed = json.loads(value) if isinstance(value, str) else value
    return {(topic, partition): offset for topic, partitions in parsed.items() if isinstance(partitions, dict)
            for partition, offset in partitions.items()}
