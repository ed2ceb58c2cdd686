"""ExpireDelegationToken (API key 40), from Kafka's ExpireDelegationTokenRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Bytes, Field, Int16, Int32, Int64

EXPIRE_DELEGATION_TOKEN = Api(
    key=40,
    name="ExpireDelegationToken",
    valid_versions=(1, 2),
    flexible_from=2,
    request=[
        Field("hmac", Bytes),
        Field("expiry_time_period_ms", Int64),
    ],
    response=[
        Field("error_code", Int16),
        Field("expiry_timestamp_ms", Int64),
        Field("throttle_time_ms", Int32),
    ],
)
