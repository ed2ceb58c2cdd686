"""`odradek transactions ...` run as a real process against a node with an open transaction."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def odradek(node, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", *argv, "--bootstrap-server", node.bootstrap],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def open_transaction(node):
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "cli-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("cli-txn-topic", b"open")
    producer.flush(30)
    yield producer


def test_list_and_describe_show_the_open_transaction(node, open_transaction):
    listed = odradek(node, "transactions", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [(t["transactional_id"], t["state"]) for t in json.loads(listed.stdout)] == [("cli-txn", "Ongoing")]

    described = odradek(node, "transactions", "describe", "--transactional-id", "cli-txn", "-o", "json")
    assert described.returncode == 0, described.stderr
    info = json.loads(described.stdout)
    assert info["state"] == "Ongoing" and info["partitions"] == ["cli-txn-topic-0"] and info["duration_ms"] >= 0

    open_transaction.commit_transaction(30)  # returns at PrepareCommit; CompleteCommit follows the markers
    deadline = time.monotonic() + 10
    while (states := [t["state"] for t in json.loads(odradek(node, "transactions", "list", "-o", "json").stdout)]) \
            != ["CompleteCommit"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert states == ["CompleteCommit"]
    listed = odradek(node, "transactions", "list", "--state", "CompleteCommit", "-o", "json")
    assert [t["state"] for t in json.loads(listed.stdout)] == ["CompleteCommit"]
    assert json.loads(odradek(node, "transactions", "list", "--state", "Ongoing", "-o", "json").stdout) == []


def test_abort_ends_a_hanging_transaction_and_read_committed_moves_past_it(node, open_transaction):
    producers = odradek(node, "transactions", "describe-producers", "--topic", "cli-txn-topic", "--partition", "0",
                        "-o", "json")
    assert producers.returncode == 0, producers.stderr
    assert [p["txn_start_offset"] for p in json.loads(producers.stdout)] == [0]

    aborted = odradek(node, "transactions", "abort", "--topic", "cli-txn-topic", "--partition", "0",
                      "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    producers = odradek(node, "transactions", "describe-producers", "--topic", "cli-txn-topic", "--partition", "0",
                        "-o", "json")
    assert [p["txn_start_offset"] for p in json.loads(producers.stdout)] == [None]

    # the abort marker makes the record aborted: a read_committed consumer reaches the end without it
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "cli-txn-reader",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition("cli-txn-topic", 0, 0)])
    try:
        seen, eof = [], None
        deadline = time.monotonic() + 20
        while eof is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() and message.error().code() == KafkaError._PARTITION_EOF:
                eof = message.offset()
            elif not message.error():
                seen.append(message.value())
        assert seen == [] and eof == 2  # past the record and the abort marker
    finally:
        consumer.close()


def test_bad_input_gets_a_one_line_error(node):
    missing = odradek(node, "transactions", "describe", "--transactional-id", "no-such-id")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    nothing = odradek(node, "transactions", "abort", "--topic", "no-such-topic", "--partition", "0",
                      "--start-offset", "0")
    assert nothing.returncode == 1 and "unknown topic" in nothing.stderr
