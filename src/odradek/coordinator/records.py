"""The `__consumer_offsets` record formats, byte-compatible with Kafka 4.0.

A record's key is an int16 *record type* followed by the key struct encoded at that version; its value is an
int16 version followed by the value struct at that version, or None (a tombstone: the key is deleted).

    type 0, 1   OffsetCommitKey     -> OffsetCommitValue    (a group's committed offset of one partition)
    type 2      GroupMetadataKey    -> GroupMetadataValue   (a classic group: generation, protocol, members)
    type 3+     KIP-848 consumer-group / share-group records (not used by the classic coordinator; skipped)

What Kafka 4.0 writes (MetadataVersion.offsetCommitValueVersion / groupMetadataValueVersion): OffsetCommitKey
type 1; OffsetCommitValue version 3, or version 1 when the commit carries an explicit expire timestamp
(OffsetCommit v2-4 with retention_time_ms); GroupMetadataKey type 2; GroupMetadataValue version 3. The flexible
version 4 of both values is read (with any tagged fields skipped) but not written, as in Kafka. Values with a
version newer than 4 are read as version 4 (KIP-915: later versions only add tagged fields).

`decode_record(key, value)` returns an `OffsetCommitRecord` or a `GroupMetadataRecord` (value None for a
tombstone), or None for a record type this coordinator does not know, which a loader skips.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.coordinator.record_schemas import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    RecordSchema,
)
from odradek.protocol.types import MalformedMessage

__all__ = [
    "GroupMetadataKey", "GroupMetadataRecord", "GroupMetadataValue", "MalformedMessage", "MemberMetadata",
    "OffsetCommitKey", "OffsetCommitRecord", "OffsetCommitValue", "decode_record", "encode_key", "encode_value",
    "group_metadata_record", "group_metadata_tombstone", "offset_commit_record", "offset_commit_tombstone",
]

OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1          # -1: none
    expire_timestamp: int = -1      # -1: none (only version 1 stores one)


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class OffsetCommitRecord:
    key: OffsetCommitKey
    value: OffsetCommitValue | None


@dataclass(frozen=True)
class GroupMetadataRecord:
    key: GroupMetadataKey
    value: GroupMetadataValue | None


# ---------------------------------------------------------------------------------------------- encoding

def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        body = {"group": key.group, "topic": key.topic, "partition": key.partition}
        return _INT16.pack(OFFSET_COMMIT_KEY_TYPE) + OFFSET_COMMIT_KEY.encode(OFFSET_COMMIT_KEY_TYPE, body)
    return _INT16.pack(GROUP_METADATA_KEY_TYPE) + GROUP_METADATA_KEY.encode(GROUP_METADATA_KEY_TYPE,
                                                                            {"group": key.group})


def encode_value(value: OffsetCommitValue | GroupMetadataValue, version: int | None = None) -> bytes:
    """The value bytes at `version` (default: what Kafka 4.0 writes for this value)."""
    if isinstance(value, OffsetCommitValue):
        if version is None:
            version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if value.expire_timestamp != -1 \
                else OFFSET_COMMIT_VALUE_VERSION
        body = {"offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
                "commit_timestamp": value.commit_timestamp, "expire_timestamp": value.expire_timestamp}
        return _INT16.pack(version) + OFFSET_COMMIT_VALUE.encode(version, body)
    if version is None:
        version = GROUP_METADATA_VALUE_VERSION
    body = {
        "protocol_type": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
        "leader": value.leader, "current_state_timestamp": value.current_state_timestamp,
        "members": [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
            "session_timeout": m.session_timeout, "subscription": m.subscription, "assignment": m.assignment,
        } for m in value.members],
    }
    return _INT16.pack(version) + GROUP_METADATA_VALUE.encode(version, body)


def offset_commit_record(group: str, topic: str, partition: int, value: OffsetCommitValue) -> tuple[bytes, bytes]:
    return encode_key(OffsetCommitKey(group, topic, partition)), encode_value(value)


def offset_commit_tombstone(group: str, topic: str, partition: int) -> tuple[bytes, None]:
    return encode_key(OffsetCommitKey(group, topic, partition)), None


def group_metadata_record(group: str, value: GroupMetadataValue) -> tuple[bytes, bytes]:
    return encode_key(GroupMetadataKey(group)), encode_value(value)


def group_metadata_tombstone(group: str) -> tuple[bytes, None]:
    return encode_key(GroupMetadataKey(group)), None


# ---------------------------------------------------------------------------------------------- decoding

def _version(buf, what: str) -> int:
    if len(buf) < 2:
        raise MalformedMessage(f"{what} shorter than its version")
    return _INT16.unpack_from(buf, 0)[0]


def _decode_value(schema: RecordSchema, buf) -> dict:
    version = _version(buf, f"{schema.name}")
    lo, hi = schema.versions
    if version < lo:
        raise MalformedMessage(f"{schema.name} version {version} is unknown")
    if version > hi:
        if schema.flexible_from is None:
            raise MalformedMessage(f"{schema.name} version {version} is unknown")
        version = hi  # KIP-915: newer versions only add tagged fields
    return schema.decode(version, buf, 2)


def decode_record(key: bytes, value: bytes | None) -> OffsetCommitRecord | GroupMetadataRecord | None:
    """The typed record of one `__consumer_offsets` entry; None for record types not handled here."""
    record_type = _version(key, "record key")
    if record_type in (0, 1):
        k = OFFSET_COMMIT_KEY.decode(record_type, key, 2)
        okey = OffsetCommitKey(k["group"], k["topic"], k["partition"])
        if value is None:
            return OffsetCommitRecord(okey, None)
        v = _decode_value(OFFSET_COMMIT_VALUE, value)
        return OffsetCommitRecord(okey, OffsetCommitValue(
            offset=v["offset"], metadata=v["metadata"], commit_timestamp=v["commit_timestamp"],
            leader_epoch=v.get("leader_epoch", -1), expire_timestamp=v.get("expire_timestamp", -1)))
    if record_type == GROUP_METADATA_KEY_TYPE:
        gkey = GroupMetadataKey(GROUP_METADATA_KEY.decode(record_type, key, 2)["group"])
        if value is None:
            return GroupMetadataRecord(gkey, None)
        v = _decode_value(GROUP_METADATA_VALUE, value)
        members = tuple(MemberMetadata(
            member_id=m["member_id"], client_id=m["client_id"], client_host=m["client_host"],
            session_timeout=m["session_timeout"], subscription=m["subscription"], assignment=m["assignment"],
            rebalance_timeout=m.get("rebalance_timeout", -1), group_instance_id=m.get("group_instance_id"),
        ) for m in v["members"])
        return GroupMetadataRecord(gkey, GroupMetadataValue(
            protocol_type=v["protocol_type"], generation=v["generation"], protocol=v["protocol"],
            leader=v["leader"], current_state_timestamp=v.get("current_state_timestamp", -1), members=members))
    if record_type < 0:
        raise MalformedMessage(f"negative record type {record_type}")
    return None
