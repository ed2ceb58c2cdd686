"""Consumer lag's record timestamps: the first data record at or after a committed offset."""

from odradek.metrics.lag import first_record_timestamp
from odradek.protocol.records import build_batch
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

NOW = 1_700_000_000_000


def append(log, timestamps, **batch):
    records = [(b"k", b"v%d" % i) for i in range(len(timestamps))]
    info = log.append_as_leader(memoryview(build_batch(records, timestamps=timestamps, **batch)), now_ms=NOW)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def test_timestamp_of_the_record_at_the_committed_offset(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), now_ms=NOW)
    append(log, [NOW - 300, NOW - 200, NOW - 100])  # offsets 0-2
    append(log, [NOW - 50])  # offset 3
    assert first_record_timestamp(log, 0, log.high_watermark) == NOW - 300
    assert first_record_timestamp(log, 2, log.high_watermark) == NOW - 100  # inside a batch
    assert first_record_timestamp(log, 3, log.high_watermark) == NOW - 50
    assert first_record_timestamp(log, 4, log.high_watermark) is None  # caught up
    assert first_record_timestamp(log, 1, 1) is None  # nothing below the end


def test_transaction_markers_are_skipped(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), now_ms=NOW)
    append(log, [NOW - 90], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = log.append_marker(True, producer_id=7, producer_epoch=0, coordinator_epoch=0, now_ms=NOW - 80)
    append(log, [NOW - 10])
    log.high_watermark = log.log_end_offset
    assert first_record_timestamp(log, marker.first_offset, log.high_watermark) == NOW - 10


def test_log_append_time_topics_use_the_append_time(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"), now_ms=NOW)
    append(log, [5, 6])
    assert first_record_timestamp(log, 1, log.high_watermark) == NOW
