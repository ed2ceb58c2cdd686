"""Incremental fetch sessions (KIP-227) as a pure state machine."""

from odradek.broker.fetch_session import FetchSessionCache, SessionPartition
from odradek.protocol.errors import ErrorCode


def part(topic: str, index: int, offset: int) -> SessionPartition:
    return SessionPartition(topic, bytes(16), index, offset, 1 << 20, -1)


def test_full_fetch_opens_a_session_and_incremental_fetches_update_it():
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, [part("a", 0, 0), part("a", 1, 0)], [], supports_sessions=True)
    assert full.session_id != 0 and not full.incremental
    incremental = cache.new_context(full.session_id, 1, [part("a", 1, 10)], [("a", 0)], supports_sessions=True)
    assert incremental.incremental
    assert [(p.partition, p.fetch_offset) for p in incremental.partitions] == [(1, 10)]


def test_incremental_responses_carry_only_changed_partitions():
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, [part("a", 0, 0)], [], supports_sessions=True)
    p = full.partitions[0]
    assert full.include(p, ErrorCode.NONE, 5, 5, 0, 0)  # full responses carry everything
    context = cache.new_context(full.session_id, 1, [], [], supports_sessions=True)
    assert not context.include(p, ErrorCode.NONE, 5, 5, 0, 0)  # nothing new
    assert context.include(p, ErrorCode.NONE, 6, 6, 0, 0)  # high watermark moved
    assert context.include(p, ErrorCode.NONE, 6, 6, 0, 100)  # records
    assert context.include(p, ErrorCode.OFFSET_OUT_OF_RANGE, 6, 6, 0, 0)  # error


def test_wrong_epoch_and_unknown_session_are_errors():
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, [part("a", 0, 0)], [], supports_sessions=True)
    assert cache.new_context(full.session_id, 5, [], [], True).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(12345, 1, [], [], True).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_final_epoch_closes_the_session_and_old_versions_are_sessionless():
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, [part("a", 0, 0)], [], supports_sessions=True)
    closed = cache.new_context(full.session_id, -1, [part("a", 0, 3)], [], supports_sessions=True)
    assert closed.session_id == 0 and full.session_id not in cache.sessions
    legacy = cache.new_context(0, 0, [part("a", 0, 0)], [], supports_sessions=False)
    assert legacy.session_id == 0 and not cache.sessions


def test_cache_evicts_the_least_recently_used_session():
    cache = FetchSessionCache(max_sessions=2)
    first = cache.new_context(0, 0, [part("a", 0, 0)], [], True).session_id
    second = cache.new_context(0, 0, [part("b", 0, 0)], [], True).session_id
    cache.new_context(first, 1, [], [], True)  # touch the first
    cache.new_context(0, 0, [part("c", 0, 0)], [], True)
    assert first in cache.sessions and second not in cache.sessions
