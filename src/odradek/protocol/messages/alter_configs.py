"""AlterConfigs (API key 33), from Kafka's AlterConfigsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct

ALTER_CONFIGS = Api(
    key=33,
    name="AlterConfigs",
    valid_versions=(0, 2),
    flexible_from=2,
    request=[
        Field("resources", Array(Struct(
            Field("resource_type", Int8),
            Field("resource_name", String),
            Field("configs", Array(Struct(
                Field("name", String),
                Field("value", String, nullable_versions="0+"),
                name="AlterableConfig",
            ))),
            name="AlterConfigsResource",
        ))),
        Field("validate_only", Bool),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("responses", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            Field("resource_type", Int8),
            Field("resource_name", String),
            name="AlterConfigsResourceResponse",
        ))),
    ],
)
