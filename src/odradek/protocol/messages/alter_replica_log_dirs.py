"""AlterReplicaLogDirs (API key 34), from Kafka's AlterReplicaLogDirsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

ALTER_REPLICA_LOG_DIRS = Api(
    key=34,
    name="AlterReplicaLogDirs",
    valid_versions=(1, 2),
    flexible_from=2,
    request=[
        Field("dirs", Array(Struct(
            Field("path", String),
            Field("topics", Array(Struct(
                Field("name", String),
                Field("partitions", Array(Int32)),
                name="AlterReplicaLogDirTopic",
            ))),
            name="AlterReplicaLogDir",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("results", Array(Struct(
            Field("topic_name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("error_code", Int16),
                name="AlterReplicaLogDirPartitionResult",
            ))),
            name="AlterReplicaLogDirTopicResult",
        ))),
    ],
)
