"""The transaction coordinator's state machine (sans-I/O), after Kafka's TransactionCoordinator and
TransactionMetadata.

Each transactional id has one `TxnMetadata`: its producer id and epoch, its state and the partitions its
open transaction wrote to. A request is decided in two steps: `prepare_*` checks it against the current
metadata and returns either an error, nothing to do, or a `Transit` (the metadata after the request); the
shell writes the transit to `__transaction_state` and, once it is on every in-sync replica, `complete`s it.
While a transit is being written the id is busy: concurrent requests get CONCURRENT_TRANSACTIONS.

    Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing --EndTxn--> PrepareCommit | PrepareAbort
    PrepareCommit --markers written--> CompleteCommit;  PrepareAbort --markers written--> CompleteAbort
    Ongoing --InitProducerId (a new producer instance) or timeout--> PrepareAbort with the epoch bumped

Commit and abort markers go to every partition of the transaction once the Prepare state is durable; the
shell reports them done with `prepare_complete`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from odradek.coordinator.group_coordinator import java_string_hash
from odradek.coordinator.record_schemas import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from odradek.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
INT16_MAX = 2**15 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
KEY_VERSION = 0
VALUE_VERSION = 1


class TxnState(enum.IntEnum):
    """The transaction states, numbered as in `__transaction_state`."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name Kafka's tools show (DescribeTransactions, ListTransactions)."""
        return "".join(word.capitalize() for word in self.name.split("_"))


PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
STATE_BY_DISPLAY = {state.display: state for state in TxnState}


@dataclass(frozen=True)
class Transit:
    """The metadata a request leads to, to be written before it counts."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    update_ms: int
    previous_producer_id: int = NO_PRODUCER_ID


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump: a retried InitProducerId
    previous_producer_id: int = NO_PRODUCER_ID  # the id before an exhausted epoch rotated it
    pending: Transit | None = None
    partition: int = 0  # of __transaction_state

    def transit(self, **changes) -> Transit:
        values = dict(transactional_id=self.transactional_id, producer_id=self.producer_id,
                      producer_epoch=self.producer_epoch, last_producer_epoch=self.last_producer_epoch,
                      timeout_ms=self.timeout_ms, state=self.state, partitions=frozenset(self.partitions),
                      start_ms=self.start_ms, update_ms=self.update_ms, previous_producer_id=self.previous_producer_id)
        values.update(changes)
        return Transit(**values)


@dataclass(frozen=True)
class NeedProducerId:
    """The request needs a fresh producer id: call again with one."""


@dataclass(frozen=True)
class Fence:
    """InitProducerId found an older instance's transaction open: write `abort` (PrepareAbort under a bumped
    epoch), then answer CONCURRENT_TRANSACTIONS; the producer retries once the abort is complete."""

    abort: Transit


@dataclass(frozen=True)
class EndMarkers:
    """Write `commit` or abort markers to `partitions` for the producer, then call `prepare_complete`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]


def encode_key(transactional_id: str) -> bytes:
    return KEY_VERSION.to_bytes(2, "big") + TRANSACTION_LOG_KEY.encode(KEY_VERSION, {
        "transactional_id": transactional_id})


def encode_value(transit: Transit) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(transit.partitions):
        by_topic.setdefault(topic, []).append(index)
    return VALUE_VERSION.to_bytes(2, "big") + TRANSACTION_LOG_VALUE.encode(VALUE_VERSION, {
        "producer_id": transit.producer_id, "producer_epoch": transit.producer_epoch,
        "transaction_timeout_ms": transit.timeout_ms, "transaction_status": int(transit.state),
        "transaction_partitions": None if transit.state == TxnState.EMPTY else [
            {"topic": t, "partition_ids": ids} for t, ids in by_topic.items()],
        "transaction_last_update_timestamp_ms": transit.update_ms,
        "transaction_start_timestamp_ms": transit.start_ms})


def decode_record(key: bytes, value: bytes | None) -> tuple[str, dict | None] | None:
    """(transactional id, value fields or None for a tombstone); None for a key this version cannot read."""
    if len(key) < 2 or int.from_bytes(key[:2], "big") != KEY_VERSION:
        return None
    transactional_id = TRANSACTION_LOG_KEY.decode(KEY_VERSION, key, 2)["transactional_id"]
    if value is None:
        return transactional_id, None
    version = min(int.from_bytes(value[:2], "big"), VALUE_VERSION)
    return transactional_id, TRANSACTION_LOG_VALUE.decode(version, value, 2)


class TransactionCoordinator:
    """Every transactional id of the `__transaction_state` partitions this node leads."""

    def __init__(self, *, num_partitions: int = 50, max_timeout_ms: int = 900_000):
        self.num_partitions = num_partitions
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}

    def partition_for(self, transactional_id: str) -> int:
        h = java_string_hash(transactional_id)
        return (0 if h == -(1 << 31) else abs(h)) % self.num_partitions

    # ---- loading

    def load(self, partition: int, records) -> list[EndMarkers]:
        """Replay a partition's (key, value) records; returns the markers transactions caught in a Prepare
        state still need (the previous coordinator may have died before writing them)."""
        loaded: dict[str, TxnMetadata] = {}
        for key, value in records:
            decoded = decode_record(key, value)
            if decoded is None:
                continue
            transactional_id, fields = decoded
            if fields is None:
                loaded.pop(transactional_id, None)
                continue
            partitions = {(p["topic"], index) for p in fields["transaction_partitions"] or () for index in
                          p["partition_ids"]}
            loaded[transactional_id] = TxnMetadata(
                transactional_id, fields["producer_id"], fields["producer_epoch"], fields["transaction_timeout_ms"],
                TxnState(fields["transaction_status"]), partitions, fields["transaction_start_timestamp_ms"],
                fields["transaction_last_update_timestamp_ms"], partition=partition)
        self.unload(partition)
        self.txns.update(loaded)
        return [self._markers(txn) for txn in loaded.values() if txn.state in PREPARED]

    def unload(self, partition: int) -> None:
        for transactional_id in [t for t, txn in self.txns.items() if txn.partition == partition]:
            del self.txns[transactional_id]

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    # ---- requests

    def prepare_init(self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                     now_ms: int, new_producer_id: int | None = None) -> Transit | NeedProducerId | Fence:
        """InitProducerId with a transactional id. A new id, or an epoch that would overflow, needs a fresh
        producer id. An open transaction of an older producer instance is aborted first (with the epoch
        bumped, which fences that instance): the caller gets CONCURRENT_TRANSACTIONS and retries."""
        self.check_timeout(timeout_ms)
        txn = self.txns.get(transactional_id)
        if txn is None:
            if new_producer_id is None:
                return NeedProducerId()
            return Transit(transactional_id, new_producer_id, 0, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY,
                           frozenset(), -1, now_ms)
        self._check_not_busy(txn)
        resuming = producer_id != NO_PRODUCER_ID  # KIP-360: the producer names its current id and epoch
        if (resuming and producer_id == txn.previous_producer_id and producer_epoch >= INT16_MAX - 1
                and txn.state in COMPLETED):
            return txn.transit(timeout_ms=timeout_ms, update_ms=now_ms)  # a retry of the rotation: same answer
        if resuming and producer_id != txn.producer_id:
            raise KafkaError(E.PRODUCER_FENCED, f"producer id {producer_id} is not the current producer id "
                                                f"{txn.producer_id} of {transactional_id!r}")
        if txn.state in PREPARED or txn.state == TxnState.PREPARE_EPOCH_FENCE:
            raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"transaction of {transactional_id!r} is completing")
        if txn.state == TxnState.ONGOING:
            return Fence(self._fence_and_abort(txn, now_ms))
        if txn.state == TxnState.DEAD:
            raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is being removed")
        if resuming and producer_epoch != txn.producer_epoch:
            if producer_epoch == txn.last_producer_epoch:
                return txn.transit(timeout_ms=timeout_ms, update_ms=now_ms)  # a retry of a bump that happened
            raise KafkaError(E.PRODUCER_FENCED, f"epoch {producer_epoch} of {transactional_id!r} is fenced by "
                                                f"epoch {txn.producer_epoch}")
        if txn.producer_epoch >= INT16_MAX - 1:
            if new_producer_id is None:
                return NeedProducerId()
            return txn.transit(producer_id=new_producer_id, producer_epoch=0, previous_producer_id=txn.producer_id,
                               last_producer_epoch=txn.producer_epoch if resuming else NO_PRODUCER_EPOCH,
                               timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1,
                               update_ms=now_ms)
        return txn.transit(producer_epoch=txn.producer_epoch + 1,
                           last_producer_epoch=txn.producer_epoch if resuming else NO_PRODUCER_EPOCH,
                           timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1,
                           update_ms=now_ms)

    def check_timeout(self, timeout_ms: int) -> None:
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise KafkaError(E.INVALID_TRANSACTION_TIMEOUT,
                             f"transaction timeout {timeout_ms} ms is not within 1..{self.max_timeout_ms}")

    @staticmethod
    def _fence_and_abort(txn: TxnMetadata, now_ms: int) -> Transit:
        """Abort `txn`'s open transaction under a bumped epoch: the PrepareAbort transit to write."""
        return txn.transit(producer_epoch=min(txn.producer_epoch + 1, INT16_MAX),
                           last_producer_epoch=NO_PRODUCER_EPOCH, state=TxnState.PREPARE_ABORT, update_ms=now_ms)

    def prepare_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               partitions: set[tuple[str, int]], now_ms: int) -> Transit | None:
        """AddPartitionsToTxn / AddOffsetsToTxn: None when every partition is already in the transaction."""
        txn = self._checked(transactional_id, producer_id, producer_epoch)
        if txn.state in PREPARED or txn.state == TxnState.PREPARE_EPOCH_FENCE:
            raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"transaction of {transactional_id!r} is completing")
        if txn.state == TxnState.DEAD:
            raise KafkaError(E.INVALID_TXN_STATE, f"{transactional_id!r} is being removed")
        if txn.state == TxnState.ONGOING and partitions <= txn.partitions:
            return None
        if txn.state == TxnState.ONGOING:
            return txn.transit(partitions=frozenset(txn.partitions | partitions), update_ms=now_ms)
        return txn.transit(state=TxnState.ONGOING, partitions=frozenset(partitions), start_ms=now_ms, update_ms=now_ms)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn verify_only (KIP-890): is each partition in the producer's open transaction?
        (TRANSACTION_ABORTABLE where it is not.)"""
        try:
            txn = self._checked(transactional_id, producer_id, producer_epoch, busy_ok=True)
            if txn.state in PREPARED:
                raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"transaction of {transactional_id!r} is completing")
        except KafkaError as exc:
            return dict.fromkeys(partitions, exc.code)
        return {p: E.NONE if p in txn.partitions else E.TRANSACTION_ABORTABLE for p in partitions}

    def prepare_end(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                    now_ms: int) -> Transit | None:
        """EndTxn: the Prepare transit to write (then the markers), or None for a retry of a finished one."""
        txn = self._checked(transactional_id, producer_id, producer_epoch)
        wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state == TxnState.ONGOING:
            return txn.transit(state=wanted, update_ms=now_ms)
        if txn.state == done:
            return None
        if txn.state == wanted:
            raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"transaction of {transactional_id!r} is completing")
        if txn.state == TxnState.PREPARE_EPOCH_FENCE:
            raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"transaction of {transactional_id!r} is being fenced")
        verb = "commit" if commit else "abort"
        raise KafkaError(E.INVALID_TXN_STATE, f"cannot {verb} the transaction of {transactional_id!r} in state "
                                              f"{txn.state.display}")

    def prepare_complete(self, transactional_id: str, now_ms: int) -> Transit | None:
        """Every marker of a Prepare state is written: the Complete transit."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state not in PREPARED:
            return None
        state = TxnState.COMPLETE_COMMIT if txn.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return txn.transit(state=state, partitions=frozenset(), update_ms=now_ms)

    def timed_out(self, now_ms: int) -> list[Transit]:
        """Abort every open transaction older than its timeout, bumping the epoch so its producer is fenced."""
        return [self._fence_and_abort(txn, now_ms) for txn in self.txns.values()
                if txn.state == TxnState.ONGOING and txn.pending is None and now_ms - txn.start_ms > txn.timeout_ms]

    def expired(self, now_ms: int, expiration_ms: int) -> list[Transit]:
        """Transactional ids without a transaction for `transactional.id.expiration.ms`: the Dead transits to
        write as tombstones (`remove` once written)."""
        return [txn.transit(state=TxnState.DEAD, partitions=frozenset(), update_ms=now_ms)
                for txn in self.txns.values()
                if txn.state in COMPLETED and txn.pending is None and txn.producer_id != NO_PRODUCER_ID
                and now_ms - txn.update_ms >= expiration_ms]

    def remove(self, transit: Transit) -> None:
        """The expired id's tombstone is written: forget it (unless it was reloaded meanwhile)."""
        txn = self.txns.get(transit.transactional_id)
        if txn is not None and txn.pending is transit:
            del self.txns[transit.transactional_id]

    # ---- writing transits

    def begin(self, transit: Transit) -> None:
        """The shell is writing `transit`: the id is busy until `complete` or `abandon`."""
        txn = self.txns.get(transit.transactional_id)
        if txn is None:
            txn = self.txns[transit.transactional_id] = TxnMetadata(
                transit.transactional_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, transit.timeout_ms,
                partition=self.partition_for(transit.transactional_id))
        txn.pending = transit

    def complete(self, transit: Transit) -> EndMarkers | None:
        """The transit is durable: adopt it. A Prepare state returns the markers to write next. Raises
        NOT_COORDINATOR if the id was unloaded (or reloaded) while the transit was being written."""
        txn = self.txns.get(transit.transactional_id)
        if txn is None or txn.pending is not transit:
            raise KafkaError(E.NOT_COORDINATOR, f"{transit.transactional_id!r} moved while its state was written")
        txn.pending = None
        txn.producer_id, txn.producer_epoch = transit.producer_id, transit.producer_epoch
        txn.last_producer_epoch, txn.timeout_ms, txn.state = transit.last_producer_epoch, transit.timeout_ms, transit.state
        txn.partitions, txn.start_ms, txn.update_ms = set(transit.partitions), transit.start_ms, transit.update_ms
        txn.previous_producer_id = transit.previous_producer_id
        return self._markers(txn) if txn.state in PREPARED else None

    def abandon(self, transit: Transit) -> None:
        """The transit could not be written: forget it (a brand-new id is forgotten entirely)."""
        txn = self.txns.get(transit.transactional_id)
        if txn is None or txn.pending is not transit:
            return
        txn.pending = None
        if txn.producer_id == NO_PRODUCER_ID:
            del self.txns[transit.transactional_id]

    # ---- describing

    def describe(self, transactional_id: str) -> TxnMetadata:
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id == NO_PRODUCER_ID:
            raise KafkaError(E.TRANSACTIONAL_ID_NOT_FOUND, f"no transactional id {transactional_id!r}")
        return txn

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int, now_ms: int) -> list[TxnMetadata]:
        return [txn for txn in self.txns.values() if txn.producer_id != NO_PRODUCER_ID
                and (not states or txn.state.display in states)
                and (not producer_ids or txn.producer_id in producer_ids)
                and (min_duration_ms < 0 or (txn.state == TxnState.ONGOING and now_ms - txn.start_ms >= min_duration_ms))]

    # ---- helpers

    @staticmethod
    def _markers(txn: TxnMetadata) -> EndMarkers:
        return EndMarkers(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                          txn.state == TxnState.PREPARE_COMMIT, frozenset(txn.partitions))

    @staticmethod
    def _check_not_busy(txn: TxnMetadata) -> None:
        if txn.pending is not None:
            raise KafkaError(E.CONCURRENT_TRANSACTIONS, f"a change to {txn.transactional_id!r} is being written")

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                 busy_ok: bool = False) -> TxnMetadata:
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id == NO_PRODUCER_ID:
            raise KafkaError(E.INVALID_PRODUCER_ID_MAPPING, f"no producer id for {transactional_id!r}")
        if producer_id != txn.producer_id:
            raise KafkaError(E.INVALID_PRODUCER_ID_MAPPING, f"producer id {producer_id} is not the current producer "
                                                            f"id of {transactional_id!r}")
        if producer_epoch != txn.producer_epoch:
            raise KafkaError(E.PRODUCER_FENCED, f"epoch {producer_epoch} of {transactional_id!r} is fenced by "
                                                f"epoch {txn.producer_epoch}")
        if not busy_ok:
            self._check_not_busy(txn)
        return txn

