"""DescribeQuorum (API key 55), from Kafka's DescribeQuorumRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct, UInt16, Uuid

REPLICA_STATE = Struct(
    Field("replica_id", Int32),
    Field("replica_directory_id", Uuid, versions="2+"),
    Field("log_end_offset", Int64),
    Field("last_fetch_timestamp", Int64, versions="1+", default=-1),
    Field("last_caught_up_timestamp", Int64, versions="1+", default=-1),
    name="ReplicaState",
)

DESCRIBE_QUORUM = Api(
    key=55,
    name="DescribeQuorum",
    valid_versions=(0, 2),
    flexible_from=0,
    request=[
        Field("topics", Array(Struct(
            Field("topic_name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
    ],
    response=[
        Field("error_code", Int16),
        Field("error_message", String, versions="2+", nullable_versions="2+"),
        Field("topics", Array(Struct(
            Field("topic_name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                Field("error_message", String, versions="2+", nullable_versions="2+"),
                Field("leader_id", Int32),
                Field("leader_epoch", Int32),
                Field("high_watermark", Int64),
                Field("current_voters", Array(REPLICA_STATE)),
                Field("observers", Array(REPLICA_STATE)),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
        Field("nodes", Array(Struct(
            Field("node_id", Int32, versions="2+"),
            Field("listeners", Array(Struct(
                Field("name", String, versions="2+"),
                Field("host", String, versions="2+"),
                Field("port", UInt16, versions="2+"),
                name="Listener",
            )), versions="2+"),
            name="Node",
        )), versions="2+"),
    ],
)
