"""OffsetForLeaderEpoch: the end offset of a leader epoch, so clients and followers can detect divergence."""

from odradek.protocol.errors import ErrorCode, KafkaError


def handle_offset_for_leader_epoch(broker, ctx, request: dict) -> dict:
    topics = []
    for topic in request["topics"]:
        partitions = []
        for p in topic["partitions"]:
            entry = {"partition": p["partition"], "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            try:
                partition = broker.replicas.partition(topic["topic"], p["partition"])
                partition.check_leader_epoch(p.get("current_leader_epoch", -1))
                entry["leader_epoch"], entry["end_offset"] = partition.log.end_offset_for_epoch(p["leader_epoch"])
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": topic["topic"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
