"""DeleteRecords: move a partition's log start offset forward."""

from odradek.protocol.errors import ErrorCode, KafkaError


def handle_delete_records(broker, ctx, request: dict) -> dict:
    topics = []
    for topic in request["topics"]:
        partitions = []
        for p in topic["partitions"]:
            try:
                low_watermark = broker.replicas.delete_records(topic["name"], p["partition_index"], p["offset"])
                error = ErrorCode.NONE
            except KafkaError as exc:
                low_watermark, error = -1, exc.code
            partitions.append({"partition_index": p["partition_index"], "low_watermark": low_watermark,
                               "error_code": error})
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
