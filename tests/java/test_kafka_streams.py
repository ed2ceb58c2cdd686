"""Kafka Streams 4.0 against an Odradek node: the WordCount demo counts words exactly, and with
processing.guarantee=exactly_once_v2 still exactly after its JVM is killed with kill -9 mid-stream."""

import random
import struct
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import NodeProcess
from tests.java.kafka_process import KafkaProgram, read_partition
from tests.reference_kafka import requires_reference

pytestmark = requires_reference

INPUT, OUTPUT = "streams-plaintext-input", "streams-wordcount-output"  # the demo's own topic names
WORDS = ["kafka", "streams", "odradek", "log", "offset", "partition", "replica", "leader"]


@pytest.fixture(scope="module")
def streams_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("streams") / "data",
                       settings={"group.initial.rebalance.delay.ms": "0"}).start()
    yield node
    node.stop()


def lines_of_words(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(count)]


def produce(node, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for line in lines:
        producer.produce(INPUT, value=line.encode())
    assert producer.flush(30) == 0


def counts_so_far(node, read_committed: bool) -> list[tuple[str, int]]:
    """Every (word, count) update the application wrote, in order."""
    return [(key.decode(), struct.unpack(">q", value)[0])
            for key, value in read_partition(node.bootstrap, OUTPUT, read_committed=read_committed)]


def latest(updates: list[tuple[str, int]]) -> dict[str, int]:
    return dict(updates)


def expected_counts(lines: list[str]) -> dict[str, int]:
    return dict(Counter(word for line in lines for word in line.split()))


def wordcount(node, tmp_path, application_id: str, guarantee: str) -> KafkaProgram:
    config = tmp_path / f"{application_id}.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in {
        "application.id": application_id, "bootstrap.servers": node.bootstrap,
        "processing.guarantee": guarantee, "commit.interval.ms": "200",
        # the reference distribution has no RocksDB: in-memory state stores
        "dsl.store.suppliers.class": "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers",
        "state.dir": tmp_path / f"{application_id}-state",
        # a restarted instance takes over from a killed one within seconds
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
    }.items()))
    return KafkaProgram("kafka-run-class.sh", "org.apache.kafka.streams.examples.wordcount.WordCountDemo", config,
                        work_dir=tmp_path / application_id).start()


def reset_topics(node) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    existing = admin.list_topics(timeout=30).topics
    doomed = [t for t in existing if t in (INPUT, OUTPUT) or t.startswith("wordcount-")]
    if doomed:
        for future in admin.delete_topics(doomed).values():
            future.result(30)
    deadline = time.monotonic() + 60
    while set(admin.list_topics(timeout=30).topics) & set(doomed):
        assert time.monotonic() < deadline, f"{doomed} still listed 60 s after their deletion"
        time.sleep(0.2)
    for future in admin.create_topics([NewTopic(INPUT, 1, 1), NewTopic(OUTPUT, 1, 1)]).values():
        future.result(30)


def test_wordcount_counts_every_word(streams_node, tmp_path):
    reset_topics(streams_node)
    lines = lines_of_words(1, 300)
    produce(streams_node, lines)
    app = wordcount(streams_node, tmp_path, "wordcount-at-least-once", "at_least_once")
    try:
        app.wait_for(lambda: latest(counts_so_far(streams_node, False)) == expected_counts(lines),
                     "the final count of every word")
    finally:
        app.stop()


def test_wordcount_with_exactly_once_v2_counts_exactly_across_a_kill_9(streams_node, tmp_path):
    reset_topics(streams_node)
    first, second = lines_of_words(2, 300), lines_of_words(3, 3000)
    produce(streams_node, first)
    app = wordcount(streams_node, tmp_path, "wordcount-exactly-once", "exactly_once_v2")
    try:
        app.wait_for(lambda: latest(counts_so_far(streams_node, True)) == expected_counts(first),
                     "the counts of the first lines")
        committed_before = len(counts_so_far(streams_node, True))
        produce(streams_node, second)
        # Killed once part of the second lines is counted and committed: the rest is in flight.
        app.wait_for(lambda: len(counts_so_far(streams_node, True)) > committed_before, "counting the second lines")
        app.kill()
        app = wordcount(streams_node, tmp_path, "wordcount-exactly-once", "exactly_once_v2")
        app.wait_for(lambda: latest(counts_so_far(streams_node, True)) == expected_counts(first + second),
                     "the counts of all lines after the restart")
        # Nothing was counted twice: each word's committed counts only ever go up.
        updates = counts_so_far(streams_node, True)
        for word in WORDS:
            counts = [count for key, count in updates if key == word]
            assert counts == sorted(set(counts)), (word, counts)
    finally:
        app.stop()
