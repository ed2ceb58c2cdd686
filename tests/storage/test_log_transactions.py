"""PartitionLog and transactions: markers, the last stable offset, aborted transactions, and the producer state
rebuilt after a clean or unclean reopen, a truncation, and on a follower."""

import os

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import build_batch
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import AbortedTxn

E = ErrorCode
NOW = 1_700_000_000_000
P, Q = 7, 8


def batch(count=1, *, pid=-1, epoch=-1, seq=-1, transactional=False, tag=0) -> bytes:
    recs = [(b"k", (b"%d-%d:" % (tag, i)).ljust(20, b"x")) for i in range(count)]
    return build_batch(recs, timestamp_ms=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=transactional)


def small_config(**overrides) -> LogConfig:
    values = dict(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0)
    values.update(overrides)
    return LogConfig(**values)


def open_log(path, config=None, **kwargs) -> PartitionLog:
    return PartitionLog(str(path), config or LogConfig(), now_ms=NOW, **kwargs)


class Producer:
    """A transactional producer's appends to one log, sequences tracked."""

    def __init__(self, log, pid, epoch=0):
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, count=1, *, transactional=True, verification=False, tag=0):
        info = self.log.append_as_leader(
            memoryview(batch(count, pid=self.pid, epoch=self.epoch, seq=self.seq, transactional=transactional,
                             tag=tag)), now_ms=NOW, verification=verification)
        self.seq += count
        return info.first_offset

    def end(self, commit, coordinator_epoch=0, *, epoch=None):
        return self.log.append_marker(commit, producer_id=self.pid, producer_epoch=self.epoch if epoch is None
                                      else epoch, coordinator_epoch=coordinator_epoch, now_ms=NOW).first_offset


def plain(log, count=1):
    return log.append_as_leader(memoryview(batch(count)), now_ms=NOW).first_offset


def code_of(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        fn(*args, **kwargs)
    return err.value.code


def scenario(log):
    """0-1 plain; P aborts [2..3] at 5 (Q's data at 4); Q open from 4; 6 plain; P commits [7] at 8."""
    p, q = Producer(log, P), Producer(log, Q)
    assert plain(log, 2) == 0
    assert p.send(2) == 2
    assert q.send() == 4
    assert p.end(False, 1) == 5
    assert plain(log) == 6
    assert p.send() == 7
    assert p.end(True, 1) == 8
    return p, q


def test_last_stable_offset_follows_open_transactions_and_markers(tmp_path):
    log = open_log(tmp_path / "t-0")
    plain(log, 2)
    p = Producer(log, P)
    assert p.send(2) == 2
    log.high_watermark = 1
    assert log.last_stable_offset == 1, "never above the high watermark"
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2, "the open transaction's first offset"
    assert p.end(True) == 4
    log.high_watermark = 4
    assert log.last_stable_offset == 2, "the marker is not replicated yet"
    log.high_watermark = 5
    assert log.last_stable_offset == 5
    assert log.aborted_transactions(0, 5) == []


def test_aborted_transactions_of_the_log(tmp_path):
    log = open_log(tmp_path / "t-0")
    scenario(log)
    log.high_watermark = log.log_end_offset
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P, 2, 5)]
    assert log.aborted_transactions(6, 9) == []
    assert log.aborted_transactions(0, 2) == []
    assert log.last_stable_offset == 4, "Q's transaction is still open"
    assert [e.producer_id for e in log.producer_state.open_transactions()] == [Q]


def test_a_non_transactional_batch_inside_a_transaction_is_refused(tmp_path):
    log = open_log(tmp_path / "t-0")
    p = Producer(log, P)
    p.send()
    assert code_of(p.send, transactional=False) == E.INVALID_TXN_STATE
    assert log.log_end_offset == 1


def test_markers_from_an_older_coordinator_or_producer_epoch_are_refused(tmp_path):
    log = open_log(tmp_path / "t-0")
    p = Producer(log, P, epoch=3)
    p.send()
    p.end(True, 5)
    assert code_of(p.end, True, 4) == E.TRANSACTION_COORDINATOR_FENCED
    assert code_of(p.end, True, 5, epoch=2) == E.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2


def test_verification_guard_of_a_transactional_append(tmp_path):
    log = open_log(tmp_path / "t-0")
    p = Producer(log, P)
    assert code_of(p.send, verification=None) == E.INVALID_TXN_STATE
    assert log.log_end_offset == 0
    p.seq = 0
    guard = log.producer_state.start_verification(P)
    assert p.send(verification=guard) == 0
    assert p.send(verification=None) == 1, "the open transaction needs no verification"
    p.end(False)
    assert code_of(p.send, verification=guard) == E.INVALID_TXN_STATE, "the marker dropped the guard"


def state_of(log):
    state = log.producer_state
    return (state.snapshot(), sorted((e.producer_id, e.txn_first_offset) for e in state.open_transactions()),
            list(state.aborted))


def test_clean_reopen_keeps_the_open_transaction_and_aborted_list(tmp_path):
    log = open_log(tmp_path / "t-0")
    scenario(log)
    before = state_of(log)
    end = log.log_end_offset
    log.close()
    log = open_log(tmp_path / "t-0", clean_shutdown=True, high_watermark=end)
    assert state_of(log) == before
    assert before[1] == [(Q, 4)] and before[2] == [AbortedTxn(P, 2, 5)]
    assert log.last_stable_offset == 4
    assert log.aborted_transactions(0, end) == [AbortedTxn(P, 2, 5)]
    # Q's transaction goes on and ends after the restart
    q = Producer(log, Q)
    q.seq = 1
    assert code_of(q.send, transactional=False) == E.INVALID_TXN_STATE
    assert q.end(False, 1) == end
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.log_end_offset
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P, 2, 5), AbortedTxn(Q, 4, end)]
    log.close()


@pytest.mark.parametrize("config", [None, small_config()], ids=["one-segment", "small-segments"])
def test_unclean_reopen_rebuilds_the_transactions_from_the_log(tmp_path, config):
    log = open_log(tmp_path / "t-0", config)
    scenario(log)
    # more transactions across segment rolls (with small segments, snapshots are written at the rolls)
    r = Producer(log, 9)
    r.send(3, tag=1)
    for i in range(8):
        plain(log, 2)
        if i == 3:
            r.end(False, 2)
            r.send(tag=2)
    before = state_of(log)
    end = log.log_end_offset
    assert before[2] == [AbortedTxn(P, 2, 5), AbortedTxn(9, 9, 20)]
    assert before[1] == [(Q, 4), (9, 21)]
    if config is not None:
        assert len(log.segments) > 1
    log.abandon()  # a crash: no snapshot at the log end
    log = open_log(tmp_path / "t-0", config, high_watermark=end)
    assert log.log_end_offset == end
    assert state_of(log) == before
    assert log.last_stable_offset == 4


def test_unclean_reopen_rebuilds_a_transaction_opened_before_a_snapshot(tmp_path):
    config = small_config()
    log = open_log(tmp_path / "t-0", config)
    p = Producer(log, P)
    assert p.send() == 0
    while len(log.segments) < 3:
        plain(log, 3)
    snapshots = sorted(n for n in os.listdir(log.directory) if n.endswith(".snapshot"))
    assert snapshots, "rolls write producer snapshots"
    marker_offset = p.end(False, 0)
    before = state_of(log)
    log.abandon()
    log = open_log(tmp_path / "t-0", config, high_watermark=marker_offset + 1)
    assert state_of(log) == before
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P, 0, marker_offset)]
    assert log.last_stable_offset == marker_offset + 1


def test_truncating_below_a_marker_reopens_the_transaction(tmp_path):
    log = open_log(tmp_path / "t-0")
    p, q = scenario(log)
    log.high_watermark = 5
    log.truncate_to(5)  # P's abort marker at 5 goes
    assert log.log_end_offset == 5
    state = log.producer_state
    assert sorted((e.producer_id, e.txn_first_offset) for e in state.open_transactions()) == [(P, 2), (Q, 4)]
    assert state.aborted == []
    assert log.aborted_transactions(0, 5) == []
    assert log.last_stable_offset == 2
    assert code_of(p.send, transactional=False) == E.INVALID_TXN_STATE
    log.truncate_to(2)
    assert log.producer_state.open_transactions() == []
    assert log.last_stable_offset == 2
    assert log.producer_state.entry(P) is None


def test_truncating_below_a_marker_across_segments(tmp_path):
    config = small_config()
    log = open_log(tmp_path / "t-0", config)
    p = Producer(log, P)
    p.send()
    while len(log.segments) < 3:
        plain(log, 3)
    marker_offset = p.end(True)
    while len(log.segments) < 5:
        plain(log, 3)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.log_end_offset
    log.truncate_to(marker_offset)
    assert log.log_end_offset == marker_offset
    assert log.producer_state.entry(P).txn_first_offset == 0
    assert log.last_stable_offset == 0


def fetch(leader, offset) -> bytes:
    region = leader.read(offset, 1 << 20, max_offset=leader.log_end_offset)
    return os.pread(region.fd, region.size, region.position)


@pytest.mark.parametrize("config", [None, small_config()], ids=["one-segment", "small-segments"])
def test_a_follower_ends_with_the_leaders_producer_state(tmp_path, config):
    leader = open_log(tmp_path / "leader" / "t-0", config)
    follower = open_log(tmp_path / "follower" / "t-0", config)
    scenario(leader)
    r = Producer(leader, 9, epoch=2)
    r.send(2)
    for _ in range(6):
        plain(leader, 2)
    r.end(False, 3, epoch=3)  # fenced by the coordinator with a bumped epoch
    r.epoch, r.seq = 3, 0
    r.send()
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(fetch(leader, follower.log_end_offset), now_ms=NOW)
    assert follower.log_end_offset == leader.log_end_offset
    assert state_of(follower) == state_of(leader)
    for log in (leader, follower):
        log.high_watermark = log.log_end_offset
    assert follower.last_stable_offset == leader.last_stable_offset == 4
    end = leader.log_end_offset
    assert follower.aborted_transactions(0, end) == leader.aborted_transactions(0, end) == [
        AbortedTxn(P, 2, 5), AbortedTxn(9, 9, 23)]
    # and a reopened follower too
    follower.abandon()
    follower = open_log(tmp_path / "follower" / "t-0", config, high_watermark=end)
    assert state_of(follower) == state_of(leader)


def test_a_fenced_producer_stays_fenced_after_maintenance(tmp_path):
    log = open_log(tmp_path / "t-0")
    zombie = Producer(log, P, epoch=0)
    zombie.send()
    log.append_marker(False, producer_id=P, producer_epoch=1, coordinator_epoch=0, now_ms=NOW + 1_000)
    log.maintain(NOW + 2_000)
    assert code_of(zombie.send) == E.INVALID_PRODUCER_EPOCH


def test_last_stable_offset_is_never_below_the_log_start(tmp_path):
    log = open_log(tmp_path / "t-0")
    plain(log, 2)
    Producer(log, P).send()  # 2, open
    plain(log, 2)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2
    log.delete_records_before(4)
    assert log.last_stable_offset == 4
