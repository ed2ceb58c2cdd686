"""OffsetDelete (API key 47), from Kafka's OffsetDeleteRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

OFFSET_DELETE = Api(
    key=47,
    name="OffsetDelete",
    valid_versions=(0, 0),
    flexible_from=None,
    request=[
        Field("group_id", String),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                name="OffsetDeleteRequestPartition",
            ))),
            name="OffsetDeleteRequestTopic",
        ))),
    ],
    response=[
        Field("error_code", Int16),
        Field("throttle_time_ms", Int32),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                name="OffsetDeleteResponsePartition",
            ))),
            name="OffsetDeleteResponseTopic",
        ))),
    ],
)
