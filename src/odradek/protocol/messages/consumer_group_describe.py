"""ConsumerGroupDescribe (API key 69), from Kafka's ConsumerGroupDescribeRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct, Uuid

TOPIC_PARTITIONS = Struct(
    Field("topic_id", Uuid),
    Field("topic_name", String),
    Field("partitions", Array(Int32)),
    name="TopicPartitions",
)

ASSIGNMENT = Struct(
    Field("topic_partitions", Array(TOPIC_PARTITIONS)),
    name="Assignment",
)

CONSUMER_GROUP_DESCRIBE = Api(
    key=69,
    name="ConsumerGroupDescribe",
    valid_versions=(0, 1),
    flexible_from=0,
    request=[
        Field("group_ids", Array(String)),
        Field("include_authorized_operations", Bool),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("groups", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+", default=None),
            Field("group_id", String),
            Field("group_state", String),
            Field("group_epoch", Int32),
            Field("assignment_epoch", Int32),
            Field("assignor_name", String),
            Field("members", Array(Struct(
                Field("member_id", String),
                Field("instance_id", String, nullable_versions="0+", default=None),
                Field("rack_id", String, nullable_versions="0+", default=None),
                Field("member_epoch", Int32),
                Field("client_id", String),
                Field("client_host", String),
                Field("subscribed_topic_names", Array(String)),
                Field("subscribed_topic_regex", String, nullable_versions="0+", default=None),
                Field("assignment", ASSIGNMENT),
                Field("target_assignment", ASSIGNMENT),
                Field("member_type", Int8, versions="1+", default=-1),
                name="Member",
            ))),
            Field("authorized_operations", Int32, default=-2147483648),
            name="DescribedGroup",
        ))),
    ],
)
