"""CreatePartitions (API key 37), from Kafka's CreatePartitionsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, String, Struct

CREATE_PARTITIONS = Api(
    key=37,
    name="CreatePartitions",
    valid_versions=(0, 3),
    flexible_from=2,
    request=[
        Field("topics", Array(Struct(
            Field("name", String),
            Field("count", Int32),
            Field("assignments", Array(Struct(
                Field("broker_ids", Array(Int32)),
                name="CreatePartitionsAssignment",
            )), nullable_versions="0+"),
            name="CreatePartitionsTopic",
        ))),
        Field("timeout_ms", Int32),
        Field("validate_only", Bool),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("results", Array(Struct(
            Field("name", String),
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+", default=None),
            name="CreatePartitionsTopicResult",
        ))),
    ],
)
