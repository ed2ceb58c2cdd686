"""Heartbeat (API key 12), from Kafka's HeartbeatRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Field, Int16, Int32, String

HEARTBEAT = Api(
    key=12,
    name="Heartbeat",
    valid_versions=(0, 4),
    flexible_from=4,
    request=[
        Field("group_id", String),
        Field("generation_id", Int32),
        Field("member_id", String),
        Field("group_instance_id", String, versions="3+", nullable_versions="3+", default=None),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("error_code", Int16),
    ],
)
