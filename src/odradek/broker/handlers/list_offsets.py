"""ListOffsets: earliest, latest, max-timestamp and by-timestamp offset look-ups."""

from collections import Counter

from odradek.protocol.errors import ErrorCode, KafkaError


def handle_list_offsets(broker, ctx, request: dict) -> dict:
    isolation_level = request.get("isolation_level", 0)
    asked = Counter((topic["name"], p["partition_index"]) for topic in request["topics"] for p in topic["partitions"])
    answered = set()
    topics = []
    for topic in request["topics"]:
        partitions = []
        for p in topic["partitions"]:
            key = (topic["name"], p["partition_index"])
            if key in answered:
                continue
            answered.add(key)
            if asked[key] > 1:  # Kafka answers a partition asked for twice once, as a bad request
                partitions.append({"partition_index": p["partition_index"], "error_code": ErrorCode.INVALID_REQUEST,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            try:
                timestamp, offset, epoch = broker.replicas.list_offset(
                    topic["name"], p["partition_index"], p["timestamp"], p.get("current_leader_epoch", -1),
                    isolation_level)
                error = ErrorCode.NONE
            except KafkaError as exc:
                timestamp, offset, epoch, error = -1, -1, -1, exc.code
            partitions.append({"partition_index": p["partition_index"], "error_code": error,
                               "timestamp": timestamp, "offset": offset, "leader_epoch": epoch})
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
