"""ConsumerGroupHeartbeat (API key 68), from Kafka's ConsumerGroupHeartbeatRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct, Uuid

TOPIC_PARTITIONS = Struct(
    Field("topic_id", Uuid),
    Field("partitions", Array(Int32)),
    name="TopicPartitions",
)

CONSUMER_GROUP_HEARTBEAT = Api(
    key=68,
    name="ConsumerGroupHeartbeat",
    valid_versions=(0, 1),
    flexible_from=0,
    request=[
        Field("group_id", String),
        Field("member_id", String),
        Field("member_epoch", Int32),
        Field("instance_id", String, nullable_versions="0+", default=None),
        Field("rack_id", String, nullable_versions="0+", default=None),
        Field("rebalance_timeout_ms", Int32, default=-1),
        Field("subscribed_topic_names", Array(String), nullable_versions="0+", default=None),
        Field("subscribed_topic_regex", String, versions="1+", nullable_versions="1+", default=None),
        Field("server_assignor", String, nullable_versions="0+", default=None),
        Field("topic_partitions", Array(Struct(
            Field("topic_id", Uuid),
            Field("partitions", Array(Int32)),
            name="TopicPartitions",
        )), nullable_versions="0+", default=None),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+", default=None),
        Field("member_id", String, nullable_versions="0+", default=None),
        Field("member_epoch", Int32),
        Field("heartbeat_interval_ms", Int32),
        Field("assignment", Struct(
            Field("topic_partitions", Array(TOPIC_PARTITIONS)),
            name="Assignment",
        ), nullable_versions="0+", default=None),
    ],
)
