"""A read task's offset range through Odradek's own consumer Fetch requests (network/remote_cluster.py), its
records decoded into Arrow columns by record_columns.py.

A task reads one partition from a known start to a known end, so it needs no consumer group, no offset
commits and no prefetch policy: it asks the partition's leader for the next offsets, one request in flight
while Spark takes the last answer's records, until the range is read. A leader change, a lost connection or
a node that is not ready is retried against the leader the metadata names then, until the source's
`kafkaConsumer.pollTimeoutMs` passes without progress; refused credentials fail the task at once.

The client speaks what `client_security` speaks: plaintext, TLS, SASL PLAIN and SCRAM. A task whose `kafka.*`
options name anything else (GSSAPI or OAUTHBEARER, a PKCS#12 keystore, a librdkafka tuning) reads through
librdkafka instead (`uses_fetch_client`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator

from odradek.network.client import AuthenticationError
from odradek.network.remote_cluster import READ_COMMITTED, READ_UNCOMMITTED, RemoteCluster
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.client_properties import client_security, speaks
from odradek.spark.record_columns import AbortedTransactions, Columns, read_columns

# The kafka.* settings this client honours, and those that mean nothing to it: a consumer group's, librdkafka's
# prefetch queue's, and librdkafka's pacing of reconnections and metadata refreshes (this client retries on
# its own schedule).
_HONOURED = frozenset({
    "bootstrap.servers", "client.id", "isolation.level", "fetch.message.max.bytes", "max.partition.fetch.bytes"})
_NOT_APPLICABLE = frozenset({
    "group.id", "auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof",
    "queued.min.messages", "queued.max.messages.kbytes", "fetch.queue.backoff.ms", "fetch.wait.max.ms",
    "fetch.min.bytes", "fetch.max.bytes", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms",
    "socket.connection.setup.timeout.ms", "topic.metadata.refresh.interval.ms"})
# Errors after which the partition's leader is looked up again and the fetch retried.
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.OFFSET_NOT_AVAILABLE})
_PARTITION_MAX_BYTES = 8 << 20
_WAIT_MS = 500  # for records past the last answer's: the range's end is at most the high watermark
_BACKOFF_S = 0.1
_LOG_END_GRACE_S = 3.0


def uses_fetch_client(client_config: dict) -> bool:
    """Whether a task with these kafka.* settings reads through this client (else through librdkafka)."""
    return speaks(client_config, _HONOURED | _NOT_APPLICABLE)


def fetch_range(client_config: dict, topic: str, partition: int, start: int, end: int, *, include_headers: bool,
                timeout_s: float, on_lost: Callable[[str], None]) -> Iterator[list[Columns]]:
    """The records of offsets [start, end) of topic-partition, an answer's worth at a time. Offsets gone from
    the log's start are reported to `on_lost` (which raises unless the query skips lost offsets), and reading
    goes on from the log start; a log that ends before `end` is reported there too, and reading stops."""
    read_committed = client_config.get("isolation.level") == "read_committed"
    partition_max_bytes = int(client_config.get("max.partition.fetch.bytes")
                              or client_config.get("fetch.message.max.bytes") or _PARTITION_MAX_BYTES)
    loop = asyncio.new_event_loop()
    cluster = RemoteCluster(client_config.get("client.id") or "odradek-spark-source",
                            client_config["bootstrap.servers"], client_security(client_config))
    leader: tuple[int, int] | None = None  # (node id, leader epoch)
    name = f"{topic}-{partition}"

    def fetch(offset: int) -> asyncio.Task:
        return loop.create_task(cluster.fetch(
            leader[0], topic, partition, offset, leader[1], max_bytes=partition_max_bytes, wait_ms=_WAIT_MS,
            isolation_level=READ_COMMITTED if read_committed else READ_UNCOMMITTED))

    position = start
    progress_at = time.monotonic()
    ended_at: float | None = None  # when the log first ended before the range
    in_flight: asyncio.Task | None = None
    try:
        while position < end:
            try:
                if leader is None:
                    leader = loop.run_until_complete(cluster.leader_of(topic, partition))[:2]
                data = loop.run_until_complete(in_flight or fetch(position))
                in_flight = None
                error = ErrorCode(data["error_code"])
                if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    position = _after_out_of_range(loop, cluster, leader, topic, partition, position, end, on_lost)
                    continue
                if error != ErrorCode.NONE:
                    raise KafkaError(error, f"fetch of {name} at offset {position}")
            except AuthenticationError as exc:  # librdkafka and Kafka's Java consumer fail at once too
                raise RuntimeError(f"reading {name}: {exc}") from None
            except (KafkaError, OSError, TimeoutError) as exc:  # ConnectionError is an OSError
                code = getattr(exc, "code", None)
                if code is not None and code not in _RETRIABLE:
                    raise RuntimeError(f"reading {name}: {code.name}") from None
                _check_progress(progress_at, timeout_s, name, position, exc)
                in_flight, leader = None, None
                time.sleep(_BACKOFF_S)
                continue
            records = data["records"] or b""
            aborted = AbortedTransactions(data["aborted_transactions"]) if read_committed else None
            columns, next_position = read_columns(records, position, end, aborted, include_headers)
            if next_position > position:
                position, progress_at, ended_at = next_position, time.monotonic(), None
            else:
                log_end = data["last_stable_offset"] if read_committed else data["high_watermark"]
                if 0 <= log_end <= position:
                    # A new leader's high watermark can trail the old one's for a moment: the end is a loss
                    # only if it stays, asked again of the leader the metadata names then.
                    ended_at = ended_at or time.monotonic()
                    if time.monotonic() - ended_at > _LOG_END_GRACE_S:
                        on_lost(f"{name} ends at {log_end}, before the query's end offset {end}")
                        return
                    in_flight, leader = None, None
                    time.sleep(_BACKOFF_S)
                    continue
                _check_progress(progress_at, timeout_s, name, position)
                time.sleep(_BACKOFF_S)
                continue
            if position < end:
                in_flight = fetch(position)  # sent now, answered while Spark takes these records
                loop.run_until_complete(asyncio.sleep(0))
            if columns:
                yield columns
    finally:
        loop.run_until_complete(_close(cluster, in_flight))
        loop.close()


def _check_progress(progress_at: float, timeout_s: float, name: str, position: int,
                    cause: Exception | None = None) -> None:
    """TimeoutError once `timeout_s` passed since the range last moved on."""
    if time.monotonic() - progress_at > timeout_s:
        raise TimeoutError(f"no record of {name} after offset {position} within {timeout_s}s "
                           f"(kafkaConsumer.pollTimeoutMs){f': {cause}' if cause else ''}") from None


async def _close(cluster: RemoteCluster, in_flight: asyncio.Task | None) -> None:
    """Ends what the loop still runs: a fetch in flight (a task stopped early), the connections' read loops."""
    if in_flight is not None:
        in_flight.cancel()
        with contextlib.suppress(BaseException):  # its cancellation, or the failure it had already met
            await in_flight
    cluster.close()
    await asyncio.sleep(0)  # lets the closed connections' tasks end


def _after_out_of_range(loop, cluster: RemoteCluster, leader: tuple[int, int], topic: str, partition: int,
                        position: int, end: int, on_lost: Callable[[str], None]) -> int:
    """Where to read on when `position` is out of the log's range: from its start, after reporting the lost
    offsets, or nowhere (the range's end) when the log ends before `position`."""
    low = loop.run_until_complete(cluster.earliest_offset(leader[0], topic, partition, leader[1]))
    if position < low:
        on_lost(f"offsets {position} to {min(low, end) - 1} of {topic}-{partition} are gone: the log starts at {low}")
        return low
    on_lost(f"{topic}-{partition} ends before offset {position}, before the query's end offset {end}")
    return end
