"""What the console shows agrees with what another client library (kafka-python) sees: a record produced through
the console is where the console said, records kafka-python wrote show up in the console's message browser at
their offsets, and a group's lag per partition is what kafka-python computes from its committed and end offsets."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, NewTopic

from tests.console.harness import Browser, ConsoleProcess, query_of


def test_console_and_kafka_python_agree_on_records_and_lag(node_factory, tmp_path):
    node = node_factory({"group.initial.rebalance.delay.ms": "0"})
    console = ConsoleProcess(node.bootstrap, tmp_path / "console.log").wait_ready()
    topic, group = "agree", "agree-group"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        browser = Browser(console.url)

        # A record produced through the console's form...
        browser.get(f"/topics/{topic}/produce")
        status, final, body = browser.post(f"/topics/{topic}/produce", {
            "key": "the-key", "value": "the value", "headers": "h1=v1", "partition": "2"})
        assert status == 200, body
        where = query_of(final)
        assert where["partition"] == "2" and where["start"] == "offset"
        offset = int(where["offset"])
        assert f"Produced a record to partition 2 at offset {offset}" in body
        # ... is there for kafka-python.
        reader = KafkaConsumer(bootstrap_servers=node.bootstrap, enable_auto_commit=False)
        reader.assign([TopicPartition(topic, 2)])
        reader.seek(TopicPartition(topic, 2), offset)
        records = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records = [r for batch in reader.poll(1000).values() for r in batch]
        reader.close()
        assert (records[0].offset, records[0].key, records[0].value) == (offset, b"the-key", b"the value")
        assert [(k, v) for k, v in records[0].headers] == [("h1", b"v1")]

        # A keyed record without a partition goes where kafka-python (Kafka's partitioner) puts its key.
        admin.create_topics([NewTopic("agree-keyed", num_partitions=3, replication_factor=1)])
        placer = KafkaProducer(bootstrap_servers=node.bootstrap)
        for key in ("alpha", "beta", "gamma", "delta", "epsilon"):
            status, final, body = browser.post("/topics/agree-keyed/produce", {"key": key, "value": "placed"})
            assert status == 200, body
            by_kafka_python = placer.send("agree-keyed", key=key.encode(), value=b"x").get(30).partition
            assert int(query_of(final)["partition"]) == by_kafka_python, key
        placer.close()

        # Records kafka-python writes show in the console at the offsets kafka-python got.
        producer = KafkaProducer(bootstrap_servers=node.bootstrap)
        sent = [producer.send(topic, key=f"k{i}".encode(), value=f"value {i}".encode(), partition=0).get(30)
                for i in range(5)]
        page = browser.get_json(f"/api/topics/{topic}/messages?partition=0")
        assert [(r["offset"], r["value"]) for r in page["records"]] == \
            [(m.offset, f"value {i}") for i, m in reversed(list(enumerate(sent)))]
        found = browser.get_json(f"/api/topics/{topic}/messages?q=value+3&field=value")
        assert [(r["partition"], r["offset"]) for r in found["records"]] == [(0, sent[3].offset)]

        # A kafka-python group reads everything there is, commits, leaves; then 7 more records arrive.
        member = KafkaConsumer(topic, bootstrap_servers=node.bootstrap, group_id=group, auto_offset_reset="earliest",
                               enable_auto_commit=False)
        got = 0
        deadline = time.monotonic() + 60
        while got < 6 and time.monotonic() < deadline:
            got += sum(len(batch) for batch in member.poll(1000).values())
        assert got == 6
        member.commit()
        member.close()
        for i in range(7):
            producer.send(topic, value=f"late {i}".encode(), partition=i % 3).get(30)
        producer.close()

        committed = {tp.partition: meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()}
        probe = KafkaConsumer(bootstrap_servers=node.bootstrap)
        ends = {tp.partition: end for tp, end in probe.end_offsets([TopicPartition(topic, p) for p in range(3)]).items()}
        probe.close()
        expected = {p: ends[p] - committed[p] for p in committed}
        assert committed[0] == 5 and committed[2] == offset + 1 and sum(expected.values()) >= 5

        shown = browser.get_json(f"/api/group?id={group}")
        assert shown["state"] == "Empty"
        assert {row["partition"]: row["lag"] for row in shown["partitions"]} == expected
        assert {row["partition"]: row["current_offset"] for row in shown["partitions"]} == committed
        assert shown["lag"] == sum(expected.values())
        status, _, html = browser.get(f"/group?id={group}")
        assert status == 200 and f'<span id="group-lag">{shown["lag"]}</span>' in html

        # A config set in the console is the topic's for kafka-python; reset, it is gone; partitions added show.
        browser.get(f"/topics/{topic}")
        status, _, html = browser.post(f"/topics/{topic}/configs", {"name": "retention.ms", "value": "7200000",
                                                                     "action": "set"})
        assert status == 200 and "Set retention.ms=7200000" in html

        def overrides() -> dict[str, str]:
            found = admin.describe_configs([ConfigResource("TOPIC", topic)])
            return {k: v["value"] for k, v in found["topic"][topic].items()}

        assert overrides().get("retention.ms") == "7200000"
        status, _, html = browser.post(f"/topics/{topic}/configs", {"name": "retention.ms", "action": "delete"})
        assert status == 200 and "retention.ms is back to its default" in html
        assert "retention.ms" not in overrides()
        status, _, html = browser.post(f"/topics/{topic}/partitions", {"count": "5"})
        assert status == 200 and f"{topic} now has 5 partitions" in html
        probe = KafkaConsumer(bootstrap_servers=node.bootstrap)
        deadline = time.monotonic() + 30
        while len(probe.partitions_for_topic(topic) or ()) != 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            probe.close()
            probe = KafkaConsumer(bootstrap_servers=node.bootstrap)
        assert len(probe.partitions_for_topic(topic)) == 5
        probe.close()
    finally:
        admin.close()
        console.stop()
