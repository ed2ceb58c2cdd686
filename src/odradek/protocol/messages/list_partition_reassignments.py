"""ListPartitionReassignments (API key 46), from Kafka's ListPartitionReassignmentsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

LIST_PARTITION_REASSIGNMENTS = Api(
    key=46,
    name="ListPartitionReassignments",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("timeout_ms", Int32, default=60000),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partition_indexes", Array(Int32)),
            name="ListPartitionReassignmentsTopics",
        )), nullable_versions="0+", default=None),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("replicas", Array(Int32)),
                Field("adding_replicas", Array(Int32)),
                Field("removing_replicas", Array(Int32)),
                name="OngoingPartitionReassignment",
            ))),
            name="OngoingTopicReassignment",
        ))),
    ],
)
