"""LogManager: every partition log of this node across `log.dirs`, their checkpoints and clean shutdown.

Per log dir: a `.lock` file held with flock while the node runs; `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `replication-offset-checkpoint` (high watermarks), written atomically;
`.kafka_cleanshutdown`, written last by close() and removed (durably) by load(): a log dir without it
was not shut down cleanly and its logs are recovered from their recovery points on.

A log dir whose I/O fails (a full disk, a dying device) goes offline as a whole, as in Kafka: its logs are
closed without another write, their partitions answer KAFKA_STORAGE_ERROR, and nothing in that dir is
touched again until the node restarts and recovers it. The other dirs keep serving.

A partition moving to another log dir (AlterReplicaLogDirs) has a future log there,
`<topic>-<partition>.<id>-future`, filled while the current log serves; `promote_future` swaps it in. A
future dir left by a restart is removed: the move has to be asked for again.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import checkpoint
from odradek.storage.log import PartitionLog, parse_partition_dir
from odradek.storage.log_config import LogConfig

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
FUTURE_DIR_SUFFIX = "-future"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # the KRaft metadata log: owned by the controller, not loaded here
CHECKPOINT_INTERVAL_MS = 60000  # Kafka's log.flush.offset.checkpoint.interval.ms
RETENTION_CHECK_INTERVAL_MS = 300000  # Kafka's log.retention.check.interval.ms
INITIAL_TASK_DELAY_MS = 30000  # Kafka's LogManager.InitialTaskDelayMs: first retention check after start


class LogManager:
    def __init__(self, log_dirs: list[str], *, default_config: LogConfig,
                 checkpoint_interval_ms: int = CHECKPOINT_INTERVAL_MS,
                 retention_check_interval_ms: int = RETENTION_CHECK_INTERVAL_MS,
                 initial_task_delay_ms: int = INITIAL_TASK_DELAY_MS):
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.initial_task_delay_ms = initial_task_delay_ms
        self._next_retention_check_ms: int | None = None
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._pending_dir_deletes: list[list] = []  # [log, renamed dir, due_ms or None]
        self._last_checkpoint_ms: int | None = None
        self._locks: list[int] = []
        self.offline_dirs: dict[str, str] = {}  # log dir -> why it went offline
        self._offline_logs: dict[tuple[str, int], PartitionLog] = {}
        self._futures: dict[tuple[str, int], tuple[PartitionLog, str]] = {}  # key -> (future log, its log dir)
        self._preferred_dir: dict[tuple[str, int], str] = {}  # where a partition not hosted yet is to be created
        self.on_dir_failure: Callable[[str, list[tuple[str, int]]], None] | None = None
        for log_dir in self.log_dirs:
            try:
                os.makedirs(log_dir, exist_ok=True)
                self._locks.append(_lock(log_dir))
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise OSError(f"no usable log dir: {self.offline_dirs}")

    # ---- loading

    def load(self, topic_configs: Callable[[str], LogConfig | None], now_ms: int) -> None:
        """Open every partition dir found, recovering those of log dirs not shut down cleanly."""
        for log_dir in self.online_dirs():
            try:
                self._load_dir(log_dir, topic_configs, now_ms)
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        self.checkpoint()
        self._last_checkpoint_ms = now_ms
        self._next_retention_check_ms = now_ms + self.initial_task_delay_ms

    def _load_dir(self, log_dir: str, topic_configs: Callable[[str], LogConfig | None], now_ms: int) -> None:
        clean = checkpoint.has_clean_shutdown_marker(log_dir)
        recovery_points = checkpoint.OffsetCheckpointFile(
            os.path.join(log_dir, checkpoint.RECOVERY_POINT_CHECKPOINT)).read_or_empty()
        start_offsets = checkpoint.OffsetCheckpointFile(
            os.path.join(log_dir, checkpoint.LOG_START_OFFSET_CHECKPOINT)).read_or_empty()
        high_watermarks = checkpoint.OffsetCheckpointFile(
            os.path.join(log_dir, checkpoint.HIGH_WATERMARK_CHECKPOINT)).read_or_empty()
        warned = clean
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                if name.endswith(checkpoint.TMP_SUFFIX):
                    os.unlink(path)  # an interrupted checkpoint write
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing %s, a partition deleted before the last shutdown", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                log.info("removing %s, a move to another log dir that a restart interrupted", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                continue
            parsed = parse_partition_dir(name)
            if parsed is None or parsed[0] == CLUSTER_METADATA_TOPIC:
                continue
            if not warned:
                log.warning("%s was not shut down cleanly: recovering its logs", log_dir)
                warned = True
            config = topic_configs(parsed[0]) or self.default_config
            partition_log = PartitionLog(
                path, config, now_ms=now_ms, recovery_point=recovery_points.get(parsed, 0),
                log_start_offset=start_offsets.get(parsed, 0), high_watermark=high_watermarks.get(parsed, 0),
                clean_shutdown=clean, topic=parsed[0], partition=parsed[1])
            if parsed in self._logs:
                partition_log = self._keep_one_of_two(self._logs[parsed], partition_log)
            self._logs[parsed] = partition_log
            self._dir_of[parsed] = os.path.dirname(partition_log.directory)
        # from here on a crash must be seen as unclean
        checkpoint.remove_clean_shutdown_marker(log_dir)

    def _keep_one_of_two(self, first: PartitionLog, second: PartitionLog) -> PartitionLog:
        """A partition found in two log dirs: a crash came between promote_future's renaming of the moved log
        and its deletion of the old one. Both held the same records then; the longer one stays."""
        kept, dropped = (first, second) if first.log_end_offset >= second.log_end_offset else (second, first)
        log.warning("%s-%d is in both %s and %s (a move between log dirs was interrupted): keeping %s",
                    kept.topic, kept.partition, first.directory, second.directory, kept.directory)
        dropped.abandon()
        os.rename(dropped.directory, os.path.join(os.path.dirname(dropped.directory),
                                                  delete_dir_name(dropped.topic, dropped.partition)))
        return kept

    # ---- partitions

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a partition, if it is on an online log dir."""
        return self._logs.get((topic, partition))

    def logs(self) -> Iterable[PartitionLog]:
        """Every log on an online log dir."""
        return list(self._logs.values())

    def dir_of(self, partition_log: PartitionLog) -> str:
        return self._dir_of[(partition_log.topic, partition_log.partition)]

    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._offline_logs

    def dir_sizes(self) -> dict[str, dict[tuple[str, int], int]]:
        """For DescribeLogDirs: per online log dir, the size in bytes of each partition it holds."""
        sizes: dict[str, dict[tuple[str, int], int]] = {log_dir: {} for log_dir in self.online_dirs()}
        for key, partition_log in self._logs.items():
            sizes[self._dir_of[key]][key] = partition_log.size_in_bytes()
        return sizes

    # ---- failures

    def fail_dir(self, log_dir: str, error: BaseException) -> None:
        """Take a log dir offline after an I/O error in it: close its logs without writing, stop using it."""
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs[log_dir] = str(error)
        failed = [key for key, owner in self._dir_of.items() if owner == log_dir and key in self._logs]
        log.error("log dir %s is offline after an I/O error (%s); its %d partitions answer KAFKA_STORAGE_ERROR "
                  "until the node restarts", log_dir, error, len(failed))
        for key in failed:
            partition_log = self._logs.pop(key)
            self._offline_logs[key] = partition_log
            try:
                partition_log.abandon()
            except OSError:
                pass  # the dir is failing: its files are left to recovery at the next start
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir, failed)

    def fail_dir_of(self, partition_log: PartitionLog, error: BaseException) -> None:
        self.fail_dir(self.dir_of(partition_log), error)

    def mark_unavailable(self, topic: str, partition: int) -> None:
        """A partition hosted here whose log was not found while a log dir is offline: it may well be in that
        dir, so it is served as offline rather than re-created empty in another dir."""
        self._offline_logs.setdefault((topic, partition), None)

    def create(self, topic: str, partition: int, config: LogConfig, topic_id: bytes, *,
               now_ms: int | None = None) -> PartitionLog:
        """Create (or return the existing) log of a partition, in the log dir holding the fewest partitions."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            if existing.topic_id is None and topic_id:
                checkpoint.write_partition_metadata(existing.directory, topic_id)
                existing.topic_id = topic_id
            elif topic_id and existing.topic_id != topic_id:
                raise RuntimeError(f"{existing.directory} belongs to another topic id than the one being created")
            existing.update_config(config)
            return existing
        if key in self._offline_logs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log dir of {topic}-{partition} is offline")
        online = self.online_dirs()
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "every log dir is offline")
        counts = {log_dir: 0 for log_dir in online}
        for owner in self._dir_of.values():
            if owner in counts:
                counts[owner] += 1
        preferred = self._preferred_dir.pop(key, None)
        log_dir = preferred if preferred in counts else min(online, key=lambda d: counts[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        try:
            # a leftover directory of that name is recovered, not trusted
            partition_log = PartitionLog(path, config, now_ms=now_ms, clean_shutdown=not os.path.exists(path),
                                         topic=topic, partition=partition, topic_id=topic_id)
            checkpoint.fsync_dir(log_dir)
        except OSError as exc:
            self.fail_dir(log_dir, exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"creating {path} failed: {exc.strerror}") from exc
        self._logs[key] = partition_log
        self._dir_of[key] = log_dir
        return partition_log

    def delete(self, topic: str, partition: int) -> None:
        """Rename the partition dir to `<topic>-<partition>.<uuid>-delete`; files go after file.delete.delay.ms.

        The log leaves the manager at once; its descriptors stay open until then, so FileRegions already
        handed to the network layer can still be sent.
        """
        key = (topic, partition)
        self.abandon_future(topic, partition)
        if self._offline_logs.pop(key, None) is not None or key not in self._logs:
            return  # in an offline dir: the next start finds the topic gone and deletes it then
        partition_log = self._logs.pop(key)
        log_dir = self._dir_of.pop(key)
        renamed = os.path.join(log_dir, delete_dir_name(topic, partition))
        os.rename(partition_log.directory, renamed)
        checkpoint.fsync_dir(log_dir)
        partition_log.directory = renamed
        self._pending_dir_deletes.append([partition_log, renamed, None])
        self.checkpoint()

    # ---- moving a partition to another log dir

    def check_destination(self, log_dir: str) -> str:
        """The absolute path of a log dir a partition may move to; raises if it is unknown or offline."""
        path = os.path.abspath(log_dir)
        if path not in self.log_dirs:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"Log dir {log_dir} is not found in the config.")
        if path in self.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Log directory {log_dir} is offline")
        return path

    def prefer_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Create the log of a partition not hosted here yet in `log_dir` when it comes."""
        self._preferred_dir[(topic, partition)] = log_dir

    def future(self, topic: str, partition: int) -> tuple[PartitionLog, str] | None:
        return self._futures.get((topic, partition))

    def futures(self) -> dict[tuple[str, int], tuple[PartitionLog, str]]:
        return dict(self._futures)

    def create_future(self, topic: str, partition: int, log_dir: str, now_ms: int) -> PartitionLog:
        """An empty log for `topic-partition` in `log_dir`, starting where the current log starts."""
        self.abandon_future(topic, partition)
        current = self._logs[(topic, partition)]
        path = os.path.join(log_dir, future_dir_name(topic, partition))
        future = PartitionLog(path, current.config, now_ms=now_ms, clean_shutdown=True, topic=topic,
                              partition=partition, topic_id=current.topic_id)
        future.truncate_fully_and_start_at(current.log_start_offset)
        self._futures[(topic, partition)] = (future, log_dir)
        return future

    def abandon_future(self, topic: str, partition: int) -> None:
        entry = self._futures.pop((topic, partition), None)
        if entry is not None:
            entry[0].abandon()
            shutil.rmtree(entry[0].directory, ignore_errors=True)

    def promote_future(self, topic: str, partition: int, now_ms: int) -> PartitionLog:
        """The future log, caught up with the current one, becomes the partition's log in its dir; the current
        log is deleted as a deleted partition is (its files stay readable for file.delete.delay.ms)."""
        key = (topic, partition)
        future, log_dir = self._futures[key]
        current = self._logs[key]
        future.high_watermark = current.high_watermark
        if current.log_start_offset > future.log_start_offset:
            future.delete_records_before(current.log_start_offset)
        end, start, high_watermark = future.log_end_offset, future.log_start_offset, future.high_watermark
        future.close()
        del self._futures[key]
        path = os.path.join(log_dir, f"{topic}-{partition}")
        os.rename(future.directory, path)
        checkpoint.fsync_dir(log_dir)
        self.delete(topic, partition)
        promoted = PartitionLog(path, current.config, now_ms=now_ms, recovery_point=end, log_start_offset=start,
                                high_watermark=high_watermark, clean_shutdown=True, topic=topic, partition=partition)
        promoted.producer_id_expiration_ms = current.producer_id_expiration_ms
        self._logs[key] = promoted
        self._dir_of[key] = log_dir
        self.checkpoint()
        return promoted

    # ---- checkpoints, maintenance, shutdown

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks of every log dir, atomically."""
        for log_dir in self.online_dirs():
            owned = {key: log_ for key, log_ in self._logs.items() if self._dir_of[key] == log_dir}
            try:
                for file_name, value in ((checkpoint.RECOVERY_POINT_CHECKPOINT, lambda p: p.recovery_point),
                                         (checkpoint.LOG_START_OFFSET_CHECKPOINT, lambda p: p.log_start_offset),
                                         (checkpoint.HIGH_WATERMARK_CHECKPOINT, lambda p: p.high_watermark)):
                    checkpoint.OffsetCheckpointFile(os.path.join(log_dir, file_name)).write(
                        {key: value(p) for key, p in owned.items()})
            except OSError as exc:
                self.fail_dir(log_dir, exc)

    def flush(self) -> None:
        for partition_log in self.logs():
            try:
                partition_log.flush()
            except OSError as exc:
                self.fail_dir_of(partition_log, exc)

    def maintain(self, now_ms: int) -> None:
        """Each log's maintenance (retention every retention_check_interval_ms, the first one
        initial_task_delay_ms after load, as Kafka schedules it), removal of deleted partitions, and the
        periodic checkpoint."""
        if self._next_retention_check_ms is None:
            self._next_retention_check_ms = now_ms + self.initial_task_delay_ms
        retention = now_ms >= self._next_retention_check_ms
        if retention:
            self._next_retention_check_ms = now_ms + self.retention_check_interval_ms
        for partition_log in self.logs():
            if (partition_log.topic, partition_log.partition) not in self._logs:
                continue  # its dir went offline during this pass
            try:
                partition_log.maintain(now_ms, enforce_retention=retention)
            except OSError as exc:
                self.fail_dir_of(partition_log, exc)
            except KafkaError:
                log.exception("maintenance of %s-%d failed", partition_log.topic, partition_log.partition)
        self._delete_due_dirs(now_ms)
        if self._last_checkpoint_ms is None or now_ms - self._last_checkpoint_ms >= self.checkpoint_interval_ms:
            self.checkpoint()
            self._last_checkpoint_ms = now_ms

    def _delete_due_dirs(self, now_ms: int | None) -> None:
        remaining = []
        for entry in self._pending_dir_deletes:
            partition_log, path, due = entry
            if now_ms is not None and due is None:
                entry[2] = due = now_ms + partition_log.config.file_delete_delay_ms
            if now_ms is None or now_ms >= due:
                partition_log.abandon()
                shutil.rmtree(path, ignore_errors=True)
            else:
                remaining.append(entry)
        self._pending_dir_deletes = remaining

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker of each dir."""
        unclean: set[str] = set(self.offline_dirs)
        for key in list(self._futures):
            self.abandon_future(*key)
        for key, partition_log in self._logs.items():
            try:
                partition_log.close()
            except (OSError, KafkaError):
                log.exception("closing %s-%d failed; its log dir will be recovered at the next start", *key)
                partition_log.abandon()
                unclean.add(self._dir_of[key])
        self._delete_due_dirs(None)
        self.checkpoint()
        for log_dir in self.online_dirs():
            if log_dir not in unclean:
                try:
                    checkpoint.write_clean_shutdown_marker(log_dir)
                except OSError:
                    log.exception("%s will be recovered at the next start", log_dir)
        for fd in self._locks:
            os.close(fd)
        self._locks = []


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a partition's future dir: the topic is cut so the name fits in 255 bytes."""
    suffix = f"-{partition}.{checkpoint.new_unique_suffix()}{FUTURE_DIR_SUFFIX}"
    return topic[: 255 - len(suffix)] + suffix


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a deleted partition dir: the topic is cut so the name fits in 255 bytes."""
    suffix = f"-{partition}.{checkpoint.new_unique_suffix()}{DELETE_DIR_SUFFIX}"
    return topic[: 255 - len(suffix)] + suffix


def _lock(log_dir: str) -> int:
    fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"{log_dir} is in use by another process (could not lock {LOCK_FILE})") from None
    return fd
