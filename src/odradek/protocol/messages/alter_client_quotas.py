"""AlterClientQuotas (API key 49), from Kafka's AlterClientQuotasRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Float64, Int16, Int32, String, Struct

ALTER_CLIENT_QUOTAS = Api(
    key=49,
    name="AlterClientQuotas",
    valid_versions=(0, 1),
    flexible_from=1,
    request=[
        Field("entries", Array(Struct(
            Field("entity", Array(Struct(
                Field("entity_type", String),
                Field("entity_name", String, nullable_versions="0+"),
                name="EntityData",
            ))),
            Field("ops", Array(Struct(
                Field("key", String),
                Field("value", Float64),
                Field("remove", Bool),
                name="OpData",
            ))),
            name="EntryData",
        ))),
        Field("validate_only", Bool),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("entries", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            Field("entity", Array(Struct(
                Field("entity_type", String),
                Field("entity_name", String, nullable_versions="0+"),
                name="EntityData",
            ))),
            name="EntryData",
        ))),
    ],
)
