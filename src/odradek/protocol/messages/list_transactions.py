"""ListTransactions (API key 66), from Kafka's ListTransactionsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

LIST_TRANSACTIONS = Api(
    key=66,
    name="ListTransactions",
    valid_versions=(0, 1),
    flexible_from=0,
    request=[
        Field("state_filters", Array(String)),
        Field("producer_id_filters", Array(Int64)),
        Field("duration_filter", Int64, versions="1+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("unknown_state_filters", Array(String)),
        Field("transaction_states", Array(Struct(
            Field("transactional_id", String),
            Field("producer_id", Int64),
            Field("transaction_state", String),
            name="TransactionState",
        ))),
    ],
)
