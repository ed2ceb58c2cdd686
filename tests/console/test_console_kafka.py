"""`odradek console` pointed at Apache Kafka 4.0 (the reference broker): the console is a plain client, so its
pages and forms work against Kafka itself: overview with the quorum, creating a topic, producing and finding a
record, a group's lag and an offset reset, transactions, ACLs without an authorizer, deleting the topic."""

from __future__ import annotations

import re

from tests.console.harness import Browser, ConsoleProcess, consume_one_and_commit, query_of
from tests.java.conftest import _two_free_ports
from tests.reference_kafka import ReferenceBroker, requires_reference

pytestmark = requires_reference


def test_the_console_works_against_apache_kafka(tmp_path):
    port, _ = _two_free_ports()
    kafka = ReferenceBroker(tmp_path / "kafka", port, {"group.initial.rebalance.delay.ms": "0"}).start()
    console = None
    try:
        console = ConsoleProcess(kafka.bootstrap, tmp_path / "console.log").wait_ready()
        browser = Browser(console.url)
        status, _, body = browser.get("/")
        assert status == 200 and '<span id="broker-count">1</span>' in body and "Metadata quorum: leader" in body

        browser.get("/topics")
        status, final, body = browser.post("/topics", {"name": "on-kafka", "partitions": "2",
                                                       "configs": "retention.ms=3600000"})
        assert status == 200 and final.endswith("/topics/on-kafka"), body
        assert '<span id="partition-total">2</span>' in body and 'value="3600000"' in body

        browser.get("/topics/on-kafka/produce")
        status, final, body = browser.post("/topics/on-kafka/produce", {"key": "k", "value": '{"kafka": true}',
                                                                        "headers": "via=console", "partition": "1"})
        assert status == 200 and query_of(final)["partition"] == "1", body
        found = browser.get_json("/api/topics/on-kafka/messages?path=%24.kafka+%3D%3D+true")
        assert [(r["partition"], r["offset"], r["headers"]) for r in found["records"]] == [(1, 0, [["via", "console"]])]

        consume_one_and_commit(kafka.bootstrap, "on-kafka", "kafka-group")
        group = browser.get_json("/api/group?id=kafka-group")
        assert group["state"] == "Empty" and group["lag"] == 0
        status, _, body = browser.get("/group/reset?id=kafka-group&to=earliest")
        assert status == 200 and 'id="reset-plan"' in body and "Apply this plan" in body, body
        status, _, body = browser.post("/group/reset?id=kafka-group", {"plan": "on-kafka:1:0"})
        assert "Reset the offsets of 1 partitions" in body
        assert browser.get_json("/api/group?id=kafka-group")["lag"] == 1

        for path, marker in (("/transactions", 'id="transactions"'), ("/quorum", 'id="voters"'),
                             ("/security", "no authorizer"), ("/groups", "kafka-group")):
            status, _, body = browser.get(path)
            assert status == 200 and marker in body, (path, re.findall(r"<main>.*</main>", body, re.S))

        browser.get("/topics/on-kafka")
        status, _, body = browser.post("/topics/on-kafka/delete", {"confirm": "on-kafka"})
        assert status == 200 and "Deleted topic on-kafka" in body
    finally:
        if console is not None:
            console.stop()
        kafka.stop()
