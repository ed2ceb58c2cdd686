"""The `__cluster_links` topic, read and written as a Kafka client of the destination cluster.

Every node reads the whole topic into a LinkState on a thread of its own (started once the topic exists), so
each knows which topics are read-only mirrors and which it must feed. The CLI and the node that syncs a link's
topics write records with `write_records`: acks=all, idempotent, one at a time in order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.links.definition import LINKS_TOPIC, LinkError, LinkState

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 30.0


class LinkStateReader:
    """Keeps `state` up to date with the topic; `state` is only touched under `lock`."""

    def __init__(self, bootstrap: str, properties: dict):
        self.client_properties = {"bootstrap.servers": bootstrap, **properties}
        self.state = LinkState()
        self.lock = threading.Lock()
        self._stopping = threading.Event()
        self.ready = threading.Event()  # set once the reader has reached the end of the topic
        self._thread = threading.Thread(target=self._read, name="cluster-links-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._stopping.set()  # the thread (a daemon) stops at its next poll; nothing waits for it

    def _read(self) -> None:
        try:
            consumer = Consumer({**self.client_properties, "group.id": "odradek-cluster-links-reader",
                                 "enable.auto.commit": False, "isolation.level": "read_committed",
                                 "enable.partition.eof": True})
        except KafkaException as exc:
            log.error("Cannot read %s: %s", LINKS_TOPIC, exc)
            return
        try:
            consumer.assign([TopicPartition(LINKS_TOPIC, 0, OFFSET_BEGINNING)])
            while not self._stopping.is_set():
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        self.ready.set()
                    else:
                        log.warning("Reading %s: %s", LINKS_TOPIC, message.error())
                    continue
                with self.lock:
                    try:
                        self.state.apply(message.key() or b"", message.value())
                    except LinkError as exc:
                        log.warning("Skipping record %d of %s: %s", message.offset(), LINKS_TOPIC, exc)
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


def write_records(client_properties: dict, records: Iterable[tuple[bytes, bytes | None]]) -> None:
    """Append (key, value) records to `__cluster_links`, acks=all, in order; raises KafkaException on failure."""
    producer = Producer({**client_properties, "enable.idempotence": True, "acks": "all"})
    failures = []

    def delivered(error, _message):
        if error is not None:
            failures.append(error)

    for key, value in records:
        producer.produce(LINKS_TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
    if producer.flush(WRITE_TIMEOUT_S) or failures:
        raise KafkaException(failures[0] if failures else KafkaError(KafkaError._TIMED_OUT))


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
