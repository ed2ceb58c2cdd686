"""DescribeAcls (API key 29), from Kafka's DescribeAclsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, String, Struct

DESCRIBE_ACLS = Api(
    key=29,
    name="DescribeAcls",
    valid_versions=(1, 3),
    flexible_from=2,
    request=[
        Field("resource_type_filter", Int8),
        Field("resource_name_filter", String, nullable_versions="0+"),
        Field("pattern_type_filter", Int8, versions="1+", default=3),
        Field("principal_filter", String, nullable_versions="0+"),
        Field("host_filter", String, nullable_versions="0+"),
        Field("operation", Int8),
        Field("permission_type", Int8),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("resources", Array(Struct(
            Field("resource_type", Int8),
            Field("resource_name", String),
            Field("pattern_type", Int8, versions="1+", default=3),
            Field("acls", Array(Struct(
                Field("principal", String),
                Field("host", String),
                Field("operation", Int8),
                Field("permission_type", Int8),
                name="AclDescription",
            ))),
            name="DescribeAclsResource",
        ))),
    ],
)
