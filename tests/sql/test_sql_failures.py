"""Faults under running SQL queries, one after the other on the same queries: Spark's Python workers killed
mid-batch, then the server killed (kill -9, with its Spark JVM and Python workers) and restarted. The output
topics, read read_committed, hold every input exactly once and the aggregates count every record once."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.sql.server_process import SqlServerProcess, read_table, wait_for

pytest.importorskip("pyspark")

STATEMENTS = """
CREATE STREAM {p}_events (id VARCHAR KEY, user VARCHAR, n INT)
  WITH (KAFKA_TOPIC='{p}_events', VALUE_FORMAT='JSON', PARTITIONS=2);
CREATE STREAM {p}_copy AS SELECT id, user, n * 10 AS tens FROM {p}_events;
CREATE TABLE {p}_counts AS SELECT user, COUNT(*) AS events, SUM(n) AS total FROM {p}_events GROUP BY user;
"""


class Feeder:
    """Produces events 0, 1, 2, ... (5 users) in the background until stopped, about 50 a second."""

    def __init__(self, bootstrap: str, topic: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.topic = topic
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def send(self, count: int) -> None:
        for _ in range(count):
            i = self.sent
            self.producer.produce(self.topic, key=f"e{i}".encode(),
                                  value=json.dumps({"user": f"u{i % 5}", "n": 1}).encode())
            self.sent += 1
        assert self.producer.flush(30) == 0

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.send(10)
            time.sleep(0.2)  # ~50 a second: enough to be mid-batch at any moment, few enough to check fast

    def start(self) -> Feeder:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def check_exactly_once(bootstrap: str, prefix: str, sent: int) -> None:
    def complete():
        copy = read_table(bootstrap, f"{prefix.upper()}_COPY")
        return copy if len(copy) >= sent else None

    copy = wait_for(complete, timeout_s=180, what="every event in the copy")
    ids = Counter(k.decode() for k, _ in copy)
    assert sorted(ids) == sorted(f"e{i}" for i in range(sent)), "an event is missing"
    assert max(ids.values()) == 1, f"duplicated: {[i for i, c in ids.items() if c > 1][:10]}"

    expected = {f"u{u}": {"EVENTS": sent // 5 + (u < sent % 5), "TOTAL": sent // 5 + (u < sent % 5)}
                for u in range(5)}

    def counts():
        table = {}
        for k, v in read_table(bootstrap, f"{prefix.upper()}_COUNTS"):
            table[k.decode()] = json.loads(v)
        return table if table == expected else None

    wait_for(counts, timeout_s=180, what=f"the counts {expected}")


def _python_workers(server: SqlServerProcess) -> list[int]:
    """Spark's Python task workers of the server: the processes its `pyspark.worker` daemon forked."""
    pids = []
    for pid in server.session_pids():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            forked = os.getpgid(pid) != pid  # the daemon leads its process group; its workers do not
        except OSError:
            continue
        if b"pyspark.daemon" in command and b"pyspark.worker" in command and forked:
            pids.append(pid)
    return pids


def _kill_python_workers(server: SqlServerProcess, rounds: int) -> int:
    killed = 0
    for _ in range(rounds):  # a few rounds, so that some kills land inside a batch
        workers = wait_for(lambda: _python_workers(server), what="Spark's Python workers")
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(1)  # spreads the rounds over several batches; nothing waits on it
    return killed


def test_python_workers_then_the_sql_server_killed_mid_query_lose_and_duplicate_nothing(shared_node, tmp_path):
    """Spark's Python workers killed mid-batch (Spark retries the tasks), then the server's whole session
    killed with kill -9 and restarted from its state dir: the queries come back from the command topic and
    their checkpoints, and the outputs hold every event exactly once."""
    prefix = "killed"
    state = tmp_path / "state"
    server = SqlServerProcess(shared_node.bootstrap, state, ["--auto-offset-reset", "earliest"]).start()
    try:
        server.ksql(STATEMENTS.replace("{p}", prefix))
        feeder = Feeder(shared_node.bootstrap, f"{prefix}_events").start()
        wait_for(lambda: len(read_table(shared_node.bootstrap, "KILLED_COPY")) > 50, what="output before the kills")
        assert _kill_python_workers(server, 3) > 0
        wait_for(lambda: all(q["state"] == "RUNNING" for q in server.ksql("SHOW QUERIES;")[0]["queries"]),
                 what="the queries running again after the workers' kills")
        copied = len(read_table(shared_node.bootstrap, "KILLED_COPY"))
        wait_for(lambda: len(read_table(shared_node.bootstrap, "KILLED_COPY")) > copied + 20,
                 what="output after the workers' kills")
        server.kill()
        feeder.stop()
        restarted = SqlServerProcess(shared_node.bootstrap, state, ["--auto-offset-reset", "earliest"])
        restarted.port = server.port
        server = restarted.start()
        queries = server.ksql("SHOW QUERIES;")[0]["queries"]
        assert sorted(q["sinks"][0] for q in queries) == ["KILLED_COPY", "KILLED_COUNTS"]
        check_exactly_once(shared_node.bootstrap, prefix, feeder.sent)
        assert wait_for(lambda: all(q["state"] == "RUNNING" for q in server.ksql("SHOW QUERIES;")[0]["queries"]),
                        what="the restarted queries running")
    finally:
        server.kill()
