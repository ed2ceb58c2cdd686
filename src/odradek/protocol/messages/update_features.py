"""UpdateFeatures (API key 57), from Kafka's UpdateFeaturesRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int8, Int16, Int32, String, Struct

UPDATE_FEATURES = Api(
    key=57,
    name="UpdateFeatures",
    valid_versions=(0, 2),
    flexible_from=0,
    request=[
        Field("timeout_ms", Int32, default=60000),
        Field("feature_updates", Array(Struct(
            Field("feature", String),
            Field("max_version_level", Int16),
            Field("allow_downgrade", Bool, versions="0"),
            Field("upgrade_type", Int8, versions="1+", default=1),
            name="FeatureUpdateKey",
        ))),
        Field("validate_only", Bool, versions="1+", default=False),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("results", Array(Struct(
            Field("feature", String),
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            name="UpdatableFeatureResult",
        )), versions="0-1"),
    ],
)
