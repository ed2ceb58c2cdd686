"""Produce (API key 0), from Kafka's ProduceRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, Records, String, Struct

PRODUCE = Api(
    key=0,
    name="Produce",
    valid_versions=(3, 12),
    flexible_from=9,
    request=[
        Field("transactional_id", String, versions="3+", nullable_versions="3+", default=None),
        Field("acks", Int16),
        Field("timeout_ms", Int32),
        Field("topic_data", Array(Struct(
            Field("name", String),
            Field("partition_data", Array(Struct(
                Field("index", Int32),
                Field("records", Records, nullable_versions="0+"),
                name="PartitionProduceData",
            ))),
            name="TopicProduceData",
        ))),
    ],
    response=[
        Field("responses", Array(Struct(
            Field("name", String),
            Field("partition_responses", Array(Struct(
                Field("index", Int32),
                Field("error_code", Int16),
                Field("base_offset", Int64),
                Field("log_append_time_ms", Int64, versions="2+", default=-1),
                Field("log_start_offset", Int64, versions="5+", default=-1),
                Field("record_errors", Array(Struct(
                    Field("batch_index", Int32, versions="8+"),
                    Field("batch_index_error_message", String, versions="8+", nullable_versions="8+", default=None),
                    name="BatchIndexAndErrorMessage",
                )), versions="8+"),
                Field("error_message", String, versions="8+", nullable_versions="8+", default=None),
                Field("current_leader", Struct(
                    Field("leader_id", Int32, versions="10+", default=-1),
                    Field("leader_epoch", Int32, versions="10+", default=-1),
                    name="LeaderIdAndEpoch",
                ), versions="10+", tagged_versions="10+", tag=0),
                name="PartitionProduceResponse",
            ))),
            name="TopicProduceResponse",
        ))),
        Field("throttle_time_ms", Int32, versions="1+", default=0),
        Field("node_endpoints", Array(Struct(
            Field("node_id", Int32, versions="10+"),
            Field("host", String, versions="10+"),
            Field("port", Int32, versions="10+"),
            Field("rack", String, versions="10+", nullable_versions="10+", default=None),
            name="NodeEndpoint",
        )), versions="10+", tagged_versions="10+", tag=0),
    ],
)
