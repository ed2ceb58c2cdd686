"""OffsetIndex and TimeIndex: append, look-up, load-time sanity checks, truncation."""

import struct

from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex


def test_offset_index_lookup(tmp_path):
    index = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100)
    assert index.lookup(150) == (100, 0)
    for i in range(1, 11):
        index.append(100 + 10 * i, 1000 * i)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(155) == (150, 5000)
    assert index.lookup(10**9) == (200, 10000)
    assert index.lookup_by_position(5999) == (150, 5000)
    assert index.lookup_by_position(999) == (100, 0)
    index.append(150, 20000)  # not after the last entry: ignored
    assert len(index) == 10
    index.close()
    data = (tmp_path / "00000000000000000100.index").read_bytes()
    assert data[:8] == struct.pack(">ii", 10, 1000) and len(data) == 80


def test_offset_index_load_and_sanity(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(str(path), 0)
    for i in range(1, 6):
        index.append(i * 3, i * 100)
    index.close()
    loaded = OffsetIndex(str(path), 0)
    assert loaded.load(log_size=501) is None
    assert list(loaded.offsets) == [3, 6, 9, 12, 15]
    assert "past the log end" in OffsetIndex(str(path), 0).load(log_size=500)
    data = path.read_bytes()
    path.write_bytes(data + b"\0")
    assert "multiple" in OffsetIndex(str(path), 0).load(log_size=10**6)
    path.write_bytes(data[8:16] + data[:8])
    assert "not after" in OffsetIndex(str(path), 0).load(log_size=10**6)
    assert OffsetIndex(str(tmp_path / "missing.index"), 0).load(log_size=0) is None


def test_offset_index_truncate_and_rewrite(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(str(path), 0)
    for i in range(1, 6):
        index.append(i * 3, i * 100)
    index.truncate_to_position(300)
    assert list(index.positions) == [100, 200]
    assert len(path.read_bytes()) == 16
    index.append(7, 350)
    index.rewrite([(1, 10), (2, 20)])
    index.close()
    reloaded = OffsetIndex(str(path), 0)
    assert reloaded.load(log_size=100) is None
    assert list(reloaded.offsets) == [1, 2]


def test_offset_index_is_full(tmp_path):
    index = OffsetIndex(str(tmp_path / "x.index"), 0, max_index_size=24)
    for i in range(3):
        assert not index.is_full
        index.append(i, i)
    assert index.is_full


def test_time_index(tmp_path):
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(str(path), 50)
    assert index.last_entry() is None
    index.maybe_append(1000, 55)
    index.maybe_append(1000, 60)  # not larger: skipped
    index.maybe_append(900, 61)
    index.maybe_append(2000, 70)
    index.maybe_append(3000, 80)
    assert list(index.timestamps) == [1000, 2000, 3000]
    assert index.last_entry() == (3000, 80)
    assert index.lookup_below(1000) is None
    assert index.lookup_below(1001) == 55
    assert index.lookup_below(10**15) == 80
    index.close()
    assert path.read_bytes()[:12] == struct.pack(">qi", 1000, 5)
    loaded = TimeIndex(str(path), 50)
    assert loaded.load(next_offset=81) is None and loaded.last_entry() == (3000, 80)
    assert "past the segment end" in TimeIndex(str(path), 50).load(next_offset=80)
    loaded.truncate_to_offset(70)
    assert loaded.last_entry() == (1000, 55) and len(path.read_bytes()) == 12
    path.write_bytes(path.read_bytes() + b"\1")
    assert "multiple" in TimeIndex(str(path), 50).load(next_offset=100)
    path.write_bytes(struct.pack(">qiqi", 5, 1, 4, 2))
    assert "not after" in TimeIndex(str(path), 50).load(next_offset=100)
