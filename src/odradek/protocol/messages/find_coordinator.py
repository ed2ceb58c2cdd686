"""FindCoordinator (API key 10), from Kafka's FindCoordinatorRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, String, Struct

FIND_COORDINATOR = Api(
    key=10,
    name="FindCoordinator",
    valid_versions=(0, 6),
    flexible_from=3,
    request=[
        Field("key", String, versions="0-3"),
        Field("key_type", Int8, versions="1+", default=0),
        Field("coordinator_keys", Array(String), versions="4+"),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("error_code", Int16, versions="0-3"),
        Field("error_message", String, versions="1-3", nullable_versions="1-3"),
        Field("node_id", Int32, versions="0-3"),
        Field("host", String, versions="0-3"),
        Field("port", Int32, versions="0-3"),
        Field("coordinators", Array(Struct(
            Field("key", String, versions="4+"),
            Field("node_id", Int32, versions="4+"),
            Field("host", String, versions="4+"),
            Field("port", Int32, versions="4+"),
            Field("error_code", Int16, versions="4+"),
            Field("error_message", String, versions="4+", nullable_versions="4+"),
            name="Coordinator",
        )), versions="4+"),
    ],
)
