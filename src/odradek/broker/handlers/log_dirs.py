"""DescribeLogDirs (each log directory with the size of every partition it holds, a partition moving there
as a future replica; an offline one with KAFKA_STORAGE_ERROR and no partitions) and AlterReplicaLogDirs
(move replicas between this node's log dirs, see log_dir_mover.py)."""

import os
from collections import defaultdict

from odradek.protocol.errors import ErrorCode


def handle_describe_log_dirs(broker, ctx, request: dict) -> dict:
    wanted = None
    if request["topics"] is not None:
        wanted = {(t["topic"], p) for t in request["topics"] for p in t["partitions"]}
    by_dir: dict[str, dict[str, list]] = {d: defaultdict(list) for d in broker.log_manager.log_dirs}
    for log in broker.log_manager.logs():
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        by_dir[broker.log_manager.dir_of(log)][log.topic].append(
            {"partition_index": log.partition, "partition_size": log.size_in_bytes(), "offset_lag": 0,
             "is_future_key": False})
        moving = broker.log_manager.future(log.topic, log.partition)
        if moving is not None:
            future, directory = moving
            by_dir[directory][log.topic].append(
                {"partition_index": log.partition, "partition_size": future.size_in_bytes(),
                 "offset_lag": max(0, log.log_end_offset - future.log_end_offset), "is_future_key": True})
    results = []
    for directory, topics in by_dir.items():
        if directory in broker.log_manager.offline_dirs:
            results.append({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": directory, "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        try:
            stats = os.statvfs(directory)
            total, usable, error = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize, ErrorCode.NONE
        except OSError:
            total, usable, error = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
        results.append({"error_code": error, "log_dir": os.path.abspath(directory),
                        "topics": [{"name": name, "partitions": parts} for name, parts in sorted(topics.items())],
                        "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def handle_alter_replica_log_dirs(broker, ctx, request: dict) -> dict:
    results: dict[str, list] = {}
    for directory in request["dirs"]:
        for topic in directory["topics"]:
            for index in topic["partitions"]:
                error = broker.log_dir_mover.alter(topic["name"], index, directory["path"])
                results.setdefault(topic["name"], []).append({"partition_index": index, "error_code": error})
    return {"throttle_time_ms": 0, "results": [{"topic_name": name, "partitions": parts}
                                               for name, parts in results.items()]}
