"""Log compaction of transactional data: aborted records never shadow or outlive committed ones, and an
undecided transaction is not cleaned."""

from odradek.protocol.records import build_batch
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from tests.storage.test_cleaner import NOW, compact_config, manager, new_log, produce, records_of  # noqa: F401 (manager: a fixture)

PID, EPOCH = 7, 0


def produce_txn(log, pairs, seq: int) -> None:
    batch = build_batch(list(pairs), timestamp_ms=NOW, producer_id=PID, producer_epoch=EPOCH, base_sequence=seq,
                        is_transactional=True)
    log.append_as_leader(memoryview(batch), now_ms=NOW)
    log.high_watermark = log.log_end_offset


def end_txn(log, commit: bool) -> None:
    log.append_marker(commit, producer_id=PID, producer_epoch=EPOCH, coordinator_epoch=0, now_ms=NOW)
    log.high_watermark = log.log_end_offset


def filler(log, count: int) -> None:
    """Enough plain records to close the segments holding the transactions (the active one is never cleaned)."""
    for i in range(count):
        produce(log, [(b"filler-%d" % (i % 3), b"x" * 200)])


def test_an_aborted_update_does_not_shadow_the_committed_value(manager):  # noqa: F811
    log = new_log(manager, compact_config(segment_bytes=1024))
    produce(log, [(b"k", b"committed")])
    produce_txn(log, [(b"k", b"aborted"), (b"other", b"aborted")], seq=0)
    end_txn(log, commit=False)
    produce_txn(log, [(b"j", b"in-commit")], seq=2)
    end_txn(log, commit=True)
    filler(log, 12)
    cleaner = LogCleaner(manager, CleanerConfig())
    assert cleaner.clean_once(NOW)
    values = {(key, value) for _, key, value in records_of(log) if key is not None and not key.startswith(b"filler")}
    assert (b"k", b"committed") in values
    assert (b"j", b"in-commit") in values
    assert not any(value == b"aborted" for _, value in values)


def test_an_open_transaction_is_not_cleaned(manager):  # noqa: F811
    log = new_log(manager, compact_config(segment_bytes=1024))
    produce(log, [(b"k", b"v1")])
    produce_txn(log, [(b"k", b"open")], seq=0)
    filler(log, 12)
    assert log.last_stable_offset == 1
    LogCleaner(manager, CleanerConfig()).clean_once(NOW)
    assert [(o, k, v) for o, k, v in records_of(log) if k == b"k"] == [(0, b"k", b"v1"), (1, b"k", b"open")]
