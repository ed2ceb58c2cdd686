"""DescribeTransactions (API key 65), from Kafka's DescribeTransactionsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

DESCRIBE_TRANSACTIONS = Api(
    key=65,
    name="DescribeTransactions",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("transactional_ids", Array(String)),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("transaction_states", Array(Struct(
            Field("error_code", Int16),
            Field("transactional_id", String),
            Field("transaction_state", String),
            Field("transaction_timeout_ms", Int32),
            Field("transaction_start_time_ms", Int64),
            Field("producer_id", Int64),
            Field("producer_epoch", Int16),
            Field("topics", Array(Struct(
                Field("topic", String),
                Field("partitions", Array(Int32)),
                name="TopicData",
            ))),
            name="TransactionState",
        ))),
    ],
)
