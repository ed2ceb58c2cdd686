"""Bad input: oversized, truncated, random and mutated frames, corrupt batches and unknown topics."""

import random
import socket
import struct
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_request_header
from odradek.protocol.messages import API_BY_KEY
from odradek.protocol.records import build_batch
from tests.e2e.raw_client import RawClient


def api_versions_ok(node) -> bool:
    with RawClient(node.bootstrap) as client:
        return client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0


def produce_raw(client: RawClient, topic: str, partition: int, records: bytes, version: int = 9) -> dict:
    response = client.request(0, version, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return response["responses"][0]["partition_responses"][0]


def closed_by_node(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_oversized_frame_is_refused_before_allocation(node_factory):
    node = node_factory({"socket.request.max.bytes": "1000000"})
    for size in (1_000_001, 2**31 - 1, -5, 3):
        with socket.create_connection(("127.0.0.1", node.port)) as sock:
            sock.sendall(struct.pack(">i", size) + b"\0" * 16)
            assert closed_by_node(sock)
    assert node.proc.poll() is None
    assert api_versions_ok(node)


def test_corrupt_crc_and_unknown_partitions_get_kafka_errors(shared_node):
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        client.request(19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                           "assignments": [], "configs": []}], "timeout_ms": 5000,
                               "validate_only": False})
        good = build_batch([(b"k", b"v", [])])
        assert produce_raw(client, topic, 0, good)["error_code"] == ErrorCode.NONE
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        assert produce_raw(client, topic, 0, bytes(corrupt))["error_code"] == ErrorCode.CORRUPT_MESSAGE
        truncated = good[:-3]
        assert produce_raw(client, topic, 0, truncated)["error_code"] in (ErrorCode.CORRUPT_MESSAGE,
                                                                          ErrorCode.INVALID_RECORD)
        assert produce_raw(client, topic, 7, good)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce_raw(client, f"missing-{uuid.uuid4().hex}", 0, good)["error_code"] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        metadata = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": "bad name!"}],
                                          "allow_auto_topic_creation": True,
                                          "include_topic_authorized_operations": False})
        assert metadata["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        # The good record is still the only one in the log.
        listed = client.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed["topics"][0]["partitions"][0]["offset"] == 1


def test_unsupported_api_versions_version_gets_the_range_of_api_versions(shared_node):
    with socket.create_connection(("127.0.0.1", shared_node.port), timeout=10) as sock:
        header = encode_request_header(18, 99, 7, "future-client")
        body = b"\x00\x00\x00"  # compact client software name/version, empty tagged fields
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", sock.recv(4))[0]
        frame = b""
        while len(frame) < size:
            frame += sock.recv(size - len(frame))
    assert struct.unpack_from(">i", frame)[0] == 7
    response = API_BY_KEY[18].decode_response(0, memoryview(frame), 4)
    assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    # As Kafka, only ApiVersions' own range: the client retries with a version in it and learns the rest.
    assert [(e["api_key"], e["min_version"]) for e in response["api_keys"]] == [(18, 0)]


def valid_frames(topic: str) -> list[bytes]:
    frames = []
    batch = build_batch([(b"key", b"value", [("h", b"v")])])
    bodies = [
        (18, 3, {"client_software_name": "fuzz", "client_software_version": "1"}),
        (3, 12, {"topics": [{"topic_id": bytes(16), "name": topic}], "allow_auto_topic_creation": False,
                 "include_topic_authorized_operations": False}),
        (0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}),
        (1, 12, {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                 "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                 "forgotten_topics_data": [], "rack_id": ""}),
        (10, 4, {"key_type": 0, "coordinator_keys": ["fuzz-group"]}),
        (11, 9, {"group_id": "fuzz-group", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                 "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                 "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x0bfuzz-target"}],
                 "reason": None}),
        (8, 9, {"group_id": "fuzz-group", "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]}),
        (68, 1, {"group_id": "fuzz-848", "member_id": "m-fuzz", "member_epoch": 0, "instance_id": None,
                 "rack_id": None, "rebalance_timeout_ms": 10000, "subscribed_topic_names": [topic],
                 "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}),
    ]
    for key, version, body in bodies:
        frames.append(encode_request_header(key, version, 1, "fuzz") + API_BY_KEY[key].encode_request(version, body))
    return frames


@pytest.mark.timeout(240)
def test_fuzzed_frames_never_crash_the_node_or_corrupt_the_log(node, seed):
    rng = random.Random(seed)
    topic = "fuzz-target"
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(100):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(15) == 0
    templates = valid_frames(topic)

    for i in range(600):
        if i % 3 == 0:
            frame = rng.randbytes(rng.randrange(0, 200))
        else:
            frame = bytearray(rng.choice(templates))
            for _ in range(rng.randrange(1, 8)):
                position = rng.randrange(len(frame))
                frame[position] = rng.randrange(256)
            if rng.random() < 0.2:
                frame = frame[:rng.randrange(len(frame))]
            frame = bytes(frame)
        # A short wait: a mutated Fetch may legitimately long-poll for its (mutated) max_wait_ms.
        with socket.create_connection(("127.0.0.1", node.port), timeout=1) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(65536):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass
        assert node.proc.poll() is None, f"node died on frame {i} (seed {seed}): {frame!r}"

    assert api_versions_ok(node), f"seed {seed}"
    # Garbage costs only its connection: no handler may fail on a request that decoded.
    assert "Traceback" not in node.log_text(), f"seed {seed}"
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, offsets = [], []
    for _ in range(200):
        msg = consumer.poll(0.5)
        if msg is None:
            if len(values) >= 100:
                break
            continue
        assert msg.error() is None, f"{msg.error()} (seed {seed})"
        values.append(msg.value())
        offsets.append(msg.offset())
    consumer.close()
    assert offsets == list(range(len(offsets))), f"seed {seed}"
    assert [v for v in values[:100]] == [str(i).encode() for i in range(100)], f"seed {seed}"
