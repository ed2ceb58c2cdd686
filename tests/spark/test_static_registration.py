"""format("odradek") with no register call: Spark 4 registers the `pyspark_odradek` package's DefaultSource."""

import pytest

pytest.importorskip("pyspark")

from confluent_kafka import Producer  # noqa: E402
from py4j.protocol import Py4JJavaError  # noqa: E402
from pyspark.sql.datasource import DataSource  # noqa: E402

from tests.spark.topics import create_topic, unique  # noqa: E402


class ParentSessionOnlySource(DataSource):
    """Registered in the `spark` fixture's session only: shows that a new session inherits no registrations."""

    @classmethod
    def name(cls) -> str:
        return "odradek_test_parent_session_only"


def test_a_session_that_registered_nothing_reads_format_odradek(spark, shared_node):
    topic = unique("static")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": shared_node.bootstrap})
    for i in range(6):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    spark.dataSource.register(ParentSessionOnlySource)
    fresh = spark.newSession()
    with pytest.raises(Py4JJavaError, match="DATA_SOURCE_NOT_FOUND"):
        fresh.read.format(ParentSessionOnlySource.name()).load()

    df = (fresh.read.format("odradek").option("kafka.bootstrap.servers", shared_node.bootstrap)
          .option("subscribe", topic).load())
    assert sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in df.collect()) == [
        (i % 2, i // 2, f"k{i}".encode(), f"v{i}".encode()) for i in sorted(range(6), key=lambda i: (i % 2, i))]
