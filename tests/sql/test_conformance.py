"""The conformance corpus (conformance.yaml) on a real SQL server and node: each case's statements run, its
inputs are produced phase by phase, and the output topic, read read_committed, must hold what it expects."""

from __future__ import annotations

import json
import struct
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from tests.sql.server_process import SqlServerProcess, read_table, wait_for

pytest.importorskip("pyspark")

CASES = yaml.safe_load((Path(__file__).parent / "conformance.yaml").read_text())
# Added to every timestamp and window bound: a multiple of every window size, and recent, so that retention
# (7 days by default) does not delete the inputs.
BASE_MS = (int(time.time()) // 3600 - 1) * 3_600_000


@pytest.fixture(scope="module")
def sql(shared_node, tmp_path_factory):
    server = SqlServerProcess(shared_node.bootstrap, tmp_path_factory.mktemp("sql-conformance") / "state",
                              ["--auto-offset-reset", "earliest"]).start()
    yield server
    server.stop()


def _key_text(key: bytes | None, window_type: str | None) -> str | None:
    if key is None:
        return None
    if window_type == "SESSION":
        end, start = struct.unpack(">qq", key[-16:])
        return f"{key[:-16].decode()}@{start - BASE_MS}-{end - BASE_MS}"
    if window_type is not None:
        (start,) = struct.unpack(">q", key[-8:])
        return f"{key[:-8].decode()}@{start - BASE_MS}"
    return key.decode()


def _matches(expect: dict, records: list, window_type: str | None) -> bool:
    decoded = [(_key_text(k, window_type), json.loads(v) if v is not None else None) for k, v in records]
    if "stream" in expect:
        want = Counter(json.dumps([r["key"], r["value"]], sort_keys=True) for r in expect["stream"])
        got = Counter(json.dumps([k, v], sort_keys=True) for k, v in decoded)
        return got == want
    table: dict = {}
    for key, value in decoded:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table == {str(k): v for k, v in expect["table"].items()}


def _run(sql: SqlServerProcess, bootstrap: str, case: dict) -> None:
    prefix = "conf_" + "".join(ch if ch.isalnum() else "_" for ch in case["name"])[:40]
    statements = case["statements"].replace("{p}", prefix)
    sql.ksql(statements)
    output = f"{prefix}_out"
    window_type = sql.ksql(f"DESCRIBE {output};")[0]["sourceDescription"]["windowType"]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})
    records: list = []
    try:
        for phase in case["phases"]:
            topic = None
            for record in phase["inputs"]:
                value = record["value"]
                key = None if record["key"] is None else str(record["key"]).encode()
                if topic is not None and record.get("topic", "in") != topic:
                    # In the log in the order listed: a table update listed after a stream record must not be
                    # read in an earlier micro-batch than it (each topic's batches are acknowledged on their own).
                    assert producer.flush(30) == 0
                topic = record.get("topic", "in")
                producer.produce(f"{prefix}_{topic}", key=key,
                                 value=None if value is None else json.dumps(value).encode(),
                                 timestamp=BASE_MS + record["timestamp"])
            assert producer.flush(30) == 0
            expect = phase["expect"]

            seen: list = []

            def reached(expect=expect, seen=seen):
                found = read_table(bootstrap, output)
                seen[:] = found or []
                return found if found and _matches(expect, found, window_type) else None

            try:
                # Under pytest's 300 s for the test, so that a failure says what the output held instead.
                records = wait_for(reached, timeout_s=240, what=f"the output of {case['name']!r}: {expect}",
                                   interval_s=1.0)
            except AssertionError as failure:
                held = [(_key_text(k, window_type), v) for k, v in seen]
                raise AssertionError(f"{failure}; the output held {held}") from None
        if "records" in case["phases"][-1]["expect"]:
            assert len(records) == case["phases"][-1]["expect"]["records"], records
    finally:
        kind = "TABLE" if f"CREATE TABLE {output} " in statements else "STREAM"
        sql.ksql(f"DROP {kind} {output} DELETE TOPIC;")


@pytest.fixture(scope="module")
def outcomes(request, sql, shared_node):
    """The selected cases run four at a time, each its own persistent query: a case spends most of its time
    waiting for micro-batches, but every running query also costs CPU, so more at once is not faster on two
    cores."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_conformance"]
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="conformance")
    futures = {case["name"]: pool.submit(_run, sql, shared_node.bootstrap, case) for case in selected}
    yield futures
    pool.shutdown(wait=True)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_conformance(outcomes, case):
    outcomes[case["name"]].result()
