"""Vote (API key 52), from Kafka's VoteRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct, UInt16, Uuid

VOTE = Api(
    key=52,
    name="Vote",
    valid_versions=(0, 2),
    flexible_from=0,
    request=[
        Field("cluster_id", String, nullable_versions="0+", default=None),
        Field("voter_id", Int32, versions="1+", default=-1),
        Field("topics", Array(Struct(
            Field("topic_name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("replica_epoch", Int32),
                Field("replica_id", Int32),
                Field("replica_directory_id", Uuid, versions="1+"),
                Field("voter_directory_id", Uuid, versions="1+"),
                Field("last_offset_epoch", Int32),
                Field("last_offset", Int64),
                Field("pre_vote", Bool, versions="2+"),
                name="PartitionData",
            ))),
            name="TopicData",
        ))),
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
                Field("vote_granted", Bool),
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
