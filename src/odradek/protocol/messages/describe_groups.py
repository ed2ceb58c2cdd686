"""DescribeGroups (API key 15), from Kafka's DescribeGroupsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Bytes, Field, Int16, Int32, String, Struct

DESCRIBE_GROUPS = Api(
    key=15,
    name="DescribeGroups",
    valid_versions=(0, 6),
    flexible_from=5,
    request=[
        Field("groups", Array(String)),
        Field("include_authorized_operations", Bool, versions="3+"),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("groups", Array(Struct(
            Field("error_code", Int16),
            Field("error_message", String, versions="6+", nullable_versions="6+", default=None),
            Field("group_id", String),
            Field("group_state", String),
            Field("protocol_type", String),
            Field("protocol_data", String),
            Field("members", Array(Struct(
                Field("member_id", String),
                Field("group_instance_id", String, versions="4+", nullable_versions="4+", default=None),
                Field("client_id", String),
                Field("client_host", String),
                Field("member_metadata", Bytes),
                Field("member_assignment", Bytes),
                name="DescribedGroupMember",
            ))),
            Field("authorized_operations", Int32, versions="3+", default=-2147483648),
            name="DescribedGroup",
        ))),
    ],
)
