"""Materialized tables for pull queries: each table's latest row per key, kept from its topic.

A reader thread per table consumes the table's topic from the beginning (read_committed), decodes keys
and values with the table's serde and keeps the last row per key; a tombstone deletes it. A pull query
first takes the topic's end offsets and waits until the view has read up to them, so it sees every write
acknowledged before it was asked (read-your-writes), then answers from memory.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.sql import serde
from odradek.sql.catalog import DataSource

log = logging.getLogger(__name__)

_POLL_S = 0.2


@dataclass(frozen=True)
class TableRow:
    key: tuple
    window_start: int | None
    window_end: int | None
    values: tuple  # the value columns
    rowtime: int


class MaterializedTable:
    def __init__(self, source: DataSource, client_config: dict, registry: serde.RegistryClient | None):
        self.source = source
        self.client_config = client_config
        self.key_format, self.value_format = source.formats(registry)
        self.admin = AdminClient(dict(client_config))
        self.rows: dict[tuple, TableRow] = {}
        self.positions: dict[int, int] = {}
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"materialize-{source.name}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(10)

    def _consumer(self) -> Consumer:
        return Consumer({**self.client_config, "group.id": f"odradek-sql-materialize-{self.source.name}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})

    def _run(self) -> None:
        """Read until closed; a failure (the cluster away) is logged and reading resumes where it was."""
        while not self.stopping.is_set():
            consumer = self._consumer()
            try:
                self._read(consumer)
            except Exception as e:
                log.warning("materializing %s: %s; resuming in a second", self.source.name, e)
                self.stopping.wait(1.0)
            finally:
                consumer.close()

    def _read(self, consumer: Consumer) -> None:
        assigned: set[int] = set()
        while not self.stopping.is_set():
            metadata = consumer.list_topics(self.source.topic, timeout=10)
            topic = metadata.topics.get(self.source.topic)
            partitions = set(topic.partitions) if topic is not None and not topic.error else set()
            if partitions - assigned:
                assigned |= partitions
                consumer.assign([TopicPartition(self.source.topic, p, self.positions.get(p, 0))
                                 for p in sorted(assigned)])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not self.stopping.is_set():
                for message in consumer.consume(500, _POLL_S):
                    self._apply(message)
                # the position passes transaction markers too, which are never delivered
                positions = consumer.position([TopicPartition(self.source.topic, p) for p in assigned])
                with self.changed:
                    for tp in positions:
                        if tp.offset >= 0:
                            self.positions[tp.partition] = tp.offset
                    self.changed.notify_all()

    def _apply(self, message) -> None:
        if message.error():
            if message.error().code() != KafkaError._PARTITION_EOF:
                log.warning("materializing %s: %s", self.source.name, message.error())
            return
        try:
            key = self.key_format.decode(message.key())
            values = self.value_format.decode(message.value())
        except serde.SerdeError as e:
            log.warning("materializing %s: skipping offset %d: %s", self.source.name, message.offset(), e)
            values = key = None
        with self.changed:
            if key is not None:
                index = (key.values, key.window_start, key.window_end)
                if values is None:
                    self.rows.pop(index, None)
                else:
                    self.rows[index] = TableRow(key.values, key.window_start, key.window_end, values,
                                                message.timestamp()[1])
            self.positions[message.partition()] = message.offset() + 1

    def wait_caught_up(self, timeout_s: float) -> None:
        """Wait until the view holds everything committed to the topic when this was called."""
        metadata = self.admin.list_topics(self.source.topic, timeout=timeout_s)
        request = {TopicPartition(self.source.topic, p): OffsetSpec.latest()
                   for p in metadata.topics[self.source.topic].partitions}
        # the last stable offset: what a read_committed reader can reach now
        answers = self.admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED,
                                          request_timeout=timeout_s)
        ends = {tp.partition: future.result().offset for tp, future in answers.items()}
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while any(self.positions.get(p, 0) < end for p, end in ends.items()):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.thread.is_alive():
                    raise TimeoutError(f"the view of {self.source.name} did not catch up with its topic")
                self.changed.wait(min(remaining, 1.0))

    def snapshot(self) -> list[TableRow]:
        with self.changed:
            return list(self.rows.values())
