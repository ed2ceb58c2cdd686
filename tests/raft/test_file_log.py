"""FileRaftLog and FileQuorumStateStore: the in-memory behaviour, kept on disk through restarts and crashes.

The randomized tests run seeds 0..39; `--seed N` runs seed N only; a failure names its seed. Crashes are
simulated by writing file images by hand (the bytes of the last flush plus a torn, corrupted or zero-filled
part of what came after; snapshot files, written by rename after an fsync, are whole or absent), so fsync
is recorded rather than performed.
"""

import json
import os
import re
import struct
from pathlib import Path
from random import Random

import crc32c
import pytest

from odradek.raft.core import RaftCore
from odradek.raft.file_log import (
    LOG_FILE,
    QUORUM_STATE_FILE,
    FileQuorumStateStore,
    FileRaftLog,
    snapshot_file_name,
)
from odradek.raft.log import MemoryLog, QuorumState
from odradek.raft.messages import NO_LEADER, Entry, Snapshot

SEEDS = 40
STEPS = 150
VOTERS = frozenset({1, 2, 3})


def pytest_generate_tests(metafunc):
    if "log_seed" in metafunc.fixturenames:
        given = metafunc.config.getoption("--seed")
        metafunc.parametrize("log_seed", [given] if given is not None else range(SEEDS), ids=lambda s: f"seed{s}")


@pytest.fixture(autouse=True)
def fsyncs(monkeypatch) -> list[int]:
    """The file descriptors fsynced, in order (nothing is really synced)."""
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    return calls


def random_data(rng: Random) -> object:
    """A leader-change record (None) or a small batch of metadata-like records, up to a few KB."""
    if rng.random() < 0.2:
        return None
    return [{"type": rng.choice(("TopicRecord", "PartitionRecord", "FeatureLevelRecord")),
             "name": f"tópico-{rng.randrange(1000)}", "replicas": [rng.randrange(5) for _ in range(rng.randrange(4))],
             "weight": rng.random(), "config": "x" * rng.randrange(3000), "removed": rng.random() < 0.5}
            for _ in range(rng.randrange(1, 4))]


def random_batch(rng: Random, last_epoch: int) -> list[Entry]:
    batch = []
    for _ in range(rng.randint(1, 4)):
        last_epoch += rng.choice((0, 0, 0, 1, 2))
        batch.append(Entry(last_epoch, random_data(rng)))
    return batch


def observe(log) -> dict:
    """Everything the RaftLog interface lets a caller see."""
    start, end = log.start_offset, log.end_offset
    with pytest.raises(IndexError):
        log.epoch_at(end)
    if start > 0:  # below the log start, only the snapshot knows
        with pytest.raises(IndexError):
            log.epoch_at(start - 2)
        with pytest.raises(IndexError):
            log.read(start - 1, 1)
    return {
        "start_offset": start,
        "snapshot": log.latest_snapshot(),
        "end_offset": end,
        "flushed_end_offset": log.flushed_end_offset,
        "last_epoch": log.last_epoch(),
        "epoch_at": [log.epoch_at(offset) for offset in range(start - 1, end)],
        "entries": log.read(start, end - start + 1),
        "reads": [log.read(first, n) for first in range(start, end + 2, 3) for n in (0, 1, 5)],
        "end_offset_for_epoch": [log.end_offset_for_epoch(epoch) for epoch in range(-1, log.last_epoch() + 2)],
    }


def snapshot_end(log) -> int:
    snapshot = log.latest_snapshot()
    return snapshot.end_offset if snapshot is not None else 0


def frame_ends(image: bytes) -> list[int]:
    """Where each frame of an intact raft.log image ends: [length u32][crc32c u32][payload]."""
    ends, position = [], 0
    while position < len(image):
        (length,) = struct.unpack_from(">I", image, position)
        position += 8 + length
        ends.append(position)
    return ends


def open_image(directory, image: bytes, snapshot_files: dict[str, bytes] | None = None) -> FileRaftLog:
    os.makedirs(directory)
    with open(os.path.join(directory, LOG_FILE), "wb") as f:
        f.write(image)
    for name, content in (snapshot_files or {}).items():
        Path(directory, name).write_bytes(content)
    return FileRaftLog(str(directory))


def snapshot_files(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in Path(directory).glob("snapshot-*")}


# ---- FileRaftLog -----------------------------------------------------------------------------------


def test_file_log_answers_like_the_memory_log_after_every_operation(log_seed, tmp_path):
    """Appends, truncations, flushes, snapshots (taken or installed), prefix drops, restarts and crashes."""
    rng = Random(log_seed)
    memory, file = MemoryLog(), FileRaftLog(str(tmp_path))
    durable = b""  # what raft.log holds on disk for sure: the image a crash leaves
    for step in range(STEPS):
        choice = rng.random()
        start, end, last_snapshot = memory.start_offset, memory.end_offset, snapshot_end(memory)
        if choice < 0.35:
            batch = random_batch(rng, memory.last_epoch())
            memory.append(batch)
            file.append(batch)
            action = f"append {len(batch)}"
        elif choice < 0.4 and memory.last_epoch() > 0:
            late = [Entry(memory.last_epoch() - rng.randint(1, memory.last_epoch()), "late")]
            with pytest.raises(ValueError):
                memory.append(late)
            with pytest.raises(ValueError):
                file.append(late)
            action = f"refused append of epoch {late[0].epoch}"
        elif choice < 0.52:
            offset = rng.randrange(last_snapshot, end + 3)
            memory.truncate_to(offset)
            file.truncate_to(offset)
            action = f"truncate_to {offset}"
            if last_snapshot > 0:
                for log in (memory, file):
                    with pytest.raises(ValueError):
                        log.truncate_to(last_snapshot - 1)
        elif choice < 0.7:
            memory.flush()
            file.flush()
            durable = Path(file.path).read_bytes()
            action = "flush"
        elif choice < 0.78 and end > last_snapshot:  # a snapshot of entries the log holds, maybe a prefix drop
            at = rng.randint(last_snapshot + 1, end)
            snapshot = Snapshot(at, memory.epoch_at(at - 1), random_data(rng))
            memory.save_snapshot(snapshot)
            file.save_snapshot(snapshot)
            action = f"snapshot at {at}"
            if rng.random() < 0.6:
                drop = rng.randint(start, at)
                memory.truncate_prefix_to(drop)
                file.truncate_prefix_to(drop)
                if drop > start:
                    durable = Path(file.path).read_bytes()
                action += f", prefix dropped to {drop}"
            for log in (memory, file):
                with pytest.raises(ValueError):
                    log.save_snapshot(snapshot)  # not newer
                with pytest.raises(ValueError):
                    log.truncate_prefix_to(at + 1)  # not covered
        elif choice < 0.83:  # a snapshot installed from a leader: the log does not hold its last entry
            if rng.random() < 0.5 or end == last_snapshot:
                at, epoch = end + rng.randint(1, 3), memory.last_epoch() + rng.randint(0, 2)
            else:
                at = rng.randint(last_snapshot + 1, end)
                epoch = memory.epoch_at(at - 1) + rng.randint(1, 2)
            snapshot = Snapshot(at, epoch, random_data(rng))
            memory.save_snapshot(snapshot)
            file.save_snapshot(snapshot)
            durable = Path(file.path).read_bytes()
            assert memory.start_offset == memory.end_offset == at
            action = f"install snapshot at {at} epoch {epoch}"
        elif choice < 0.92:  # a clean restart: what was written is read back, and counts as flushed
            file.close()
            file = FileRaftLog(str(tmp_path))
            memory.flush()
            durable = Path(file.path).read_bytes()
            action = "reopen"
        else:  # a crash: raft.log as last fsynced, the snapshot files (durable when saved) as they are
            file.close()
            Path(file.path).write_bytes(durable)
            file = FileRaftLog(str(tmp_path))
            memory.crash()
            durable = Path(file.path).read_bytes()
            action = "crash"
        assert observe(file) == observe(memory), f"seed {log_seed}, step {step}: {action}"
    assert len(snapshot_files(tmp_path)) == (memory.latest_snapshot() is not None)
    file.close()


def test_reopening_after_close_serves_the_same_log(tmp_path):
    rng = Random(0)
    log = FileRaftLog(str(tmp_path))
    for _ in range(300):
        log.append(random_batch(rng, log.last_epoch()))
    log.flush()
    before = observe(log)
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert observe(reopened) == before
    reopened.close()


def test_append_writes_without_fsync_and_flush_fsyncs_only_what_changed(tmp_path, fsyncs):
    log = FileRaftLog(str(tmp_path))
    opened = len(fsyncs)
    log.append([Entry(1, None), Entry(1, [{"type": "TopicRecord"}])])
    assert len(fsyncs) == opened and log.flushed_end_offset == 0 and log.end_offset == 2
    log.flush()
    log.flush()  # nothing new: no second fsync
    assert len(fsyncs) == opened + 1 and log.flushed_end_offset == 2
    log.truncate_to(1)
    assert log.flushed_end_offset == 1
    log.flush()
    assert len(fsyncs) == opened + 2
    log.close()


def test_a_batch_with_a_decreasing_epoch_is_refused_whole(tmp_path):
    log = FileRaftLog(str(tmp_path))
    log.append([Entry(2, "a")])
    size = os.path.getsize(log.path)
    with pytest.raises(ValueError):
        log.append([Entry(2, "b"), Entry(3, "c"), Entry(1, "d")])
    assert log.read(0, 10) == (Entry(2, "a"),) and log.last_epoch() == 2
    assert os.path.getsize(log.path) == size
    log.close()


def test_entries_read_back_as_a_reopen_would_decode_them(tmp_path):
    log = FileRaftLog(str(tmp_path))
    data = [{"partitions": (1, 2)}]
    log.append([Entry(1, data)])
    data[0]["partitions"] = "changed by the caller afterwards"
    assert log.read(0, 1) == (Entry(1, [{"partitions": [1, 2]}]),)
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.read(0, 1) == log.read(0, 1)
    reopened.close()


def test_a_crash_keeps_a_prefix_of_what_was_appended_and_everything_flushed(log_seed, tmp_path):
    rng = Random(log_seed)
    log = FileRaftLog(str(tmp_path / "live"))
    flushed_image, flushed = b"", ()
    for _ in range(rng.randrange(5, 40)):
        choice = rng.random()
        if choice < 0.6:
            log.append(random_batch(rng, log.last_epoch()))
        elif choice < 0.7 and log.end_offset > snapshot_end(log):  # a snapshot and the prefix drop (a rewrite)
            at = rng.randint(snapshot_end(log) + 1, log.end_offset)
            log.save_snapshot(Snapshot(at, log.epoch_at(at - 1), random_data(rng)))
            log.truncate_prefix_to(at)
            flushed_image, flushed = Path(log.path).read_bytes(), log.read(at, log.end_offset)
        else:
            if choice < 0.85:  # the core flushes right after truncating
                log.truncate_to(rng.randrange(snapshot_end(log), log.end_offset + 1))
            log.flush()
            flushed_image, flushed = Path(log.path).read_bytes(), log.read(log.start_offset, log.end_offset)
    log.append(random_batch(rng, log.last_epoch()))  # at least one unflushed batch
    start = log.start_offset
    written, appended = Path(log.path).read_bytes(), log.read(start, log.end_offset)
    log.close()
    assert written.startswith(flushed_image)
    ends = frame_ends(written)
    header = 1 if start > 0 else 0  # the log-start frame: flushed by the rewrite that wrote it
    snapshots = snapshot_files(tmp_path / "live")

    # The crashed disk holds the flushed bytes and any part of the rest, possibly damaged.
    cut = rng.randint(len(flushed_image), len(written))
    flip = rng.randrange(len(flushed_image), cut) if cut > len(flushed_image) else None
    boundary = max((end for end in ends if end <= cut), default=0)
    flipped = bytearray(written[:cut])
    if flip is not None:
        flipped[flip] ^= 1 << rng.randrange(8)
    images = {  # name: (image, frames that survive, log-start frame included)
        "flushed": (flushed_image, header + len(flushed)),
        "torn": (written[:cut], sum(1 for end in ends if end <= cut)),
        "torn and flipped": (bytes(flipped), sum(1 for end in ends if end <= (cut if flip is None else flip))),
        # zeros after a whole frame (a file extended but not written): a zero header has a valid CRC
        "zero-filled": (written[:boundary] + bytes(rng.randint(1, 4096)), sum(1 for end in ends if end <= boundary)),
    }
    for name, (image, survivors) in images.items():
        context = f"seed {log_seed}, {name} image ({len(image)} of {len(written)} bytes, flushed {len(flushed_image)})"
        directory = tmp_path / name.replace(" ", "-")
        recovered = open_image(directory, image, snapshots)
        assert recovered.start_offset == start, context
        entries = recovered.read(start, recovered.end_offset)
        assert entries == appended[:survivors - header], context
        assert entries[:len(flushed)] == flushed, context
        assert recovered.flushed_end_offset == recovered.end_offset, context
        assert os.path.getsize(recovered.path) == (ends[survivors - 1] if survivors else 0), context
        # The damaged tail is gone: a new entry lands right after the survivors and reads back.
        extra = Entry(recovered.last_epoch() + 1, [{"type": "after-crash"}])
        recovered.append([extra])
        recovered.close()
        again = FileRaftLog(str(directory))
        assert again.read(start, again.end_offset) == (*appended[:survivors - header], extra), context
        assert again.latest_snapshot() == recovered.latest_snapshot(), context
        again.close()


def test_truncate_then_append_then_reopen(tmp_path):
    log = FileRaftLog(str(tmp_path))
    log.append([Entry(1, None), Entry(1, [{"name": "a"}]), Entry(2, [{"name": "b" * 500}]), Entry(2, "c")])
    log.flush()
    log.truncate_to(2)
    log.append([Entry(3, [{"name": "short"}])])
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.read(0, 10) == (Entry(1, None), Entry(1, [{"name": "a"}]), Entry(3, [{"name": "short"}]))
    assert reopened.end_offset_for_epoch(2) == (1, 2) and reopened.end_offset_for_epoch(3) == (3, 3)
    reopened.close()


def test_stale_frames_from_an_unflushed_truncation_are_not_loaded(tmp_path):
    log = FileRaftLog(str(tmp_path / "live"))
    log.append([Entry(1, "a"), Entry(2, "b"), Entry(2, "c")])
    log.flush()
    old = Path(log.path).read_bytes()
    log.truncate_to(1)
    log.append([Entry(3, "x")])  # a frame as long as the one it replaces
    new = Path(log.path).read_bytes()
    log.close()
    # The crash kept the new frame's bytes but not the shorter file size: the old third frame follows it.
    recovered = open_image(tmp_path / "crashed", new + old[len(new):])
    assert recovered.read(0, 10) == (Entry(1, "a"), Entry(3, "x"))
    recovered.close()


# ---- FileRaftLog snapshots ---------------------------------------------------------------------------


def written_log(directory, entries: list[Entry], flush: bool = True) -> FileRaftLog:
    log = FileRaftLog(str(directory))
    log.append(entries)
    if flush:
        log.flush()
    return log


def frames(image: bytes) -> list[tuple[int, object]]:
    """(epoch, data) of each frame of an intact raft.log image."""
    out, position = [], 0
    while position < len(image):
        length, _ = struct.unpack_from(">II", image, position)
        payload = image[position + 8:position + 8 + length]
        out.append((struct.unpack_from(">i", payload)[0], json.loads(payload[4:])))
        position += 8 + length
    return out


def test_snapshot_file_and_log_start_frame_on_disk(tmp_path):
    log = written_log(tmp_path, [Entry(1, None), Entry(1, "a"), Entry(2, None), Entry(2, "b"), Entry(2, "c")])
    log.save_snapshot(Snapshot(4, 2, {"topics": ["a", "b"]}))
    name = "snapshot-00000000000000000004-0000000002.checkpoint"
    assert snapshot_file_name(4, 2) == name and [p.name for p in tmp_path.glob("snapshot-*")] == [name]
    content = (tmp_path / name).read_bytes()
    length, checksum = struct.unpack_from(">II", content)
    assert length == len(content) - 8 and checksum == crc32c.crc32c(content[8:])
    assert json.loads(content[8:]) == {"end_offset": 4, "epoch": 2, "state": {"topics": ["a", "b"]}}
    assert frames(Path(log.path).read_bytes())[0] == (1, None)  # the log is untouched until the prefix drop
    log.truncate_prefix_to(4)
    assert frames(Path(log.path).read_bytes()) == [(-1, {"start_offset": 4, "start_epoch": 2}), (2, "c")]
    assert (log.start_offset, log.end_offset, log.epoch_at(3), log.read(4, 5)) == (4, 5, 2, (Entry(2, "c"),))
    log.append([Entry(3, "d")])
    log.flush()
    before = observe(log)
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert observe(reopened) == before
    assert reopened.end_offset_for_epoch(2) == (2, 5) and reopened.end_offset_for_epoch(1) == (-1, -1)
    reopened.close()


def test_a_crash_between_the_snapshot_write_and_the_prefix_drop_keeps_the_log_and_the_snapshot(tmp_path):
    log = written_log(tmp_path, [Entry(1, None), Entry(1, "a"), Entry(2, "b")])
    image = Path(log.path).read_bytes()
    log.save_snapshot(Snapshot(2, 1, "state at 2"))  # the crash comes before truncate_prefix_to
    log.close()
    assert Path(log.path).read_bytes() == image
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.latest_snapshot() == Snapshot(2, 1, "state at 2")
    assert (reopened.start_offset, reopened.read(0, 5)) == (0, (Entry(1, None), Entry(1, "a"), Entry(2, "b")))
    reopened.truncate_prefix_to(2)  # the next prefix drop works from there
    reopened.close()
    again = FileRaftLog(str(tmp_path))
    assert (again.start_offset, again.epoch_at(1), again.read(2, 5)) == (2, 1, (Entry(2, "b"),))
    again.close()


@pytest.mark.parametrize("follower,kept", [
    ([Entry(1, "a")], False),  # behind the snapshot
    ([Entry(1, "a"), Entry(2, "x"), Entry(2, "y"), Entry(2, "z")], False),  # a deposed leader's suffix
    ([Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c")], True),  # holds the snapshot's last entry
])
def test_a_crash_during_an_install_between_the_snapshot_write_and_the_log_reset(tmp_path, follower, kept):
    live = written_log(tmp_path / "live", follower)
    before = Path(live.path).read_bytes()
    live.save_snapshot(Snapshot(3, 3, "state at 3"))
    snapshots = snapshot_files(tmp_path / "live")
    live.close()
    # The snapshot file is durable, raft.log is as before (no reset yet).
    recovered = open_image(tmp_path / "crashed", before, snapshots)
    assert recovered.latest_snapshot() == Snapshot(3, 3, "state at 3")
    if kept:
        assert (recovered.start_offset, recovered.read(0, 10)) == (0, tuple(follower))
    else:
        assert recovered.start_offset == recovered.end_offset == 3 and recovered.last_epoch() == 3
        assert frames(Path(recovered.path).read_bytes()) == [(-1, {"start_offset": 3, "start_epoch": 3})]
    recovered.close()


def test_a_snapshot_of_entries_not_yet_fsynced_survives_a_crash_that_loses_them(tmp_path):
    # A leader may snapshot committed entries that followers have fsynced and it has not yet.
    live = written_log(tmp_path / "live", [Entry(1, None), Entry(1, "a")])
    flushed = Path(live.path).read_bytes()
    live.append([Entry(1, "b"), Entry(1, "c")])
    live.save_snapshot(Snapshot(3, 1, "state at 3"))
    snapshots = snapshot_files(tmp_path / "live")
    live.close()
    recovered = open_image(tmp_path / "crashed", flushed, snapshots)  # before truncate_prefix_to
    assert recovered.latest_snapshot() == Snapshot(3, 1, "state at 3")
    assert (recovered.start_offset, recovered.end_offset, recovered.last_epoch()) == (3, 3, 1)
    recovered.close()


def test_an_install_makes_the_snapshot_durable_before_it_resets_the_log(tmp_path, monkeypatch, fsyncs):
    log = written_log(tmp_path, [Entry(1, "a"), Entry(2, "x")])
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaced.append(Path(dst).name), real_replace(src, dst)))
    synced = len(fsyncs)
    log.save_snapshot(Snapshot(5, 3, "state at 5"))
    assert replaced == [snapshot_file_name(5, 3), LOG_FILE]
    assert len(fsyncs) - synced == 4  # each file and the directory after each rename
    assert (log.start_offset, log.end_offset, log.flushed_end_offset) == (5, 5, 5)
    log.close()


def test_leftover_temp_files_and_older_snapshots_are_removed_and_the_newest_wins(tmp_path):
    log = written_log(tmp_path, [Entry(1, None), Entry(1, "a"), Entry(1, "b")])
    log.save_snapshot(Snapshot(1, 1, "old"))
    old = snapshot_files(tmp_path)
    log.save_snapshot(Snapshot(2, 1, "new"))
    log.close()
    assert list(snapshot_files(tmp_path)) == [snapshot_file_name(2, 1)]  # the older one is removed
    (tmp_path / snapshot_file_name(1, 1)).write_bytes(old[snapshot_file_name(1, 1)])  # as if that removal was lost
    (tmp_path / (snapshot_file_name(3, 1) + ".tmp")).write_bytes(b"half a snapshot")
    (tmp_path / (LOG_FILE + ".tmp")).write_bytes(b"half a log")
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.latest_snapshot() == Snapshot(2, 1, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_FILE, snapshot_file_name(2, 1)]
    reopened.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "rename"])
def test_a_damaged_snapshot_file_is_ignored_while_the_log_still_holds_its_entries(tmp_path, damage):
    log = written_log(tmp_path, [Entry(1, None), Entry(1, "a"), Entry(1, "b")])
    log.save_snapshot(Snapshot(1, 1, "old"))
    log.truncate_prefix_to(1)
    old = snapshot_files(tmp_path)
    log.save_snapshot(Snapshot(2, 1, "new"))  # the prefix below 2 is still in the log
    log.close()
    for name, content in old.items():
        (tmp_path / name).write_bytes(content)
    newest = tmp_path / snapshot_file_name(2, 1)
    content = bytearray(newest.read_bytes())
    if damage == "flip":
        content[-3] ^= 0x10
    elif damage == "truncate":
        content = content[:-1]
    else:  # the name disagrees with the content
        newest.rename(tmp_path / snapshot_file_name(2, 2))
        newest = tmp_path / snapshot_file_name(2, 2)
    newest.write_bytes(bytes(content))
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.latest_snapshot() == Snapshot(1, 1, "old") and reopened.read(1, 5) == (Entry(1, "a"), Entry(1, "b"))
    assert list(snapshot_files(tmp_path)) == [snapshot_file_name(1, 1)]
    reopened.close()


def test_a_log_whose_dropped_prefix_is_in_no_intact_snapshot_is_refused(tmp_path):
    log = written_log(tmp_path, [Entry(1, None), Entry(1, "a"), Entry(1, "b")])
    log.save_snapshot(Snapshot(2, 1, "state at 2"))
    log.truncate_prefix_to(2)
    log.close()
    snapshot = tmp_path / snapshot_file_name(2, 1)
    snapshot.write_bytes(snapshot.read_bytes()[:-1])
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / LOG_FILE))):
        FileRaftLog(str(tmp_path))
    assert snapshot.exists()  # nothing is removed from a directory that cannot be opened


# ---- FileQuorumStateStore --------------------------------------------------------------------------


def test_quorum_state_round_trips_in_kraft_key_names(tmp_path):
    store = FileQuorumStateStore(str(tmp_path))
    assert store.load() == QuorumState()
    store.save(QuorumState(epoch=5, voted_for=2, leader_id=3))
    assert FileQuorumStateStore(str(tmp_path)).load() == QuorumState(5, 2, 3)
    with open(tmp_path / QUORUM_STATE_FILE) as f:
        assert json.load(f) == {"leaderId": 3, "leaderEpoch": 5, "votedId": 2, "data_version": 0}


def test_saving_an_unchanged_quorum_state_writes_nothing(tmp_path, fsyncs):
    store = FileQuorumStateStore(str(tmp_path))
    store.save(QuorumState(1, 1, NO_LEADER))
    written = len(fsyncs)
    store.save(QuorumState(1, 1, NO_LEADER))
    assert len(fsyncs) == written
    store.save(QuorumState(1, 1, 1))
    assert len(fsyncs) > written


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_quorum_state_write_leaves_the_old_state(tmp_path, monkeypatch, failing):
    store = FileQuorumStateStore(str(tmp_path))
    store.save(QuorumState(4, 1, NO_LEADER))

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError):
        store.save(QuorumState(5, 2, NO_LEADER))
    monkeypatch.undo()
    assert FileQuorumStateStore(str(tmp_path)).load() == QuorumState(4, 1, NO_LEADER)


@pytest.mark.parametrize("content", [
    b"",
    b'{"leaderId":1,"leaderEpoch":2',
    b'{"leaderId":1,"leaderEpoch":2,"data_version":0}',
    b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":1}',
    b'{"leaderId":"1","leaderEpoch":2,"votedId":-1,"data_version":0}',
    b"[1,2,-1,0]",
    b"\xff\xfe",
])
def test_a_corrupt_quorum_state_file_is_an_error_naming_it_not_a_fresh_start(tmp_path, content):
    path = tmp_path / QUORUM_STATE_FILE
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        FileQuorumStateStore(str(tmp_path)).load()


# ---- RaftCore on files -----------------------------------------------------------------------------


def start_nodes(tmp_path, now_ms: int) -> dict[int, RaftCore]:
    return {i: RaftCore(i, VOTERS, FileRaftLog(str(tmp_path / f"node{i}")), FileQuorumStateStore(str(tmp_path / f"node{i}")),
                        rng_seed=i, now_ms=now_ms) for i in sorted(VOTERS)}


def run_until(nodes: dict[int, RaftCore], start_ms: int, done, limit_ms: int = 10_000) -> int:
    """Tick every node each 10 ms and deliver in order; returns the time at which `done()` holds."""
    for now_ms in range(start_ms, start_ms + limit_ms, 10):
        queue = [send for node in nodes.values() for send in node.tick(now_ms)]
        for _ in range(100):  # fetches answer fetches forever: the rest is lost, and retried next tick
            if not queue:
                break
            send = queue.pop(0)
            if send.dst in nodes:  # a node left out is down
                queue += nodes[send.dst].handle(send.message, now_ms)
        if done():
            return now_ms
    raise AssertionError(f"not done after {limit_ms} ms")


def leader_of(nodes: dict[int, RaftCore]) -> RaftCore | None:
    return next((node for node in nodes.values() if node.is_leader), None)


def test_three_voters_on_files_commit_and_keep_committed_entries_across_a_restart(tmp_path):
    nodes = start_nodes(tmp_path, 0)
    now = run_until(nodes, 0, lambda: leader_of(nodes) is not None)
    leader = leader_of(nodes)
    proposals = [[{"type": "TopicRecord", "name": f"topic-{n}", "config": "x" * 2000}] for n in range(5)]
    first = leader.propose(proposals[0], now)
    for proposal in proposals[1:]:
        leader.propose(proposal, now)
    end = leader.log.end_offset
    now = run_until(nodes, now, lambda: all(node.high_watermark == end for node in nodes.values()))
    committed = leader.log.read(0, end)
    assert [entry.data for entry in committed[first:]] == proposals
    epoch, leader_id = leader.epoch, leader.node_id
    for node in nodes.values():
        node.log.close()

    nodes = start_nodes(tmp_path, now)
    for node in nodes.values():
        assert node.log.read(0, node.log.end_offset) == committed
        state = node.store.load()
        assert (state.epoch, state.leader_id) == (epoch, leader_id)
    now = run_until(nodes, now, lambda: leader_of(nodes) is not None)
    leader = leader_of(nodes)
    assert leader.epoch > epoch  # the old leader restarted resigned: a new election
    leader.propose([{"type": "TopicRecord", "name": "after-restart"}], now)
    end = leader.log.end_offset
    run_until(nodes, now, lambda: all(node.high_watermark == end for node in nodes.values()))
    for node in nodes.values():
        entries = node.log.read(0, node.log.end_offset)
        assert entries[:len(committed)] == committed and entries[-1].data == [{"type": "TopicRecord", "name": "after-restart"}]
        node.log.close()


def test_a_voter_back_from_downtime_catches_up_from_the_leaders_snapshot_on_files(tmp_path):
    nodes = start_nodes(tmp_path, 0)
    now = run_until(nodes, 0, lambda: leader_of(nodes) is not None)
    leader = leader_of(nodes)
    down = min(i for i in nodes if i != leader.node_id)
    nodes.pop(down).log.close()
    for n in range(5):
        leader.propose([{"type": "TopicRecord", "name": f"topic-{n}"}], now)
    end = leader.log.end_offset
    now = run_until(nodes, now, lambda: all(node.high_watermark == end for node in nodes.values()))
    state = [entry.data for entry in leader.log.read(0, end) if entry.data is not None]  # the "state machine"
    snapshot = leader.snapshot(end, state)
    assert snapshot == Snapshot(end, leader.epoch, state) and leader.log.start_offset == end

    directory = str(tmp_path / f"node{down}")
    back = nodes[down] = RaftCore(down, VOTERS, FileRaftLog(directory), FileQuorumStateStore(directory),
                                  rng_seed=down, now_ms=now)
    now = run_until(nodes, now, lambda: back.log.start_offset == end)
    assert back.take_installed_snapshot() == snapshot and back.high_watermark >= end
    leader.propose([{"type": "TopicRecord", "name": "after-snapshot"}], now)
    run_until(nodes, now, lambda: back.high_watermark == end + 1)
    for node in nodes.values():
        node.log.close()
    reopened = FileRaftLog(directory)
    assert reopened.latest_snapshot() == snapshot and reopened.start_offset == end
    assert reopened.read(end, 5) == (Entry(leader.epoch, [{"type": "TopicRecord", "name": "after-snapshot"}]),)
    reopened.close()
