"""LogSegment: one write per append, header-only reads, recovery of the valid prefix, truncation."""

import os

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import assign_offsets, build_batch, read_batch_info
from odradek.storage.segment import LogSegment

NOW = 1_700_000_000_000


def append(segment, offset, count=2, ts=NOW, value_size=30, interval=100):
    buf = bytearray(build_batch([(b"k", b"v" * value_size)] * count, timestamp_ms=ts))
    info = read_batch_info(buf)
    next_offset = assign_offsets(buf, [info], offset)
    segment.append(buf, [(0, len(buf), next_offset - 1, info.max_timestamp)], interval)
    return next_offset


def filled(tmp_path, batches=30, base=1000):
    segment = LogSegment.create(str(tmp_path), base, index_bytes=1 << 20, now_ms=NOW)
    offset = base
    for i in range(batches):
        offset = append(segment, offset, ts=NOW + i)
    return segment, offset


def test_append_tracks_size_offsets_timestamps_and_indexes(tmp_path):
    segment, end = filled(tmp_path)
    assert segment.next_offset == end == 1060
    assert segment.size == os.path.getsize(segment.log_path)
    assert segment.max_timestamp == NOW + 29 and segment.offset_of_max_timestamp == 1059
    assert len(segment.offset_index) > 5
    for offset, position in zip(segment.offset_index.offsets, segment.offset_index.positions, strict=True):
        assert segment.header_at(position).last_offset == offset
    assert segment.first_batch_timestamp == NOW


def test_find_batch_and_read(tmp_path):
    segment, end = filled(tmp_path)
    for offset in range(1000, end):
        info = segment.find_batch(offset)
        assert info.base_offset <= offset <= info.last_offset
    assert segment.find_batch(end) is None
    batch = segment.find_batch(1000).size
    region = segment.read(1003, 3 * batch + 1, max_offset=10**9, min_one_batch=True)
    assert (region.position, region.size) == (batch, 3 * batch)
    assert segment.read(1000, 1, max_offset=10**9, min_one_batch=False) is None
    assert segment.read(1000, 1, max_offset=10**9, min_one_batch=True).size == batch
    assert segment.read(1000, 10**9, max_offset=1006, min_one_batch=True).size == 3 * batch
    assert segment.read(1000, 10**9, max_offset=1005, min_one_batch=True).size == 2 * batch
    assert segment.read(1004, 10**9, max_offset=1005, min_one_batch=True) is None


def test_find_first_batch_with_timestamp(tmp_path):
    segment, _ = filled(tmp_path)
    assert segment.find_first_batch_with_timestamp(NOW + 17).base_offset == 1034
    assert segment.find_first_batch_with_timestamp(0).base_offset == 1000
    assert segment.find_first_batch_with_timestamp(NOW + 30) is None


def test_recover_truncates_a_torn_tail_and_rebuilds_indexes(tmp_path):
    segment, end = filled(tmp_path)
    offsets, positions = list(segment.offset_index.offsets), list(segment.offset_index.positions)
    timestamps = list(segment.time_index.timestamps)
    size = segment.size
    with open(segment.log_path, "ab") as f:
        f.write(build_batch([(b"k", b"torn")])[:40])
    seen = []
    assert segment.recover(100, on_batch=seen.append) == 40
    assert segment.size == size == os.path.getsize(segment.log_path)
    assert segment.next_offset == end
    assert [i.base_offset for i in seen] == list(range(1000, end, 2))
    assert list(segment.offset_index.offsets) == offsets and list(segment.offset_index.positions) == positions
    rebuilt = list(segment.time_index.timestamps)
    assert rebuilt[: len(timestamps)] == timestamps and rebuilt[-1] == NOW + 29  # plus the final entry
    assert append(segment, end) == end + 2


def test_recover_stops_at_offsets_going_backwards(tmp_path):
    segment, end = filled(tmp_path, batches=5)
    size = segment.size
    append(segment, 1002)  # offsets already used: not a valid continuation
    written = os.path.getsize(segment.log_path)
    assert segment.recover(100) == written - size
    assert segment.next_offset == end and segment.size == size


def test_load_of_a_clean_segment_uses_indexes_and_headers(tmp_path):
    segment, end = filled(tmp_path)
    segment.on_become_inactive()
    segment.flush()
    segment.close()
    reopened = LogSegment(str(tmp_path), 1000, index_bytes=1 << 20, now_ms=NOW)
    reopened.load()
    assert reopened.next_offset == end
    assert (reopened.max_timestamp, reopened.offset_of_max_timestamp) == (NOW + 29, 1059)


def test_truncate_to(tmp_path):
    segment, end = filled(tmp_path)
    removed = segment.truncate_to(1031)  # inside the batch 1030..1031: the whole batch goes
    assert removed > 0
    assert segment.next_offset == 1030 and segment.max_timestamp == NOW + 14
    assert segment.size == os.path.getsize(segment.log_path)
    assert all(o < 1030 for o in segment.offset_index.offsets)
    assert all(o < 1030 for o in segment.time_index.offsets)
    assert append(segment, 1030) == 1032
    assert segment.truncate_to(1000) > 0 and segment.size == 0
    assert segment.next_offset == 1000 and segment.max_timestamp == -1


def test_mark_deleted_keeps_the_descriptor_readable(tmp_path):
    segment, _ = filled(tmp_path, batches=3)
    region = segment.read(1000, 10**6, max_offset=10**9, min_one_batch=True)
    segment.mark_deleted()
    assert sorted(os.listdir(tmp_path)) == ["00000000000000001000.index.deleted", "00000000000000001000.log.deleted",
                                            "00000000000000001000.timeindex.deleted"]
    assert len(os.pread(region.fd, region.size, region.position)) == region.size
    segment.delete_files()
    assert os.listdir(tmp_path) == []


def test_failed_write_is_cut_back(tmp_path, monkeypatch):
    segment, end = filled(tmp_path, batches=3)
    size = segment.size
    real_write = os.write

    def half_then_fail(fd, data):
        if fd != segment.fd:
            return real_write(fd, data)
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError):
        append(segment, end)
    monkeypatch.undo()
    assert os.path.getsize(segment.log_path) == segment.size == size and not segment.failed
    assert append(segment, end) == end + 2


def test_write_that_cannot_be_undone_stops_appends(tmp_path, monkeypatch):
    segment, end = filled(tmp_path, batches=3)

    def fail(*args):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "write", fail)
    monkeypatch.setattr(os, "ftruncate", fail)
    with pytest.raises(OSError):
        append(segment, end)
    monkeypatch.undo()
    assert segment.failed
    with pytest.raises(KafkaError) as exc:
        append(segment, end)
    assert exc.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_failed_index_write_does_not_fail_the_append(tmp_path, monkeypatch):
    segment, end = filled(tmp_path, batches=3)

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment.offset_index, "_write", fail)
    for _ in range(10):
        end = append(segment, end)
    monkeypatch.undo()
    assert segment.index_failed and segment.next_offset == end
    for offset in range(1000, end):
        assert segment.find_batch(offset).base_offset <= offset
