"""Spark 4.0's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 4.0.0) against an Odradek node:
batch reads bounded by offsets and timestamps, a streaming copy restarted from its checkpoint, a batch write.

The connector's jars need pyspark 4.0.x, so Spark runs in a subprocess with .venv-spark40 (`make test` makes it):
one session for the whole module, serving the requests of spark40_session.py.
"""

import functools
import json
import os
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Producer

from tests.reference_kafka import SPARK_KAFKA_JARS, requires_reference
from tests.spark.topics import create_topic, read_all, unique
from tests.spark_session_process import SessionProcess

SPARK40_PYTHON = Path(__file__).resolve().parents[2] / ".venv-spark40" / "bin" / "python"
SESSION_SCRIPT = Path(__file__).with_name("spark40_session.py")

pytestmark = [
    requires_reference,
    pytest.mark.skipif(not SPARK40_PYTHON.exists(),
                       reason=f"needs pyspark 4.0 in {SPARK40_PYTHON.parents[1]} (run make test)"),
]

BASE_MS = 1_700_000_000_000
# Spark's timestampType column: Kafka's TimestampType ids.
SPARK_TIMESTAMP_TYPE = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}


class Spark40Session(SessionProcess):
    """The spark40_session.py subprocess."""

    def __init__(self, directory: Path):
        log_path = directory / "spark.log"
        env = {name: value for name, value in os.environ.items()
               if name not in ("SPARK_HOME", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS")}
        env["PYSPARK_PYTHON"] = str(SPARK40_PYTHON)  # other Spark tests point it at the project's venv
        jars = sorted(str(jar) for jar in SPARK_KAFKA_JARS.glob("*.jar"))
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(SPARK40_PYTHON), str(SESSION_SCRIPT), *jars], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=directory)
        super().__init__(proc, log_path, "Spark", request_timeout=180)
        self.spark_version = self.reply(timeout=180)["result"]


@pytest.fixture(scope="module")
def spark40(tmp_path_factory, shared_node):
    """The module's PySpark 4.0 session. It needs the node only to stop before it: Spark's cached producers would
    otherwise retry the closed port while the session shuts down."""
    session = Spark40Session(tmp_path_factory.mktemp("spark40"))
    assert session.spark_version.startswith("4.0."), session.spark_version
    yield session
    session.close()


# --- records: produced with confluent-kafka, as Spark's rows ---

@dataclass(frozen=True)
class Record:
    """A record as the broker acknowledged it, in the order of Spark's columns (headers last, None when none)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int
    timestamp_type: int
    headers: tuple | None


def produce(bootstrap: str, records: list[dict]) -> list[Record]:
    """Produce dicts of Producer.produce arguments in order; the records with their offsets and timestamps."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    acknowledged, errors = [], []

    def delivered(err, msg, headers):
        if err is not None:
            errors.append(err)
            return
        kind, timestamp = msg.timestamp()
        acknowledged.append(Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), timestamp,
                                   SPARK_TIMESTAMP_TYPE[kind], tuple(headers) if headers else None))

    for record in records:
        # a delivery report carries no headers: the record's own go with it
        producer.produce(on_delivery=functools.partial(delivered, headers=record.get("headers")), **record)
        producer.poll(0)
    assert producer.flush(30) == 0, "records still in flight"
    assert not errors, errors
    return sorted(acknowledged, key=lambda r: (r.topic, r.partition, r.offset))


def as_record(row: dict) -> Record:
    """A row of spark40_session.py's `read` as a Record."""
    headers = row.get("headers")
    return Record(row["topic"], row["partition"], row["offset"], from_hex(row["key"]), from_hex(row["value"]),
                  row["timestamp"], row["timestampType"],
                  None if headers is None else tuple((h["key"], from_hex(h["value"])) for h in headers))


def from_hex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def to_hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def read(spark40, bootstrap: str, **options: str) -> list[Record]:
    rows = spark40.request("read", options={"kafka.bootstrap.servers": bootstrap, **options})
    return sorted((as_record(row) for row in rows), key=lambda r: (r.topic, r.partition, r.offset))


def by_partition(records) -> dict[int, list]:
    """partition -> (key, value, headers) of its records, in offset order (records as read_all returns them)."""
    partitions = defaultdict(list)
    for partition, key, value, headers in records:
        partitions[partition].append((key, value, list(headers or [])))
    return dict(partitions)


# --- batch reads: 3 partitions of CreateTime records, and a LogAppendTime topic ---

@dataclass
class ReadData:
    topic: str
    log_append_topic: str
    records: list[Record]


def record_timestamp(partition: int, i: int) -> int:
    """Record i of a partition: BASE_MS + 1000 i + partition, so partitions differ at timestamp bounds."""
    return BASE_MS + 1000 * i + partition


def record_headers(i: int) -> list | None:
    """None, a header with a null value, repeated keys, and an empty value, by turns."""
    return [None, [("trace", f"t{i}".encode())], [("null", None), ("dup", b"1"), ("dup", b"2")],
            [("empty", b"")]][i % 4]


@pytest.fixture(scope="module")
def read_data(shared_node) -> ReadData:
    topic, log_append_topic = unique("read"), unique("read-log-append")
    # timestamps from 2023: without retention.ms=-1 the node's retention check would delete them
    create_topic(shared_node.bootstrap, topic, partitions=3, config={"retention.ms": "-1"})
    create_topic(shared_node.bootstrap, log_append_topic, config={"message.timestamp.type": "LogAppendTime"})
    records = produce(shared_node.bootstrap, [
        {"topic": topic, "partition": p, "timestamp": record_timestamp(p, i), "headers": record_headers(i),
         "key": None if i == 2 else f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode()}
        for i in range(6) for p in range(3)])
    records += produce(shared_node.bootstrap, [
        {"topic": log_append_topic, "timestamp": BASE_MS, "key": f"k{i}".encode(), "value": f"log-{i}".encode()}
        for i in range(3)])
    return ReadData(topic, log_append_topic, records)


def test_batch_read_returns_every_record_with_its_headers_offsets_and_timestamps(spark40, shared_node, read_data):
    got = read(spark40, shared_node.bootstrap, subscribe=f"{read_data.topic},{read_data.log_append_topic}",
               includeHeaders="true")
    assert got == read_data.records
    assert {r.offset for r in got if r.topic == read_data.topic} == set(range(6))
    # the broker stamped LogAppendTime records with its own clock, not the producer's BASE_MS
    assert {(r.timestamp_type, r.timestamp_ms > BASE_MS) for r in got if r.topic == read_data.log_append_topic} == {
        (1, True)}


def test_batch_read_between_json_offsets(spark40, shared_node, read_data):
    topic = read_data.topic
    got = read(spark40, shared_node.bootstrap, subscribe=topic, includeHeaders="true",
               startingOffsets=json.dumps({topic: {"0": 1, "1": -2, "2": 3}}),
               endingOffsets=json.dumps({topic: {"0": 4, "1": -1, "2": 5}}))
    bounds = {0: (1, 4), 1: (0, 6), 2: (3, 5)}
    assert got == [r for r in read_data.records
                   if r.topic == topic and bounds[r.partition][0] <= r.offset < bounds[r.partition][1]]


def test_batch_read_between_timestamps(spark40, shared_node, read_data):
    topic = read_data.topic
    # every partition from its first record at or after BASE_MS + 1500 (i = 2) to before BASE_MS + 4001
    # (i = 4 in partitions 1 and 2, whose record 4 is later; i = 5 in partition 0)
    got = read(spark40, shared_node.bootstrap, subscribe=topic, startingTimestamp=str(BASE_MS + 1500),
               endingTimestamp=str(BASE_MS + 4001))
    ends = {0: 5, 1: 4, 2: 4}
    assert [(r.partition, r.offset) for r in got] == [(p, i) for p in range(3) for i in range(2, ends[p])]

    by_timestamp = read(spark40, shared_node.bootstrap, subscribe=topic, startingOffsetsByTimestamp=json.dumps(
        {topic: {"0": record_timestamp(0, 1), "1": record_timestamp(1, 1) + 1, "2": BASE_MS - 1}}))
    assert [(r.partition, r.offset) for r in by_timestamp] == [
        (p, i) for p, start in ((0, 1), (1, 2), (2, 0)) for i in range(start, 6)]

    # no record reaches the timestamp: ListOffsets finds none, and the `latest` strategy starts at the end
    assert read(spark40, shared_node.bootstrap, subscribe=topic, startingTimestamp=str(BASE_MS + 10**9),
                startingOffsetsByTimestampStrategy="latest") == []


# --- streaming: readStream -> writeStream, availableNow, restarted from the checkpoint ---

def test_streaming_copy_restarted_from_its_checkpoint_copies_every_record_once_in_order(spark40, shared_node,
                                                                                       tmp_path):
    source, sink = unique("copy-from"), unique("copy-to")
    create_topic(shared_node.bootstrap, source, partitions=3)
    create_topic(shared_node.bootstrap, sink, partitions=3)

    def fill(start: int, count: int) -> None:
        produce(shared_node.bootstrap, [
            {"topic": source, "partition": p, "key": f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode(),
             "headers": record_headers(i)}
            for i in range(start, start + count) for p in range(3)])

    def copy() -> list[int]:
        """Runs the query to its end; the input row count of each micro-batch."""
        return spark40.request(
            "stream_copy", checkpoint=str(tmp_path / "checkpoint"),
            source={"kafka.bootstrap.servers": shared_node.bootstrap, "subscribe": source,
                    "startingOffsets": "earliest", "includeHeaders": "true", "maxOffsetsPerTrigger": "10"},
            sink={"kafka.bootstrap.servers": shared_node.bootstrap, "topic": sink})

    fill(0, 12)
    first = copy()
    assert sum(first) == 36 and len(first) > 1, first  # maxOffsetsPerTrigger splits it into micro-batches
    assert by_partition(read_all(shared_node.bootstrap, sink)) == by_partition(
        read_all(shared_node.bootstrap, source))

    fill(12, 5)
    assert sum(copy()) == 15  # from the checkpoint's offsets: only the new records
    copied = by_partition(read_all(shared_node.bootstrap, sink))
    assert copied == by_partition(read_all(shared_node.bootstrap, source))
    assert [value for _, value, _ in copied[1]] == [f"v1-{i}".encode() for i in range(17)]


# --- batch write ---

def test_batch_write_puts_each_row_in_its_topic_and_partition_with_its_key_and_headers(spark40, shared_node):
    topic = unique("write")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    rows = [(i % 2, None if i == 3 else f"k{i}".encode(), f"v{i}".encode(), record_headers(i)) for i in range(8)]
    spark40.request("write", options={"kafka.bootstrap.servers": shared_node.bootstrap}, rows=[
        {"topic": topic, "partition": partition, "key": to_hex(key), "value": to_hex(value),
         "headers": None if headers is None else [(name, to_hex(data)) for name, data in headers]}
        for partition, key, value, headers in rows])
    # Spark's two tasks write a partition's rows concurrently: within a partition their order is not defined
    written = {p: sorted(records, key=lambda r: r[1]) for p, records in
               by_partition(read_all(shared_node.bootstrap, topic)).items()}
    assert written == {p: sorted(((key, value, list(headers or [])) for partition, key, value, headers in rows
                                  if partition == p), key=lambda r: r[1]) for p in range(2)}
