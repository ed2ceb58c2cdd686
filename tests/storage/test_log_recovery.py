"""Crash recovery: torn and corrupt tails, corrupt indexes, leftovers, and kill -9 during appends.

The invariant under test: after any crash, reopening a log yields exactly the valid prefix of what was
written (every acknowledged batch, once, in order), and the log accepts new appends right after it.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from odradek.storage import segment as segment_module
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from tests.storage.test_log import NOW, fill, make_batch, open_log, read_all, small_config


def build_log(path, batches=20, config=None):
    log = open_log(path, config or small_config())
    fill(log, batches, count=2)
    return log


def reopen(path, config=None, **kwargs):
    kwargs.setdefault("recovery_point", 0)
    log = PartitionLog(str(path), config or small_config(), now_ms=NOW, **kwargs)
    log.high_watermark = log.log_end_offset
    return log


def assert_prefix(log, end):
    assert log.log_end_offset == end
    assert [o for o, _ in read_all(log)] == list(range(end))
    info = log.append_as_leader(memoryview(make_batch(tag=777)), now_ms=NOW)
    assert info.first_offset == end
    log.high_watermark = log.log_end_offset
    assert read_all(log, end)[0][1].startswith(b"777-0:")


def last_batch(log):
    segment = log.active
    return segment, segment.find_batch(log.log_end_offset - 1)


def test_torn_tail_at_every_byte_of_the_last_batch(tmp_path):
    source = tmp_path / "src" / "t-0"
    log = build_log(source)
    segment, info = last_batch(log)
    pristine = tmp_path / "pristine"
    shutil.copytree(source, pristine)
    name = os.path.basename(segment.log_path)
    for cut in range(info.size):
        work = tmp_path / f"cut{cut}" / "t-0"
        shutil.copytree(pristine, work)
        os.truncate(work / name, info.position + cut)
        recovered = reopen(work)
        assert_prefix(recovered, info.base_offset)
        recovered.abandon()
        shutil.rmtree(work.parent)


@pytest.mark.parametrize("garbage", [b"\0" * 100, b"\0" * 7, b"\xff" * 70, bytes(range(256)) * 3])
def test_garbage_after_the_last_batch_is_cut(tmp_path, garbage):
    log = build_log(tmp_path / "t-0")
    end = log.log_end_offset
    with open(log.active.log_path, "ab") as f:
        f.write(garbage)
    assert_prefix(reopen(tmp_path / "t-0"), end)


def test_random_garbage_after_the_last_batch_is_cut(tmp_path):
    rng = random.Random(5)
    current = build_log(tmp_path / "t-0")
    end = current.log_end_offset
    for i in range(20):
        with open(current.active.log_path, "ab") as f:
            f.write(rng.randbytes(rng.randrange(1, 300)))
        current.abandon()
        current = reopen(tmp_path / "t-0")
        assert_prefix(current, end + i)  # appends one batch


def test_bit_flip_in_the_last_batch_drops_it(tmp_path):
    source = tmp_path / "src" / "t-0"
    log = build_log(source)
    segment, info = last_batch(log)
    data = open(segment.log_path, "rb").read()
    name = os.path.basename(segment.log_path)
    # base offset (0..8) and partition leader epoch (12..16) are outside the CRC, as in Kafka's format
    for at in [*range(8, 12), *range(16, info.size)]:
        work = tmp_path / "work" / "t-0"
        shutil.copytree(source, work)
        flipped = bytearray(data)
        flipped[info.position + at] ^= 1 << (at % 8)
        (work / name).write_bytes(bytes(flipped))
        recovered = reopen(work)
        assert recovered.log_end_offset == info.base_offset, f"flip at byte {at}"
        assert [o for o, _ in read_all(recovered)] == list(range(info.base_offset))
        recovered.abandon()
        shutil.rmtree(work.parent)


def test_corrupt_middle_segment_deletes_everything_after_it(tmp_path):
    log = build_log(tmp_path / "t-0", batches=60)
    victim = log.segments[2]
    info = victim.find_batch(victim.base_offset + 4)
    with open(victim.log_path, "r+b") as f:
        f.seek(info.position + 40)
        f.write(b"\xde\xad")
    recovered = reopen(tmp_path / "t-0")
    assert len(recovered.segments) == 3
    assert_prefix(recovered, info.base_offset)
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".log") and int(n[:20]) > victim.base_offset]


def test_corrupt_flushed_segment_before_the_recovery_point_keeps_later_segments(tmp_path):
    log = build_log(tmp_path / "t-0", batches=60)
    end = log.log_end_offset
    victim = log.segments[1]
    with open(victim.log_path, "r+b") as f:
        f.seek(victim.size - 10)
        f.write(b"\x00")
    os.unlink(victim.offset_index.path)  # the sanity check notices, and the segment is recovered
    recovered = reopen(tmp_path / "t-0", recovery_point=log.segments[-1].base_offset)
    assert recovered.log_end_offset == end
    assert len(recovered.segments) == len(log.segments)


def test_unclean_open_recovers_only_from_the_recovery_point(tmp_path, monkeypatch):
    log = build_log(tmp_path / "t-0", batches=60)
    end = log.log_end_offset
    recovery_point = log.segments[-2].base_offset + 1
    recovered_bases = []
    original = segment_module.LogSegment.recover

    def spy(self, *args, **kwargs):
        recovered_bases.append(self.base_offset)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(segment_module.LogSegment, "recover", spy)
    reopened = reopen(tmp_path / "t-0", recovery_point=recovery_point)
    assert recovered_bases == [s.base_offset for s in log.segments[-2:]]
    assert reopened.log_end_offset == end and reopened.recovery_point == end
    reopened.close()
    recovered_bases.clear()
    clean = reopen(tmp_path / "t-0", clean_shutdown=True)
    assert recovered_bases == [] and clean.log_end_offset == end


@pytest.mark.parametrize("damage", ["odd_size", "garbage", "past_end", "missing", "non_monotonic"])
@pytest.mark.parametrize("index_suffix", [".index", ".timeindex"])
def test_corrupt_index_is_rebuilt(tmp_path, damage, index_suffix):
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=4000, index_interval_bytes=100))
    for i in range(60):
        log.append_as_leader(memoryview(make_batch(2, ts=NOW + i, tag=i)), now_ms=NOW)
    log.high_watermark = end = log.log_end_offset
    expected = read_all(log)
    log.close()
    segment = sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(index_suffix))[0]
    path = tmp_path / "t-0" / segment
    data = path.read_bytes()
    assert len(data) >= 24
    entry = 8 if index_suffix == ".index" else 12
    if damage == "odd_size":
        path.write_bytes(data + b"\x01")
    elif damage == "garbage":
        path.write_bytes(data[:entry] + b"\x7f" * (len(data) - entry))
    elif damage == "past_end":
        path.write_bytes(data + (b"\x00\x00\x01\x00\x00\x10\x00\x00" if entry == 8 else b"\x7f" + b"\x00" * 8 + b"\x01\x00\x00"))
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(data[entry:2 * entry] + data[:entry] + data[2 * entry:])
    reopened = reopen(tmp_path / "t-0", config=small_config(segment_bytes=4000, index_interval_bytes=100),
                      clean_shutdown=True)
    assert reopened.log_end_offset == end
    assert read_all(reopened) == expected
    for offset in range(end):
        region = reopened.read(offset, 1)
        assert region is not None
    for i in range(0, 60, 7):
        assert reopened.offset_for_timestamp(NOW + i) == (2 * i, NOW + i)
    assert reopened.max_timestamp() == (118, NOW + 59)
    assert path.read_bytes() == data  # rebuilt exactly as appends had written it


def test_leftover_files_are_handled(tmp_path):
    log = build_log(tmp_path / "t-0", batches=30)
    end = log.log_end_offset
    directory = tmp_path / "t-0"
    (directory / "00000000000000000003.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000003.index.deleted").write_bytes(b"old")
    (directory / "00000000000000099999.log.cleaned").write_bytes(b"partial")
    (directory / "00000000000000088888.index").write_bytes(b"\0" * 8)
    (directory / "00000000000000000000.snapshot.tmp").write_bytes(b"partial")
    reopened = reopen(directory)
    assert_prefix(reopened, end)
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".tmp")) or n.startswith("000000000000000888")]


def test_swap_segment_replaces_the_segments_it_covers(tmp_path):
    log = build_log(tmp_path / "t-0", batches=40)
    end = log.log_end_offset
    bases = [s.base_offset for s in log.segments]
    directory = tmp_path / "t-0"
    # a "cleaned" copy of the first two segments, as a cleaner would leave it before the final rename
    first, second = log.segments[0], log.segments[1]
    merged = open(first.log_path, "rb").read() + open(second.log_path, "rb").read()
    (directory / f"{bases[0]:020d}.log.swap").write_bytes(merged)
    (directory / f"{bases[0]:020d}.index.swap").write_bytes(b"junk")
    reopened = reopen(directory)
    assert [s.base_offset for s in reopened.segments] == [bases[0], *bases[2:]]
    assert_prefix(reopened, end)


def test_empty_segment_keeps_its_base_offset_as_log_end(tmp_path):
    log = build_log(tmp_path / "t-0", batches=30)
    end = log.log_end_offset
    log.roll(NOW)
    log.close()
    reopened = reopen(tmp_path / "t-0")
    assert reopened.log_end_offset == end and reopened.segments[-1].base_offset == end
    os.truncate(reopened.segments[-1].log_path, 0)
    assert_prefix(reopen(tmp_path / "t-0"), end)


def test_all_segments_missing_starts_at_log_start_offset(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    log = reopen(directory, log_start_offset=500)
    assert log.log_start_offset == log.log_end_offset == 500
    assert log.append_as_leader(memoryview(make_batch()), now_ms=NOW).first_offset == 500


def test_producer_state_survives_unclean_shutdown(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    for seq in range(0, 60, 2):
        log.append_as_leader(memoryview(make_batch(2, pid=9, epoch=3, seq=seq)), now_ms=NOW)
    last = log.append_as_leader(memoryview(make_batch(2, pid=9, epoch=3, seq=60)), now_ms=NOW)
    # crash: no close, no snapshot at the end; a snapshot exists from the last roll
    assert any(n.endswith(".snapshot") for n in os.listdir(tmp_path / "t-0"))
    reopened = reopen(tmp_path / "t-0")
    again = reopened.append_as_leader(memoryview(make_batch(2, pid=9, epoch=3, seq=60)), now_ms=NOW)
    assert (again.first_offset, again.last_offset) == (last.first_offset, last.last_offset)
    assert reopened.log_end_offset == last.last_offset + 1
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith(".snapshot"):
            (tmp_path / "t-0" / name).write_bytes(b"corrupt")
    rebuilt = reopen(tmp_path / "t-0")
    again = rebuilt.append_as_leader(memoryview(make_batch(2, pid=9, epoch=3, seq=60)), now_ms=NOW)
    assert again.first_offset == last.first_offset


# ---- kill -9 while appending

WRITER = textwrap.dedent("""
    import sys, time
    from odradek.protocol.records import build_batch
    from odradek.storage.log_config import LogConfig
    from odradek.storage.log_manager import LogManager

    data_dir, first_tag, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    import random
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256, file_delete_delay_ms=0)
    manager = LogManager([data_dir], default_config=config, checkpoint_interval_ms=0)
    manager.load(lambda topic: config, now_ms=0)
    log = manager.get("t", 0) or manager.create("t", 0, config, b"\\x01" * 16, now_ms=0)
    print("ready", flush=True)
    tag = first_tag
    now = 1_700_000_000_000
    while True:
        records = [(b"k", b"%d-%d" % (tag, i) + b"x" * rng.randrange(0, 300)) for i in range(rng.randrange(1, 8))]
        info = log.append_as_leader(memoryview(build_batch(records, timestamp_ms=now)), now_ms=now)
        log.high_watermark = log.log_end_offset
        print(info.first_offset, info.last_offset, tag, len(records), "ok", flush=True)
        tag += 1
        if tag % 17 == 0:
            manager.maintain(now)
""")


def _record_ack(acked: dict, line: bytes) -> None:
    """Only complete lines are acknowledgements: the kill may cut the last one short."""
    fields = line.split()
    if line.endswith(b"\n") and len(fields) == 5 and fields[4] == b"ok":
        first, last, tag, count = map(int, fields[:4])
        acked[tag] = (first, last, count)
    else:
        print(f"ignoring torn acknowledgement {line!r}")


def _kill_seeds():
    override = os.environ.get("STORAGE_KILL_SEED")
    return [int(override)] if override else list(range(10))


@pytest.mark.parametrize("seed", _kill_seeds())
def test_kill_9_while_appending_loses_no_acknowledged_batch(tmp_path, seed):
    """Replay one failing seed with STORAGE_KILL_SEED=<seed>."""
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    acked: dict[int, tuple[int, int, int]] = {}  # tag -> (first, last, count)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for round_ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(data_dir), str(round_ * 1_000_000), str(seed)],
                                stdout=subprocess.PIPE, env=env)
        assert proc.stdout.readline().strip() == b"ready", f"seed {seed}"
        deadline = time.monotonic() + rng.uniform(0.01, 0.25)
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            _record_ack(acked, line)
        os.kill(proc.pid, signal.SIGKILL)
        for line in proc.stdout:  # acknowledged before the kill landed
            _record_ack(acked, line)
        proc.wait()
        proc.stdout.close()
    assert acked, f"seed {seed}: nothing was acknowledged"
    from odradek.storage.log_manager import LogManager

    config = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    manager = LogManager([str(data_dir)], default_config=config)
    manager.load(lambda topic: config, now_ms=0)
    log = manager.get("t", 0)
    log.high_watermark = log.log_end_offset
    records = read_all(log)
    offsets = [o for o, _ in records]
    assert offsets == list(range(len(offsets))), f"seed {seed}: offsets not contiguous"
    by_offset = dict(records)
    tags = [int(value.split(b"-")[0]) for _, value in records]
    assert tags == sorted(tags), f"seed {seed}: batches reordered"
    for tag, (first, last, count) in acked.items():
        assert last - first + 1 == count
        for i, offset in enumerate(range(first, last + 1)):
            assert by_offset[offset].startswith(b"%d-%d" % (tag, i)), f"seed {seed}: tag {tag} offset {offset}"
    assert len(set(tags)) == len({int(v.split(b"-")[0]) for v in by_offset.values()})
    end = log.log_end_offset
    assert log.append_as_leader(memoryview(make_batch()), now_ms=NOW).first_offset == end
    manager.close()
