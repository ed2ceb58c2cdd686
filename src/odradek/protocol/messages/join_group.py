"""JoinGroup (API key 11), from Kafka's JoinGroupRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Bytes, Field, Int16, Int32, String, Struct

JOIN_GROUP = Api(
    key=11,
    name="JoinGroup",
    valid_versions=(2, 9),
    flexible_from=6,
    request=[
        Field("group_id", String),
        Field("session_timeout_ms", Int32),
        Field("rebalance_timeout_ms", Int32, versions="1+", default=-1),
        Field("member_id", String),
        Field("group_instance_id", String, versions="5+", nullable_versions="5+", default=None),
        Field("protocol_type", String),
        Field("protocols", Array(Struct(
            Field("name", String),
            Field("metadata", Bytes),
            name="JoinGroupRequestProtocol",
        ))),
        Field("reason", String, versions="8+", nullable_versions="8+", default=None),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="2+"),
        Field("error_code", Int16),
        Field("generation_id", Int32, default=-1),
        Field("protocol_type", String, versions="7+", nullable_versions="7+", default=None),
        Field("protocol_name", String, nullable_versions="7+"),
        Field("leader", String),
        Field("skip_assignment", Bool, versions="9+", default=False),
        Field("member_id", String),
        Field("members", Array(Struct(
            Field("member_id", String),
            Field("group_instance_id", String, versions="5+", nullable_versions="5+", default=None),
            Field("metadata", Bytes),
            name="JoinGroupResponseMember",
        ))),
    ],
)
