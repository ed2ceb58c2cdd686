"""ElectLeaders (API key 43), from Kafka's ElectLeadersRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, String, Struct

ELECT_LEADERS = Api(
    key=43,
    name="ElectLeaders",
    valid_versions=(0, 2),
    flexible_from=2,
    request=[
        Field("election_type", Int8, versions="1+"),
        Field("topic_partitions", Array(Struct(
            Field("topic", String),
            Field("partitions", Array(Int32)),
            name="TopicPartitions",
        )), nullable_versions="0+"),
        Field("timeout_ms", Int32, default=60000),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16, versions="1+"),
        Field("replica_election_results", Array(Struct(
            Field("topic", String),
            Field("partition_result", Array(Struct(
                Field("partition_id", Int32),
                Field("error_code", Int16),
                Field("error_message", String, nullable_versions="0+"),
                name="PartitionResult",
            ))),
            name="ReplicaElectionResult",
        ))),
    ],
)
