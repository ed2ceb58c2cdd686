"""AlterPartitionReassignments (API key 45), from Kafka's AlterPartitionReassignmentsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

ALTER_PARTITION_REASSIGNMENTS = Api(
    key=45,
    name="AlterPartitionReassignments",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("timeout_ms", Int32, default=60000),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("replicas", Array(Int32), nullable_versions="0+", default=None),
                name="ReassignablePartition",
            ))),
            name="ReassignableTopic",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("responses", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                Field("error_message", String, nullable_versions="0+"),
                name="ReassignablePartitionResponse",
            ))),
            name="ReassignableTopicResponse",
        ))),
    ],
)
