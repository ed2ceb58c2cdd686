"""IncrementalAlterConfigs (API key 44), from Kafka's IncrementalAlterConfigsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct

INCREMENTAL_ALTER_CONFIGS = Api(
    key=44,
    name="IncrementalAlterConfigs",
    valid_versions=(0, 1),
    flexible_from=1,
    request=[
        Field("resources", Array(Struct(
            Field("resource_type", Int8),
            Field("resource_name", String),
            Field("configs", Array(Struct(
                Field("name", String),
                Field("config_operation", Int8),
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
