"""A Spark driver on a standalone cluster, serving the requests of test_spark_cluster.py.

    python driver_session.py MASTER_URL APP_NAME

The first line on stdout is {"result": <application id>} once the session is up. Then each line on stdin is a
request, {"op": ..., "args": {...}}, answered by one line on stdout, {"result": ...} or {"error": "..."}; keys
and values travel as hex. Everything else (Spark's and the examples' output) goes to stderr. Streaming queries
run in the background, named by the test, so that the test can break things while they run.
"""

import importlib
import json
import os
import sys
import time

sys.path.insert(0, str(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))  # examples

from pyspark.sql import SparkSession  # noqa: E402

from odradek.spark.datasource import JAR, OdradekDataSource  # noqa: E402

QUERIES: dict = {}


def to_json(value):
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    return value


def executor_ids(spark) -> list[str]:
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return sorted(ids.apply(i) for i in range(ids.size()))


def executors(spark, count: int, timeout: float = 180) -> list[str]:
    """The ids of the application's executors, once there are at least `count`."""
    deadline = time.monotonic() + timeout
    while len(executor_ids(spark)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} executors were not registered within {timeout}s: {executor_ids(spark)}")
        time.sleep(0.1)
    return executor_ids(spark)


def executor_jvm() -> int | None:
    """The pid of the executor JVM this Python worker serves: its nearest `java` ancestor."""
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        if stat[stat.index("(") + 1:stat.rindex(")")] == "java":
            return pid
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return None


def batch_read(spark, bootstrap: str, topic: str, min_partitions: int) -> dict:
    """A batch read of the topic: the number of Spark partitions, and every row as (partition, offset, key, value,
    executor, worker): the pid of the executor JVM whose Python worker handled it, and the session id of that
    Python worker, which is its Spark worker's (the tests start each Spark worker as a session leader; its
    executors and their Python workers are its descendants, in process groups of their own)."""
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("minPartitions", min_partitions).load())

    def tag(rows):
        executor, session = executor_jvm(), os.getsid(0)
        for row in rows:
            yield (row.partition, row.offset, None if row.key is None else bytes(row.key).hex(),
                   bytes(row.value).hex(), executor, session)

    return {"partitions": df.rdd.getNumPartitions(), "rows": df.rdd.mapPartitions(tag).collect()}


def batch_write(spark, bootstrap: str, topic: str, rows: int, partitions: int) -> None:
    """spark.range(rows) as key (the id) and value ("v<id>") in `partitions` tasks, through the JVM sink."""
    (spark.range(0, rows, 1, partitions).selectExpr("cast(id as string) as key", "concat('v', id) as value")
     .write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("odradek.sink.jvm", "true").mode("append").save())


def start_copy(spark, name: str, bootstrap: str, source: str, target: str, checkpoint: str,
               max_per_trigger: int, kafka: dict | None = None) -> str:
    """source -> key, value -> target through the JVM sink's transactional sink, trigger(availableNow=True): every
    record the source holds when the query starts, in micro-batches of at most `max_per_trigger` records."""
    options = {"kafka.bootstrap.servers": bootstrap, **{f"kafka.{k}": v for k, v in (kafka or {}).items()}}
    query = (spark.readStream.format("odradek").options(**options).option("subscribe", source)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max_per_trigger).load()
             .selectExpr("key", "value")
             .writeStream.format("odradek").options(**options).option("topic", target)
             .option("odradek.sink.jvm", "true").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    QUERIES[name] = query
    return query.id


def await_query(spark, name: str, seconds: float) -> dict:
    """Wait for an availableNow query to end: its batches' input row counts, and its exception if it failed."""
    query = QUERIES[name]
    terminated = query.awaitTermination(seconds) if query.exception() is None else True
    exception = query.exception()
    return {"terminated": terminated, "exception": None if exception is None else str(exception),
            "input_rows": [p["numInputRows"] for p in query.recentProgress]}


def query_state(spark, name: str) -> dict:
    query = QUERIES[name]
    exception = query.exception()
    return {"active": query.isActive, "exception": None if exception is None else str(exception)}


def run_example(spark, module: str, argv: list[str]):
    """examples/<module>/run.py's main(argv), in this session (its odradek_spark gets this session)."""
    return to_json(importlib.import_module(f"examples.{module}.run").main(argv))


OPS = {"executors": executors, "batch_read": batch_read, "batch_write": batch_write, "start_copy": start_copy, "await_query": await_query,
       "query_state": query_state, "run_example": run_example}


def main(master: str, name: str) -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the JVM and py4j inherit fd 1: whatever they print must not look like a reply
    sys.stdout = sys.stderr
    os.environ["ODRADEK_SPARK_MASTER"] = master  # for the examples' odradek_spark
    spark = (SparkSession.builder.appName(name).master(master)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "1g")
             .config("spark.jars", JAR)  # the JVM sink, shipped to the executors by Spark
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1")
             .config("spark.cores.max", "2")  # one executor on each of the two workers (spreadOut)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(OdradekDataSource)
    replies.write(json.dumps({"result": spark.sparkContext.applicationId}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"result": OPS[request["op"]](spark, **request["args"])}
        except Exception as error:  # a failed request is an answer: the test asserts on it
            reply = {"error": f"{type(error).__name__}: {error}"}
        replies.write(json.dumps(reply) + "\n")
    for query in spark.streams.active:
        query.stop()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
