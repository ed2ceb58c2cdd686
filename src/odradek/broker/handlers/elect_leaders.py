"""ElectLeaders: preferred or unclean leader election, run by the active controller (forwarded there)."""

from odradek.broker.controller_channel import from_controller_side
from odradek.protocol.errors import ErrorCode, KafkaError

PREFERRED, UNCLEAN = 0, 1


async def handle_elect_leaders(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    election_type = request.get("election_type", PREFERRED)
    requested = request["topic_partitions"]
    partitions = None if requested is None else [(t["topic"], p) for t in requested for p in t["partitions"]]
    if election_type not in (PREFERRED, UNCLEAN):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": []}
    try:
        results = await broker.controller.elect_leaders(election_type == UNCLEAN, partitions)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "replica_election_results": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), (error, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": index, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "replica_election_results": [{"topic": t, "partition_result": r} for t, r in by_topic.items()]}
