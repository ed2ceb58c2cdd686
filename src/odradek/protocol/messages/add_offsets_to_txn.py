"""AddOffsetsToTxn (API key 25), from Kafka's AddOffsetsToTxnRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Field, Int16, Int32, Int64, String

ADD_OFFSETS_TO_TXN = Api(
    key=25,
    name="AddOffsetsToTxn",
    valid_versions=(0, 4),
    flexible_from=3,
    request=[
        Field("transactional_id", String),
        Field("producer_id", Int64),
        Field("producer_epoch", Int16),
        Field("group_id", String),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
    ],
)
