"""One PySpark 4.0 session with Spark's own Kafka connector, serving the requests of test_spark_kafka_connector.

Run with .venv-spark40/bin/python (the connector's jars need pyspark 4.0.x; the project's venv has 4.3):

    python spark40_session.py JAR...

Each line on stdin is a request, {"op": "read" | "stream_copy" | "write", "args": {...}}; each gets one line on
stdout, {"result": ...} or {"error": "..."}. Keys, values and header values travel as hex, timestamps as epoch
milliseconds. Everything else Spark prints goes to stderr.
"""

import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import expr

WRITE_SCHEMA = "topic string, partition int, key binary, value binary, headers array<struct<key:string,value:binary>>"


def to_json(value):
    """A collected value as JSON: binary as hex, rows as objects."""
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, list):
        return [to_json(item) for item in value]
    if hasattr(value, "asDict"):
        return {name: to_json(item) for name, item in value.asDict().items()}
    return value


def from_hex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def read(spark: SparkSession, options: dict) -> list[dict]:
    """`spark.read.format("kafka")` with the options: every row, timestamps as epoch milliseconds."""
    df = spark.read.format("kafka").options(**options).load()
    df = df.withColumn("timestamp", expr("unix_millis(timestamp)"))
    return [to_json(row) for row in df.collect()]


def stream_copy(spark: SparkSession, source: dict, sink: dict, checkpoint: str) -> list[int]:
    """`readStream.format("kafka")` -> `writeStream.format("kafka")`, each record to its own partition number,
    run with trigger(availableNow=True) to its end. Returns the input row count of each micro-batch."""
    query = (spark.readStream.format("kafka").options(**source).load()
             .selectExpr("key", "value", "headers", "partition")
             .writeStream.format("kafka").options(**sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return [progress["numInputRows"] for progress in query.recentProgress]


def write(spark: SparkSession, rows: list[dict], options: dict) -> None:
    """`df.write.format("kafka")` of rows with the columns of WRITE_SCHEMA."""
    data = [(row["topic"], row["partition"], from_hex(row["key"]), from_hex(row["value"]),
             None if row["headers"] is None else [(key, from_hex(value)) for key, value in row["headers"]])
            for row in rows]
    df = spark.createDataFrame(data, WRITE_SCHEMA)
    df.write.format("kafka").options(**options).save()


OPS = {"read": read, "stream_copy": stream_copy, "write": write}


def main(jars: list[str]) -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the JVM and py4j inherit fd 1: whatever they print must not look like a reply
    spark = (SparkSession.builder.appName("spark-kafka-connector-tests").master("local[2]")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    replies.write(json.dumps({"result": spark.version}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"result": OPS[request["op"]](spark, **request["args"])}
        except Exception as error:  # a failed request is an answer: the test asserts on it
            reply = {"error": f"{type(error).__name__}: {error}"}
        replies.write(json.dumps(reply) + "\n")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
