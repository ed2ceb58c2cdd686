"""DeleteRecords (API key 21), from Kafka's DeleteRecordsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, Int64, String, Struct

DELETE_RECORDS = Api(
    key=21,
    name="DeleteRecords",
    valid_versions=(0, 2),
    flexible_from=2,
    request=[
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("offset", Int64),
                name="DeleteRecordsPartition",
            ))),
            name="DeleteRecordsTopic",
        ))),
        Field("timeout_ms", Int32),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32),
                Field("low_watermark", Int64),
                Field("error_code", Int16),
                name="DeleteRecordsPartitionResult",
            ))),
            name="DeleteRecordsTopicResult",
        ))),
    ],
)
