"""MemoryLog with snapshots: what a dropped prefix still answers, and what a simulated crash keeps."""

from random import Random

import pytest

from odradek.raft.log import MemoryLog
from odradek.raft.messages import Entry, Snapshot


def log_of(entries: list[Entry]) -> MemoryLog:
    log = MemoryLog()
    log.append(entries)
    log.flush()
    return log


@pytest.mark.parametrize("seed", range(20))
def test_a_dropped_prefix_answers_epoch_queries_as_the_whole_log_did_from_the_epoch_before_the_log_start(seed):
    rng = Random(seed)
    epoch, entries = 1, []
    for _ in range(rng.randint(1, 30)):
        epoch += rng.choice((0, 0, 1, 3))
        entries.append(Entry(epoch, rng.randrange(100)))
    whole, dropped = log_of(entries), log_of(entries)
    at = rng.randint(1, len(entries))
    dropped.save_snapshot(Snapshot(at, whole.epoch_at(at - 1), "state"))
    dropped.truncate_prefix_to(at)
    assert dropped.start_offset == at and dropped.epoch_at(at - 1) == whole.epoch_at(at - 1)
    assert dropped.last_epoch() == whole.last_epoch() and dropped.end_offset == whole.end_offset
    assert dropped.read(at, 100) == whole.read(at, 100)
    for query in range(-1, epoch + 2):
        if query >= whole.epoch_at(at - 1):
            assert dropped.end_offset_for_epoch(query) == whole.end_offset_for_epoch(query), query
        else:  # ends inside the snapshot: unknown
            assert dropped.end_offset_for_epoch(query) == (-1, -1), query
    with pytest.raises(IndexError):
        dropped.read(at - 1, 1)
    with pytest.raises(IndexError):
        dropped.epoch_at(at - 2)


def test_an_installed_snapshot_starts_an_empty_log_after_it():
    log = log_of([Entry(1, "a"), Entry(2, "x")])
    log.save_snapshot(Snapshot(5, 3, "leader's state"))
    assert (log.start_offset, log.end_offset, log.flushed_end_offset, log.last_epoch()) == (5, 5, 5, 3)
    assert log.end_offset_for_epoch(3) == (3, 5) and log.end_offset_for_epoch(2) == (-1, -1)
    with pytest.raises(ValueError):
        log.append([Entry(2, "older than the snapshot")])
    log.append([Entry(3, "b")])
    assert log.read(5, 2) == (Entry(3, "b"),)


def test_snapshots_must_move_forward_and_cover_what_is_dropped_or_truncated():
    log = log_of([Entry(1, "a"), Entry(1, "b"), Entry(1, "c")])
    with pytest.raises(ValueError):
        log.truncate_prefix_to(1)  # no snapshot yet
    log.save_snapshot(Snapshot(2, 1, "state at 2"))
    with pytest.raises(ValueError):
        log.save_snapshot(Snapshot(2, 1, "again"))
    with pytest.raises(ValueError):
        log.truncate_prefix_to(3)
    with pytest.raises(ValueError):
        log.truncate_to(1)  # committed entries in the snapshot
    log.truncate_to(2)
    assert log.end_offset == 2 and log.start_offset == 0


def test_a_crash_keeps_the_snapshot_and_the_prefix_drop_but_not_unflushed_entries():
    log = log_of([Entry(1, "a"), Entry(1, "b")])
    log.append([Entry(1, "c")])
    log.save_snapshot(Snapshot(2, 1, "state at 2"))
    log.truncate_prefix_to(2)  # durable, and flushes what remains
    log.append([Entry(1, "d")])
    log.crash()
    assert log.latest_snapshot() == Snapshot(2, 1, "state at 2")
    assert (log.start_offset, log.read(2, 5)) == (2, (Entry(1, "c"),))


def test_a_crash_that_loses_the_snapshots_last_entry_restarts_the_log_after_the_snapshot():
    log = log_of([Entry(1, "a")])
    log.append([Entry(1, "b"), Entry(1, "c")])  # committed elsewhere, not yet fsynced here
    log.save_snapshot(Snapshot(3, 1, "state at 3"))
    log.crash()  # before the prefix drop
    assert (log.start_offset, log.end_offset, log.last_epoch()) == (3, 3, 1)
    assert log.latest_snapshot() == Snapshot(3, 1, "state at 3")
