"""DeleteAcls (API key 31), from Kafka's DeleteAclsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, String, Struct

DELETE_ACLS = Api(
    key=31,
    name="DeleteAcls",
    valid_versions=(1, 3),
    flexible_from=2,
    request=[
        Field("filters", Array(Struct(
            Field("resource_type_filter", Int8),
            Field("resource_name_filter", String, nullable_versions="0+"),
            Field("pattern_type_filter", Int8, versions="1+", default=3),
            Field("principal_filter", String, nullable_versions="0+"),
            Field("host_filter", String, nullable_versions="0+"),
            Field("operation", Int8),
            Field("permission_type", Int8),
            name="DeleteAclsFilter",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("filter_results", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            Field("matching_acls", Array(Struct(
                Field("error_code", Int16),
                Field("error_message", String, nullable_versions="0+"),
                Field("resource_type", Int8),
                Field("resource_name", String),
                Field("pattern_type", Int8, versions="1+", default=3),
                Field("principal", String),
                Field("host", String),
                Field("operation", Int8),
                Field("permission_type", Int8),
                name="DeleteAclsMatchingAcl",
            ))),
            name="DeleteAclsFilterResult",
        ))),
    ],
)
