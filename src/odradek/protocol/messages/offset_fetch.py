"""OffsetFetch (API key 9), from Kafka's OffsetFetchRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct

OFFSET_FETCH = Api(
    key=9,
    name="OffsetFetch",
    valid_versions=(1, 9),
    flexible_from=6,
    request=[
        Field("group_id", String, versions="0-7"),
        Field("topics", Array(Struct(
            Field("name", String, versions="0-7"),
            Field("partition_indexes", Array(Int32), versions="0-7"),
            name="OffsetFetchRequestTopic",
        )), versions="0-7", nullable_versions="2-7"),
        Field("groups", Array(Struct(
            Field("group_id", String, versions="8+"),
            Field("member_id", String, versions="9+", nullable_versions="9+", default=None),
            Field("member_epoch", Int32, versions="9+", default=-1),
            Field("topics", Array(Struct(
                Field("name", String, versions="8+"),
                Field("partition_indexes", Array(Int32), versions="8+"),
                name="OffsetFetchRequestTopics",
            )), versions="8+", nullable_versions="8+"),
            name="OffsetFetchRequestGroup",
        )), versions="8+"),
        Field("require_stable", Bool, versions="7+", default=False),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="3+"),
        Field("topics", Array(Struct(
            Field("name", String, versions="0-7"),
            Field("partitions", Array(Struct(
                Field("partition_index", Int32, versions="0-7"),
                Field("committed_offset", Int64, versions="0-7"),
                Field("committed_leader_epoch", Int32, versions="5-7", default=-1),
                Field("metadata", String, versions="0-7", nullable_versions="0-7"),
                Field("error_code", Int16, versions="0-7"),
                name="OffsetFetchResponsePartition",
            )), versions="0-7"),
            name="OffsetFetchResponseTopic",
        )), versions="0-7"),
        Field("error_code", Int16, versions="2-7", default=0),
        Field("groups", Array(Struct(
            Field("group_id", String, versions="8+"),
            Field("topics", Array(Struct(
                Field("name", String, versions="8+"),
                Field("partitions", Array(Struct(
                    Field("partition_index", Int32, versions="8+"),
                    Field("committed_offset", Int64, versions="8+"),
                    Field("committed_leader_epoch", Int32, versions="8+", default=-1),
                    Field("metadata", String, versions="8+", nullable_versions="8+"),
                    Field("error_code", Int16, versions="8+"),
                    name="OffsetFetchResponsePartitions",
                )), versions="8+"),
                name="OffsetFetchResponseTopics",
            )), versions="8+"),
            Field("error_code", Int16, versions="8+", default=0),
            name="OffsetFetchResponseGroup",
        )), versions="8+"),
    ],
)
