"""FetchSnapshot (API key 59), from Kafka's FetchSnapshotRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import (
    Api,
    Array,
    Field,
    Int16,
    Int32,
    Int64,
    Records,
    String,
    Struct,
    UInt16,
    Uuid,
)

FETCH_SNAPSHOT = Api(
    key=59,
    name="FetchSnapshot",
    valid_versions=(0, 1),
    flexible_from=0,
    request=[
        Field("cluster_id", String, nullable_versions="0+", tagged_versions="0+", tag=0, default=None),
        Field("replica_id", Int32, default=-1),
        Field("max_bytes", Int32, default=2147483647),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("partition", Int32),
                Field("current_leader_epoch", Int32),
                Field("snapshot_id", Struct(
                    Field("end_offset", Int64),
                    Field("epoch", Int32),
                    name="SnapshotId",
                )),
                Field("position", Int64),
                Field("replica_directory_id", Uuid, versions="1+", tagged_versions="1+", tag=0),
                name="PartitionSnapshot",
            ))),
            name="TopicSnapshot",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("topics", Array(Struct(
            Field("name", String),
            Field("partitions", Array(Struct(
                Field("index", Int32),
                Field("error_code", Int16),
                Field("snapshot_id", Struct(
                    Field("end_offset", Int64),
                    Field("epoch", Int32),
                    name="SnapshotId",
                )),
                Field("current_leader", Struct(
                    Field("leader_id", Int32),
                    Field("leader_epoch", Int32),
                    name="LeaderIdAndEpoch",
                ), tagged_versions="0+", tag=0),
                Field("size", Int64),
                Field("position", Int64),
                Field("unaligned_records", Records),
                name="PartitionSnapshot",
            ))),
            name="TopicSnapshot",
        ))),
        Field("node_endpoints", Array(Struct(
            Field("node_id", Int32, versions="1+"),
            Field("host", String, versions="1+"),
            Field("port", UInt16, versions="1+"),
            name="NodeEndpoint",
        )), versions="1+", tagged_versions="1+", tag=0),
    ],
)
