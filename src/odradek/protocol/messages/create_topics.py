"""CreateTopics (API key 19), from Kafka's CreateTopicsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct, Uuid

CREATE_TOPICS = Api(
    key=19,
    name="CreateTopics",
    valid_versions=(2, 7),
    flexible_from=5,
    request=[
        Field("topics", Array(Struct(
            Field("name", String),
            Field("num_partitions", Int32),
            Field("replication_factor", Int16),
            Field("assignments", Array(Struct(
                Field("partition_index", Int32),
                Field("broker_ids", Array(Int32)),
                name="CreatableReplicaAssignment",
            ))),
            Field("configs", Array(Struct(
                Field("name", String),
                Field("value", String, nullable_versions="0+"),
                name="CreatableTopicConfig",
            ))),
            name="CreatableTopic",
        ))),
        Field("timeout_ms", Int32, default=60000),
        Field("validate_only", Bool, versions="1+", default=False),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="2+"),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("topic_id", Uuid, versions="7+"),
            Field("error_code", Int16),
            Field("error_message", String, versions="1+", nullable_versions="0+"),
            Field("topic_config_error_code", Int16, versions="5+", tagged_versions="5+", tag=0),
            Field("num_partitions", Int32, versions="5+", default=-1),
            Field("replication_factor", Int16, versions="5+", default=-1),
            Field("configs", Array(Struct(
                Field("name", String, versions="5+"),
                Field("value", String, versions="5+", nullable_versions="5+"),
                Field("read_only", Bool, versions="5+"),
                Field("config_source", Int8, versions="5+", default=-1),
                Field("is_sensitive", Bool, versions="5+"),
                name="CreatableTopicConfigs",
            )), versions="5+", nullable_versions="5+"),
            name="CreatableTopicResult",
        ))),
    ],
)
