"""DescribeProducers (API key 61), from Kafka's DescribeProducersRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

DESCRIBE_PRODUCERS = Api(
    key=61,
    name="DescribeProducers",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partition_indexes", Array(Int32)),
            name="TopicRequest",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                Field("error_message", String, nullable_versions="0+", default=None),
                Field("active_producers", Array(Struct(
                    Field("producer_id", Int64),
                    Field("producer_epoch", Int32),
                    Field("last_sequence", Int32, default=-1),
                    Field("last_timestamp", Int64, default=-1),
                    Field("coordinator_epoch", Int32),
                    Field("current_txn_start_offset", Int64, default=-1),
                    name="ProducerState",
                ))),
                name="PartitionResponse",
            ))),
            name="TopicResponse",
        ))),
    ],
)
