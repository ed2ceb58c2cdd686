"""Wire-level behaviour of the core APIs, driven with hand-built requests against a real node."""

import threading
import time
import uuid

from confluent_kafka import Producer

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch, decode_batches
from tests.e2e.raw_client import RawClient

LOG_APPEND_TIME = 1


def create(client: RawClient, name: str, partitions: int = 1, configs: dict | None = None) -> dict:
    response = client.request(19, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 5000, "validate_only": False})
    result = response["topics"][0]
    assert result["error_code"] == ErrorCode.NONE, result
    return result


def produce(client: RawClient, topic: str, values: list[bytes], partition: int = 0, version: int = 11,
            **batch) -> dict:
    records = build_batch([(None, v, []) for v in values], **batch)
    response = client.request(0, version, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return response["responses"][0]["partition_responses"][0]


def fetch(client: RawClient, topic: str, offset: int, *, version: int = 12, max_wait_ms: int = 0, min_bytes: int = 1,
          max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, session_id: int = 0,
          session_epoch: int = -1, topic_id: bytes = bytes(16), partitions=(0,)) -> dict:
    return client.request(1, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": partition_max_bytes} for p in partitions]}],
        "forgotten_topics_data": [], "rack_id": ""})


def values_of(records) -> list[bytes]:
    return [r.value for _, batch in decode_batches(bytes(records)) for r in batch]


def list_offset(client: RawClient, topic: str, timestamp: int) -> dict:
    response = client.request(2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    return response["topics"][0]["partitions"][0]


def test_fetch_long_polls_until_data_arrives(shared_node):
    topic = f"long-poll-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic)

        def produce_later():
            time.sleep(0.3)
            with RawClient(shared_node.bootstrap) as other:
                produce(other, topic, [b"late"])

        threading.Thread(target=produce_later).start()
        started = time.monotonic()
        response = fetch(client, topic, 0, max_wait_ms=60_000)
        waited = time.monotonic() - started
        partition = response["responses"][0]["partitions"][0]
        assert values_of(partition["records"]) == [b"late"]
        assert 0.2 < waited < 60, waited  # it waited for the record, and answered when it came, not at max_wait

        started = time.monotonic()
        response = fetch(client, topic, 1, max_wait_ms=400)  # nothing new: answers empty after max_wait
        assert time.monotonic() - started > 0.35
        assert bytes(response["responses"][0]["partitions"][0]["records"] or b"") == b""


def test_fetch_respects_max_bytes_but_returns_at_least_one_batch(shared_node):
    topic = f"max-bytes-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic)
        for i in range(10):
            produce(client, topic, [bytes([i]) * 1000])
        small = fetch(client, topic, 0, max_bytes=10, partition_max_bytes=10)
        assert len(values_of(small["responses"][0]["partitions"][0]["records"])) == 1
        some = fetch(client, topic, 0, partition_max_bytes=3500)
        assert 1 <= len(values_of(some["responses"][0]["partitions"][0]["records"])) <= 3
        middle = fetch(client, topic, 7)
        assert values_of(middle["responses"][0]["partitions"][0]["records"])[0] == bytes([7]) * 1000
        out_of_range = fetch(client, topic, 11)["responses"][0]["partitions"][0]
        assert out_of_range["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert out_of_range["high_watermark"] == -1  # as Kafka: no offsets with an error


def test_incremental_fetch_session_returns_only_changed_partitions(shared_node):
    topic = f"session-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic, partitions=2)
        produce(client, topic, [b"a"], partition=0)
        full = fetch(client, topic, 0, session_epoch=0, partitions=(0, 1))
        session_id = full["session_id"]
        assert session_id > 0
        assert len(full["responses"][0]["partitions"]) == 2
        produce(client, topic, [b"b"], partition=1)
        incremental = client.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": 1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 1, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        assert incremental["session_id"] == session_id
        changed = {p["partition_index"]: p for t in incremental["responses"] for p in t["partitions"]}
        assert list(changed) == [1]  # partition 0 has nothing new; partition 1 has a record
        assert values_of(changed[1]["records"]) == [b"b"]
        stale = fetch(client, topic, 0, session_id=session_id, session_epoch=1)
        assert stale["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_fetch_by_topic_id_from_version_13(shared_node):
    topic = f"topic-id-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        topic_id = create(client, topic)["topic_id"]
        produce(client, topic, [b"by-id"])
        response = fetch(client, "", 0, version=16, topic_id=topic_id)
        assert response["responses"][0]["topic_id"] == topic_id
        assert values_of(response["responses"][0]["partitions"][0]["records"]) == [b"by-id"]
        unknown = fetch(client, "", 0, version=16, topic_id=uuid.uuid4().bytes)
        assert unknown["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        metadata = client.request(3, 12, {"topics": [{"topic_id": topic_id, "name": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        assert metadata["topics"][0]["name"] == topic


def test_list_offsets_earliest_latest_max_timestamp_and_by_time(shared_node):
    topic = f"list-offsets-{uuid.uuid4().hex[:6]}"
    now = int(time.time() * 1000)
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic)
        for i, delta in enumerate((-50_000, -10_000, -30_000)):
            assert produce(client, topic, [b"%d" % i], timestamp_ms=now + delta)["base_offset"] == i
        assert list_offset(client, topic, -2)["offset"] == 0
        assert list_offset(client, topic, -1)["offset"] == 3
        assert (list_offset(client, topic, -3)["offset"], list_offset(client, topic, -3)["timestamp"]) == (1, now - 10_000)
        assert list_offset(client, topic, now - 40_000)["offset"] == 1
        assert list_offset(client, topic, now + 1)["offset"] == -1


def test_log_append_time_topic_stamps_the_broker_time(shared_node):
    topic = f"append-time-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic, configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        result = produce(client, topic, [b"x"], timestamp_ms=1000)
        assert result["log_append_time_ms"] >= before
        records = fetch(client, topic, 0)["responses"][0]["partitions"][0]["records"]
        (info, batch), = decode_batches(bytes(records))
        assert info.timestamp_type == LOG_APPEND_TIME
        assert batch[0].timestamp == result["log_append_time_ms"]


def test_topic_compression_type_recompresses_what_producers_send(shared_node):
    topic = f"recompress-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic, configs={"compression.type": "zstd"})
        produce(client, topic, [b"plain " * 100], compression=0)
        records = fetch(client, topic, 0)["responses"][0]["partitions"][0]["records"]
        (info, batch), = decode_batches(bytes(records))
        assert info.compression == 4
        assert batch[0].value == b"plain " * 100


def test_batches_are_served_as_the_producer_compressed_them(shared_node):
    topic = f"as-written-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic)
        for codec in (1, 2, 3, 4):
            produce(client, topic, [b"codec %d" % codec] * 5, compression=codec)
        records = fetch(client, topic, 0)["responses"][0]["partitions"][0]["records"]
        decoded = list(decode_batches(bytes(records)))
        assert [info.compression for info, _ in decoded] == [1, 2, 3, 4]
        assert [info.base_offset for info, _ in decoded] == [0, 5, 10, 15]


def test_describe_log_dirs_topic_partitions_and_leader_epochs(shared_node):
    topic = f"describe-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic, partitions=3)
        produce(client, topic, [b"x" * 100])
        dirs = client.request(35, 4, {"topics": [{"topic": topic, "partitions": [0, 1, 2]}]})
        (result,) = dirs["results"]
        assert result["total_bytes"] > 0 and result["usable_bytes"] > 0
        sizes = {p["partition_index"]: p["partition_size"] for t in result["topics"] for p in t["partitions"]}
        assert sizes[0] > 100 and sizes[1] == 0 and set(sizes) == {0, 1, 2}

        described = client.request(75, 0, {"topics": [{"name": topic}], "response_partition_limit": 2,
                                           "cursor": None})
        assert [p["partition_index"] for p in described["topics"][0]["partitions"]] == [0, 1]
        assert described["next_cursor"] == {"topic_name": topic, "partition_index": 2}

        epochs = client.request(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        assert epochs["topics"][0]["partitions"][0]["end_offset"] == 1


def test_idempotent_retry_of_the_same_batch_is_not_written_twice(shared_node):
    topic = f"dedup-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic)
        init = client.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                      "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == ErrorCode.NONE
        ids = {"producer_id": init["producer_id"], "producer_epoch": init["producer_epoch"]}
        first = produce(client, topic, [b"a", b"b"], base_sequence=0, **ids)
        retry = produce(client, topic, [b"a", b"b"], base_sequence=0, **ids)
        assert first["error_code"] == retry["error_code"] == ErrorCode.NONE
        assert retry["base_offset"] == first["base_offset"] == 0
        gap = produce(client, topic, [b"c"], base_sequence=5, **ids)
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(client, topic, [b"c"], base_sequence=2, **ids)["base_offset"] == 2
        assert list_offset(client, topic, -1)["offset"] == 3


def test_restart_keeps_topics_configs_and_records(node):
    producer = Producer({"bootstrap.servers": node.bootstrap})
    with RawClient(node.bootstrap) as client:
        create(client, "durable", partitions=2, configs={"retention.ms": "86400000"})
    for i in range(100):
        producer.produce("durable", value=b"%d" % i, partition=i % 2)
    assert producer.flush(15) == 0
    node.restart()
    with RawClient(node.bootstrap) as client:
        configs = client.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": "durable",
                                                        "configuration_keys": ["retention.ms"]}],
                                         "include_synonyms": False, "include_documentation": False})
        assert configs["results"][0]["configs"][0]["value"] == "86400000"
        for partition in (0, 1):
            records = fetch(client, "durable", 0, partitions=(partition,))["responses"][0]["partitions"][0]["records"]
            assert values_of(records) == [b"%d" % i for i in range(partition, 100, 2)]
        assert produce(client, "durable", [b"after restart"])["base_offset"] == 50


def test_acks_all_needs_min_insync_replicas(shared_node):
    topic = f"min-isr-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic, configs={"min.insync.replicas": "2"})
        assert produce(client, topic, [b"x"])["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS  # acks=-1, ISR of 1
        records = build_batch([(None, b"y", [])])
        response = client.request(0, 11, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
        assert response["responses"][0]["partition_responses"][0]["base_offset"] == 0


def test_legacy_alter_configs_replaces_all_overrides(shared_node):
    topic = f"alter-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_node.bootstrap) as client:
        create(client, topic, configs={"retention.ms": "1000000", "segment.ms": "2000000"})
        response = client.request(33, 2, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "value": "3000000"}]}], "validate_only": False})
        assert response["responses"][0]["error_code"] == ErrorCode.NONE
        described = client.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                          "configuration_keys": ["retention.ms", "segment.ms"]}],
                                           "include_synonyms": True, "include_documentation": False})
        configs = {c["name"]: c for c in described["results"][0]["configs"]}
        assert (configs["retention.ms"]["value"], configs["retention.ms"]["config_source"]) == ("3000000", 1)
        assert (configs["segment.ms"]["value"], configs["segment.ms"]["config_source"]) == ("604800000", 5)
        # as in Kafka: log.retention.ms has no default of its own (log.retention.hours gives it), so the broker
        # side adds no synonym
        assert [s["name"] for s in configs["retention.ms"]["synonyms"]] == ["retention.ms"]


def test_metadata_without_auto_create_reports_unknown_topics(node_factory):
    node = node_factory({"auto.create.topics.enable": "false"})
    with RawClient(node.bootstrap) as client:
        metadata = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": "absent"}],
                                          "allow_auto_topic_creation": True,
                                          "include_topic_authorized_operations": False})
        assert metadata["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
