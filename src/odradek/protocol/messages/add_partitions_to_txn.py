"""AddPartitionsToTxn (API key 24), from Kafka's AddPartitionsToTxnRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct

ADD_PARTITIONS_TO_TXN_TOPIC = Struct(
    Field("name", String),
    Field("partitions", Array(Int32)),
    name="AddPartitionsToTxnTopic",
)

ADD_PARTITIONS_TO_TXN_PARTITION_RESULT = Struct(
    Field("partition_index", Int32),
    Field("partition_error_code", Int16),
    name="AddPartitionsToTxnPartitionResult",
)

ADD_PARTITIONS_TO_TXN_TOPIC_RESULT = Struct(
    Field("name", String),
    Field("results_by_partition", Array(ADD_PARTITIONS_TO_TXN_PARTITION_RESULT)),
    name="AddPartitionsToTxnTopicResult",
)

ADD_PARTITIONS_TO_TXN = Api(
    key=24,
    name="AddPartitionsToTxn",
    valid_versions=(0, 5),
    flexible_from=3,
    request=[
        Field("transactions", Array(Struct(
            Field("transactional_id", String, versions="4+"),
            Field("producer_id", Int64, versions="4+"),
            Field("producer_epoch", Int16, versions="4+"),
            Field("verify_only", Bool, versions="4+", default=False),
            Field("topics", Array(ADD_PARTITIONS_TO_TXN_TOPIC), versions="4+"),
            name="AddPartitionsToTxnTransaction",
        )), versions="4+"),
        Field("v3_and_below_transactional_id", String, versions="0-3"),
        Field("v3_and_below_producer_id", Int64, versions="0-3"),
        Field("v3_and_below_producer_epoch", Int16, versions="0-3"),
        Field("v3_and_below_topics", Array(ADD_PARTITIONS_TO_TXN_TOPIC), versions="0-3"),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16, versions="4+"),
        Field("results_by_transaction", Array(Struct(
            Field("transactional_id", String, versions="4+"),
            Field("topic_results", Array(ADD_PARTITIONS_TO_TXN_TOPIC_RESULT), versions="4+"),
            name="AddPartitionsToTxnResult",
        )), versions="4+"),
        Field("results_by_topic_v3_and_below", Array(ADD_PARTITIONS_TO_TXN_TOPIC_RESULT), versions="0-3"),
    ],
)
