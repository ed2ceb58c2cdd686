"""PartitionLog: appends, reads, offset look-ups, rolls, retention, DeleteRecords, idempotence, truncation."""

import os

import pytest

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import LOG_APPEND_TIME, build_batch, decode_batches
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

NOW = 1_700_000_000_000


def make_batch(count=1, *, ts=NOW, value_size=20, tag=0, pid=-1, epoch=-1, seq=-1, codec=0, timestamps=None,
               key=b"k") -> bytes:
    recs = [(key, (b"%d-%d:" % (tag, i)).ljust(value_size, b"x")) for i in range(count)]
    return build_batch(recs, timestamp_ms=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       compression=codec, timestamps=timestamps)


def open_log(directory, config=None, now_ms=NOW, **kwargs) -> PartitionLog:
    return PartitionLog(str(directory), config or LogConfig(), now_ms=now_ms, **kwargs)


def region_batches(region):
    """Decode every batch a FileRegion covers; asserts the region is whole batches."""
    data = os.pread(region.fd, region.size, region.position)
    assert len(data) == region.size
    decoded = list(decode_batches(data))
    assert sum(info.size for info, _ in decoded) == region.size, "region must hold whole batches"
    return decoded


def read_all(log, start=None) -> list:
    """(offset, value) of every record from `start` to the high watermark, by repeated reads."""
    out = []
    offset = log.log_start_offset if start is None else start
    while True:
        region = log.read(offset, 1 << 20)
        if region is None:
            return out
        for info, recs in region_batches(region):
            out += [(r.offset, r.value) for r in recs if r.offset >= offset]
            offset = info.last_offset + 1


def small_config(**overrides) -> LogConfig:
    values = dict(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0)
    values.update(overrides)
    return LogConfig(**values)


def fill(log, batches, *, count=1, now=NOW, value_size=20):
    infos = []
    for i in range(batches):
        infos.append(log.append_as_leader(memoryview(make_batch(count, tag=i, value_size=value_size)), now_ms=now))
    log.high_watermark = log.log_end_offset
    return infos


def test_appends_get_contiguous_offsets_and_read_back_across_segments(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    infos = fill(log, 200, count=3)
    assert [i.first_offset for i in infos] == list(range(0, 600, 3))
    assert [i.last_offset for i in infos] == list(range(2, 600, 3))
    assert all(i.log_append_time_ms == -1 and i.record_count == 3 for i in infos)
    assert len(log.segments) > 10
    records = read_all(log)
    assert [o for o, _ in records] == list(range(600))
    assert records[5][1].startswith(b"1-2:")
    assert log.size_in_bytes() == sum(os.path.getsize(s.log_path) for s in log.segments)


def test_read_at_every_offset_returns_the_batch_holding_it(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 60, count=4)
    for offset in range(log.log_end_offset):
        region = log.read(offset, 1)  # min_one_batch: exactly the holding batch
        (info, recs), = region_batches(region)
        assert info.base_offset <= offset <= info.last_offset
    assert log.read(log.log_end_offset, 1000) is None


def test_read_out_of_range_raises(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 3)
    with pytest.raises(KafkaError) as exc:
        log.read(4, 100)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.delete_records_before(2)
    with pytest.raises(KafkaError) as exc:
        log.read(1, 100)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_read_respects_max_bytes_with_whole_batches(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=200))
    fill(log, 100, value_size=40)
    size = log.segments[0].find_batch(0).size
    for max_bytes in (1, size - 1, size, size + 1, 3 * size + 5, 10 * size, 57 * size - 1):
        region = log.read(0, max_bytes)
        batches = region_batches(region)
        assert region.size <= max(max_bytes, size)
        assert len(batches) == max(1, max_bytes // size)
    assert log.read(0, size - 1, min_one_batch=False) is None
    assert len(region_batches(log.read(7, 2 * size, min_one_batch=False))) == 2


def test_read_stays_below_max_offset_and_high_watermark(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig())
    fill(log, 10, count=2)
    region = log.read(0, 1 << 20, max_offset=6)
    assert [info.base_offset for info, _ in region_batches(region)] == [0, 2, 4]
    assert log.read(6, 1 << 20, max_offset=6) is None
    log.high_watermark = 8
    assert [info.base_offset for info, _ in region_batches(log.read(3, 1 << 20))] == [2, 4, 6]
    assert log.read(8, 1 << 20) is None
    assert log.read(8, 1 << 20, max_offset=log.log_end_offset) is not None


def test_read_stays_within_one_segment(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 40)
    region = log.read(0, 1 << 20)
    last = region_batches(region)[-1][0].last_offset
    assert last + 1 == log.segments[1].base_offset


def test_roll_by_size_keeps_segments_under_segment_bytes(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 100)
    assert all(s.size <= 1024 for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted({s.base_offset for s in log.segments})
    for previous, segment in zip(log.segments, log.segments[1:], strict=False):
        assert previous.next_offset == segment.base_offset


def test_roll_by_time_on_append_and_in_maintain(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    log.append_as_leader(memoryview(make_batch(ts=NOW)), now_ms=NOW)
    log.append_as_leader(memoryview(make_batch(ts=NOW + 500)), now_ms=NOW + 500)
    assert len(log.segments) == 1
    log.append_as_leader(memoryview(make_batch(ts=NOW + 1001)), now_ms=NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.maintain(NOW + 1500)
    assert len(log.segments) == 2  # the active segment was created at NOW + 1001
    log.maintain(NOW + 2002)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.maintain(NOW + 9000)
    assert len(log.segments) == 3  # an empty active segment is never rolled


def test_batch_larger_than_segment_is_rejected_and_large_ones_get_own_segment(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(memoryview(make_batch(value_size=2000)), now_ms=NOW)
    assert exc.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    fill(log, 2)
    log.append_as_leader(memoryview(make_batch(value_size=900)), now_ms=NOW)
    assert log.segments[-1].base_offset == 2 and log.log_end_offset == 3


def test_validation_errors(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=500))
    two = make_batch() + make_batch()
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(memoryview(two), now_ms=NOW)
    assert exc.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(memoryview(make_batch(value_size=600)), now_ms=NOW)
    assert exc.value.code == ErrorCode.MESSAGE_TOO_LARGE
    corrupt = bytearray(make_batch())
    corrupt[-1] ^= 1
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(memoryview(corrupt), now_ms=NOW)
    assert exc.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.size_in_bytes() == 0


def test_timestamp_bounds(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000))
    log.append_as_leader(memoryview(make_batch(ts=NOW + 3_600_000)), now_ms=NOW)
    for ts in (NOW + 3_600_001, NOW - 1001):
        with pytest.raises(KafkaError) as exc:
            log.append_as_leader(memoryview(make_batch(ts=ts)), now_ms=NOW)
        assert exc.value.code == ErrorCode.INVALID_TIMESTAMP
    log.append_as_leader(memoryview(make_batch(ts=-1)), now_ms=NOW)  # no timestamp: not checked
    assert log.log_end_offset == 2


def test_log_append_time(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(memoryview(make_batch(3, ts=5)), now_ms=NOW)
    assert info.log_append_time_ms == NOW
    log.high_watermark = log.log_end_offset
    (batch, recs), = region_batches(log.read(0, 1000))
    assert batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == NOW
    assert [r.timestamp for r in recs] == [NOW] * 3
    assert log.offset_for_timestamp(NOW) == (0, NOW)
    assert log.max_timestamp() == (0, NOW)


@pytest.mark.parametrize("topic_codec", ["gzip", "zstd", "uncompressed", "lz4", "snappy"])
def test_topic_compression_type_recompresses(tmp_path, topic_codec):
    log = open_log(tmp_path / "t-0", LogConfig(compression_type=topic_codec))
    source = compression.SNAPPY if topic_codec != "snappy" else compression.NONE
    batch = make_batch(5, codec=source, pid=7, epoch=1, seq=0, timestamps=[NOW + i for i in range(5)])
    log.append_as_leader(memoryview(batch), now_ms=NOW, leader_epoch=3)
    log.append_as_leader(memoryview(make_batch(2, codec=source, pid=7, epoch=1, seq=5)), now_ms=NOW)
    log.high_watermark = log.log_end_offset
    (first, recs), (second, _) = region_batches(log.read(0, 10000))
    assert first.compression == compression.TOPIC_COMPRESSION_TYPES[topic_codec]
    assert (first.base_offset, second.base_offset) == (0, 5)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 1, 0)
    assert first.partition_leader_epoch == 3
    assert [r.timestamp for r in recs] == [NOW + i for i in range(5)]
    assert [r.value[:4] for r in recs] == [b"0-%d:" % i for i in range(5)]


def test_producer_compression_is_kept(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig())
    batch = make_batch(5, codec=compression.GZIP)
    log.append_as_leader(memoryview(batch), now_ms=NOW)
    log.high_watermark = 5
    region = log.read(0, 10000)
    stored = os.pread(region.fd, region.size, region.position)
    assert stored[61:] == batch[61:]  # records untouched: only offsets/epoch changed, outside the CRC


def test_idempotent_duplicate_returns_original_offsets_without_writing(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig())
    fill(log, 2)
    first = log.append_as_leader(memoryview(make_batch(3, pid=42, epoch=0, seq=0)), now_ms=NOW)
    log.append_as_leader(memoryview(make_batch(2, pid=42, epoch=0, seq=3)), now_ms=NOW)
    size = log.size_in_bytes()
    again = log.append_as_leader(memoryview(make_batch(3, pid=42, epoch=0, seq=0)), now_ms=NOW)
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (2, 4)
    assert log.size_in_bytes() == size and log.log_end_offset == 7
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(memoryview(make_batch(1, pid=42, epoch=0, seq=9)), now_ms=NOW)
    assert exc.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()
    reopened = open_log(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    again = reopened.append_as_leader(memoryview(make_batch(2, pid=42, epoch=0, seq=3)), now_ms=NOW)
    assert (again.first_offset, again.last_offset) == (5, 6)


def test_offset_for_timestamp_finds_first_record_at_or_after(tmp_path):
    log = open_log(tmp_path / "t-0", small_config(index_interval_bytes=64))
    for i in range(100):
        stamps = [NOW + 10 * i, NOW + 10 * i + 5, NOW + 10 * i + 3]
        log.append_as_leader(memoryview(make_batch(3, timestamps=stamps, tag=i)), now_ms=NOW)
    log.high_watermark = log.log_end_offset
    assert log.offset_for_timestamp(0) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 1) == (1, NOW + 5)
    assert log.offset_for_timestamp(NOW + 5) == (1, NOW + 5)
    assert log.offset_for_timestamp(NOW + 6) == (3, NOW + 10)
    assert log.offset_for_timestamp(NOW + 504) == (151, NOW + 505)
    assert log.offset_for_timestamp(NOW + 995) == (298, NOW + 995)
    assert log.offset_for_timestamp(NOW + 996) is None
    log.delete_records_before(152)
    assert log.offset_for_timestamp(NOW + 504) == (153, NOW + 510)  # 152 is older
    assert log.offset_for_timestamp(NOW + 503) == (152, NOW + 503)
    assert log.offset_for_timestamp(0)[0] == 152


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path):
    log = open_log(tmp_path / "t-0", small_config(index_interval_bytes=0))
    for i, ts in enumerate([50, 10, 70, 20, 90, 30, 60]):
        log.append_as_leader(memoryview(make_batch(ts=NOW + ts, tag=i)), now_ms=NOW)
    assert log.offset_for_timestamp(NOW + 55) == (2, NOW + 70)
    assert log.offset_for_timestamp(NOW + 80) == (4, NOW + 90)
    assert log.offset_for_timestamp(NOW + 15) == (0, NOW + 50)
    assert log.max_timestamp() == (4, NOW + 90)


def test_max_timestamp_is_first_record_with_it(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    assert log.max_timestamp() == (-1, -1)
    fill(log, 30)
    log.append_as_leader(memoryview(make_batch(4, timestamps=[NOW, NOW + 9, NOW + 3, NOW + 9])), now_ms=NOW)
    fill(log, 30)
    assert log.max_timestamp() == (31, NOW + 9)
    log.close()
    reopened = open_log(tmp_path / "t-0", small_config(), clean_shutdown=True)
    assert reopened.max_timestamp() == (31, NOW + 9)


def test_delete_records_before_moves_start_and_drops_whole_segments(tmp_path):
    log = open_log(tmp_path / "t-0", small_config(file_delete_delay_ms=1000))
    fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    with pytest.raises(KafkaError) as exc:
        log.delete_records_before(101)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    target = bases[3] + 2
    region = log.read(bases[1], 1 << 20)  # a reader holds a region of a segment about to go
    assert log.delete_records_before(target) == target
    assert log.log_start_offset == target
    assert log.segments[0].base_offset == bases[3]
    assert [o for o, _ in read_all(log)] == list(range(target, 100))
    # the deleted segments' files are renamed, still readable through the region's descriptor
    names = os.listdir(tmp_path / "t-0")
    assert sum(name.endswith(".log.deleted") for name in names) == 3
    assert region_batches(region)
    log.maintain(NOW)
    log.maintain(NOW + 999)
    assert sum(name.endswith(".deleted") for name in os.listdir(tmp_path / "t-0")) == 9
    log.maintain(NOW + 1000)
    assert not [name for name in os.listdir(tmp_path / "t-0") if name.endswith(".deleted")]
    assert log.delete_records_before(5) == target  # never moves back


def test_delete_records_up_to_log_end(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 50)
    assert log.delete_records_before(50) == 50
    assert log.read(50, 100) is None
    fill(log, 1)
    assert [o for o, _ in read_all(log)] == [50]
    log.close()
    reopened = open_log(tmp_path / "t-0", small_config(), clean_shutdown=True, log_start_offset=50)
    assert reopened.log_start_offset == 50 and reopened.log_end_offset == 51


def test_retention_by_time_and_size(tmp_path):
    log = open_log(tmp_path / "t-0", small_config(retention_ms=1000))
    for i in range(40):
        log.append_as_leader(memoryview(make_batch(ts=NOW + i * 100, tag=i)), now_ms=NOW + i * 100)
    log.high_watermark = log.log_end_offset
    segments = len(log.segments)
    log.maintain(NOW + 2500)
    assert len(log.segments) < segments
    assert all(s.max_timestamp >= NOW + 1500 for s in log.segments)
    assert log.log_start_offset == log.segments[0].base_offset > 0
    log.maintain(NOW + 100_000)  # everything expired: the log rolls and keeps an empty active segment
    assert log.log_start_offset == log.log_end_offset == 40 and log.size_in_bytes() == 0
    log.update_config(small_config(retention_ms=-1, retention_bytes=2000))
    fill(log, 60)
    log.maintain(NOW)
    assert log.size_in_bytes() <= 2000 + 1024
    assert [o for o, _ in read_all(log)][-1] == 99


def test_retention_never_passes_the_high_watermark(tmp_path):
    log = open_log(tmp_path / "t-0", small_config(retention_ms=0))
    fill(log, 40)
    log.high_watermark = 3
    log.maintain(NOW + 10_000)
    assert log.log_start_offset <= 3
    assert [o for o, _ in read_all(log)] == list(range(log.log_start_offset, 3))


def test_truncate_to_removes_the_tail(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 60, count=2)
    middle = log.segments[2].base_offset + 2
    log.truncate_to(middle)
    assert log.log_end_offset == middle and log.high_watermark == middle
    info = log.append_as_leader(memoryview(make_batch(tag=99)), now_ms=NOW)
    assert info.first_offset == middle
    log.high_watermark = log.log_end_offset
    assert [o for o, _ in read_all(log)] == list(range(middle + 1))
    base = log.segments[1].base_offset
    log.truncate_to(base)
    assert log.log_end_offset == base and log.segments[-1].base_offset < base
    log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1 and log.size_in_bytes() == 0
    fill(log, 3)
    assert [o for o, _ in read_all(log)] == [0, 1, 2]


def test_flush_messages_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(flush_messages=3))
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 3
    log.update_config(LogConfig(flush_ms=1000))
    fill(log, 1)
    log.maintain(NOW + 500)
    assert log.recovery_point == 3
    log.maintain(NOW + 1000)
    assert log.recovery_point == 4


def test_high_watermark_is_clamped(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig())
    fill(log, 5)
    log.high_watermark = 100
    assert log.high_watermark == 5
    log.close()
    assert open_log(tmp_path / "t-0", clean_shutdown=True, high_watermark=9).high_watermark == 5
    assert open_log(tmp_path / "t-1", high_watermark=3).high_watermark == 0


def test_compacted_topic_requires_keys(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(cleanup_policy="compact"))
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(memoryview(make_batch(key=None)), now_ms=NOW)
    assert exc.value.code == ErrorCode.INVALID_RECORD
    log.append_as_leader(memoryview(make_batch()), now_ms=NOW)


def test_idle_producer_ids_expire_in_maintain(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(memoryview(make_batch(pid=5, epoch=0, seq=0)), now_ms=NOW)
    log.maintain(NOW + 86_400_000 - 1)
    assert log.producer_state.entry(5) is not None
    log.maintain(NOW + 86_400_000)
    assert log.producer_state.entry(5) is None
    # an unknown producer is accepted at any sequence
    assert log.append_as_leader(memoryview(make_batch(pid=5, epoch=0, seq=9)), now_ms=NOW).first_offset == 1


def test_update_config_applies_without_restart(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig())
    fill(log, 20)
    assert len(log.segments) == 1
    log.update_config(small_config())
    fill(log, 20)
    assert len(log.segments) > 1
    log.update_config(LogConfig(message_timestamp_type="LogAppendTime"))
    assert log.append_as_leader(memoryview(make_batch()), now_ms=NOW + 5).log_append_time_ms == NOW + 5


def test_failed_segment_refuses_appends_and_rolls(tmp_path):
    log = open_log(tmp_path / "t-0", small_config())
    fill(log, 3)
    log.active.failed = True  # as after a write that could not be cut back
    for _ in range(2):
        with pytest.raises(KafkaError) as exc:
            log.append_as_leader(memoryview(make_batch(value_size=900)), now_ms=NOW)
        assert exc.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(log.segments) == 1
