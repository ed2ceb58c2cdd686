"""DescribeConfigs (API key 32), from Kafka's DescribeConfigsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct

DESCRIBE_CONFIGS = Api(
    key=32,
    name="DescribeConfigs",
    valid_versions=(1, 4),
    flexible_from=4,
    request=[
        Field("resources", Array(Struct(
            Field("resource_type", Int8),
            Field("resource_name", String),
            Field("configuration_keys", Array(String), nullable_versions="0+"),
            name="DescribeConfigsResource",
        ))),
        Field("include_synonyms", Bool, versions="1+", default=False),
        Field("include_documentation", Bool, versions="3+", default=False),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("results", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            Field("resource_type", Int8),
            Field("resource_name", String),
            Field("configs", Array(Struct(
                Field("name", String),
                Field("value", String, nullable_versions="0+"),
                Field("read_only", Bool),
                Field("config_source", Int8, versions="1+", default=-1),
                Field("is_sensitive", Bool),
                Field("synonyms", Array(Struct(
                    Field("name", String, versions="1+"),
                    Field("value", String, versions="1+", nullable_versions="0+"),
                    Field("source", Int8, versions="1+"),
                    name="DescribeConfigsSynonym",
                )), versions="1+"),
                Field("config_type", Int8, versions="3+", default=0),
                Field("documentation", String, versions="3+", nullable_versions="0+"),
                name="DescribeConfigsResourceResult",
            ))),
            name="DescribeConfigsResult",
        ))),
    ],
)
