"""LeaderEpochFileCache: assign, OffsetForLeaderEpoch look-ups, truncation, and the checkpoint file."""

import logging

import pytest

from odradek.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochFileCache,
)

UNDEFINED = (-1, -1)


def cache_with(tmp_path, *entries) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def on_disk(tmp_path) -> str:
    return (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text()


def reloaded(tmp_path) -> list[EpochEntry]:
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.load()
    return cache.entries


def test_assign_records_each_new_epoch_and_writes_kafkas_text_format(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (0, 5), (1, 10), (1, 12), (4, 30))
    assert cache.entries == [(0, 0), (1, 10), (4, 30)]
    assert cache.latest_epoch == 4
    assert on_disk(tmp_path) == "0\n3\n0 0\n1 10\n4 30\n"
    assert reloaded(tmp_path) == cache.entries


def test_a_newer_epoch_at_or_before_the_latest_start_replaces_the_entries_from_there(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.assign(3, 20)  # a leader of epoch 2 that wrote nothing
    assert cache.entries == [(0, 0), (1, 10), (3, 20)]
    cache.assign(5, 15)
    assert cache.entries == [(0, 0), (1, 10), (5, 15)]
    assert reloaded(tmp_path) == cache.entries


def test_an_older_epoch_or_an_earlier_start_of_the_latest_one_removes_what_conflicts_as_kafka_does(tmp_path, caplog):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (4, 20))
    with caplog.at_level(logging.WARNING):
        cache.assign(3, 25)
    assert cache.entries == [(0, 0), (2, 10), (3, 25)]
    assert "removed conflicting entries" in caplog.text
    cache.assign(3, 12)
    assert cache.entries == [(0, 0), (2, 10), (3, 12)]
    with pytest.raises(ValueError):
        cache.assign(-1, 40)


def test_end_offset_for_follows_kafkas_offset_for_leader_epoch(tmp_path):
    assert cache_with(tmp_path).end_offset_for(0, 100) == UNDEFINED
    cache = cache_with(tmp_path, (2, 10), (4, 30), (7, 60))
    log_end = 80
    cases = {
        7: (7, log_end),    # the latest epoch ends at the log end
        4: (4, 60),         # an older epoch ends where the next one starts
        5: (4, 60),         # an epoch this log never had: the largest one below it
        6: (4, 60),
        2: (2, 30),
        1: (1, 10),         # older than every entry: its data is gone, nothing past the first start is kept
        8: UNDEFINED,       # newer than any known epoch
        -1: UNDEFINED,      # a follower without an epoch
    }
    assert {epoch: cache.end_offset_for(epoch, log_end) for epoch in cases} == cases


def test_epoch_for_offset(tmp_path):
    cache = cache_with(tmp_path, (2, 10), (4, 30))
    assert [cache.epoch_for_offset(offset) for offset in (0, 9, 10, 29, 30, 1000)] == [-1, -1, 2, 2, 4, 4]


def test_truncate_from_end_drops_entries_starting_at_or_after_the_offset(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (3, 20))
    cache.truncate_from_end(21)
    assert cache.entries == [(0, 0), (1, 10), (3, 20)]
    cache.truncate_from_end(20)
    assert cache.entries == [(0, 0), (1, 10)]
    assert reloaded(tmp_path) == cache.entries
    cache.truncate_from_end(0)
    assert cache.entries == [] and reloaded(tmp_path) == []


def test_truncate_from_start_moves_the_covering_entry_to_the_new_start(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (3, 20))
    cache.truncate_from_start(15)
    assert cache.entries == [(1, 15), (3, 20)]
    cache.truncate_from_start(20)  # exclusive: the entry at 20 stays
    assert cache.entries == [(3, 20)]
    assert reloaded(tmp_path) == cache.entries
    cache.truncate_from_start(500)
    assert cache.entries == [(3, 500)]
    assert cache.end_offset_for(3, 500) == (3, 500)


def test_unchanged_entries_are_not_written_again(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10))
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.unlink()
    cache.assign(1, 11)
    cache.truncate_from_end(11)
    cache.truncate_from_start(0)
    assert not path.exists()
    cache.clear_and_flush()
    assert on_disk(tmp_path) == "0\n0\n"


@pytest.mark.parametrize("text", [
    "", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 0 7\n", "0\n1\nzero 0\n", "0\n2\n1 0\n1 5\n", "0\n2\n1 5\n2 5\n",
    "0\n1\n-1 0\n", "\xff\xfe",
])
def test_a_malformed_file_loads_as_absent(tmp_path, text, caplog):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(text.encode("latin-1"))
    cache = LeaderEpochFileCache(str(tmp_path))
    with caplog.at_level(logging.WARNING):
        assert not cache.load()
    assert cache.entries == [] and "ignoring" in caplog.text
    cache.recover(0, [(2, 0), (2, 5), (3, 9)], log_start_offset=0, log_end_offset=20)
    assert reloaded(tmp_path) == [(2, 0), (3, 9)]


def test_a_missing_file_loads_as_absent_and_stays_absent_while_there_is_nothing_to_write(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    assert not cache.load()
    cache.recover(0, [], log_start_offset=0, log_end_offset=0)
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()


def test_whitespace_as_kafka_reads_it(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n0  0\n3\t17\n")
    assert reloaded(tmp_path) == [(0, 0), (3, 17)]


def test_recover_replaces_entries_from_the_recovered_offset_and_cuts_them_to_the_log(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 40), (5, 90))
    reopened = LeaderEpochFileCache(str(tmp_path))
    assert reopened.load()
    # recovery scanned the batches from 30 on: epoch 2 started at 35 (the checkpoint said 40), then epoch 3
    # at 50; the log now ends at 70, before epoch 5 (a torn tail), and starts at 5
    reopened.recover(30, [(1, 30), (-1, 33), (2, 35), (2, 38), (3, 50)], log_start_offset=5, log_end_offset=70)
    assert reopened.entries == [(0, 5), (1, 10), (2, 35), (3, 50)]
    assert reloaded(tmp_path) == reopened.entries
    assert cache.entries != reopened.entries
