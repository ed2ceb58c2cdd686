"""A write task's rows through Odradek's own idempotent producer (network/remote_cluster.py), each Arrow batch
Spark hands over encoded straight into record batches by record_batches.py.

Per Arrow batch: each row's partition (the `partition` column, else Kafka's murmur2 of the key, else, for a
row without either, one partition per batch taken in turn, as Kafka's sticky partitioner does), one record
batch per partition (more when they pass `batch.size`), and one Produce request per partition leader. The
request is in flight while the next Arrow batch is encoded; the next waits for it, so a partition's batches
reach the log in order.

Idempotent as librdkafka and Java producers are by default: a producer id from the cluster and a sequence per
partition, so a batch sent again after a leader change or a lost connection is written once. A retriable error
(leader moved, not enough replicas, a timeout) sends the same bytes again to the leader the metadata names
then, until `delivery.timeout.ms` (or librdkafka's `message.timeout.ms`; 120 s by default) passes without
progress; any other error fails the task with its name. The producer outlives its task in the Python worker,
which Spark reuses for the next tasks; one that failed is dropped.

The client speaks what `client_security` speaks: plaintext, TLS, SASL PLAIN and SCRAM, and takes `acks` (1,
all), `compression.type`, `enable.idempotence`, `batch.size` and the delivery timeout. A task whose `kafka.*`
options name anything else (GSSAPI, OAUTHBEARER, a PKCS#12 keystore, `acks=0`, another partitioner, ...)
produces through librdkafka instead (`uses_produce_client`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.network.client import AuthenticationError
from odradek.network.remote_cluster import RemoteCluster
from odradek.protocol import compression as codecs
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import increment_sequence
from odradek.security.client_properties import client_security, speaks
from odradek.spark.record_batches import Batch, as_binary, build_batches, key_partitions

_HONOURED = frozenset({
    "bootstrap.servers", "client.id", "acks", "request.required.acks", "compression.type", "compression.codec",
    "enable.idempotence", "batch.size", "delivery.timeout.ms", "message.timeout.ms", "partitioner"})
# Settings of librdkafka's queueing and pacing, which mean nothing to a producer that sends as it encodes.
_NOT_APPLICABLE = frozenset({
    "linger.ms", "queue.buffering.max.ms", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
    "batch.num.messages", "retries", "message.send.max.retries", "retry.backoff.ms", "retry.backoff.max.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "socket.connection.setup.timeout.ms",
    "topic.metadata.refresh.interval.ms", "max.in.flight.requests.per.connection", "max.in.flight"})
# Kafka's default partitioner, by librdkafka's names for it.
_MURMUR2 = frozenset({"murmur2_random", "murmur2"})
# Errors after which the partition's leader is looked up again and the same batches sent again.
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_DELIVERY_TIMEOUT_MS = 120_000  # Kafka's Java producer's delivery.timeout.ms
_BATCH_BYTES = 1_000_000  # librdkafka's batch.size: under Kafka's default max.message.bytes (1 MiB + 12)
_REQUEST_TIMEOUT_MS = 30_000
_BACKOFF_S = 0.1
_METADATA_MAX_AGE_S = 300.0  # Kafka's metadata.max.age.ms


def uses_produce_client(client_config: dict) -> bool:
    """Whether a task with these kafka.* settings produces through this client (else through librdkafka)."""
    return (speaks(client_config, _HONOURED | _NOT_APPLICABLE)
            and _acks(client_config) in ("all", "-1", "1")  # acks=0: no answer, which NodeClients would wait for
            and client_config.get("partitioner", "murmur2_random") in _MURMUR2
            and _codec_name(client_config) in codecs.CODEC_BY_NAME)


def _acks(client_config: dict) -> str:
    return str(client_config.get("acks", client_config.get("request.required.acks", "all"))).lower()


def _codec_name(client_config: dict) -> str:
    return str(client_config.get("compression.type", client_config.get("compression.codec", "none"))).lower()


def epoch_ms(column: pa.Array) -> pa.Array:
    """The `timestamp` column as epoch milliseconds (int64, null kept): a Spark timestamp, or a number."""
    if pa.types.is_timestamp(column.type):
        micros = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
        column = pc.floor(pc.divide(micros.cast(pa.float64()), 1000))
    return column.cast(pa.int64())


def _take(column: pa.Array | None, rows: np.ndarray | None) -> pa.Array | None:
    """The column's values at `rows` (None: all of them)."""
    return column if column is None or rows is None else column.take(rows)


class ColumnProducer:
    """An idempotent producer of Arrow columns, kept by a Python worker across its tasks."""

    def __init__(self, client_config: dict):
        self.acks = 1 if _acks(client_config) == "1" else -1
        self.codec = codecs.CODEC_BY_NAME[_codec_name(client_config)]
        self.idempotent = str(client_config.get("enable.idempotence", "true")).lower() != "false"
        self.batch_bytes = int(client_config.get("batch.size") or _BATCH_BYTES)
        self.timeout_s = int(client_config.get("delivery.timeout.ms") or client_config.get("message.timeout.ms")
                             or _DELIVERY_TIMEOUT_MS) / 1000
        self.loop = asyncio.new_event_loop()
        self.cluster = RemoteCluster(client_config.get("client.id") or "odradek-spark-sink",
                                     client_config["bootstrap.servers"], client_security(client_config),
                                     create_topics=True)
        self.producer: tuple[int, int] = (-1, -1)  # (id, epoch), asked for before the first write
        self.sequences: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, tuple[int, float]] = {}  # topic -> (count, when asked)
        self.leaders: dict[tuple[str, int], int] = {}
        self.unkeyed_turn = 0

    def write(self, batches: Iterable[pa.RecordBatch], topic_option: str | None) -> int:
        """Every row of the Arrow batches (Spark's sink columns: `value`, and optionally `key`, `headers`,
        `topic`, `partition`, `timestamp`), acknowledged by the partitions' leaders before it returns."""
        if self.idempotent and self.producer[0] < 0:
            self.producer = self._run(self._with_retries(self.cluster.init_producer_id, "a producer id"))
        written = 0
        in_flight: asyncio.Task | None = None
        try:
            for batch in batches:
                encoded = self._encode(batch, topic_option)
                if in_flight is not None:
                    self.loop.run_until_complete(in_flight)
                in_flight = self.loop.create_task(self._deliver(encoded))
                self.loop.run_until_complete(asyncio.sleep(0))  # sent now, acknowledged while the next is encoded
                written += batch.num_rows
            if in_flight is not None:
                self.loop.run_until_complete(in_flight)
                in_flight = None
        finally:
            if in_flight is not None:
                in_flight.cancel()
                with contextlib.suppress(BaseException):
                    self.loop.run_until_complete(in_flight)
        return written

    def close(self) -> None:
        self.loop.run_until_complete(self._close())
        self.loop.close()

    async def _close(self) -> None:
        self.cluster.close()
        await asyncio.sleep(0)  # lets the closed connections' tasks end

    def _run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def _encode(self, batch: pa.RecordBatch, topic_option: str | None) -> dict[tuple[str, int], list[Batch]]:
        columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        if topic_option is not None or "topic" not in columns:
            return self._encode_topic(topic_option, columns, None)
        topic_column = columns["topic"]
        if topic_column.null_count:
            raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
        encoded: dict[tuple[str, int], list[Batch]] = {}
        for topic in pc.unique(topic_column).to_pylist():
            rows = pc.indices_nonzero(pc.equal(topic_column, topic))
            encoded.update(self._encode_topic(topic, columns, rows))
        return encoded

    def _encode_topic(self, topic: str, columns: dict[str, pa.Array], rows: pa.Array | None
                      ) -> dict[tuple[str, int], list[Batch]]:
        """One topic's record batches of the batch's rows (`rows`: their indices; None: every row)."""
        if rows is not None:
            columns = {name: column.take(rows) for name, column in columns.items()}
        values = as_binary(columns["value"])
        keys = as_binary(columns["key"]) if "key" in columns else None
        count = self._partition_count(topic)
        placed = key_partitions(keys, count) if keys is not None else np.full(len(values), -1, np.int32)
        if "partition" in columns:
            explicit = columns["partition"]
            given = np.asarray(pc.fill_null(explicit, -1).cast(pa.int32()))
            if ((given < -1) | (given >= count)).any():
                raise ValueError(f"topic {topic} has no partition {int(given[(given < -1) | (given >= count)][0])}")
            placed = np.where(given >= 0, given, placed)
        if (placed < 0).any():
            self.unkeyed_turn = (self.unkeyed_turn + 1) % count
            placed[placed < 0] = self.unkeyed_turn
        stamps = self._timestamps(columns.get("timestamp"), len(values))
        headers = columns.get("headers")
        encoded = {}
        for partition in np.unique(placed).tolist():
            chosen = np.nonzero(placed == partition)[0]
            rows = None if len(chosen) == len(values) else chosen
            key = (topic, partition)
            sequence = self.sequences.get(key, 0) if self.idempotent else -1
            batches = build_batches(
                _take(keys, rows), _take(values, rows), _take(headers, rows), stamps[chosen],
                producer_id=self.producer[0], producer_epoch=self.producer[1], base_sequence=sequence,
                codec=self.codec, max_batch_bytes=self.batch_bytes)
            if self.idempotent:
                self.sequences[key] = increment_sequence(sequence, len(chosen))
            encoded[key] = batches
        return encoded

    @staticmethod
    def _timestamps(column: pa.Array | None, n: int) -> np.ndarray:
        """Each row's timestamp: the `timestamp` column's epoch milliseconds, now for null."""
        now = int(time.time() * 1000)
        if column is None:
            return np.full(n, now, np.int64)
        return np.asarray(pc.fill_null(epoch_ms(column), now))

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count, asked again after `_METADATA_MAX_AGE_S` (partitions may be added)."""
        count, asked_at = self.partition_counts.get(topic, (0, float("-inf")))
        if time.monotonic() - asked_at > _METADATA_MAX_AGE_S:
            metadata = self._run(self._with_retries(lambda: self.cluster.topic_metadata(topic), f"topic {topic}"))
            count = len(metadata["partitions"])
            self.partition_counts[topic] = (count, time.monotonic())
        return count

    async def _with_retries(self, ask, what: str):
        """ask() again after retriable errors and lost connections, until the delivery timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return await ask()
            except (KafkaError, OSError, TimeoutError) as exc:  # ConnectionError is an OSError
                code = getattr(exc, "code", None)
                final = isinstance(exc, AuthenticationError) or code is not None and code not in _RETRIABLE
                if final or time.monotonic() > deadline:
                    raise RuntimeError(f"cannot get {what}: {exc}") from None
                await asyncio.sleep(_BACKOFF_S)

    async def _deliver(self, encoded: dict[tuple[str, int], list[Batch]]) -> None:
        """Every partition's batches acknowledged in order, one per partition in a request (Kafka takes no
        more), sent again to the partition's current leader after retriable errors."""
        pending = {key: list(batches) for key, batches in encoded.items()}
        progress_at = time.monotonic()
        while pending:
            by_leader: dict[int, dict[tuple[str, int], bytes]] = {}
            for key, batches in pending.items():
                by_leader.setdefault(await self._leader(key), {})[key] = batches[0].data
            answers = await asyncio.gather(*(
                self.cluster.produce(leader, batches, acks=self.acks, timeout_ms=_REQUEST_TIMEOUT_MS)
                for leader, batches in by_leader.items()), return_exceptions=True)
            failure: BaseException | None = None
            for (leader, batches), answer in zip(by_leader.items(), answers, strict=True):
                if isinstance(answer, AuthenticationError):
                    raise RuntimeError(f"producing to node {leader}: {answer}") from None
                if not isinstance(answer, (dict, OSError, TimeoutError)):
                    raise answer
                if not isinstance(answer, dict):  # lost connection or no answer: the same bytes again
                    failure = answer
                    for key in batches:
                        self.leaders.pop(key, None)
                    continue
                for key, error in answer.items():
                    if error in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                        del pending[key][0]
                        if not pending[key]:
                            del pending[key]
                        progress_at = time.monotonic()
                    elif error in _RETRIABLE:
                        failure = KafkaError(error, f"produce to {key[0]}-{key[1]}")
                        self.leaders.pop(key, None)
                    else:
                        raise RuntimeError(f"producing to {key[0]}-{key[1]}: {error.name}")
                if batches.keys() - answer.keys():
                    raise RuntimeError(f"node {leader} did not answer for {sorted(batches.keys() - answer.keys())}")
            if failure is not None:
                if time.monotonic() - progress_at > self.timeout_s:
                    raise TimeoutError(f"{len(pending)} partitions' records not delivered within {self.timeout_s}s "
                                       f"(delivery.timeout.ms): {failure}")
                await asyncio.sleep(_BACKOFF_S)

    async def _leader(self, key: tuple[str, int]) -> int:
        if key not in self.leaders:
            leader = await self._with_retries(lambda: self.cluster.leader_of(*key), f"the leader of {key[0]}-{key[1]}")
            self.leaders[key] = leader[0]
        return self.leaders[key]
