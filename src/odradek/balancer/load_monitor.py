"""The load monitor: the nodes' load samples (balancer/sampler.py) kept over a window, and the balancer's
ClusterModel built from them and the cluster's metadata, as Cruise Control's load monitor builds its cluster
model from its metric samples.

    monitor = LoadMonitor(window_ms=3_600_000)
    for sample in samples:                      # NodeSample, e.g. read_samples(...) from __balancer_samples
        monitor.add(sample)
    built = build_model(metadata_from_image(image), monitor, now_ms)
    built.coverage.check(0.95)                  # BalancerError when too few partitions have been sampled
    proposal = propose(built.model)

The core (LoadMonitor, build_model) is sans-I/O: it takes samples and the current time. `read_samples` is the
reader: a confluent_kafka consumer of `__balancer_samples` from the start of the window to its end.

**Windowing.** Counts are kept in buckets of window/12 (5 minutes of the default hour), by the end of the
sample's interval; a bucket leaves once it ends before now - window, so old samples fall out whole buckets
at a time. A partition's rate is what its leaders counted in the window over the time their samples cover
(not over the whole window, so a partition sampled for ten minutes is not averaged as if idle for fifty):
a burst of a minute inside an hour of steady traffic moves the average by a sixtieth of the burst.

**Coverage.** A partition is *sampled* when the window holds at least `min_samples` samples from a node
leading it; the others get zero rates (their size is still the latest any replica reported). The model comes
with its `LoadCoverage`, so a caller refuses to balance on too little data, as Cruise Control does when it
has "not enough valid windows": `coverage.check(min_ratio)`.

**Metadata.** `build_model` takes placement as plain data (`ClusterMetadata`: nodes with their racks and
liveness, partitions with replicas, leader and in-sync replicas); `metadata_from_image` makes it from
Odradek's MetadataImage (a fenced broker is not alive), `metadata_from_client` from a confluent_kafka
ClusterMetadata (the listed brokers are alive; racks come from the samples, as librdkafka does not give them).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.balancer.model import BalancerError, ClusterModel, LogDir, Node, Partition
from odradek.balancer.sampler import SAMPLES_TOPIC, LogDirSample, NodeSample, decode_sample

BUCKETS = 12
# per partition and bucket: covered ms, bytes in, bytes out, produce requests, fetch requests, leader samples
COVERED, BYTES_IN, BYTES_OUT, PRODUCE, FETCH, SAMPLES = range(6)


@dataclass(frozen=True)
class PartitionLoad:
    """A partition's averaged rates over the window (bytes/s, requests/s) and how well they are known."""

    bytes_in: float = 0.0
    bytes_out: float = 0.0
    produce_requests: float = 0.0
    fetch_requests: float = 0.0
    covered_ms: int = 0
    samples: int = 0


NO_LOAD = PartitionLoad()


@dataclass(frozen=True)
class ReplicaState:
    """The latest a node reported of its replica of a partition."""

    end_ms: int
    log_dir: str
    size_bytes: int


@dataclass(frozen=True)
class NodeState:
    end_ms: int
    rack: str | None
    log_dirs: tuple[LogDirSample, ...]


class LoadMonitor:
    def __init__(self, window_ms: int = 3_600_000, buckets: int = BUCKETS):
        if window_ms <= 0 or buckets <= 0:
            raise ValueError("the window and its bucket count must be positive")
        self.window_ms = window_ms
        self.bucket_ms = max(1, window_ms // buckets)
        self._buckets: dict[int, dict[tuple[str, int], list]] = {}
        self.replicas: dict[tuple[str, int], dict[int, ReplicaState]] = {}
        self.nodes: dict[int, NodeState] = {}
        self.latest_ms = 0  # the latest sample end seen

    def add(self, sample: NodeSample) -> None:
        """One sample (or one record of a sample) of a node."""
        self.latest_ms = max(self.latest_ms, sample.end_ms)
        known = self.nodes.get(sample.node)
        if known is None or known.end_ms <= sample.end_ms:
            self.nodes[sample.node] = NodeState(sample.end_ms, sample.rack, sample.log_dirs)
        duration = max(0, sample.end_ms - sample.start_ms)
        bucket = self._buckets.setdefault(sample.end_ms // self.bucket_ms, {})
        for r in sample.replicas:
            key = (r.topic, r.index)
            replicas = self.replicas.setdefault(key, {})
            state = replicas.get(sample.node)
            if state is None or state.end_ms <= sample.end_ms:
                replicas[sample.node] = ReplicaState(sample.end_ms, r.log_dir, r.size_bytes)
            c = r.counts
            if not r.leader and not (c.bytes_in or c.bytes_out or c.produce_requests or c.fetch_requests):
                continue
            totals = bucket.get(key)
            if totals is None:
                totals = bucket[key] = [0, 0, 0, 0, 0, 0]
            totals[BYTES_IN] += c.bytes_in
            totals[BYTES_OUT] += c.bytes_out
            totals[PRODUCE] += c.produce_requests
            totals[FETCH] += c.fetch_requests
            if r.leader:  # a former leader's counts add load, but only a leader's interval says it was watched
                totals[COVERED] += duration
                totals[SAMPLES] += 1

    def expire(self, now_ms: int) -> None:
        """Forget the buckets wholly before the window, and replicas and nodes not reported in it."""
        first = self._first_bucket(now_ms)
        for b in [b for b in self._buckets if b < first]:
            del self._buckets[b]
        oldest = now_ms - self.window_ms
        for key in list(self.replicas):
            states = self.replicas[key]
            for node in [n for n, s in states.items() if s.end_ms < oldest]:
                del states[node]
            if not states:
                del self.replicas[key]
        for node in [n for n, s in self.nodes.items() if s.end_ms < oldest]:
            del self.nodes[node]

    def _first_bucket(self, now_ms: int) -> int:
        return (now_ms - self.window_ms) // self.bucket_ms + 1

    def loads(self, now_ms: int) -> dict[tuple[str, int], PartitionLoad]:
        """Every partition's averaged load over the window ending at now_ms (those with counts in it)."""
        first = self._first_bucket(now_ms)
        sums: dict[tuple[str, int], list] = {}
        for b, bucket in self._buckets.items():
            if b < first or b * self.bucket_ms > now_ms:
                continue
            for key, totals in bucket.items():
                acc = sums.get(key)
                if acc is None:
                    sums[key] = list(totals)
                else:
                    for i in range(6):
                        acc[i] += totals[i]
        loads = {}
        for key, (covered, bytes_in, bytes_out, produce, fetch, samples) in sums.items():
            if covered <= 0:
                loads[key] = PartitionLoad(samples=samples)
                continue
            per_s = 1000.0 / covered
            loads[key] = PartitionLoad(bytes_in * per_s, bytes_out * per_s, produce * per_s, fetch * per_s,
                                       covered, samples)
        return loads

    def partition_load(self, topic: str, index: int, now_ms: int) -> PartitionLoad:
        return self.loads(now_ms).get((topic, index), NO_LOAD)


@dataclass(frozen=True)
class PartitionPlacement:
    topic: str
    index: int
    replicas: tuple[int, ...]
    leader: int | None  # None: offline
    in_sync: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    """What build_model needs of the cluster's metadata, as plain data: the nodes (id -> rack, None when it
    has none or it is unknown), which of them are alive, and every partition's placement."""

    nodes: Mapping[int, str | None]
    alive: frozenset[int]
    partitions: tuple[PartitionPlacement, ...]


def metadata_from_image(image) -> ClusterMetadata:
    """From Odradek's MetadataImage: registered brokers with their racks; a fenced broker is not alive."""
    nodes = {b.broker_id: b.rack for b in image.brokers.values()}
    alive = frozenset(b.broker_id for b in image.brokers.values() if not b.fenced)
    partitions = []
    for name in sorted(image.topics):
        for index in sorted(image.topics[name].partitions):
            p = image.topics[name].partitions[index]
            for node in p.replicas:
                nodes.setdefault(node, None)
            partitions.append(PartitionPlacement(name, index, tuple(p.replicas), p.leader if p.leader >= 0 else None,
                                                 tuple(p.isr)))
    return ClusterMetadata(nodes, alive, tuple(partitions))


def metadata_from_client(metadata, racks: Mapping[int, str | None] | None = None) -> ClusterMetadata:
    """From a confluent_kafka ClusterMetadata (AdminClient.list_topics): the brokers it lists are alive;
    racks from `racks` (e.g. the monitor's samples: {n: s.rack for n, s in monitor.nodes.items()})."""
    racks = racks or {}
    nodes = {b: racks.get(b) for b in metadata.brokers}
    alive = frozenset(metadata.brokers)
    partitions = []
    for name in sorted(metadata.topics):
        topic = metadata.topics[name]
        if topic.error is not None:
            continue
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            for node in p.replicas:
                nodes.setdefault(node, racks.get(node))
            partitions.append(PartitionPlacement(name, index, tuple(p.replicas), p.leader if p.leader >= 0 else None,
                                                 tuple(p.isrs)))
    return ClusterMetadata(nodes, alive, tuple(partitions))


@dataclass(frozen=True)
class LoadCoverage:
    """How many of the model's partitions have been sampled in the window (see the module docstring)."""

    partitions: int
    sampled: int
    unsampled_partitions: tuple[str, ...]  # names, at most 20, for a message

    @property
    def unsampled(self) -> int:
        return self.partitions - self.sampled

    @property
    def ratio(self) -> float:
        return 1.0 if self.partitions == 0 else self.sampled / self.partitions

    def enough(self, min_ratio: float) -> bool:
        return self.ratio >= min_ratio

    def check(self, min_ratio: float) -> None:
        """BalancerError unless at least min_ratio of the partitions are sampled."""
        if not self.enough(min_ratio):
            some = ", ".join(self.unsampled_partitions[:5])
            raise BalancerError(f"not enough load samples: {self.sampled} of {self.partitions} partitions sampled "
                                f"({self.ratio:.0%}), at least {min_ratio:.0%} needed (unsampled: {some}"
                                f"{', ...' if self.unsampled > 5 else ''})")


@dataclass(frozen=True)
class BuiltModel:
    model: ClusterModel
    coverage: LoadCoverage


def build_model(metadata: ClusterMetadata, monitor: LoadMonitor, now_ms: int, *, min_samples: int = 1,
                racks: Mapping[int, str | None] | None = None) -> BuiltModel:
    """The ClusterModel of `metadata` with the monitor's load over the window ending at now_ms. A node's log
    dirs and their capacities are those of its latest sample (none yet: one unknown dir of unknown capacity);
    a replica's log dir is the one its node reported (else its node's first); a partition's size is the
    latest its leader reported (else the largest any replica reported; 0 when none did). `racks` overrides
    the metadata's, and a node without a rack there takes the one of its samples."""
    loads = monitor.loads(now_ms)
    racks = racks or {}
    nodes = []
    for node_id in sorted(metadata.nodes):
        state = monitor.nodes.get(node_id)
        rack = racks.get(node_id, metadata.nodes[node_id])
        if rack is None and state is not None:
            rack = state.rack
        log_dirs = tuple(LogDir(d.path, d.capacity_bytes) for d in state.log_dirs) if state and state.log_dirs \
            else (LogDir(""),)
        nodes.append(Node(node_id, rack=rack, alive=node_id in metadata.alive, log_dirs=log_dirs))
    dirs_of = {n.id: {d.path for d in n.log_dirs} for n in nodes}
    first_dir = {n.id: n.log_dirs[0].path for n in nodes}
    partitions, sampled, unsampled = [], 0, []
    for p in metadata.partitions:
        key = (p.topic, p.index)
        reported = monitor.replicas.get(key, {})
        if p.leader in reported:
            size = reported[p.leader].size_bytes
        else:
            size = max((s.size_bytes for n, s in reported.items() if n in p.replicas), default=0)
        log_dirs = tuple(reported[n].log_dir if n in reported and reported[n].log_dir in dirs_of[n] else first_dir[n]
                         for n in p.replicas)
        load = loads.get(key, NO_LOAD)
        if load.samples >= min_samples and load.covered_ms > 0:
            sampled += 1
        else:
            load = NO_LOAD
            if len(unsampled) < 20:
                unsampled.append(f"{p.topic}-{p.index}")
        partitions.append(Partition(p.topic, p.index, p.replicas, p.leader, size_bytes=size,
                                    bytes_in=load.bytes_in, bytes_out=load.bytes_out,
                                    produce_requests=load.produce_requests, fetch_requests=load.fetch_requests,
                                    in_sync=p.in_sync, log_dirs=log_dirs))
    coverage = LoadCoverage(len(partitions), sampled, tuple(unsampled))
    return BuiltModel(ClusterModel(tuple(nodes), tuple(partitions)), coverage)


def read_samples(client_properties: dict, monitor: LoadMonitor, timeout_s: float = 30.0,
                 now_ms: int | None = None) -> int:
    """Read `__balancer_samples` from the start of the monitor's window to its current end into `monitor`
    (client_properties: librdkafka properties with bootstrap.servers); the number of records read. Raises
    KafkaException when the topic cannot be read within timeout_s."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    consumer = Consumer({**client_properties, "group.id": "odradek-balancer-load-monitor",
                         "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + timeout_s
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(SAMPLES_TOPIC, 0), timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                                      KafkaError._UNKNOWN_PARTITION):
                return 0  # no node has sampled yet
            raise
        if high <= low:
            return 0
        (start,) = consumer.offsets_for_times([TopicPartition(SAMPLES_TOPIC, 0, now_ms - monitor.window_ms)],
                                              timeout=timeout_s)
        if start.offset < 0:  # nothing as recent as the window's start
            return 0
        offset = start.offset
        consumer.assign([TopicPartition(SAMPLES_TOPIC, 0, offset)])
        read = 0
        position = offset
        while position < high:
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading {SAMPLES_TOPIC}"))
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            position = message.offset() + 1
            sample = decode_sample(message.value())
            if sample is not None:
                monitor.add(sample)
                read += 1
        monitor.expire(now_ms)
        return read
    finally:
        consumer.close()
