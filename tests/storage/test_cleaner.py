"""LogCleaner: compaction of real PartitionLogs in temporary log dirs, with injected clocks."""

import os
import random

import pytest

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import build_batch, decode_batches
from odradek.storage.cleaner import CLEANER_CHECKPOINT, CleanerConfig, LogCleaner
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.storage.segment import DELETED_SUFFIX, LOG_SUFFIX, file_name

NOW = 1_700_000_000_000
DAY = 86_400_000
TOPIC_ID = bytes(range(16))


def compact_config(**overrides) -> LogConfig:
    values = dict(cleanup_policy="compact", segment_bytes=2048, index_interval_bytes=256, file_delete_delay_ms=0,
                  min_cleanable_dirty_ratio=0.0, message_timestamp_after_max_ms=10 * DAY)
    values.update(overrides)
    return LogConfig(**values)


@pytest.fixture
def manager(tmp_path):
    m = LogManager([str(tmp_path / "logs")], default_config=LogConfig())
    m.load(lambda topic: None, NOW)
    yield m
    m.close()


def new_log(manager, config=None) -> PartitionLog:
    return manager.create("t", 0, config or compact_config(), TOPIC_ID, now_ms=NOW)


def produce(log, pairs, *, ts=NOW, pid=-1, epoch=-1, seq=-1, codec=0):
    """Append one batch of (key, value) pairs; the high watermark follows the log end."""
    info = log.append_as_leader(memoryview(build_batch(list(pairs), timestamp_ms=ts, producer_id=pid,
                                                       producer_epoch=epoch, base_sequence=seq, compression=codec)),
                                now_ms=ts)
    log.high_watermark = log.log_end_offset
    return info


def records_of(log) -> list:
    """(offset, key, value) of every record in the log, segment by segment (batches decoded from the files)."""
    out = []
    for segment in log.segments:
        data = os.pread(segment.fd, segment.size, 0)
        for _, recs in decode_batches(data):
            out += [(r.offset, r.key, r.value) for r in recs]
    return out


def latest_by_key(records) -> dict:
    latest = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    return latest


def write_updates(log, rng, *, keys=20, updates=300, per_batch=3, ts=NOW):
    written = []
    for start in range(0, updates, per_batch):
        pairs = []
        for i in range(start, min(updates, start + per_batch)):
            key = b"key-%d" % rng.randrange(keys)
            pairs.append((key, b"value-%d" % i))
        info = produce(log, pairs, ts=ts)
        written += [(info.first_offset + j, k, v) for j, (k, v) in enumerate(pairs)]
    return written


def test_cleaning_keeps_the_latest_record_of_each_key_at_its_offset(manager, seed):
    rng = random.Random(seed)
    log = new_log(manager)
    written = write_updates(log, rng)
    log.roll(NOW)
    produce(log, [(b"key-0", b"in the active segment")])
    active_bytes = os.pread(log.active.fd, log.active.size, 0)
    end = log.log_end_offset
    assert LogCleaner(manager).clean_once(NOW), f"seed {seed}"
    kept = records_of(log)
    closed = [r for r in kept if r[0] < log.active.base_offset]
    expected = latest_by_key(written)
    assert sorted(closed) == sorted((offset, key, value) for key, (offset, value) in expected.items()), f"seed {seed}"
    assert os.pread(log.active.fd, log.active.size, 0) == active_bytes
    assert log.log_end_offset == end
    offsets = [r[0] for r in kept]
    assert offsets == sorted(offsets)
    # the log reads the same through the normal read path, and reopens to the same records
    manager.close()
    reopened = LogManager([manager.log_dirs[0]], default_config=LogConfig())
    reopened.load(lambda topic: compact_config(), NOW)
    assert records_of(reopened.get("t", 0)) == kept
    reopened.close()
    manager._locks = []


def test_cleaner_checkpoint_records_the_first_dirty_offset_in_kafkas_format(manager):
    log = new_log(manager)
    for i in range(40):
        produce(log, [(b"k%d" % (i % 4), b"v%d" % i)])
    log.roll(NOW)
    produce(log, [(b"k0", b"active")])
    cleaner = LogCleaner(manager)
    assert cleaner.clean_once(NOW)
    text = open(os.path.join(manager.log_dirs[0], CLEANER_CHECKPOINT)).read()
    assert text == f"0\n1\nt 0 {log.active.base_offset}\n"
    assert not cleaner.clean_once(NOW), "nothing is dirty any more"
    assert LogCleaner(manager).first_dirty_offset(log) == log.active.base_offset


def test_compressed_batches_are_rewritten_with_their_codec_and_valid_crcs(manager):
    log = new_log(manager)
    for i in range(30):
        produce(log, [(b"a", b"a%d" % i), (b"b%d" % i, b"b"), (b"a", b"again%d" % i)], codec=compression.GZIP)
    log.roll(NOW)
    assert LogCleaner(manager).clean_once(NOW)
    data = b"".join(os.pread(s.fd, s.size, 0) for s in log.segments)
    seen = {}
    for info, recs in decode_batches(data):  # checks every CRC
        assert info.compression == compression.GZIP
        for r in recs:
            seen[r.key] = r.value
    assert seen[b"a"] == b"again29"
    assert len([k for k in seen if k.startswith(b"b")]) == 30
    assert sum(1 for r in records_of(log) if r[1] == b"a") == 1


def test_tombstones_stay_until_delete_retention_ms_after_first_cleaning(manager):
    log = new_log(manager, compact_config(delete_retention_ms=DAY))
    for i in range(20):
        produce(log, [(b"k%d" % (i % 5), b"v%d" % i)])
    produce(log, [(b"k1", None)])  # tombstone
    log.roll(NOW)
    cleaner = LogCleaner(manager)
    assert cleaner.clean_once(NOW)
    assert [(k, v) for _, k, v in records_of(log) if k == b"k1"] == [(b"k1", None)]
    # KIP-534: the tombstone's batch now carries its delete horizon as baseTimestamp; the record keeps its time
    data = b"".join(os.pread(s.fd, s.size, 0) for s in log.segments)
    [(info, recs)] = [(info, recs) for info, recs in decode_batches(data) if recs and recs[0].value is None]
    assert info.has_delete_horizon and info.base_timestamp == NOW + DAY
    assert recs[0].timestamp == NOW
    others = [info for info, recs in decode_batches(data) if recs and recs[0].value is not None]
    assert others and not any(info.has_delete_horizon for info in others)

    def dirty_again(now):
        produce(log, [(b"other", b"x")], ts=now)
        log.roll(now)

    dirty_again(NOW + DAY - 1000)
    assert cleaner.clean_once(NOW + DAY - 1)
    assert [(k, v) for _, k, v in records_of(log) if k == b"k1"] == [(b"k1", None)], "horizon not reached yet"
    dirty_again(NOW + DAY)
    assert cleaner.clean_once(NOW + DAY)
    assert [k for _, k, _ in records_of(log) if k == b"k1"] == []
    assert {k for _, k, _ in records_of(log)} == {b"k0", b"k2", b"k3", b"k4", b"other"}


def test_records_younger_than_min_compaction_lag_are_not_cleaned(manager):
    log = new_log(manager, compact_config(min_compaction_lag_ms=3_600_000))
    for i in range(20):
        produce(log, [(b"k", b"v%d" % i)])
    log.roll(NOW)
    cleaner = LogCleaner(manager)
    assert not cleaner.clean_once(NOW + 60_000)
    assert len(records_of(log)) == 20
    assert cleaner.clean_once(NOW + 3_600_001)
    assert [v for _, _, v in records_of(log)] == [b"v19"]


def test_active_segment_is_never_cleaned(manager):
    log = new_log(manager)
    for i in range(10):
        produce(log, [(b"k", b"v%d" % i)])
    assert len(log.segments) == 1
    assert not LogCleaner(manager).clean_once(NOW)
    assert len(records_of(log)) == 10


def test_a_full_dedupe_buffer_makes_cleaning_incremental(manager, seed):
    rng = random.Random(seed)
    log = new_log(manager, compact_config(segment_bytes=1 << 20))
    written = []
    for i in range(400):
        key = b"key-%d" % rng.randrange(100)
        info = produce(log, [(key, b"v%d" % i)])
        if i % 40 == 39:
            log.roll(NOW)
        written.append((info.first_offset, key, b"v%d" % i))
    log.roll(NOW)
    # room for 30 keys: 30 / 0.9 entries of 24 bytes
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=800, load_factor=0.9))
    assert cleaner.clean_once(NOW)
    first_pass_end = cleaner.first_dirty_offset(log)
    assert 0 < first_pass_end < log.active.base_offset, f"seed {seed}"
    passes = 1
    while cleaner.clean_once(NOW):
        passes += 1
        assert passes < 100
    assert cleaner.first_dirty_offset(log) == log.active.base_offset
    assert passes > 1
    expected = latest_by_key(written)
    assert sorted(records_of(log)) == sorted((o, k, v) for k, (o, v) in expected.items()), f"seed {seed}"


def test_an_idempotent_producers_last_batch_is_kept_empty(manager):
    log = new_log(manager)
    produce(log, [(b"k", b"1")], pid=7, epoch=0, seq=0)
    last = produce(log, [(b"k", b"2")], pid=7, epoch=0, seq=1)
    produce(log, [(b"k", b"3")])
    log.roll(NOW)
    assert LogCleaner(manager).clean_once(NOW)
    data = b"".join(os.pread(s.fd, s.size, 0) for s in log.segments)
    batches = [(info, recs) for info, recs in decode_batches(data)]
    assert [(info.base_offset, info.record_count, info.producer_id, info.base_sequence) for info, _ in batches] == [
        (last.first_offset, 0, 7, 1), (last.first_offset + 1, 1, -1, -1)]
    log.close()
    reopened = PartitionLog(log.directory, compact_config(), now_ms=NOW)  # rebuilds producer state from the log
    reopened._load_producer_state()
    assert reopened.producer_state.entry(7).last_seq == 1
    reopened.abandon()


def test_keyless_records_are_rejected_on_compacted_logs(manager):
    log = new_log(manager)
    with pytest.raises(KafkaError) as caught:
        produce(log, [(None, b"no key")])
    assert caught.value.code == ErrorCode.INVALID_RECORD


def test_cleaning_applies_config_changes_without_reopening(manager):
    log = new_log(manager, compact_config(cleanup_policy="delete"))
    for i in range(10):
        produce(log, [(b"k", b"v%d" % i)])
    log.roll(NOW)
    cleaner = LogCleaner(manager)
    assert not cleaner.clean_once(NOW)
    log.update_config(compact_config(cleanup_policy="compact,delete"))
    assert cleaner.clean_once(NOW)
    assert [v for _, _, v in records_of(log)] == [b"v9"]


def _build_only(manager, log, now=NOW):
    cleaner = LogCleaner(manager)
    task = cleaner.grab_filthiest(now)
    cleaner.build(task)
    task.close()
    return task


def _reopen(directory) -> PartitionLog:
    return PartitionLog(directory, compact_config(), now_ms=NOW, clean_shutdown=False, topic="t", partition=0)


def _prepare_crash(manager, seed):
    rng = random.Random(seed)
    log = new_log(manager)
    written = write_updates(log, rng, updates=200)
    log.roll(NOW)
    before = records_of(log)
    task = _build_only(manager, log)
    assert task.cleaned
    return log, written, before, task


def test_crash_before_the_swap_leaves_the_original_log(manager, seed):
    log, _, before, task = _prepare_crash(manager, seed)
    directory = log.directory
    log.abandon()
    assert any(name.endswith(".cleaned") for name in os.listdir(directory))
    reopened = _reopen(directory)
    assert records_of(reopened) == before
    assert not any(name.endswith(".cleaned") for name in os.listdir(directory))
    reopened.abandon()


@pytest.mark.parametrize("old_segments_deleted", [0, 1, "all"])
def test_crash_after_the_swap_file_is_written_installs_the_cleaned_segments(manager, seed, old_segments_deleted):
    log, written, before, task = _prepare_crash(manager, seed)
    directory = log.directory
    old, base = task.cleaned[0]
    os.rename(os.path.join(directory, file_name(base, LOG_SUFFIX + ".cleaned")),
              os.path.join(directory, file_name(base, LOG_SUFFIX + ".swap")))
    count = len(old) if old_segments_deleted == "all" else old_segments_deleted
    for segment in old[:count]:
        os.rename(segment.log_path, segment.log_path + DELETED_SUFFIX)
    log.abandon()
    reopened = _reopen(directory)
    after = records_of(reopened)
    # every key's latest record is still there, at its offset, and offsets only increase
    assert latest_by_key(after) == latest_by_key(before), f"seed {seed}"
    assert [r[0] for r in after] == sorted(r[0] for r in after)
    assert set(after) <= set(before)
    assert len(after) < len(before)
    names = os.listdir(directory)
    assert not any(name.endswith((".swap", ".cleaned", DELETED_SUFFIX)) for name in names)
    assert reopened.log_end_offset == log.log_end_offset
    reopened.abandon()


def test_max_compaction_lag_forces_cleaning_below_the_dirty_ratio(manager):
    log = new_log(manager, compact_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=DAY))
    for i in range(10):
        produce(log, [(b"k%d" % i, b"v")])
    log.roll(NOW)
    cleaner = LogCleaner(manager)
    assert cleaner.clean_once(NOW)  # nothing clean yet: ratio 1.0 > 0.99
    for i in range(3):
        produce(log, [(b"k0", b"again%d" % i)], ts=NOW + 1000)
    log.roll(NOW + 1000)
    assert not cleaner.clean_once(NOW + 2000), "dirty ratio below 0.99 and the lag not reached"
    assert cleaner.clean_once(NOW + 1000 + DAY + 1)
    assert [v for _, k, v in records_of(log) if k == b"k0"] == [b"again2"]


def test_background_run_cleans_in_a_worker_thread_and_stops_on_cancel(manager):
    import asyncio
    import threading

    log = new_log(manager)
    for i in range(50):
        produce(log, [(b"k%d" % (i % 5), b"v%d" % i)])
    log.roll(NOW)
    cleaner = LogCleaner(manager, CleanerConfig(backoff_ms=10))
    threads = []
    build = cleaner.build

    def recording_build(task):
        threads.append(threading.current_thread())
        return build(task)

    cleaner.build = recording_build

    async def scenario():
        runner = asyncio.create_task(cleaner.run(lambda: NOW))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if len(records_of(log)) == 5:
                break
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner

    asyncio.run(scenario())
    assert len(records_of(log)) == 5
    assert threads and threads[0] is not threading.main_thread()


def test_reads_pass_over_segments_the_cleaner_emptied(manager):
    log = new_log(manager, compact_config(segment_bytes=600))
    for i in range(60):
        produce(log, [(b"k", b"v%d" % i)])  # one key: every closed segment but the last one empties
    produce(log, [(b"other", b"x")])
    log.roll(NOW)
    assert len(log.segments) > 4
    assert LogCleaner(manager).clean_once(NOW)
    assert any(segment.size == 0 for segment in log.segments[:-1])
    values = []
    offset = log.log_start_offset
    while True:
        region = log.read(offset, 1 << 20)
        if region is None:
            break
        for info, recs in decode_batches(os.pread(region.fd, region.size, region.position)):
            values += [r.value for r in recs]
            offset = info.last_offset + 1
    assert values == [b"v59", b"x"]


def test_a_corrupt_batch_stops_the_cleaning_and_leaves_no_cleaned_files(manager):
    from odradek.storage.segment import SegmentCorrupt

    log = new_log(manager)
    for i in range(30):
        produce(log, [(b"k", b"v%d" % i)])
    log.roll(NOW)
    first = log.segments[0]
    with open(first.log_path, "r+b") as f:
        f.seek(first.size - 3)
        f.write(b"\xff")
    with pytest.raises(SegmentCorrupt):
        LogCleaner(manager).clean_once(NOW)
    assert not any(name.endswith(".cleaned") for name in os.listdir(log.directory))
    assert log.segments[0] is first
