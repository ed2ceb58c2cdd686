"""UnregisterBroker (API key 64), from Kafka's UnregisterBrokerRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Field, Int16, Int32, String

UNREGISTER_BROKER = Api(
    key=64,
    name="UnregisterBroker",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("broker_id", Int32),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
    ],
)
