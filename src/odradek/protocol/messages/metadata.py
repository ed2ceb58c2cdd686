"""Metadata (API key 3), from Kafka's MetadataRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, String, Struct, Uuid

METADATA = Api(
    key=3,
    name="Metadata",
    valid_versions=(0, 13),
    flexible_from=9,
    request=[
        Field("topics", Array(Struct(
            Field("topic_id", Uuid, versions="10+"),
            Field("name", String, nullable_versions="10+"),
            name="MetadataRequestTopic",
        )), nullable_versions="1+"),
        Field("allow_auto_topic_creation", Bool, versions="4+", default=True),
        Field("include_cluster_authorized_operations", Bool, versions="8-10"),
        Field("include_topic_authorized_operations", Bool, versions="8+"),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="3+"),
        Field("brokers", Array(Struct(
            Field("node_id", Int32),
            Field("host", String),
            Field("port", Int32),
            Field("rack", String, versions="1+", nullable_versions="1+", default=None),
            name="MetadataResponseBroker",
        ))),
        Field("cluster_id", String, versions="2+", nullable_versions="2+", default=None),
        Field("controller_id", Int32, versions="1+", default=-1),
        Field("topics", Array(Struct(
            Field("error_code", Int16),
            Field("name", String, nullable_versions="12+"),
            Field("topic_id", Uuid, versions="10+"),
            Field("is_internal", Bool, versions="1+", default=False),
            Field("partitions", Array(Struct(
                Field("error_code", Int16),
                Field("partition_index", Int32),
                Field("leader_id", Int32),
                Field("leader_epoch", Int32, versions="7+", default=-1),
                Field("replica_nodes", Array(Int32)),
                Field("isr_nodes", Array(Int32)),
                Field("offline_replicas", Array(Int32), versions="5+"),
                name="MetadataResponsePartition",
            ))),
            Field("topic_authorized_operations", Int32, versions="8+", default=-2147483648),
            name="MetadataResponseTopic",
        ))),
        Field("cluster_authorized_operations", Int32, versions="8-10", default=-2147483648),
        Field("error_code", Int16, versions="13+"),
    ],
)
