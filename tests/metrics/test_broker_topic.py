"""BrokerTopicStats: Kafka's per-topic and all-topics produce and fetch counters."""

from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.metrics.registry import render
from odradek.protocol.errors import ErrorCode
from odradek.protocol.file_region import FileRegion


def samples(stats: BrokerTopicStats) -> dict[tuple, float]:
    return {(name, labels): value for family in stats.collect() for name, labels, value in family.samples}


PREFIX = "kafka_server_brokertopicmetrics_"


def test_appends_count_per_topic_and_in_total():
    stats = BrokerTopicStats()
    stats.appended("a", 3, 300)
    stats.appended("a", 2, 100)
    stats.appended("b", 1, 50)
    stats.append_failed("a", True, ErrorCode.INVALID_RECORD)
    stats.append_failed("a", True, ErrorCode.NOT_LEADER_OR_FOLLOWER)  # expected by clients: not a failure, as Kafka
    stats.append_failed("made-up", False, ErrorCode.NOT_ENOUGH_REPLICAS)  # never hosted here: only the total has it
    stats.append_failed("a", False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # no such partition: counted nowhere
    got = samples(stats)
    assert got[(PREFIX + "messagesin_total", (("topic", "a"),))] == 5
    assert got[(PREFIX + "messagesin_total", ())] == 6
    assert got[(PREFIX + "bytesin_total", (("topic", "a"),))] == 400
    assert got[(PREFIX + "bytesin_total", ())] == 450
    assert got[(PREFIX + "totalproducerequests_total", (("topic", "a"),))] == 4
    assert got[(PREFIX + "totalproducerequests_total", ())] == 6
    assert got[(PREFIX + "failedproducerequests_total", (("topic", "a"),))] == 1
    assert got[(PREFIX + "failedproducerequests_total", ())] == 2
    assert not any(labels == (("topic", "made-up"),) for _, labels in got)


def test_reads_count_requests_and_failures():
    stats = BrokerTopicStats()
    stats.read("a")
    stats.read_failed("a", False, ErrorCode.UNKNOWN_SERVER_ERROR)  # not hosted here, but the topic has counters
    stats.read_failed("a", True, ErrorCode.OFFSET_OUT_OF_RANGE)  # expected by clients: not a failure, as Kafka
    stats.read_failed("made-up", False, ErrorCode.UNKNOWN_SERVER_ERROR)
    stats.read_failed("a", False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # no such partition: counted nowhere
    got = samples(stats)
    assert got[(PREFIX + "totalfetchrequests_total", (("topic", "a"),))] == 3
    assert got[(PREFIX + "totalfetchrequests_total", ())] == 4
    assert got[(PREFIX + "failedfetchrequests_total", (("topic", "a"),))] == 1
    assert got[(PREFIX + "failedfetchrequests_total", ())] == 2


def fetch_response(*topics):
    return {"responses": [{"topic": name, "partitions": [{"records": records} for records in parts]}
                          for name, parts in topics]}


def test_fetch_responses_count_bytes_out_for_consumers_and_replication_for_followers():
    stats = BrokerTopicStats()
    stats.appended("a", 1, 1)  # the topic exists here
    consumer = fetch_response(("a", [FileRegion(3, 0, 1000), b"", None]), ("gone", [FileRegion(3, 0, 7)]))
    stats.fetch_response(None, {"replica_id": -1}, consumer)
    stats.fetch_response(None, {"replica_state": {"replica_id": -1}}, fetch_response(("a", [b"x" * 24])))
    stats.fetch_response(None, {"replica_id": 2}, fetch_response(("a", [FileRegion(3, 0, 500)])))
    got = samples(stats)
    assert got[(PREFIX + "bytesout_total", (("topic", "a"),))] == 1024
    assert got[(PREFIX + "bytesout_total", ())] == 1031  # the unknown topic counts in the total only
    assert got[(PREFIX + "replicationbytesout_total", ())] == 500


def test_pruning_forgets_deleted_topics():
    stats = BrokerTopicStats()
    stats.appended("kept", 1, 1)
    stats.appended("deleted", 1, 1)
    stats.prune({"kept": object()})
    text = render(stats.collect())
    assert 'topic="kept"' in text and 'topic="deleted"' not in text
    assert f"{PREFIX}messagesin_total 2" in text  # the total keeps what was counted
