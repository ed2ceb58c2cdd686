"""`__consumer_offsets` record formats: round trips, Kafka 4.0's versions, golden bytes built from the JSON specs."""

import struct

import pytest

from odradek.coordinator import records as rec
from odradek.coordinator.record_schemas import GROUP_METADATA_VALUE, OFFSET_COMMIT_VALUE


def kstr(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_offset_commit_golden_bytes_match_the_spec():
    key, value = rec.offset_commit_record("g1", "orders", 7, rec.OffsetCommitValue(
        offset=42, metadata="meta", commit_timestamp=1_700_000_000_000, leader_epoch=5))
    # OffsetCommitKey: int16 type 1, then group, topic (int16-length strings), partition int32.
    assert key == bytes.fromhex("0001") + kstr("g1") + kstr("orders") + struct.pack(">i", 7)
    # OffsetCommitValue v3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64.
    assert value == (bytes.fromhex("0003") + struct.pack(">q", 42) + struct.pack(">i", 5) + kstr("meta")
                     + struct.pack(">q", 1_700_000_000_000))
    assert value.hex() == "0003000000000000002a0000000500046d6574610000018bcfe56800"


def test_offset_commit_with_expire_timestamp_is_written_as_version_1():
    _, value = rec.offset_commit_record("g", "t", 0, rec.OffsetCommitValue(
        offset=1, metadata="", commit_timestamp=10, expire_timestamp=20))
    assert value == bytes.fromhex("0001") + struct.pack(">q", 1) + kstr("") + struct.pack(">qq", 10, 20)
    decoded = rec.decode_record(*rec.offset_commit_record("g", "t", 0, rec.OffsetCommitValue(1, "", 10, -1, 20)))
    assert decoded.value.expire_timestamp == 20


def test_group_metadata_golden_bytes_match_the_spec():
    member = rec.MemberMetadata(member_id="m", client_id="c", client_host="/h", session_timeout=45000,
                                subscription=b"\x01", assignment=b"\x02", rebalance_timeout=300000,
                                group_instance_id=None)
    value = rec.GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m",
                                   current_state_timestamp=99, members=(member,))
    key_bytes, value_bytes = rec.group_metadata_record("grp", value)
    assert key_bytes == bytes.fromhex("0002") + kstr("grp")
    expected = (bytes.fromhex("0003") + kstr("consumer") + struct.pack(">i", 3) + kstr("range") + kstr("m")
                + struct.pack(">q", 99) + struct.pack(">i", 1)
                + kstr("m") + struct.pack(">h", -1) + kstr("c") + kstr("/h") + struct.pack(">ii", 300000, 45000)
                + struct.pack(">i", 1) + b"\x01" + struct.pack(">i", 1) + b"\x02")
    assert value_bytes == expected
    assert rec.decode_record(key_bytes, value_bytes) == rec.GroupMetadataRecord(rec.GroupMetadataKey("grp"), value)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_round_trip_every_version(version):
    member = rec.MemberMetadata("m", "c", "h", 10, b"s", b"a", rebalance_timeout=20 if version >= 1 else -1,
                                group_instance_id="i" if version >= 3 else None)
    value = rec.GroupMetadataValue("consumer", 1, None, None, 5 if version >= 2 else -1, (member,))
    key = rec.encode_key(rec.GroupMetadataKey("g"))
    assert rec.decode_record(key, rec.encode_value(value, version)).value == value


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_round_trip_every_version(version):
    value = rec.OffsetCommitValue(offset=9, metadata="x", commit_timestamp=3,
                                  leader_epoch=4 if version >= 3 else -1,
                                  expire_timestamp=7 if version == 1 else -1)
    key = rec.encode_key(rec.OffsetCommitKey("g", "t", 1))
    record = rec.decode_record(key, rec.encode_value(value, version))
    assert record == rec.OffsetCommitRecord(rec.OffsetCommitKey("g", "t", 1), value)


def test_flexible_value_with_unknown_tagged_fields_and_newer_version_is_read():
    body = OFFSET_COMMIT_VALUE.encode(4, {"offset": 1, "leader_epoch": 2, "metadata": "m", "commit_timestamp": 3})
    assert body.endswith(b"\x00")
    with_tag = body[:-1] + b"\x01\x05\x02\xab\xcd"  # one unknown tag (5) of two bytes
    key = rec.encode_key(rec.OffsetCommitKey("g", "t", 0))
    for version in (4, 5):
        record = rec.decode_record(key, struct.pack(">h", version) + with_tag)
        assert record.value == rec.OffsetCommitValue(1, "m", 3, 2)
    assert GROUP_METADATA_VALUE.versions == (0, 4)


def test_tombstones_and_legacy_key_type_0():
    key0 = b"\x00\x00" + kstr("g") + kstr("t") + struct.pack(">i", 2)
    assert rec.decode_record(key0, None) == rec.OffsetCommitRecord(rec.OffsetCommitKey("g", "t", 2), None)
    key, value = rec.group_metadata_tombstone("g")
    assert value is None and rec.decode_record(key, value) == rec.GroupMetadataRecord(rec.GroupMetadataKey("g"), None)


@pytest.mark.parametrize("record_type", [3, 4, 8, 16, 100])
def test_unknown_record_types_are_skipped(record_type):
    assert rec.decode_record(struct.pack(">h", record_type) + kstr("g"), b"\x00\x00anything") is None


def test_truncated_records_raise_malformed():
    key, value = rec.offset_commit_record("g", "t", 0, rec.OffsetCommitValue(1, "", 2))
    with pytest.raises(rec.MalformedMessage):
        rec.decode_record(key[:-1], value)
    with pytest.raises(rec.MalformedMessage):
        rec.decode_record(key, value[:-3])
    with pytest.raises(rec.MalformedMessage):
        rec.decode_record(b"\x00", None)
