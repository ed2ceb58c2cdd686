"""Idempotent producer state: duplicates, sequence gaps, epoch fencing, wrap-around, snapshots, replay."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchInfo, build_batch, read_batch_info, scan_valid_prefix
from odradek.storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    CorruptSnapshotError,
    DuplicateInfo,
    ProducerStateManager,
)

INT32_MAX = 2**31 - 1
PID = 1000


def batch(
    seq: int, count: int = 1, *, epoch: int = 0, pid: int = PID, ts: int = 1_000, control=False
) -> BatchInfo:
    attributes = 0x20 if control else 0
    return BatchInfo(0, 100, 0, -1, attributes, count - 1, ts, ts, pid, epoch, seq, count)


class Partition:
    """The shell's part: check, append at the log end, update."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.log_end = 0

    def produce(self, info: BatchInfo) -> int:
        duplicate = self.state.check(info)
        if duplicate is not None:
            return duplicate.first_offset
        first, last = self.log_end, self.log_end + info.last_offset_delta
        self.state.update(info, first, last)
        self.log_end = last + 1
        return first


def code_of(partition: Partition, info: BatchInfo) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        partition.produce(info)
    return err.value.code


def test_in_order_batches_are_appended():
    p = Partition()
    assert [p.produce(batch(0, 3)), p.produce(batch(3, 2)), p.produce(batch(5))] == [0, 3, 5]
    assert p.state.entry(PID).last_seq == 5


def test_retry_of_any_of_the_last_five_batches_answers_its_original_offsets():
    p = Partition()
    for i in range(7):
        p.produce(batch(i * 2, 2, ts=100 + i))
    assert p.state.check(batch(12, 2)) == DuplicateInfo(12, 13, 106)
    assert p.state.check(batch(4, 2)) == DuplicateInfo(4, 5, 102)  # the oldest of the last five
    assert p.log_end == 14
    assert p.produce(batch(6, 2)) == 6 and p.log_end == 14


def test_retry_older_than_the_last_five_is_out_of_order():
    p = Partition()
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        p.produce(batch(i))
    assert code_of(p, batch(0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_same_first_sequence_but_different_range_is_not_a_duplicate():
    p = Partition()
    p.produce(batch(0, 3))
    assert code_of(p, batch(0, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_in_sequence_is_out_of_order():
    p = Partition()
    p.produce(batch(0, 2))
    assert code_of(p, batch(3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(batch(2)) == 2


def test_unknown_producer_is_accepted_at_any_sequence():
    p = Partition()
    assert p.produce(batch(4711)) == 0
    assert p.produce(batch(4712)) == 1


def test_older_epoch_is_fenced_with_invalid_producer_epoch():
    p = Partition()
    p.produce(batch(0, epoch=5))
    assert code_of(p, batch(1, epoch=4)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_newer_epoch_must_start_at_sequence_zero():
    p = Partition()
    p.produce(batch(0, 3, epoch=1))
    assert code_of(p, batch(3, epoch=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(batch(0, epoch=2)) == 3
    entry = p.state.entry(PID)
    assert entry.epoch == 2 and [b.first_seq for b in entry.batches] == [0]
    # a retry from the old epoch is fenced, not a duplicate
    assert code_of(p, batch(0, 3, epoch=1)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_from_int32_max_to_zero():
    p = Partition()
    p.produce(batch(INT32_MAX - 1, 2))  # sequences MAX-1, MAX
    assert p.produce(batch(0, 3)) == 2
    p2 = Partition()
    p2.produce(batch(INT32_MAX - 1, 4))  # a batch that itself wraps: MAX-1, MAX, 0, 1
    assert p2.state.entry(PID).last_seq == 1
    assert p2.state.check(batch(INT32_MAX - 1, 4)) == DuplicateInfo(0, 3, 1_000)
    assert p2.produce(batch(2)) == 4


def test_non_idempotent_and_control_batches_are_not_checked():
    p = Partition()
    p.produce(batch(0, epoch=3))
    assert p.state.check(batch(-1, pid=-1)) is None
    assert p.state.check(batch(-1, control=True, epoch=3)) is None


def test_control_batch_with_newer_epoch_bumps_the_epoch():
    state = ProducerStateManager()
    state.update(batch(0, epoch=1), 0, 0)
    state.update(batch(-1, epoch=2, control=True), 1, 1)
    assert state.entry(PID).epoch == 2 and not state.entry(PID).batches
    with pytest.raises(KafkaError) as err:
        state.check(batch(1, epoch=1))
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_snapshot_round_trip():
    p = Partition()
    for i in range(8):
        p.produce(batch(i * 3, 3, ts=50 + i))
    p.produce(batch(0, epoch=7, pid=2))
    restored = ProducerStateManager.from_snapshot(p.state.snapshot())
    assert {pid: (e.epoch, list(e.batches)) for pid, e in restored.producers.items()} == {
        pid: (e.epoch, list(e.batches)) for pid, e in p.state.producers.items()
    }
    assert restored.check(batch(21, 3)) == DuplicateInfo(21, 23, 57)
    assert ProducerStateManager.from_snapshot(ProducerStateManager().snapshot()).producers == {}


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend", "version"])
def test_damaged_snapshot_is_rejected(damage):
    state = ProducerStateManager()
    state.update(batch(0, 2), 0, 1)
    data = bytearray(state.snapshot())
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "truncate":
        del data[-1]
    elif damage == "extend":
        data += b"\x00"
    else:
        data[1] = 9
    with pytest.raises(CorruptSnapshotError):
        ProducerStateManager().load(bytes(data))


def test_rebuild_from_log_batches_restores_duplicate_detection():
    log = bytearray()
    offset = 0
    for seq in (0, 2, 4):
        log += build_batch([(None, b"a", []), (None, b"b", [])], base_offset=offset, producer_id=PID,
                           producer_epoch=0, base_sequence=seq, timestamp_ms=9)  # fmt: skip
        offset += 2
    log += build_batch([(None, b"plain", [])], base_offset=offset)
    infos, _ = scan_valid_prefix(log)
    state = ProducerStateManager()
    state.rebuild_from((info, None) for info in infos)
    assert state.check(read_batch_info(log, infos[1].position)) == DuplicateInfo(2, 3, 9)
    assert len(state) == 1 and state.entry(PID).last_seq == 5


def test_expired_producers_are_forgotten():
    state = ProducerStateManager()
    state.update(batch(0, pid=1, ts=1_000), 0, 0)
    state.update(batch(0, pid=2, ts=5_000), 1, 1)
    assert state.remove_expired(now_ms=7_000, expiration_ms=3_000) == [1]
    assert list(state.producers) == [2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.booleans()), min_size=1, max_size=40))
def test_retries_never_append_twice_and_offsets_stay_dense(steps):
    """Invariant: a producer that resends in-flight batches (any of its last five) never duplicates data."""
    p = Partition()
    sent: list[tuple[int, int, int]] = []  # (seq, count, offset)
    next_seq = INT32_MAX - 5  # start near the wrap on purpose
    for back, count, retry in steps:
        if retry and sent:
            seq, n, offset = sent[-1 - min(back, len(sent) - 1)]
            assert p.produce(batch(seq, n)) == offset
        else:
            offset = p.produce(batch(next_seq, count))
            sent.append((next_seq, count, offset))
            next_seq = (next_seq + count) % (INT32_MAX + 1)
        sent = sent[-NUM_BATCHES_TO_RETAIN:]
    for (_, n, offset), (_, _, next_offset) in zip(sent, sent[1:], strict=False):
        assert next_offset == offset + n
    assert p.log_end == sent[-1][2] + sent[-1][1]
