"""The registry's storage: the compacted topic `_schemas`, read and written as a Kafka client of the cluster.

Every node's registry reads the whole topic (read_committed) into its RegistryState on a thread of its own.
Writes go through one writer at a time, the node that leads `_schemas`' partition: it writes with a
transactional producer whose transactional.id is the same on every node, so a writer that takes over fences
the one before (whose writes then fail instead of giving an id twice). A new writer first appends a NOOP
and waits to read it back, so it plans from everything written before it. A write is answered once its
records are committed with acks=all and applied here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.registry import errors
from odradek.registry import records as rec
from odradek.registry.state import RegistryState, Write

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 30.0
METADATA_TIMEOUT_S = 10.0


class SchemaStore:
    def __init__(self, bootstrap: str, properties: dict, topic: str, replication_factor: int):
        self.topic = topic
        self.replication_factor = replication_factor
        self.client_properties = {"bootstrap.servers": bootstrap, **properties}
        self.state = RegistryState()
        self.lock = threading.Lock()  # the state, between the reader thread and the request threads
        self._applied = threading.Condition(self.lock)
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="schema-registry")
        self._write_lock = asyncio.Lock()
        self._producer: Producer | None = None  # the transactional writer, while this node is the writer
        self.admin = AdminClient(dict(self.client_properties))
        self._stopping = threading.Event()
        self._reader = threading.Thread(target=self._read, name="schemas-reader", daemon=True)
        self.error: str | None = None  # why the reader cannot read, while it cannot
        self.ready = threading.Event()  # set once the reader has reached the topic's end (or there is no topic)
        self._written_until = -1  # the offset of this writer's last record, which planning waits to read

    def start(self) -> None:
        self._reader.start()

    def close(self) -> None:
        self._stopping.set()
        self._reader.join(timeout=10)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._drop_writer()

    # reading

    def _read(self) -> None:
        """Read `_schemas` for as long as the node runs; a failure is logged and reading starts again where
        it stopped, so the state never silently stops following the topic."""
        while not self._stopping.is_set():
            try:
                self._read_from(self.state.next_offset)
            except Exception:
                log.exception("reading %s failed; reading again from offset %d", self.topic, self.state.next_offset)
                self.error = "reading the schemas topic failed; see the node's log"
                self._stopping.wait(1.0)

    def _read_from(self, offset: int) -> None:
        while not self._stopping.is_set() and not self._topic_exists():
            self.ready.set()  # nothing written yet: the empty state is the whole registry
            self._stopping.wait(0.5)
        consumer = Consumer({**self.client_properties, "group.id": f"odradek-schema-registry-{uuid.uuid4()}",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "fetch.wait.max.ms": 500, "fetch.queue.backoff.ms": 0,
                             "enable.partition.eof": True})  # the end, as read_committed sees it: ready
        try:
            consumer.assign([TopicPartition(self.topic, 0, offset or OFFSET_BEGINNING)])
            while not self._stopping.is_set():
                # consume() would wait for all 500 or the timeout: wait for one, then take what is there
                first = consumer.poll(0.5)
                messages = [first] + consumer.consume(num_messages=500, timeout=0) if first is not None else []
                with self.lock:
                    for message in messages:
                        error = message.error()
                        if error is not None and error.code() == KafkaError._PARTITION_EOF:
                            self.ready.set()
                        elif error is not None:
                            self.error = error.str()
                        else:
                            self.error = None
                            self.state.apply(message.key(), message.value(), message.offset())
                    if messages:
                        self._applied.notify_all()
        finally:
            consumer.close()

    def _topic_exists(self) -> bool:
        try:  # every topic's metadata: asking for the topic by name could create it (auto.create.topics.enable)
            metadata = self.admin.list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException:
            return False
        topic = metadata.topics.get(self.topic)
        return topic is not None and topic.error is None and 0 in topic.partitions

    def wait_applied(self, offset: int, timeout_s: float) -> bool:
        """Block until the record at `offset` is applied here (False if the deadline passed first)."""
        deadline = time.monotonic() + timeout_s
        with self._applied:
            while self.state.next_offset <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._applied.wait(left)
        return True

    async def read(self, query: Callable[[RegistryState], object]):
        """`query(state)` on a request thread (parsing a schema can take a while), with the state locked, once
        the reader has read the whole topic: a registry that has just started does not answer from half of it."""
        def locked():
            self._wait_ready()
            with self.lock:
                return query(self.state)
        return await asyncio.get_running_loop().run_in_executor(self._executor, locked)

    def _wait_ready(self) -> None:
        if not self.ready.wait(READY_TIMEOUT_S):
            raise errors.timeout(f"the registry is still reading {self.topic}" +
                                 (f" ({self.error})" if self.error else ""))

    # the writer

    def leader(self) -> int | None:
        """The node that leads `_schemas`' partition, creating the topic when it does not exist yet."""
        # every topic's metadata until the topic is known to exist: see _topic_exists
        metadata = self.admin.list_topics(self.topic if self.state.next_offset else None, timeout=METADATA_TIMEOUT_S)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            self._create_topic(len(metadata.brokers))
            topic = self.admin.list_topics(timeout=METADATA_TIMEOUT_S).topics.get(self.topic)
        partition = topic.partitions.get(0) if topic is not None else None
        return partition.leader if partition is not None and partition.leader >= 0 else None

    def _create_topic(self, brokers: int) -> None:
        replicas = max(1, min(self.replication_factor, brokers))
        new = NewTopic(self.topic, num_partitions=1, replication_factor=replicas,
                       config={"cleanup.policy": "compact"})
        try:
            self.admin.create_topics([new])[self.topic].result(timeout=METADATA_TIMEOUT_S)
            log.info("Created the schema registry's topic %s with %d replicas", self.topic, replicas)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while not self._topic_exists() and time.monotonic() < deadline:
            time.sleep(0.1)

    async def write(self, plan: Callable[[RegistryState], Write]) -> tuple[Write, int]:
        """Plan a write against the current state and append its records; (the write, the offset after it).
        Call on the writer only; writes on one node go one at a time."""
        async with self._write_lock:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self._write, plan)

    def _write(self, plan: Callable[[RegistryState], Write]) -> tuple[Write, int]:
        for attempt in (1, 2):
            if self._producer is None:
                self._become_writer()  # fences the writer before, and reads everything it wrote
            write, next_offset = self._plan(plan)
            if not write.records:
                return write, next_offset
            try:
                last = self._append(write.records)
            except KafkaException as exc:
                self._drop_writer()
                if attempt == 1 and exc.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                                           KafkaError.INVALID_PRODUCER_EPOCH):
                    continue  # another node wrote in between, and this one is the writer again: plan anew
                raise errors.store_error(f"writing to {self.topic} failed: {exc.args[0].str()}") from None
            if not self.wait_applied(last, WRITE_TIMEOUT_S):
                raise errors.timeout(f"the write is in {self.topic} but was not read back in time")
            return write, last + 1
        raise AssertionError("unreachable")

    def _plan(self, plan: Callable[[RegistryState], Write]) -> tuple[Write, int]:
        """Plan from a state that holds everything this writer wrote (its last write may have timed out
        before it was read back): never from one that could give an id or a version twice."""
        self._wait_ready()
        if not self.wait_applied(self._written_until, WRITE_TIMEOUT_S):
            raise errors.timeout(f"{self.topic} was not read up to this writer's last write in time")
        with self.lock:
            return plan(self.state), self.state.next_offset

    def _become_writer(self) -> None:
        producer = Producer({**self.client_properties, "transactional.id": f"odradek-schema-registry-{self.topic}",
                             "acks": "all", "linger.ms": 0, "transaction.timeout.ms": 60000})
        try:
            producer.init_transactions(WRITE_TIMEOUT_S)
            self._producer = producer
            noop = self._append([(rec.noop_key(), None)])
        except KafkaException as exc:
            self._drop_writer()
            raise errors.store_error(f"becoming the writer of {self.topic} failed: {exc.args[0].str()}") from None
        if not self.wait_applied(noop, WRITE_TIMEOUT_S):
            self._drop_writer()
            raise errors.timeout(f"reading {self.topic} to its end took too long")

    def _append(self, records: list[tuple[dict, dict | None]]) -> int:
        """Append in one transaction; the offset of the last record."""
        producer = self._producer
        offsets: list[int] = []
        failures: list[KafkaError] = []

        def delivered(error, message):
            if error is not None:
                failures.append(error)
            else:
                offsets.append(message.offset())

        producer.begin_transaction()
        try:
            for key, value in records:
                producer.produce(self.topic, key=rec.encode(key), value=rec.encode(value), partition=0,
                                 on_delivery=delivered)
            producer.commit_transaction(WRITE_TIMEOUT_S)
        except KafkaException:
            try:
                producer.abort_transaction(WRITE_TIMEOUT_S)
            except KafkaException:
                pass
            raise
        if failures or len(offsets) != len(records):
            raise KafkaException(failures[0] if failures else KafkaError(KafkaError._FAIL))
        self._written_until = max(offsets)
        return self._written_until

    def _drop_writer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.flush(1)
            except KafkaException:  # a fenced producer's flush raises its fatal error: it is dropped anyway
                pass
