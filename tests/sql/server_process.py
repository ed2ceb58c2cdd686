"""An `odradek sql` server as a real process for the tests, and a small HTTP client of its REST API."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.conftest import free_port

START_TIMEOUT_S = 180.0  # a JVM on a loaded machine


class SqlServerProcess:
    def __init__(self, bootstrap: str, state_dir: Path, extra_args: list[str] | None = None):
        self.bootstrap = bootstrap
        self.state_dir = state_dir
        self.port = free_port()
        self.extra_args = extra_args or []
        self.process: subprocess.Popen | None = None
        self.log_path = state_dir.parent / f"{state_dir.name}.log"

    def start(self) -> SqlServerProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "odradek", "sql", "--bootstrap-server", self.bootstrap,
             "--listen", f"http://127.0.0.1:{self.port}", "--state-dir", str(self.state_dir),
             "--trigger-interval-ms", "200", "--replication-factor", "1",
             # one stateful task per micro-batch instead of two: half the Python work on a small machine
             "--spark-conf", "spark.sql.shuffle.partitions=1", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ})
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the SQL server exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            try:
                status, _ = self.request("GET", "/healthcheck", timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"the SQL server did not become healthy:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def session_pids(self) -> list[int]:
        """The server, its Spark JVM and Spark's Python daemons and workers: its session (the daemons make
        process groups of their own)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getsid(int(entry.name)) == self.process.pid:
                        pids.append(int(entry.name))
                except OSError:
                    pass
        return pids

    def kill(self) -> None:
        """kill -9 of the server and every process of its session."""
        if self.process is not None and self.process.poll() is None:
            for pid in self.session_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.process.wait(30)

    def stop(self) -> None:
        """SIGTERM to the server alone: it stops its queries and its Spark JVM itself."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 120,
                headers: dict | None = None) -> tuple[int, object]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=json.dumps(body) if body is not None else None,
                               headers={"Content-Type": "application/json", **(headers or {})})
            response = connection.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        finally:
            connection.close()

    def ksql(self, text: str, properties: dict | None = None) -> list:
        """Run statements; fail the test with the server's message if it refuses one."""
        status, body = self.request("POST", "/ksql", {"ksql": text, "streamsProperties": properties or {}})
        assert status == 200, body
        return body

    def ksql_error(self, text: str) -> dict:
        status, body = self.request("POST", "/ksql", {"ksql": text})
        assert status == 400, body
        return body

    def pull(self, text: str) -> list[list]:
        status, body = self.request("POST", "/query-stream", {"sql": text, "properties": {}},
                                    headers={"Accept": "application/json"})
        assert status == 200, body
        return body[1:]

    def open_push(self, text: str, properties: dict | None = None) -> PushStream:
        return PushStream(self.port, text, properties or {})


class PushStream:
    """A push query on /query-stream (delimited): the header at once, rows as they come."""

    def __init__(self, port: int, text: str, properties: dict):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.connection.request("POST", "/query-stream", body=json.dumps({"sql": text, "properties": properties}),
                                headers={"Content-Type": "application/json"})
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()
        self.header = json.loads(self.response.readline())

    def rows(self, count: int) -> list[list]:
        return [json.loads(self.response.readline()) for _ in range(count)]

    def close(self) -> None:
        self.connection.close()


def read_table(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[tuple[bytes | None, bytes | None]]:
    """Every committed record of a topic (key, value), in partition then offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sql-test-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        done: set[int] = set()
        records = []
        deadline = time.monotonic() + timeout_s
        while len(done) < len(partitions):
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                continue
            records.append((message.partition(), message.offset(), message.key(), message.value()))
        return [(k, v) for _, _, k, v in sorted(records, key=lambda r: (r[0], r[1]))]
    finally:
        consumer.close()


def wait_for(predicate, timeout_s: float = 120.0, what: str = "the condition", interval_s: float = 0.3):
    """Poll until predicate() returns something truthy; return it."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval_s)
