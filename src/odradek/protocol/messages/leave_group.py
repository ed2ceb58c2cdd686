"""LeaveGroup (API key 13), from Kafka's LeaveGroupRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

LEAVE_GROUP = Api(
    key=13,
    name="LeaveGroup",
    valid_versions=(0, 5),
    flexible_from=4,
    request=[
        Field("group_id", String),
        Field("member_id", String, versions="0-2"),
        Field("members", Array(Struct(
            Field("member_id", String, versions="3+"),
            Field("group_instance_id", String, versions="3+", nullable_versions="3+", default=None),
            Field("reason", String, versions="5+", nullable_versions="5+", default=None),
            name="MemberIdentity",
        )), versions="3+"),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("error_code", Int16),
        Field("members", Array(Struct(
            Field("member_id", String, versions="3+"),
            Field("group_instance_id", String, versions="3+", nullable_versions="3+"),
            Field("error_code", Int16, versions="3+"),
            name="MemberResponse",
        )), versions="3+"),
    ],
)
