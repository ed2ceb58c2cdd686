"""Incremental fetch sessions (KIP-227): the broker remembers a client's partitions between fetches.

A full fetch (epoch 0) may open a session; later fetches (epoch 1, 2, ...) name only the partitions whose
position changed and the ones to forget, and the response carries only partitions with something new:
records, an error, or a moved high watermark, last stable offset or log start offset.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0
ZERO_UUID = bytes(16)


def session_key(topic: str | None, topic_id: bytes, partition: int) -> tuple[bytes | str | None, int]:
    """Partitions are named by topic id from Fetch v13 on, by topic name before."""
    return (topic_id if topic_id != ZERO_UUID else topic, partition)


@dataclass
class SessionPartition:
    topic: str | None  # None: a topic id this node does not know
    topic_id: bytes
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    # what the client was last told, to decide whether the partition is worth including again
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: OrderedDict[tuple[bytes | str, int], SessionPartition]


@dataclass
class FetchContext:
    """The partitions one fetch request reads, and how the response is filtered."""

    partitions: list[SessionPartition]
    session_id: int = NO_SESSION
    incremental: bool = False
    error: ErrorCode = ErrorCode.NONE

    def include(self, partition: SessionPartition, error: ErrorCode, high_watermark: int, last_stable_offset: int,
                log_start_offset: int, record_bytes: int) -> bool:
        changed = (partition.high_watermark, partition.last_stable_offset, partition.log_start_offset) != (
            high_watermark, last_stable_offset, log_start_offset)
        partition.high_watermark = high_watermark
        partition.last_stable_offset = last_stable_offset
        partition.log_start_offset = log_start_offset
        return not self.incremental or record_bytes > 0 or error != ErrorCode.NONE or changed


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000):
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def new_context(self, session_id: int, epoch: int, requested: list[SessionPartition],
                    forgotten: list[tuple[bytes | str, int]], supports_sessions: bool) -> FetchContext:
        if not supports_sessions:
            return FetchContext(requested)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self.sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(requested)
            return FetchContext(requested, self._create(requested))
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self.sessions.move_to_end(session_id)
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        for key in forgotten:
            session.partitions.pop(key, None)
        for partition in requested:
            key = session_key(partition.topic, partition.topic_id, partition.partition)
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = partition
            else:
                cached.fetch_offset = partition.fetch_offset
                cached.max_bytes = partition.max_bytes
                cached.current_leader_epoch = partition.current_leader_epoch
        return FetchContext(list(session.partitions.values()), session.id, incremental=True)

    def _create(self, partitions: list[SessionPartition]) -> int:
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)
        session_id = next(self._ids)
        keyed = OrderedDict((session_key(p.topic, p.topic_id, p.partition), p) for p in partitions)
        self.sessions[session_id] = FetchSession(session_id, 1, keyed)
        return session_id
