"""The transaction coordinator's state machine (sans-I/O): InitProducerId, AddPartitionsToTxn, EndTxn, markers,
timeouts, verification and the `__transaction_state` records, against Kafka 4.0's TransactionCoordinator /
TransactionMetadata semantics (TV0/TV1)."""

import random

import pytest

from odradek.coordinator.group_coordinator import java_string_hash
from odradek.coordinator.transactions import (
    EndMarkers,
    Fence,
    NeedProducerId,
    TransactionCoordinator,
    Transit,
    TxnState,
    decode_record,
    encode_key,
    encode_value,
)
from odradek.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
S = TxnState
NOW = 1_700_000_000_000
TIMEOUT = 60_000
PID = 4000
T0, T1, T2 = ("orders", 0), ("orders", 1), ("payments", 3)


def code_of(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        fn(*args, **kwargs)
    return err.value.code


def apply(coord: TransactionCoordinator, transit: Transit) -> EndMarkers | None:
    """The shell's part for one transit: write it (begin) and adopt it once durable (complete)."""
    assert isinstance(transit, Transit), transit
    coord.begin(transit)
    return coord.complete(transit)


def new_id(coord, tid="tx", pid=PID, *, now=NOW, timeout=TIMEOUT) -> Transit:
    assert coord.prepare_init(tid, timeout, -1, -1, now) == NeedProducerId()
    transit = coord.prepare_init(tid, timeout, -1, -1, now, new_producer_id=pid)
    apply(coord, transit)
    return transit


def seed(coord, tid="tx", *, pid=PID, epoch=0, state=S.EMPTY, partitions=(), start=-1, now=NOW,
         timeout=TIMEOUT) -> None:
    """Put a transactional id in a given state, as if loaded from `__transaction_state`."""
    transit = Transit(tid, pid, epoch, -1, timeout, state, frozenset(partitions), start, now)
    coord.load(coord.partition_for(tid), [(encode_key(tid), encode_value(transit))])


def ongoing(coord, tid="tx", pid=PID, *, now=NOW, partitions=(T0, T1)) -> int:
    """A new id with an open transaction on `partitions`; returns its epoch."""
    new_id(coord, tid, pid, now=now)
    epoch = coord.get(tid).producer_epoch
    apply(coord, coord.prepare_add_partitions(tid, pid, epoch, set(partitions), now))
    return epoch


def state_of(coord, tid="tx"):
    txn = coord.get(tid)
    return txn.producer_id, txn.producer_epoch, txn.state


# ---- InitProducerId


def test_new_transactional_id_needs_a_producer_id_then_gets_epoch_0():
    coord = TransactionCoordinator()
    assert coord.prepare_init("tx", TIMEOUT, -1, -1, NOW) == NeedProducerId()
    assert coord.get("tx") is None, "preparing changes nothing"
    transit = coord.prepare_init("tx", TIMEOUT, -1, -1, NOW, new_producer_id=PID)
    assert transit == Transit("tx", PID, 0, -1, TIMEOUT, S.EMPTY, frozenset(), -1, NOW)
    assert coord.get("tx") is None
    coord.begin(transit)
    assert coord.get("tx").pending == transit
    assert code_of(coord.describe, "tx") == E.TRANSACTIONAL_ID_NOT_FOUND, "not durable yet"
    assert coord.complete(transit) is None
    txn = coord.describe("tx")
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions) == (PID, 0, S.EMPTY, set())
    assert (txn.start_ms, txn.update_ms, txn.timeout_ms, txn.pending) == (-1, NOW, TIMEOUT, None)
    assert txn.partition == coord.partition_for("tx")


def test_new_id_resuming_with_a_producer_id_still_gets_epoch_0():
    # KIP-360: a producer that lost its state names its old id/epoch; the coordinator has no metadata: new id
    coord = TransactionCoordinator()
    assert coord.prepare_init("tx", TIMEOUT, 77, 5, NOW) == NeedProducerId()
    transit = coord.prepare_init("tx", TIMEOUT, 77, 5, NOW, new_producer_id=PID)
    assert (transit.producer_id, transit.producer_epoch, transit.state) == (PID, 0, S.EMPTY)


@pytest.mark.parametrize("commit", [None, True, False])
def test_init_bumps_the_epoch_from_empty_and_complete_states(commit):
    coord = TransactionCoordinator()
    new_id(coord)
    if commit is not None:
        apply(coord, coord.prepare_add_partitions("tx", PID, 0, {T0}, NOW))
        apply(coord, coord.prepare_end("tx", PID, 0, commit, NOW + 1))
        apply(coord, coord.prepare_complete("tx", NOW + 2))
        assert coord.get("tx").state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    transit = coord.prepare_init("tx", 30_000, -1, -1, NOW + 10)
    assert transit == Transit("tx", PID, 1, -1, 30_000, S.EMPTY, frozenset(), -1, NOW + 10)
    apply(coord, transit)
    assert state_of(coord) == (PID, 1, S.EMPTY)
    assert coord.get("tx").timeout_ms == 30_000
    apply(coord, coord.prepare_init("tx", TIMEOUT, -1, -1, NOW + 20))
    assert state_of(coord) == (PID, 2, S.EMPTY)


def test_kip360_resume_with_the_current_epoch_bumps_and_remembers_it():
    coord = TransactionCoordinator()
    new_id(coord)
    transit = coord.prepare_init("tx", TIMEOUT, PID, 0, NOW + 1)
    assert (transit.producer_id, transit.producer_epoch, transit.last_producer_epoch) == (PID, 1, 0)
    apply(coord, transit)
    # the response was lost: the retry with the same (pid, epoch) gets the same answer, no second bump
    retry = coord.prepare_init("tx", TIMEOUT, PID, 0, NOW + 2)
    assert (retry.producer_id, retry.producer_epoch) == (PID, 1)
    apply(coord, retry)
    assert state_of(coord) == (PID, 1, S.EMPTY)
    # resuming from the current epoch bumps again
    apply(coord, coord.prepare_init("tx", TIMEOUT, PID, 1, NOW + 3))
    assert state_of(coord) == (PID, 2, S.EMPTY)
    assert coord.get("tx").last_producer_epoch == 1


def test_kip360_resume_with_any_other_epoch_or_producer_id_is_fenced():
    coord = TransactionCoordinator()
    new_id(coord)
    apply(coord, coord.prepare_init("tx", TIMEOUT, PID, 0, NOW))  # epoch 1, last epoch 0
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID, 5, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID + 1, 1, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID + 1, 1, NOW, new_producer_id=9) == E.PRODUCER_FENCED
    # a new producer instance (no id) bumps and forgets the last epoch: the old instance's retry is fenced
    apply(coord, coord.prepare_init("tx", TIMEOUT, -1, -1, NOW))
    assert state_of(coord) == (PID, 2, S.EMPTY)
    assert coord.get("tx").last_producer_epoch == -1
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID, 0, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID, 1, NOW) == E.PRODUCER_FENCED
    assert state_of(coord) == (PID, 2, S.EMPTY), "a refused request changes nothing"


def test_init_on_an_ongoing_transaction_fences_and_aborts_it_first():
    coord = TransactionCoordinator()
    epoch = ongoing(coord, now=NOW)
    fence = coord.prepare_init("tx", TIMEOUT, -1, -1, NOW + 5)
    assert isinstance(fence, Fence)
    abort = fence.abort
    assert (abort.producer_id, abort.producer_epoch, abort.state) == (PID, epoch + 1, S.PREPARE_ABORT)
    assert abort.partitions == frozenset({T0, T1})
    assert (abort.last_producer_epoch, abort.start_ms, abort.update_ms) == (-1, NOW, NOW + 5)
    assert state_of(coord) == (PID, epoch, S.ONGOING), "preparing the fence changes nothing"
    coord.begin(abort)
    assert code_of(coord.prepare_init, "tx", TIMEOUT, -1, -1, NOW + 6) == E.CONCURRENT_TRANSACTIONS
    markers = coord.complete(abort)
    assert markers == EndMarkers("tx", PID, epoch + 1, False, frozenset({T0, T1}))
    # the old instance is fenced everywhere
    assert code_of(coord.prepare_add_partitions, "tx", PID, epoch, {T2}, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_end, "tx", PID, epoch, True, NOW) == E.PRODUCER_FENCED
    # the new instance retries while the markers are written...
    assert code_of(coord.prepare_init, "tx", TIMEOUT, -1, -1, NOW + 7) == E.CONCURRENT_TRANSACTIONS
    apply(coord, coord.prepare_complete("tx", NOW + 8))
    assert state_of(coord) == (PID, epoch + 1, S.COMPLETE_ABORT)
    # ...and is bumped once more after the abort completed
    apply(coord, coord.prepare_init("tx", TIMEOUT, -1, -1, NOW + 9))
    assert state_of(coord) == (PID, epoch + 2, S.EMPTY)


def test_init_on_an_ongoing_transaction_checks_the_producer_id_first():
    coord = TransactionCoordinator()
    ongoing(coord)
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID + 1, 0, NOW) == E.PRODUCER_FENCED
    # the same producer id fences its own open transaction, whatever epoch it names
    assert isinstance(coord.prepare_init("tx", TIMEOUT, PID, 0, NOW), Fence)


def test_epoch_exhaustion_rotates_to_a_new_producer_id():
    coord = TransactionCoordinator()
    seed(coord, epoch=32765)
    apply(coord, coord.prepare_init("tx", TIMEOUT, -1, -1, NOW))
    assert state_of(coord) == (PID, 32766, S.EMPTY), "32766 is still handed out"
    assert coord.prepare_init("tx", TIMEOUT, -1, -1, NOW) == NeedProducerId()
    transit = coord.prepare_init("tx", 20_000, -1, -1, NOW + 1, new_producer_id=PID + 1)
    assert transit == Transit("tx", PID + 1, 0, -1, 20_000, S.EMPTY, frozenset(), -1, NOW + 1, previous_producer_id=PID)
    apply(coord, transit)
    assert state_of(coord) == (PID + 1, 0, S.EMPTY)


@pytest.mark.parametrize("state", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_epoch_exhaustion_rotates_when_resuming_with_the_current_epoch(state):
    coord = TransactionCoordinator()
    seed(coord, epoch=32766, state=state)
    assert coord.prepare_init("tx", TIMEOUT, PID, 32766, NOW) == NeedProducerId()
    transit = coord.prepare_init("tx", TIMEOUT, PID, 32766, NOW, new_producer_id=PID + 1)
    assert (transit.producer_id, transit.producer_epoch, transit.state) == (PID + 1, 0, S.EMPTY)


def test_fencing_at_the_last_epoch_leads_to_a_new_producer_id():
    coord = TransactionCoordinator()
    seed(coord, epoch=32766, state=S.ONGOING, partitions={T0}, start=NOW)
    fence = coord.prepare_init("tx", TIMEOUT, -1, -1, NOW)
    assert fence.abort.producer_epoch == 32767, "the reserved epoch is for the coordinator's fence"
    apply(coord, fence.abort)
    apply(coord, coord.prepare_complete("tx", NOW))
    assert coord.prepare_init("tx", TIMEOUT, -1, -1, NOW) == NeedProducerId()
    apply(coord, coord.prepare_init("tx", TIMEOUT, -1, -1, NOW, new_producer_id=PID + 1))
    assert state_of(coord) == (PID + 1, 0, S.EMPTY)


def test_retry_of_a_resuming_init_that_rotated_the_producer_id_gets_the_same_answer():
    coord = TransactionCoordinator()
    seed(coord, epoch=32766)
    apply(coord, coord.prepare_init("tx", TIMEOUT, PID, 32766, NOW, new_producer_id=PID + 1))
    assert state_of(coord) == (PID + 1, 0, S.EMPTY)
    # the response was lost; the producer retries with what it had
    retry = coord.prepare_init("tx", TIMEOUT, PID, 32766, NOW + 1, new_producer_id=PID + 2)
    assert (retry.producer_id, retry.producer_epoch) == (PID + 1, 0)


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_invalid_transaction_timeout(timeout):
    coord = TransactionCoordinator(max_timeout_ms=900_000)
    assert code_of(coord.prepare_init, "tx", timeout, -1, -1, NOW) == E.INVALID_TRANSACTION_TIMEOUT
    new_id(coord)
    assert code_of(coord.prepare_init, "tx", timeout, -1, -1, NOW) == E.INVALID_TRANSACTION_TIMEOUT
    assert state_of(coord) == (PID, 0, S.EMPTY)


def test_the_largest_timeout_is_valid():
    coord = TransactionCoordinator(max_timeout_ms=900_000)
    assert coord.prepare_init("tx", 900_000, -1, -1, NOW, new_producer_id=PID).timeout_ms == 900_000


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_markers_are_written_is_concurrent(state):
    coord = TransactionCoordinator()
    seed(coord, epoch=3, state=state, partitions={T0}, start=NOW)
    assert code_of(coord.prepare_init, "tx", TIMEOUT, -1, -1, NOW) == E.CONCURRENT_TRANSACTIONS
    assert code_of(coord.prepare_init, "tx", TIMEOUT, PID, 3, NOW) == E.CONCURRENT_TRANSACTIONS


# ---- AddPartitionsToTxn


def test_add_partitions_from_empty_opens_the_transaction_at_now():
    coord = TransactionCoordinator()
    new_id(coord, now=NOW)
    transit = coord.prepare_add_partitions("tx", PID, 0, {T0, T1}, NOW + 100)
    assert transit == Transit("tx", PID, 0, -1, TIMEOUT, S.ONGOING, frozenset({T0, T1}), NOW + 100, NOW + 100)
    apply(coord, transit)
    assert coord.get("tx").partitions == {T0, T1}
    # partitions already in the transaction: nothing to write
    assert coord.prepare_add_partitions("tx", PID, 0, {T0}, NOW + 200) is None
    assert coord.prepare_add_partitions("tx", PID, 0, {T0, T1}, NOW + 200) is None
    # more partitions: the union, the start time unchanged
    more = coord.prepare_add_partitions("tx", PID, 0, {T1, T2}, NOW + 300)
    assert (more.state, more.partitions, more.start_ms, more.update_ms) == (
        S.ONGOING, frozenset({T0, T1, T2}), NOW + 100, NOW + 300)


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_after_a_completed_transaction_starts_afresh(commit):
    coord = TransactionCoordinator()
    ongoing(coord, now=NOW)
    apply(coord, coord.prepare_end("tx", PID, 0, commit, NOW + 1))
    apply(coord, coord.prepare_complete("tx", NOW + 2))
    transit = coord.prepare_add_partitions("tx", PID, 0, {T2}, NOW + 50)
    assert (transit.state, transit.partitions, transit.start_ms) == (S.ONGOING, frozenset({T2}), NOW + 50)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_add_partitions_while_completing_is_concurrent(state):
    coord = TransactionCoordinator()
    seed(coord, epoch=2, state=state, partitions={T0}, start=NOW)
    assert code_of(coord.prepare_add_partitions, "tx", PID, 2, {T1}, NOW) == E.CONCURRENT_TRANSACTIONS
    assert code_of(coord.prepare_add_partitions, "tx", PID, 2, {T0}, NOW) == E.CONCURRENT_TRANSACTIONS
    # the epoch is checked before the state
    assert code_of(coord.prepare_add_partitions, "tx", PID, 1, {T1}, NOW) == E.PRODUCER_FENCED


def test_add_partitions_with_a_wrong_epoch_or_producer_id():
    coord = TransactionCoordinator()
    seed(coord, epoch=2)
    assert code_of(coord.prepare_add_partitions, "tx", PID, 1, {T0}, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_add_partitions, "tx", PID, 3, {T0}, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_add_partitions, "tx", PID + 1, 2, {T0}, NOW) == E.INVALID_PRODUCER_ID_MAPPING
    assert code_of(coord.prepare_add_partitions, "nope", PID, 2, {T0}, NOW) == E.INVALID_PRODUCER_ID_MAPPING
    assert state_of(coord) == (PID, 2, S.EMPTY)


def test_a_transit_being_written_makes_the_id_busy():
    coord = TransactionCoordinator()
    new_id(coord)
    transit = coord.prepare_add_partitions("tx", PID, 0, {T0}, NOW)
    coord.begin(transit)
    assert code_of(coord.prepare_add_partitions, "tx", PID, 0, {T1}, NOW) == E.CONCURRENT_TRANSACTIONS
    assert code_of(coord.prepare_init, "tx", TIMEOUT, -1, -1, NOW) == E.CONCURRENT_TRANSACTIONS
    assert code_of(coord.prepare_end, "tx", PID, 0, True, NOW) == E.CONCURRENT_TRANSACTIONS
    # verification does not look at the pending write (Kafka's handleVerifyPartitionsInTransaction)
    assert coord.verify_partitions("tx", PID, 0, [T0]) == {T0: E.TRANSACTION_ABORTABLE}
    coord.complete(transit)
    assert coord.get("tx").pending is None
    assert coord.verify_partitions("tx", PID, 0, [T0]) == {T0: E.NONE}


def test_abandon_of_a_brand_new_id_forgets_it():
    coord = TransactionCoordinator()
    transit = coord.prepare_init("tx", TIMEOUT, -1, -1, NOW, new_producer_id=PID)
    coord.begin(transit)
    assert code_of(coord.prepare_init, "tx", TIMEOUT, -1, -1, NOW) == E.CONCURRENT_TRANSACTIONS
    assert code_of(coord.prepare_add_partitions, "tx", PID, 0, {T0}, NOW) == E.INVALID_PRODUCER_ID_MAPPING
    coord.abandon(transit)
    assert coord.get("tx") is None
    assert coord.prepare_init("tx", TIMEOUT, -1, -1, NOW) == NeedProducerId()


def test_abandon_of_a_known_id_keeps_its_metadata():
    coord = TransactionCoordinator()
    new_id(coord)
    transit = coord.prepare_add_partitions("tx", PID, 0, {T0}, NOW + 5)
    coord.begin(transit)
    coord.abandon(transit)
    txn = coord.get("tx")
    assert (txn.state, txn.partitions, txn.pending, txn.start_ms) == (S.EMPTY, set(), None, -1)
    assert coord.prepare_add_partitions("tx", PID, 0, {T0}, NOW + 6).state == S.ONGOING


# ---- EndTxn


END_TABLE = [
    # (state, commit, expected: a Prepare state, None for a no-op retry, or an error code)
    (S.ONGOING, True, S.PREPARE_COMMIT),
    (S.ONGOING, False, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, True, E.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, True, E.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, False, E.CONCURRENT_TRANSACTIONS),
    (S.COMPLETE_COMMIT, True, None),
    (S.COMPLETE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, True, E.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, None),
    (S.EMPTY, True, E.INVALID_TXN_STATE),
    (S.EMPTY, False, E.INVALID_TXN_STATE),
]


@pytest.mark.parametrize(("state", "commit", "expected"), END_TABLE)
def test_end_txn_table(state, commit, expected):
    coord = TransactionCoordinator()
    partitions = {T0, T1} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else set()
    seed(coord, epoch=4, state=state, partitions=partitions, start=NOW if partitions else -1)
    if isinstance(expected, ErrorCode):
        assert code_of(coord.prepare_end, "tx", PID, 4, commit, NOW + 1) == expected
        assert state_of(coord) == (PID, 4, state)
        return
    transit = coord.prepare_end("tx", PID, 4, commit, NOW + 1)
    if expected is None:
        assert transit is None
        return
    assert transit == Transit("tx", PID, 4, -1, TIMEOUT, expected, frozenset(partitions), NOW, NOW + 1)
    markers = apply(coord, transit)
    assert markers == EndMarkers("tx", PID, 4, commit, frozenset(partitions))


def test_end_txn_with_a_wrong_epoch_or_producer_id():
    coord = TransactionCoordinator()
    seed(coord, epoch=4, state=S.ONGOING, partitions={T0}, start=NOW)
    assert code_of(coord.prepare_end, "tx", PID, 3, True, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_end, "tx", PID, 5, True, NOW) == E.PRODUCER_FENCED
    assert code_of(coord.prepare_end, "tx", PID + 1, 4, True, NOW) == E.INVALID_PRODUCER_ID_MAPPING
    assert code_of(coord.prepare_end, "other", PID, 4, True, NOW) == E.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("commit", [True, False])
def test_prepare_complete_clears_the_partitions(commit):
    coord = TransactionCoordinator()
    ongoing(coord, partitions=(T0, T2))
    markers = apply(coord, coord.prepare_end("tx", PID, 0, commit, NOW + 1))
    assert markers.partitions == frozenset({T0, T2}) and markers.commit is commit
    transit = coord.prepare_complete("tx", NOW + 2)
    done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    assert (transit.state, transit.partitions, transit.update_ms, transit.producer_epoch) == (
        done, frozenset(), NOW + 2, 0)
    assert apply(coord, transit) is None
    assert coord.get("tx").partitions == set()
    assert coord.prepare_complete("tx", NOW + 3) is None, "nothing to complete any more"
    assert coord.prepare_complete("unknown", NOW) is None


def test_timed_out_picks_only_ongoing_transactions_older_than_their_timeout_and_not_busy():
    coord = TransactionCoordinator()
    ongoing(coord, "old", PID, now=NOW)
    ongoing(coord, "young", PID + 1, now=NOW + 50_000)
    ongoing(coord, "busy", PID + 2, now=NOW)
    new_id(coord, "idle", PID + 3, now=NOW - 10**9)
    seed(coord, "preparing", pid=PID + 4, state=S.PREPARE_COMMIT, partitions={T0}, start=NOW - 10**9)
    busy = coord.prepare_add_partitions("busy", PID + 2, 0, {T2}, NOW + 1)
    coord.begin(busy)
    assert coord.timed_out(NOW + TIMEOUT) == [], "not older than the timeout yet"
    aborts = coord.timed_out(NOW + TIMEOUT + 1)
    assert [t.transactional_id for t in aborts] == ["old"]
    abort = aborts[0]
    assert (abort.producer_epoch, abort.state, abort.partitions, abort.last_producer_epoch) == (
        1, S.PREPARE_ABORT, frozenset({T0, T1}), -1)
    assert state_of(coord, "old") == (PID, 0, S.ONGOING), "timed_out only proposes"
    assert apply(coord, abort) == EndMarkers("old", PID, 1, False, frozenset({T0, T1}))
    coord.complete(busy)
    assert sorted(t.transactional_id for t in coord.timed_out(NOW + 50_000 + TIMEOUT + 1)) == ["busy", "young"]


# ---- verification (AddPartitionsToTxn verify_only)


def test_verify_partitions():
    coord = TransactionCoordinator()
    ongoing(coord, partitions=(T0,))
    assert coord.verify_partitions("tx", PID, 0, [T0, T1]) == {T0: E.NONE, T1: E.TRANSACTION_ABORTABLE}
    assert coord.verify_partitions("tx", PID, 1, [T0]) == {T0: E.PRODUCER_FENCED}
    assert coord.verify_partitions("tx", PID + 1, 0, [T0, T1]) == {
        T0: E.INVALID_PRODUCER_ID_MAPPING, T1: E.INVALID_PRODUCER_ID_MAPPING}
    assert coord.verify_partitions("unknown", PID, 0, [T0]) == {T0: E.INVALID_PRODUCER_ID_MAPPING}
    apply(coord, coord.prepare_end("tx", PID, 0, True, NOW))
    assert coord.verify_partitions("tx", PID, 0, [T0, T1]) == {
        T0: E.CONCURRENT_TRANSACTIONS, T1: E.CONCURRENT_TRANSACTIONS}
    apply(coord, coord.prepare_complete("tx", NOW))
    assert coord.verify_partitions("tx", PID, 0, [T0]) == {T0: E.TRANSACTION_ABORTABLE}


# ---- loading __transaction_state


def record(tid, **fields):
    values = dict(producer_id=PID, producer_epoch=0, last_producer_epoch=-1, timeout_ms=TIMEOUT, state=S.EMPTY,
                  partitions=frozenset(), start_ms=-1, update_ms=NOW)
    values.update(fields)
    values["partitions"] = frozenset(values["partitions"])
    return encode_key(tid), encode_value(Transit(tid, **values))


def test_load_replays_records_last_one_wins_and_tombstones_remove():
    coord = TransactionCoordinator()
    p = coord.partition_for("a")
    records = [
        record("a", producer_epoch=0),
        record("b", producer_id=PID + 1, producer_epoch=7),
        record("a", producer_epoch=1, state=S.ONGOING, partitions={T0}, start_ms=NOW + 1, update_ms=NOW + 1),
        record("a", producer_epoch=1, state=S.ONGOING, partitions={T0, T2}, start_ms=NOW + 1, update_ms=NOW + 2),
        record("c", producer_id=PID + 2),
        (encode_key("c"), None),
        (b"\x00\x07garbage", b"\x00\x01"),  # a key version this broker does not know: skipped
    ]
    assert coord.load(p, records) == []
    a = coord.get("a")
    assert (a.producer_id, a.producer_epoch, a.state, a.partitions) == (PID, 1, S.ONGOING, {T0, T2})
    assert (a.start_ms, a.update_ms, a.timeout_ms, a.last_producer_epoch, a.partition) == (
        NOW + 1, NOW + 2, TIMEOUT, -1, p)
    assert state_of(coord, "b") == (PID + 1, 7, S.EMPTY)
    assert coord.get("c") is None
    # the loaded transaction goes on
    assert coord.prepare_add_partitions("a", PID, 1, {T0}, NOW) is None
    assert coord.prepare_end("a", PID, 1, True, NOW).state == S.PREPARE_COMMIT


def test_load_returns_the_markers_of_transactions_caught_in_a_prepare_state():
    coord = TransactionCoordinator()
    markers = coord.load(7, [
        record("c", producer_epoch=3, state=S.PREPARE_COMMIT, partitions={T0, T1}, start_ms=NOW),
        record("a", producer_id=PID + 1, producer_epoch=5, state=S.PREPARE_ABORT, partitions={T2}, start_ms=NOW),
        record("d", producer_epoch=1, state=S.PREPARE_COMMIT, partitions={T0}, start_ms=NOW),
        record("d", producer_epoch=1, state=S.COMPLETE_COMMIT),
        record("e", state=S.ONGOING, partitions={T0}, start_ms=NOW),
    ])
    assert sorted(markers, key=lambda m: m.transactional_id) == [
        EndMarkers("a", PID + 1, 5, False, frozenset({T2})),
        EndMarkers("c", PID, 3, True, frozenset({T0, T1})),
    ]
    transit = coord.prepare_complete("c", NOW + 1)
    assert transit.state == S.COMPLETE_COMMIT


def test_load_replaces_the_partition_and_unload_forgets_it():
    coord = TransactionCoordinator()
    coord.load(1, [record("a"), record("b")])
    coord.load(2, [record("z")])
    coord.load(1, [record("b", producer_epoch=3)])
    assert coord.get("a") is None, "a reload replaces what the partition held"
    assert state_of(coord, "b") == (PID, 3, S.EMPTY)
    coord.unload(1)
    assert coord.get("b") is None
    assert coord.get("z") is not None


# ---- record format


def test_key_layout_is_int16_version_0_then_a_string():
    assert encode_key("my-txn") == b"\x00\x00" + b"\x00\x06" + b"my-txn"
    assert decode_record(encode_key("my-txn"), None) == ("my-txn", None)
    assert decode_record(b"\x00\x01\x00\x01x", None) is None, "an unknown key version"


def test_value_layout_at_version_1():
    transit = Transit("tx", 1000, 3, -1, 60000, S.ONGOING, frozenset({("t", 2), ("t", 0)}), 111, 222)
    expected = bytes.fromhex(
        "0001"                  # value version 1 (flexible)
        "00000000000003e8"      # producer id 1000
        "0003"                  # producer epoch 3
        "0000ea60"              # timeout 60000
        "01"                    # status Ongoing
        "02"                    # compact array of 1 topic
        "0274"                  # compact string "t"
        "03" "00000000" "00000002"  # compact array [0, 2]
        "00"                    # the topic entry's tagged fields
        "00000000000000de"      # last update 222
        "000000000000006f"      # start 111
        "00"                    # no tagged fields (previous/next producer id, client TV at their defaults)
    )
    assert encode_value(transit) == expected


def test_value_of_an_empty_state_has_null_partitions():
    transit = Transit("tx", 1000, 0, -1, 60000, S.EMPTY, frozenset(), -1, 222)
    expected = bytes.fromhex("0001" "00000000000003e8" "0000" "0000ea60" "00" "00"
                             "00000000000000de" "ffffffffffffffff" "00")
    assert encode_value(transit) == expected


def test_encode_decode_round_trip():
    transit = Transit("tx", 2**40 + 5, 32766, -1, 900_000, S.PREPARE_ABORT, frozenset({T0, T1, T2}), NOW, NOW + 9)
    tid, fields = decode_record(encode_key("tx"), encode_value(transit))
    assert tid == "tx"
    assert fields["producer_id"] == 2**40 + 5
    assert fields["producer_epoch"] == 32766
    assert fields["transaction_timeout_ms"] == 900_000
    assert fields["transaction_status"] == int(S.PREPARE_ABORT)
    assert fields["transaction_last_update_timestamp_ms"] == NOW + 9
    assert fields["transaction_start_timestamp_ms"] == NOW
    assert {(p["topic"], i) for p in fields["transaction_partitions"] for i in p["partition_ids"]} == {T0, T1, T2}
    assert sorted(p["topic"] for p in fields["transaction_partitions"]) == ["orders", "payments"]
    assert fields["previous_producer_id"] == -1 and fields["next_producer_id"] == -1


def test_decode_reads_a_version_0_value_with_null_partitions():
    # as a Kafka broker with transaction.version 0 writes an Empty record
    value = bytes.fromhex("0000" "00000000000003e8" "0002" "0000ea60" "00" "ffffffff"
                          "00000000000000de" "ffffffffffffffff")
    tid, fields = decode_record(encode_key("tx"), value)
    assert (tid, fields["producer_id"], fields["producer_epoch"], fields["transaction_partitions"]) == (
        "tx", 1000, 2, None)
    coord = TransactionCoordinator()
    coord.load(0, [(encode_key("tx"), value)])
    txn = coord.get("tx")
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions, txn.start_ms, txn.update_ms) == (
        1000, 2, S.EMPTY, set(), -1, 222)


# ---- partitioning


@pytest.mark.parametrize(("tid", "partition"), [
    ("abc", 96354 % 50),
    ("hello", 99162322 % 50),
    ("Aa", 2112 % 50),
    ("BB", 2112 % 50),
    ("polygenelubricants", 0),  # hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    ("my-txn", 1061187895 % 50),  # hashCode -1061187895
    ("order-service-0", 229043367 % 50),  # hashCode -229043367
])
def test_partition_for_is_java_hash_code_abs_mod_50(tid, partition):
    assert TransactionCoordinator().partition_for(tid) == partition


def test_partition_for_follows_the_partition_count():
    coord = TransactionCoordinator(num_partitions=7)
    for tid in ("a", "my-txn", "order-service-0", "polygenelubricants"):
        h = java_string_hash(tid)
        assert coord.partition_for(tid) == (0 if h == -(2**31) else abs(h)) % 7


def test_state_display_names():
    assert [s.display for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                      "CompleteAbort", "Dead", "PrepareEpochFence"]


# ---- randomized


class Driver:
    """Random valid and invalid requests against a few transactional ids, through the shell's steps."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.coord = TransactionCoordinator(max_timeout_ms=20_000)
        self.ids = ["a", "b", "c"]
        self.next_pid = 100
        self.now = NOW
        self.pending: dict[str, Transit] = {}
        self.granted: dict[str, tuple[int, int]] = {}  # what a producer instance last got
        self.seen: dict[str, list[tuple[int, int]]] = {tid: [] for tid in self.ids}

    def new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def identity(self, tid):
        """The (pid, epoch) a request names: the current one, or a stale or made-up one."""
        txn = self.coord.get(tid)
        current = (txn.producer_id, txn.producer_epoch) if txn else (999, 0)
        roll = self.rng.random()
        if roll < 0.6:
            return current
        if roll < 0.8:
            return current[0], current[1] - self.rng.randrange(1, 3)
        if roll < 0.9:
            return current[0] + 1, current[1]
        return self.granted.get(tid, current)

    def step(self):
        rng, coord = self.rng, self.coord
        self.now += rng.randrange(0, 4000)
        tid = rng.choice(self.ids)
        if tid in self.pending and rng.random() < 0.5:
            transit = self.pending.pop(tid)
            if rng.random() < 0.15:
                coord.abandon(transit)
            else:
                coord.complete(transit)
                self.seen[tid].append((transit.producer_id, transit.producer_epoch))
            return
        op = rng.choice(["init", "init_resume", "add", "add", "end", "complete", "timeout", "verify"])
        before = coord.get(tid)
        before_id = (before.producer_id, before.producer_epoch) if before else None
        try:
            if op in ("init", "init_resume"):
                # (the shell answers INVALID_REQUEST when only one of them is -1)
                pid, epoch = self.identity(tid) if op == "init_resume" else (-1, -1)
                epoch = max(epoch, 0) if pid != -1 else epoch
                timeout = rng.choice([TIMEOUT // 10, 5_000, 20_000, 0, 20_001])
                result = coord.prepare_init(tid, timeout, pid, epoch, self.now)
                if isinstance(result, NeedProducerId):
                    result = coord.prepare_init(tid, timeout, pid, epoch, self.now, new_producer_id=self.new_pid())
                assert 0 < timeout <= 20_000
                transit = result.abort if isinstance(result, Fence) else result
                if isinstance(result, Fence):
                    assert before.state == S.ONGOING and transit.producer_epoch == before.producer_epoch + 1
                elif before is not None and before.producer_id != -1 and transit.producer_id == before.producer_id:
                    if transit.producer_epoch == before.producer_epoch:
                        # only a retry of the last bump may get the current epoch back without a bump
                        assert pid == before.producer_id and epoch == before.last_producer_epoch != -1
                    else:
                        assert transit.producer_epoch == before.producer_epoch + 1
                    if pid != -1:
                        assert epoch in (before.producer_epoch, before.last_producer_epoch)
                if not isinstance(result, Fence):
                    self.granted[tid] = (transit.producer_id, transit.producer_epoch)
            elif op == "add":
                pid, epoch = self.identity(tid)
                parts = set(rng.sample([T0, T1, T2], rng.randrange(1, 4)))
                transit = coord.prepare_add_partitions(tid, pid, epoch, parts, self.now)
                assert (pid, epoch) == before_id, "a stale or unknown producer must never be accepted"
                assert before.state in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                if transit is None:
                    assert before.state == S.ONGOING and parts <= before.partitions
                    return
                assert transit.partitions >= parts
            elif op == "end":
                pid, epoch = self.identity(tid)
                commit = rng.random() < 0.5
                transit = coord.prepare_end(tid, pid, epoch, commit, self.now)
                assert (pid, epoch) == before_id, "a stale or unknown producer must never be accepted"
                if transit is None:
                    assert before.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
                    return
                assert before.state == S.ONGOING
                assert transit.partitions == frozenset(before.partitions)
            elif op == "complete":
                transit = coord.prepare_complete(tid, self.now)
                if transit is None:
                    assert before is None or before.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
                    return
            elif op == "timeout":
                transits = coord.timed_out(self.now)
                assert not any(t.transactional_id in self.pending for t in transits), "busy ids are left alone"
                if not transits:
                    return
                transit = transits[0]
                tid = transit.transactional_id
                assert coord.get(tid).state == S.ONGOING
            else:
                pid, epoch = self.identity(tid)
                result = coord.verify_partitions(tid, pid, epoch, [T0, T1])
                if any(code in (E.NONE, E.TRANSACTION_ABORTABLE) for code in result.values()):
                    assert (pid, epoch) == before_id and before.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
                    for p, code in result.items():
                        assert (code == E.NONE) == (p in before.partitions)
                return
        except KafkaError as exc:
            assert exc.code in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING, E.CONCURRENT_TRANSACTIONS,
                                E.INVALID_TXN_STATE, E.INVALID_TRANSACTION_TIMEOUT), exc
            if exc.code == E.CONCURRENT_TRANSACTIONS and tid not in self.pending:
                assert before.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or before.pending is not None
            return
        coord.begin(transit)
        self.pending[tid] = transit

    def check(self):
        for tid, txn in self.coord.txns.items():
            if txn.producer_id == -1:
                assert txn.pending is not None, "only a brand-new id being written has no producer id"
                continue
            if txn.state not in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
                assert txn.partitions == set(), (tid, txn)
            else:
                assert txn.partitions, (tid, txn)
            if txn.state == S.EMPTY:
                assert txn.start_ms == -1
            assert 0 <= txn.producer_epoch <= 32767
        for tid, seen in self.seen.items():
            for (pid0, e0), (pid1, e1) in zip(seen, seen[1:], strict=False):
                if pid0 == pid1:
                    assert e1 >= e0, f"epoch of {tid} went back: {seen}"


@pytest.mark.parametrize("seed_", range(12))
def test_random_operations_keep_the_invariants(seed_):
    driver = Driver(random.Random(seed_))
    for _ in range(800):
        driver.step()
        driver.check()
    assert any(len(seen) > 5 for seen in driver.seen.values()), "the driver must get somewhere"


def test_ids_without_a_transaction_for_the_expiration_time_expire():
    coord = TransactionCoordinator()
    new_id(coord, "idle", now=NOW)
    ongoing(coord, "busy", PID + 1, now=NOW)
    assert coord.expired(NOW + 999, 1000) == []
    (dead,) = coord.expired(NOW + 1000, 1000)
    assert (dead.transactional_id, dead.state) == ("idle", S.DEAD)
    coord.begin(dead)
    assert code_of(coord.prepare_init, "idle", TIMEOUT, -1, -1, NOW + 1000) == E.CONCURRENT_TRANSACTIONS
    coord.remove(dead)
    assert coord.prepare_init("idle", TIMEOUT, -1, -1, NOW + 1001) == NeedProducerId()
    assert coord.get("busy").state == S.ONGOING  # an open transaction never expires


def test_a_transit_of_an_id_reloaded_while_it_was_written_is_not_adopted():
    coord = TransactionCoordinator()
    new_id(coord)
    transit = coord.prepare_add_partitions("tx", PID, 0, {T0}, NOW)
    coord.begin(transit)
    partition = coord.partition_for("tx")
    coord.unload(partition)
    assert code_of(coord.complete, transit) == E.NOT_COORDINATOR
    coord.load(partition, [(encode_key("tx"), encode_value(Transit("tx", PID, 0, -1, TIMEOUT, S.EMPTY, frozenset(),
                                                                   -1, NOW)))])
    assert code_of(coord.complete, transit) == E.NOT_COORDINATOR  # the reloaded id is not the one written for
    coord.abandon(transit)
    assert coord.get("tx").state == S.EMPTY and coord.get("tx").pending is None
