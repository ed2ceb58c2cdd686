"""The Raft core's messages survive the trip through Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch
codecs: encoded as the driver sends them, decoded as the other side reads them."""

import pytest

from odradek.protocol.messages import API_BY_KEY
from odradek.raft import wire
from odradek.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchError,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"


def request_trip(api_key: int, version: int, body: dict) -> dict:
    api = API_BY_KEY[api_key]
    return api.decode_request(version, memoryview(api.encode_request(version, body)))


def response_trip(api_key: int, version: int, body: dict) -> dict:
    api = API_BY_KEY[api_key]
    encoded = b"".join(bytes(part) for part in api.encode_response(version, body))
    return api.decode_response(version, memoryview(encoded))


def test_vote_round_trip():
    for request in (VoteRequest(src=2, epoch=7, last_epoch=6, end_offset=41),
                    VoteRequest(src=2, epoch=7, last_epoch=6, end_offset=41, pre_vote=True)):
        decoded = request_trip(wire.VOTE, wire.VOTE_VERSION, wire.encode_vote_request(CLUSTER, 3, request))
        assert decoded["cluster_id"] == CLUSTER and decoded["voter_id"] == 3
        assert wire.decode_vote_request(decoded) == request
    for response in (VoteResponse(3, 7, True), VoteResponse(3, 8, False, leader_id=1)):
        body = response_trip(wire.VOTE, wire.VOTE_VERSION, wire.encode_vote_response(response))
        assert wire.decode_vote_response(3, body) == response


def test_begin_and_end_quorum_epoch_round_trip():
    begin = BeginQuorumEpoch(src=1, epoch=4)
    assert wire.decode_begin_request(request_trip(
        wire.BEGIN_QUORUM_EPOCH, wire.BEGIN_VERSION, wire.encode_begin_request(CLUSTER, begin))) == begin
    end = EndQuorumEpoch(src=1, epoch=4, preferred_successors=(3, 2))
    assert wire.decode_end_request(request_trip(
        wire.END_QUORUM_EPOCH, wire.END_VERSION, wire.encode_end_request(CLUSTER, end))) == end


def test_fetch_round_trip_with_entries_and_a_leader_change_record():
    request = FetchRequest(src=3, epoch=5, fetch_offset=10, last_fetched_epoch=4)
    decoded = request_trip(wire.FETCH, wire.FETCH_VERSION, wire.encode_fetch_request(CLUSTER, request, 500))
    assert wire.is_metadata_fetch(decoded) and wire.decode_fetch_request(decoded) == request
    entries = (Entry(5, None), Entry(5, [{"type": "TopicRecord", "name": "t", "topic_id": "x"}]), Entry(5, [1, "two"]))
    response = FetchResponse(1, 5, 1, 10, 4, entries=entries, high_watermark=11)
    body = response_trip(wire.FETCH, wire.FETCH_VERSION, wire.encode_fetch_response(response))
    assert wire.decode_fetch_response(1, request, body) == response


@pytest.mark.parametrize("response", [
    FetchResponse(1, 6, 1, 10, 4, diverging_epoch=3, diverging_end_offset=8, high_watermark=7),
    FetchResponse(2, 9, 1, 10, 4, error=FetchError.FENCED_LEADER_EPOCH),
    FetchResponse(2, 5, -1, 10, 4, error=FetchError.NOT_LEADER),
])
def test_fetch_errors_and_divergence_round_trip(response):
    request = FetchRequest(src=3, epoch=5, fetch_offset=10, last_fetched_epoch=4)
    body = response_trip(wire.FETCH, wire.FETCH_VERSION, wire.encode_fetch_response(response))
    assert wire.decode_fetch_response(response.src, request, body) == response


def test_entries_at_unexpected_offsets_are_refused():
    records = wire.encode_entries(5, (Entry(1, [1]), Entry(1, [2])))
    assert wire.decode_entries(5, records) == (Entry(1, [1]), Entry(1, [2]))
    with pytest.raises(ValueError):
        wire.decode_entries(6, records)
