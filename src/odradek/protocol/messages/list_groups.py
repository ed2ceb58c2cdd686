"""ListGroups (API key 16), from Kafka's ListGroupsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Field, Int16, Int32, String, Struct

LIST_GROUPS = Api(
    key=16,
    name="ListGroups",
    valid_versions=(0, 5),
    flexible_from=3,
    request=[
        Field("states_filter", Array(String), versions="4+"),
        Field("types_filter", Array(String), versions="5+"),
    ],
    response=[
        Field("throttle_time_ms", Int32, versions="1+"),
        Field("error_code", Int16),
        Field("groups", Array(Struct(
            Field("group_id", String),
            Field("protocol_type", String),
            Field("group_state", String, versions="4+"),
            Field("group_type", String, versions="5+"),
            name="ListedGroup",
        ))),
    ],
)
