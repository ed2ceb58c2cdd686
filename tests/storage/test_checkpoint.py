"""Checkpoint files: Kafka's text format, atomic replacement, partition.metadata, clean-shutdown marker."""

import os

import pytest

from odradek.storage import checkpoint
from odradek.storage.checkpoint import CheckpointError, OffsetCheckpointFile
from odradek.uuid_text import uuid_from_text, uuid_to_text


def test_offset_checkpoint_round_trip_in_kafka_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 0): 17, ("orders", 1): 0, ("a.b-c", 12): 2**40}
    OffsetCheckpointFile(str(path)).write(offsets)
    assert path.read_text() == "0\n3\na.b-c 12 1099511627776\norders 0 17\norders 1 0\n"
    assert OffsetCheckpointFile(str(path)).read() == offsets


def test_missing_checkpoint_reads_empty(tmp_path):
    assert OffsetCheckpointFile(str(tmp_path / "nope")).read() == {}


def test_empty_checkpoint(tmp_path):
    path = tmp_path / "cp"
    OffsetCheckpointFile(str(path)).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(str(path)).read() == {}


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\nt 0 5\n", "0\n1\nt x 5\n", "0\n1\nt 0\n", "garbage"])
def test_malformed_checkpoint_is_an_error_or_empty(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(str(path)).read()
    assert OffsetCheckpointFile(str(path)).read_or_empty() == {}


def test_leftover_temp_file_is_ignored_and_replaced(tmp_path):
    path = tmp_path / "cp"
    OffsetCheckpointFile(str(path)).write({("t", 0): 5})
    (tmp_path / "cp.tmp").write_text("0\n1\nt 0 999\n")  # a write interrupted before its rename
    assert OffsetCheckpointFile(str(path)).read() == {("t", 0): 5}
    OffsetCheckpointFile(str(path)).write({("t", 0): 6})
    assert OffsetCheckpointFile(str(path)).read() == {("t", 0): 6}
    assert not (tmp_path / "cp.tmp").exists()


def test_write_atomic_never_exposes_a_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "cp"
    OffsetCheckpointFile(str(path)).write({("t", 0): 1})

    def fail_fsync(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", fail_fsync)
    with pytest.raises(OSError):
        OffsetCheckpointFile(str(path)).write({("t", 0): 2})
    monkeypatch.undo()
    assert OffsetCheckpointFile(str(path)).read() == {("t", 0): 1}


def test_partition_metadata(tmp_path):
    topic_id = bytes(range(16))
    checkpoint.write_partition_metadata(str(tmp_path), topic_id)
    assert (tmp_path / "partition.metadata").read_text() == "version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n"
    assert checkpoint.read_partition_metadata(str(tmp_path)) == topic_id
    (tmp_path / "partition.metadata").write_text("version: 1\ntopic_id: x\n")
    assert checkpoint.read_partition_metadata(str(tmp_path)) is None
    assert checkpoint.read_partition_metadata(str(tmp_path / "missing")) is None


def test_topic_id_text_matches_kafka_uuid_to_string():
    topic_id = bytes.fromhex("fbfbfbfbfbfbfbfbfbfbfbfbfbfbfbfb")
    assert uuid_to_text(topic_id) == "-_v7-_v7-_v7-_v7-_v7-w"
    assert uuid_from_text("-_v7-_v7-_v7-_v7-_v7-w") == topic_id


def test_clean_shutdown_marker(tmp_path):
    assert not checkpoint.has_clean_shutdown_marker(str(tmp_path))
    checkpoint.write_clean_shutdown_marker(str(tmp_path))
    assert checkpoint.has_clean_shutdown_marker(str(tmp_path))
    checkpoint.remove_clean_shutdown_marker(str(tmp_path))
    assert not checkpoint.has_clean_shutdown_marker(str(tmp_path))
    checkpoint.remove_clean_shutdown_marker(str(tmp_path))
