"""The load sampler: every `balancer.sample.interval.ms` a node publishes a sample of its own load to the
internal topic `__balancer_samples`, where the load monitor (balancer/load_monitor.py) reads it, as Cruise
Control's metrics reporter publishes to `__CruiseControlMetrics`.

A sample (`NodeSample`) is the node's id and rack, the interval it covers (wall-clock ms, from the previous
sample's end; the first from the node's start), each online log dir (path, capacity and usable bytes of its
file system, bytes of partition logs in it), and a row per partition replica the node hosts: its log dir,
size on disk, whether the node leads it, and what its counters gained over the interval (bytes produced and
fetched by consumers, produce and fetch requests; metrics/partition_counters.py). Counts are sent, not
rates: the monitor divides them by the time they cover, so a lost sample loses data but skews nothing.

On the wire a sample is compact JSON, one or more records of at most PARTITIONS_PER_RECORD rows (each record
repeats the header and the log dirs, so any record stands alone), keyed by the node id and compressed by the
producer:

    {"v": 1, "node": 1, "rack": "a", "start": 1700000000000, "end": 1700000060000,
     "dirs": [["/data", capacity, usable, log_bytes]],          # capacity and usable null when unknown
     "topics": {"orders": [[index, dir_position, size, leader, bytes_in, bytes_out, produce, fetch], ...]}}

A row without counts ([index, dir_position, size, 0]) is a follower that served nothing in the interval.

Collecting reads the node's state on the event loop (a walk of the hosted partitions and one statvfs per log
dir: some 30 ms for 10,000 partitions); encoding and publishing run on a daemon thread with a confluent_kafka
producer connected to the node's inter-broker listener as the node itself (security/internal_client.py),
started with the first sample, so the event loop never waits on the cluster. When the thread falls behind,
the oldest unsent samples are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

from odradek.metrics.partition_counters import ZERO, CounterDelta, CounterDeltas

log = logging.getLogger(__name__)

SAMPLES_TOPIC = "__balancer_samples"
FORMAT_VERSION = 1
PARTITIONS_PER_RECORD = 2000
BACKLOG = 8  # samples waiting for the publishing thread; older ones are dropped
WRITE_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class LogDirSample:
    path: str
    capacity_bytes: int | None  # of the file system holding it; None when unknown
    usable_bytes: int | None
    log_bytes: int  # the partition logs in it


class ReplicaSample(NamedTuple):  # a tuple: made by the thousand on the event loop
    topic: str
    index: int
    log_dir: str
    size_bytes: int
    leader: bool
    counts: CounterDelta = ZERO


@dataclass(frozen=True)
class NodeSample:
    node: int
    rack: str | None
    start_ms: int
    end_ms: int
    log_dirs: tuple[LogDirSample, ...]
    replicas: tuple[ReplicaSample, ...]


def encode_sample(sample: NodeSample, per_record: int = PARTITIONS_PER_RECORD) -> list[bytes]:
    """The sample as one or more record values (at least one, even with no replicas)."""
    positions = {d.path: i for i, d in enumerate(sample.log_dirs)}
    dirs = [[d.path, d.capacity_bytes, d.usable_bytes, d.log_bytes] for d in sample.log_dirs]
    header = {"v": FORMAT_VERSION, "node": sample.node, "rack": sample.rack, "start": sample.start_ms,
              "end": sample.end_ms, "dirs": dirs}
    values = []
    replicas = sample.replicas
    for first in range(0, max(1, len(replicas)), per_record):
        topics: dict[str, list] = {}
        for r in replicas[first:first + per_record]:
            row = [r.index, positions.get(r.log_dir, -1), r.size_bytes, int(r.leader)]
            c = r.counts
            if r.leader or c is not ZERO:
                row += [c.bytes_in, c.bytes_out, c.produce_requests, c.fetch_requests]
            topics.setdefault(r.topic, []).append(row)
        values.append(json.dumps({**header, "topics": topics}, separators=(",", ":")).encode())
    return values


def decode_sample(value: bytes) -> NodeSample | None:
    """A record value of `__balancer_samples` (one part of a sample); None for a version this code does not
    know or a value that is not a sample."""
    try:
        data = json.loads(value)
        if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION:
            return None
        dirs = tuple(LogDirSample(path, capacity, usable, log_bytes)
                     for path, capacity, usable, log_bytes in data["dirs"])
        replicas = []
        for topic, rows in data["topics"].items():
            for row in rows:
                index, position, size, leader = row[:4]
                counts = CounterDelta(*row[4:8]) if len(row) >= 8 else ZERO
                log_dir = dirs[position].path if 0 <= position < len(dirs) else ""
                replicas.append(ReplicaSample(topic, index, log_dir, size, bool(leader), counts))
        return NodeSample(int(data["node"]), data.get("rack"), int(data["start"]), int(data["end"]), dirs,
                          tuple(replicas))
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def wall_ms() -> int:
    return int(time.time() * 1000)


class LoadSampler:
    """Samples a broker's load every `balancer.sample.interval.ms` and publishes it (see the module docstring).
    `run()` is a task of the node; `close()` stops the publishing thread."""

    def __init__(self, node):
        self.node = node
        self.interval_ms = node.config["balancer.sample.interval.ms"]
        self.window_ms = node.config["balancer.window.ms"]
        self.deltas = CounterDeltas()
        self.started_ms = wall_ms()
        self.samples_sent = self.samples_dropped = 0
        self._queue: queue.Queue = queue.Queue(BACKLOG)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    async def run(self) -> None:
        start = self.started_ms
        while not self._closed.is_set():
            # bounded by the interval: a wall clock set back does not stop sampling
            await asyncio.sleep(min(self.interval_ms, max(0, start + self.interval_ms - wall_ms())) / 1000)
            end = wall_ms()
            try:
                sample = self.collect(start, end)
            except Exception:  # noqa: BLE001 - a sampling bug must not end the node's task
                log.exception("Sampling this node's load failed")
                start = end
                continue
            start = end
            if self._thread is None:  # started with the first sample: nothing to pay before
                self._thread = threading.Thread(target=self._publish, name="balancer-sampler", daemon=True)
                self._thread.start()
            self._offer(sample)  # encoded on the publishing thread

    def collect(self, start_ms: int, end_ms: int) -> NodeSample:
        """The node's load now, with the counters' gains since the previous collect."""
        node = self.node
        log_manager, replicas = node.log_manager, node.replicas
        deltas = self.deltas.take(replicas.partition_counters)
        rows, dir_bytes = [], {}
        for key, partition in list(replicas.partitions.items()):
            topic, index = key
            if log_manager.is_offline(topic, index):
                continue
            log_ = partition.log
            directory = log_manager.dir_of(log_)
            size = log_.size_in_bytes()
            dir_bytes[directory] = dir_bytes.get(directory, 0) + size
            rows.append(ReplicaSample(topic, index, directory, size, partition.is_leader, deltas.get(key, ZERO)))
        replicas.partition_counters.prune(replicas.partitions)
        dirs = []
        for directory in log_manager.log_dirs:
            if directory in log_manager.offline_dirs:
                continue
            try:
                stats = os.statvfs(directory)
                capacity, usable = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
            except OSError:
                capacity = usable = None
            dirs.append(LogDirSample(directory, capacity, usable, dir_bytes.get(directory, 0)))
        rows.sort(key=lambda r: (r.topic, r.index))
        return NodeSample(node.node_id, node.config["broker.rack"], start_ms, end_ms, tuple(dirs), tuple(rows))

    def _offer(self, sample: NodeSample) -> None:
        while True:
            try:
                self._queue.put_nowait(sample)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self.samples_dropped += 1
                except queue.Empty:
                    pass

    def close(self) -> None:
        """Stop sampling; the publishing thread sends what it holds (briefly) and closes its producer, before
        the node closes its listeners."""
        self._closed.set()
        if self._thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)  # wakes the thread
            self._thread.join(timeout=2.0)

    # the publishing thread

    def _publish(self) -> None:
        from confluent_kafka import KafkaException, Producer

        from odradek.security.internal_client import internal_client_properties

        producer, topic_ready, failing = None, False, False
        try:
            bootstrap, properties = internal_client_properties(self.node.config)
            properties = {**properties, "bootstrap.servers": bootstrap}
        except Exception:  # noqa: BLE001 - a controller-only node, or settings the client cannot use
            log.exception("The balancer's load sampler cannot connect to this node; sampling stops")
            return
        key = str(self.node.node_id).encode()
        while not self._closed.is_set():
            try:
                sample = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if sample is None:
                break
            try:
                if not topic_ready:
                    ensure_samples_topic(properties, self.window_ms)
                    topic_ready = True
                if producer is None:
                    producer = Producer({**properties, "compression.type": "zstd", "linger.ms": 50,
                                         "log.connection.close": False,
                                         "client.id": f"odradek-balancer-sampler-{self.node.node_id}"})
                errors: list = []
                delivered = functools.partial(_note_error, errors)
                for value in encode_sample(sample):
                    producer.produce(SAMPLES_TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
                if producer.flush(WRITE_TIMEOUT_S) or errors:
                    raise KafkaException(errors[0] if errors else "timed out")
                self.samples_sent += 1
                if failing:
                    log.info("The balancer's load sampler publishes again")
                failing = False
            except Exception as exc:  # noqa: BLE001 - the cluster may be starting or unavailable: try again
                self.samples_dropped += 1
                if not failing:
                    log.warning("The balancer's load sampler could not publish a sample to %s: %s", SAMPLES_TOPIC, exc)
                failing = True
        if producer is not None:
            producer.flush(0.5)


def _note_error(errors: list, error, _message) -> None:
    if error is not None:
        errors.append(error)


def ensure_samples_topic(properties: dict, window_ms: int) -> None:
    """Create `__balancer_samples` unless it exists: one partition, deleted after twice the window, replicated
    on min(3, nodes)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(properties)
    metadata = admin.list_topics(timeout=10)
    if SAMPLES_TOPIC in metadata.topics and not metadata.topics[SAMPLES_TOPIC].error:
        return
    topic = NewTopic(SAMPLES_TOPIC, 1, min(3, max(1, len(metadata.brokers))),
                     config={"cleanup.policy": "delete", "retention.ms": str(2 * window_ms)})
    try:
        admin.create_topics([topic])[SAMPLES_TOPIC].result(WRITE_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
