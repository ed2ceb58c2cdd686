"""BrokerRegistration (API key 62), from Kafka's BrokerRegistrationRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct, UInt16, Uuid

BROKER_REGISTRATION = Api(
    key=62,
    name="BrokerRegistration",
    valid_versions=(0, 4),
    flexible_from=0,
    request=[
        Field("broker_id", Int32),
        Field("cluster_id", String),
        Field("incarnation_id", Uuid),
        Field("listeners", Array(Struct(
            Field("name", String),
            Field("host", String),
            Field("port", UInt16),
            Field("security_protocol", Int16),
            name="Listener",
        ))),
        Field("features", Array(Struct(
            Field("name", String),
            Field("min_supported_version", Int16),
            Field("max_supported_version", Int16),
            name="Feature",
        ))),
        Field("rack", String, nullable_versions="0+"),
        Field("is_migrating_zk_broker", Bool, versions="1+", default=False),
        Field("log_dirs", Array(Uuid), versions="2+"),
        Field("previous_broker_epoch", Int64, versions="3+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("broker_epoch", Int64, default=-1),
    ],
)
