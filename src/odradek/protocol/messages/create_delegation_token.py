"""CreateDelegationToken (API key 38), from Kafka's CreateDelegationTokenRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bytes, Field, Int16, Int32, Int64, String, Struct

CREATE_DELEGATION_TOKEN = Api(
    key=38,
    name="CreateDelegationToken",
    valid_versions=(1, 3),
    flexible_from=2,
    request=[
        Field("owner_principal_type", String, versions="3+", nullable_versions="3+"),
        Field("owner_principal_name", String, versions="3+", nullable_versions="3+"),
        Field("renewers", Array(Struct(
            Field("principal_type", String),
            Field("principal_name", String),
            name="CreatableRenewers",
        ))),
        Field("max_lifetime_ms", Int64),
    ],
    response=[
        Field("error_code", Int16),
        Field("principal_type", String),
        Field("principal_name", String),
        Field("token_requester_principal_type", String, versions="3+"),
        Field("token_requester_principal_name", String, versions="3+"),
        Field("issue_timestamp_ms", Int64),
        Field("expiry_timestamp_ms", Int64),
        Field("max_timestamp_ms", Int64),
        Field("token_id", String),
        Field("hmac", Bytes),
        Field("throttle_time_ms", Int32),
    ],
)
