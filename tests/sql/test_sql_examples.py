"""The seeds' three pipelines as SQL on a real SQL server (Spark) and a real node, read back with real clients."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from tests.sql.server_process import SqlServerProcess, read_table, wait_for

pytest.importorskip("pyspark")

BASE_MS = (int(time.time()) // 3600 - 1) * 3_600_000  # window-aligned, and recent enough for retention


@pytest.fixture(scope="module")
def sql(shared_node, tmp_path_factory):
    server = SqlServerProcess(shared_node.bootstrap, tmp_path_factory.mktemp("sql") / "state",
                              ["--auto-offset-reset", "earliest"]).start()
    yield server
    server.stop()


def produce(bootstrap: str, topic: str, records) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    for key, value, *timestamp in records:
        producer.produce(topic, key=key, value=value, **({"timestamp": timestamp[0]} if timestamp else {}))
    assert producer.flush(30) == 0


def latest_by_key(records) -> dict:
    table = {}
    for key, value in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = json.loads(value)
    return table


def test_fraud_filter(sql, shared_node):
    bootstrap = shared_node.bootstrap
    sql.ksql("CREATE STREAM payments (account VARCHAR KEY, id VARCHAR, amount INT, fraudProbability DOUBLE) "
             "WITH (KAFKA_TOPIC='sql_payments', VALUE_FORMAT='JSON', PARTITIONS=2);")
    payments = [{"id": f"pay-{i}", "account": f"acc-{i % 5}", "amount": i, "fraudProbability": (i % 10) / 10 + 0.05}
                for i in range(40)]
    produce(bootstrap, "sql_payments", [(p["account"].encode(), json.dumps(p).encode()) for p in payments])
    created = sql.ksql("CREATE STREAM fraudulent_payments AS SELECT * FROM payments "
                       "WHERE fraudProbability > 0.8 EMIT CHANGES;")
    assert created[0]["commandStatus"]["status"] == "SUCCESS"
    expected = [p for p in payments if p["fraudProbability"] > 0.8]
    output = wait_for(lambda: (r := read_table(bootstrap, "FRAUDULENT_PAYMENTS")) and len(r) >= len(expected) and r,
                      what="the fraudulent payments")
    assert len(output) == len(expected)
    got = sorted((k.decode(), json.loads(v)["ID"]) for k, v in output)
    assert got == sorted((p["account"], p["id"]) for p in expected)
    assert all(json.loads(v)["FRAUDPROBABILITY"] > 0.8 for _, v in output)
    described = sql.ksql("DESCRIBE fraudulent_payments;")[0]["sourceDescription"]
    assert [f["name"] for f in described["fields"]] == ["ACCOUNT", "ID", "AMOUNT", "FRAUDPROBABILITY"]


def test_windowed_counts_into_a_compacted_table(sql, shared_node):
    bootstrap = shared_node.bootstrap
    sql.ksql("CREATE STREAM clicks (user VARCHAR KEY, page VARCHAR) "
             "WITH (KAFKA_TOPIC='sql_clicks', VALUE_FORMAT='JSON', PARTITIONS=2);")
    # user u clicks u + 1 times a second for 20 s: two 10 s windows each
    clicks = [(f"user{u}".encode(), json.dumps({"page": "/"}).encode(), BASE_MS + s * 1000 + u)
              for s in range(20) for u in range(3) for _ in range(u + 1)]
    produce(bootstrap, "sql_clicks", clicks)
    sql.ksql("CREATE TABLE click_counts AS SELECT user, COUNT(*) AS clicks FROM clicks "
             "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 1 MINUTE) GROUP BY user EMIT CHANGES;")
    expected = {(f"user{u}", BASE_MS + w * 10_000): 10 * (u + 1) for u in range(3) for w in range(2)}

    def counts():
        rows = sql.pull("SELECT user, WINDOWSTART, clicks FROM click_counts;")
        got = {(user, start): n for user, start, n in rows}
        return got if got == expected else None

    assert wait_for(counts, what="the window counts") == expected
    assert sql.pull("SELECT WINDOWSTART, clicks FROM click_counts WHERE user = 'user2' AND "
                    f"WINDOWSTART >= {BASE_MS + 10_000};") == [[BASE_MS + 10_000, 30]]
    topic = sql.ksql("DESCRIBE EXTENDED click_counts;")[0]["sourceDescription"]
    assert topic["windowType"] == "TUMBLING" and topic["topic"] == "CLICK_COUNTS"
    records = read_table(bootstrap, "CLICK_COUNTS")
    # the key is the user in KAFKA format followed by the window start (8 bytes, big-endian), as ksqlDB writes it
    final = latest_by_key(records)
    assert {(k[:-8].decode(), int.from_bytes(k[-8:], "big")): v["CLICKS"] for k, v in final.items()} == expected


def test_snapshot_table_of_scores_with_deletes(sql, shared_node):
    bootstrap = shared_node.bootstrap
    sql.ksql("CREATE STREAM score_updates (player VARCHAR KEY, score INT) "
             "WITH (KAFKA_TOPIC='sql_scores', VALUE_FORMAT='JSON', PARTITIONS=2);"
             "CREATE TABLE scores (player VARCHAR PRIMARY KEY, score INT) "
             "WITH (KAFKA_TOPIC='sql_scores', VALUE_FORMAT='JSON');"
             "CREATE TABLE latest_scores AS SELECT player, LATEST_BY_OFFSET(score) AS score FROM score_updates "
             "GROUP BY player EMIT CHANGES;")
    sql.ksql("INSERT INTO score_updates (player, score) VALUES ('alice', 10);"
             "INSERT INTO score_updates (player, score) VALUES ('bob', 7);"
             "INSERT INTO score_updates (player, score) VALUES ('alice', 12);")
    assert sql.pull("SELECT * FROM scores WHERE player = 'alice';") == [["alice", 12]]
    assert sorted(sql.pull("SELECT player, score FROM scores;")) == [["alice", 12], ["bob", 7]]
    wait_for(lambda: sorted(sql.pull("SELECT * FROM latest_scores;")) == [["alice", 12], ["bob", 7]],
             what="the aggregated table")
    produce(bootstrap, "sql_scores", [(b"bob", None)])  # deleting a player: a tombstone
    assert sql.pull("SELECT * FROM scores WHERE player = 'bob';") == []
    assert sql.pull("SELECT * FROM scores;") == [["alice", 12]]
