"""SaslHandshake (API key 17), from Kafka's SaslHandshakeRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, String

SASL_HANDSHAKE = Api(
    key=17,
    name="SaslHandshake",
    valid_versions=(0, 1),
    flexible_from=None,
    request=[
        Field("mechanism", String),
    ],
    response=[
        Field("error_code", Int16),
        Field("mechanisms", Array(String)),
    ],
)
