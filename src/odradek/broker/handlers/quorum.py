"""The metadata quorum's RPCs on the controller listener: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of
`__cluster_metadata`, FetchSnapshot, and DescribeQuorum (what `kafka-metadata-quorum describe` shows)."""

from odradek.broker.controller_channel import from_controller_side
from odradek.protocol.errors import ErrorCode
from odradek.raft.wire import METADATA_TOPIC, is_metadata_fetch


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
    offsets = quorum.core.voter_offsets()
    if not quorum.core.is_leader:
        return {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "topics": []}
    voters, observers = [[{"replica_id": node, "log_end_offset": offset, "last_fetch_timestamp": -1,
                           "last_caught_up_timestamp": -1} for node, offset in sorted(found.items())]
                         for found in (offsets, quorum.core.observer_offsets())]
    return {"error_code": ErrorCode.NONE, "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
        "partition_index": 0, "error_code": ErrorCode.NONE, "leader_id": quorum.leader_id,
        "leader_epoch": quorum.epoch, "high_watermark": quorum.core.high_watermark, "current_voters": voters,
        "observers": observers}]}]}
