"""LogManager: partitions across log dirs, checkpoints, clean and unclean restarts, deletion."""

import os

import pytest

from odradek.storage import checkpoint
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.test_log import NOW, fill, make_batch, read_all

TOPIC_ID = bytes(range(16))
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128, file_delete_delay_ms=1000)


def manager(dirs, **kwargs):
    m = LogManager([str(d) for d in dirs], default_config=CONFIG, **kwargs)
    m.load(lambda topic: CONFIG, now_ms=NOW)
    return m


def test_create_spreads_partitions_over_log_dirs(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = manager(dirs)
    logs = [m.create("t", p, CONFIG, TOPIC_ID) for p in range(6)]
    placed = [m.dir_of(log) for log in logs]
    assert sorted(placed) == sorted(str(d) for d in dirs for _ in range(2))
    assert m.create("t", 0, CONFIG, TOPIC_ID) is logs[0]
    assert m.get("t", 5) is logs[5] and m.get("t", 6) is None
    assert len(list(m.logs())) == 6
    assert (tmp_path / "a" / "t-0" / "partition.metadata").exists()
    assert checkpoint.read_partition_metadata(logs[0].directory) == TOPIC_ID
    fill(logs[0], 10)
    sizes = m.dir_sizes()
    assert sizes[m.dir_of(logs[0])][("t", 0)] == logs[0].size_in_bytes() > 0
    m.close()


def test_clean_restart_restores_offsets_without_recovery(tmp_path):
    m = manager([tmp_path])
    log = m.create("orders", 3, CONFIG, TOPIC_ID)
    fill(log, 50)
    log.delete_records_before(20)
    m.close()
    assert checkpoint.has_clean_shutdown_marker(str(tmp_path))
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n1\norders 3 50\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\norders 3 20\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\norders 3 50\n"
    m2 = manager([tmp_path])
    assert not checkpoint.has_clean_shutdown_marker(str(tmp_path))  # removed while running
    log = m2.get("orders", 3)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (20, 50, 50)
    assert log.topic_id == TOPIC_ID
    assert [o for o, _ in read_all(log)] == list(range(20, 50))
    m2.close()


def test_unclean_restart_recovers_torn_tail(tmp_path):
    m = manager([tmp_path])
    log = m.create("t", 0, CONFIG, TOPIC_ID)
    fill(log, 30)
    m.checkpoint()
    with open(log.active.log_path, "ab") as f:
        f.write(make_batch()[:30])
    # crash: no close; the lock dies with the process (closed here by hand)
    for fd in m._locks:
        os.close(fd)
    m2 = manager([tmp_path])
    log2 = m2.get("t", 0)
    assert log2.log_end_offset == 30 and log2.high_watermark == 30
    assert log2.append_as_leader(memoryview(make_batch()), now_ms=NOW).first_offset == 30
    m2.close()


def test_log_dir_is_locked(tmp_path):
    m = manager([tmp_path])
    with pytest.raises(RuntimeError, match="in use"):
        LogManager([str(tmp_path)], default_config=CONFIG)
    m.close()
    LogManager([str(tmp_path)], default_config=CONFIG).close()


def test_delete_renames_then_removes_after_delay(tmp_path):
    m = manager([tmp_path])
    log = m.create("gone", 0, CONFIG, TOPIC_ID)
    fill(log, 5)
    region = log.read(0, 1 << 20)
    m.delete("gone", 0)
    assert m.get("gone", 0) is None
    renamed = [n for n in os.listdir(tmp_path) if n.startswith("gone-0.") and n.endswith("-delete")]
    assert len(renamed) == 1 and len(renamed[0]) == len("gone-0.") + 32 + len("-delete")
    assert len(os.pread(region.fd, region.size, region.position)) == region.size  # still sendable
    m.maintain(NOW)
    m.maintain(NOW + 999)
    assert os.path.exists(tmp_path / renamed[0])
    m.maintain(NOW + 1000)
    assert not os.path.exists(tmp_path / renamed[0])
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"
    m.close()


def test_leftover_deleted_partition_dirs_are_removed_at_load(tmp_path):
    m = manager([tmp_path])
    m.create("t", 0, CONFIG, TOPIC_ID)
    m.close()
    leftover = tmp_path / "t-1.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    (tmp_path / "recovery-point-offset-checkpoint.tmp").write_text("partial")
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()  # the controller's, never loaded as a partition
    (tmp_path / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"raft")
    m2 = manager([tmp_path])
    assert not leftover.exists() and not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert [(log.topic, log.partition) for log in m2.logs()] == [("t", 0)]
    m2.close()
    assert (tmp_path / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes() == b"raft"


def test_maintain_checkpoints_periodically(tmp_path):
    m = manager([tmp_path], checkpoint_interval_ms=1000)
    log = m.create("t", 0, CONFIG, TOPIC_ID)
    fill(log, 40)
    m.maintain(NOW + 10)
    assert "t 0 40" not in (tmp_path / "replication-offset-checkpoint").read_text()
    m.maintain(NOW + 1000)
    assert "t 0 40" in (tmp_path / "replication-offset-checkpoint").read_text()
    recovery = checkpoint.OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")).read()
    assert recovery[("t", 0)] == log.segments[-1].base_offset  # flushed up to the last roll
    m.close()


def test_topic_configs_are_applied_at_load(tmp_path):
    m = manager([tmp_path])
    m.create("t", 0, CONFIG, TOPIC_ID)
    m.close()
    special = LogConfig(segment_bytes=4096)
    m2 = LogManager([str(tmp_path)], default_config=CONFIG)
    m2.load(lambda topic: special if topic == "t" else None, now_ms=NOW)
    assert m2.get("t", 0).config is special
    m2.close()


def test_retention_runs_on_kafkas_schedule(tmp_path):
    config = LogConfig(segment_bytes=2048, retention_ms=1000, file_delete_delay_ms=0)
    m = LogManager([str(tmp_path)], default_config=config)
    m.load(lambda topic: config, now_ms=NOW)
    log = m.create("t", 0, config, TOPIC_ID, now_ms=NOW)
    fill(log, 60)  # timestamps NOW: expired once NOW + 1000 has passed
    segments = len(log.segments)
    m.maintain(NOW + 29_999)  # the first retention check comes 30 s after load
    assert len(log.segments) == segments and log.log_start_offset == 0
    m.maintain(NOW + 30_000)
    assert log.log_start_offset == 60
    fill(log, 60)
    m.maintain(NOW + 30_000 + 299_999)  # then every log.retention.check.interval.ms
    assert log.log_start_offset == 60
    m.maintain(NOW + 330_000)
    assert log.log_start_offset == 120
    m.close()


def test_delete_of_a_topic_with_a_maximal_name(tmp_path):
    m = manager([tmp_path])
    name = "x" * 249
    m.create(name, 12, CONFIG, TOPIC_ID)
    m.delete(name, 12)
    (renamed,) = [n for n in os.listdir(tmp_path) if n.endswith("-delete")]
    assert len(renamed) <= 255 and renamed.endswith("-12." + renamed[-39:-7] + "-delete")
    m.close()


def copy_into_future(m, log, future) -> None:
    """What the log dir mover does: the current log's batches appended to the future log as a follower's."""
    while future.log_end_offset < log.log_end_offset:
        region = log.read(future.log_end_offset, 1 << 20, max_offset=log.log_end_offset)
        future.append_as_follower(os.pread(region.fd, region.size, region.position), now_ms=NOW)


def test_a_future_log_takes_the_place_of_the_current_one_in_its_dir(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    log = m.create("t", 0, CONFIG, TOPIC_ID)
    source, target = m.dir_of(log), str(b if m.dir_of(log) == str(a) else a)
    fill(log, 60)
    log.delete_records_before(10)
    log.append_as_leader(memoryview(make_batch(2)), now_ms=NOW, leader_epoch=7)
    log.high_watermark = log.log_end_offset
    future = m.create_future("t", 0, target, NOW)
    assert future.directory.endswith("-future") and m.future("t", 0) == (future, target)
    copy_into_future(m, log, future)
    promoted = m.promote_future("t", 0, NOW)
    assert m.get("t", 0) is promoted and m.dir_of(promoted) == target and m.future("t", 0) is None
    assert (promoted.log_start_offset, promoted.log_end_offset, promoted.high_watermark) == (10, 62, 62)
    assert read_all(promoted) == read_all(log)
    assert promoted.leader_epochs.entries == log.leader_epochs.entries
    assert promoted.topic_id == TOPIC_ID
    assert not os.path.exists(os.path.join(source, "t-0"))
    m.close()
    reopened = manager([a, b])
    assert reopened.dir_of(reopened.get("t", 0)) == target
    assert [o for o, _ in read_all(reopened.get("t", 0))] == list(range(10, 62))
    reopened.close()


def test_a_move_interrupted_by_a_restart_is_dropped_and_a_partition_in_two_dirs_keeps_the_longer_copy(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    log = m.create("t", 0, CONFIG, TOPIC_ID)
    target = str(b if m.dir_of(log) == str(a) else a)
    fill(log, 30)
    future = m.create_future("t", 0, target, NOW)
    copy_into_future(m, log, future)
    future.flush()
    future_dir = future.directory
    # a crash between promote_future's rename of the future dir and the deletion of the current one
    os.rename(future_dir, os.path.join(target, "t-0"))
    fill(log, 5)  # (cannot happen in the node: the two steps are one; this shows which copy is kept)
    log.flush()
    m.checkpoint()
    for fd in m._locks:  # crash: no close; the locks die with the process (closed here by hand)
        os.close(fd)
    reopened = LogManager([str(a), str(b)], default_config=CONFIG)
    reopened.load(lambda topic: CONFIG, now_ms=NOW)
    kept = reopened.get("t", 0)
    assert kept.log_end_offset == 35 and reopened.dir_of(kept) != target
    assert not os.path.exists(os.path.join(target, "t-0"))
    reopened.close()
    # a future dir found at start is removed
    leftover = os.path.join(target, "t-0.0123456789abcdef0123456789abcdef-future")
    os.makedirs(leftover)
    manager([a, b]).close()
    assert not os.path.exists(leftover)
