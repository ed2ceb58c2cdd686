"""Declarations of the `__consumer_offsets` record schemas (Kafka 4.0's group-coordinator/*.json), compiled by schema.py.

Each key or value schema is declared once with the same Field/Struct model as the wire messages and wrapped in
an `Api` (only its request side is used), so encoding and decoding at a version go through the same compiled,
bounds-checked codecs. `RecordSchema.encode(version, body)` / `.decode(version, buf, pos)` work on plain dicts
with snake_case keys, exactly like the message codecs. Only the classic-protocol records are declared; the
KIP-848 consumer-group records (types 3+) are recognised by type and skipped by `records.decode_record`.
"""

from __future__ import annotations

from odradek.protocol.schema import Api, Array, Bytes, Field, Int8, Int16, Int32, Int64, String, Struct


class RecordSchema:
    """One record key or value schema: `versions` is Kafka's validVersions, `flexible_from` its first flexible version."""

    def __init__(self, name: str, versions: tuple[int, int], flexible_from: int | None, fields: list[Field]):
        self.name = name
        self.versions = versions
        self.flexible_from = flexible_from
        self._api = Api(key=-1, name=name, valid_versions=versions, flexible_from=flexible_from, request=fields,
                        response=[])

    def encode(self, version: int, body: dict) -> bytes:
        return self._api.encode_request(version, body)

    def decode(self, version: int, buf, pos: int = 0) -> dict:
        return self._api.decode_request(version, buf, pos)


OFFSET_COMMIT_KEY = RecordSchema("OffsetCommitKey", (0, 1), None, [
    Field("group", String, versions="0-1"),
    Field("topic", String, versions="0-1"),
    Field("partition", Int32, versions="0-1"),
])

OFFSET_COMMIT_VALUE = RecordSchema("OffsetCommitValue", (0, 4), 4, [
    Field("offset", Int64),
    Field("leader_epoch", Int32, versions="3+", default=-1),
    Field("metadata", String),
    Field("commit_timestamp", Int64),
    Field("expire_timestamp", Int64, versions="1", default=-1),
])

GROUP_METADATA_KEY = RecordSchema("GroupMetadataKey", (2, 2), None, [
    Field("group", String, versions="2"),
])

GROUP_METADATA_VALUE = RecordSchema("GroupMetadataValue", (0, 4), 4, [
    Field("protocol_type", String),
    Field("generation", Int32),
    Field("protocol", String, nullable_versions="0+"),
    Field("leader", String, nullable_versions="0+"),
    Field("current_state_timestamp", Int64, versions="2+", default=-1),
    Field("members", Array(Struct(
        Field("member_id", String),
        Field("group_instance_id", String, versions="3+", nullable_versions="3+", default=None),
        Field("client_id", String),
        Field("client_host", String),
        Field("rebalance_timeout", Int32, versions="1+", default=-1),
        Field("session_timeout", Int32),
        Field("subscription", Bytes),
        Field("assignment", Bytes),
        name="MemberMetadata",
    ))),
])

# __transaction_state (transaction-coordinator/*.json): the key carries an int16 version (0) and the value one
# (0 or 1; 1 is flexible and adds the tagged fields).
TRANSACTION_LOG_KEY = RecordSchema("TransactionLogKey", (0, 0), None, [
    Field("transactional_id", String, versions="0"),
])

TRANSACTION_LOG_VALUE = RecordSchema("TransactionLogValue", (0, 1), 1, [
    Field("producer_id", Int64),
    Field("previous_producer_id", Int64, versions="1+", tagged_versions="1+", tag=0, default=-1),
    Field("next_producer_id", Int64, versions="1+", tagged_versions="1+", tag=1, default=-1),
    Field("producer_epoch", Int16),
    Field("transaction_timeout_ms", Int32),
    Field("transaction_status", Int8),
    Field("transaction_partitions", Array(Struct(
        Field("topic", String),
        Field("partition_ids", Array(Int32)),
        name="PartitionsSchema",
    )), nullable_versions="0+"),
    Field("transaction_last_update_timestamp_ms", Int64),
    Field("transaction_start_timestamp_ms", Int64),
    Field("client_transaction_version", Int16, versions="1+", tagged_versions="1+", tag=2, default=0),
])
