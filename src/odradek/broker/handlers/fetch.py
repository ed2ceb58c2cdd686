"""Fetch: read record batches as file regions, long-polling until min_bytes arrive or max_wait passes.

Consumers read up to the high watermark through fetch sessions; followers (a replica id >= 0) read up to
the log end, report their position with each fetch, and learn a diverging epoch when their log has left
ours (see ReplicaManager.read_for_follower).
"""

from __future__ import annotations

import time

from odradek.broker.fetch_session import FetchContext, SessionPartition, session_key
from odradek.broker.replica_manager import FetchRead
from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)
READ_COMMITTED = 1
FIRST_SESSION_VERSION = 7
FIRST_TOPIC_ID_VERSION = 13


def handle_fetch(broker, ctx, request: dict):
    version = ctx.api_version
    replica_id = request["replica_state"]["replica_id"] if version >= 15 else request.get("replica_id", -1)
    if replica_id >= 0:
        return _follower_fetch(broker, request, replica_id)
    image = broker.image
    requested = []
    for topic in request["topics"]:
        name, topic_id = _resolve(image, version, topic)
        for p in topic["partitions"]:
            requested.append(SessionPartition(name, topic_id, p["partition"], p["fetch_offset"],
                                              p["partition_max_bytes"], p.get("current_leader_epoch", -1)))
    forgotten = []
    for topic in request.get("forgotten_topics_data", ()):
        name, topic_id = _resolve(image, version, topic)
        forgotten += [session_key(name, topic_id, p) for p in topic["partitions"]]
    context = broker.fetch_sessions.new_context(request.get("session_id", 0), request.get("session_epoch", -1),
                                                requested, forgotten, version >= FIRST_SESSION_VERSION)
    if context.error != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": context.error, "session_id": 0, "responses": []}

    max_bytes = min(request.get("max_bytes", 0x7FFFFFFF), broker.config["fetch.max.bytes"])
    isolation = request.get("isolation_level", 0)
    reads = _read(broker, context, max_bytes, isolation)
    total = sum(r.size for _, r in reads)
    errors = any(r.error != ErrorCode.NONE for _, r in reads)
    if request["max_wait_ms"] <= 0 or total >= request["min_bytes"] or errors or not context.partitions:
        _count(broker, reads)
        return _response(context, reads, isolation)
    return _long_poll(broker, context, max_bytes, request, isolation)


async def _long_poll(broker, context: FetchContext, max_bytes: int, request: dict, isolation: int):
    deadline = time.monotonic() + request["max_wait_ms"] / 1000
    keys = [(p.topic, p.partition) for p in context.partitions if p.topic is not None]
    while True:
        await broker.replicas.wait_for_data(keys, deadline - time.monotonic())
        reads = _read(broker, context, max_bytes, isolation)
        total = sum(r.size for _, r in reads)
        if total >= request["min_bytes"] or time.monotonic() >= deadline or any(
                r.error != ErrorCode.NONE for _, r in reads):
            _count(broker, reads)
            return _response(context, reads, isolation)


def _follower_fetch(broker, request: dict, replica_id: int):
    wanted = [(topic["topic"], p) for topic in request["topics"] for p in topic["partitions"]]

    def read_all() -> list:
        return [(topic, p, broker.replicas.read_for_follower(
            topic, p["partition"], replica_id, p["fetch_offset"], p["last_fetched_epoch"], p["current_leader_epoch"],
            p["partition_max_bytes"])) for topic, p in wanted]

    def respond(reads: list) -> dict:
        by_topic: dict[str, list] = {}
        for topic, p, read in reads:
            epoch, end = read.diverging_epoch or (-1, -1)
            by_topic.setdefault(topic, []).append({
                "partition_index": p["partition"], "error_code": read.error, "high_watermark": read.high_watermark,
                "last_stable_offset": read.last_stable_offset, "log_start_offset": read.log_start_offset,
                "diverging_epoch": {"epoch": epoch, "end_offset": end}, "aborted_transactions": None,
                "preferred_read_replica": -1, "records": read.records if read.records is not None else b""})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0,
                "responses": [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()]}

    def ready(reads: list) -> bool:
        return sum(r.size for _, _, r in reads) >= max(1, request["min_bytes"]) or any(
            r.error != ErrorCode.NONE or r.diverging_epoch is not None for _, _, r in reads)

    reads = read_all()
    if ready(reads) or request["max_wait_ms"] <= 0:
        return respond(reads)

    async def long_poll() -> dict:
        deadline = time.monotonic() + request["max_wait_ms"] / 1000
        keys = [(topic, p["partition"]) for topic, p in wanted]
        while True:
            await broker.replicas.wait_for_data(keys, deadline - time.monotonic())
            reads = read_all()
            if ready(reads) or time.monotonic() >= deadline:
                return respond(reads)

    return long_poll()


def _resolve(image, version: int, topic: dict) -> tuple[str | None, bytes]:
    if version >= FIRST_TOPIC_ID_VERSION:
        known = image.topics_by_id.get(topic["topic_id"])
        return (known.name if known else None), topic["topic_id"]
    known = image.topics.get(topic["topic"])
    return topic["topic"], (known.topic_id if known else ZERO_UUID)


def _read(broker, context: FetchContext, max_bytes: int, isolation: int) -> list:
    remaining = max_bytes
    first_data = True
    reads = []
    for p in context.partitions:
        if p.topic is None:
            reads.append((p, FetchRead(ErrorCode.UNKNOWN_TOPIC_ID)))
            continue
        limit = max(0, min(p.max_bytes, remaining))
        read = broker.replicas.read(p.topic, p.partition, p.fetch_offset, limit, p.current_leader_epoch,
                                    min_one_batch=first_data, read_committed=isolation == READ_COMMITTED)
        if read.size:
            first_data = False
            remaining -= read.size
        reads.append((p, read))
    return reads


def _count(broker, reads: list) -> None:
    """The balancer's per-partition counters: a consumer fetch answered, with the bytes it carries."""
    fetched = broker.replicas.partition_counters.fetched
    for p, read in reads:
        if read.error == ErrorCode.NONE:
            fetched(p.topic, p.partition, read.size)


def _response(context: FetchContext, reads: list, isolation: int) -> dict:
    topics: list[dict] = []
    by_topic: dict[tuple, dict] = {}
    for p, read in reads:
        if not context.include(p, read.error, read.high_watermark, read.last_stable_offset, read.log_start_offset,
                               read.size):
            continue
        key = (p.topic, p.topic_id)
        entry = by_topic.get(key)
        if entry is None:
            entry = by_topic[key] = {"topic": p.topic or "", "topic_id": p.topic_id, "partitions": []}
            topics.append(entry)
        entry["partitions"].append({
            "partition_index": p.partition, "error_code": read.error, "high_watermark": read.high_watermark,
            "last_stable_offset": read.last_stable_offset, "log_start_offset": read.log_start_offset,
            "aborted_transactions": None if read.aborted_transactions is None else [
                {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                for txn in read.aborted_transactions],
            "preferred_read_replica": -1, "records": read.records if read.records is not None else b"",
        })
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": context.session_id,
            "responses": topics}
