"""The Raft core's messages on the Kafka wire: Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch of
`__cluster_metadata`, the APIs KRaft voters use on their controller listeners.

Each log entry travels as one record batch whose base offset is the entry's offset and whose partition
leader epoch is the entry's epoch; a data entry holds one record (its value the entry's JSON), the
leader-change entry is a control batch. A snapshot travels whole in FetchSnapshot, its state as JSON.
"""

from __future__ import annotations

import json

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import CONTROL_FLAG, build_batch, decode_batches
from odradek.raft.messages import (
    NO_LEADER,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchError,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)

METADATA_TOPIC = "__cluster_metadata"
VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, FETCH_SNAPSHOT = 52, 53, 54, 1, 59
VOTE_VERSION, BEGIN_VERSION, END_VERSION, FETCH_VERSION, FETCH_SNAPSHOT_VERSION = 2, 0, 0, 12, 0  # Vote v2: pre-vote

_FETCH_ERRORS = {FetchError.NONE: ErrorCode.NONE, FetchError.FENCED_LEADER_EPOCH: ErrorCode.FENCED_LEADER_EPOCH,
                 FetchError.NOT_LEADER: ErrorCode.NOT_LEADER_OR_FOLLOWER,
                 FetchError.SNAPSHOT_NOT_FOUND: ErrorCode.SNAPSHOT_NOT_FOUND}
_FETCH_ERROR_NAMES = {code: name for name, code in _FETCH_ERRORS.items()}


def _partition(request: dict) -> dict:
    topics = request["topics"]
    if len(topics) != 1 or topics[0].get("topic_name", topics[0].get("topic")) != METADATA_TOPIC \
            or len(topics[0]["partitions"]) != 1:
        raise ValueError(f"expected one partition of {METADATA_TOPIC}")
    return topics[0]["partitions"][0]


def _one_partition(partition: dict) -> list[dict]:
    return [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0, **partition}]}]


# Vote

def encode_vote_request(cluster_id: str, dst: int, message: VoteRequest) -> dict:
    return {"cluster_id": cluster_id, "voter_id": dst, "topics": _one_partition({
        "replica_epoch": message.epoch, "replica_id": message.src, "replica_directory_id": bytes(16),
        "voter_directory_id": bytes(16), "last_offset_epoch": message.last_epoch, "last_offset": message.end_offset,
        "pre_vote": message.pre_vote})}


def decode_vote_request(request: dict) -> VoteRequest:
    p = _partition(request)
    return VoteRequest(p["replica_id"], p["replica_epoch"], p["last_offset_epoch"], p["last_offset"],
                       pre_vote=p.get("pre_vote", False))


def encode_vote_response(message: VoteResponse) -> dict:
    return {"error_code": 0, "topics": _one_partition({
        "error_code": 0, "leader_id": message.leader_id, "leader_epoch": message.epoch,
        "vote_granted": message.granted})}


def decode_vote_response(src: int, response: dict) -> VoteResponse | None:
    p = response["topics"][0]["partitions"][0] if response["topics"] else None
    if response["error_code"] or p is None or p["error_code"]:
        return None
    return VoteResponse(src, p["leader_epoch"], p["vote_granted"], p["leader_id"])


# BeginQuorumEpoch and EndQuorumEpoch (their responses only acknowledge)

def encode_begin_request(cluster_id: str, message: BeginQuorumEpoch) -> dict:
    return {"cluster_id": cluster_id, "topics": _one_partition({"leader_id": message.src,
                                                                 "leader_epoch": message.epoch})}


def decode_begin_request(request: dict) -> BeginQuorumEpoch:
    p = _partition(request)
    return BeginQuorumEpoch(p["leader_id"], p["leader_epoch"])


def encode_end_request(cluster_id: str, message: EndQuorumEpoch) -> dict:
    return {"cluster_id": cluster_id, "topics": _one_partition({
        "leader_id": message.src, "leader_epoch": message.epoch,
        "preferred_successors": list(message.preferred_successors)})}


def decode_end_request(request: dict) -> EndQuorumEpoch:
    p = _partition(request)
    return EndQuorumEpoch(p["leader_id"], p["leader_epoch"], tuple(p["preferred_successors"]))


def encode_epoch_ack(error: ErrorCode, leader_id: int, epoch: int) -> dict:
    return {"error_code": error, "topics": _one_partition({"error_code": 0, "leader_id": leader_id,
                                                           "leader_epoch": epoch})}


# Fetch

def encode_fetch_request(cluster_id: str, message: FetchRequest, max_wait_ms: int) -> dict:
    return {"cluster_id": cluster_id, "replica_id": message.src, "max_wait_ms": max_wait_ms, "min_bytes": 0,
            "max_bytes": 8 * 1024 * 1024, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": METADATA_TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": message.epoch, "fetch_offset": message.fetch_offset,
                "last_fetched_epoch": message.last_fetched_epoch, "log_start_offset": -1,
                "partition_max_bytes": 8 * 1024 * 1024}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def is_metadata_fetch(request: dict) -> bool:
    topics = request["topics"]
    return len(topics) == 1 and topics[0].get("topic") == METADATA_TOPIC


def decode_fetch_request(request: dict) -> FetchRequest:
    topics = request["topics"]
    if len(topics) != 1 or len(topics[0]["partitions"]) != 1:
        raise ValueError(f"expected one partition of {METADATA_TOPIC}")
    p = topics[0]["partitions"][0]
    return FetchRequest(request["replica_id"], p["current_leader_epoch"], p["fetch_offset"], p["last_fetched_epoch"])


def encode_entries(first_offset: int, entries: tuple[Entry, ...]) -> bytes:
    batches = []
    for offset, entry in enumerate(entries, first_offset):
        if entry.data is None:
            batch = build_batch([(None, b"leader-change")], base_offset=offset, is_control=True,
                                partition_leader_epoch=entry.epoch)
        else:
            batch = build_batch([(None, json.dumps(entry.data, separators=(",", ":")).encode())],
                                base_offset=offset, partition_leader_epoch=entry.epoch)
        batches.append(batch)
    return b"".join(batches)


def decode_entries(first_offset: int, records) -> tuple[Entry, ...]:
    entries = []
    for info, batch in decode_batches(bytes(records or b"")):
        if info.base_offset != first_offset + len(entries):
            raise ValueError(f"metadata batch at offset {info.base_offset}, expected {first_offset + len(entries)}")
        data = None if info.attributes & CONTROL_FLAG else json.loads(batch[0].value)
        entries.append(Entry(info.partition_leader_epoch, data))
    return tuple(entries)


def encode_fetch_response(message: FetchResponse) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{
        "topic": METADATA_TOPIC, "partitions": [{
            "partition_index": 0, "error_code": _FETCH_ERRORS[message.error],
            "high_watermark": message.high_watermark, "last_stable_offset": message.high_watermark,
            "log_start_offset": 0,
            "diverging_epoch": {"epoch": message.diverging_epoch, "end_offset": message.diverging_end_offset},
            "current_leader": {"leader_id": message.leader_id, "leader_epoch": message.epoch},
            "snapshot_id": {"end_offset": message.snapshot_end_offset, "epoch": message.snapshot_epoch},
            "aborted_transactions": None, "preferred_read_replica": -1,
            "records": encode_entries(message.fetch_offset, message.entries)}]}]}


def decode_fetch_response(src: int, request: FetchRequest, response: dict) -> FetchResponse | None:
    if response["error_code"] or not response["responses"]:
        return None
    p = response["responses"][0]["partitions"][0]
    error = _FETCH_ERROR_NAMES.get(p["error_code"])
    if error is None:
        return None
    leader = p["current_leader"]
    diverging = p["diverging_epoch"]
    return FetchResponse(
        src, leader["leader_epoch"], leader["leader_id"] if leader["leader_id"] >= 0 else NO_LEADER,
        request.fetch_offset, request.last_fetched_epoch, error=error,
        entries=decode_entries(request.fetch_offset, p["records"]), high_watermark=p["high_watermark"],
        diverging_epoch=diverging["epoch"], diverging_end_offset=diverging["end_offset"],
        snapshot_end_offset=p["snapshot_id"]["end_offset"], snapshot_epoch=p["snapshot_id"]["epoch"])


# FetchSnapshot

def encode_fetch_snapshot_request(cluster_id: str, message: FetchSnapshotRequest) -> dict:
    return {"cluster_id": cluster_id, "replica_id": message.src, "max_bytes": 0x7FFFFFFF, "topics": [{
        "name": METADATA_TOPIC, "partitions": [{
            "partition": 0, "current_leader_epoch": message.epoch, "position": message.position,
            "snapshot_id": {"end_offset": message.snapshot_end_offset, "epoch": message.snapshot_epoch}}]}]}


def decode_fetch_snapshot_request(request: dict) -> FetchSnapshotRequest:
    topics = request["topics"]
    if len(topics) != 1 or topics[0]["name"] != METADATA_TOPIC or len(topics[0]["partitions"]) != 1:
        raise ValueError(f"expected one partition of {METADATA_TOPIC}")
    p = topics[0]["partitions"][0]
    return FetchSnapshotRequest(request["replica_id"], p["current_leader_epoch"], p["snapshot_id"]["end_offset"],
                                p["snapshot_id"]["epoch"], p["position"])


def encode_fetch_snapshot_response(message: FetchSnapshotResponse) -> dict:
    state = b"" if message.error != FetchError.NONE else json.dumps(message.state, separators=(",", ":")).encode()
    return {"throttle_time_ms": 0, "error_code": 0, "topics": [{"name": METADATA_TOPIC, "partitions": [{
        "index": 0, "error_code": _FETCH_ERRORS[message.error],
        "snapshot_id": {"end_offset": message.snapshot_end_offset, "epoch": message.snapshot_epoch},
        "current_leader": {"leader_id": message.leader_id, "leader_epoch": message.epoch},
        "size": len(state), "position": 0, "unaligned_records": state}]}]}


def decode_fetch_snapshot_response(src: int, response: dict) -> FetchSnapshotResponse | None:
    if response["error_code"] or not response["topics"]:
        return None
    p = response["topics"][0]["partitions"][0]
    error = _FETCH_ERROR_NAMES.get(p["error_code"])
    if error is None or p["size"] != len(p["unaligned_records"] or b"") or p["position"] != 0:
        return None  # an unknown error, or a chunk: we only ever ask for the whole snapshot
    leader = p["current_leader"]
    state = json.loads(bytes(p["unaligned_records"])) if error == FetchError.NONE else None
    return FetchSnapshotResponse(src, leader["leader_epoch"], leader["leader_id"], p["snapshot_id"]["end_offset"],
                                 p["snapshot_id"]["epoch"], state, error)
