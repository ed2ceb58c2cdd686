"""RenewDelegationToken (API key 39), from Kafka's RenewDelegationTokenRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Bytes, Field, Int16, Int32, Int64

RENEW_DELEGATION_TOKEN = Api(
    key=39,
    name="RenewDelegationToken",
    valid_versions=(1, 2),
    flexible_from=2,
    request=[
        Field("hmac", Bytes),
        Field("renew_period_ms", Int64),
    ],
    response=[
        Field("error_code", Int16),
        Field("expiry_timestamp_ms", Int64),
        Field("throttle_time_ms", Int32),
    ],
)
