"""Quota enforcement at the dispatcher: who a client is, which requests are exempt, strict and permissive
controller mutation quotas topic by topic, throttled fetches answered empty, handler time measured without the
time a handler waits, and the connection muted for the throttle time."""

import asyncio
import socket
import time

import pytest

from odradek.broker.quota_enforcement import QuotaEnforcement
from odradek.broker.request_context import RequestContext
from odradek.config import BrokerConfig
from odradek.controller.metadata_image import MetadataImage, client_quota_record
from odradek.network.server import Connection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.file_region import FileRegion


class FakeNode:
    def __init__(self, *quotas: tuple[dict, str, float], **settings: str):
        self.config = BrokerConfig(settings)
        self.image = MetadataImage()
        for entity, key, value in quotas:
            self.image.apply(client_quota_record(tuple(sorted(entity.items())), key, value))


def enforcement(*quotas, **settings) -> QuotaEnforcement:
    enforcer = QuotaEnforcement(FakeNode(*quotas, **settings))
    enforcer.reload()
    return enforcer


def context(api_key: int, version: int, client_id: str = "app", principal: str = "User:ANONYMOUS") -> RequestContext:
    return RequestContext(api_key, version, 1, client_id, Connection("127.0.0.1:5000", "PLAINTEXT", 1,
                                                                       principal=principal))


def create_topics(*topics: tuple[str, int]) -> dict:
    return {"topics": [{"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [],
                        "configs": []} for name, count in topics], "timeout_ms": 30000, "validate_only": False}


def fake_create_topics(calls: list):
    """A CreateTopics handler that creates every topic named once and refuses repeated names."""
    async def handle(ctx, request):
        names = [t["name"] for t in request["topics"]]
        calls.append(names)
        return {"throttle_time_ms": 0, "topics": [
            {"name": name, "error_code": ErrorCode.INVALID_REQUEST if names.count(name) > 1 else ErrorCode.NONE,
             "error_message": None, "num_partitions": t["num_partitions"]}
            for name, t in zip(names, request["topics"], strict=True)]}
    return handle


def run(enforcer: QuotaEnforcement, ctx: RequestContext, handler, request: dict, size: int = 100):
    quota = enforcer.begin(ctx, request, size)
    if quota is None:
        return None, None

    async def dispatch():
        result = quota.handle(handler, ctx, request)
        if asyncio.iscoroutine(result) or hasattr(result, "__await__"):
            result = await result
        return quota.finish(result)
    return quota, asyncio.run(dispatch())


def test_nothing_is_seen_while_no_user_or_client_quota_is_configured():
    enforcer = enforcement(({"ip": None}, "connection_creation_rate", 10))
    assert not enforcer.active


def test_a_strict_mutation_quota_refuses_the_topics_after_the_bucket_is_empty_and_throttles_for_the_deficit():
    enforcer = enforcement(({"client-id": "app"}, "controller_mutation_rate", 1.0))  # a burst of 11 partitions
    calls = []
    ctx = context(19, 7)
    request = create_topics(("a", 5), ("b", 5), ("dup", 1), ("c", 5), ("dup", 1), ("d", 5))
    _, response = run(enforcer, ctx, fake_create_topics(calls), request)
    # One topic at a time; the repeated name in one call, so that it is refused as a duplicate.
    assert calls == [["a"], ["b"], ["dup", "dup"], ["c"]]
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [
        ("a", 0), ("b", 0), ("dup", 42), ("dup", 42), ("c", 0), ("d", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
    assert response["topics"][-1]["error_message"] == "The throttling quota has been exceeded."
    assert 3900 <= response["throttle_time_ms"] <= 4000  # 11 - 15 partitions: 4 s at 1 partition/s
    assert ctx.connection.muted_until > time.monotonic() + 3.5


def test_a_permissive_mutation_quota_takes_everything_and_throttles_for_the_deficit():
    enforcer = enforcement(({"user": None}, "controller_mutation_rate", 2.0))  # a burst of 22 partitions
    calls = []
    _, response = run(enforcer, context(19, 5), fake_create_topics(calls), create_topics(("a", 20), ("b", 10)))
    assert calls == [["a", "b"]]
    assert [t["error_code"] for t in response["topics"]] == [0, 0]
    assert 3900 <= response["throttle_time_ms"] <= 4000  # 8 partitions short at 2 a second


def test_the_quota_user_is_the_principals_name_anonymous_on_unauthenticated_listeners():
    enforcer = enforcement(({"user": "ANONYMOUS"}, "producer_byte_rate", 1000))
    assert enforcer.begin(context(0, 9), {}, 20_000) is not None  # over the 10 s a new client is allowed
    assert enforcer.begin(context(0, 9, principal="User:alice"), {}, 20_000) is None


def test_a_produce_over_its_byte_rate_mutes_the_connection_and_carries_the_throttle_time():
    enforcer = enforcement(({"client-id": "app"}, "producer_byte_rate", 1000), **{"quota.window.num": "2"})
    ctx = context(0, 9)
    quota = enforcer.begin(ctx, {}, 3000)  # 3000 B against 1000 B over one window: 2 s to earn back
    assert quota is not None and 1.9 < ctx.connection.muted_until - time.monotonic() <= 2.0
    assert quota.finish({"throttle_time_ms": 0, "responses": []})["throttle_time_ms"] == 2000
    assert quota.finish(None) is None  # acks=0: no answer, the connection is muted all the same


def test_requests_between_brokers_are_exempt():
    enforcer = enforcement(({"user": None}, "request_percentage", 0.001),
                           ({"user": None}, "consumer_byte_rate", 1))
    assert enforcer.begin(context(1, 17), {"replica_state": {"replica_id": 2}}, 100) is None
    assert enforcer.begin(context(27, 1), {}, 100) is None
    assert enforcer.begin(context(24, 4), {}, 100) is None
    assert enforcer.begin(context(3, 12), {}, 100) is not None


def fetch_body(size: int, session_id: int = 7) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": [
        {"topic": "t", "partitions": [{"partition_index": 0, "records": FileRegion(3, 0, size)}]}]}


@pytest.mark.parametrize("session_epoch, session_id", [(0, 0), (-1, 0), (3, 7)])
def test_a_fetch_is_capped_at_one_windows_worth_and_answered_empty_when_throttled(session_epoch, session_id):
    enforcer = enforcement(({"client-id": "app"}, "consumer_byte_rate", 1000), **{"quota.window.num": "3"})
    request = {"replica_state": {"replica_id": -1}, "max_bytes": 50_000, "min_bytes": 30_000,
               "session_epoch": session_epoch}
    first = enforcer.begin(context(1, 15), request, 100)
    assert (request["max_bytes"], request["min_bytes"]) == (2000, 2000)  # two windows' worth
    assert first.finish(fetch_body(1800))["responses"]
    second = enforcer.begin(context(1, 15), dict(request), 100)
    throttled = second.finish(fetch_body(1800))
    assert throttled["responses"] == [] and throttled["session_id"] == session_id
    assert throttled["throttle_time_ms"] > 0
    # The emptied answer's bytes were taken back: a small fetch later is not throttled for them.
    assert enforcer.clients.record("fetch", "ANONYMOUS", "app", 0, enforcer_now() + 1000) == 0


def enforcer_now() -> int:
    return time.monotonic_ns() // 1_000_000


def test_handler_time_counts_the_time_a_handler_runs_not_the_time_it_waits():
    enforcer = enforcement(({"client-id": "app"}, "request_percentage", 100.0))

    async def handler(ctx, request):
        await asyncio.sleep(0.3)
        end = time.perf_counter() + 0.03
        while time.perf_counter() < end:
            pass
        return {"throttle_time_ms": 0}

    quota, response = run(enforcer, context(3, 12), handler, {})
    assert 0.025 <= quota.busy_s < 0.2, quota.busy_s
    assert response == {"throttle_time_ms": 0}


def test_an_ip_entity_named_by_host_applies_to_its_address_once_resolved_off_the_event_loop():
    address = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)[0][4][0]

    async def resolved() -> float | None:
        enforcer = QuotaEnforcement(FakeNode(({"ip": "localhost"}, "connection_creation_rate", 7)))
        enforcer.reload()
        assert enforcer.connections.configs.connection_rate_for(address) is None  # not yet looked up
        for _ in range(100):
            await asyncio.sleep(0.02)
            if enforcer.connections.configs.connection_rate_for(address) is not None:
                break
        return enforcer.connections.configs.connection_rate_for(address)

    assert asyncio.run(resolved()) == 7
