"""OffsetCommit (API key 8), from Kafka's OffsetCommitRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

OFFSET_COMMIT = Api(
    key=8,
    name="OffsetCommit",
    valid_versions=(2, 9),
    flexible_from=8,
    request=[
        Field("group_id", String),
        Field("generation_id_or_member_epoch", Int32, versions="1+", default=-1),
        Field("member_id", String, versions="1+"),
        Field("group_instance_id", String, versions="7+", nullable_versions="7+", default=None),
        Field("retention_time_ms", Int64, versions="2-4", default=-1),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("committed_offset", Int64),
                Field("committed_leader_epoch", Int32, versions="6+", default=-1),
                Field("committed_metadata", String, nullable_versions="0+"),
                name="OffsetCommitRequestPartition",
            ))),
            name="OffsetCommitRequestTopic",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="3+"),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                name="OffsetCommitResponsePartition",
            ))),
            name="OffsetCommitResponseTopic",
        ))),
    ],
)
