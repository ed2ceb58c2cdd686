"""format("odradek") through Spark Connect: a client that has only pyspark's Connect client and makes no register
call reads, streams and writes over sc:// against a Spark Connect server, whose Python workers have odradek
installed (the data source resolves there, by static registration).

One server for the module (conftest.py's `connect_server`); each test runs one client operation in a process of
its own (connect_client.py, which says why) and checks the topics with confluent-kafka.
"""

import collections
import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("odradek.spark.datasource")

from tests.spark.test_source import fill, numbered_input  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S, create_topic, read_all, unique  # noqa: E402

CONNECT_SESSION = "pyspark.sql.connect.session.SparkSession"


def test_batch_read_over_sc_returns_every_record_once_with_no_register_call(connect_server, shared_node):
    topic = unique("connect-read")
    create_topic(shared_node.bootstrap, topic, partitions=2)
    sent = fill(shared_node.bootstrap, topic, partitions=2, count=15)

    result = connect_server.client("read", bootstrap=shared_node.bootstrap, topic=topic)

    assert result["session"] == CONNECT_SESSION
    got = [(p, offset, bytes.fromhex(key), bytes.fromhex(value)) for p, offset, key, value in result["rows"]]
    assert sorted(got) == sorted((s.partition, s.offset, s.key, s.value) for s in sent)
    assert len(got) == len(set(got)) == 30


def test_streaming_odradek_to_odradek_over_sc_is_exact_and_reports_kafka_offsets(connect_server, shared_node,
                                                                                  tmp_path):
    source, target = unique("connect-in"), unique("connect-out")
    inputs = numbered_input(shared_node.bootstrap, source, 90)  # 3 partitions, 30 records each
    create_topic(shared_node.bootstrap, target, partitions=2)

    result = connect_server.client("stream", bootstrap=shared_node.bootstrap, source=source, target=target,
                                   checkpoint=str(tmp_path / "checkpoint"), deadline_s=SPARK_DEADLINE_S)

    # the transactional sink's output, read_committed: every input record once
    outputs = collections.Counter((key, value) for _, key, value, _ in read_all(shared_node.bootstrap, target))
    assert sum(outputs.values()) == 90, f"{sum(outputs.values()) - 90:+d} records: lost or duplicated"
    assert outputs == inputs

    # the progress reports the source's offsets as Spark's Kafka source does, JSON {"<topic>": {"<partition>": n}}
    # (the first batch, empty, only resolves the starting offsets: its endOffset is where the next one starts)
    batches = [p for p in result["progress"] if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in batches] == [90], result["progress"]
    (offsets,) = batches[0]["sources"]
    start, end = {source: {"0": 0, "1": 0, "2": 0}}, {source: {"0": 30, "1": 30, "2": 30}}
    assert json.loads(offsets["startOffset"]) == start, offsets
    assert json.loads(offsets["endOffset"]) == end, offsets
    assert json.loads(offsets["latestOffset"]) == end, offsets
    assert json.loads(result["progress"][-1]["sources"][0]["endOffset"]) == end, result["progress"]


@pytest.mark.parametrize("jvm", ["true", "false"], ids=["jvm-sink", "python-data-source"])
def test_batch_write_over_sc_then_read_back(connect_server, shared_node, jvm):
    topic = unique("connect-write")
    create_topic(shared_node.bootstrap, topic, partitions=3)
    rows = [[f"k{i}", f"v{i}", i % 3] for i in range(12)] + [[None, "no-key", 1]]

    connect_server.client("write", bootstrap=shared_node.bootstrap, topic=topic, rows=rows, jvm=jvm)

    got = collections.Counter((p, key, value) for p, key, value, _ in read_all(shared_node.bootstrap, topic))
    assert got == collections.Counter((p, None if k is None else k.encode(), v.encode()) for k, v, p in rows)

