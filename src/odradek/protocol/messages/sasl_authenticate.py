"""SaslAuthenticate (API key 36), from Kafka's SaslAuthenticateRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Bytes, Field, Int16, Int64, String

SASL_AUTHENTICATE = Api(
    key=36,
    name="SaslAuthenticate",
    valid_versions=(0, 2),
    flexible_from=2,
    request=[
        Field("auth_bytes", Bytes),
    ],
    response=[
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("auth_bytes", Bytes),
        Field("session_lifetime_ms", Int64, versions="1+", default=0),
    ],
)
