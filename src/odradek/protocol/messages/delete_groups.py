"""DeleteGroups (API key 42), from Kafka's DeleteGroupsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

DELETE_GROUPS = Api(
    key=42,
    name="DeleteGroups",
    valid_versions=(0, 2),
    flexible_from=2,
    request=[
        Field("groups_names", Array(String)),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("results", Array(Struct(
            Field("group_id", String),
            Field("error_code", Int16),
            name="DeletableGroupResult",
        ))),
    ],
)
