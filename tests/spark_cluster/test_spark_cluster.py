"""The "odradek" data source on a real Spark standalone cluster: a master and two workers from pip's pyspark
(standalone.py), a driver in a subprocess (driver_session.py), executors that are separate JVMs with their own
Python workers. Batch and streaming reads and the exactly-once sink, the windowed_counts example, and faults:
a worker killed with -9 mid-query, the driver killed with -9 mid-query and restarted from its checkpoint, the
Odradek partition leader killed with -9 mid-query on a three-node cluster.

One Spark cluster and one driver serve the whole module (starting them takes most of a minute), so every
test that needs them is in this file. Each executor has one core and each application two executors
(spark.cores.max=2), spread over the two workers; the workers have two cores each, so that a second driver's
application fits beside the module's.
"""

import collections
import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("odradek.spark.datasource")

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.spark.sink import COMMITS_TOPIC, COMMITS_TOPIC_CONFIG  # noqa: E402
from tests.e2e.test_cluster import wait_for  # noqa: E402
from tests.e2e.test_cluster_transactions import TXN_CLUSTER_SETTINGS, all_in_sync, leaders, running_bootstrap  # noqa: E402
from tests.spark.test_source import numbered_input, produce, record_count  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, create_topic, read_all, unique  # noqa: E402
from tests.spark_cluster.standalone import DriverSession, SparkStandalone, session_alive  # noqa: E402

# The fault tests: TOTAL records copied in micro-batches of PER_BATCH; the fault comes once PER_BATCH are written.
TOTAL, PER_BATCH = 1000, 200
# Quick reconnects and metadata refreshes for the Spark tasks' clients while an Odradek node is down.
FAULT_CLIENT_SETTINGS = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 50,
                         "socket.connection.setup.timeout.ms": 3000, "topic.metadata.refresh.interval.ms": 2000}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def driver(standalone, shared_node, tmp_path_factory):
    """The module's driver. It stops before the node: its cached producers would retry a closed port."""
    session = DriverSession(tmp_path_factory.mktemp("spark-driver"), standalone.url)
    yield session
    session.close()


@pytest.fixture
def executors(driver, standalone) -> list[str]:
    """Two live workers and the module driver's two executors (a test before may have killed a worker)."""
    standalone.wait_alive_workers(2)
    return driver.request("executors", count=2)


def outputs(bootstrap: str, topic: str) -> collections.Counter:
    """(key, value) of every record of the topic read read_committed, counted."""
    return collections.Counter((key, value) for _, key, value, _ in read_all(bootstrap, topic))


def wait_for_output(driver: DriverSession, query: str, bootstrap: str, topic: str, count: int) -> int:
    """Wait until `topic` holds at least `count` records, while the query runs; returns how many it holds."""
    deadline = time.monotonic() + SPARK_DEADLINE_S
    while time.monotonic() < deadline:
        written = record_count(bootstrap, topic)
        if written >= count:
            return written
        state = driver.request("query_state", name=query)
        assert state["active"], f"the query ended with {written} records written: {state}\n{driver.log_tail()}"
        time.sleep(0.1)
    raise AssertionError(f"the query wrote fewer than {count} records:\n{driver.log_tail()}")


def finish(driver: DriverSession, query: str) -> list[int]:
    """Wait for an availableNow query to end without error; its batches' input row counts."""
    result = driver.request("await_query", name=query, seconds=SPARK_DEADLINE_S, timeout=SPARK_DEADLINE_S + 60)
    assert result["exception"] is None, f"{result['exception']}\n{driver.log_tail()}"
    assert result["terminated"], f"the query did not finish:\n{driver.log_tail()}"
    return result["input_rows"]


# --- 1. batch: tasks on both executors, every record exactly once ---

def test_batch_read_splits_a_large_partition_over_both_executors_and_reads_every_record_once(
        driver, standalone, executors, shared_node):
    topic = unique("cluster-batch")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    sent = produce(shared_node.bootstrap, [{"topic": topic, "partition": 0 if i < 2400 else 1,
                                            "key": f"k{i % 13}".encode(), "value": f"v{i}".encode()}
                                           for i in range(3000)])
    result = driver.request("batch_read", bootstrap=shared_node.bootstrap, topic=topic, min_partitions=6)
    assert result["partitions"] >= 6  # partition 0 (2400 records) is split into offset ranges
    got = sorted((p, o, bytes.fromhex(k), bytes.fromhex(v)) for p, o, k, v, *_ in result["rows"])
    assert got == sorted((s.partition, s.offset, s.key, s.value) for s in sent)  # no record lost or read twice
    # the rows came from the Python workers of two executor JVMs: the tasks ran on both executors
    rows_per_executor = collections.Counter(executor for *_, executor, _ in result["rows"])
    assert len(rows_per_executor) == 2 and None not in rows_per_executor, rows_per_executor
    # each executor is under a Spark worker that is alive (a test before may have killed one)
    assert {worker for *_, worker in result["rows"]} <= {w.sid for w in standalone.workers if not w.killed}


def test_batch_write_through_the_jvm_sink_on_the_executors_writes_every_row_once(driver, executors, shared_node):
    """The executors get the JVM sink's jar from the driver (spark.jars) and produce without a Python worker."""
    topic = unique("cluster-jvm-write")
    create_topic(shared_node.bootstrap, topic, partitions=3)
    driver.request("batch_write", bootstrap=shared_node.bootstrap, topic=topic, rows=5000, partitions=4)
    got = sorted(value for _, _, value, _ in read_all(shared_node.bootstrap, topic))
    assert got == sorted(f"v{i}".encode() for i in range(5000))


# --- 2. streaming: the exactly-once sink, and the windowed_counts example ---

def test_streaming_copy_through_the_transactional_sink_writes_every_record_exactly_once(
        driver, executors, shared_node, tmp_path):
    source, target = unique("cluster-copy-in"), unique("cluster-copy-out")
    inputs = numbered_input(shared_node.bootstrap, source, 1000)
    create_topic(shared_node.bootstrap, target, partitions=2)
    driver.request("start_copy", name=source, bootstrap=shared_node.bootstrap, source=source, target=target,
                   checkpoint=str(tmp_path / "checkpoint"), max_per_trigger=250)
    batches = finish(driver, source)
    assert sum(batches) == 1000 and sum(1 for n in batches if n) >= 4, batches  # several micro-batches
    assert outputs(shared_node.bootstrap, target) == inputs


def test_windowed_counts_example_runs_on_the_cluster(driver, standalone, executors, shared_node, tmp_path):
    counts = driver.request("run_example", module="windowed_counts", argv=[
        "--bootstrap-server", shared_node.bootstrap, "--source", unique("clicks"), "--sink", unique("click-counts"),
        "--checkpoint", str(tmp_path / "checkpoint"), "--master", standalone.url])
    # 3 users over 30 s: user u clicks u+1 times a second, 10 s windows (from the example's BASE_MS)
    windows = sorted({int(key.rsplit("@", 1)[1]) for key in counts})
    assert windows == [windows[0] + 10_000 * w for w in range(3)], counts
    assert counts == {f"user{u}@{w}": 10 * (u + 1) for u in range(3) for w in windows}


# --- 3. faults ---

def test_worker_killed_mid_query_the_query_finishes_on_the_other_worker_exactly_once(
        driver, standalone, executors, shared_node, tmp_path):
    source, target = unique("worker-kill-in"), unique("worker-kill-out")
    inputs = numbered_input(shared_node.bootstrap, source, TOTAL)
    create_topic(shared_node.bootstrap, target, partitions=2)
    driver.request("start_copy", name=source, bootstrap=shared_node.bootstrap, source=source, target=target,
                   checkpoint=str(tmp_path / "checkpoint"), max_per_trigger=PER_BATCH)
    at_kill = wait_for_output(driver, source, shared_node.bootstrap, target, PER_BATCH)
    victim = next(w for w in standalone.workers if not w.killed)
    standalone.kill_worker(victim)  # the worker's session: it, its executor JVM, their Python workers
    assert at_kill < TOTAL, "the query had finished before the worker was killed; the test proves nothing"
    batches = finish(driver, source)
    assert sum(batches) == TOTAL, batches
    assert outputs(shared_node.bootstrap, target) == inputs
    # the executor on the killed worker is gone (the master may have started another on the worker left)
    assert len(set(executors) - set(driver.request("executors", count=1))) == 1
    assert len(standalone.alive_workers()) == 1
    # a replacement worker, for the tests that need two
    standalone.add_worker()
    standalone.wait_alive_workers(2)


def test_driver_killed_mid_query_restarts_from_its_checkpoint_exactly_once(
        driver, standalone, executors, shared_node, tmp_path):
    source, target = unique("driver-kill-in"), unique("driver-kill-out")
    inputs = numbered_input(shared_node.bootstrap, source, TOTAL)
    create_topic(shared_node.bootstrap, target, partitions=2)
    checkpoint = str(tmp_path / "checkpoint")
    doomed = DriverSession(tmp_path / "doomed", standalone.url, name="doomed-driver")
    try:
        doomed.request("executors", count=2)
        doomed.request("start_copy", name=source, bootstrap=shared_node.bootstrap, source=source, target=target,
                       checkpoint=checkpoint, max_per_trigger=PER_BATCH)
        at_kill = wait_for_output(doomed, source, shared_node.bootstrap, target, PER_BATCH)
    finally:
        doomed.kill()  # kill -9 of its session: the Python driver and its JVM, mid-batch
    assert not session_alive(doomed.sid)
    # the master ends the dead driver's application, and with it the executors it had
    wait_for(lambda: doomed.app_id in {app["id"] for app in standalone.state()["completedapps"]}, SPARK_DEADLINE_S,
             "the master to end the killed driver's application")
    assert at_kill < TOTAL, "the query had finished before the driver was killed; the test proves nothing"
    # the same query from the same checkpoint, in another driver: the batch the kill cut short is replayed with
    # its logged offsets, then the rest in one batch (no need for many here)
    driver.request("start_copy", name=f"{source}-restarted", bootstrap=shared_node.bootstrap, source=source,
                   target=target, checkpoint=checkpoint, max_per_trigger=TOTAL)
    finish(driver, f"{source}-restarted")
    assert outputs(shared_node.bootstrap, target) == inputs


def test_odradek_partition_leader_killed_mid_query_exactly_once(driver, executors, cluster_factory, tmp_path):
    cluster = cluster_factory(3, TXN_CLUSTER_SETTINGS)
    source, target = unique("leader-kill-in"), unique("leader-kill-out")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # the sink's marker topic too: created by the sink it could have one replica (default.replication.factor is 1),
    # perhaps on the node killed
    for fut in admin.create_topics([NewTopic(source, 3, 3), NewTopic(target, 3, 3),
                                    NewTopic(COMMITS_TOPIC, 1, 3, config=COMMITS_TOPIC_CONFIG)]).values():
        fut.result(30)
    wait_for(lambda: all_in_sync(cluster, [source, target, COMMITS_TOPIC]), 60, "every replica in sync")
    sent = produce(cluster.bootstrap, [{"topic": source, "partition": i % 3, "key": f"k{i % 7}".encode(),
                                        "value": str(i).encode()} for i in range(TOTAL)])
    inputs = collections.Counter((s.key, s.value) for s in sent)
    # the node that leads partition 0 of the output; it leads a partition of the input too
    victim = leaders(cluster, target)[0][0]
    assert victim in {leader for leader, _ in leaders(cluster, source).values()}, leaders(cluster, source)
    driver.request("start_copy", name=source, bootstrap=cluster.bootstrap, source=source, target=target,
                   checkpoint=str(tmp_path / "checkpoint"), max_per_trigger=PER_BATCH,
                   kafka=FAULT_CLIENT_SETTINGS)
    at_kill = wait_for_output(driver, source, cluster.bootstrap, target, PER_BATCH)
    cluster.node(victim).kill()
    assert at_kill < TOTAL, "the query had finished before the leader was killed; the test proves nothing"
    finish(driver, source)
    assert leaders(cluster, target)[0][0] not in (victim, -1)  # another node leads the output partition now
    assert outputs(running_bootstrap(cluster), target) == inputs

