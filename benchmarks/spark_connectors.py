"""Spark's two ways to Kafka side by side: Odradek's PySpark data source, format("odradek"), and Spark's own
Kafka connector, format("kafka"), in one run on one machine (issue 23).

    .venv/bin/python benchmarks/spark_connectors.py [--records 1000000] [--runs 3] [--only ROW|MODE|COLUMN,...]
        [--quick] [--json /tmp/spark_connectors.json] [--profile-connector] [--tables RESULTS.json ...]

Rows (what is timed; N = --records records of --value-bytes values in --partitions partitions, M = --stream-batches):
  batch_read        spark.read.format(F)...load().selectExpr("count(*)", "sum(length(value))") of a pre-filled topic
  stream_read       spark.readStream.format(F) (startingOffsets earliest, maxOffsetsPerTrigger N/M) of the same
                    topic to the "noop" sink, trigger(availableNow=True); rows/s = rows of the non-empty
                    micro-batches / time from the start of the first of them to the end of the last (the query's
                    progress: timestamp + durationMs.triggerExecution); the query's start and format("odradek")'s
                    empty first micro-batch are left out (wall_seconds in the JSON has them)
  batch_write       spark.range(N, numPartitions=P).selectExpr(key = id as string, value = --value-bytes binary)
                    .write.format(F) to a fresh topic of P partitions
  stream_write      readStream.format("rate-micro-batch") (rowsPerBatch N/M, P partitions, the same key/value)
                    .writeStream.format(F), trigger(processingTime="0 seconds"), stopped after M non-empty
                    micro-batches; rows/s over those M as for stream_read. format("odradek") runs its plain
                    (at-least-once) sink: odradek.sink.transactional=false
  stream_write_txn  the same with the odradek sink's exactly-once (transactional) mode. Spark's Kafka sink has
                    no transactional mode: its cells in this row repeat its plain stream_write numbers (marked *)
Columns: format("odradek") on Odradek (with its JVM sink's jar in spark.jars, as docs/spark.md sets a session up:
the writes, exactly-once ones included, run there; --odradek-option odradek.sink.jvm=false keeps them in Python), format("kafka") on Apache
Kafka 4.0 (../shared/reference), and
format("kafka") on Odradek. Ratio: odradek-on-Odradek / kafka-on-Kafka. Two more columns of the write rows
only, with no broker: noop-sink runs the same input into Spark's "noop" sink (Spark 4.0): what the input and
Spark's bookkeeping cost alone, the most any sink could reach; python-sink-floor into format("drain"), a Python
data source (Spark 4.3, as format("odradek")) whose tasks only drain the Arrow batches Spark sends them: the
most any Python data source sink could reach. For the read rows, python-source-floor reads format("prepared"), a
Python data source of the same columns whose tasks hand Spark one Arrow batch made in advance, again and again:
the most any Python data source could read at.
Modes: local (master local[2]) and cluster (a standalone master and two workers of 1 core each, 512 MB
executors, started from the driver's own pyspark distribution, stopped at the end).

Each Spark runs in its own subprocess, this script run with --worker: format("odradek"), "drain" and "prepared" in
.venv (pyspark >= 4.2), format("kafka") and "noop" in .venv-spark40 (pyspark 4.0, with Spark 4.0.0's connector jars
from ../shared/reference in spark.jars; they fail under 4.3). The worker times each query itself (the JVM start is
not counted); every cell gets one warm-up run and then --runs runs; the tables show the best run (the median is in
the JSON). Writes are checked after the timing: the topic's high watermarks must add up to at least the rows written
(exactly, for a batch write). Before every run the brokers are settled and the script waits (--quiet-wait) for other
processes to go quiet; each run records the cores other processes used meanwhile, and the CPU seconds of the Spark
processes (JVM, Python workers, and "reaped": processes that exited meanwhile) and of the broker, from which a
second table gives rows per CPU second, a figure less sensitive to a busy machine. The JSON records digests of
src/odradek/spark/*.py per cell.

--profile-connector times the odradek connector in this process, without Spark: read_range() over the
pre-filled topic through the fetch client and through librdkafka, bare consume() loops with librdkafka's
default and bigger fetch settings, and the sink's write_plain() of the same rows, as Arrow batches of 10,000,
through its own producer and through librdkafka: the clients' own cost.
--odradek-option / --kafka-option KEY=VALUE add options to every query of one format (kafka.linger.ms=20, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
SPARK40_PYTHON = os.path.join(ROOT, ".venv-spark40", "bin", "python")
SPARK_KAFKA_JARS = os.path.join(ROOT, "..", "shared", "reference", "spark-kafka-jars")
JVM_SINK_JAR = os.path.join(ROOT, "src", "odradek", "spark", "odradek-spark.jar")  # odradek.spark.datasource.JAR
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
# benchmarks/profile.py would shadow the standard library's profile module, which pyspark imports.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

ROWS = ["batch_read", "stream_read", "batch_write", "stream_write", "stream_write_txn"]
MODES = ["local", "cluster"]
# (column name, Spark format, broker)
COLUMNS = [("odradek-on-Odradek", "odradek", "odradek"), ("kafka-on-Kafka", "kafka", "kafka"),
           ("kafka-on-Odradek", "kafka", "odradek"), ("noop-sink", "noop", None),
           ("python-sink-floor", "drain", None), ("python-source-floor", "prepared", None)]
# The rows a column of no broker runs.
READS, WRITES = ("batch_read", "stream_read"), ("batch_write", "stream_write")
ROWS_WITHOUT_BROKER = {"noop": WRITES, "drain": WRITES, "prepared": READS}
PREPARED_BATCH_ROWS = 10_000
STREAM_BATCHES = 5


# ---------------------------------------------------------------- the worker: one SparkSession, in its own venv

def _progress(query) -> list[dict]:
    return [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]


def _epoch_s(iso: str) -> float:
    import datetime
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _stream_stats(progress: list[dict], batches: int | None = None) -> dict:
    """Rows and seconds of the non-empty micro-batches: from the start of the first to the end of the last."""
    data = [p for p in progress if p.get("numInputRows", 0) > 0]
    if batches is not None:
        data = data[:batches]
    if not data:
        return {"rows": 0, "seconds": float("nan"), "batches": 0}
    start = _epoch_s(data[0]["timestamp"])
    end = _epoch_s(data[-1]["timestamp"]) + data[-1]["durationMs"]["triggerExecution"] / 1000
    return {"rows": sum(p["numInputRows"] for p in data), "seconds": end - start, "batches": len(data),
            "trigger_seconds": sum(p["durationMs"]["triggerExecution"] for p in data) / 1000,
            "batch_rows": [p["numInputRows"] for p in data],
            # where the micro-batches spent their time: addBatch, latestOffset, queryPlanning, walCommit, ...
            "duration_ms": {k: sum(p["durationMs"].get(k, 0) for p in data) for k in data[0]["durationMs"]}}


KEY_VALUE = ("cast({col} as string) as key", "cast(rpad(cast({col} as string), {n}, 'x') as binary) as value")


def op_batch_read(spark, fmt, options):
    start = time.perf_counter()
    rows, value_bytes = spark.read.format(fmt).options(**options).load() \
        .selectExpr("count(*)", "sum(length(value))").collect()[0]
    return {"seconds": time.perf_counter() - start, "rows": rows, "value_bytes": value_bytes}


def op_stream_read(spark, fmt, options, checkpoint, max_per_trigger):
    start = time.perf_counter()
    query = (spark.readStream.format(fmt).options(**options).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(max_per_trigger)).load()
             .writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    wall = time.perf_counter() - start
    return {**_stream_stats(_progress(query)), "wall_seconds": wall}


def op_batch_write(spark, fmt, options, records, partitions, value_bytes):
    df = spark.range(0, records, 1, partitions).selectExpr(*(e.format(col="id", n=value_bytes) for e in KEY_VALUE))
    start = time.perf_counter()
    df.write.format(fmt).options(**options).mode("append").save()
    return {"seconds": time.perf_counter() - start, "rows": records}


def op_stream_write(spark, fmt, options, checkpoint, rows_per_batch, batches, partitions, value_bytes):
    source = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(rows_per_batch))
              .option("numPartitions", str(partitions)).load()
              .selectExpr(*(e.format(col="value", n=value_bytes) for e in KEY_VALUE)))
    start = time.perf_counter()
    query = (source.writeStream.format(fmt).options(**options).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start())
    try:
        while len([p for p in _progress(query) if p.get("numInputRows", 0) > 0]) < batches:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.02)
    finally:
        query.stop()
    wall = time.perf_counter() - start
    progress = _progress(query)
    return {**_stream_stats(progress, batches), "wall_seconds": wall,
            "rows_committed": sum(p.get("numInputRows", 0) for p in progress)}


OPS = {"batch_read": op_batch_read, "stream_read": op_stream_read, "batch_write": op_batch_write,
       "stream_write": op_stream_write}


def drain_data_source():
    """format("drain"): a Python data source whose writers read Spark's Arrow batches and drop them. Made in the
    worker, so that its classes reach Spark's Python workers by value (they cannot import this script)."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceStreamArrowWriter,
        WriterCommitMessage,
    )

    def drain(batches) -> WriterCommitMessage:
        for _ in batches:
            pass
        return WriterCommitMessage()

    class DrainWriter(DataSourceArrowWriter):
        def write(self, iterator):
            return drain(iterator)

    class DrainStreamWriter(DataSourceStreamArrowWriter):
        def write(self, iterator):
            return drain(iterator)

        def commit(self, messages, batchId):
            pass

        def abort(self, messages, batchId):
            pass

    class DrainDataSource(DataSource):
        @classmethod
        def name(cls):
            return "drain"

        def writer(self, schema, overwrite):
            return DrainWriter()

        def streamWriter(self, schema, overwrite):
            return DrainStreamWriter()

    return DrainDataSource


def prepared_data_source():
    """format("prepared"): a Python data source of format("odradek")'s columns, with options `records` and
    `partitions`, whose tasks yield one Arrow batch made once per task, over and over: Spark's cost of reading
    from a Python data source, with nothing to fetch or convert. Made in the worker, as drain_data_source."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    from odradek.spark.source import arrow_schema, source_schema

    class Rows(InputPartition):
        def __init__(self, start: int, end: int):
            self.start, self.end = start, end

    def split(start: int, end: int, parts: int) -> list:
        return [Rows(start + (end - start) * i // parts, start + (end - start) * (i + 1) // parts)
                for i in range(parts)]

    def read(rows: Rows):
        n = PREPARED_BATCH_ROWS
        schema = arrow_schema(include_headers=False)
        columns = {"key": [b"%d" % i for i in range(n)], "value": [b"x" * 100] * n, "topic": ["prepared"] * n,
                   "offset": range(n)}
        batch = pa.RecordBatch.from_arrays([pa.array(columns.get(f.name, [0] * n), f.type) for f in schema],
                                           schema=schema)
        for start in range(rows.start, rows.end, n):
            yield batch.slice(0, min(n, rows.end - start))

    class PreparedReader(DataSourceReader):
        def __init__(self, options):
            self.records, self.parts = int(options["records"]), int(options["partitions"])

        def partitions(self):
            return split(0, self.records, self.parts)

        def read(self, partition):
            yield from read(partition)

    class PreparedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, options):
            self.records, self.parts = int(options["records"]), int(options["partitions"])
            self.per_trigger = int(options.get("maxOffsetsPerTrigger", self.records))

        def initialOffset(self):
            return {"rows": 0}

        def getDefaultReadLimit(self):
            return ReadMaxRows(self.per_trigger)

        def prepareForTriggerAvailableNow(self):
            pass  # every record is there from the start

        def latestOffset(self, start, limit):
            most = self.records if isinstance(limit, ReadAllAvailable) else start["rows"] + limit.max_rows
            return {"rows": min(self.records, most)}

        def partitions(self, start, end):
            return split(start["rows"], end["rows"], self.parts)

        def read(self, partition):
            yield from read(partition)

        def commit(self, end):
            pass

    class PreparedDataSource(DataSource):
        @classmethod
        def name(cls):
            return "prepared"

        def schema(self):
            return source_schema(include_headers=False)

        def reader(self, schema):
            return PreparedReader(self.options)

        def streamReader(self, schema):
            return PreparedStreamReader(self.options)

    return PreparedDataSource


def worker(master: str, jars: list[str]) -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the JVM and py4j inherit fd 1: whatever they print must not look like a reply
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName("spark-connectors-bench").master(master)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.memory", "1g"))
    if master.startswith("spark://"):
        builder = (builder.config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
                   .config("spark.cores.max", "2"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        from odradek.spark.datasource import OdradekDataSource
        spark.dataSource.register(OdradekDataSource)
        spark.dataSource.register(drain_data_source())
        spark.dataSource.register(prepared_data_source())
    except ImportError:  # .venv-spark40 has no odradek: it runs format("kafka") and "noop" only
        pass
    replies.write(json.dumps({"result": spark.version}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"result": OPS[request["op"]](spark, **request["args"])}
        except Exception as error:
            reply = {"error": f"{type(error).__name__}: {error}"[:4000]}
        replies.write(json.dumps(reply) + "\n")
    spark.stop()


# ---------------------------------------------------------------- the orchestrator (.venv)

class Session:
    """A worker subprocess: one SparkSession in `python`'s venv, answering one request per line."""

    def __init__(self, python: str, master: str, jars: list[str], log_path: str):
        self.log_path = log_path
        self.log = open(log_path, "w")
        env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "JAVA_HOME": JAVA_HOME,
               "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("SPARK_HOME", None)
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", master, *jars],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env, start_new_session=True)
        self.version = self._reply()

    def _reply(self):
        line = self.proc.stdout.readline()
        if not line:
            self.log.flush()
            with open(self.log_path) as f:
                tail = "".join(f.readlines()[-30:])
            raise RuntimeError(f"the Spark worker exited; the end of its log:\n{tail}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    def call(self, op: str, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(60)
        except (subprocess.TimeoutExpired, OSError):
            pass
        _kill_group(self.proc)
        self.log.close()


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(15)
            return
        except subprocess.TimeoutExpired:
            continue


class StandaloneCluster:
    """A Spark standalone master and two 1-core workers from `python`'s pyspark, each in its process group."""

    def __init__(self, python: str, workdir: str, workers: int = 2):
        spark_home = subprocess.check_output(
            [python, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"], text=True).strip()
        self.env = {**os.environ, "SPARK_HOME": spark_home, "JAVA_HOME": JAVA_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": python}
        self.spark_class = os.path.join(spark_home, "bin", "spark-class")
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        try:
            master_log = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                     "--port", "0", "--webui-port", "0")
            self.url, self.ui = self._await_master(master_log)
            for i in range(workers):
                work = os.path.join(workdir, f"worker{i}")
                os.makedirs(work, exist_ok=True)
                self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--cores", "1", "--memory", "1g",
                            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--work-dir", work, self.url)
            self._await_workers(workers)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, cls: str, *args: str) -> str:
        path = os.path.join(self.workdir, f"{name}.log")
        with open(path, "w") as log:
            self.procs.append(subprocess.Popen([self.spark_class, cls, *args], stdout=log, stderr=subprocess.STDOUT,
                                               env=self.env, start_new_session=True))
        return path

    def _await_master(self, log_path: str) -> tuple[str, str]:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with open(log_path) as f:
                text = f.read()
            url, ui = re.search(r"Starting Spark master at (spark://\S+)", text), \
                re.search(r"MasterWebUI.*started at (http://\S+)", text)
            if url and ui:
                return url.group(1), ui.group(1)
            if self.procs[0].poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"the Spark master did not start: {log_path}")

    def _await_workers(self, n: int) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.ui}/json", timeout=5) as r:
                    state = json.load(r)
                if sum(w.get("state") == "ALIVE" for w in state.get("workers", [])) >= n:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{n} Spark workers did not register: {self.workdir}")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _kill_group(proc)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    deadline = time.monotonic() + 30  # the reference broker answers CreateTopics before its leaders are up
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta and meta.error is None and len(meta.partitions) == partitions and \
                all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)


def fill(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> None:
    """A topic of `records` records (keys "0", "1", ...; `value_bytes` of x), round robin over the partitions."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none"})
    value = b"x" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError(f"filling {topic}: records not delivered")


def high_watermarks(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions)
    finally:
        consumer.close()


def connector_code() -> dict:
    """Which odradek connector was measured: a digest and modification time of each file of
    src/odradek/spark and of the JVM sink's jar (each cell's runs also carry them, as the code may change while a
    run goes on)."""
    import hashlib

    folder = os.path.join(ROOT, "src", "odradek", "spark")
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".py", ".jar")):
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                out[name] = {"sha256": hashlib.sha256(f.read()).hexdigest()[:12],
                             "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(path)))}
    return out


def jar_paths() -> list[str]:
    return sorted(os.path.join(SPARK_KAFKA_JARS, j) for j in os.listdir(SPARK_KAFKA_JARS) if j.endswith(".jar"))


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


class ForeignLoad:
    """CPU used by processes that are not this benchmark's (not this process's tree, not the brokers)."""

    def __init__(self, brokers: dict):
        self.brokers = brokers

    def sample(self) -> tuple[float, float, float]:
        own = sys.modules["brokers"].process_tree_cpu_seconds(os.getpid())
        own += sum(b.cpu_seconds() for b in self.brokers.values() if not isinstance(b, sys.modules["brokers"].Odradek))
        return time.monotonic(), _busy_seconds(), own

    @staticmethod
    def cores(before, after) -> float:
        """Cores busy with foreign processes between two samples."""
        return max(0.0, (after[1] - before[1]) - (after[2] - before[2])) / max(1e-9, after[0] - before[0])


def tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds of a process tree by program (java, python, ...); "reaped" is what the tree's processes got
    from children they waited for (the CPU of exited Python workers, of Hadoop's readlink and chmod), as it
    cannot be told by program."""
    parents, own, reaped, names = {}, {}, {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
                fields = rest.split()
            except OSError:
                continue
            pid = int(entry)
            parents[pid] = (int(fields[1]), 0)
            own[pid] = int(fields[11]) + int(fields[12])  # utime, stime
            reaped[pid] = int(fields[13]) + int(fields[14])  # cutime, cstime
            names[pid] = head.split("(", 1)[1]
    out: dict[str, float] = {}
    for pid in sys.modules["brokers"].process_tree(root, parents):
        if pid in own:
            name = "java" if names[pid].startswith("java") else "python" if "python" in names[pid] else names[pid]
            out[name] = out.get(name, 0.0) + own[pid] / os.sysconf("SC_CLK_TCK")
            out["reaped"] = out.get("reaped", 0.0) + reaped[pid] / os.sysconf("SC_CLK_TCK")
    return out


def cpu_delta(before: dict, after: dict) -> dict:
    return {k: round(after.get(k, 0.0) - before.get(k, 0.0), 2) for k in after if after.get(k, 0.0) - before.get(k, 0.0) > 0.005}


class Bench:
    def __init__(self, args, brokers: dict, tmp: str):
        self.args, self.brokers, self.tmp = args, brokers, tmp
        self.read_topics: dict[str, str] = {}
        self.results: list[dict] = []
        self.foreign = ForeignLoad(brokers)
        self.cluster = None

    def settle(self) -> None:
        """The brokers idle, and (up to --quiet-wait s) no other process using more than 0.25 of a core."""
        settle = sys.modules["brokers"].settle
        settle(list(self.brokers.values()), at_most_s=10)
        deadline = time.monotonic() + self.args.quiet_wait
        before = self.foreign.sample()
        while time.monotonic() < deadline:
            time.sleep(1.0)
            after = self.foreign.sample()
            if ForeignLoad.cores(before, after) < 0.25:
                return
            before = after

    def options(self, fmt: str, broker: str | None) -> dict:
        if broker is None:
            return {}
        extra = self.args.odradek_option if fmt == "odradek" else self.args.kafka_option
        return {"kafka.bootstrap.servers": self.brokers[broker].bootstrap, **dict(o.split("=", 1) for o in extra)}

    def cpu(self, session) -> dict:
        """CPU seconds so far of the Spark side (driver JVM, Python workers; executors and the standalone
        cluster's daemons when there is one) and of each broker."""
        out = {"spark": tree_cpu(session.proc.pid)}
        if self.cluster is not None:
            for proc in self.cluster.procs:
                for k, v in tree_cpu(proc.pid).items():
                    out["spark"][k] = out["spark"].get(k, 0.0) + v
        for name, broker in self.brokers.items():
            out[f"broker_{name}"] = {"all": broker.cpu_seconds()}
        return out

    def run_cell(self, session: Session, mode: str, row: str, column: str, fmt: str, broker: str | None) -> None:
        a = self.args
        bootstrap = self.brokers[broker].bootstrap if broker else None
        runs = []
        for i in range(a.runs + 1):
            options = self.options(fmt, broker)
            checkpoint = os.path.join(self.tmp, f"cp-{uuid.uuid4().hex[:8]}")
            if fmt == "prepared":
                options.update(records=str(a.records), partitions=str(a.partitions))
            elif row in ("batch_read", "stream_read"):
                options["subscribe"] = self.read_topics[broker]
            elif broker is not None:
                topic = f"bench-w-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, topic, a.partitions)
                options["topic"] = topic
            if row in ("stream_write", "stream_write_txn") and fmt == "odradek":
                # imported here, not at the top: the worker in .venv-spark40 has no odradek
                from odradek.spark.sink import TRANSACTIONAL_OPTION

                options[TRANSACTIONAL_OPTION] = str(row == "stream_write_txn").lower()  # said, whatever the default
            self.settle()
            load_before = self.foreign.sample()
            cpu_before = self.cpu(session)
            if row == "batch_read":
                r = session.call("batch_read", fmt=fmt, options=options)
                assert r["rows"] == a.records, r
            elif row == "stream_read":
                r = session.call("stream_read", fmt=fmt, options=options, checkpoint=checkpoint,
                                 max_per_trigger=max(1, a.records // a.stream_batches))
                assert r["rows"] == a.records, r
            elif row == "batch_write":
                r = session.call("batch_write", fmt=fmt, options=options, records=a.records,
                                 partitions=a.partitions, value_bytes=a.value_bytes)
            else:
                r = session.call("stream_write", fmt=fmt, options=options, checkpoint=checkpoint,
                                 rows_per_batch=max(1, a.records // a.stream_batches), batches=a.stream_batches,
                                 partitions=a.partitions, value_bytes=a.value_bytes)
            if "topic" in options:  # a write: did the rows land?
                landed = high_watermarks(bootstrap, options["topic"])
                expected = r.get("rows_committed", r["rows"])
                ok = landed == expected if row == "batch_write" else landed >= expected
                if not ok:
                    raise RuntimeError(f"{mode} {row} {column}: {landed} records landed, {expected} expected")
                r["landed"] = landed
            r["foreign_cores"] = round(ForeignLoad.cores(load_before, self.foreign.sample()), 2)
            r["cpu_seconds"] = {k: cpu_delta(cpu_before[k], v) for k, v in self.cpu(session).items()}
            r["rows_per_s"] = r["rows"] / r["seconds"]
            label = "warm-up" if i == 0 else f"run {i}"
            print(f"  {mode:7} {row:16} {column:18} {label:7} {r['rows_per_s']:12,.0f} rows/s "
                  f"({r['rows']:,} rows in {r['seconds']:.2f} s; other processes {r['foreign_cores']:.2f} cores)",
                  flush=True)
            if i:
                runs.append(r)
        rates = [r["rows_per_s"] for r in runs]
        self.results.append({"mode": mode, "row": row, "column": column, "format": fmt, "broker": broker,
                             "best": max(rates), "median": statistics.median(rates), "runs": runs,
                             "connector_code": {k: v["sha256"] for k, v in connector_code().items()
                                                if k in ("source.py", "sink.py", "options.py")}})
        self.save()

    def save(self) -> None:
        with open(self.args.json, "w") as f:
            json.dump({"config": {k: v for k, v in vars(self.args).items()}, "connector_code": connector_code(),
                       "results": self.results}, f, indent=1)

    def run_session(self, mode: str, python: str, columns: list, rows: list[str], jars: list[str]) -> None:
        if not columns:
            return
        cluster = None
        workdir = tempfile.mkdtemp(prefix="spark-", dir=self.tmp)
        try:
            master = "local[2]"
            if mode == "cluster":
                cluster = self.cluster = StandaloneCluster(python, workdir)
                master = cluster.url
            session = Session(python, master, jars, os.path.join(workdir, "driver.log"))
            print(f"{mode}: Spark {session.version} ({os.path.relpath(python, ROOT)}), master {master}", flush=True)
            try:
                for row in rows:
                    for column, fmt, broker in columns:
                        if row == "stream_write_txn" and fmt != "odradek":
                            continue  # only the odradek sink has a transactional mode: see the table
                        if broker is None and row not in ROWS_WITHOUT_BROKER[fmt]:
                            continue
                        self.run_cell(session, mode, row, column, fmt, broker)
            finally:
                session.stop()
        finally:
            if cluster:
                cluster.stop()
            self.cluster = None


def run_cpu(run: dict, broker: str | None) -> float:
    """CPU seconds a run took on the Spark side and on the broker it used."""
    cpu = run.get("cpu_seconds", {})
    return sum(cpu.get("spark", {}).values()) + sum(cpu.get(f"broker_{broker}", {}).values())


def table(results: list[dict], mode: str, rows: list[str], columns: list[str], per_cpu: bool = False) -> str:
    """Markdown: rows/s (best run), or rows per CPU second of Spark and the broker (best run)."""
    cell = {}
    for r in results:
        if r["mode"] == mode:
            value = max(x["rows"] / run_cpu(x, r["broker"]) for x in r["runs"]) if per_cpu else r["best"]
            cell[(r["row"], r["column"])] = {"value": value}
    for c in columns:  # Spark's Kafka sink has only its plain mode
        if c != "odradek-on-Odradek" and ("stream_write", c) in cell:
            cell[("stream_write_txn", c)] = {**cell[("stream_write", c)], "note": "*"}
    what = "rows per CPU second" if per_cpu else "rows/s"
    # Ratios over kafka-on-Kafka: (columns, of which the first with a cell in the row is taken; header). The
    # floor is the sink's in a write row, the source's in a read row.
    ratios = [(("odradek-on-Odradek",), "odradek / kafka"), (("noop-sink",), "noop / kafka"),
              (("python-sink-floor", "python-source-floor"), "floor / kafka")]
    ratios = [(cs, name) for cs, name in ratios if cs[0] == "odradek-on-Odradek" or set(cs) & set(columns)]
    lines = [f"| {mode}, {what} | " + " | ".join(columns) + "".join(f" | {name}" for _, name in ratios) + " |",
             "| --- |" + " ---: |" * (len(columns) + len(ratios))]
    for row in rows:
        values = []
        for c in columns:
            r = cell.get((row, c))
            values.append(f"{r['value']:,.0f}{r.get('note', '')}" if r else "n/a")
        k = cell.get((row, "kafka-on-Kafka"))
        for candidates, _ in ratios:
            o = next((cell[(row, c)] for c in candidates if (row, c) in cell), None)
            values.append(f"{o['value'] / k['value']:.2f}" if o and k else "")
        lines.append(f"| {row} | " + " | ".join(values) + " |")
    note = (("rows per CPU second: rows / (CPU seconds of the Spark processes + the broker's) in a run, best run"
             if per_cpu else "rows/s of the best run") +
            "; * Spark's Kafka sink has no transactional mode: its plain stream_write." +
            ("\nnoop-sink: the write rows' input into Spark's noop sink, which writes nothing: the most a sink "
             "could reach." if "noop-sink" in columns else "") +
            ("\npython-sink-floor: the same into a Python data source that drops what Spark sends it: the most a "
             "Python sink could reach." if "python-sink-floor" in columns else "") +
            ("\npython-source-floor: a Python data source that hands Spark a batch made in advance: the most a "
             "Python source could read at." if "python-source-floor" in columns else ""))
    return "\n".join(lines) + "\n\n" + note


def print_tables(results: list[dict]) -> None:
    results = [r for r in results if "mode" in r]
    columns = [c for c, _, _ in COLUMNS if any(r["column"] == c for r in results)]
    rows = [w for w in ROWS if any(r["row"] == w or (w == "stream_write_txn" and r["row"] == "stream_write")
                                   for r in results)]
    for mode in MODES:
        if any(r["mode"] == mode for r in results):
            for per_cpu in (False, True):
                print()
                print(table(results, mode, rows, columns, per_cpu))
            foreign = [x.get("foreign_cores", 0) for r in results if r["mode"] == mode for x in r["runs"]]
            if foreign:
                print(f"\nother processes on the machine during the timed runs: {min(foreign):.2f} to "
                      f"{max(foreign):.2f} cores (median {statistics.median(foreign):.2f}) of "
                      f"{os.cpu_count()}")


# ---------------------------------------------------------------- phases of the odradek connector, no Spark

def profile_connector(args, bootstrap: str, topic: str) -> dict:
    """read_range() through the source's fetch client and through librdkafka (which `kafka.check.crcs` makes
    it use), bare consume() loops, and the sink's write_plain() through its own producer and through
    librdkafka, in this process: the clients' cost without Spark, in wall and CPU seconds (this process's, its
    threads' too)."""
    import odradek.spark.source as source
    from odradek.spark.options import SourceOptions
    from odradek.spark.sink import write_plain

    out = {}
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    ranges = source.OdradekBatchReader(options, source.source_schema(False)).partitions()
    for name, extra in (("read_range", {}), ("read_range_librdkafka", {"kafka.check.crcs": "true"})):
        parsed = SourceOptions.parse({**options, **extra}, streaming=False)
        start, cpu = time.perf_counter(), time.process_time()
        rows = sum(b.num_rows for r in ranges for b in source.read_range(parsed, r))
        total = time.perf_counter() - start
        out[name] = {"rows": rows, "seconds": total, "cpu_seconds": time.process_time() - cpu,
                     "rows_per_s": rows / total}

    from confluent_kafka import Consumer, TopicPartition
    for name, extra in (("bare_consume", {}),
                        ("bare_consume_prefetch", {"queued.min.messages": 1_000_000,
                                                   "fetch.message.max.bytes": 4 << 20}),
                        ("bare_consume_big_fetch", {"queued.min.messages": 1_000_000,
                                                    "fetch.message.max.bytes": 16 << 20,
                                                    "fetch.max.bytes": 64 << 20,
                                                    "queued.max.messages.kbytes": 256 << 10})):
        start, n = time.perf_counter(), 0
        for r in ranges:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                          **extra})
            c.assign([TopicPartition(r.topic, r.partition, r.start)])
            got = 0
            while got < r.end - r.start:
                got += len(c.consume(10_000, 0.05))
            n += got
            c.close()
        total = time.perf_counter() - start
        out[name] = {"rows": n, "seconds": total, "rows_per_s": n / total, "config": extra}

    # The sink's write_plain over Arrow batches of 10,000 rows (as Spark hands them) through its own producer
    # and through librdkafka (which a setting only librdkafka speaks makes it use), after a first write that
    # gets each its producer id.
    import pyarrow as pa

    batches = [pa.record_batch([pa.array([str(i) for i in range(s, min(s + 10_000, args.records))]),
                                pa.array([(str(i).encode() + b"x" * args.value_bytes)[:args.value_bytes]
                                          for i in range(s, min(s + 10_000, args.records))], pa.binary())],
                               names=["key", "value"]) for s in range(0, args.records, 10_000)]
    for name, extra in (("write_plain", {}), ("write_plain_librdkafka", {"kafka.socket.keepalive.enable": "true"})):
        sink_topic = f"bench-p-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, sink_topic, args.partitions)
        options = {"kafka.bootstrap.servers": bootstrap, "topic": sink_topic, **extra}
        write_plain(options, batches[:1], None)
        start, cpu = time.perf_counter(), time.process_time()
        rows = write_plain(options, batches, None)
        total = time.perf_counter() - start
        out[name] = {"rows": rows, "seconds": total, "cpu_seconds": time.process_time() - cpu,
                     "rows_per_s": rows / total}
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--tables":
        for path in sys.argv[2:]:
            with open(path) as f:
                saved = json.load(f)
            print_tables(saved["results"])
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the brokers, Sparks and clusters on the way out
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--stream-batches", type=int, default=STREAM_BATCHES,
                        help="micro-batches of the streaming rows: --records / this many rows each")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per cell, after one warm-up run")
    parser.add_argument("--only", default="", help="comma-separated rows, modes and/or columns to run "
                        f"(rows {','.join(ROWS)}; modes {','.join(MODES)}; columns "
                        f"{','.join(c for c, _, _ in COLUMNS)})")
    parser.add_argument("--quick", action="store_true", help="smoke test: 20,000 records, 1 run, local only")
    parser.add_argument("--json", default=os.path.join(tempfile.gettempdir(), "spark_connectors.json"),
                        help="where to write the results (default: %(default)s, outside the work tree)")
    parser.add_argument("--odradek-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra option of every format(\"odradek\") query (kafka.fetch.max.bytes=...)")
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra option of every format(\"kafka\") query")
    parser.add_argument("--quiet-wait", type=float, default=60, help="seconds to wait, before each run, for "
                        "other processes on the machine to use less than a quarter of a core")
    parser.add_argument("--profile-connector", action="store_true",
                        help="also time the odradek connector's read and the bare clients without Spark")
    parser.add_argument("--profile-only", action="store_true", help="--profile-connector, and no Spark")
    args = parser.parse_args()
    args.profile_connector = args.profile_connector or args.profile_only
    if args.quick:
        args.records, args.runs = min(args.records, 20_000), 1
    only = {o for o in args.only.split(",") if o}
    unknown = only - set(ROWS) - set(MODES) - {c for c, _, _ in COLUMNS}
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}")
    rows = [r for r in ROWS if not (only & set(ROWS)) or r in only]
    modes = [m for m in MODES if (m in only) or (not (only & set(MODES)) and not (args.quick and m == "cluster"))]
    columns = [c for c in COLUMNS if not (only & {c for c, _, _ in COLUMNS}) or c[0] in only]

    sys.path.insert(0, HERE)
    from brokers import reference_available, running
    sys.path.remove(HERE)

    spark40_columns = [c for c in columns if c[1] in ("kafka", "noop")]  # Spark's own sinks run on its 4.0
    if spark40_columns and not (os.path.exists(f"{SPARK40_PYTHON}") and os.path.isdir(SPARK_KAFKA_JARS)):
        sys.exit("format(\"kafka\") needs .venv-spark40 (make .venv-spark40/.installed) and ../shared/reference")
    if any(c[1] == "odradek" for c in columns) and not os.path.exists(JVM_SINK_JAR):
        sys.exit(f"format(\"odradek\")'s JVM sink is not built: make {os.path.relpath(JVM_SINK_JAR, ROOT)}")
    if any(c[2] == "kafka" for c in columns) and not reference_available():
        sys.exit("the reference Kafka broker needs ../shared/reference and java")
    names = sorted({c[2] for c in columns if c[2]}, key=["odradek", "kafka"].index)
    tmp = tempfile.mkdtemp(prefix="bench-spark-connectors-")
    print(f"{args.records:,} records of {args.value_bytes} B in {args.partitions} partitions; rows {', '.join(rows)}; "
          f"modes {', '.join(modes)}; {args.runs} runs after a warm-up", flush=True)
    try:
        with running(names) as brokers:
            bench = Bench(args, brokers, tmp)
            if {"batch_read", "stream_read"} & set(rows) or args.profile_connector:
                for name, broker in brokers.items():
                    topic = f"bench-r-{uuid.uuid4().hex[:8]}"
                    start = time.perf_counter()
                    fill(broker.bootstrap, topic, args.records, args.partitions, args.value_bytes)
                    print(f"filled {topic} on {name} in {time.perf_counter() - start:.1f} s", flush=True)
                    bench.read_topics[name] = topic
            if args.profile_connector and "odradek" in brokers:
                bench.settle()
                profile = profile_connector(args, brokers["odradek"].bootstrap, bench.read_topics["odradek"])
                print(json.dumps(profile, indent=1), flush=True)
                bench.results.append({"profile_connector": profile})
            for mode in modes if not args.profile_only else []:
                bench.run_session(mode, VENV_PYTHON, [c for c in columns if c[1] in ("odradek", "drain", "prepared")],
                                  rows, [JVM_SINK_JAR])
                bench.run_session(mode, SPARK40_PYTHON, spark40_columns, rows, jar_paths())
            bench.save()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_tables(bench.results)
    print(f"\nresults: {args.json}")


if __name__ == "__main__":
    main()
