"""DeleteTopics (API key 20), from Kafka's DeleteTopicsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct, Uuid

DELETE_TOPICS = Api(
    key=20,
    name="DeleteTopics",
    valid_versions=(1, 6),
    flexible_from=4,
    request=[
        Field("topics", Array(Struct(
            Field("name", String, versions="6+", nullable_versions="6+", default=None),
            Field("topic_id", Uuid, versions="6+"),
            name="DeleteTopicState",
        )), versions="6+"),
        Field("topic_names", Array(String), versions="0-5"),
        Field("timeout_ms", Int32),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("responses", Array(Struct(
            Field("name", String, nullable_versions="6+"),
            Field("topic_id", Uuid, versions="6+"),
            Field("error_code", Int16),
            Field("error_message", String, versions="5+", nullable_versions="5+", default=None),
            name="DeletableTopicResult",
        ))),
    ],
)
