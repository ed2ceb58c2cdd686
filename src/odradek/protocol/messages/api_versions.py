"""ApiVersions (API key 18), from Kafka's ApiVersionsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct

API_VERSIONS = Api(
    key=18,
    name="ApiVersions",
    valid_versions=(0, 4),
    flexible_from=3,
    request=[
        Field("client_software_name", String, versions="3+"),
        Field("client_software_version", String, versions="3+"),
    ],
    response=[
        Field("error_code", Int16),
        Field("api_keys", Array(Struct(
            Field("api_key", Int16),
            Field("min_version", Int16),
            Field("max_version", Int16),
            name="ApiVersion",
        ))),
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("supported_features", Array(Struct(
            Field("name", String, versions="3+"),
            Field("min_version", Int16, versions="3+"),
            Field("max_version", Int16, versions="3+"),
            name="SupportedFeatureKey",
        )), versions="3+", tagged_versions="3+", tag=0),
        Field("finalized_features_epoch", Int64, versions="3+", tagged_versions="3+", tag=1, default=-1),
        Field("finalized_features", Array(Struct(
            Field("name", String, versions="3+"),
            Field("max_version_level", Int16, versions="3+"),
            Field("min_version_level", Int16, versions="3+"),
            name="FinalizedFeatureKey",
        )), versions="3+", tagged_versions="3+", tag=2),
        Field("zk_migration_ready", Bool, versions="3+", tagged_versions="3+", tag=3, default=False),
    ],
)
