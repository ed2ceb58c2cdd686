"""A Spark Connect client of test_spark_connect.py: one operation against a Spark Connect server, its result as
JSON on the last line of stdout.

    python connect_client.py sc://127.0.0.1:PORT OP 'ARGS-AS-JSON'

OP is "read", "stream" or "write" (the functions below). Only pyspark's Connect client runs here: no
SparkContext, no JVM, no register call; format("odradek") resolves on the server. It runs in a process of its
own because a process with a classic SparkSession (tests/spark/conftest.py's `spark`, in the same pytest worker)
cannot open a Connect session: pyspark refuses with SESSION_ALREADY_EXIST, and the Connect builder sets
SPARK_CONNECT_MODE_ENABLED in os.environ, after which that process's SparkSession.builder takes the Connect path
(the classic sessions of later test files in the worker would fail).
"""

import json
import sys

from pyspark.sql import SparkSession


def read(spark: SparkSession, bootstrap: str, topic: str) -> dict:
    """A batch read of the topic from earliest to latest: (partition, offset, key, value) of every row, keys and
    values as hex."""
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .load())
    rows = [[r.partition, r.offset, None if r.key is None else bytes(r.key).hex(), bytes(r.value).hex()]
            for r in df.select("partition", "offset", "key", "value").collect()]
    return {"rows": rows}


def stream(spark: SparkSession, bootstrap: str, source: str, target: str, checkpoint: str,
           deadline_s: float) -> dict:
    """readStream odradek (from earliest) -> key, value -> writeStream odradek (the transactional streaming sink)
    with a checkpoint, run with trigger(availableNow=True) to its end. Returns the sources of every progress."""
    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        finished = query.awaitTermination(deadline_s)
        error = query.exception()
    finally:
        query.stop()
    if error is not None:
        raise RuntimeError(f"the query failed: {error}")
    if not finished:
        raise RuntimeError(f"the availableNow query did not finish in {deadline_s} s")
    progress = [{"batchId": p.batchId, "numInputRows": p.numInputRows,
                 "sources": [{"description": s.description, "startOffset": s.startOffset,
                              "endOffset": s.endOffset, "latestOffset": s.latestOffset,
                              "numInputRows": s.numInputRows} for s in p.sources]}
                for p in query.recentProgress]
    return {"progress": progress}


def write(spark: SparkSession, bootstrap: str, topic: str, rows: list, jvm: str) -> dict:
    """df.write.format("odradek") of rows [key, value, partition] (strings, int), through the server's JVM sink
    (jvm "true") or the Python data source ("false")."""
    df = spark.createDataFrame([tuple(row) for row in rows], "key string, value string, partition int")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic) \
        .option("odradek.sink.jvm", jvm).mode("append").save()
    return {}


OPERATIONS = {"read": read, "stream": stream, "write": write}


def main() -> None:
    url, op, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        result = OPERATIONS[op](spark, **args)
        result["session"] = f"{type(spark).__module__}.{type(spark).__name__}"
        result["sparkVersion"] = spark.version
    finally:
        spark.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
