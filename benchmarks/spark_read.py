"""Read throughput of the "odradek" Spark source, in rows per second.

    .venv/bin/python benchmarks/spark_read.py [--records 1000000] [--partitions 4] [--value-bytes 100] [--runs 3]

Starts a throwaway node (or uses --bootstrap-server), fills a topic with a librdkafka producer, then times:
  connector  read_range() alone, Arrow batches per partition in this process (no Spark): the connector's cost;
  spark      spark.read.format("odradek") ... agg(count, sum(length(value))) in local[2]: end to end.
Prints the median of --runs runs of each.
"""

import argparse
import os
import statistics
import sys
import time
import uuid

from brokers import Odradek
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark.options import SourceOptions
from odradek.spark.source import OdradekBatchReader, read_range, source_schema


def fill(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
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
    producer.flush(60)


def time_connector(options: dict) -> tuple[float, int]:
    reader = OdradekBatchReader(options, source_schema(False))
    parsed = SourceOptions.parse(options, streaming=False)
    start = time.perf_counter()
    rows = sum(batch.num_rows for r in reader.partitions() for batch in read_range(parsed, r))
    return time.perf_counter() - start, rows


def time_spark(spark, options: dict) -> tuple[float, int]:
    start = time.perf_counter()
    df = spark.read.format("odradek").options(**options).load()
    rows, _ = df.selectExpr("count(*)", "sum(length(value))").collect()[0]
    return time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    node = None if args.bootstrap_server else Odradek()
    bootstrap = args.bootstrap_server or node.bootstrap
    try:
        topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
        fill(bootstrap, topic, args.records, args.partitions, args.value_bytes)
        options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
        print(f"{args.records} records of {args.value_bytes} B in {args.partitions} partitions")

        runs = [time_connector(options) for _ in range(args.runs)]
        assert all(rows == args.records for _, rows in runs), runs
        seconds = statistics.median(s for s, _ in runs)
        print(f"connector  {args.records / seconds:12,.0f} rows/s  (median {seconds:.2f} s of {args.runs})")

        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        from odradek.spark.datasource import OdradekDataSource

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(OdradekDataSource)
        time_spark(spark, options)  # warm up: JVM and Python workers
        runs = [time_spark(spark, options) for _ in range(args.runs)]
        assert all(rows == args.records for _, rows in runs), runs
        seconds = statistics.median(s for s, _ in runs)
        print(f"spark      {args.records / seconds:12,.0f} rows/s  (median {seconds:.2f} s of {args.runs})")
        spark.stop()
    finally:
        if node is not None:
            node.stop()


if __name__ == "__main__":
    main()
