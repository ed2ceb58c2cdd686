"""The node-to-node protocol client against a real node: pipelining, records, lost connections, timeouts."""

import asyncio
import functools
import signal
import uuid

import pytest
import uvloop

from odradek.network.client import NodeClients, NodeConnection, UnknownNodeError
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch, decode_batches
from tests.conftest import free_port

API_VERSIONS, METADATA, CREATE_TOPICS, PRODUCE, FETCH = 18, 3, 19, 0, 1


def run(coroutine):
    return uvloop.run(coroutine)  # the loop nodes run on


def connect(node) -> NodeConnection:
    return NodeConnection("127.0.0.1", node.port, client_id="odradek-node-test", connect_timeout_s=2.0)


def metadata_body(*topics: str) -> dict:
    return {"topics": [{"topic_id": bytes(16), "name": name} for name in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


async def create_topic(request, name: str) -> None:
    """`request` is NodeConnection.request or NodeClients.request bound to a node id."""
    response = await request(CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False}, timeout_s=10)
    assert response["topics"][0]["error_code"] == ErrorCode.NONE, response


def fetch_body(topic: str, offset: int, max_wait_ms: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def test_api_versions_v3_lists_the_apis_the_node_serves(node):
    async def scenario():
        connection = connect(node)
        try:
            return await connection.request(API_VERSIONS, 3, {
                "client_software_name": "odradek", "client_software_version": "0"}, timeout_s=5)
        finally:
            connection.close()

    response = run(scenario())
    assert response["error_code"] == ErrorCode.NONE
    served = {api["api_key"]: (api["min_version"], api["max_version"]) for api in response["api_keys"]}
    assert served[FETCH][0] <= 12 <= served[FETCH][1]
    assert served[METADATA][0] <= 12 <= served[METADATA][1]


def test_metadata_v12_names_the_node_as_broker(node):
    async def scenario():
        connection = connect(node)
        try:
            return await connection.request(METADATA, 12, metadata_body(), timeout_s=5)
        finally:
            connection.close()

    response = run(scenario())
    assert [(b["host"], b["port"]) for b in response["brokers"]] == [("127.0.0.1", node.port)]


def test_records_produced_with_v9_come_back_from_fetch_v12(node):
    topic = f"client-{uuid.uuid4().hex[:6]}"
    values = [b"a", b"bb", b"c" * 10_000]

    async def scenario():
        connection = connect(node)
        try:
            await create_topic(connection.request, topic)
            produced = await connection.request(PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic,
                "partition_data": [{"index": 0, "records": build_batch([(None, v) for v in values])}]}]},
                timeout_s=10)
            fetched = await connection.request(FETCH, 12, fetch_body(topic, 0), timeout_s=10)
            return produced, fetched
        finally:
            connection.close()

    produced, fetched = run(scenario())
    assert produced["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    partition = fetched["responses"][0]["partitions"][0]
    assert partition["error_code"] == ErrorCode.NONE and partition["high_watermark"] == 3
    # The loop and the connection are gone: records must still read from the response's own frame.
    assert [r.value for _, batch in decode_batches(partition["records"]) for r in batch] == values


def test_fifty_concurrent_requests_share_one_connection_and_each_gets_its_own_answer(node):
    topics = [f"missing-{i}" for i in range(50)]

    async def scenario():
        connection = connect(node)
        try:
            await connection.request(METADATA, 12, metadata_body(), timeout_s=5)
            writer = connection._writer
            responses = await asyncio.gather(
                *(connection.request(METADATA, 12, metadata_body(topic), timeout_s=10) for topic in topics))
            assert connection._writer is writer, "the requests must not have opened another connection"
            return responses
        finally:
            connection.close()

    responses = run(scenario())
    assert [r["topics"][0]["name"] for r in responses] == topics
    assert {r["topics"][0]["error_code"] for r in responses} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_killed_node_fails_requests_until_it_restarts_then_the_client_reconnects(node):
    topic = f"kill-{uuid.uuid4().hex[:6]}"

    async def scenario():
        connection = connect(node)
        try:
            await create_topic(connection.request, topic)
            long_poll = asyncio.create_task(
                connection.request(FETCH, 12, fetch_body(topic, 0, max_wait_ms=30_000), timeout_s=60))
            await asyncio.sleep(0.3)  # the fetch is now parked in the node
            assert not long_poll.done()
            node.kill()
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(long_poll, 5)
            with pytest.raises(ConnectionError):
                await connection.request(METADATA, 12, metadata_body(), timeout_s=5)
            await asyncio.to_thread(node.start)
            response = await connection.request(METADATA, 12, metadata_body(topic), timeout_s=10)
            assert response["topics"][0]["error_code"] == ErrorCode.NONE
        finally:
            connection.close()

    run(scenario())


def test_connecting_to_a_closed_port_fails_fast_with_connection_error():
    async def scenario():
        connection = NodeConnection("127.0.0.1", free_port(), client_id="odradek-node-test")
        # refused at once: a ConnectionError, not the TimeoutError of waiting out the 5 s
        with pytest.raises(ConnectionError, match="cannot connect"):
            await connection.request(METADATA, 12, metadata_body(), timeout_s=5)

    run(scenario())


def test_frozen_node_times_out_the_request_and_fails_the_others_on_its_connection(node):
    async def scenario():
        connection = connect(node)
        try:
            await connection.request(METADATA, 12, metadata_body(), timeout_s=5)
            node.proc.send_signal(signal.SIGSTOP)
            try:
                patient = asyncio.create_task(connection.request(METADATA, 12, metadata_body(), timeout_s=30))
                with pytest.raises(TimeoutError):
                    await connection.request(METADATA, 12, metadata_body(), timeout_s=0.3)
                assert not patient.done()  # its own, shorter timeout failed the request, not the connection's
                with pytest.raises(ConnectionError, match="timed out"):
                    await asyncio.wait_for(patient, 1)
            finally:
                node.proc.send_signal(signal.SIGCONT)
            response = await connection.request(METADATA, 12, metadata_body(), timeout_s=10)
            assert response["brokers"][0]["port"] == node.port
        finally:
            connection.close()

    run(scenario())


def test_pool_routes_by_node_id_and_moving_a_node_closes_its_old_connection(node_factory):
    first, second = node_factory(name="first"), node_factory(name="second")
    topic = f"move-{uuid.uuid4().hex[:6]}"

    async def scenario():
        clients = NodeClients("odradek-node-test")
        try:
            with pytest.raises(UnknownNodeError, match="node 7"):
                await clients.request(7, METADATA, 12, metadata_body(), timeout_s=5)
            clients.set_endpoint(7, "127.0.0.1", first.port)
            response = await clients.request(7, METADATA, 12, metadata_body(), timeout_s=5)
            assert response["brokers"][0]["port"] == first.port
            await create_topic(functools.partial(clients.request, 7), topic)
            long_poll = asyncio.create_task(
                clients.request(7, FETCH, 12, fetch_body(topic, 0, max_wait_ms=30_000), timeout_s=60))
            await asyncio.sleep(0.3)
            clients.set_endpoint(7, "127.0.0.1", second.port)
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(long_poll, 1)
            response = await clients.request(7, METADATA, 12, metadata_body(), timeout_s=5)
            assert response["brokers"][0]["port"] == second.port
            assert clients.endpoints == {7: ("127.0.0.1", second.port)}
        finally:
            clients.close()

    run(scenario())
