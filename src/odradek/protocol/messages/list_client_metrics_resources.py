"""ListClientMetricsResources (API key 74), from Kafka's ListClientMetricsResourcesRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

LIST_CLIENT_METRICS_RESOURCES = Api(
    key=74,
    name="ListClientMetricsResources",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[

    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("client_metrics_resources", Array(Struct(
            Field("name", String),
            name="ClientMetricsResource",
        ))),
    ],
)
