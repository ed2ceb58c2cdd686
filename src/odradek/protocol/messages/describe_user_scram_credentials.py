"""DescribeUserScramCredentials (API key 50), from Kafka's DescribeUserScramCredentialsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int8, Int16, Int32, String, Struct

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    key=50,
    name="DescribeUserScramCredentials",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("users", Array(Struct(
            Field("name", String),
            name="UserName",
        )), nullable_versions="0+"),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("error_message", String, nullable_versions="0+"),
        Field("results", Array(Struct(
            Field("user", String),
            Field("error_code", Int16),
            Field("error_message", String, nullable_versions="0+"),
            Field("credential_infos", Array(Struct(
                Field("mechanism", Int8),
                Field("iterations", Int32),
                name="CredentialInfo",
            ))),
            name="DescribeUserScramCredentialsResult",
        ))),
    ],
)
