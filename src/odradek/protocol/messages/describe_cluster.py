"""DescribeCluster (API key 60), from Kafka's DescribeClusterRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct

DESCRIBE_CLUSTER = Api(
    key=60,
    name="DescribeCluster",
    valid_versions=(0, 2),
    flexible_from=0,
    request=[
        Field("include_cluster_authorized_operations", Bool),
        Field("endpoint_type", Int8, versions="1+", default=1),
        Field("include_fenced_brokers", Bool, versions="2+"),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+", default=None),
        Field("endpoint_type", Int8, versions="1+", default=1),
        Field("cluster_id", String),
        Field("controller_id", Int32, default=-1),
        Field("brokers", Array(Struct(
            Field("broker_id", Int32),
            Field("host", String),
            Field("port", Int32),
            Field("rack", String, nullable_versions="0+", default=None),
            Field("is_fenced", Bool, versions="2+"),
            name="DescribeClusterBroker",
        ))),
        Field("cluster_authorized_operations", Int32, default=-2147483648),
    ],
)
