"""Crash consistency of the storage layer: seeded crashes at single file operations, then recovery.

Each test runs a seeded random workload on a real LogManager (appends with rolls every few batches,
flushes, checkpoints, retention, DeleteRecords, follower truncation, compaction, clean restarts) under
CrashFS (tests/storage/crash_fs.py, which describes the fault model). A dry run counts the file
operations of the steps under test; the same workload then runs again in a fresh directory and dies at
a seeded one of them (drawn more often between two steps, or between a clean close and the next start).
For half of the seeds the recovery itself is crashed once more, at a seeded operation. A new LogManager
then recovers the directory, and:

* every batch served by `PartitionLog.read` (the fetch path) passes its CRC and decodes, offsets only
  increase, and `read` serves exactly the batches the segment files hold;
* a delete-policy log holds, from its log start, exactly the records appended at those offsets with
  no gap; a compacted log holds a subsequence of them at their offsets, in which each key's last
  record is the last one written for that key below the log end (or nothing, for a tombstone);
* nothing acknowledged is lost: after a process crash every append that returned is there; after a
  power loss every offset below the recovery point reached before the crash is;
* index entries point at the batches they name, every offset and sampled timestamp look-up answers
  as a scan would, and log start <= high watermark <= log end = recovery point;
* retrying the last idempotent batch after a process crash gets its original offsets (exactly once);
* compacting the recovered log to the end leaves exactly the latest record of each key;
* a clean close and reopen serves the same records.

`pytest tests/storage/test_crash_consistency.py` runs seeds 0..49 of each scenario; `--seed N` runs seed
N only. A failure names the scenario, the seed and the operation the crash hit.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import shutil
from dataclasses import dataclass, field
from random import Random

import pytest

from odradek.protocol import compression
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchInfo,
    Record,
    build_batch,
    decode_batches,
    read_batch_info,
)
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LONG_MAX, LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.crash_fs import POWER_LOSS, PROCESS_CRASH, Crash, CrashFS

SEEDS = 50
NOW = 1_700_000_000_000
TOPIC_ID = bytes(range(16))
EVENTS = "events"  # cleanup.policy=delete
TABLE = "table"  # cleanup.policy=compact
PRODUCER_IDS = {EVENTS: 7, TABLE: 8}


def pytest_generate_tests(metafunc):
    if "crash_seed" in metafunc.fixturenames:
        given = metafunc.config.getoption("--seed")
        seeds = [given] if given is not None else range(SEEDS)
        metafunc.parametrize("crash_seed", seeds, ids=lambda seed: f"seed{seed}")


@pytest.fixture(autouse=True)
def no_real_fsyncs(monkeypatch):
    """Storage code outside a crash run (recovery, checks) also goes through a CrashFS, one that never
    crashes: real fsyncs would only make the tests slower."""
    CrashFS().install(monkeypatch)


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str
    topics: tuple[str, ...]
    weights: dict[str, int]  # workload step -> how often it is drawn
    armed: frozenset[str]  # the steps whose file operations may crash
    steps: int


PRODUCE_AND_ROLL = Scenario(
    "produce_and_roll", PROCESS_CRASH, (EVENTS,),
    {"append": 30, "flush": 2, "checkpoint": 2, "maintain": 2, "truncate": 1, "reopen": 1},
    frozenset({"append", "flush", "truncate", "reopen"}), 70)
RETENTION = Scenario(
    "retention", PROCESS_CRASH, (EVENTS,),
    {"append": 14, "maintain": 5, "delete_records": 2, "checkpoint": 1, "reopen": 1},
    frozenset({"maintain", "delete_records", "checkpoint"}), 80)
COMPACTION = Scenario(
    "compaction", PROCESS_CRASH, (TABLE,),
    {"append": 14, "clean": 4, "maintain": 2, "checkpoint": 1, "reopen": 1},
    frozenset({"clean", "maintain"}), 80)
POWER_LOSS_MIXED = Scenario(
    "power_loss", POWER_LOSS, (EVENTS, TABLE),
    {"append": 24, "flush": 2, "checkpoint": 2, "maintain": 3, "delete_records": 1, "truncate": 1, "clean": 3,
     "reopen": 2},
    frozenset({"append", "flush", "checkpoint", "maintain", "delete_records", "truncate", "clean", "reopen"}), 80)


def random_config(rng: Random, topic: str, retention: bool) -> LogConfig:
    """Small segments and indexes, so that size, index-full and time rolls happen all the time."""
    common = dict(
        segment_bytes=rng.choice([700, 1200, 2500]),
        index_interval_bytes=rng.choice([0, 100, 4096]),
        segment_index_bytes=rng.choice([48, 120, 10485760]),
        segment_ms=rng.choice([8000, 60000]),
        flush_messages=rng.choice([1, LONG_MAX]),
        file_delete_delay_ms=rng.choice([0, 3000]),
    )
    if topic == TABLE:
        return LogConfig(cleanup_policy="compact", delete_retention_ms=rng.choice([2000, 20000]),
                         min_cleanable_dirty_ratio=rng.choice([0.0, 0.3]), **common)
    return LogConfig(retention_ms=rng.choice([15000, 40000]) if retention else -1,
                     retention_bytes=rng.choice([-1, 3000, 6000]) if retention else -1, **common)


@dataclass
class Model:
    """What was appended to one partition, and what the log promised about it."""

    compacted: bool
    records: dict[int, tuple] = field(default_factory=dict)  # offset -> (key, value, timestamp), acked or in flight
    batch_starts: list[int] = field(default_factory=list)  # first offset of each batch in `records`
    acked_end: int = 0  # every offset below was appended by a call that returned
    durable_end: int = 0  # the highest recovery point a completed step reported
    producer_epoch: int = 0
    next_sequence: int = 0
    last_idempotent: tuple[bytes, int] | None = None  # (batch, first offset) of the last one attempted


class Workload:
    """One seeded run: the same seed always performs the same file operations."""

    def __init__(self, scenario: Scenario, seed: int, root: str, fs: CrashFS):
        self.scenario = scenario
        self.rng = Random(f"{scenario.name}-{seed}")
        self.root = root
        self.fs = fs
        self.now = NOW
        self.serial = 0
        rng = self.rng
        retention = scenario is not PRODUCE_AND_ROLL and rng.random() < 0.8
        self.configs = {topic: random_config(rng, topic, retention) for topic in scenario.topics}
        self.manager_options = dict(checkpoint_interval_ms=rng.choice([0, 5000]), retention_check_interval_ms=0,
                                    initial_task_delay_ms=0)
        self.cleaner_config = CleanerConfig(dedupe_buffer_size=rng.choice([24 * 6, 24 * 40, 1 << 20]))
        self.models = {topic: Model(compacted=topic == TABLE) for topic in scenario.topics}
        # armed operation counts at which the process is between two steps, or between a clean close and
        # the next start: crash points worth drawing more often than their share of all operations
        self.between_steps: list[int] = []
        self.after_clean_close: list[int] = []
        self.manager = self.open_manager()
        for topic in scenario.topics:
            self.manager.create(topic, 0, self.configs[topic], TOPIC_ID, now_ms=self.now)
        self.cleaner = LogCleaner(self.manager, self.cleaner_config)

    def open_manager(self) -> LogManager:
        manager = LogManager([self.root], default_config=LogConfig(), **self.manager_options)
        manager.load(self.configs.get, self.now)
        return manager

    def log(self, topic: str) -> PartitionLog:
        return self.manager.get(topic, 0)

    def run(self) -> None:
        """All the steps; raises Crash where CrashFS makes the process die."""
        names = list(self.scenario.weights)
        weights = list(self.scenario.weights.values())
        for _ in range(self.scenario.steps):
            step = self.rng.choices(names, weights)[0]
            self.now += self.rng.randrange(0, 1500)
            self.fs.armed = step in self.scenario.armed
            if self.fs.armed:
                self.between_steps.append(self.fs.operations)
            getattr(self, step)()
            self.fs.armed = False
            for name, model in self.models.items():
                model.durable_end = max(model.durable_end, self.log(name).recovery_point)

    # ---- steps

    def append(self) -> None:
        rng = self.rng
        topic = rng.choice(self.scenario.topics)
        log = self.log(topic)
        model = self.models[topic]
        pairs = []
        for _ in range(rng.randint(1, 5)):
            self.serial += 1
            value = b"%s-%d:" % (topic.encode(), self.serial) + rng.randbytes(rng.randrange(60))
            if topic == TABLE:
                key = b"key-%d" % rng.randrange(12)
                if rng.random() < 0.12:
                    value = None
            else:
                key = rng.choice([None, b"key-%d" % rng.randrange(12)])
            pairs.append((key, value))
        timestamps = [self.now - rng.randrange(3000) for _ in pairs]
        idempotent = rng.random() < 0.3
        batch = build_batch(
            pairs, timestamps=timestamps, compression=compression.GZIP if rng.random() < 0.15 else compression.NONE,
            producer_id=PRODUCER_IDS[topic] if idempotent else -1, producer_epoch=model.producer_epoch if idempotent else -1,
            base_sequence=model.next_sequence if idempotent else -1)
        first = log.log_end_offset
        for delta, ((key, value), timestamp) in enumerate(zip(pairs, timestamps, strict=True)):
            model.records[first + delta] = (key, value, timestamp)
        model.batch_starts.append(first)
        if idempotent:
            model.last_idempotent = (batch, first)
        info = log.append_as_leader(memoryview(batch), now_ms=self.now)
        assert info.first_offset == first
        model.acked_end = first + len(pairs)
        if idempotent:
            model.next_sequence += len(pairs)
        log.high_watermark = log.log_end_offset

    def flush(self) -> None:
        self.manager.flush()

    def checkpoint(self) -> None:
        self.manager.checkpoint()

    def maintain(self) -> None:
        self.manager.maintain(self.now)

    def delete_records(self) -> None:
        if EVENTS in self.models:
            log = self.log(EVENTS)
            log.delete_records_before(self.rng.randint(log.log_start_offset, log.high_watermark))

    def clean(self) -> None:
        self.cleaner.clean_once(self.now)

    def truncate(self) -> None:
        """A follower cutting its log back to where it diverged from its leader's (a batch boundary)."""
        if EVENTS not in self.models:
            return
        log = self.log(EVENTS)
        model = self.models[EVENTS]
        low = max(log.log_start_offset, log.log_end_offset - 12)
        cut = self.rng.choice([offset for offset in model.batch_starts if offset >= low] + [log.log_end_offset])
        # what the log promised past the cut is void from the call on; the records may survive a crash in it
        model.acked_end = min(model.acked_end, cut)
        model.durable_end = min(model.durable_end, cut)
        if model.last_idempotent is not None and model.last_idempotent[1] >= cut:
            model.last_idempotent = None
        log.truncate_to(cut)
        assert log.log_end_offset == cut
        for removed in [o for o in model.records if o >= cut]:
            del model.records[removed]
        del model.batch_starts[bisect.bisect_left(model.batch_starts, cut):]
        # the producer's batches past the cut are gone: like a real one, it starts a new epoch
        model.producer_epoch += 1
        model.next_sequence = 0

    def reopen(self) -> None:
        self.manager.close()
        if self.fs.armed:
            self.after_clean_close.append(self.fs.operations)
        self.manager = self.open_manager()
        self.cleaner = LogCleaner(self.manager, self.cleaner_config)


# ---- running a crash


def run_crash(scenario: Scenario, seed: int, tmp_path) -> None:
    """Count the armed operations of the seed's workload, rerun it to crash at one of them, check recovery."""
    dry_fs = CrashFS(model=scenario.model)
    with pytest.MonkeyPatch.context() as monkeypatch:
        dry_fs.install(monkeypatch)
        dry_run = Workload(scenario, seed, str(tmp_path / "dry"), dry_fs)
        dry_run.run()
        dry_run.manager.close()
    assert dry_fs.operations > 0, f"{scenario.name} seed {seed}: the workload made no armed file operation"
    crash_rng = Random(f"{scenario.name}-{seed}-crash")
    torn_tails = crash_rng if scenario.model == POWER_LOSS and seed % 2 else None
    fs = CrashFS(model=scenario.model, crash_at=choose_crash_point(dry_run, dry_fs.operations, crash_rng),
                 torn_tails=torn_tails)
    root = str(tmp_path / "crashed")
    with pytest.MonkeyPatch.context() as monkeypatch:
        fs.install(monkeypatch)
        workload = Workload(scenario, seed, root, fs)
        with pytest.raises(Crash):
            workload.run()
    fs.reboot([root])
    context = (f"{scenario.name} seed {seed}{' with torn tails' if torn_tails else ''}: crashed at {fs.crash_point} "
               f"of {dry_fs.operations}")
    now = workload.now + 1000
    try:
        if crash_rng.random() < 0.5:
            context += f", then during recovery at {crash_during_recovery(workload, root, now, crash_rng, torn_tails)}"
        check_recovery(workload, root, now)
    except Exception as exc:
        raise AssertionError(f"{context}: {type(exc).__name__}: {exc}") from exc


def choose_crash_point(dry_run: Workload, operations: int, rng: Random) -> int:
    """Mostly any operation; sometimes one at which the process is idle between steps, or just closed cleanly
    (a power loss soon after a clean shutdown finds a clean-shutdown marker beside unsynced files)."""
    draw = rng.random()
    for threshold, points in ((0.25, dry_run.after_clean_close), (0.45, dry_run.between_steps)):
        points = [point for point in points if point < operations]
        if draw < threshold and points:
            return rng.choice(points)
    return rng.randrange(operations)


def open_recovered(workload: Workload, root: str, now: int) -> LogManager:
    """What a restarting node does: lock the log dir and load it (recovering it, since it was not closed)."""
    manager = LogManager([root], default_config=LogConfig(), **workload.manager_options)
    manager.load(workload.configs.get, now)
    return manager


def crash_during_recovery(workload: Workload, root: str, now: int, rng: Random, torn_tails: Random | None) -> str:
    """Crash a second time, at a seeded operation of the recovery itself; returns where, for messages."""
    rehearsal = root + "-rehearsal"
    shutil.copytree(root, rehearsal)
    dry_fs = CrashFS(model=workload.scenario.model)
    with pytest.MonkeyPatch.context() as monkeypatch:
        dry_fs.install(monkeypatch)
        dry_fs.armed = True
        manager = open_recovered(workload, rehearsal, now)
        dry_fs.armed = False
        manager.close()
    fs = CrashFS(model=workload.scenario.model, crash_at=rng.randrange(dry_fs.operations),
                 torn_tails=torn_tails)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fs.install(monkeypatch)
        fs.armed = True
        with pytest.raises(Crash):
            open_recovered(workload, root, now)
    fs.reboot([root])
    return f"{fs.crash_point} of {dry_fs.operations}"


def check_recovery(workload: Workload, root: str, now: int) -> None:
    """Recover the crashed directory, check each log, use it, and reopen it cleanly."""
    manager = open_recovered(workload, root, now)
    contents = {}
    for topic, model in workload.models.items():
        log = manager.get(topic, 0)
        assert log is not None, f"{topic}: the partition is gone"
        check_log(log, model, workload.scenario.model, Random(now))
        if workload.scenario.model == PROCESS_CRASH and model.last_idempotent is not None:
            check_idempotent_retry(log, model, now)
        check_append_after_recovery(log, model, now)
        present = served_records(log, Random(now))
        contents[topic] = (log.log_start_offset, log.log_end_offset, log.high_watermark, present)
    manager.close()

    manager = open_recovered(workload, root, now)
    for topic in workload.models:
        log = manager.get(topic, 0)
        reopened = (log.log_start_offset, log.log_end_offset, log.high_watermark, served_records(log, Random(now)))
        assert reopened == contents[topic], f"{topic}: a clean reopen after recovery serves other records"
    if TABLE in workload.models:
        check_full_compaction(manager, workload, now)
    manager.close()


# ---- invariants


def check_log(log: PartitionLog, model: Model, crash_model: str, rng: Random) -> None:
    """Every invariant of a recovered log against what was written to it."""
    start, end = log.log_start_offset, log.log_end_offset
    assert log.segments[0].base_offset <= start <= log.high_watermark <= end, \
        f"offsets out of order: {log.segments[0].base_offset=} {start=} {log.high_watermark=} {end=}"
    assert log.recovery_point == end
    written_end = max(model.records, default=-1) + 1
    assert end <= written_end, f"log end {end} is past everything written ({written_end})"
    promised = model.acked_end if crash_model == PROCESS_CRASH else model.durable_end
    assert end >= promised, f"log end {end} lost offsets below {promised}, which were acknowledged or flushed"
    stored = check_segments(log)
    present = served_records(log, rng)
    assert present == [(r.offset, r.key, r.value, r.timestamp) for _, records in stored for r in records
                       if r.offset >= start], "the fetch path serves other records than the segment files hold"
    check_offset_lookups(log, stored)
    check_time_lookups(log, present, rng)
    for offset, key, value, timestamp in present:
        assert model.records.get(offset) == (key, value, timestamp), f"offset {offset} holds a record never written there"
    offsets = [record[0] for record in present]
    if model.compacted:
        check_latest_per_key(model, present, end, exact=False)
    else:
        assert offsets == list(range(start, end)), f"records {start}..{end - 1} are not all there"


def check_segments(log: PartitionLog) -> list[tuple[BatchInfo, list[Record]]]:
    """Decode every segment file whole (CRC-checked); check them against the segments' state and indexes."""
    stored = []
    previous_end = -1
    for index, segment in enumerate(log.segments):
        data = os.pread(segment.fd, segment.size + 1, 0)
        assert len(data) == segment.size, f"{segment.log_path}: {len(data)} bytes on disk, {segment.size} in memory"
        batches = list(decode_batches(data))
        assert sum(info.size for info, _ in batches) == segment.size, f"{segment.log_path} ends with a torn batch"
        upper = log.segments[index + 1].base_offset if index + 1 < len(log.segments) else None
        for info, records in batches:
            assert info.base_offset >= max(segment.base_offset, previous_end + 1), f"offset {info.base_offset} goes back"
            assert upper is None or info.last_offset < upper, f"{segment.log_path} runs into the next segment"
            record_offsets = [r.offset for r in records]
            assert record_offsets == sorted(set(record_offsets))
            assert all(info.base_offset <= o <= info.last_offset for o in record_offsets)
            previous_end = info.last_offset
        expected_next = batches[-1][0].last_offset + 1 if batches else segment.base_offset
        assert segment.next_offset == expected_next, f"{segment.log_path}: next offset {segment.next_offset}"
        check_indexes(segment, [info for info, _ in batches])
        stored += batches
    return stored


def check_indexes(segment, batches: list[BatchInfo]) -> None:
    by_position = {info.position: info for info in batches}
    offset_index = segment.offset_index
    for offset, position in zip(offset_index.offsets, offset_index.positions, strict=True):
        info = by_position.get(position)
        assert info is not None and info.last_offset == offset, \
            f"{offset_index.path}: entry ({offset}, {position}) does not name a batch ending at {offset}"
    time_index = segment.time_index
    for timestamp, offset in zip(time_index.timestamps, time_index.offsets, strict=True):
        up_to = [info.max_timestamp for info in batches if info.last_offset <= offset]
        reaching = [info for info in batches if info.last_offset == offset]
        assert up_to and max(up_to) == timestamp and reaching and reaching[0].max_timestamp == timestamp, \
            f"{time_index.path}: entry ({timestamp}, {offset}) is not the largest timestamp up to {offset}"
    largest = max((info.max_timestamp for info in batches), default=-1)
    assert segment.max_timestamp == largest, f"{segment.log_path}: largest timestamp {segment.max_timestamp}, not {largest}"


def served_records(log: PartitionLog, rng: Random) -> list[tuple]:
    """Every record from the log start, read as fetches are served (FileRegions), decoded with CRC checks."""
    out = []
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        region = log.read(offset, rng.choice([1, 300, 1 << 20]), max_offset=end)
        if region is None:
            break
        data = os.pread(region.fd, region.size, region.position)
        decoded = list(decode_batches(data))
        assert sum(info.size for info, _ in decoded) == region.size == len(data), "a fetch served a partial batch"
        assert decoded[0][0].last_offset >= offset, f"a fetch at {offset} served a batch ending before it"
        for info, records in decoded:
            out += [(r.offset, r.key, r.value, r.timestamp) for r in records if r.offset >= offset]
            offset = info.last_offset + 1
    return out


def check_offset_lookups(log: PartitionLog, stored: list[tuple[BatchInfo, list[Record]]]) -> None:
    """A read at any offset starts with the first batch ending at or after it (via the offset index)."""
    last_offsets = [info.last_offset for info, _ in stored]
    for offset in range(log.log_start_offset, log.log_end_offset):
        region = log.read(offset, 1, max_offset=log.log_end_offset)
        slot = bisect.bisect_left(last_offsets, offset)
        if slot == len(stored):
            assert region is None, f"a read at {offset} past the last batch returned one"
            continue
        assert region is not None, f"a read at {offset} found no batch"
        served = read_batch_info(os.pread(region.fd, BATCH_HEADER_SIZE, region.position))
        assert served.base_offset == stored[slot][0].base_offset, \
            f"a read at {offset} served the batch at {served.base_offset}, not {stored[slot][0].base_offset}"


def check_time_lookups(log: PartitionLog, present: list[tuple], rng: Random) -> None:
    timestamps = sorted({record[3] for record in present})
    probes = rng.sample(timestamps, min(6, len(timestamps))) + ([timestamps[-1] + 1] if timestamps else [])
    for probe in probes:
        expected = next(((o, ts) for o, _, _, ts in present if ts >= probe), None)
        assert log.offset_for_timestamp(probe) == expected, f"offset for timestamp {probe}"


def check_latest_per_key(model: Model, present: list[tuple], end: int, *, exact: bool,
                         tombstones_expired: bool = False) -> None:
    """Each key's last record is the last written below `end`; with `exact`, no earlier one is left; with
    `tombstones_expired`, no key whose last record is a tombstone is left at all."""
    latest_written = {}
    for offset in sorted(o for o in model.records if o < end):
        latest_written[model.records[offset][0]] = offset
    present_by_key: dict[bytes, list[int]] = {}
    for offset, key, _, _ in present:
        present_by_key.setdefault(key, []).append(offset)
    assert set(present_by_key) <= set(latest_written)
    for key, offset in latest_written.items():
        kept = present_by_key.get(key, [])
        tombstone = model.records[offset][1] is None
        if tombstones_expired and tombstone:
            assert not kept, f"{key}: offsets {kept} left after its tombstone's delete horizon"
        elif exact:
            assert kept == [offset] or (tombstone and not kept), f"{key}: offsets {kept} left, latest is {offset}"
        else:
            assert (kept and kept[-1] == offset) or (tombstone and not kept), \
                f"{key}: last present offset is {kept[-1:]}, the last one written below {end} is {offset}"


def check_idempotent_retry(log: PartitionLog, model: Model, now: int) -> None:
    """A producer retrying its last batch after the crash gets the offsets it was meant to have, once."""
    batch, first = model.last_idempotent
    end = log.log_end_offset
    info = log.append_as_leader(memoryview(batch), now_ms=now)
    assert info.first_offset == first, f"the retried batch got offset {info.first_offset}, not {first}"
    assert log.log_end_offset == max(end, info.last_offset + 1), "the retried batch was written twice"
    model.acked_end = max(model.acked_end, log.log_end_offset)
    log.high_watermark = log.log_end_offset


def check_append_after_recovery(log: PartitionLog, model: Model, now: int) -> None:
    """The recovered log takes appends at its end, and serves them."""
    first = log.log_end_offset
    record = (b"key-0", b"after recovery", now)
    info = log.append_as_leader(memoryview(build_batch([record[:2]], timestamps=[now])), now_ms=now)
    assert info.first_offset == first
    model.records[first] = record
    log.high_watermark = log.log_end_offset
    assert served_records(log, Random(now))[-1] == (first, *record)


def check_full_compaction(manager: LogManager, workload: Workload, now: int) -> None:
    """The recovered compacted log, cleaned to its end, keeps exactly the latest record of each key; cleaned
    again after delete.retention.ms, it has dropped the tombstones."""
    log = manager.get(TABLE, 0)
    model = workload.models[TABLE]
    log.update_config(dataclasses.replace(log.config, min_cleanable_dirty_ratio=0.0))
    cleaner = LogCleaner(manager, workload.cleaner_config)
    later = now + log.config.delete_retention_ms + 1
    for when in (now, later):
        if when == later:  # a cleaning needs dirty data: one more record, then the tombstones can go
            record = (b"key-late", b"late", when)
            model.records[log.append_as_leader(memoryview(build_batch([record[:2]], timestamps=[when])),
                                               now_ms=when).first_offset] = record
        log.high_watermark = log.log_end_offset
        log.roll(when)
        for _ in range(200):
            if not cleaner.clean_once(when):
                break
        check_segments(log)
        check_latest_per_key(model, served_records(log, Random(now)), log.log_end_offset, exact=True,
                             tombstones_expired=when == later)


# ---- the tests


def test_process_crash_during_produce_and_roll(crash_seed, tmp_path):
    run_crash(PRODUCE_AND_ROLL, crash_seed, tmp_path)


def test_process_crash_during_retention(crash_seed, tmp_path):
    run_crash(RETENTION, crash_seed, tmp_path)


def test_process_crash_during_compaction(crash_seed, tmp_path):
    run_crash(COMPACTION, crash_seed, tmp_path)


def test_power_loss_during_mixed_workload(crash_seed, tmp_path):
    run_crash(POWER_LOSS_MIXED, crash_seed, tmp_path)


def test_power_loss_soon_after_a_clean_shutdown_keeps_the_largest_timestamp(tmp_path):
    """Regression (power_loss seed 18): with flush.messages=1, close() left the time index's final entry
    unsynced, and the clean-shutdown marker made the next start trust the index without it."""
    root = str(tmp_path)
    config = LogConfig(flush_messages=1)
    fs = CrashFS(model=POWER_LOSS, crash_at=0)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fs.install(monkeypatch)
        manager = LogManager([root], default_config=config)
        manager.load(lambda topic: config, NOW)
        log = manager.create(EVENTS, 0, config, TOPIC_ID, now_ms=NOW)
        for i in range(5):
            log.append_as_leader(memoryview(build_batch([(b"k", b"v")], timestamps=[NOW + i])), now_ms=NOW)
        manager.close()
        fs.armed = True
        with pytest.raises(Crash):
            LogManager([root], default_config=config)
    fs.reboot([root])
    manager = LogManager([root], default_config=config)
    manager.load(lambda topic: config, NOW)
    log = manager.get(EVENTS, 0)
    assert log.active.max_timestamp == NOW + 4
    assert log.offset_for_timestamp(NOW + 2) == (2, NOW + 2)
    manager.close()


@pytest.mark.parametrize("crash_model", [PROCESS_CRASH, POWER_LOSS])
def test_a_crash_anywhere_while_recovery_rebuilds_lost_indexes(tmp_path, crash_model):
    """Regression (retention seed 340): retention died between renaming a segment's indexes and its log to
    `.deleted`; the recovery rebuilding them died after creating the time index, and the next start trusted
    that empty file (largest timestamp -1). Here the rebuild is crashed at each of its operations in turn."""
    config = LogConfig(segment_bytes=700, index_interval_bytes=100)
    template = str(tmp_path / "template")
    manager = LogManager([template], default_config=config)
    manager.load(lambda topic: config, NOW)
    log = manager.create(EVENTS, 0, config, TOPIC_ID, now_ms=NOW)
    for i in range(30):
        log.append_as_leader(memoryview(build_batch([(b"k", b"v%d" % i)], timestamps=[NOW + i])), now_ms=NOW)
    manager.close()
    for index_path in (log.segments[1].offset_index.path, log.segments[1].time_index.path):
        os.unlink(index_path)

    def recover(root: str) -> LogManager:
        recovered = LogManager([root], default_config=config)
        recovered.load(lambda topic: config, NOW)
        return recovered

    operations = None
    crash_at = 0
    while operations is None or crash_at < operations:
        root = str(tmp_path / f"crash-{crash_at}")
        shutil.copytree(template, root)
        fs = CrashFS(model=crash_model, crash_at=crash_at)
        with pytest.MonkeyPatch.context() as monkeypatch:
            fs.install(monkeypatch)
            fs.armed = True
            try:
                recover(root).close()
                operations = fs.operations  # past the last operation: no crash left to try
            except Crash:
                fs.reboot([root])
        manager = recover(root)
        check_segments(manager.get(EVENTS, 0))
        manager.close()
        crash_at += 1
