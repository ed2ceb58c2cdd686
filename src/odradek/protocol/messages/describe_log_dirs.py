"""DescribeLogDirs (API key 35), from Kafka's DescribeLogDirsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct

DESCRIBE_LOG_DIRS = Api(
    key=35,
    name="DescribeLogDirs",
    valid_versions=(1, 4),
    flexible_from=2,
    request=[
        Field("topics", Array(Struct(
            Field("topic", String),
            Field("partitions", Array(Int32)),
            name="DescribableLogDirTopic",
        )), nullable_versions="0+"),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16, versions="3+"),
        Field("results", Array(Struct(
            Field("error_code", Int16),
            Field("log_dir", String),
            Field("topics", Array(Struct(
                Field("name", String),
                Field("partitions", Array(Struct(
                    Field("partition_index", Int32),
                    Field("partition_size", Int64),
                    Field("offset_lag", Int64),
                    Field("is_future_key", Bool),
                    name="DescribeLogDirsPartition",
                ))),
                name="DescribeLogDirsTopic",
            ))),
            Field("total_bytes", Int64, versions="4+", default=-1),
            Field("usable_bytes", Int64, versions="4+", default=-1),
            name="DescribeLogDirsResult",
        ))),
    ],
)
