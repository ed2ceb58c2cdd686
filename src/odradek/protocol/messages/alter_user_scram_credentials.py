"""AlterUserScramCredentials (API key 51), from Kafka's AlterUserScramCredentialsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bytes, Field, Int8, Int16, Int32, String, Struct

ALTER_USER_SCRAM_CREDENTIALS = Api(
    key=51,
    name="AlterUserScramCredentials",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("deletions", Array(Struct(
            Field("name", String),
            Field("mechanism", Int8),
            name="ScramCredentialDeletion",
        ))),
        Field("upsertions", Array(Struct(
            Field("name", String),
            Field("mechanism", Int8),
            Field("iterations", Int32),
            Field("salt", Bytes),
            Field("salted_password", Bytes),
            name="ScramCredentialUpsertion",
        ))),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("results", Array(Struct(
            Field("user", String),
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            name="AlterUserScramCredentialsResult",
        ))),
    ],
)
