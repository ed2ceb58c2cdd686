"""DescribeDelegationToken (API key 41), from Kafka's DescribeDelegationTokenRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bytes, Field, Int16, Int32, Int64, String, Struct

DESCRIBE_DELEGATION_TOKEN = Api(
    key=41,
    name="DescribeDelegationToken",
    valid_versions=(1, 3),
    flexible_from=2,
    request=[
        Field("owners", Array(Struct(
            Field("principal_type", String),
            Field("principal_name", String),
            name="DescribeDelegationTokenOwner",
        )), nullable_versions="0+"),
    ],
    response=[
        Field("error_code", Int16),
        Field("tokens", Array(Struct(
            Field("principal_type", String),
            Field("principal_name", String),
            Field("token_requester_principal_type", String, versions="3+"),
            Field("token_requester_principal_name", String, versions="3+"),
            Field("issue_timestamp", Int64),
            Field("expiry_timestamp", Int64),
            Field("max_timestamp", Int64),
            Field("token_id", String),
            Field("hmac", Bytes),
            Field("renewers", Array(Struct(
                Field("principal_type", String),
                Field("principal_name", String),
                name="DescribedDelegationTokenRenewer",
            ))),
            name="DescribedDelegationToken",
        ))),
        Field("throttle_time_ms", Int32),
    ],
)
