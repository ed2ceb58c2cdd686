"""The metadata quorum's RPCs on the controller listener: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of
`__cluster_metadata`, FetchSnapshot, and DescribeQuorum (what `kafka-metadata-quorum describe` shows)."""

import time

from odradek.broker.controller_channel import from_controller_side
from odradek.protocol.errors import ErrorCode
from odradek.raft.driver import monotonic_ms
from odradek.raft.wire import METADATA_TOPIC, is_metadata_fetch

ZERO_UUID = bytes(16)


def handle_vote(broker, ctx, request: dict) -> dict:
    return broker.quorum.handle_vote(request)


def handle_begin_quorum_epoch(broker, ctx, request: dict) -> dict:
    return broker.quorum.handle_begin_quorum_epoch(request)


def handle_end_quorum_epoch(broker, ctx, request: dict) -> dict:
    return broker.quorum.handle_end_quorum_epoch(request)


def handle_fetch_snapshot(broker, ctx, request: dict) -> dict:
    return broker.quorum.handle_fetch_snapshot(request)


def handle_metadata_fetch(broker, ctx, request: dict):
    if not is_metadata_fetch(request):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "session_id": 0, "responses": []}
    return broker.quorum.handle_fetch(request)


def handle_describe_quorum(broker, ctx, request: dict):
    """Answered by the quorum leader; other nodes (and client listeners) forward it there."""
    quorum = broker.quorum
    if not from_controller_side(broker, ctx):
        return broker.controller_channel.request(ctx.api_key, ctx.api_version, request)
    core = quorum.core
    if not core.is_leader:
        return {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "error_message": None, "topics": [], "nodes": []}
    # the core keeps monotonic times; DescribeQuorum gives wall-clock ones
    now = monotonic_ms()
    to_wall = time.time_ns() // 1_000_000 - now
    times = core.fetch_times(now)

    def replica(node: int, offset: int) -> dict:
        fetched, caught_up = times.get(node, (-1, -1))
        return {"replica_id": node, "replica_directory_id": ZERO_UUID, "log_end_offset": offset,
                "last_fetch_timestamp": fetched + to_wall if fetched >= 0 else -1,
                "last_caught_up_timestamp": caught_up + to_wall if caught_up >= 0 else -1}

    voters, observers = [[replica(node, offset) for node, offset in sorted(found.items())]
                         for found in (core.voter_offsets(), core.observer_offsets())]
    listener = broker.config["controller.listener.names"].split(",")[0].strip()
    nodes = [{"node_id": endpoint["broker_id"],
              "listeners": [{"name": listener, "host": endpoint["host"], "port": endpoint["port"]}]}
             for endpoint in broker.controller_endpoints()]
    return {"error_code": ErrorCode.NONE, "error_message": None, "nodes": nodes,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "leader_id": quorum.leader_id, "leader_epoch": quorum.epoch, "high_watermark": core.high_watermark,
                "current_voters": voters, "observers": observers}]}]}
