"""The SparkSession the examples share: local mode unless a master URL is given, the "odradek" data source
registered."""

import os
import sys

from pyspark.sql import SparkSession


def odradek_spark(app: str, master: str | None = None) -> SparkSession:
    """The session on `master`, else $ODRADEK_SPARK_MASTER (spark://host:7077 for a standalone cluster), else
    local[2]. On a cluster, the executors' PYSPARK_PYTHON must have odradek installed, as this one does."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = master or os.environ.get("ODRADEK_SPARK_MASTER") or "local[2]"
    import odradek.spark.datasource as datasource

    builder = (SparkSession.builder.appName(app).master(master)
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false"))
    if os.path.exists(datasource.JAR):  # the JVM sink: plain writes without a Python worker
        builder = builder.config("spark.jars", datasource.JAR)
    spark = builder.getOrCreate()
    from pyspark.sql.datasource import DataSource

    for obj in vars(datasource).values():
        if isinstance(obj, type) and issubclass(obj, DataSource) and obj is not DataSource and obj.name() == "odradek":
            spark.dataSource.register(obj)
            break
    return spark


def read_topic(bootstrap: str, topic: str) -> list:
    """Every record of the topic as (key, value) bytes, reading each partition to its end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "examples-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        out = []
        for p in sorted(meta.partitions or {}):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if low >= high:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while True:
                msg = consumer.poll(30)
                if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
                    break
                if msg.error():
                    raise RuntimeError(str(msg.error()))
                out.append((msg.key(), msg.value()))
                if msg.offset() + 1 >= high:
                    break
        return out
    finally:
        consumer.close()
