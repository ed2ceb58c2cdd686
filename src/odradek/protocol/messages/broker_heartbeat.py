"""BrokerHeartbeat (API key 63), from Kafka's BrokerHeartbeatRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, Uuid

BROKER_HEARTBEAT = Api(
    key=63,
    name="BrokerHeartbeat",
    valid_versions=(0, 1),
    flexible_from=0,
    request=[
        Field("broker_id", Int32),
        Field("broker_epoch", Int64, default=-1),
        Field("current_metadata_offset", Int64),
        Field("want_fence", Bool),
        Field("want_shut_down", Bool),
        Field("offline_log_dirs", Array(Uuid), versions="1+", tagged_versions="1+", tag='0'),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("is_caught_up", Bool, default=False),
        Field("is_fenced", Bool, default=True),
        Field("should_shut_down", Bool),
    ],
)
