"""The SQL server's REST API as ksqlDB's clients use it, on one real SQL server (Spark) and a real node:
push and pull queries on /query-stream and /query, PRINT, /info and /healthcheck, the /ksql statements
(SHOW, DESCRIBE, EXPLAIN, TERMINATE, DROP, INSERT), refused statements that must create nothing, and three
independent clients: `odradek sql shell`, the PyPI `ksqldb` package and curl."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.registry.conftest import start_registry_node
from tests.sql.server_process import SqlServerProcess, read_table, wait_for
from tests.sql.test_protobuf import message_class

pytest.importorskip("pyspark")

DELIMITED = "application/vnd.ksqlapi.delimited.v1"
ROWTIME_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    """The module's node, serving a schema registry too (for the AVRO and PROTOBUF formats)."""
    node = start_registry_node(tmp_path_factory.mktemp("shared") / "data")
    yield node
    node.stop()


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory) -> Path:
    """The SQL server's TMPDIR: a push query keeps its checkpoint in a temporary directory there."""
    return tmp_path_factory.mktemp("sql-tmp")


@pytest.fixture(scope="module")
def sql(shared_node, tmp_path_factory, tmp_dir):
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp_dir)  # the server's environment only: Popen copies it
    try:
        server = SqlServerProcess(shared_node.bootstrap, tmp_path_factory.mktemp("sql") / "state",
                                  ["--auto-offset-reset", "earliest",
                                   "--schema-registry", shared_node.registry_url]).start()
    finally:
        if saved is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved
    yield server
    server.stop()


@pytest.fixture(scope="module")
def admin(shared_node) -> AdminClient:
    return AdminClient({"bootstrap.servers": shared_node.bootstrap})


def produce(bootstrap: str, topic: str, records) -> None:
    """(key, value dict) pairs as JSON, partitioned as ksqlDB places keys."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    for key, value in records:
        producer.produce(topic, key=key.encode(), value=json.dumps(value).encode())
    assert producer.flush(30) == 0


def raw_post(server: SqlServerProcess, path: str, body: bytes, headers: dict | None = None):
    """(status, content type, body bytes) of a request read to its end."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        connection.close()


def query_endpoint(server: SqlServerProcess, text: str, properties: dict | None = None) -> list:
    """A finite query on /query (a pull query, or a push query with LIMIT): the whole response as JSON."""
    status, _, data = raw_post(server, "/query", json.dumps({"ksql": text, "streamsProperties": properties or {}})
                               .encode())
    assert status == 200, data
    return json.loads(data)


def delimited(server: SqlServerProcess, text: str, properties: dict | None = None) -> tuple[dict, list[list]]:
    """A finite query on /query-stream in its default form: the header line, then one JSON array a line."""
    status, content_type, data = raw_post(server, "/query-stream",
                                          json.dumps({"sql": text, "properties": properties or {}}).encode())
    assert status == 200, data
    assert content_type == DELIMITED
    lines = data.decode().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def queries(server: SqlServerProcess, kind: str) -> dict[str, dict]:
    """SHOW QUERIES of one queryType (PERSISTENT or PUSH), by id."""
    listed = server.ksql("SHOW QUERIES;")[0]["queries"]
    return {q["id"]: q for q in listed if q["queryType"] == kind}


def names(server: SqlServerProcess, what: str) -> list[str]:
    return [s["name"] for s in server.ksql(f"SHOW {what};")[0][what.lower()]]


def topics(admin: AdminClient) -> set[str]:
    return {t for t in admin.list_topics(timeout=30).topics if not t.startswith("_")}


def push_checkpoints(tmp_dir: Path) -> list[Path]:
    return list(tmp_dir.glob("odradek-sql-push-*"))


# ---------------------------------------------------------------- /info, /healthcheck


def test_info_names_the_kafka_cluster_and_healthcheck_is_healthy(sql, admin):
    status, body = sql.request("GET", "/info")
    assert status == 200
    info = body["KsqlServerInfo"]
    assert info["kafkaClusterId"] == admin.describe_cluster(request_timeout=10).result(10).cluster_id
    assert info["kafkaClusterId"]
    assert info["ksqlServiceId"] == "default_" and info["serverStatus"] == "RUNNING" and info["version"]
    status, body = sql.request("GET", "/healthcheck")
    assert status == 200
    assert body == {"isHealthy": True, "details": {"metastore": {"isHealthy": True}, "kafka": {"isHealthy": True}}}


# ---------------------------------------------------------------- pull queries


def test_pull_queries_on_query_stream_and_query(sql):
    sql.ksql("CREATE TABLE rest_scores (player VARCHAR PRIMARY KEY, score INT, team VARCHAR) "
             "WITH (KAFKA_TOPIC='rest_scores', VALUE_FORMAT='JSON', PARTITIONS=2);"
             "CREATE STREAM rest_score_events (player VARCHAR KEY, score INT) "
             "WITH (KAFKA_TOPIC='rest_score_events', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert sql.ksql("INSERT INTO rest_scores (player, score, team) VALUES ('alice', 12, 'red');"
                    "INSERT INTO rest_scores (player, score, team) VALUES ('bob', 7, 'blue');"
                    "INSERT INTO rest_scores (player, score, team) VALUES ('carol', 20, 'red');"
                    "INSERT INTO rest_scores (player, score, team) VALUES ('dave', 3, 'blue');"
                    "INSERT INTO rest_scores (player, score, team) VALUES ('alice', 15, 'red');") == []
    everyone = [["alice", 15, "red"], ["bob", 7, "blue"], ["carol", 20, "red"], ["dave", 3, "blue"]]

    # /query-stream, delimited (the default): a header without a query id, then the rows
    header, rows = delimited(sql, "SELECT * FROM rest_scores WHERE player = 'alice';")
    assert header == {"queryId": None, "columnNames": ["PLAYER", "SCORE", "TEAM"],
                      "columnTypes": ["STRING", "INTEGER", "STRING"]}
    assert rows == [["alice", 15, "red"]]
    # /query-stream, Accept: application/json: one JSON array
    assert sorted(sql.pull("SELECT player, score FROM rest_scores WHERE player IN ('alice', 'dave', 'zoe');")) == [
        ["alice", 15], ["dave", 3]]
    assert sorted(sql.pull("SELECT * FROM rest_scores;")) == everyone
    limited = sql.pull("SELECT * FROM rest_scores LIMIT 2;")
    assert len(limited) == 2 and all(row in everyone for row in limited)
    assert sorted(sql.pull("SELECT player FROM rest_scores WHERE score > 10 AND team = 'red';")) == [["alice"],
                                                                                                   ["carol"]]
    assert sql.pull("SELECT * FROM rest_scores WHERE player = 'nobody';") == []

    # /query: [{"header": ...}, {"row": ...}, ...]
    answer = query_endpoint(sql, "SELECT player, score FROM rest_scores WHERE player = 'carol';")
    assert answer[0]["header"]["schema"] == "`PLAYER` STRING KEY, `SCORE` INTEGER"
    assert answer[1:] == [{"row": {"columns": ["carol", 20]}}]

    # a pull query on a stream: refused, saying why
    for path, body in (("/query-stream", {"sql": "SELECT * FROM rest_score_events;"}),
                       ("/query", {"ksql": "SELECT * FROM rest_score_events;"})):
        status, refused = sql.request("POST", path, body)
        assert status == 400, refused
        assert refused["error_code"] == 40001
        assert "REST_SCORE_EVENTS is a stream" in refused["message"] and "EMIT CHANGES" in refused["message"]
    status, refused = sql.request("POST", "/query-stream", {"sql": "SELECT nope FROM rest_scores;"})
    assert status == 400 and refused["message"] == "line 1:8: column 'NOPE' cannot be resolved", refused


def test_pull_query_values_are_rendered_as_push_queries_render_them(sql, shared_node):
    sql.ksql("CREATE TABLE rest_typed (id VARCHAR PRIMARY KEY, price DECIMAL(5, 2), seen TIMESTAMP, "
             "tags ARRAY<VARCHAR>, address STRUCT<city VARCHAR, zip INT>) "
             "WITH (KAFKA_TOPIC='rest_typed', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(shared_node.bootstrap, "rest_typed", [
        ("t1", {"PRICE": 7.25, "SEEN": 1714979289123, "TAGS": ["x", "y"], "ADDRESS": {"CITY": "Oslo", "ZIP": 150}}),
        ("t2", {"PRICE": 3, "SEEN": None, "TAGS": None, "ADDRESS": None})])
    types = ["STRING", "DECIMAL(5, 2)", "TIMESTAMP", "ARRAY<STRING>", "STRUCT<`CITY` STRING, `ZIP` INTEGER>"]
    t1 = ["t1", 7.25, "2024-05-06T07:08:09.123", ["x", "y"], {"CITY": "Oslo", "ZIP": 150}]
    header, rows = delimited(sql, "SELECT * FROM rest_typed WHERE price > 5;")
    assert header["columnTypes"] == types
    assert rows == [t1]
    assert sorted(sql.pull("SELECT * FROM rest_typed;")) == [t1, ["t2", 3, None, None, None]]
    answer = query_endpoint(sql, "SELECT * FROM rest_typed WHERE id = 't1';")
    assert answer[0]["header"]["schema"] == ", ".join(
        f"`{name}` {t}{' KEY' if name == 'ID' else ''}"
        for name, t in zip(["ID", "PRICE", "SEEN", "TAGS", "ADDRESS"], types, strict=True))
    assert answer[1:] == [{"row": {"columns": t1}}]
    # the same values from a push query
    status, _, data = raw_post(sql, "/query-stream", json.dumps(
        {"sql": "SELECT * FROM rest_typed WHERE id = 't1' EMIT CHANGES LIMIT 1;",
         "properties": {"auto.offset.reset": "earliest"}}).encode(), {"Accept": "application/json"})
    assert status == 200 and json.loads(data)[1:] == [t1]


# ---------------------------------------------------------------- push queries


def test_push_query_streams_rows_produced_after_its_header_and_stops_when_the_client_leaves(sql, shared_node,
                                                                                          tmp_dir):
    sql.ksql("CREATE STREAM rest_push (id VARCHAR KEY, n INT, label VARCHAR) "
             "WITH (KAFKA_TOPIC='rest_push', VALUE_FORMAT='JSON', PARTITIONS=2);")
    produce(shared_node.bootstrap, "rest_push", [("before", {"N": 0, "LABEL": "old"})])
    stream = sql.open_push("SELECT id, n, label FROM rest_push EMIT CHANGES;", {"auto.offset.reset": "latest"})
    try:
        assert stream.response.getheader("Content-Type") == DELIMITED
        query_id = stream.header["queryId"]
        assert query_id.startswith("transient_REST_PUSH_")
        assert stream.header["columnNames"] == ["ID", "N", "LABEL"]
        assert stream.header["columnTypes"] == ["STRING", "INTEGER", "STRING"]
        listed = queries(sql, "PUSH")[query_id]  # as ksqlDB, SHOW QUERIES lists the running push query
        assert listed["queryString"] == "SELECT id, n, label FROM rest_push EMIT CHANGES;"
        assert listed["state"] == "RUNNING" and listed["sinks"] == []
        produce(shared_node.bootstrap, "rest_push", [("k1", {"N": 1, "LABEL": "one"}), ("k2", {"N": 2, "LABEL": "two"})])
        # latest: the record produced before the header is not among them
        assert sorted(stream.rows(2)) == [["k1", 1, "one"], ["k2", 2, "two"]]
    finally:
        stream.close()
    wait_for(lambda: query_id not in queries(sql, "PUSH"), timeout_s=60, what="the push query to stop")
    wait_for(lambda: not push_checkpoints(tmp_dir), timeout_s=60, what="its checkpoint to be removed")
    status, body = sql.request("POST", "/close-query", {"queryId": query_id})
    assert status == 400 and query_id in body["message"]


def test_push_query_as_one_json_array_ends_at_its_limit(sql, shared_node):
    sql.ksql("CREATE STREAM rest_limited (id VARCHAR KEY, n INT) "
             "WITH (KAFKA_TOPIC='rest_limited', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(shared_node.bootstrap, "rest_limited", [(f"k{i}", {"N": i}) for i in range(5)])
    # Accept: application/json: the whole response is one JSON array, complete once LIMIT rows came
    status, content_type, data = raw_post(
        sql, "/query-stream", json.dumps({"sql": "SELECT id, n * 10 AS tens FROM rest_limited EMIT CHANGES LIMIT 3;",
                                          "properties": {"auto.offset.reset": "earliest"}}).encode(),
        {"Accept": "application/json"})
    assert status == 200 and content_type == "application/json"
    header, *rows = json.loads(data)
    assert header["queryId"].startswith("transient_") and header["columnNames"] == ["ID", "TENS"]
    assert header["columnTypes"] == ["STRING", "INTEGER"]
    assert rows == [["k0", 0], ["k1", 10], ["k2", 20]]  # one partition: in offset order

    # /query, ksqlDB's older endpoint: a header, rows, then a final message
    answer = query_endpoint(sql, "SELECT id, n FROM rest_limited WHERE n >= 3 EMIT CHANGES LIMIT 2;",
                            {"auto.offset.reset": "earliest"})
    assert answer[0]["header"]["queryId"].startswith("transient_REST_LIMITED_")
    assert answer[0]["header"]["schema"] == "`ID` STRING KEY, `N` INTEGER"
    assert answer[1:] == [{"row": {"columns": ["k3", 3]}}, {"row": {"columns": ["k4", 4]}},
                          {"finalMessage": "Limit Reached"}]
    wait_for(lambda: not queries(sql, "PUSH"), timeout_s=60, what="the finished push queries to be gone")


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_curl_reads_a_delimited_push_query_to_its_limit(sql, shared_node):
    sql.ksql("CREATE STREAM rest_curl (id VARCHAR KEY, city VARCHAR) "
             "WITH (KAFKA_TOPIC='rest_curl', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(shared_node.bootstrap, "rest_curl", [("a", {"CITY": "Paris"}), ("b", {"CITY": "Oslo"})])
    body = json.dumps({"sql": "SELECT * FROM rest_curl EMIT CHANGES LIMIT 2;",
                       "properties": {"auto.offset.reset": "earliest"}})
    done = subprocess.run(["curl", "-sN", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body,
                           f"http://127.0.0.1:{sql.port}/query-stream"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # the response ended by itself
    header, *rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert header["columnNames"] == ["ID", "CITY"] and header["columnTypes"] == ["STRING", "STRING"]
    assert rows == [["a", "Paris"], ["b", "Oslo"]]


def test_a_client_leaving_before_the_header_stops_the_push_query(sql, tmp_dir):
    sql.ksql("CREATE STREAM rest_gone (id VARCHAR KEY, n INT) "
             "WITH (KAFKA_TOPIC='rest_gone', VALUE_FORMAT='JSON', PARTITIONS=1);")
    wait_for(lambda: not push_checkpoints(tmp_dir), timeout_s=60, what="no push query running")
    body = json.dumps({"sql": "SELECT * FROM rest_gone EMIT CHANGES;", "properties": {}}).encode()
    with socket.create_connection(("127.0.0.1", sql.port)) as client:
        client.sendall(b"POST /query-stream HTTP/1.1\r\nHost: sql\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
    # the query starts (its checkpoint appears), finds nobody to send its header to, and is stopped
    wait_for(lambda: push_checkpoints(tmp_dir), timeout_s=60, what="the push query to start")
    wait_for(lambda: not push_checkpoints(tmp_dir), timeout_s=60, what="the push query to be stopped")
    assert not [q for q in queries(sql, "PUSH") if "REST_GONE" in q]


# ---------------------------------------------------------------- PRINT, INSERT VALUES with ROWTIME


def test_print_from_beginning_with_limit_shows_records_and_their_rowtime(sql):
    sql.ksql("CREATE STREAM rest_print (id VARCHAR KEY, n INT) "
             "WITH (KAFKA_TOPIC='rest_print', VALUE_FORMAT='JSON', PARTITIONS=1);")
    sql.ksql(f"INSERT INTO rest_print (id, n, ROWTIME) VALUES ('a', 1, {ROWTIME_MS});"
             f"INSERT INTO rest_print (id, n, ROWTIME) VALUES ('b', 2, {ROWTIME_MS + 1500});"
             "INSERT INTO rest_print (id, n) VALUES ('c', 3);")
    status, content_type, data = raw_post(sql, "/query", json.dumps({"ksql": "PRINT 'rest_print' FROM BEGINNING "
                                                                             "LIMIT 2;"}).encode())
    assert status == 200, data
    assert data.decode().splitlines() == [
        'rowtime: 2023/11/14 22:13:20.000 Z, key: a, value: {"N":1}, partition: 0',
        'rowtime: 2023/11/14 22:13:21.500 Z, key: b, value: {"N":2}, partition: 0',
    ]
    status, body = sql.request("POST", "/query", {"ksql": "PRINT 'rest_nowhere' FROM BEGINNING LIMIT 1;"})
    assert status == 400 and "rest_nowhere" in body["message"]


# ---------------------------------------------------------------- statements


def test_show_describe_explain_terminate_drop_and_insert_select(sql, admin):
    sql.ksql("CREATE STREAM rest_orders (id VARCHAR KEY, amount INT, item VARCHAR) "
             "WITH (KAFKA_TOPIC='rest_orders', VALUE_FORMAT='JSON', PARTITIONS=2);"
             "CREATE TABLE rest_items (item VARCHAR PRIMARY KEY, price INT) "
             "WITH (KAFKA_TOPIC='rest_items', VALUE_FORMAT='JSON', PARTITIONS=1);")
    csas = sql.ksql("CREATE STREAM rest_big AS SELECT id, amount FROM rest_orders WHERE amount > 10;")[0]
    csas_id = csas["commandStatus"]["queryId"]
    assert csas["commandStatus"]["status"] == "SUCCESS" and csas_id.startswith("CSAS_REST_BIG_")
    sql.ksql("CREATE STREAM rest_copy (id VARCHAR KEY, amount INT) "
             "WITH (KAFKA_TOPIC='rest_copy', VALUE_FORMAT='JSON', PARTITIONS=1);")
    insert_id = sql.ksql("INSERT INTO rest_copy SELECT id, amount FROM rest_big;")[0]["commandStatus"]["queryId"]
    assert insert_id.startswith("INSERTQUERY_")
    sql.ksql("INSERT INTO rest_orders (id, amount, item) VALUES ('o1', 50, 'book');"
             "INSERT INTO rest_orders (id, amount, item) VALUES ('o2', 5, 'pen');")
    wait_for(lambda: read_table(sql.bootstrap, "rest_copy"), what="o1 through both queries")
    assert [(k, json.loads(v)) for k, v in read_table(sql.bootstrap, "rest_copy")] == [(b"o1", {"AMOUNT": 50})]

    # SHOW
    streams = {s["name"]: s for s in sql.ksql("SHOW STREAMS;")[0]["streams"]}
    assert streams["REST_ORDERS"] == {"type": "STREAM", "name": "REST_ORDERS", "topic": "rest_orders",
                                      "keyFormat": "KAFKA", "valueFormat": "JSON", "isWindowed": False}
    assert streams["REST_BIG"]["topic"] == "REST_BIG"
    tables = {t["name"]: t for t in sql.ksql("SHOW TABLES;")[0]["tables"]}
    assert tables["REST_ITEMS"] == {"type": "TABLE", "name": "REST_ITEMS", "topic": "rest_items", "keyFormat": "KAFKA",
                                    "valueFormat": "JSON", "isWindowed": False}
    assert "REST_ORDERS" not in tables and "REST_ITEMS" not in streams
    listed_topics = {t["name"]: t for t in sql.ksql("SHOW TOPICS;")[0]["topics"]}
    assert listed_topics["rest_orders"]["replicaInfo"] == [1, 1] and "REST_BIG" in listed_topics
    persistent = queries(sql, "PERSISTENT")
    assert persistent[csas_id]["state"] == "RUNNING" and persistent[csas_id]["sinks"] == ["REST_BIG"]
    assert persistent[csas_id]["sinkKafkaTopics"] == ["REST_BIG"]
    assert persistent[insert_id]["sinks"] == ["REST_COPY"]

    # DESCRIBE [EXTENDED]
    described = sql.ksql("DESCRIBE rest_big;")[0]["sourceDescription"]
    assert [(f["name"], f.get("type")) for f in described["fields"]] == [("ID", "KEY"), ("AMOUNT", None)]
    assert described["type"] == "STREAM" and described["topic"] == "REST_BIG" and not described["extended"]
    extended = sql.ksql("DESCRIBE EXTENDED rest_big;")[0]["sourceDescription"]
    assert extended["extended"] and extended["partitions"] == 2 and extended["replication"] == 1
    assert [q["id"] for q in extended["writeQueries"]] == [csas_id]
    assert [q["id"] for q in extended["readQueries"]] == [insert_id]

    # EXPLAIN
    explained = sql.ksql(f"EXPLAIN {csas_id};")[0]["queryDescription"]
    assert explained["id"] == csas_id and explained["sources"] == ["REST_ORDERS"]
    assert explained["statementText"].startswith("CREATE STREAM rest_big AS SELECT")
    assert [f["name"] for f in explained["fields"]] == ["ID", "AMOUNT"]
    assert explained["state"] == "RUNNING" and explained["executionPlan"]
    assert "does not exist" in sql.ksql_error("EXPLAIN CSAS_NOPE_1;")["message"]

    # DROP of a source a query reads: refused, with ksqlDB's message, and nothing changes
    refused = sql.ksql_error("DROP STREAM rest_big;")
    assert refused["message"] == (f"Cannot drop REST_BIG. The following queries read from this source: [{insert_id}]. "
                                  "You need to terminate them before dropping REST_BIG.")
    assert "REST_BIG" in names(sql, "STREAMS") and set(queries(sql, "PERSISTENT")) >= {csas_id, insert_id}

    # TERMINATE: the query is gone, its checkpoint too, and its output no longer grows
    checkpoints = sql.state_dir / "checkpoints"
    assert (checkpoints / insert_id).is_dir()
    assert sql.ksql(f"TERMINATE {insert_id};")[0]["commandStatus"]["message"] == "Query terminated."
    assert insert_id not in queries(sql, "PERSISTENT") and csas_id in queries(sql, "PERSISTENT")
    assert not (checkpoints / insert_id).exists()
    assert "Unknown queryId" in sql.ksql_error(f"TERMINATE {insert_id};")["message"]
    sql.ksql("INSERT INTO rest_orders (id, amount, item) VALUES ('o3', 99, 'lamp');")
    # o3 reaches REST_BIG (the CSAS still runs): the terminated copy would have had it by then
    status, _, data = raw_post(sql, "/query-stream", json.dumps(
        {"sql": "SELECT id FROM rest_big WHERE id = 'o3' EMIT CHANGES LIMIT 1;",
         "properties": {"auto.offset.reset": "earliest"}}).encode(), {"Accept": "application/json"})
    assert status == 200 and json.loads(data)[1:] == [["o3"]]
    assert [k for k, _ in read_table(sql.bootstrap, "rest_copy")] == [b"o1"]

    # DROP ... DELETE TOPIC: the source, the query writing it and the topic go
    assert "REST_BIG" in topics(admin)
    dropped = sql.ksql("DROP STREAM rest_big DELETE TOPIC;")[0]
    assert dropped["commandStatus"]["message"] == "Source `REST_BIG` (topic: REST_BIG) was dropped."
    assert "REST_BIG" not in names(sql, "STREAMS") and csas_id not in queries(sql, "PERSISTENT")
    assert not (checkpoints / csas_id).exists()
    wait_for(lambda: "REST_BIG" not in topics(admin), timeout_s=60, what="topic REST_BIG to be deleted")
    sql.ksql("DROP STREAM rest_copy;")  # without DELETE TOPIC: the topic stays
    assert "REST_COPY" not in names(sql, "STREAMS") and "rest_copy" in topics(admin)
    assert "does not exist" in sql.ksql_error("DROP STREAM rest_copy;")["message"]
    assert sql.ksql("DROP STREAM IF EXISTS rest_copy;") == []


def _snapshot(sql: SqlServerProcess, admin: AdminClient) -> tuple:
    return names(sql, "STREAMS"), names(sql, "TABLES"), sorted(queries(sql, "PERSISTENT")), topics(admin)


def test_refused_statements_say_why_in_one_line_and_create_nothing(sql, admin):
    sql.ksql("CREATE STREAM rest_src (id VARCHAR KEY, n INT, label VARCHAR) "
             "WITH (KAFKA_TOPIC='rest_src', VALUE_FORMAT='JSON', PARTITIONS=1);")
    sql.ksql("CREATE STREAM rest_src2 (id VARCHAR KEY, n INT, label VARCHAR, rowkey VARCHAR) "
             "WITH (KAFKA_TOPIC='rest_src2', VALUE_FORMAT='JSON', PARTITIONS=1);")
    before = _snapshot(sql, admin)
    syntax = "CREATE STREAM rest_bad1 (id VARCHAR KEY, n INT WITH (KAFKA_TOPIC='rest_bad1', PARTITIONS=1);"
    refused = [
        (syntax, [f"line 1:{syntax.index('WITH') + 1}:", "WITH"]),
        ("CREATE STREAM rest_bad2 WITH (KAFKA_TOPIC='rest_bad2', PARTITIONS=1) AS SELECT id,\n  nope FROM rest_src;",
         ["line 2:3:", "NOPE"]),
        ("CREATE STREAM rest_bad3 AS SELECT * FROM rest_nowhere;", ["REST_NOWHERE does not exist"]),
        ("CREATE STREAM rest_bad4 AS SELECT id, UCASE(n) AS u FROM rest_src;", ["UCASE", "INT"]),
        ("CREATE STREAM rest_bad5 AS SELECT id, CAST(label AS ARRAY<INT>) AS u FROM rest_src;", ["cannot cast"]),
        ("CREATE STREAM rest_bad6 AS SELECT id FROM rest_src WHERE n;", ['"N"']),
        ("CREATE STREAM rest_bad7 (id VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='rest_bad7', PARTITIONS=1, NOPE=1);",
         ["Invalid config variable(s) in the WITH clause: NOPE"]),
        ("CREATE STREAM rest_bad8 (id VARCHAR KEY, n INT) WITH (KAFKA_TOPIC='rest_bad8', VALUE_FORMAT='JSON');",
         ["Topic 'rest_bad8' does not exist", "PARTITIONS"]),
        ("CREATE TABLE rest_bad9 (id VARCHAR, n INT) WITH (KAFKA_TOPIC='rest_bad9', PARTITIONS=1);",
         ["Tables require a PRIMARY KEY"]),
        ("CREATE STREAM rest_src (id VARCHAR KEY) WITH (KAFKA_TOPIC='rest_bad10', PARTITIONS=1);",
         ["Cannot add stream 'REST_SRC': A stream with the same name already exists"]),
        ("INSERT INTO rest_src (id, nope) VALUES ('a', 1);", ["NOPE"]),
        ("INSERT INTO rest_src (id, n) VALUES ('a', 'many');", ["N", "many"]),
        ("SELECT * FROM rest_src EMIT CHANGES;", ["/query"]),
        ("CREATE STREAM rest_bad11 AS SELECT a.id AS id, b.n FROM rest_src a FULL JOIN rest_src b "
         "WITHIN 1 SECOND ON a.id = b.id;", ["same name"]),
        ("CREATE STREAM rest_bad12 AS SELECT a.id AS id, b.n FROM rest_src a FULL JOIN rest_src2 b "
         "WITHIN 1 SECOND ON a.label = b.label;", ["key column ROWKEY_1"]),  # a side has a ROWKEY
    ]
    for statement, fragments in refused:
        status, body = sql.request("POST", "/ksql", {"ksql": statement, "streamsProperties": {}})
        assert status == 400, (statement, body)
        assert body["@type"] == "statement_error" and body["statementText"] == statement, body
        assert body["error_code"] == (40002 if statement.startswith("SELECT") else 40001), body
        message = body["message"]
        assert "\n" not in message and all(f in message for f in fragments), (statement, message)
    for path in ("/ksql", "/query", "/query-stream"):
        status, _, data = raw_post(sql, path, b"CREATE STREAM {")
        assert status == 400, data
        assert json.loads(data)["message"] == "the request body is not JSON"
    status, body = sql.request("POST", "/query", {"ksql": "SHOW STREAMS;"})
    assert status == 400 and "SELECT or PRINT" in body["message"]
    assert _snapshot(sql, admin) == before
    assert read_table(sql.bootstrap, "rest_src") == []  # the refused INSERTs wrote nothing


def test_avro_in_and_protobuf_out_through_the_schema_registry(sql, shared_node):
    registry = SchemaRegistryClient({"url": shared_node.registry_url})
    payment = {"type": "record", "name": "Payment", "fields": [
        {"name": "AMOUNT", "type": "double"}, {"name": "TAGS", "type": {"type": "array", "items": "string"}}]}
    sql.ksql("CREATE STREAM rest_avro_in (id VARCHAR KEY, amount DOUBLE, tags ARRAY<VARCHAR>) "
             "WITH (KAFKA_TOPIC='rest_avro_in', VALUE_FORMAT='AVRO', PARTITIONS=1);")
    sql.ksql("CREATE STREAM rest_pb_out WITH (KAFKA_TOPIC='rest_pb_out', VALUE_FORMAT='PROTOBUF', "
             "VALUE_PROTOBUF_NULLABLE_REPRESENTATION='OPTIONAL') AS "
             "SELECT id, amount * 2 AS doubled, tags FROM rest_avro_in WHERE amount > 1;")
    # Confluent's Avro serializer writes the input, with a schema of its own
    serialize = AvroSerializer(registry, json.dumps(payment))
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    context = SerializationContext("rest_avro_in", MessageField.VALUE)
    for key, amount, tags in (("p1", 0.5, ["small"]), ("p2", 2.5, ["big", "eu"]), ("p3", 4.0, [])):
        producer.produce("rest_avro_in", key=key.encode(), value=serialize({"AMOUNT": amount, "TAGS": tags}, context))
    assert producer.flush(30) == 0

    records = wait_for(lambda: (r := read_table(shared_node.bootstrap, "rest_pb_out")) and len(r) >= 2 and r,
                       what="the PROTOBUF output")
    latest = registry.get_latest_version("rest_pb_out-value")
    assert latest.schema.schema_type == "PROTOBUF" and "optional double DOUBLED = 1" in latest.schema.schema_str
    # and Confluent's Protobuf deserializer reads the output
    deserialize = ProtobufDeserializer(message_class(SchemaRegistryClient({"url": shared_node.registry_url}),
                                                     latest.schema_id), {"use.deprecated.format": False})
    out_context = SerializationContext("rest_pb_out", MessageField.VALUE)
    rows = [(k.decode(), deserialize(v, out_context)) for k, v in records]
    assert [(k, m.DOUBLED, list(m.TAGS)) for k, m in rows] == [("p2", 5.0, ["big", "eu"]), ("p3", 8.0, [])]


# ---------------------------------------------------------------- other clients


def test_odradek_sql_shell_as_a_client(sql):
    statements = ("CREATE STREAM rest_shell_s (id VARCHAR KEY, city VARCHAR) "
                  "WITH (KAFKA_TOPIC='rest_shell_s', VALUE_FORMAT='JSON', PARTITIONS=1);"
                  "CREATE TABLE rest_shell_t (id VARCHAR PRIMARY KEY, city VARCHAR, n INT) "
                  "WITH (KAFKA_TOPIC='rest_shell_t', VALUE_FORMAT='JSON', PARTITIONS=1);"
                  "INSERT INTO rest_shell_t (id, city, n) VALUES ('a', 'Paris', 3);"
                  "SELECT * FROM rest_shell_t WHERE id = 'a';"
                  "SHOW STREAMS;")
    done = subprocess.run([sys.executable, "-m", "odradek", "sql", "shell", "--server",
                           f"http://127.0.0.1:{sql.port}", "-e", statements],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert " Stream created" in lines and " Table created" in lines
    assert any(re.fullmatch(r"\|ID\s*\|CITY\s*\|N\s*\|", line) for line in lines), done.stdout
    assert any(re.fullmatch(r"\|a\s*\|Paris\s*\|3\s*\|", line) for line in lines), done.stdout
    assert any(re.fullmatch(r" REST_SHELL_S\s*\| rest_shell_s\s*\| KAFKA\s*\| JSON\s*\| false", line)
               for line in lines), done.stdout
    failed = subprocess.run([sys.executable, "-m", "odradek", "sql", "shell", "--server",
                             f"http://127.0.0.1:{sql.port}", "-e", "SELECT * FROM rest_shell_nowhere;"],
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1 and "REST_SHELL_NOWHERE does not exist" in failed.stderr


def test_the_ksqldb_package_as_a_client(sql):
    ksqldb = pytest.importorskip("ksqldb")
    requests = pytest.importorskip("requests")
    client = ksqldb.KSQLdbClient(f"http://127.0.0.1:{sql.port}")
    created = client.ksql("CREATE STREAM rest_client (id VARCHAR KEY, n INT) "
                          "WITH (KAFKA_TOPIC='rest_client', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert created[0]["@type"] == "currentStatus" and created[0]["commandStatus"]["status"] == "SUCCESS"
    assert "REST_CLIENT" in [s["name"] for s in client.ksql("SHOW STREAMS;")[0]["streams"]]
    with pytest.raises(requests.HTTPError) as refused:
        client.ksql("CREATE STREAM rest_client (id VARCHAR KEY) WITH (KAFKA_TOPIC='rest_client');")
    assert refused.value.response.status_code == 400
    assert refused.value.response.json()["error_code"] == 40001
    assert client.close_query("transient_NOPE_1_1") is False

    stream = sql.open_push("SELECT * FROM rest_client EMIT CHANGES;")
    try:
        query_id = stream.header["queryId"]
        assert client.close_query(query_id) is True
        stream.response.read()  # the stream ends
    finally:
        stream.close()
    wait_for(lambda: query_id not in queries(sql, "PUSH"), timeout_s=60, what="the closed push query to be gone")
    assert client.close_query(query_id) is False


def test_the_server_logged_no_unhandled_error(sql):
    """Last: no request of this module made the server fail (aiohttp logs those, and answers 500)."""
    assert "Error handling request" not in sql.log()
