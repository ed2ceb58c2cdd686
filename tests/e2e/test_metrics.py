"""/metrics of real nodes under load from confluent-kafka and kafka-python: Kafka's counters move by what the
clients did, consumer lag is log end minus committed offset (in records and seconds, also for partitions
the group's coordinator has no replica of), a stopped replica shows as under-replicated on its leader and
as an ISR shrink then expand, the shipped dashboard and alert rules ask only for metrics a node serves, and
a bad metrics.listener stops the node with one line."""

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import build_batch
from tests.conftest import Cluster, NodeProcess, free_port
from tests.e2e.raw_client import RawClient
from tests.kafka_python_reads import take

DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
DEADLINE_S = 60.0
BT = "kafka_server_brokertopicmetrics_"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Scrape:
    """A parsed /metrics answer: sample (name, labels) -> value, and the families' types."""

    def __init__(self, text: str):
        self.text = text
        self.samples: dict[tuple[str, frozenset], float] = {}
        self.types: dict[str, str] = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                self.types[name] = kind
            elif line and not line.startswith("#"):
                match = _SAMPLE.match(line)
                assert match, f"not a sample line: {line!r}"
                name, labels, value = match.groups()
                pairs = frozenset((k, v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
                                  for k, v in _LABEL.findall(labels or ""))
                self.samples[(name, pairs)] = float(value)

    def get(self, name: str, default: float | None = 0.0, **labels) -> float | None:
        return self.samples.get((name, frozenset((k, str(v)) for k, v in labels.items())), default)

    def total(self, name: str, **labels) -> float:
        """The sum of a metric's samples whose labels include these."""
        wanted = {(k, str(v)) for k, v in labels.items()}
        return sum(value for (sample, pairs), value in self.samples.items() if sample == name and wanted <= pairs)

    @property
    def names(self) -> set[str]:
        return {name for name, _ in self.samples} | set(self.types)


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return Scrape(response.read().decode())


def wait_for(port: int, condition, what: str, timeout: float = DEADLINE_S) -> Scrape:
    deadline = time.monotonic() + timeout
    while True:
        metrics = scrape(port)
        if condition(metrics):
            return metrics
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def metrics_port(node: NodeProcess) -> int:
    return int(node.settings["metrics.listener"].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def metrics_node(tmp_path_factory):
    """One node with its metrics listener for the module's load tests (distinct topics and groups)."""
    node = NodeProcess(tmp_path_factory.mktemp("metrics") / "data",
                       settings={"metrics.listener": f"http://127.0.0.1:{free_port()}", "num.partitions": "2",
                                 "group.initial.rebalance.delay.ms": "0"}).start()
    yield node
    node.stop()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 2, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future it answers
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)


def raw_produce(client: RawClient, topic: str, partition: int, records) -> ErrorCode:
    response = client.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return ErrorCode(response["responses"][0]["partition_responses"][0]["error_code"])


def test_produce_and_consume_move_the_counters_by_what_the_clients_did(metrics_node):
    node, port = metrics_node, metrics_port(metrics_node)
    topic = name("metered")
    create_topic(node.bootstrap, topic)
    before = scrape(port)
    assert before.get(BT + "messagesin_total", None, topic=topic) in (None, 0)

    value = b"v" * 100
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(300):
        producer.produce(topic, key=b"c%d" % i, value=value)
    assert producer.flush(30) == 0
    python_producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=1)
    for future in [python_producer.send(topic, key=b"p%d" % i, value=value) for i in range(100)]:
        future.get(30)
    python_producer.close()
    produced = 400
    sent_bytes = produced * (len(value) + 4)

    after_produce = wait_for(port, lambda m: m.get(BT + "messagesin_total", topic=topic) >= produced,
                             "messages in to count every record")
    assert after_produce.get(BT + "messagesin_total", topic=topic) == produced
    assert after_produce.get(BT + "messagesin_total") - before.get(BT + "messagesin_total") >= produced
    bytes_in = after_produce.get(BT + "bytesin_total", topic=topic)
    assert sent_bytes < bytes_in < sent_bytes + produced * 40 + 100 * 61, bytes_in  # record and batch headers
    produce_requests = after_produce.get(BT + "totalproducerequests_total", topic=topic)
    assert 2 <= produce_requests <= produced  # one per partition of a request: at least one per client
    assert after_produce.get(BT + "failedproducerequests_total", topic=topic) == 0

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": name("reader"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
    read = 0
    deadline = time.monotonic() + DEADLINE_S
    while read < produced and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            read += 1
    consumer.close()
    assert read == produced
    after_one = wait_for(port, lambda m: m.get(BT + "bytesout_total", topic=topic) >= bytes_in,
                         "bytes out to count what the consumer read")
    assert after_one.get(BT + "bytesout_total", topic=topic) <= 1.5 * bytes_in

    python_consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, enable_auto_commit=False,
                                    consumer_timeout_ms=5000)
    python_consumer.assign([KafkaTopicPartition(topic, p) for p in (0, 1)])
    python_consumer.seek_to_beginning()
    assert len(take(python_consumer, produced)) == produced
    python_consumer.close()
    after_two = wait_for(port, lambda m: m.get(BT + "bytesout_total", topic=topic) >= 2 * bytes_in,
                         "bytes out to count what both consumers read")
    assert after_two.get(BT + "bytesout_total", topic=topic) <= 3 * bytes_in
    fetches = after_two.get(BT + "totalfetchrequests_total", topic=topic)
    assert fetches > after_produce.get(BT + "totalfetchrequests_total", topic=topic)
    assert after_two.get(BT + "totalfetchrequests_total") >= fetches

    # Refused produces. Kafka counts as failed only what a client does not expect: here a keyless record for a
    # compacted topic, twice; not a batch with a bad CRC (a produce request all the same), nor a partition or a
    # topic that does not exist (not even a produce request).
    compacted = name("compacted")
    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # must outlive the future it answers
    admin.create_topics([NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"})])[compacted].result(30)
    with RawClient(node.bootstrap) as client:
        assert raw_produce(client, topic, 7, build_batch([(None, b"x", [])])) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        corrupt = bytearray(build_batch([(None, b"x", [])]))
        corrupt[-1] ^= 0xFF
        assert raw_produce(client, topic, 0, bytes(corrupt)) == ErrorCode.CORRUPT_MESSAGE
        assert raw_produce(client, name("no-such-topic"), 0, build_batch([(None, b"x", [])])) \
            == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for _ in range(2):
            assert raw_produce(client, compacted, 0, build_batch([(None, b"x", [])])) == ErrorCode.INVALID_RECORD
    failed = scrape(port)
    assert failed.get(BT + "failedproducerequests_total", topic=topic) == 0
    assert failed.get(BT + "totalproducerequests_total", topic=topic) \
        == after_two.get(BT + "totalproducerequests_total", topic=topic) + 1
    assert failed.get(BT + "failedproducerequests_total", topic=compacted) == 2
    assert failed.get(BT + "failedproducerequests_total") - after_two.get(BT + "failedproducerequests_total") == 2
    assert failed.get(BT + "messagesin_total", topic=topic) == produced
    assert not any(("topic", "no-such-topic") in pairs for _, pairs in failed.samples)

    # request times: every Produce and consumer Fetch above was timed, and the components add up
    for request in ("Produce", "FetchConsumer", "Metadata"):
        count = failed.get("kafka_network_requestmetrics_totaltimems_count", request=request)
        assert count > 0, request
        assert failed.get("kafka_network_requestmetrics_totaltimems_bucket", request=request, le="+Inf") == count
        parts = sum(failed.get(f"kafka_network_requestmetrics_{c}_sum", request=request) for c in
                    ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems"))
        assert parts == pytest.approx(failed.get("kafka_network_requestmetrics_totaltimems_sum", request=request),
                                      rel=1e-6, abs=1e-6)
    assert failed.types["kafka_network_requestmetrics_totaltimems"] == "histogram"
    assert failed.total("kafka_network_requestmetrics_requests_total", request="Produce") >= produce_requests / 2
    assert 0 <= failed.get("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", None) <= 1
    assert failed.get("kafka_server_replicamanager_partitioncount") >= 2
    assert failed.get("kafka_server_replicamanager_leadercount") >= 2
    assert failed.get("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert failed.get("kafka_log_log_size", topic=topic, partition=0) > 0
    assert failed.get("process_resident_memory_bytes") > 0


def subscribed_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer got no assignment"
        consumer.poll(0.2)
    return consumer


def test_consumer_lag_is_log_end_minus_committed_offset(metrics_node):
    node, port = metrics_node, metrics_port(metrics_node)
    topic, group = name("lagging"), name("group")
    create_topic(node.bootstrap, topic)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"zero-%d" % i, partition=0)
    for i in range(4):
        producer.produce(topic, value=b"one-%d" % i, partition=1)
    assert producer.flush(30) == 0

    consumer = subscribed_consumer(node.bootstrap, group, topic)
    consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)], asynchronous=False)
    labels = {"consumergroup": group, "topic": topic}
    metrics = wait_for(port, lambda m: m.get("kafka_consumergroup_current_offset", None, partition=0, **labels)
                       == 3, "the committed offsets")
    assert metrics.get("kafka_consumergroup_lag", None, partition=0, **labels) == 10 - 3
    assert metrics.get("kafka_consumergroup_lag", None, partition=1, **labels) == 4 - 4
    assert metrics.get("kafka_consumergroup_lag_sum", None, **labels) == 7
    assert metrics.get("kafka_consumergroup_current_offset", None, partition=1, **labels) == 4
    assert metrics.get("kafka_consumergroup_current_offset_sum", None, **labels) == 7
    assert metrics.get("kafka_consumergroup_members", None, consumergroup=group) == 1
    assert metrics.get("kafka_consumergroup_lag_seconds", None, partition=0, **labels) > 0
    assert metrics.get("kafka_consumergroup_lag_seconds", None, partition=1, **labels) == 0
    assert metrics.get("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") >= 1

    # more records raise the lag; committing the end brings it to 0
    for i in range(5):
        producer.produce(topic, value=b"more-%d" % i, partition=1)
    assert producer.flush(30) == 0
    wait_for(port, lambda m: m.get("kafka_consumergroup_lag_sum", None, **labels) == 12, "the lag to grow")
    consumer.commit(offsets=[TopicPartition(topic, 0, 10), TopicPartition(topic, 1, 9)], asynchronous=False)
    caught_up = wait_for(port, lambda m: m.get("kafka_consumergroup_lag_sum", None, **labels) == 0,
                         "the lag to fall to 0")
    assert caught_up.get("kafka_consumergroup_lag_seconds", None, partition=0, **labels) == 0
    consumer.close()
    wait_for(port, lambda m: m.get("kafka_consumergroup_members", None, consumergroup=group) == 0,
             "the group to have no member after the consumer left")


PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
                "offset", "inf", "nan", "le", "quantile"}


def metric_names_in(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions, keywords, label
    names (in braces or by/without lists), strings, durations or Grafana variables."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', " ", expr)
    expr = re.sub(r"\$\w+|\$\{[^}]*\}", " ", expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        word, rest = match.group(0), expr[match.end():].lstrip()
        if rest.startswith("(") or word.lower() in PROMQL_WORDS or re.fullmatch(r"\d+[smhdwy]", word):
            continue
        names.add(word)
    return names


def dashboard_exprs(dashboard: dict) -> list[str]:
    exprs = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("expr", "query") and isinstance(item, str) and item.strip():
                    exprs.append(item)
                elif key == "query" and isinstance(item, dict) and item.get("query"):
                    exprs.append(item["query"])
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(dashboard)
    return exprs


def label_values_query(expr: str) -> str:
    """A Grafana variable's label_values(metric, label) query names its metric as a selector."""
    match = re.fullmatch(r"\s*label_values\(\s*([^,]+?)\s*,\s*\w+\s*\)\s*", expr)
    return match.group(1) if match else expr


def test_dashboard_and_alert_rules_ask_only_for_served_metrics(metrics_node):
    node, port = metrics_node, metrics_port(metrics_node)
    topic, group = name("dashboarded"), name("dash-group")
    create_topic(node.bootstrap, topic)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(20):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(30) == 0
    consumer = subscribed_consumer(node.bootstrap, group, topic)
    consumer.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 1)], asynchronous=False)
    served = wait_for(port, lambda m: m.get("kafka_consumergroup_members", None, consumergroup=group) == 1,
                      "the group's metrics").names
    consumer.close()

    rules = yaml.safe_load((DOCS / "alerts.yml").read_text())
    alert_exprs = {rule["alert"]: rule["expr"] for group_ in rules["groups"] for rule in group_["rules"]}
    for alert in ("KafkaUnderReplicatedPartitions", "KafkaOfflinePartitions", "KafkaNoActiveController",
                  "KafkaUnderMinIsrPartitions", "OdradekLogDirNearlyFull", "KafkaConsumerGroupLagGrowing"):
        assert alert in alert_exprs, alert
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    dashboard_queries = [label_values_query(expr) for expr in dashboard_exprs(dashboard)]
    assert len(dashboard_queries) >= 10
    for where, exprs in (("alerts.yml", alert_exprs.values()), ("grafana-dashboard.json", dashboard_queries)):
        for expr in exprs:
            names = metric_names_in(expr)
            assert names, f"{where}: no metric in {expr!r}"
            unknown = names - served
            assert not unknown, f"{where}: {expr!r} asks for {sorted(unknown)}, which the node does not serve"


ISR_SHRINKS, ISR_EXPANDS = "kafka_server_replicamanager_isrshrinks_total", "kafka_server_replicamanager_isrexpands_total"


def test_under_replicated_partitions_rise_on_the_leader_while_a_replica_is_stopped(tmp_path):
    # The leader must be the one to drop the stopped follower from the ISR (an ISR shrink, as Kafka counts
    # them) before the controller would, which it does at a controlled shutdown or when the session expires:
    # so the follower is killed, and its session outlasts replica.lag.time.max.ms.
    cluster = Cluster(tmp_path / "cluster", 3, {"min.insync.replicas": "2", "replica.lag.time.max.ms": "2000",
                                                "broker.session.timeout.ms": "10000"})
    for node in cluster.nodes:  # each node its own metrics port, chosen before the cluster starts
        node.settings["metrics.listener"] = f"http://127.0.0.1:{free_port()}"
    cluster.start()
    try:
        topic = name("replicated")
        create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        deadline = time.monotonic() + DEADLINE_S
        while True:
            partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
            if partition.leader >= 0 and len(partition.isrs) == 3:
                break
            assert time.monotonic() < deadline, "the partition never got its three in-sync replicas"
            time.sleep(0.2)
        leader = cluster.node(partition.leader)
        follower = next(n for i, n in enumerate(cluster.nodes, 1) if i != partition.leader)
        port = metrics_port(leader)
        healthy = wait_for(port, lambda m: m.get("kafka_server_replicamanager_leadercount") >= 1
                           and m.get("kafka_server_replicamanager_underreplicatedpartitions") == 0,
                           "the leader to report its partition fully replicated")
        assert healthy.get("kafka_log_log_size", None, topic=topic, partition=0) is not None
        controllers = [scrape(metrics_port(n)).get("kafka_controller_kafkacontroller_activecontrollercount")
                       for n in cluster.nodes]
        assert sum(controllers) == 1

        # acks=all: the leader answers once the followers have the records (remote time), which they fetch
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(50):
            producer.produce(topic, value=b"replicated-%d" % i)
        assert producer.flush(30) == 0
        replicated = wait_for(port, lambda m: m.get(BT + "messagesin_total", topic=topic) == 50, "the appends")
        assert replicated.get("kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
        assert replicated.get("kafka_network_requestmetrics_remotetimems_sum", request="Produce") > 0
        assert replicated.get("kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") >= 1
        assert replicated.get(BT + "replicationbytesout_total") > 0
        wait_for(metrics_port(follower), lambda m: m.get(BT + "replicationbytesin_total") > 0,
                 "the follower to count what it replicated")

        before = scrape(port)
        assert before.get("kafka_server_replicamanager_failedisrupdates_total", None) is not None
        follower.kill()
        # 2 of 3 stay in sync: not under min ISR (waited for, as a loaded machine may lag the other follower too)
        down = wait_for(port, lambda m: m.get("kafka_server_replicamanager_underreplicatedpartitions") >= 1
                        and m.get(ISR_SHRINKS) > before.get(ISR_SHRINKS)
                        and m.get("kafka_server_replicamanager_underminisrpartitioncount") == 0,
                        "under-replicated partitions and ISR shrinks to rise while a replica is stopped")
        assert down.types[ISR_SHRINKS] == "counter"
        follower.start()
        wait_for(port, lambda m: m.get("kafka_server_replicamanager_underreplicatedpartitions") == 0
                 and m.get(ISR_EXPANDS) > before.get(ISR_EXPANDS),
                 "under-replicated partitions to fall, and an ISR expand, when the replica is back")
        assert sum(scrape(metrics_port(n)).get("kafka_controller_kafkacontroller_offlinepartitionscount")
                   for n in cluster.nodes) == 0

        # lag of partitions the group's coordinator has no replica of: their leaders are asked (ListOffsets for
        # the end offsets, Fetch for the timestamp of the record at the committed offset)
        spread, group = name("spread"), name("spread-group")
        create_topic(cluster.bootstrap, spread, partitions=3, replication=1)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1})  # one replica < min.insync
        for partition in range(3):
            for i in range(5):
                producer.produce(spread, value=b"%d" % i, partition=partition)
        assert producer.flush(30) == 0
        labels = {"consumergroup": group, "topic": spread}

        def commit_and_scrape(offsets: list[int], lag_sum: int, lag_seconds) -> Scrape:
            """Commit, then the one coordinator's scrape once it shows lag_sum and every lag_seconds."""
            committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                  "enable.auto.commit": False})
            committer.commit(offsets=[TopicPartition(spread, p, offset) for p, offset in enumerate(offsets)],
                             asynchronous=False)
            committer.close()
            deadline = time.monotonic() + DEADLINE_S
            while True:
                scrapes = [scrape(metrics_port(n)) for n in cluster.nodes]
                found = [m for m in scrapes if m.get("kafka_consumergroup_lag_sum", None, **labels) is not None]
                if len(found) == 1 and found[0].get("kafka_consumergroup_lag_sum", **labels) == lag_sum and all(
                        lag_seconds(found[0].get("kafka_consumergroup_lag_seconds", None, partition=p, **labels))
                        for p in range(3)):
                    return found[0]
                assert time.monotonic() < deadline, f"the coordinator never reported lag {lag_sum} and every " \
                                                    "partition's lag_seconds"
                time.sleep(0.2)

        coordinator = commit_and_scrape([1, 2, 3], 9, lambda seconds: seconds is not None and seconds > 0)
        remote = 0  # 9 = (5 - 1) + (5 - 2) + (5 - 3)
        for p in range(3):
            assert coordinator.get("kafka_consumergroup_lag", None, partition=p, **labels) == 5 - (p + 1)
            if coordinator.get("kafka_log_log_size", None, topic=spread, partition=p) is None:
                remote += 1  # no replica on the coordinator: its lag_seconds came from the leader's records
        assert remote >= 1
        caught_up = commit_and_scrape([5, 5, 5], 0, lambda seconds: seconds == 0)
        assert all(caught_up.get("kafka_consumergroup_lag", None, partition=p, **labels) == 0 for p in range(3))
    finally:
        cluster.stop()


def server_command(data_dir: Path, settings: dict[str, str]) -> list[str]:
    args = [sys.executable, "-m", "odradek", "server", "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--set", f"log.dirs={data_dir}"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    return args


def failed_start(data_dir: Path, settings: dict[str, str]) -> str:
    """Start a node that must refuse to start; its one error line."""
    done = subprocess.run(server_command(data_dir, settings), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


@pytest.mark.parametrize("url", ["127.0.0.1:9644", "https://127.0.0.1:9644", "http://127.0.0.1:99999"])
def test_a_bad_metrics_listener_url_is_one_clear_startup_error(tmp_path, url):
    assert failed_start(tmp_path / "data", {"metrics.listener": url}) == (
        f"error: metrics.listener: expected http://host:port (as http://127.0.0.1:9644), got {url!r}")


def test_a_metrics_port_in_use_is_one_clear_startup_error_and_port_0_picks_one(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        error = failed_start(tmp_path / "refused", {"metrics.listener": f"http://127.0.0.1:{port}"})
    assert error == (f"error: metrics.listener http://127.0.0.1:{port}: cannot listen on 127.0.0.1:{port}: "
                     "Address already in use")

    node = NodeProcess(tmp_path / "chosen", settings={"metrics.listener": "http://127.0.0.1:0"}).start()
    try:
        found = re.findall(r"Metrics of node 1 at http://127\.0\.0\.1:(\d+)/metrics", node.log_text())
        assert len(found) == 1, node.log_text()
        metrics = scrape(int(found[0]))
        assert metrics.get("kafka_server_raftmetrics_current_leader") == 1
        assert metrics.get("kafka_server_raftmetrics_current_state", state="leader") == 1
    finally:
        node.stop()
