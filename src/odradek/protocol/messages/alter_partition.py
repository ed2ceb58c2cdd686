"""AlterPartition (API key 56), from Kafka's AlterPartitionRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, Int64, Struct, Uuid

ALTER_PARTITION = Api(
    key=56,
    name="AlterPartition",
    valid_versions=(2, 3),
    flexible_from=0,
    request=[
        Field("broker_id", Int32),
        Field("broker_epoch", Int64, default=-1),
        Field("topics", Array(Struct(
            Field("topic_id", Uuid, versions="2+"),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("leader_epoch", Int32),
                Field("new_isr", Array(Int32), versions="0-2"),
                Field("new_isr_with_epochs", Array(Struct(
                    Field("broker_id", Int32, versions="3+"),
                    Field("broker_epoch", Int64, versions="3+", default=-1),
                    name="BrokerState",
                )), versions="3+"),
                Field("leader_recovery_state", Int8, versions="1+", default=0),
                Field("partition_epoch", Int32),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("topics", Array(Struct(
            Field("topic_id", Uuid, versions="2+"),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                Field("leader_id", Int32),
                Field("leader_epoch", Int32),
                Field("isr", Array(Int32)),
                Field("leader_recovery_state", Int8, versions="1+", default=0),
                Field("partition_epoch", Int32),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
    ],
)
