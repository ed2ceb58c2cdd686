"""EndTxn (API key 26), from Kafka's EndTxnRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Bool, Field, Int16, Int32, Int64, String

END_TXN = Api(
    key=26,
    name="EndTxn",
    valid_versions=(0, 5),
    flexible_from=3,
    request=[
        Field("transactional_id", String),
        Field("producer_id", Int64),
        Field("producer_epoch", Int16),
        Field("committed", Bool),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("producer_id", Int64, versions="5+", default=-1),
        Field("producer_epoch", Int16, versions="5+", default=-1),
    ],
)
