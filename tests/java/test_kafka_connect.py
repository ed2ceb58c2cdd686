"""Kafka Connect 4.0 against an Odradek node: a standalone worker runs the FileStream source and sink
connectors; a distributed worker, driven through its REST API, resumes from its committed source offsets
after a kill -9."""

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import free_port
from tests.java.kafka_process import KafkaProgram, read_partition
from tests.reference_kafka import KAFKA_HOME, requires_reference

pytestmark = requires_reference

FILE_CONNECTORS_JAR = KAFKA_HOME / "libs" / "connect-file-4.0.0.jar"
SOURCE_CONNECTOR = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CONNECTOR = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def properties(path, settings: dict) -> str:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return str(path)


def worker_settings(node, tmp_path, rest_port: int) -> dict:
    plugins = tmp_path / "plugins"  # only the FileStream connectors: scanning all of libs/ takes seconds
    plugins.mkdir(exist_ok=True)
    (plugins / FILE_CONNECTORS_JAR.name).symlink_to(FILE_CONNECTORS_JAR)
    return {"bootstrap.servers": node.bootstrap, "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER, "plugin.path": plugins, "listeners": f"http://127.0.0.1:{rest_port}",
            "offset.flush.interval.ms": "500"}


def create_topic(node, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def values(node, topic: str) -> list[str]:
    return [value.decode() for _, value in read_partition(node.bootstrap, topic)]


def test_standalone_worker_copies_a_file_through_a_topic_into_another_file(node_factory, tmp_path):
    node = node_factory({"group.initial.rebalance.delay.ms": "0"})
    create_topic(node, "connect-lines")
    lines = [f"line {i}: {'x' * (i % 7)}" for i in range(200)]
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("".join(f"{line}\n" for line in lines))
    worker = KafkaProgram(
        "connect-standalone.sh",
        properties(tmp_path / "worker.properties", {**worker_settings(node, tmp_path, free_port()),
                                                    "offset.storage.file.filename": tmp_path / "offsets"}),
        properties(tmp_path / "source.properties", {"name": "file-source", "connector.class": SOURCE_CONNECTOR,
                                                    "tasks.max": "1", "file": source_file, "topic": "connect-lines"}),
        properties(tmp_path / "sink.properties", {"name": "file-sink", "connector.class": SINK_CONNECTOR,
                                                  "tasks.max": "1", "file": sink_file, "topics": "connect-lines"}),
        work_dir=tmp_path / "standalone").start()
    try:
        worker.wait_for(lambda: sink_file.exists() and sink_file.read_text().splitlines() == lines,
                        "every line copied to the sink's file")
        assert values(node, "connect-lines") == lines
    finally:
        worker.stop()


class ConnectRest:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        request = urllib.request.Request(self.base + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return 0, None

    def running(self, connector: str) -> bool:
        status, body = self.call("GET", f"/connectors/{connector}/status")
        return status == 200 and body["connector"]["state"] == "RUNNING" and \
            [task["state"] for task in body["tasks"]] == ["RUNNING"]


def committed_source_position(node, connector: str) -> int | None:
    """The source offset the distributed worker last committed for the connector (the file position)."""
    position = None
    for key, value in read_partition(node.bootstrap, "connect-offsets"):
        if key is not None and json.loads(key)[0] == connector:
            position = None if value is None else json.loads(value)["position"]
    return position


def test_distributed_worker_runs_a_connector_from_rest_and_resumes_after_kill_9(node_factory, tmp_path):
    node = node_factory({"group.initial.rebalance.delay.ms": "0"})
    create_topic(node, "connect-events")
    rest_port = free_port()
    settings = {**worker_settings(node, tmp_path, rest_port), "group.id": "connect-cluster",
                "config.storage.topic": "connect-configs", "offset.storage.topic": "connect-offsets",
                "status.storage.topic": "connect-status", "config.storage.replication.factor": "1",
                "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
                "offset.storage.partitions": "1",
                # a restarted worker gets the tasks of the one killed at once, not after 5 minutes
                "scheduled.rebalance.max.delay.ms": "0", "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}
    worker_file = properties(tmp_path / "worker.properties", settings)
    source_file = tmp_path / "events.txt"
    first = [f"event {i}" for i in range(50)]
    source_file.write_text("".join(f"{line}\n" for line in first))
    rest = ConnectRest(rest_port)

    worker = KafkaProgram("connect-distributed.sh", worker_file, work_dir=tmp_path / "distributed").start()
    try:
        worker.wait_for(lambda: rest.call("GET", "/connectors")[0] == 200, "the REST API up")
        status, created = rest.call("POST", "/connectors", {"name": "events-source", "config": {
            "connector.class": SOURCE_CONNECTOR, "tasks.max": "1", "file": str(source_file),
            "topic": "connect-events"}})
        assert status == 201 and created["name"] == "events-source", (status, created)
        worker.wait_for(lambda: rest.running("events-source"), "the connector and its task RUNNING")
        worker.wait_for(lambda: values(node, "connect-events") == first, "the first lines in the topic")
        size = source_file.stat().st_size
        worker.wait_for(lambda: committed_source_position(node, "events-source") == size,
                        "the source offsets of every line committed")

        worker.kill()
        more = [f"event {i}" for i in range(50, 80)]
        with source_file.open("a") as appended:
            appended.write("".join(f"{line}\n" for line in more))
        worker = KafkaProgram("connect-distributed.sh", worker_file, work_dir=tmp_path / "distributed").start()
        worker.wait_for(lambda: rest.running("events-source"), "the connector RUNNING again after the restart")
        # It resumes at its committed position: every line once, none again.
        worker.wait_for(lambda: len(values(node, "connect-events")) >= len(first + more), "the new lines read")
        assert values(node, "connect-events") == first + more

        assert rest.call("DELETE", "/connectors/events-source")[0] == 204
        worker.wait_for(lambda: rest.call("GET", "/connectors") == (200, []), "the connector deleted")
    finally:
        worker.stop()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """The REST calls go to 127.0.0.1 directly, whatever proxy the environment names."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
