"""A log dir whose I/O fails goes offline as a whole; the node's other log dirs go on serving.

Failures are injected by making one `os` call fail with EIO or ENOSPC for files under one dir only, so
everything else runs on the real file system. (A full disk is also tested for real, on a tmpfs, in
tests/e2e/test_log_dir_failure.py.)
"""

import asyncio
import errno
import os
import random
from types import SimpleNamespace

import pytest

from odradek.broker.replica_manager import ReplicaManager
from odradek.controller.metadata_image import PartitionImage
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import checkpoint
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.test_cleaner import compact_config, records_of, write_updates
from tests.storage.test_log import NOW, fill, make_batch, read_all

TOPIC_ID = bytes(range(16))
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128, file_delete_delay_ms=0, retention_ms=1000)


def recovered(m: LogManager, topic: str, partition: int):
    """A log as the broker hosts it after a start: on one node everything it holds is committed."""
    log = m.get(topic, partition)
    log.high_watermark = log.log_end_offset
    return log


def manager(dirs, failures=None):
    m = LogManager([str(d) for d in dirs], default_config=CONFIG)
    if failures is not None:
        m.on_dir_failure = lambda log_dir, keys: failures.append((log_dir, sorted(keys)))
    m.load(lambda topic: CONFIG, now_ms=NOW)
    return m


def fail_under(monkeypatch, name: str, directory, code: int = errno.EIO) -> None:
    """Make os.<name> fail with `code` for descriptors or paths under `directory`."""
    real = getattr(os, name)
    prefix = str(directory) + os.sep

    def failing(target, *args, **kwargs):
        path = os.readlink(f"/proc/self/fd/{target}") if isinstance(target, int) else os.fspath(target)
        if path.startswith(prefix):
            raise OSError(code, os.strerror(code), path)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(os, name, failing)


@pytest.fixture
def two_dirs(tmp_path):
    return tmp_path / "a", tmp_path / "b"


def spread(m: LogManager):
    """Four partitions, two in each dir: ({partition: log} in a, {partition: log} in b)."""
    logs = [m.create("t", p, CONFIG, TOPIC_ID) for p in range(4)]
    for log in logs:
        fill(log, 5)
    by_dir: dict[str, dict] = {}
    for log in logs:
        by_dir.setdefault(m.dir_of(log), {})[log.partition] = log
    return by_dir[m.log_dirs[0]], by_dir[m.log_dirs[1]]


def test_an_fsync_error_takes_the_dir_offline_and_the_next_start_recovers_it(two_dirs, monkeypatch):
    failures = []
    m = manager(two_dirs, failures)
    in_a, in_b = spread(m)
    with monkeypatch.context() as patch:
        fail_under(patch, "fsync", two_dirs[1])
        m.flush()
    assert list(m.offline_dirs) == [str(two_dirs[1])]
    assert failures == [(str(two_dirs[1]), [("t", p) for p in sorted(in_b)])]
    for p in in_b:
        assert m.is_offline("t", p) and m.get("t", p) is None
        with pytest.raises(KafkaError) as raised:
            m.create("t", p, CONFIG, TOPIC_ID)  # never re-created empty in the other dir
        assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert sorted(log.partition for log in m.logs()) == sorted(in_a)
    assert m.dir_of(m.create("t", 9, CONFIG, TOPIC_ID)) == str(two_dirs[0])  # new partitions avoid it
    assert set(m.dir_sizes()) == {str(two_dirs[0])}
    for log in in_a.values():
        fill(log, 2)
    m.close()
    assert checkpoint.has_clean_shutdown_marker(str(two_dirs[0]))
    assert not checkpoint.has_clean_shutdown_marker(str(two_dirs[1]))

    m2 = manager(two_dirs)
    assert not m2.offline_dirs
    for p in in_b:
        assert [offset for offset, _ in read_all(recovered(m2, "t", p))] == list(range(5))
    for p in in_a:
        assert m2.get("t", p).log_end_offset == 7
    m2.close()


def test_enospc_on_append_answers_kafka_storage_error_for_the_whole_dir_only(two_dirs, monkeypatch):
    m = manager(two_dirs)
    in_a, in_b = spread(m)
    no_fetchers = SimpleNamespace(unfollow=lambda topic, index: None)  # this node follows nothing
    replicas = ReplicaManager(SimpleNamespace(node_id=1, log_manager=m, fetchers=no_fetchers))
    m.on_dir_failure = lambda log_dir, keys: replicas.on_dir_failure(keys)
    for p in range(4):  # this node leads every partition alone
        replicas.host("t", p, m.get("t", p), PartitionImage(p, replicas=[1], isr=[1], leader=1))
    full, sibling = sorted(in_b)
    with monkeypatch.context() as patch:
        fail_under(patch, "write", two_dirs[1], errno.ENOSPC)
        result = replicas.append("t", full, memoryview(make_batch(3)), -1)
    assert result.error == ErrorCode.KAFKA_STORAGE_ERROR and "No space left" in result.message
    assert replicas.append("t", sibling, memoryview(make_batch()), -1).error == ErrorCode.KAFKA_STORAGE_ERROR
    assert replicas.read("t", sibling, 0, 1 << 20, -1, True).error == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError) as raised:
        replicas.list_offset("t", full, -1, -1, 0)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    for p in in_a:
        assert replicas.append("t", p, memoryview(make_batch()), -1).base_offset == 5
        assert replicas.read("t", p, 0, 1 << 20, -1, True).error == ErrorCode.NONE
    m.close()
    m2 = manager(two_dirs)
    assert [offset for offset, _ in read_all(recovered(m2, "t", full))] == list(range(5)), \
        "the failed append left nothing behind"
    m2.close()


def test_an_error_during_retention_takes_only_that_dir_offline(two_dirs, monkeypatch):
    m = manager(two_dirs)
    in_a, in_b = spread(m)
    later = NOW + 10 * CONFIG.retention_ms
    for log in [*in_a.values(), *in_b.values()]:
        fill(log, 30, now=later)  # several segments, the first ones past retention
    with monkeypatch.context() as patch:
        fail_under(patch, "rename", two_dirs[1])
        m.maintain(later + 1)
        m.maintain(later + 1 + m.initial_task_delay_ms)
    assert list(m.offline_dirs) == [str(two_dirs[1])]
    for log in in_a.values():
        assert log.log_start_offset > 0, "retention went on in the healthy dir"
    m.close()


def test_a_checkpoint_write_error_takes_the_dir_offline(two_dirs, monkeypatch):
    m = manager(two_dirs)
    spread(m)
    with monkeypatch.context() as patch:
        fail_under(patch, "replace", two_dirs[0])
        m.checkpoint()
    assert list(m.offline_dirs) == [str(two_dirs[0])]
    m.close()


def test_an_unusable_dir_at_start_is_offline_and_the_others_load(tmp_path):
    good = tmp_path / "good"
    m = manager([good])
    fill(m.create("t", 0, CONFIG, TOPIC_ID), 4)
    m.close()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("a file where a log dir should be")
    m2 = manager([good, not_a_dir])
    assert list(m2.offline_dirs) == [str(not_a_dir)]
    assert m2.get("t", 0).log_end_offset == 4
    m2.mark_unavailable("t", 1)  # hosted here but not found: it may be in the offline dir
    assert m2.is_offline("t", 1)
    m2.close()
    with pytest.raises(OSError, match="no usable log dir"):
        LogManager([str(not_a_dir)], default_config=CONFIG)


def test_a_write_error_while_compacting_takes_the_dir_offline_and_cleaning_goes_on_elsewhere(two_dirs, monkeypatch):
    m = manager(two_dirs)
    healthy, failing = (m.create("c", p, compact_config(), TOPIC_ID) for p in range(2))
    for log in (healthy, failing):
        write_updates(log, random.Random(7), updates=300)
    cleaner = LogCleaner(m, CleanerConfig(backoff_ms=10))

    async def clean_until_both_are_settled():
        running = asyncio.create_task(cleaner.run(lambda: NOW))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if m.offline_dirs and len(records_of(healthy)) < 300:
                break
        cleaner.stop()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    with monkeypatch.context() as patch:
        fail_under(patch, "write", m.dir_of(failing), errno.ENOSPC)
        asyncio.run(clean_until_both_are_settled())
    assert list(m.offline_dirs) == [m.dir_of(failing)]
    assert len(records_of(healthy)) < 300, "the healthy dir's log was compacted"
    m.close()
    m2 = manager(two_dirs)
    assert [offset for offset, _ in read_all(recovered(m2, "c", 1))] == list(range(300)), \
        "the failed cleaning left the log as it was"
    m2.close()
