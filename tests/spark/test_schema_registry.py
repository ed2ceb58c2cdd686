"""Avro with a schema registry in the "odradek" data source: a real node serving Confluent's registry API,
records written and read back with confluent-kafka's own AvroSerializer and AvroDeserializer."""

import json
import re
import time
import urllib.request

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka.schema_registry.avro")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType  # noqa: E402

from tests.conftest import NodeProcess, free_port  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, create_topic, read_all, unique  # noqa: E402

USER_V1 = {"type": "record", "name": "User", "namespace": "odradek.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
]}
# v2 adds a field with a default: records written with v1 read it as "unknown"
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "country", "type": "string", "default": "unknown"},
                                 {"name": "email", "type": ["null", "string"], "default": None}]}
GREETING = {"type": "record", "name": "Greeting", "namespace": "odradek.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "text", "type": "string"},
    {"name": "lang", "type": "string", "default": "en"},
]}
USER_TYPE = StructType([
    StructField("id", LongType(), False), StructField("name", StringType(), False),
    StructField("tags", ArrayType(StringType(), False), False),
    StructField("country", StringType(), False), StructField("email", StringType(), True),
])


@pytest.fixture(scope="module")
def registry_node(tmp_path_factory):
    """A node serving the schema registry; up once GET /subjects answers 200."""
    url = f"http://127.0.0.1:{free_port()}"
    node = NodeProcess(tmp_path_factory.mktemp("registry") / "data",
                       settings={"schema.registry.listener": url}).start()
    node.registry_url = url
    deadline = time.monotonic() + SPARK_DEADLINE_S
    while True:
        try:
            with urllib.request.urlopen(url + "/subjects", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"the registry at {url} did not answer: {e}\n{node.log_text()}") from None
        time.sleep(0.2)
    yield node
    node.stop()


def produce(bootstrap: str, topic: str, values: list, keys: list | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=None if keys is None else keys[i])
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def users(registry_node) -> str:
    """A topic of users: 3 written with v1, 3 with v2, then one plain (not Avro) value at offset 6. Keys are
    Avro longs (subject <topic>-key), but the plain record's, which is null."""
    bootstrap, topic = registry_node.bootstrap, unique("users")
    create_topic(bootstrap, topic)
    registry = SchemaRegistryClient({"url": registry_node.registry_url})
    keys = AvroSerializer(registry, '"long"')
    key_ctx, ctx = SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE)
    v1, v2 = AvroSerializer(registry, json.dumps(USER_V1)), AvroSerializer(registry, json.dumps(USER_V2))
    values = [v1({"id": i, "name": f"old{i}", "tags": ["a"] * i}, ctx) for i in range(3)]
    values += [v2({"id": i, "name": f"new{i}", "tags": [], "country": "NO", "email": None if i == 4 else f"u{i}@x"},
                  ctx) for i in range(3, 6)]
    produce(bootstrap, topic, [*values, b"plain text"], keys=[*(keys(i, key_ctx) for i in range(6)), None])
    assert [registry.get_latest_version(f"{topic}-{what}").version for what in ("value", "key")] == [2, 1]
    return topic


def read(spark, node, topic: str, **options):
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", node.bootstrap)
              .option("subscribe", topic).option("valueSchemaRegistry.url", node.registry_url))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_decodes_records_of_every_version_with_the_latest_schema(spark, registry_node, users):
    df = read(spark, registry_node, users, **{"valueSchemaRegistry.mode": "PERMISSIVE",
                                              "keySchemaRegistry.url": registry_node.registry_url})
    assert df.schema["value"].dataType == USER_TYPE
    assert df.schema["key"].dataType == LongType()
    got = [tuple(r) for r in df.orderBy("offset").select(
        "offset", "key", "value.id", "value.name", "value.tags", "value.country", "value.email").collect()]
    assert got == [
        (0, 0, 0, "old0", [], "unknown", None),  # v1: the default of v2's new fields
        (1, 1, 1, "old1", ["a"], "unknown", None),
        (2, 2, 2, "old2", ["a", "a"], "unknown", None),
        (3, 3, 3, "new3", [], "NO", "u3@x"),
        (4, 4, 4, "new4", [], "NO", None),
        (5, 5, 5, "new5", [], "NO", "u5@x"),
        (6, None, None, None, None, None, None),  # not Avro: null in PERMISSIVE mode
    ]


def test_a_value_not_in_confluent_framing_fails_the_read_by_default(spark, registry_node, users):
    with pytest.raises(Exception, match=re.escape(f"the value of {users}-0 at offset 6 is not in Confluent's framing")):
        read(spark, registry_node, users, startingOffsets=json.dumps({users: {"0": 5}})).collect()


def test_stream_decoded_then_encoded_with_another_subject_reads_back_with_confluent_deserializer(
        spark, registry_node, users, tmp_path):
    out = unique("greetings")
    create_topic(registry_node.bootstrap, out)
    registry = SchemaRegistryClient({"url": registry_node.registry_url})
    registry.register_schema(f"{out}-value", Schema(json.dumps(GREETING), "AVRO"))

    sink = (spark.createDataFrame([(1, "hi", "xx")], "id long, text string, extra string")
            .selectExpr("struct(id, text, extra) as value").write.format("odradek")
            .option("kafka.bootstrap.servers", registry_node.bootstrap).option("topic", out)
            .option("valueSchemaRegistry.url", registry_node.registry_url).mode("append"))
    with pytest.raises(Exception, match="has the field 'extra', which the Avro record odradek.test.Greeting does not"):
        sink.save()  # fails on the driver: no record is written

    stream = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", registry_node.bootstrap)
              .option("subscribe", users).option("startingOffsets", "earliest")
              .option("valueSchemaRegistry.url", registry_node.registry_url)
              .option("valueSchemaRegistry.mode", "PERMISSIVE").load())
    query = (stream.where("value is not null")
             .selectExpr("struct(value.id as id, concat('hello ', value.name, ' from ', value.country) as text) "
                         "as value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", registry_node.bootstrap)
             .option("topic", out).option("valueSchemaRegistry.url", registry_node.registry_url)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(SPARK_DEADLINE_S), "availableNow query did not finish"
    finally:
        query.stop()

    deserialize = AvroDeserializer(registry)
    ctx = SerializationContext(out, MessageField.VALUE)
    got = sorted((deserialize(value, ctx) for _, _, value, _ in read_all(registry_node.bootstrap, out)),
                 key=lambda g: g["id"])
    assert got == [{"id": i, "text": f"hello {'old' if i < 3 else 'new'}{i} from {'unknown' if i < 3 else 'NO'}",
                    "lang": "en"} for i in range(6)]
