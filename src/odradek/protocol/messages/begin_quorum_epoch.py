"""BeginQuorumEpoch (API key 53), from Kafka's BeginQuorumEpochRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct, UInt16, Uuid

BEGIN_QUORUM_EPOCH = Api(
    key=53,
    name="BeginQuorumEpoch",
    valid_versions=(0, 1),
    flexible_from=1,
    request=[
        Field("cluster_id", String, nullable_versions="0+", default=None),
        Field("voter_id", Int32, versions="1+", default=-1),
        Field("topics", Array(Struct(
            Field("topic_name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("voter_directory_id", Uuid, versions="1+"),
                Field("leader_id", Int32),
                Field("leader_epoch", Int32),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
        Field("leader_endpoints", Array(Struct(
            Field("name", String, versions="1+"),
            Field("host", String, versions="1+"),
            Field("port", UInt16, versions="1+"),
            name="LeaderEndpoint",
        )), versions="1+"),
    ],
    response=[
        Field("error_code", Int16),
        Field("topics", Array(Struct(
            Field("topic_name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                Field("leader_id", Int32),
                Field("leader_epoch", Int32),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
        Field("node_endpoints", Array(Struct(
            Field("node_id", Int32, versions="1+"),
            Field("host", String, versions="1+"),
            Field("port", UInt16, versions="1+"),
            name="NodeEndpoint",
        )), versions="1+", tagged_versions="1+", tag=0),
    ],
)
