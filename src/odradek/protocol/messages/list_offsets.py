"""ListOffsets (API key 2), from Kafka's ListOffsetsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, Int64, String, Struct

LIST_OFFSETS = Api(
    key=2,
    name="ListOffsets",
    valid_versions=(1, 10),
    flexible_from=6,
    request=[
        Field("replica_id", Int32),
        Field("isolation_level", Int8, versions="2+"),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("current_leader_epoch", Int32, versions="4+", default=-1),
                Field("timestamp", Int64),
                name="ListOffsetsPartition",
            ))),
            name="ListOffsetsTopic",
        ))),
        Field("timeout_ms", Int32, versions="10+"),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="2+"),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                Field("timestamp", Int64, versions="1+", default=-1),
                Field("offset", Int64, versions="1+", default=-1),
                Field("leader_epoch", Int32, versions="4+", default=-1),
                name="ListOffsetsPartitionResponse",
            ))),
            name="ListOffsetsTopicResponse",
        ))),
    ],
)
