"""The `__cluster_links` topic, read and written as a Kafka client of the destination cluster.

Every node reads the whole topic into a LinkState on a thread of its own (started once the topic exists), so
each knows which topics are read-only mirrors and which it must feed, and commits how far it has applied the
topic as the offset of its own group (`applied_group`), so that a command can wait until every node has
applied what it wrote (`wait_until_applied`). The CLI and the node that syncs a link's topics write records
with `write_records`: acks=all, idempotent, one at a time in order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.links.definition import LINKS_TOPIC, LinkError, LinkState

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 2.0
NOT_READY_LOG_INTERVAL_S = 10.0


class LinkStateReader:
    """Keeps `state` up to date with the topic; `state` is only touched under `lock`. It reads for as long as the
    node runs: a client that fails (or a record that cannot be applied) is logged and the reading goes on, from
    where it was, after a pause."""

    def __init__(self, bootstrap: str, properties: dict, node_id: int):
        self.client_properties = {"bootstrap.servers": bootstrap, **properties}
        self.node_id = node_id
        self.state = LinkState()
        self.lock = threading.Lock()
        self._stopping = threading.Event()
        self.ready = threading.Event()  # set once the reader has reached the end of the topic
        self._next_offset = OFFSET_BEGINNING
        self._problem = "no answer yet"  # why the reader has not reached the end, for the log
        self._thread = threading.Thread(target=self._read, name="cluster-links-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.is_alive()

    @property
    def applied_position(self) -> int:
        """The offset after the last record this node has applied."""
        return max(0, self._next_offset)

    def close(self) -> None:
        self._stopping.set()  # the thread (a daemon) stops at its next poll; nothing waits for it

    def _read(self) -> None:
        while not self._stopping.is_set():
            try:
                self._read_until_failure()
            except Exception as exc:  # the client, or a bug: either way the node must keep reading
                self._problem = str(exc)
                log.error("Reading %s failed (again in %.0f s): %s", LINKS_TOPIC, RETRY_BACKOFF_S, exc)
            self._stopping.wait(RETRY_BACKOFF_S)

    def _read_until_failure(self) -> None:
        committed: list = []  # commit outcomes, as on_commit reports them during poll

        def on_commit(error, partitions) -> None:
            committed.append((error, partitions[0].offset if partitions else None))

        # auto.offset.reset: a position that is gone (the topic re-created) reads it all again, never skips it
        consumer = Consumer({**self.client_properties, "group.id": applied_group(self.node_id),
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest",
                             "on_commit": on_commit})
        try:
            consumer.assign([TopicPartition(LINKS_TOPIC, 0, self._next_offset)])
            uncommitted = None  # an applied position not committed yet: committed (again) at an idle poll
            reported = 0.0
            while not self._stopping.is_set():
                message = consumer.poll(0.5)
                for error, offset in committed:
                    if error is None and offset == uncommitted:
                        uncommitted = None
                    elif error is not None and time.monotonic() - reported > NOT_READY_LOG_INTERVAL_S:
                        reported = time.monotonic()
                        log.warning("Cannot commit how far this node has applied %s (promotions wait for it): "
                                    "%s", LINKS_TOPIC, error)
                committed.clear()
                if message is None or message.error():
                    if message is not None and message.error().code() == KafkaError._PARTITION_EOF:
                        self.ready.set()
                        uncommitted = message.offset()
                    elif message is not None:
                        self._problem = str(message.error())
                        if time.monotonic() - reported > NOT_READY_LOG_INTERVAL_S:
                            reported = time.monotonic()
                            log.warning("Reading %s: %s", LINKS_TOPIC, self._problem)
                    if uncommitted is not None:
                        consumer.commit(offsets=[TopicPartition(LINKS_TOPIC, 0, uncommitted)], asynchronous=True)
                    if not self.ready.is_set() and time.monotonic() - reported > NOT_READY_LOG_INTERVAL_S:
                        reported = time.monotonic()
                        log.error("This node has not read %s to its end yet, so it refuses writes to topics (it "
                                  "cannot tell the read-only mirrors yet): %s", LINKS_TOPIC, self._problem)
                    continue
                with self.lock:  # the position moves with the state: applied_position never runs ahead of it
                    try:
                        self.state.apply(message.key() or b"", message.value())
                    except Exception as exc:  # LinkError, or worse: one bad record must not stop the node reading
                        log.warning("Skipping record %d of %s: %s", message.offset(), LINKS_TOPIC, exc)
                    self._next_offset = message.offset() + 1
        finally:
            consumer.close()

    def end_offset(self, timeout_s: float) -> int:
        """The topic's end offset now, as its leader says (blocking); KafkaException if it does not answer."""
        consumer = Consumer({**self.client_properties, "group.id": applied_group(self.node_id),
                             "enable.auto.commit": False})
        try:
            return consumer.get_watermark_offsets(TopicPartition(LINKS_TOPIC, 0), timeout=timeout_s)[1]
        finally:
            consumer.close()


def ensure_links_topic(admin: AdminClient, replication_factor: int) -> None:
    """Create the compacted `__cluster_links` topic unless it exists."""
    if LINKS_TOPIC in admin.list_topics(timeout=10).topics:
        return
    futures = admin.create_topics([NewTopic(LINKS_TOPIC, 1, replication_factor,
                                            config={"cleanup.policy": "compact"})])
    try:
        futures[LINKS_TOPIC].result(WRITE_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def applied_group(node_id: int) -> str:
    """The group whose committed offset on `__cluster_links` says how far node `node_id` has applied it."""
    return f"odradek-cluster-links-node-{node_id}"


def write_records(client_properties: dict, records: Iterable[tuple[bytes, bytes | None]]) -> int:
    """Append (key, value) records to `__cluster_links`, acks=all, in order; the offset after the last one.
    Raises KafkaException on failure."""
    producer = Producer({**client_properties, "enable.idempotence": True, "acks": "all"})
    failures, next_offset = [], 0

    def delivered(error, message):
        nonlocal next_offset
        if error is not None:
            failures.append(error)
        else:
            next_offset = max(next_offset, message.offset() + 1)

    for key, value in records:
        producer.produce(LINKS_TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
    if producer.flush(WRITE_TIMEOUT_S) or failures:
        raise KafkaException(failures[0] if failures else KafkaError(KafkaError._TIMED_OUT))
    return next_offset


def wait_until_applied(client_properties: dict, next_offset: int, timeout_s: float) -> list[int]:
    """Wait (up to `timeout_s`) until every live broker has applied `__cluster_links` up to `next_offset`; the
    ids of those that have not by then. A node applies a promotion only when it reads it, and until then it
    still refuses producers on the promoted topics."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient(client_properties)
    deadline = time.monotonic() + timeout_s
    behind = sorted(admin.list_topics(timeout=timeout_s).brokers)
    while behind:
        still = []
        for node_id in behind:
            group = applied_group(node_id)
            try:
                found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(
                    max(0.1, deadline - time.monotonic()))
                applied = max((tp.offset for tp in found.topic_partitions if tp.topic == LINKS_TOPIC), default=-1)
            except KafkaException:
                applied = -1
            if applied < next_offset:
                still.append(node_id)
        behind = still
        if not behind or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return behind


def read_state(client_properties: dict, timeout_s: float = 30.0) -> LinkState:
    """The links as the whole topic says now (for the CLI): read from the start to the end."""
    state = LinkState()
    consumer = Consumer({**client_properties, "group.id": "odradek-cluster-links-cli", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    try:
        if LINKS_TOPIC not in consumer.list_topics(timeout=timeout_s).topics:
            return state
        consumer.assign([TopicPartition(LINKS_TOPIC, 0, OFFSET_BEGINNING)])
        while True:
            message = consumer.poll(timeout_s)
            if message is None:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading {LINKS_TOPIC} timed out"))
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return state
                raise KafkaException(message.error())
            try:
                state.apply(message.key() or b"", message.value())
            except LinkError as exc:
                log.warning("Skipping record %d of %s: %s", message.offset(), LINKS_TOPIC, exc)
    finally:
        consumer.close()
