"""DescribeUserScramCredentials (from this node's metadata image) and AlterUserScramCredentials (on the
active controller): KIP-554's management of SCRAM users, as kafka-configs --entity-type users does it."""

from odradek.broker.controller_channel import from_controller_side
from odradek.controller import scram_credentials
from odradek.protocol.errors import ErrorCode, KafkaError


def handle_describe_user_scram_credentials(broker, ctx, request: dict) -> dict:
    users = [user["name"] for user in request["users"]] if request["users"] else None
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "results": scram_credentials.describe(broker.image, users)}


async def handle_alter_user_scram_credentials(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    try:
        results = await broker.controller.alter_scram_credentials(request["deletions"], request["upsertions"])
    except KafkaError as exc:
        users = dict.fromkeys(item["name"] for item in [*request["deletions"], *request["upsertions"]])
        results = [{"user": user, "error_code": exc.code, "error_message": exc.message} for user in users]
    return {"throttle_time_ms": 0, "results": results}
