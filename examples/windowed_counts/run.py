"""Windowed counts: per-user click counts over 10-second tumbling windows with a watermark, written as an
upsert stream (key = user@window start, value = the latest count) into a compacted topic.

    python -m examples.windowed_counts.run --bootstrap-server 127.0.0.1:9092
"""

import argparse
import json
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.functions import window

from examples.spark_session import odradek_spark, read_topic

# Event times of the generated clicks start here: a window boundary an hour or two ago (recent, so that the
# topic's 7-day retention keeps them).
BASE_MS = (int(time.time()) // 3600 - 1) * 3_600_000


def generate_clicks(bootstrap: str, topic: str, users: int = 3, seconds: int = 30) -> dict:
    """One click per user per second (user u clicks u+1 times); returns the expected counts per key."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    expected: dict[str, int] = {}
    for s in range(seconds):
        for u in range(users):
            for _ in range(u + 1):
                ts = BASE_MS + s * 1000
                producer.produce(topic, key=f"user{u}".encode(), value=json.dumps({"user": f"user{u}", "ts": ts}).encode())
                window = BASE_MS + (s // 10) * 10_000
                key = f"user{u}@{window}"
                expected[key] = expected.get(key, 0) + 1
    producer.flush(30)
    return expected


def create_compacted(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        return
    for fut in admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})]).values():
        fut.result(30)


def run_counts(spark, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    clicks = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest").load()
              .selectExpr("from_json(cast(value as string), 'user string, ts long') as c")
              .selectExpr("c.user as user", "timestamp_millis(c.ts) as ts"))
    counts = (clicks.withWatermark("ts", "20 seconds")
              .groupBy("user", window("ts", "10 seconds").alias("w")).count()
              .selectExpr("concat(user, '@', cast(unix_millis(w.start) as string)) as key",
                          "to_json(named_struct('user', user, 'window_start', w.start, 'count', count)) as value"))

    def upsert(batch, batch_id):
        # Spark 4 Python data sources accept only append-mode streams, so each update-mode micro-batch is a
        # batch write. A replayed batch rewrites the same key -> count pairs: harmless for an upsert stream.
        batch.write.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", sink).mode("append").save()

    query = (counts.writeStream.outputMode("update").foreachBatch(upsert)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()


def latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    """The upsert stream read as a table: the last value per key."""
    return {k.decode(): json.loads(v)["count"] for k, v in read_topic(bootstrap, topic)}


def main(argv=None) -> dict[str, int]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--source", default="clicks")
    parser.add_argument("--sink", default="click_counts")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--master", default=None,
                        help="Spark master URL, e.g. spark://127.0.0.1:7077 (default $ODRADEK_SPARK_MASTER or local[2])")
    args = parser.parse_args(argv)
    generate_clicks(args.bootstrap_server, args.source)
    create_compacted(args.bootstrap_server, args.sink)
    spark = odradek_spark("windowed-counts", args.master)
    run_counts(spark, args.bootstrap_server, args.source, args.sink, args.checkpoint or tempfile.mkdtemp())
    counts = latest_counts(args.bootstrap_server, args.sink)
    for key, count in sorted(counts.items()):
        print(f"{key}\t{count}")
    return counts


if __name__ == "__main__":
    main()
