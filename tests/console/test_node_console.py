"""The console a node serves on its HTTP port (metrics.listener), next to /metrics: a client of the node's own
client listener, working the same as `odradek console`, and stopped cleanly with the node."""

from __future__ import annotations

import re
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import Cluster, free_port
from tests.console.harness import Browser, consume_one_and_commit


def test_the_node_serves_the_console_next_to_its_metrics(node_factory):
    http_port = free_port()
    node = node_factory({"metrics.listener": f"http://127.0.0.1:{http_port}",
                         "group.initial.rebalance.delay.ms": "0"})
    browser = Browser(f"http://127.0.0.1:{http_port}")

    status, _, metrics = browser.get("/metrics")
    assert status == 200 and "kafka_server_replicamanager_partitioncount" in metrics

    status, _, body = browser.get("/")
    assert status == 200 and '<span id="broker-count">1</span>' in body

    status, _, body = browser.get("/topics")
    status, final, body = browser.post("/topics", {"name": "served", "partitions": "2"})
    assert status == 200 and final.endswith("/topics/served") and "Created topic served" in body

    browser.get("/topics/served/produce")
    status, final, body = browser.post("/topics/served/produce", {"key": "k", "value": "from the node's console",
                                                                  "partition": "1"})
    assert status == 200 and "Produced a record to partition 1 at offset 0" in body
    found = browser.get_json("/api/topics/served/messages?q=node%27s+console")
    assert [(r["partition"], r["offset"], r["key"]) for r in found["records"]] == [(1, 0, "k")]

    consume_one_and_commit(node.bootstrap, "served", "served-group")
    group = browser.get_json("/api/group?id=served-group")
    assert group["state"] == "Empty" and group["lag"] == 0
    assert [(r["partition"], r["current_offset"]) for r in group["partitions"]] == [(1, 1)]

    # An open transaction shows with its coordinator's state, and at the partition's leader as an open
    # transaction of its producer; committed, it shows as such.
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "served-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("served", value=b"in a transaction", partition=0)
    producer.flush(30)
    status, _, body = browser.get("/transactions?topic=served&partition=0")
    assert status == 200 and "<td>served-txn</td><td>Ongoing</td>" in body, body
    assert re.search(r'<table class="" id="producers">.*?<td>0</td></tr>', body, re.S), body  # starts at offset 0
    producer.commit_transaction(30)
    status, _, body = browser.get("/transactions")
    assert "<td>served-txn</td><td>CompleteCommit</td>" in body

    node.stop()
    assert node.proc.returncode == 0, node.log_text()[-3000:]


def test_the_consoles_byte_rates_come_from_the_nodes_own_metrics(tmp_path):
    """In a 2-node cluster where only node 1 serves metrics, its console charts bytes in and out from the nodes'
    /metrics (asked for by name, so nothing else is rendered) and says that node 2's are left out, and why."""
    cluster = Cluster(tmp_path / "cluster", 2)
    http_port = free_port()
    cluster.nodes[0].settings["metrics.listener"] = f"http://127.0.0.1:{http_port}"
    cluster.start()
    try:
        browser = Browser(f"http://127.0.0.1:{http_port}")
        status, _, only = browser.get("/metrics?name[]=kafka_server_brokertopicmetrics_bytesin_total")
        assert status == 200
        assert {line.split()[2] for line in only.splitlines() if line.startswith("#")} == {
            "kafka_server_brokertopicmetrics_bytesin_total"}

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("rated", 2, 2)])["rated"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rated-reader",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["rated"])
        def moving(rate: str) -> bool:
            return rate.endswith("/s") and not rate.startswith("0 B")

        rates: dict[str, str] = {}
        topic_rates: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for i in range(100):
                producer.produce("rated", value=b"v" * 1000, partition=i % 2)
            producer.flush(30)
            consumer.poll(0.5)
            _, _, body = browser.get("/")
            rates = dict(re.findall(r'id="(bytes-in|bytes-out)">([^<]*)<', body))
            charted = re.search(r'id="bytes-chart"><svg.*?<polyline', body, re.S)  # two readings at least
            noted = "Bytes per second leave out node 2: no metrics.listener" in body
            _, _, topics = browser.get("/topics")
            row = re.search(r'>rated</a></td>(.*?)</tr>', topics, re.S)
            topic_rates = re.findall(r'<td>([^<]*B/s)</td>', row.group(1)) if row else []  # bytes in, bytes out
            if len(rates) == 2 and all(map(moving, rates.values())) and charted and noted and \
                    len(topic_rates) == 2 and moving(topic_rates[0]):
                break
        else:
            raise AssertionError(f"no byte rates: overview {rates}, topic {topic_rates}:\n{body}")
        consumer.close()
    finally:
        cluster.stop()
