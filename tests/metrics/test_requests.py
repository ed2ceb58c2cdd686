"""RequestMetrics: request names (FetchConsumer/FetchFollower) and the time components of each request."""

from odradek.metrics import requests
from odradek.metrics.registry import render
from odradek.protocol.headers import encode_request_header
from odradek.protocol.messages import API_BY_KEY


def frame(api_key: int, version: int, body: dict) -> bytearray:
    header = encode_request_header(api_key, version, 7, "test-client")
    return bytearray(header + API_BY_KEY[api_key].encode_request(version, body))


def fetch_body(replica_id: int) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1024, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [], "forgotten_topics_data": [], "rack_id": ""}


def test_fetches_are_named_by_who_fetches():
    for version in (4, 11, 12):
        assert requests.request_name(frame(1, version, fetch_body(-1)), 1, version) == "FetchConsumer"
        assert requests.request_name(frame(1, version, fetch_body(2)), 1, version) == "FetchFollower"
    assert requests.request_name(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"}),
                                 18, 3) == "ApiVersions"


def test_components_add_up_to_the_total(monkeypatch):
    clock = iter([10.0, 10.002, 10.005, 10.010]).__next__  # started, local done, ready, sent (seconds)
    monkeypatch.setattr(requests, "now", clock)
    metrics = requests.RequestMetrics()
    timing = metrics.begin(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"}), 9.999)
    metrics.local_done(timing)
    metrics.ready(timing)
    metrics.sent([timing])
    got = {(name, labels): value for family in metrics.collect() for name, labels, value in family.samples}
    request = (("request", "ApiVersions"),)
    ms = {component: got[(requests.PREFIX + component + "_sum", request)]
          for component, _ in requests.COMPONENTS}
    assert round(ms["requestqueuetimems"], 6) == 1
    assert round(ms["localtimems"], 6) == 2
    assert round(ms["remotetimems"], 6) == 3
    assert round(ms["responsesendtimems"], 6) == 5
    assert round(ms["totaltimems"], 6) == 11
    assert got[(requests.PREFIX + "totaltimems_count", request)] == 1
    assert got[(requests.PREFIX + "requests_total", (("request", "ApiVersions"), ("version", "3")))] == 1


def test_a_request_without_a_response_ends_when_ready():
    metrics = requests.RequestMetrics()
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": []}
    timing = metrics.begin(frame(0, 9, body), requests.now())
    metrics.local_done(timing)
    metrics.finish_without_response(timing)
    text = render(metrics.collect())
    assert 'kafka_network_requestmetrics_responsesendtimems_sum{request="Produce"} 0' in text
    assert 'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 1' in text


def test_unknown_apis_and_versions_are_not_timed():
    metrics = requests.RequestMetrics()
    assert metrics.begin(bytearray(b"\x03\xe7\x00\x00" + bytes(8)), 0.0) is None  # api key 999
    assert metrics.begin(bytearray(b"\x00\x00\x7f\xff" + bytes(8)), 0.0) is None  # Produce v32767
    assert "request=" not in render(metrics.collect())
