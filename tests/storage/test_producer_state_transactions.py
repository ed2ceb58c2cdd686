"""Producer state of one partition, transactions: open transactions, markers, the first unstable offset,
aborted transactions, KIP-890 verification guards and snapshots (Kafka's ProducerStateManager /
ProducerAppendInfo / ProducerStateEntry)."""

import struct

import pytest
from crc32c import crc32c

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    ABORT_MARKER,
    COMMIT_MARKER,
    BatchInfo,
    build_batch,
    build_marker_batch,
    read_batch_info,
    read_marker,
)
from odradek.storage.producer_state import AbortedTxn, BatchMetadata, ProducerStateManager

E = ErrorCode
NOW = 1_700_000_000_000
P, Q, R = 1000, 2000, 3000


def data(pid, epoch, seq, count=1, *, transactional=True, ts=NOW) -> BatchInfo:
    buf = build_batch([(b"k", b"v%d" % i) for i in range(count)], timestamp_ms=ts, producer_id=pid,
                      producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)
    return read_batch_info(buf, 0)


def marker(pid, epoch, commit, coordinator_epoch=0, *, ts=NOW) -> tuple[BatchInfo, tuple[int, int]]:
    buf = build_marker_batch(commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                             timestamp_ms=ts)
    info = read_batch_info(buf, 0)
    return info, read_marker(buf, info)


class Partition:
    """The shell's part: validate, append at the log end, update."""

    def __init__(self, state: ProducerStateManager | None = None, log_end: int = 0):
        self.state = state or ProducerStateManager()
        self.log_end = log_end

    def produce(self, info: BatchInfo, guard=False) -> int:
        duplicate = self.state.check(info)
        if duplicate is not None:
            return duplicate.first_offset
        if guard is not False:
            self.state.check_verified(info, guard)
        first, last = self.log_end, self.log_end + info.last_offset_delta
        self.state.update(info, first, last)
        self.log_end = last + 1
        return first

    def plain(self, count=1) -> int:
        return self.produce(data(-1, -1, -1, count, transactional=False))

    def end(self, pid, epoch, commit, coordinator_epoch=0, *, ts=NOW) -> int:
        info, mark = marker(pid, epoch, commit, coordinator_epoch, ts=ts)
        self.state.check_marker(pid, epoch, coordinator_epoch)
        offset = self.log_end
        self.state.update(info, offset, offset, ts, marker=mark)
        self.log_end = offset + 1
        return offset


def code_of(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        fn(*args, **kwargs)
    return err.value.code


def test_markers_built_by_the_records_module_read_back():
    info, mark = marker(P, 3, True, 7)
    assert info.is_control and info.is_transactional and info.producer_id == P and info.producer_epoch == 3
    assert mark == (COMMIT_MARKER, 7)
    assert marker(P, 3, False, 9)[1] == (ABORT_MARKER, 9)


def test_first_transactional_batch_opens_the_transaction_at_its_offset():
    p = Partition()
    p.plain(5)
    assert p.state.first_unstable_offset() is None
    assert p.produce(data(P, 0, 0, 2)) == 5
    entry = p.state.entry(P)
    assert entry.txn_first_offset == 5
    assert p.state.open_transactions() == [entry]
    assert p.state.first_unstable_offset() == 5
    assert p.produce(data(P, 0, 2, 3)) == 7
    assert entry.txn_first_offset == 5, "later batches of the transaction do not move its start"
    assert p.state.first_unstable_offset() == 5


def test_a_non_transactional_batch_inside_an_open_transaction_is_refused():
    p = Partition()
    p.produce(data(P, 0, 0))
    info = data(P, 0, 1, transactional=False)
    assert code_of(p.produce, info) == E.INVALID_TXN_STATE
    assert p.log_end == 1
    p.end(P, 0, True)
    assert p.produce(info) == 2, "after the marker it is an idempotent batch like any other"
    assert p.state.entry(P).txn_first_offset == -1


def test_a_non_transactional_producer_does_not_open_a_transaction():
    p = Partition()
    p.produce(data(P, 0, 0, transactional=False))
    assert p.state.entry(P).txn_first_offset == -1
    assert p.state.first_unstable_offset() is None


def test_commit_marker_closes_the_transaction_and_it_stays_unstable_until_replicated():
    p = Partition()
    p.plain(2)
    p.produce(data(P, 0, 0, 3))  # 2..4
    assert p.end(P, 0, True, 5) == 5
    entry = p.state.entry(P)
    assert (entry.txn_first_offset, entry.coordinator_epoch, entry.epoch) == (-1, 5, 0)
    assert p.state.open_transactions() == []
    assert p.state.aborted == []
    assert p.state.unreplicated == [(2, 5)]
    assert p.state.first_unstable_offset() == 2, "the marker is not below the high watermark yet"
    p.state.on_high_watermark(5)
    assert p.state.first_unstable_offset() == 2, "a high watermark at the marker has not passed it"
    p.state.on_high_watermark(6)
    assert p.state.first_unstable_offset() is None
    assert p.state.unreplicated == []


def test_abort_marker_records_the_aborted_transaction():
    p = Partition()
    p.produce(data(P, 0, 0, 2))  # 0..1
    p.plain()  # 2
    assert p.end(P, 0, False, 1) == 3
    assert p.state.aborted == [AbortedTxn(P, 0, 3)]
    assert p.state.entry(P).txn_first_offset == -1
    assert p.state.unreplicated == [(0, 3)]


def test_first_unstable_offset_is_the_lowest_of_open_and_unreplicated_transactions():
    p = Partition()
    p.produce(data(P, 0, 0))  # 0, P opens
    p.produce(data(Q, 0, 0))  # 1, Q opens
    p.produce(data(R, 0, 0))  # 2, R opens
    assert p.state.first_unstable_offset() == 0
    p.end(P, 0, True)  # 3
    assert p.state.first_unstable_offset() == 0, "P's marker is not replicated"
    p.state.on_high_watermark(4)
    assert p.state.first_unstable_offset() == 1
    p.end(R, 0, False)  # 4
    p.state.on_high_watermark(5)
    assert p.state.first_unstable_offset() == 1
    p.end(Q, 0, True)  # 5
    assert p.state.first_unstable_offset() == 1
    p.produce(data(P, 0, 1))  # 6: P's next transaction
    p.state.on_high_watermark(6)
    assert p.state.first_unstable_offset() == 6
    assert [e.producer_id for e in p.state.open_transactions()] == [P]


def test_on_high_watermark_keeps_transactions_whose_marker_it_has_not_passed():
    state = ProducerStateManager()
    state.unreplicated = [(0, 3), (4, 9), (5, 6)]
    state.on_high_watermark(7)
    assert state.unreplicated == [(4, 9)]
    assert state.first_unstable_offset() == 4


def test_aborted_transactions_overlapping_a_range():
    state = ProducerStateManager()
    state.aborted = [AbortedTxn(P, 0, 3), AbortedTxn(Q, 10, 15), AbortedTxn(R, 12, 20)]
    assert state.aborted_transactions(0, 100) == state.aborted
    assert state.aborted_transactions(0, 1) == [AbortedTxn(P, 0, 3)]
    assert state.aborted_transactions(3, 4) == [AbortedTxn(P, 0, 3)], "the marker offset itself is inside"
    assert state.aborted_transactions(4, 10) == [], "Q's first offset is the exclusive end"
    assert state.aborted_transactions(4, 11) == [AbortedTxn(Q, 10, 15)]
    assert state.aborted_transactions(16, 17) == [AbortedTxn(R, 12, 20)]
    assert state.aborted_transactions(21, 30) == []
    assert state.aborted_transactions(15, 16) == [AbortedTxn(Q, 10, 15), AbortedTxn(R, 12, 20)]


def test_forget_aborted_before_drops_transactions_whose_marker_is_below_the_log_start():
    state = ProducerStateManager()
    state.aborted = [AbortedTxn(P, 0, 3), AbortedTxn(Q, 2, 8), AbortedTxn(R, 12, 20)]
    state.forget_aborted_before(3)
    assert state.aborted == [AbortedTxn(P, 0, 3), AbortedTxn(Q, 2, 8), AbortedTxn(R, 12, 20)]
    state.forget_aborted_before(4)
    assert state.aborted == [AbortedTxn(Q, 2, 8), AbortedTxn(R, 12, 20)]
    state.forget_aborted_before(21)
    assert state.aborted == []


def test_check_marker_fences_an_older_coordinator_and_an_older_producer_epoch():
    p = Partition()
    p.state.check_marker(P, 0, 0)  # an unknown producer: any marker is accepted
    p.produce(data(P, 2, 0))
    p.end(P, 2, True, 5)
    assert code_of(p.state.check_marker, P, 2, 4) == E.TRANSACTION_COORDINATOR_FENCED
    assert code_of(p.state.check_marker, P, 1, 5) == E.INVALID_PRODUCER_EPOCH
    p.state.check_marker(P, 2, 5)  # a retried marker
    p.state.check_marker(P, 3, 6)  # a fence under a newer coordinator


def test_a_marker_stale_in_both_epochs_is_an_invalid_producer_epoch():
    p = Partition()
    p.produce(data(P, 2, 0))
    p.end(P, 2, True, 5)
    assert code_of(p.state.check_marker, P, 1, 4) == E.INVALID_PRODUCER_EPOCH


def test_a_marker_with_a_bumped_epoch_fences_the_old_epoch_and_clears_the_sequences():
    p = Partition()
    p.produce(data(P, 0, 0, 3))
    p.end(P, 1, False)  # the coordinator fenced epoch 0 and aborted
    entry = p.state.entry(P)
    assert (entry.epoch, list(entry.batches), entry.txn_first_offset) == (1, [], -1)
    assert p.state.aborted == [AbortedTxn(P, 0, 3)]
    assert code_of(p.produce, data(P, 0, 3)) == E.INVALID_PRODUCER_EPOCH, "the zombie"
    assert code_of(p.produce, data(P, 1, 5)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(data(P, 1, 0)) == 4


def test_a_marker_of_the_same_epoch_keeps_the_sequences():
    p = Partition()
    p.produce(data(P, 0, 0, 3))
    p.end(P, 0, True)
    assert p.state.entry(P).last_seq == 2
    assert code_of(p.produce, data(P, 0, 0)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(data(P, 0, 3)) == 4
    assert p.state.entry(P).txn_first_offset == 4


def test_a_marker_without_an_open_transaction_here_changes_no_transaction():
    p = Partition()
    p.plain(3)
    p.end(P, 0, False, 2)  # a transaction that wrote nothing to this partition
    entry = p.state.entry(P)
    assert (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset) == (0, 2, -1)
    assert p.state.aborted == [] and p.state.unreplicated == []
    assert p.state.first_unstable_offset() is None
    p.produce(data(P, 0, 0))
    p.end(P, 0, False, 2)
    p.end(P, 0, False, 2)  # a retried marker
    assert p.state.aborted == [AbortedTxn(P, 4, 5)]


# ---- KIP-890 verification guards


def test_verification_guard_lets_the_first_transactional_batch_in():
    p = Partition()
    assert p.state.needs_verification(P)
    guard = p.state.start_verification(P)
    assert p.state.start_verification(P) is guard, "a verification under way is reused"
    info = data(P, 0, 0)
    assert code_of(p.produce, info, None) == E.INVALID_TXN_STATE, "not verified"
    assert code_of(p.produce, info, object()) == E.INVALID_TXN_STATE, "another verification's guard"
    assert p.produce(info, guard) == 0
    assert P not in p.state.verifying, "the first transactional append drops the guard"
    assert not p.state.needs_verification(P)
    assert p.produce(data(P, 0, 1), None) == 1, "inside the open transaction no verification is needed"


def test_non_transactional_batches_need_no_verification():
    p = Partition()
    assert p.produce(data(P, 0, 0, transactional=False), None) == 0


def test_a_marker_drops_the_guard_of_a_verification_made_before_it():
    p = Partition()
    p.produce(data(P, 0, 0))
    p.end(P, 0, True)
    assert p.state.needs_verification(P)
    guard = p.state.start_verification(P)
    p.end(P, 0, False)  # e.g. the coordinator aborted the transaction the verification saw
    assert P not in p.state.verifying
    assert code_of(p.produce, data(P, 0, 1), guard) == E.INVALID_TXN_STATE
    assert p.produce(data(P, 0, 1), p.state.start_verification(P)) == 3


def test_verification_guards_are_per_producer():
    p = Partition()
    guard_p = p.state.start_verification(P)
    guard_q = p.state.start_verification(Q)
    assert guard_p is not guard_q
    assert code_of(p.produce, data(P, 0, 0), guard_q) == E.INVALID_TXN_STATE
    assert p.produce(data(Q, 0, 0), guard_q) == 0
    assert p.state.verifying == {P: guard_p}


# ---- snapshots


def build_state() -> Partition:
    p = Partition()
    p.produce(data(P, 0, 0, 2))  # 0..1
    p.end(P, 0, False, 3)  # 2
    p.produce(data(Q, 4, 10, 3, transactional=False))  # 3..5, idempotent only
    p.produce(data(R, 1, 0))  # 6: R's open transaction
    p.produce(data(P, 0, 2))  # 7: P's next, open
    p.end(R, 1, True, 4)  # 8
    p.produce(data(R, 1, 1))  # 9: R again
    return p


def test_snapshot_round_trip_keeps_open_transactions_and_aborted_list():
    p = build_state()
    data_bytes = p.state.snapshot()
    assert struct.unpack_from(">h", data_bytes)[0] == 2
    loaded = ProducerStateManager.from_snapshot(data_bytes)
    assert loaded.snapshot() == data_bytes
    assert loaded.aborted == [AbortedTxn(P, 0, 2)]
    got = {pid: (e.epoch, e.coordinator_epoch, e.txn_first_offset, list(e.batches))
           for pid, e in loaded.producers.items()}
    want = {pid: (e.epoch, e.coordinator_epoch, e.txn_first_offset, list(e.batches))
            for pid, e in p.state.producers.items()}
    assert got == want
    assert got[P][:3] == (0, 3, 7)
    assert got[R][:3] == (1, 4, 9)
    assert got[Q][:3] == (4, -1, -1)
    assert loaded.first_unstable_offset() == 7
    assert loaded.unreplicated == [], "unreplicated transactions are not part of a snapshot"
    # the loaded state goes on where the original was
    q = Partition(loaded, p.log_end)
    assert code_of(q.produce, data(P, 0, 3, transactional=False)) == E.INVALID_TXN_STATE
    q.end(P, 0, False, 3)
    assert loaded.aborted == [AbortedTxn(P, 0, 2), AbortedTxn(P, 7, 10)]
    assert code_of(loaded.check_marker, R, 1, 3) == E.TRANSACTION_COORDINATOR_FENCED


def test_a_version_1_snapshot_still_loads():
    body = bytearray()
    body += struct.pack(">qhb", P, 3, 2)  # producer id, epoch, batch count
    body += struct.pack(">iiqqq", 0, 1, 10, 11, NOW)
    body += struct.pack(">iiqqq", 2, 4, 12, 14, NOW + 5)
    body += struct.pack(">qhb", Q, 0, 0)
    snapshot = struct.pack(">hIi", 1, crc32c(bytes(body)), 2) + bytes(body)
    state = ProducerStateManager.from_snapshot(snapshot)
    entry = state.entry(P)
    assert (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset) == (3, -1, -1)
    assert list(entry.batches) == [BatchMetadata(0, 1, 10, 11, NOW), BatchMetadata(2, 4, 12, 14, NOW + 5)]
    assert state.entry(Q).epoch == 0 and not state.entry(Q).batches
    assert state.aborted == [] and state.first_unstable_offset() is None
    # it goes on: the next sequence, and a transaction
    p = Partition(state, 15)
    assert p.produce(data(P, 3, 5)) == 15
    assert state.entry(P).txn_first_offset == 15
    # and is written back as version 2
    assert struct.unpack_from(">h", state.snapshot())[0] == 2


def test_remove_expired_keeps_producers_with_an_open_transaction():
    p = Partition()
    p.produce(data(P, 0, 0, ts=NOW))  # open
    p.produce(data(Q, 0, 0, transactional=False, ts=NOW))
    p.produce(data(R, 0, 0, ts=NOW))
    p.end(R, 0, True, ts=NOW)
    assert sorted(p.state.remove_expired(NOW + 10_000, 1_000)) == [Q, R]
    assert list(p.state.producers) == [P]
    assert p.state.remove_expired(NOW + 10**9, 1_000) == []
    p.end(P, 0, False, ts=NOW)
    assert p.state.remove_expired(NOW + 10_000, 1_000) == [P]


def test_a_marker_counts_as_activity_for_expiration():
    p = Partition()
    p.produce(data(P, 0, 0, ts=NOW))
    p.end(P, 1, False, ts=NOW + 5_000)  # fenced by the coordinator: epoch 1
    assert p.state.remove_expired(NOW + 5_500, 1_000) == []
    assert code_of(p.produce, data(P, 0, 1)) == E.INVALID_PRODUCER_EPOCH


def test_rebuild_from_replays_data_and_markers():
    p = build_state()
    replay = ProducerStateManager()
    batches = []
    offset = 0
    # the same history as build_state, with the offsets as stored
    for info, mark in [
        (data(P, 0, 0, 2), None), (marker(P, 0, False, 3)), (data(Q, 4, 10, 3, transactional=False), None),
        (data(R, 1, 0), None), (data(P, 0, 2), None), (marker(R, 1, True, 4)), (data(R, 1, 1), None),
    ]:
        batches.append((info._replace(base_offset=offset), mark))
        offset += info.last_offset_delta + 1
    replay.rebuild_from(batches)
    assert replay.snapshot() == p.state.snapshot()
    assert replay.unreplicated == p.state.unreplicated
