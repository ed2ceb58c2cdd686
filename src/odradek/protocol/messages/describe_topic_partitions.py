"""DescribeTopicPartitions (API key 75), from Kafka's DescribeTopicPartitionsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, String, Struct, Uuid

DESCRIBE_TOPIC_PARTITIONS = Api(
    key=75,
    name="DescribeTopicPartitions",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("topics", Array(Struct(
            Field("name", String),
            name="TopicRequest",
        ))),
        Field("response_partition_limit", Int32, default=2000),
        Field("cursor", Struct(
            Field("topic_name", String),
            Field("partition_index", Int32),
            name="Cursor",
        ), nullable_versions="0+", default=None),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("topics", Array(Struct(
            Field("error_code", Int16),
            Field("name", String, nullable_versions="0+"),
            Field("topic_id", Uuid),
            Field("is_internal", Bool, default=False),
            Field("partitions", Array(Struct(
                Field("error_code", Int16),
                Field("partition_index", Int32),
                Field("leader_id", Int32),
                Field("leader_epoch", Int32, default=-1),
                Field("replica_nodes", Array(Int32)),
                Field("isr_nodes", Array(Int32)),
                Field("eligible_leader_replicas", Array(Int32), nullable_versions="0+", default=None),
                Field("last_known_elr", Array(Int32), nullable_versions="0+", default=None),
                Field("offline_replicas", Array(Int32)),
                name="DescribeTopicPartitionsResponsePartition",
            ))),
            Field("topic_authorized_operations", Int32, default=-2147483648),
            name="DescribeTopicPartitionsResponseTopic",
        ))),
        Field("next_cursor", Struct(
            Field("topic_name", String),
            Field("partition_index", Int32),
            name="Cursor",
        ), nullable_versions="0+", default=None),
    ],
)
