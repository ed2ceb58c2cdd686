"""InitProducerId (API key 22), from Kafka's InitProducerIdRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Field, Int16, Int32, Int64, String

INIT_PRODUCER_ID = Api(
    key=22,
    name="InitProducerId",
    valid_versions=(0, 5),
    flexible_from=2,
    request=[
        Field("transactional_id", String, nullable_versions="0+"),
        Field("transaction_timeout_ms", Int32),
        Field("producer_id", Int64, versions="3+", default=-1),
        Field("producer_epoch", Int16, versions="3+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("producer_id", Int64, default=-1),
        Field("producer_epoch", Int16),
    ],
)
