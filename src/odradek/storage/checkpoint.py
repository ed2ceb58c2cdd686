"""Atomic checkpoint files: offset checkpoints per log dir, the clean-shutdown marker, partition.metadata.

Every write goes to `<name>.tmp`, is fsynced, renamed over `<name>`, and the directory is fsynced, so a
reader sees either the old or the new content, never a mix, whatever moment the process or machine dies.
A leftover `.tmp` is ignored by readers and overwritten by the next write.
"""

from __future__ import annotations

import logging
import os
import uuid

from odradek.uuid_text import uuid_from_text, uuid_to_text

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
PARTITION_METADATA_FILE = "partition.metadata"
CHECKPOINT_VERSION = 0


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` with `data` durably: temp file, fsync, rename, fsync of the directory."""
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


class CheckpointError(ValueError):
    """A checkpoint file that exists but cannot be parsed."""


class OffsetCheckpointFile:
    """Kafka's offset checkpoint text format: `0`, the entry count, then `topic partition offset` lines."""

    def __init__(self, path: str):
        self.path = path

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
        write_atomic(self.path, ("\n".join(lines) + "\n").encode())

    def read(self) -> dict[tuple[str, int], int]:
        """The checkpointed offsets; {} if the file does not exist. Raises CheckpointError if malformed."""
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return {}
        lines = text.splitlines()
        try:
            if int(lines[0]) != CHECKPOINT_VERSION:
                raise CheckpointError(f"{self.path}: unsupported version {lines[0]!r}")
            count = int(lines[1])
            entries = lines[2:]
            if len(entries) != count:
                raise CheckpointError(f"{self.path}: expected {count} entries, found {len(entries)}")
            offsets = {}
            for line in entries:
                topic, partition, offset = line.split(" ")
                offsets[(topic, int(partition))] = int(offset)
            return offsets
        except (IndexError, ValueError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{self.path}: malformed checkpoint: {exc}") from None

    def read_or_empty(self) -> dict[tuple[str, int], int]:
        """As read(), but a malformed file is logged and treated as absent (recovery then starts from zero)."""
        try:
            return self.read()
        except CheckpointError as exc:
            log.warning("ignoring %s", exc)
            return {}


def write_clean_shutdown_marker(log_dir: str, broker_epoch: int = -1) -> None:
    write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE),
                 f'{{"version":0,"brokerEpoch":{broker_epoch}}}'.encode())


def has_clean_shutdown_marker(log_dir: str) -> bool:
    return os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))


def remove_clean_shutdown_marker(log_dir: str) -> None:
    """Remove the marker durably: after this, a crash is seen as unclean."""
    try:
        os.unlink(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    except FileNotFoundError:
        return
    fsync_dir(log_dir)


def write_partition_metadata(partition_dir: str, topic_id: bytes) -> None:
    text = f"version: 0\ntopic_id: {uuid_to_text(topic_id)}\n"
    write_atomic(os.path.join(partition_dir, PARTITION_METADATA_FILE), text.encode())


def read_partition_metadata(partition_dir: str) -> bytes | None:
    """The topic id in `partition.metadata`, or None if the file is missing or unreadable."""
    try:
        with open(os.path.join(partition_dir, PARTITION_METADATA_FILE), encoding="utf-8") as f:
            fields = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
        if fields.get("version") != "0":
            return None
        return uuid_from_text(fields["topic_id"].strip())
    except (OSError, KeyError, ValueError, CheckpointError):
        return None


def new_unique_suffix() -> str:
    return uuid.uuid4().hex
