"""AlterPartitionReassignments and ListPartitionReassignments, run by the active controller (forwarded there)."""

from odradek.broker.controller_channel import from_controller_side
from odradek.protocol.errors import ErrorCode, KafkaError


async def handle_alter_partition_reassignments(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    targets = {(t["name"], p["partition_index"]): p["replicas"] for t in request["topics"] for p in t["partitions"]}
    try:
        results = await broker.controller.reassign(targets)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message, "responses": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), (error, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": p} for t, p in by_topic.items()]}


async def handle_list_partition_reassignments(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    wanted = None if request["topics"] is None else [
        (t["name"], index) for t in request["topics"] for index in t["partition_indexes"]]
    try:
        found = broker.controller.reassignments(wanted)
        broker.controller.check_active()
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message, "topics": []}
    by_topic: dict[str, list[dict]] = {}
    for topic, p in found:
        by_topic.setdefault(topic, []).append({
            "partition_index": p.partition, "replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
            "removing_replicas": list(p.removing_replicas)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}
