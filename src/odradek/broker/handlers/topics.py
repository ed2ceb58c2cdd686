"""CreateTopics, DeleteTopics and CreatePartitions: topic administration through the controller.

A node that is not the active controller forwards the request there and relays its answer.
"""

from collections import Counter

from odradek.broker.controller_channel import from_controller_side
from odradek.broker.handlers.configs import describe_topic_configs
from odradek.protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)


async def handle_create_topics(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    counts = Counter(t["name"] for t in request["topics"])
    results = []
    for entry in request["topics"]:
        name = entry["name"]
        result = {"name": name, "topic_id": ZERO_UUID, "error_code": ErrorCode.NONE, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if counts[name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Create topics request from client contains the topic "
                                                            f"'{name}' more than once.")
            configs = {}
            for config in entry["configs"]:
                if config["value"] is None:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {config['name']}")
                configs[config["name"]] = config["value"]
            assignments = {a["partition_index"]: list(a["broker_ids"]) for a in entry["assignments"]}
            if assignments and (entry["num_partitions"] != -1 or entry["replication_factor"] != -1):
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set.")
            validate_only = request.get("validate_only", False)
            topic = await broker.controller.create_topic(name, entry["num_partitions"], entry["replication_factor"],
                                                   assignments, configs, validate_only)
            if topic is not None:
                result["topic_id"] = topic.topic_id
                result["num_partitions"] = len(topic.partitions)
                result["replication_factor"] = len(topic.partitions[0].replicas)
                result["configs"] = [
                    {"name": c["name"], "value": c["value"], "read_only": c["read_only"],
                     "config_source": c["config_source"], "is_sensitive": False}
                    for c in describe_topic_configs(broker, topic, None, False, False)]
            else:
                result["num_partitions"] = entry["num_partitions"] if entry["num_partitions"] != -1 else (
                    len(assignments) or broker.config["num.partitions"])
                result["replication_factor"] = entry["replication_factor"] if entry["replication_factor"] != -1 else (
                    len(next(iter(assignments.values()))) if assignments else broker.config["default.replication.factor"])
        except KafkaError as exc:
            result["error_code"] = exc.code
            result["error_message"] = exc.message
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}


async def handle_delete_topics(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    image = broker.controller.image
    if ctx.api_version >= 6:
        targets = [(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in request["topics"]]
    else:
        targets = [(name, ZERO_UUID) for name in request["topic_names"]]
    responses = []
    for name, topic_id in targets:
        response = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if name is None:
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                name = response["name"] = topic.name
            topic = image.topics.get(name)
            if topic is not None:
                response["topic_id"] = topic.topic_id
            await broker.controller.delete_topic(name)
        except KafkaError as exc:
            response["error_code"] = exc.code
            response["error_message"] = exc.message
        responses.append(response)
    return {"throttle_time_ms": 0, "responses": responses}


async def handle_create_partitions(broker, ctx, request: dict) -> dict:
    if not from_controller_side(broker, ctx):
        return await broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    counts = Counter(t["name"] for t in request["topics"])
    results = []
    for entry in request["topics"]:
        result = {"name": entry["name"], "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if counts[entry["name"]] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            assignments = entry["assignments"]
            await broker.controller.create_partitions(
                entry["name"], entry["count"],
                None if assignments is None else [list(a["broker_ids"]) for a in assignments],
                request.get("validate_only", False))
        except KafkaError as exc:
            result["error_code"] = exc.code
            result["error_message"] = exc.message
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
