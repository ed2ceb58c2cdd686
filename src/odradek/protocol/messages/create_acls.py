"""CreateAcls (API key 30), from Kafka's CreateAclsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, String, Struct

CREATE_ACLS = Api(
    key=30,
    name="CreateAcls",
    valid_versions=(1, 3),
    flexible_from=2,
    request=[
        Field("creations", Array(Struct(
            Field("resource_type", Int8),
            Field("resource_name", String),
            Field("resource_pattern_type", Int8, versions="1+", default=3),
            Field("principal", String),
            Field("host", String),
            Field("operation", Int8),
            Field("permission_type", Int8),
            name="AclCreation",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("results", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            name="AclCreationResult",
        ))),
    ],
)
