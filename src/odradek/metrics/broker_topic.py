"""BrokerTopicStats: Kafka's per-topic and all-topics produce and fetch counters (kafka.server:type=BrokerTopicMetrics).

Counted where the data already passes, with plain integer adds: the replica manager's appends (messages and
bytes in, produce requests and their failures, per partition written as Kafka counts them) and partition
reads (fetch requests and failures), and the Fetch responses the dispatcher sends (bytes out). A topic gets
its own counters once one of its partitions is hosted here, so a client naming topics that do not exist
cannot grow the label set (what is refused for such a topic counts in the all-topics total only); the
counters of topics no longer in the metadata image are dropped at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.metrics.registry import MetricFamily, counter_family
from odradek.protocol.errors import ErrorCode
from odradek.protocol.file_region import FileRegion

FETCH_API_KEY = 1
PREFIX = "kafka_server_brokertopicmetrics_"

# As Kafka's replica manager, the failed-request counters leave out the errors a client is expected to meet
# (a leader that moved, a batch too large or corrupt, an offset out of range): they are there for failures of
# the broker to handle a request. What is refused otherwise counts (a record the topic does not accept, too
# few in-sync replicas for acks=all, a fenced producer). A partition that does not exist counts nowhere, as
# Kafka answers it before its replica manager sees the request (so does one without a replica here, which this
# node also answers UNKNOWN_TOPIC_OR_PARTITION).
EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})
EXPECTED_FETCH_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.OFFSET_OUT_OF_RANGE})


class TopicStats:
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests", "failed_produce_requests",
                 "fetch_requests", "failed_fetch_requests")

    def __init__(self):
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.produce_requests = 0
        self.failed_produce_requests = 0
        self.fetch_requests = 0
        self.failed_fetch_requests = 0


# (attribute, metric name without prefix, help) in the order they are rendered
COUNTERS = (
    ("messages_in", "messagesin_total", "Records appended to partitions this node leads (MessagesInPerSec)."),
    ("bytes_in", "bytesin_total", "Bytes of record batches produced to partitions this node leads, as received "
                                  "(BytesInPerSec); replication is not counted."),
    ("bytes_out", "bytesout_total", "Bytes of record batches sent to consumers in Fetch responses (BytesOutPerSec); "
                                    "replication is not counted."),
    ("produce_requests", "totalproducerequests_total", "Partition appends asked of this node by Produce requests "
                                                       "and the coordinators, one per partition of a request "
                                                       "(TotalProduceRequestsPerSec)."),
    ("failed_produce_requests", "failedproducerequests_total", "Partition appends refused with an error other "
                                                               "than those a client expects, as Kafka counts "
                                                               "them (FailedProduceRequestsPerSec)."),
    ("fetch_requests", "totalfetchrequests_total", "Partition reads by consumer and follower fetches, one per "
                                                   "partition read (TotalFetchRequestsPerSec)."),
    ("failed_fetch_requests", "failedfetchrequests_total", "Partition reads answered with an error other than "
                                                           "those a client expects, as Kafka counts them "
                                                           "(FailedFetchRequestsPerSec)."),
)


class BrokerTopicStats:
    """Per-topic counters; the all-topics totals are summed when scraped: the topics' counters, and `other`
    (what no topic's counters hold: refusals for topics never hosted here, the counts of deleted topics)."""

    def __init__(self):
        self.topics: dict[str, TopicStats] = {}
        self.other = TopicStats()
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def _new(self, topic: str) -> TopicStats:
        stats = self.topics[topic] = TopicStats()
        return stats

    # the hooks: a dictionary lookup and a few integer additions each

    def appended(self, topic: str, records: int, size: int) -> None:
        """A produce (or coordinator) append to a partition of `topic` succeeded."""
        stats = self.topics.get(topic) or self._new(topic)
        stats.produce_requests += 1
        stats.messages_in += records
        stats.bytes_in += size

    def append_failed(self, topic: str, hosted: bool, error: int) -> None:
        """An append was refused with `error`; `hosted`: the partition has a replica here."""
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return
        stats = self.topics.get(topic) or (self._new(topic) if hosted else self.other)
        stats.produce_requests += 1
        if error not in EXPECTED_PRODUCE_ERRORS:
            stats.failed_produce_requests += 1

    def read(self, topic: str) -> None:
        """A partition read by a fetch."""
        (self.topics.get(topic) or self._new(topic)).fetch_requests += 1

    def read_failed(self, topic: str, hosted: bool, error: int) -> None:
        """A partition read answered with `error`; `hosted`: the partition has a replica here."""
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return
        stats = self.topics.get(topic) or (self._new(topic) if hosted else self.other)
        stats.fetch_requests += 1
        if error not in EXPECTED_FETCH_ERRORS:
            stats.failed_fetch_requests += 1

    def fetch_response(self, ctx, request: dict, response: dict) -> None:
        """A Fetch response about to be sent: its record bytes are bytes out (to a consumer) or replication
        bytes out (to a follower)."""
        replica_id = request["replica_state"]["replica_id"] if "replica_state" in request \
            else request.get("replica_id", -1)
        topics = self.topics
        sent = 0
        for topic in response["responses"]:
            stats = topics.get(topic.get("topic") or "")
            topic_sent = 0
            for partition in topic["partitions"]:
                records = partition["records"]
                if records is not None:
                    topic_sent += records.size if isinstance(records, FileRegion) else len(records)
            if replica_id < 0:
                (stats or self.other).bytes_out += topic_sent
            sent += topic_sent
        if replica_id >= 0:
            self.replication_bytes_out += sent

    # scraping

    def prune(self, known_topics) -> None:
        """Forget the counters of topics that no longer exist (a topic deleted and created again starts at 0);
        the totals keep what they counted."""
        for topic in [t for t in self.topics if t not in known_topics]:
            gone, other = self.topics.pop(topic), self.other
            for attribute in TopicStats.__slots__:
                setattr(other, attribute, getattr(other, attribute) + getattr(gone, attribute))

    def collect(self) -> Iterable[MetricFamily]:
        topics = [(topic, self.topics[topic]) for topic in sorted(self.topics)]
        for attribute, suffix, text in COUNTERS:
            family = counter_family(PREFIX + suffix, text, ("topic",))
            total = getattr(self.other, attribute)
            for topic, stats in topics:
                value = getattr(stats, attribute)
                family.add((topic,), value)
                total += value
            # Kafka's all-topics meter is the same MBean name without a topic: one series without the label
            family.samples.append((family.name, (), total))
            yield family
        yield counter_family(PREFIX + "replicationbytesin_total",
                             "Bytes of record batches this node fetched as a follower "
                             "(ReplicationBytesInPerSec).").add((), self.replication_bytes_in)
        yield counter_family(PREFIX + "replicationbytesout_total",
                             "Bytes of record batches sent to followers (ReplicationBytesOutPerSec).").add(
            (), self.replication_bytes_out)
