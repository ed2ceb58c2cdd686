"""Replication storage: a follower's append of the leader's batches, divergence and truncation, and the
leader epoch cache kept consistent with the log through log start moves, reopens and crashes."""

import itertools
import os

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import build_batch, read_batch_info
from odradek.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochFileCache,
    format_checkpoint,
)
from odradek.storage.log import PartitionLog, UnexpectedAppendOffset
from tests.storage.test_log import NOW, make_batch, open_log, read_all, small_config

# (leader epoch, appends in it): several segments per epoch with small_config
EPOCHS = ((0, 12), (1, 10), (3, 15))
REPLICA_FILES = (".log", ".index", ".timeindex", ".snapshot", LEADER_EPOCH_CHECKPOINT)


def lead(log, epoch, appends, *, tag=0, seq=None):
    """Leader appends of 1-3 records, every third one from producer 7 (next sequence `seq[0]`)."""
    seq = seq if seq is not None else [0]
    for i in range(appends):
        count = 1 + i % 3
        if i % 3 == 0:
            batch = make_batch(count, tag=tag + i, pid=7, epoch=0, seq=seq[0])
            seq[0] += count
        else:
            batch = make_batch(count, tag=tag + i)
        log.append_as_leader(memoryview(batch), now_ms=NOW, leader_epoch=epoch)
    log.high_watermark = log.log_end_offset


def next_seq(log) -> int:
    return log.producer_state.entry(7).last_seq + 1


def leader_log(path):
    log = open_log(path, small_config())
    seq = [0]
    for epoch, appends in EPOCHS:
        lead(log, epoch, appends, tag=100 * epoch, seq=seq)
    return log


def fetch(leader, offset, max_bytes) -> bytes:
    region = leader.read(offset, max_bytes, max_offset=leader.log_end_offset)
    return os.pread(region.fd, region.size, region.position)


def replicate(leader, follower, max_bytes=1 << 20, until=None):
    """Fetch and append until the follower reaches `until` (default: the leader's log end) or passes it;
    returns the AppendInfos."""
    until = leader.log_end_offset if until is None else until
    infos = []
    while follower.log_end_offset < until:
        infos.append(follower.append_as_follower(fetch(leader, follower.log_end_offset, max_bytes), now_ms=NOW))
    follower.high_watermark = follower.log_end_offset
    return infos


def replica_files(log) -> dict[str, bytes]:
    return {name: open(os.path.join(log.directory, name), "rb").read()
            for name in sorted(os.listdir(log.directory)) if name.endswith(REPLICA_FILES)}


def epochs_in_batches(log) -> list[tuple[int, int]]:
    """The leader epoch cache a log's batches imply: the first batch of each newer epoch."""
    entries = []
    for segment in log.segments:
        for info in segment.batches():
            if not entries or info.partition_leader_epoch > entries[-1][0]:
                entries.append((info.partition_leader_epoch, info.base_offset))
    return entries


def checkpoint_on_disk(log) -> list[tuple[int, int]]:
    cache = LeaderEpochFileCache(log.directory)
    assert cache.load()
    return cache.entries


def assert_same_replica(follower, leader):
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epochs.entries == leader.leader_epochs.entries
    assert follower.producer_state.snapshot() == leader.producer_state.snapshot()
    for epoch in range(-1, 6):
        assert follower.end_offset_for_epoch(epoch) == leader.end_offset_for_epoch(epoch)
    assert read_all(follower) == read_all(leader)


@pytest.mark.parametrize("max_bytes", [1, 700, 1 << 20], ids=["batch", "700B", "segment"])
def test_replicated_batches_make_byte_identical_segments_producer_state_and_epochs(tmp_path, max_bytes):
    leader = leader_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", small_config())
    infos = replicate(leader, follower, max_bytes)
    assert infos[0].first_offset == 0
    assert all(a.last_offset + 1 == b.first_offset for a, b in itertools.pairwise(infos))
    assert sum(i.record_count for i in infos) == leader.log_end_offset
    assert len(leader.segments) >= 5
    assert replica_files(follower) == replica_files(leader)
    assert follower.leader_epochs.entries == epochs_in_batches(leader)
    assert [e.epoch for e in follower.leader_epochs.entries] == [0, 1, 3]
    assert_same_replica(follower, leader)
    # should the follower lead, a retry of the producer's last batch gets its original offsets
    last = follower.producer_state.entry(7).batches[-1]
    retry = read_batch_info(make_batch(last.last_seq - last.first_seq + 1, pid=7, epoch=0, seq=last.first_seq))
    assert follower.producer_state.check(retry) == (last.first_offset, last.last_offset, last.timestamp)


def test_a_replica_added_by_a_reassignment_dedupes_retries_of_the_old_leaders_last_five_batches(tmp_path):
    """The move [1] -> [1, 2] -> [2]: node 2 copies the log by fetching, then leads in a new leader epoch. A
    producer's retries (old leader epoch, same producer epoch and sequences) of any of its last 5 batches get
    their original offsets and write nothing; a batch that skips a sequence is OUT_OF_ORDER_SEQUENCE_NUMBER
    and leaves the state as it was, so the skipped batch's retry is still a duplicate."""
    leader = open_log(tmp_path / "leader" / "t-0", small_config())
    sent, seq = [], 0
    for i in range(40):
        count = 1 + i % 3
        batch = make_batch(count, tag=i, pid=0, epoch=0, seq=seq)
        info = leader.append_as_leader(memoryview(batch), now_ms=NOW, leader_epoch=0)
        leader.append_as_leader(memoryview(make_batch(1, tag=1000 + i)), now_ms=NOW, leader_epoch=0)  # others
        sent.append((batch, info.first_offset, info.last_offset))
        seq += count
    follower = open_log(tmp_path / "follower" / "t-0", small_config())
    replicate(leader, follower, max_bytes=700)
    follower.leader_epochs.assign(1, follower.log_end_offset)  # it leads now (ReplicaManager._become_leader)
    end, size = follower.log_end_offset, follower.size_in_bytes()
    for batch, first, last in sent[-5:]:
        again = follower.append_as_leader(memoryview(batch), now_ms=NOW, leader_epoch=1)
        assert (again.first_offset, again.last_offset) == (first, last)
    with pytest.raises(KafkaError) as exc:  # older than the window: as Kafka, out of order
        follower.append_as_leader(memoryview(sent[-6][0]), now_ms=NOW, leader_epoch=1)
    assert exc.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as exc:  # a gap: the next batch sent before the retry of the one before it
        follower.append_as_leader(memoryview(make_batch(2, tag=99, pid=0, epoch=0, seq=seq + 3)), now_ms=NOW,
                                  leader_epoch=1)
    assert exc.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    batch, first, last = sent[-1]
    again = follower.append_as_leader(memoryview(batch), now_ms=NOW, leader_epoch=1)
    assert (again.first_offset, again.last_offset) == (first, last)
    assert (follower.log_end_offset, follower.size_in_bytes()) == (end, size)
    # what the producer sends next continues its sequence
    assert follower.append_as_leader(memoryview(make_batch(1, tag=98, pid=0, epoch=0, seq=seq)), now_ms=NOW,
                                     leader_epoch=1).first_offset == end


def test_batches_that_do_not_continue_the_log_are_refused_and_nothing_is_written(tmp_path):
    leader = leader_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", small_config())
    replicate(leader, follower, until=20)
    end, before = follower.log_end_offset, replica_files(follower)
    stale = fetch(leader, end - 1, 1 << 20)
    with pytest.raises(UnexpectedAppendOffset) as refused:
        follower.append_as_follower(stale, now_ms=NOW)
    assert refused.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert (refused.value.first_offset, refused.value.log_end_offset) == (read_batch_info(stale).base_offset, end)
    # the second batch repeats the first's offsets: the first is not written either
    first = fetch(leader, end, 1)
    with pytest.raises(UnexpectedAppendOffset):
        follower.append_as_follower(first + first, now_ms=NOW)
    corrupt = bytearray(first)
    corrupt[-1] ^= 1
    for bad in (bytes(corrupt), first[:-1], first + first[:30], b""):
        with pytest.raises(KafkaError) as refused:
            follower.append_as_follower(bad, now_ms=NOW)
        assert refused.value.code == ErrorCode.CORRUPT_MESSAGE
    huge = build_batch([(b"k", b"x" * 2000)], base_offset=end, partition_leader_epoch=1)
    with pytest.raises(KafkaError) as refused:
        follower.append_as_follower(huge, now_ms=NOW)
    assert refused.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert follower.log_end_offset == end and replica_files(follower) == before
    replicate(leader, follower)
    assert replica_files(follower) == replica_files(leader)


def test_gaps_in_the_leaders_offsets_are_kept_and_a_gap_past_32_bits_rolls_at_the_batch(tmp_path):
    follower = open_log(tmp_path / "t-0", small_config())
    follower.append_as_follower(build_batch([(b"k", b"a")], base_offset=0, partition_leader_epoch=0), now_ms=NOW)
    info = follower.append_as_follower(build_batch([(b"k", b"b"), (b"k", b"c")], base_offset=10,
                                                   partition_leader_epoch=2), now_ms=NOW)
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (10, 11, 12)
    far = 12 + 2**31 + 5
    follower.append_as_follower(build_batch([(b"k", b"d")], base_offset=far, partition_leader_epoch=4), now_ms=NOW)
    assert follower.active.base_offset == far and follower.log_end_offset == far + 1
    assert follower.leader_epochs.entries == [(0, 0), (2, 10), (4, far)]
    follower.high_watermark = follower.log_end_offset
    assert [(o, v) for o, v in read_all(follower)] == [(0, b"a"), (10, b"b"), (11, b"c"), (far, b"d")]
    follower.close()
    reopened = open_log(tmp_path / "t-0", small_config(), clean_shutdown=True)
    assert reopened.log_end_offset == far + 1 and reopened.leader_epochs.entries == [(0, 0), (2, 10), (4, far)]


def test_a_deposed_leader_truncates_to_where_the_new_leader_diverged_and_then_matches_it(tmp_path):
    old = leader_log(tmp_path / "old" / "t-0")
    new = open_log(tmp_path / "new" / "t-0", small_config())
    replicate(old, new)
    common = old.log_end_offset
    lead(old, 3, 9, tag=900, seq=[next_seq(old)])  # old's writes in its epoch that no follower got
    new.leader_epochs.assign(5, new.log_end_offset)  # new becomes leader of epoch 5, as Kafka's makeLeader
    lead(new, 5, 14, tag=500, seq=[next_seq(new)])
    # old follows new: the end of its latest epoch on new is where they diverge
    epoch, end = new.end_offset_for_epoch(old.leader_epochs.latest_epoch)
    assert (epoch, end) == (3, common)
    old.truncate_to(min(end, old.end_offset_for_epoch(epoch)[1]))
    assert old.log_end_offset == common and old.leader_epochs.latest_epoch == 3
    replicate(new, old)
    assert replica_files(old) == replica_files(new)
    assert [e.epoch for e in old.leader_epochs.entries] == [0, 1, 3, 5]
    assert_same_replica(old, new)


def test_truncation_below_an_epochs_start_drops_it_and_a_full_truncation_clears_the_cache(tmp_path):
    log = leader_log(tmp_path / "t-0")
    (_, _), (_, start1), (_, start3) = log.leader_epochs.entries
    log.truncate_to(start3 + 2)  # inside the second batch of epoch 3, which goes whole
    assert log.log_end_offset == start3 + 1 and log.leader_epochs.latest_epoch == 3
    log.truncate_to(start3)
    assert log.log_end_offset == start3 and log.leader_epochs.entries == [(0, 0), (1, start1)]
    assert open(os.path.join(log.directory, LEADER_EPOCH_CHECKPOINT)).read() == f"0\n2\n0 0\n1 {start1}\n"
    # a batch of 3 records opens epoch 4; truncating inside it removes it and the epoch
    log.append_as_follower(build_batch([(b"k", b"v")] * 3, base_offset=start3, partition_leader_epoch=4), now_ms=NOW)
    log.truncate_to(start3 + 1)
    assert log.log_end_offset == start3 and log.leader_epochs.entries == [(0, 0), (1, start1)]
    log.truncate_fully_and_start_at(500)
    assert log.leader_epochs.entries == [] and log.end_offset_for_epoch(1) == (-1, -1)
    log.append_as_follower(build_batch([(b"k", b"v")], base_offset=500, partition_leader_epoch=6), now_ms=NOW)
    assert log.leader_epochs.entries == [(6, 500)]


def test_truncating_to_the_log_end_drops_an_epoch_that_wrote_nothing(tmp_path):
    """A leader deposed before its first write keeps (epoch, log end) in its cache; as a follower it is told it
    diverged exactly at its log end, and must drop that empty epoch (found by the cluster nemesis, seed 9)."""
    log = leader_log(tmp_path / "t-0")
    entries = log.leader_epochs.entries
    end = log.log_end_offset
    log.leader_epochs.assign(9, end)  # became leader in epoch 9, wrote nothing
    log.truncate_to(end)
    assert log.log_end_offset == end and log.leader_epochs.entries == entries
    assert log.end_offset_for_epoch(entries[-1].epoch) == (entries[-1].epoch, end)


def test_log_start_moves_collapse_the_entries_before_the_new_start(tmp_path):
    log = leader_log(tmp_path / "t-0")
    (_, _), (_, start1), (_, start3) = log.leader_epochs.entries
    log.delete_records_before(start1 + 3)
    assert log.leader_epochs.entries == [(1, start1 + 3), (3, start3)]
    log.update_config(small_config(retention_bytes=0))
    log.maintain(NOW)  # retention: every segment goes, an empty one remains at the log end
    end = log.log_end_offset
    assert log.log_start_offset == end and log.leader_epochs.entries == [(3, end)]
    assert log.end_offset_for_epoch(3) == (3, end) and log.end_offset_for_epoch(1) == (1, end)


def test_reopen_after_a_clean_close_keeps_the_cache(tmp_path):
    leader = leader_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", small_config())
    replicate(leader, follower)
    follower.close()
    reopened = open_log(follower.directory, small_config(), clean_shutdown=True)
    reopened.high_watermark = reopened.log_end_offset
    assert_same_replica(reopened, leader)


def reopen_after_crash(log, **kwargs) -> PartitionLog:
    """A process crash: files stay as written; the recovery point is the one last checkpointed."""
    log.abandon()
    kwargs.setdefault("recovery_point", log.recovery_point)
    reopened = open_log(log.directory, small_config(), **kwargs)
    reopened.high_watermark = reopened.log_end_offset
    return reopened


def test_crash_between_a_new_epochs_batch_and_its_checkpoint_is_repaired_from_the_batches(tmp_path):
    leader = leader_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", small_config())
    (_, _), (_, _), (_, start3) = leader.leader_epochs.entries
    replicate(leader, follower, max_bytes=1, until=start3)
    checkpoint_file = os.path.join(follower.directory, LEADER_EPOCH_CHECKPOINT)
    before = open(checkpoint_file).read()
    replicate(leader, follower, max_bytes=1, until=start3 + 1)
    assert open(checkpoint_file).read() != before
    open(checkpoint_file, "w").write(before)  # as if the process died before the checkpoint was written
    reopened = reopen_after_crash(follower)
    assert reopened.leader_epochs.entries == epochs_in_batches(reopened)
    assert reopened.leader_epochs.latest_epoch == 3
    assert open(checkpoint_file).read().endswith(f"3 {start3}\n")
    replicate(leader, reopened)
    assert_same_replica(reopened, leader)


@pytest.mark.parametrize("cut", [1, 40, -1])
def test_a_torn_tail_cut_by_recovery_takes_the_epochs_it_held_with_it(tmp_path, cut):
    leader = leader_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", small_config())
    replicate(leader, follower)
    (_, _), (_, _), (_, start3) = follower.leader_epochs.entries
    segment = next(s for s in reversed(follower.segments) if s.base_offset <= start3)
    info = segment.find_batch(start3)
    with open(segment.log_path, "r+b") as f:  # a torn write of the first batch of epoch 3
        f.truncate(info.position + (cut if cut > 0 else info.size - 1))
    reopened = reopen_after_crash(follower, recovery_point=0)
    assert reopened.log_end_offset == start3
    assert [e.epoch for e in reopened.leader_epochs.entries] == [0, 1]
    assert reopened.leader_epochs.entries == epochs_in_batches(reopened)
    assert checkpoint_on_disk(reopened) == reopened.leader_epochs.entries
    replicate(leader, reopened)
    assert_same_replica(reopened, leader)


@pytest.mark.parametrize("damage", ["missing", "corrupt", "ahead"])
def test_a_missing_corrupt_or_too_new_checkpoint_is_rebuilt_from_the_batches(tmp_path, damage):
    log = leader_log(tmp_path / "t-0")
    expected = log.leader_epochs.entries
    log.close()
    path = os.path.join(log.directory, LEADER_EPOCH_CHECKPOINT)
    if damage == "missing":
        os.unlink(path)
    elif damage == "corrupt":
        open(path, "w").write("0\n3\n0 0\n")
    else:  # a power loss kept the checkpoint but not the batches it names
        open(path, "wb").write(format_checkpoint([*expected, (7, log.log_end_offset + 10)]))
    reopened = open_log(log.directory, small_config(), clean_shutdown=True)
    assert reopened.leader_epochs.entries == expected
    assert checkpoint_on_disk(reopened) == expected
