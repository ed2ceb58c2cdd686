"""OffsetForLeaderEpoch (API key 23), from Kafka's OffsetForLeaderEpochRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

OFFSET_FOR_LEADER_EPOCH = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    valid_versions=(2, 4),
    flexible_from=4,
    request=[
        Field("replica_id", Int32, versions="3+", default=-2),
        Field("topics", Array(Struct(
            Field("topic", String),
            Field("partitions", Array(Struct(
                Field("partition", Int32),
                Field("current_leader_epoch", Int32, versions="2+", default=-1),
                Field("leader_epoch", Int32),
                name="OffsetForLeaderPartition",
            ))),
            name="OffsetForLeaderTopic",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="2+"),
        Field("topics", Array(Struct(
            Field("topic", String),
            Field("partitions", Array(Struct(
                Field("error_code", Int16),
                Field("partition", Int32),
                Field("leader_epoch", Int32, versions="1+", default=-1),
                Field("end_offset", Int64, default=-1),
                name="EpochEndOffset",
            ))),
            name="OffsetForLeaderTopicResult",
        ))),
    ],
)
