"""SyncGroup (API key 14), from Kafka's SyncGroupRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bytes, Field, Int16, Int32, String, Struct

SYNC_GROUP = Api(
    key=14,
    name="SyncGroup",
    valid_versions=(0, 5),
    flexible_from=4,
    request=[
        Field("group_id", String),
        Field("generation_id", Int32),
        Field("member_id", String),
        Field("group_instance_id", String, versions="3+", nullable_versions="3+", default=None),
        Field("protocol_type", String, versions="5+", nullable_versions="5+", default=None),
        Field("protocol_name", String, versions="5+", nullable_versions="5+", default=None),
        Field("assignments", Array(Struct(
            Field("member_id", String),
            Field("assignment", Bytes),
            name="SyncGroupRequestAssignment",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("error_code", Int16),
        Field("protocol_type", String, versions="5+", nullable_versions="5+", default=None),
        Field("protocol_name", String, versions="5+", nullable_versions="5+", default=None),
        Field("assignment", Bytes),
    ],
)
