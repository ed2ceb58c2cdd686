"""FileRaftLog and FileQuorumStateStore: the in-memory behaviour, kept on disk through restarts and crashes.

The randomized tests run seeds 0..39; `--seed N` runs seed N only; a failure names its seed. Crashes are
simulated by writing file images by hand (the bytes of the last flush plus a torn, corrupted or zero-filled
part of what came after), so fsync is recorded rather than performed.
"""

import json
import os
import re
import struct
from pathlib import Path
from random import Random

import pytest

from odradek.raft.core import RaftCore
from odradek.raft.file_log import LOG_FILE, QUORUM_STATE_FILE, FileQuorumStateStore, FileRaftLog
from odradek.raft.log import MemoryLog, QuorumState
from odradek.raft.messages import NO_LEADER, Entry

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
    end = log.end_offset
    with pytest.raises(IndexError):
        log.epoch_at(end)
    return {
        "end_offset": end,
        "flushed_end_offset": log.flushed_end_offset,
        "last_epoch": log.last_epoch(),
        "epoch_at": [log.epoch_at(offset) for offset in range(-1, end)],
        "entries": log.read(0, end + 1),
        "reads": [log.read(start, n) for start in range(0, end + 2, 3) for n in (0, 1, 5)],
        "end_offset_for_epoch": [log.end_offset_for_epoch(epoch) for epoch in range(-1, log.last_epoch() + 2)],
    }


def frame_ends(image: bytes) -> list[int]:
    """Where each frame of an intact raft.log image ends: [length u32][crc32c u32][payload]."""
    ends, position = [], 0
    while position < len(image):
        (length,) = struct.unpack_from(">I", image, position)
        position += 8 + length
        ends.append(position)
    return ends


def open_image(directory, image: bytes) -> FileRaftLog:
    os.makedirs(directory)
    with open(os.path.join(directory, LOG_FILE), "wb") as f:
        f.write(image)
    return FileRaftLog(str(directory))


# ---- FileRaftLog -----------------------------------------------------------------------------------


def test_file_log_answers_like_the_memory_log_after_every_operation(log_seed, tmp_path):
    rng = Random(log_seed)
    memory, file = MemoryLog(), FileRaftLog(str(tmp_path))
    for step in range(STEPS):
        choice = rng.random()
        if choice < 0.45:
            batch = random_batch(rng, memory.last_epoch())
            memory.append(batch)
            file.append(batch)
            action = f"append {len(batch)}"
        elif choice < 0.5 and memory.last_epoch() > 0:
            late = [Entry(memory.last_epoch() - rng.randint(1, memory.last_epoch()), "late")]
            with pytest.raises(ValueError):
                memory.append(late)
            with pytest.raises(ValueError):
                file.append(late)
            action = f"refused append of epoch {late[0].epoch}"
        elif choice < 0.65:
            offset = rng.randrange(memory.end_offset + 3)
            memory.truncate_to(offset)
            file.truncate_to(offset)
            action = f"truncate_to {offset}"
        elif choice < 0.9:
            memory.flush()
            file.flush()
            action = "flush"
        else:  # a clean restart: what was written is read back, and counts as flushed
            file.close()
            file = FileRaftLog(str(tmp_path))
            memory.flush()
            action = "reopen"
        assert observe(file) == observe(memory), f"seed {log_seed}, step {step}: {action}"
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
        else:
            if choice < 0.75:
                log.truncate_to(rng.randrange(log.end_offset + 1))  # the core flushes right after truncating
            log.flush()
            flushed_image, flushed = Path(log.path).read_bytes(), log.read(0, log.end_offset)
    log.append(random_batch(rng, log.last_epoch()))  # at least one unflushed batch
    written, appended = Path(log.path).read_bytes(), log.read(0, log.end_offset)
    log.close()
    assert written.startswith(flushed_image)
    ends = frame_ends(written)

    # The crashed disk holds the flushed bytes and any part of the rest, possibly damaged.
    cut = rng.randint(len(flushed_image), len(written))
    flip = rng.randrange(len(flushed_image), cut) if cut > len(flushed_image) else None
    boundary = max((end for end in ends if end <= cut), default=0)
    flipped = bytearray(written[:cut])
    if flip is not None:
        flipped[flip] ^= 1 << rng.randrange(8)
    images = {
        "flushed": (flushed_image, len(flushed)),
        "torn": (written[:cut], sum(1 for end in ends if end <= cut)),
        "torn and flipped": (bytes(flipped), sum(1 for end in ends if end <= (cut if flip is None else flip))),
        # zeros after a whole frame (a file extended but not written): a zero header has a valid CRC
        "zero-filled": (written[:boundary] + bytes(rng.randint(1, 4096)), sum(1 for end in ends if end <= boundary)),
    }
    for name, (image, survivors) in images.items():
        context = f"seed {log_seed}, {name} image ({len(image)} of {len(written)} bytes, flushed {len(flushed_image)})"
        directory = tmp_path / name.replace(" ", "-")
        recovered = open_image(directory, image)
        entries = recovered.read(0, recovered.end_offset)
        assert entries == appended[:survivors], context
        assert entries[:len(flushed)] == flushed, context
        assert recovered.flushed_end_offset == recovered.end_offset, context
        assert os.path.getsize(recovered.path) == (ends[survivors - 1] if survivors else 0), context
        # The damaged tail is gone: a new entry lands right after the survivors and reads back.
        extra = Entry(recovered.last_epoch() + 1, [{"type": "after-crash"}])
        recovered.append([extra])
        recovered.close()
        again = FileRaftLog(str(directory))
        assert again.read(0, again.end_offset) == (*appended[:survivors], extra), context
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
