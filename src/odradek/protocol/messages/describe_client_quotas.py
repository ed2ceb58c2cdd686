"""DescribeClientQuotas (API key 48), from Kafka's DescribeClientQuotasRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Float64, Int8, Int16, Int32, String, Struct

DESCRIBE_CLIENT_QUOTAS = Api(
    key=48,
    name="DescribeClientQuotas",
    valid_versions=(0, 1),
    flexible_from=1,
    request=[
        Field("components", Array(Struct(
            Field("entity_type", String),
            Field("match_type", Int8),
            Field("match", String, nullable_versions="0+"),
            name="ComponentData",
        ))),
        Field("strict", Bool),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("entries", Array(Struct(
            Field("entity", Array(Struct(
                Field("entity_type", String),
                Field("entity_name", String, nullable_versions="0+"),
                name="EntityData",
            ))),
            Field("values", Array(Struct(
                Field("key", String),
                Field("value", Float64),
                name="ValueData",
            ))),
            name="EntryData",
        )), nullable_versions="0+"),
    ],
)
