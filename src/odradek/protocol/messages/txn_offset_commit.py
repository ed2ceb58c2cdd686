"""TxnOffsetCommit (API key 28), from Kafka's TxnOffsetCommitRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

TXN_OFFSET_COMMIT = Api(
    key=28,
    name="TxnOffsetCommit",
    valid_versions=(0, 5),
    flexible_from=3,
    request=[
        Field("transactional_id", String),
        Field("group_id", String),
        Field("producer_id", Int64),
        Field("producer_epoch", Int16),
        Field("generation_id", Int32, versions="3+", default=-1),
        Field("member_id", String, versions="3+", default=""),
        Field("group_instance_id", String, versions="3+", nullable_versions="3+", default=None),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("committed_offset", Int64),
                Field("committed_leader_epoch", Int32, versions="2+", default=-1),
                Field("committed_metadata", String, nullable_versions="0+"),
                name="TxnOffsetCommitRequestPartition",
            ))),
            name="TxnOffsetCommitRequestTopic",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                name="TxnOffsetCommitResponsePartition",
            ))),
            name="TxnOffsetCommitResponseTopic",
        ))),
    ],
)
