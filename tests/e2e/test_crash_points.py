"""kill -9 at 20 seeded random moments (a new seed each run) while one node produces, rolls, retains and
compacts at once.

One node process hosts four single-partition topics, each loaded by its own confluent-kafka producer
(acks=all, retries=0, idempotence off: every acknowledgement names the one offset its record got):

* `stream`    - a plain stream (the small test segment size still rolls it now and then);
* `rolling`   - larger records and segment.ms=20: it rolls a segment every few appends;
* `retained`  - retention.bytes and retention.ms small, checked every 100 ms from the start: retention
  deletes its oldest segments all the time;
* `compacted` - cleanup.policy=compact with tombstones, dirty ratio 0.01, max.compaction.lag.ms 1 s, cleaner
  backoff 50 ms and short delete.retention.ms: the cleaner rewrites it (and drops tombstones) constantly.

The node is killed with SIGKILL after a seeded random 0.1-0.6 s of load and restarted on the same data
dir. A quarter of the kills come after an idle spell instead, so that background work alone (a roll by
segment.ms, a retention pass, a cleaning, a delayed file deletion) is interrupted; the live node is
checked at the start of that spell, when retention and the cleaner have had their turn, which right
after a restart they have not. After every restart (and in those spells) a consumer with check.crcs=True
reads what is new (and all of `retained` and `compacted`) and checks, with no consumer error other than
end-of-partition:

* every topic: the high watermark covers every acknowledged offset and never goes back; the log start
  never goes back; a record once read never changes at its offset; every record is one that was written,
  at most once, in the order written;
* `stream`, `rolling`: offsets [0, high watermark) all present, each acknowledged offset holds exactly the
  acknowledged record; a ListOffsets by timestamp answers the first offset at or after that time (the time
  index survived or was rebuilt);
* `retained`: [log start, high watermark) contiguous and equal to what was acknowledged there; ListOffsets
  earliest is the base offset of a segment on disk and the first record fetched from it is at that
  offset (a fetch may only skip ahead when the node answers OFFSET_OUT_OF_RANGE because retention moved
  the log start meanwhile);
* `compacted`: offsets strictly increase; per key the latest record is at or after the last update known
  to have landed (acknowledged, or read earlier); a key is absent only if a tombstone for it was written
  after that update.

At the end: one more load, a clean stop and start (with the retention of `retained` lifted first, so
that it stays put while read twice), and the same checks over the whole of every log, fetches from
random offsets, ListOffsets by time, and kcat as a second client reading every batch; the cleaner
converges to one record per key; the node logged no error; and the work was really done (segments
rolled, log start > 0, fewer records than updates in `compacted`).

Replay a failure with `pytest tests/e2e/test_crash_points.py --seed N`: the crash schedule (run times,
idle spells) and each topic's record sizes, keys and tombstones come from the seed; how many records fit
in each run, and so which operation a kill interrupts, still depends on timing.
"""

import random
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

CRASHES = 20
NODE_SETTINGS = {
    "log.retention.check.interval.ms": "100",
    "log.initial.task.delay.ms": "0",  # retention right after every restart, where recovery just ran
    "log.cleaner.backoff.ms": "50",
    "log.segment.delete.delay.ms": "200",  # `.deleted` files linger, so kills find some
    "offsets.topic.num.partitions": "1",  # the check consumers' group coordinator: not 50 more logs to load
}
STREAM, ROLLING, RETAINED, COMPACTED = "stream", "rolling", "retained", "compacted"
SMALL_SEGMENTS = {"segment.bytes": "65536"}  # many small segments in every topic
TOPIC_CONFIGS = {
    STREAM: {},
    ROLLING: {"segment.ms": "20"},
    RETAINED: {"retention.bytes": "65536", "retention.ms": "2000", "segment.ms": "100"},
    # max.compaction.lag.ms: at the end the last rolled segment may hold one small batch, below even a
    # 0.01 dirty ratio of the cleaned log; the lag makes the cleaner take it anyway, as in Kafka
    COMPACTED: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "200",
                "max.compaction.lag.ms": "1000", "delete.retention.ms": "300"},
}
VALUE_SIZES = {STREAM: (10, 200), ROLLING: (200, 1500), RETAINED: (100, 800), COMPACTED: (10, 300)}
KEYS = 60
TOMBSTONE_CHANCE = 0.15
PRODUCER_SETTINGS = {"acks": "all", "retries": 0, "enable.idempotence": False, "linger.ms": 2,
                     "batch.num.messages": 200, "queue.buffering.max.messages": 2000,
                     "batch.size": 32768,  # a batch larger than a segment is refused (RECORD_LIST_TOO_LARGE)
                     "message.timeout.ms": 5000, "reconnect.backoff.max.ms": 100,
                     "log_level": 0}  # quiet: every kill makes librdkafka log refused connections
READ_TIMEOUT_S = 30


@dataclass
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass(repr=False)
class Workload:
    """One topic: what its producer wrote and had acknowledged, and what reads have seen in its log."""

    topic: str
    seed: int
    producer: Producer | None = None
    # sequence -> (key, value) of every record handed to the producer
    written: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)
    acked: dict[int, int] = field(default_factory=dict)  # offset -> sequence
    unchecked_acks: list[int] = field(default_factory=list)  # acknowledged offsets no read has checked yet
    seen: dict[int, Record] = field(default_factory=dict)  # offset -> record, every record ever read
    landed: dict[bytes | None, int] = field(default_factory=dict)  # key -> last offset acknowledged or read
    high_watermark: int = 0
    log_start: int = 0
    verified_end: int = 0  # stream, rolling: every offset below this was read and checked
    tombstone_sequences: dict[bytes, list[int]] = field(default_factory=lambda: defaultdict(list))
    failed_deliveries: list[KafkaError] = field(default_factory=list)  # since the producer was opened

    def on_delivery(self, sequence: int, err, msg) -> None:
        if err is not None:
            self.failed_deliveries.append(err)
        else:
            assert msg.offset() not in self.acked, \
                f"{self.topic}: offset {msg.offset()} acknowledged twice (seed {self.seed})"
            self.acked[msg.offset()] = sequence
            self.unchecked_acks.append(msg.offset())
            self.record_landed(msg.key(), msg.offset())

    def __repr__(self) -> str:  # pytest shows it in tracebacks: a summary, not 100,000 records
        return (f"Workload({self.topic}: {len(self.written)} written, {len(self.acked)} acknowledged, "
                f"{len(self.seen)} read, log {self.log_start}..{self.high_watermark})")

    def record_landed(self, key: bytes | None, offset: int) -> None:
        if offset > self.landed.get(key, -1):
            self.landed[key] = offset


def sequence_of(value: bytes) -> int:
    return int(value.split(b":", 1)[0])


class Load:
    """The four producers, fed round-robin from one thread; sequences are global, so they order all writes.

    Each topic draws the shape of its records (size, key, tombstone) from its own seeded stream, so the
    n-th record of a topic looks the same in every run of a seed, however the timing interleaves them.
    """

    def __init__(self, workloads: dict[str, Workload], seed: int):
        self.workloads = workloads
        self.shapes = {topic: self._shapes(topic, random.Random(f"{seed}-{topic}")) for topic in workloads}
        self.next_shape: dict[str, tuple[int, bytes | None, bool]] = {}
        self.sequence = 0

    @staticmethod
    def _shapes(topic: str, rng: random.Random):
        low, high = VALUE_SIZES[topic]
        while True:
            if topic == COMPACTED:
                key = f"k{rng.randrange(KEYS)}".encode()
                yield rng.randrange(low, high), key, rng.random() < TOMBSTONE_CHANCE
            else:
                yield rng.randrange(low, high), None, False

    def open(self, bootstrap: str) -> None:
        for workload in self.workloads.values():
            workload.producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS})
            workload.failed_deliveries.clear()

    def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for workload in self.workloads.values():
                self._produce_one(workload)
            for workload in self.workloads.values():
                workload.producer.poll(0)

    def _produce_one(self, workload: Workload) -> None:
        topic = workload.topic
        if topic not in self.next_shape:
            self.next_shape[topic] = next(self.shapes[topic])
        size, key, tombstone = self.next_shape[topic]
        sequence = self.sequence + 1
        value = None if tombstone else f"{sequence}:".encode() + b"v" * size
        try:
            workload.producer.produce(workload.topic, value, key=key,
                                      on_delivery=partial(workload.on_delivery, sequence))
        except BufferError:  # the node is slower than this loop: let the queue drain
            workload.producer.poll(0.001)
            return
        del self.next_shape[topic]
        self.sequence = sequence
        workload.written[sequence] = (key, value)
        if value is None:
            workload.tombstone_sequences[key].append(sequence)

    def abandon(self, context: str) -> None:
        """After a kill: drop what was never sent and collect the acknowledgements that did arrive.

        Writes cut off by the kill fail with client-side errors (negative codes: transport, purged);
        an error from the node itself means it refused a write before the kill."""
        for workload in self.workloads.values():
            workload.producer.purge(in_queue=True, in_flight=False)
        for workload in self.workloads.values():
            workload.producer.flush(10)
            workload.producer = None
            refused = [err for err in workload.failed_deliveries if err.code() >= 0]
            assert not refused, f"{workload.topic}: the node refused writes: {refused[:3]} ({context})"

    def finish(self, context: str) -> None:
        for workload in self.workloads.values():
            left = workload.producer.flush(30)
            assert left == 0, f"{workload.topic}: {left} records left undelivered on a live node ({context})"
            failed = workload.failed_deliveries
            assert not failed, f"{workload.topic}: writes failed on a live node: {failed[:3]} ({context})"
            workload.producer = None


def read(bootstrap: str, ranges: dict[str, tuple[int, int]], context: str) -> tuple[dict, dict]:
    """Records of each topic in [start, end), CRCs checked, plus the (from, to) skips of the `retained` read.

    A skip is allowed only where the node answers OFFSET_OUT_OF_RANGE and the log start then lies past
    the read position: retention deleted those records while they were being read.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check",
                         "enable.auto.commit": False, "enable.partition.eof": True, "check.crcs": True,
                         "auto.offset.reset": "error", "fetch.wait.max.ms": 20})
    records: dict[str, list[Record]] = {topic: [] for topic in ranges}
    skips: dict[str, list[tuple[int, int]]] = {topic: [] for topic in ranges}
    position = {topic: start for topic, (start, _) in ranges.items()}
    pending = {topic for topic, (start, end) in ranges.items() if start < end}
    try:
        consumer.assign([TopicPartition(topic, 0, position[topic]) for topic in pending])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while pending:
            assert time.monotonic() < deadline, \
                f"reads of {pending} did not reach the high watermark ({context})"
            for msg in consumer.consume(1000, 0.2):
                topic = msg.topic()
                end = ranges[topic][1]
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= end:
                        pending.discard(topic)
                    continue
                if error is not None and topic == RETAINED and error.code() in (
                        KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10,
                                                            cached=False)
                    assert low > position[topic], \
                        f"{topic}: offset {position[topic]} out of range, the log start is {low} ({context})"
                    skips[topic].append((position[topic], low))
                    position[topic] = low
                    consumer.incremental_unassign([TopicPartition(topic, 0)])
                    if low < end:
                        consumer.incremental_assign([TopicPartition(topic, 0, low)])
                    else:
                        pending.discard(topic)
                    continue
                assert error is None, f"{topic}: consumer error {error} ({context})"
                if topic not in pending:
                    continue
                records[topic].append(Record(msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
                position[topic] = msg.offset() + 1
                if msg.offset() + 1 >= end:
                    pending.discard(topic)
    finally:
        consumer.close()
    return records, skips


def watermarks(bootstrap: str, topics) -> dict[str, tuple[int, int]]:
    """ListOffsets earliest and latest of each topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check"})
    try:
        return {topic: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
                for topic in topics}
    finally:
        consumer.close()


def offset_for_time(bootstrap: str, topic: str, timestamp: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check"})
    try:
        return consumer.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=10)[0].offset
    finally:
        consumer.close()


def kcat_records(bootstrap: str, topic: str, context: str) -> list[Record]:
    """The whole of a topic as kcat (a second client, with its own fetch loop) reads it, CRCs checked."""
    result = subprocess.run(
        ["kcat", "-C", "-e", "-q", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
         "-X", "check.crcs=true", "-f", r"%o\t%K\t%k\t%S\t%s\t%T\n"],
        capture_output=True, timeout=60)
    assert result.returncode == 0 and b"ERROR" not in result.stderr, \
        f"kcat on {topic} exited {result.returncode}: {result.stderr.decode(errors='replace')} ({context})"
    records = []
    for line in result.stdout.decode().splitlines():
        offset, key_size, key, value_size, value, timestamp = line.split("\t")
        records.append(Record(int(offset), None if key_size == "-1" else key.encode(),
                              None if value_size == "-1" else value.encode(), int(timestamp)))
    return records


# ---- checks


def check_common(workload: Workload, records: list[Record], low: int, high: int, context: str) -> None:
    """What holds for every topic: watermarks only move forward, acknowledgements are under the high
    watermark, records are written ones in write order and never change once read."""
    topic = workload.topic
    assert low >= workload.log_start, \
        f"{topic}: log start went back from {workload.log_start} to {low} ({context})"
    assert high >= workload.high_watermark, \
        f"{topic}: high watermark went back from {workload.high_watermark} to {high} ({context})"
    if workload.landed:
        last = max(workload.landed.values())
        assert last < high, \
            f"{topic}: offset {last} was acknowledged or read, the high watermark is {high} ({context})"
    workload.log_start, workload.high_watermark = low, high
    previous_sequence = -1
    for record in records:
        assert low <= record.offset < high, \
            f"{topic}: offset {record.offset} outside {low}..{high} ({context})"
        if record.value is not None:
            sequence = sequence_of(record.value)
            assert workload.written.get(sequence) == (record.key, record.value), \
                f"{topic}: offset {record.offset} holds a record never written ({context})"
            assert sequence > previous_sequence, \
                f"{topic}: offset {record.offset} holds write {sequence}, " \
                f"after write {previous_sequence} ({context})"
            previous_sequence = sequence
        else:
            assert workload.tombstone_sequences.get(record.key), \
                f"{topic}: tombstone of {record.key!r} at {record.offset}, none was written ({context})"
        earlier = workload.seen.get(record.offset)
        assert earlier is None or (earlier.key, earlier.value) == (record.key, record.value), \
            f"{topic}: offset {record.offset} changed since it was last read ({context})"
        workload.seen[record.offset] = record
        workload.record_landed(record.key, record.offset)
        acked = workload.acked.get(record.offset)
        assert acked is None or workload.written[acked] == (record.key, record.value), \
            f"{topic}: offset {record.offset} does not hold the record acknowledged there ({context})"


def check_contiguous(topic: str, records: list[Record], start: int, end: int, skips: list[tuple[int, int]],
                     context: str) -> None:
    expected = start
    skips = dict(skips)
    for record in records:
        while expected in skips and record.offset != expected:
            expected = skips.pop(expected)
        assert record.offset == expected, \
            f"{topic}: offset {expected} is missing below the high watermark, " \
            f"next is {record.offset} ({context})"
        expected += 1
    while expected in skips:
        expected = skips.pop(expected)
    assert expected >= end, f"{topic}: offsets {expected}..{end - 1} are missing ({context})"


def check_acknowledged_present(workload: Workload, context: str) -> None:
    """Every acknowledgement not yet checked is at its offset, unless retention removed it since (the
    cleaner may remove acknowledged records too: check_compacted covers those)."""
    for offset in workload.unchecked_acks if workload.topic != COMPACTED else ():
        if offset < workload.log_start:
            assert workload.topic == RETAINED, \
                f"{workload.topic}: acknowledged offset {offset} is below the log start ({context})"
            continue
        record = workload.seen.get(offset)
        assert record is not None, \
            f"{workload.topic}: acknowledged offset {offset} was not read back ({context})"
        assert workload.written[workload.acked[offset]] == (record.key, record.value), \
            f"{workload.topic}: acknowledged offset {offset} holds another record ({context})"
    workload.unchecked_acks.clear()


def check_time_index(bootstrap: str, workload: Workload, rng: random.Random, samples: int,
                     context: str) -> None:
    """ListOffsets by timestamp finds the first offset with a timestamp at or after the one asked for."""
    offsets = sorted(workload.seen)
    if not offsets:
        return
    for _ in range(samples):
        timestamp = workload.seen[rng.choice(offsets)].timestamp
        expected = min(offset for offset in offsets if workload.seen[offset].timestamp >= timestamp)
        found = offset_for_time(bootstrap, workload.topic, timestamp)
        assert found == expected, \
            f"{workload.topic}: ListOffsets for time {timestamp} gave {found}, " \
            f"the first such offset is {expected} ({context})"


def check_compacted(workload: Workload, records: list[Record], context: str) -> None:
    """Per key, the log ends at or after the last update known to have landed (acknowledged or read);
    a key is absent only if a tombstone for it was written after that update."""
    topic = workload.topic
    offsets = [record.offset for record in records]
    assert offsets == sorted(set(offsets)), f"{topic}: offsets do not strictly increase ({context})"
    latest = {record.key: record.offset for record in records}
    for key, offset in workload.landed.items():
        if key in latest:
            assert latest[key] >= offset, \
                f"{topic}: {key!r} ends at offset {latest[key]}, offset {offset} landed later ({context})"
            continue
        if offset in workload.seen:
            value = workload.seen[offset].value
        else:
            value = workload.written[workload.acked[offset]][1]
        if value is None:
            continue  # its last known update is a tombstone, which the cleaner may drop
        later_tombstones = [s for s in workload.tombstone_sequences.get(key, ()) if s > sequence_of(value)]
        assert later_tombstones, \
            f"{topic}: {key!r} is gone, its last update (offset {offset}) was no tombstone ({context})"


def verify(node, workloads: dict[str, Workload], rng: random.Random, context: str,
           full: bool = False) -> None:
    """Read and check every topic: the new tail of the streams (all of them if `full`), all of the others."""
    retained_bases = segment_bases(node, RETAINED, with_deleted=True)
    marks = watermarks(node.bootstrap, workloads)
    retained_bases += segment_bases(node, RETAINED, with_deleted=True)  # retention may run meanwhile
    assert marks[RETAINED][0] in retained_bases, \
        f"{RETAINED}: ListOffsets earliest is {marks[RETAINED][0]}, no segment starts there ({context})"
    ranges = {}
    for topic, (low, high) in marks.items():
        if topic in (STREAM, ROLLING):
            assert low == 0, f"{topic}: log start {low}, nothing deletes from this topic ({context})"
            ranges[topic] = (0 if full else min(workloads[topic].verified_end, high), high)
        else:
            ranges[topic] = (low, high)
    records, skips = read(node.bootstrap, ranges, context)
    for topic, workload in workloads.items():
        low, high = marks[topic]
        start, end = ranges[topic]
        check_common(workload, records[topic], low, high, context)
        if skips[topic]:  # the log start observed when retention overtook the read
            workload.log_start = max(low, skips[topic][-1][1])
        if topic != COMPACTED:
            check_contiguous(topic, records[topic], start, end, skips[topic], context)
        if topic in (STREAM, ROLLING):
            assert workload.verified_end <= high, f"{topic}: read offsets are gone ({context})"
            workload.verified_end = high
        if topic == RETAINED and records[topic] and not skips[topic]:
            assert records[topic][0].offset == low, \
                f"{topic}: ListOffsets earliest is {low}, " \
                f"the first record is at {records[topic][0].offset} ({context})"
        if topic == COMPACTED:
            check_compacted(workload, records[topic], context)
        check_acknowledged_present(workload, context)
    check_time_index(node.bootstrap, workloads[ROLLING], rng, 1, context)


def latest_per_key(records: list[Record]) -> dict[bytes, Record]:
    return {record.key: record for record in records}


def wait_for_one_record_per_key(node, workload: Workload, context: str) -> list[Record]:
    """The cleaner catches up once the load stops: the last segment rolls by segment.ms and is cleaned
    (by max.compaction.lag.ms if its dirty ratio is too small)."""
    deadline = time.monotonic() + 15
    while True:
        (low, high), = watermarks(node.bootstrap, [workload.topic]).values()
        records = read(node.bootstrap, {workload.topic: (low, high)}, context)[0][workload.topic]
        if len(records) == len(latest_per_key(records)) or time.monotonic() > deadline:
            return records
        time.sleep(0.3)


def segment_bases(node, topic: str, with_deleted: bool = False) -> list[int]:
    """Base offsets of the topic's segment files; `with_deleted`: also those retention just deleted,
    whose files linger for log.segment.delete.delay.ms."""
    directory = node.data_dir / f"{topic}-0"
    names = [path.name for path in directory.iterdir()]
    suffixes = (".log", ".log.deleted") if with_deleted else (".log",)
    return sorted(int(name[:20]) for name in names if name.endswith(suffixes) and name[:20].isdigit())


def check_random_fetches(bootstrap: str, workload: Workload, rng: random.Random, samples: int,
                         context: str) -> None:
    """Fetches from offsets inside batches and segments find them through the (rebuilt) offset indexes."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check",
                         "enable.auto.commit": False, "check.crcs": True})
    try:
        for _ in range(samples):
            offset = rng.randrange(workload.high_watermark)
            consumer.assign([TopicPartition(workload.topic, 0, offset)])
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None, \
                f"{workload.topic}: fetch from offset {offset}: {msg and msg.error()} ({context})"
            expected = workload.seen[offset]
            assert (msg.offset(), msg.key(), msg.value()) == (offset, expected.key, expected.value), \
                f"{workload.topic}: a fetch from offset {offset} returned offset {msg.offset()} ({context})"
    finally:
        consumer.close()


def test_kill_9_at_20_random_points_of_produce_roll_retention_and_compaction(node_factory, seed):
    schedule = random.Random(seed)  # run times, idle spells: the crash points
    picks = random.Random(f"{seed}-picks")  # what the checks sample
    started = time.monotonic()
    node = node_factory(NODE_SETTINGS)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # must outlive its futures
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={**SMALL_SEGMENTS, **config})
                                   for topic, config in TOPIC_CONFIGS.items()])
    for future in futures.values():
        future.result(15)
    del admin, futures  # its connection would log every kill
    workloads = {topic: Workload(topic, seed) for topic in TOPIC_CONFIGS}
    load = Load(workloads, seed)

    restart_seconds = []
    for crash in range(CRASHES):
        context = f"seed {seed}, after crash {crash}, node log {node.log_path}"
        load.open(node.bootstrap)
        load.run(schedule.uniform(0.1, 0.6))
        if schedule.random() < 0.25:
            # an idle spell: check the live node, then kill it in the middle of background work alone
            if sum(workload.producer.flush(5) for workload in workloads.values()) == 0:
                verify(node, workloads, picks, f"seed {seed}, before crash {crash}, node log {node.log_path}")
            time.sleep(schedule.uniform(0.0, 0.3))
        node.kill()
        load.abandon(f"seed {seed}, before crash {crash}, node log {node.log_path}")
        restart = time.monotonic()
        node.start()
        restart_seconds.append(time.monotonic() - restart)
        verify(node, workloads, picks, context)

    # the last load runs to completion, then a clean stop and start, and every log is read whole
    context = f"seed {seed}, after the clean restart, node log {node.log_path}"
    load.open(node.bootstrap)
    load.run(0.5)
    load.finish(f"seed {seed}, the last load, node log {node.log_path}")
    verify(node, workloads, picks, f"seed {seed}, after the last load")
    # retention would go on trimming `retained` (and soon empty it, the node being idle) while the full
    # checks below read it twice: keep what is there now
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    keep = [ConfigEntry(name, "-1", incremental_operation=AlterConfigOpType.SET)
            for name in ("retention.ms", "retention.bytes")]
    for future in admin.incremental_alter_configs([ConfigResource("topic", RETAINED,
                                                                  incremental_configs=keep)]).values():
        future.result(15)
    del admin
    node.stop()
    node.start()
    verify(node, workloads, picks, context, full=True)
    for topic in (STREAM, ROLLING):
        check_time_index(node.bootstrap, workloads[topic], picks, 10, context)
        check_random_fetches(node.bootstrap, workloads[topic], picks, 20, context)

    # a second client reads every batch: the same records at the same offsets
    for topic, workload in workloads.items():
        records = kcat_records(node.bootstrap, topic, context)
        for record in records:
            earlier = workload.seen.get(record.offset)
            assert earlier is not None and (earlier.key, earlier.value) == (record.key, record.value), \
                f"{topic}: kcat reads offset {record.offset} otherwise than the consumer did ({context})"
        if topic != COMPACTED:
            offsets = [record.offset for record in records]
            assert offsets == list(range(workload.log_start, workload.high_watermark)), \
                f"{topic}: kcat read {len(offsets)} records at {offsets[:1]}..{offsets[-1:]}, the consumer " \
                f"{workload.log_start}..{workload.high_watermark - 1} ({context})"

    compacted = wait_for_one_record_per_key(node, workloads[COMPACTED], context)
    check_common(workloads[COMPACTED], compacted, workloads[COMPACTED].log_start,
                 workloads[COMPACTED].high_watermark, context)
    check_compacted(workloads[COMPACTED], compacted, context)
    assert len(compacted) == len(latest_per_key(compacted)), \
        f"compacted: the cleaner left {len(compacted)} records " \
        f"for {len(latest_per_key(compacted))} keys ({context})"

    # recovery, retention and the cleaner never failed (the cleaner would stop cleaning after a failure)
    log_text = node.log_text()
    failures = [line for line in log_text.splitlines() if " ERROR " in line or line.startswith("Traceback")]
    assert not failures, f"the node logged failures: {failures[:5]} ({context})"
    assert "not shut down cleanly" not in log_text.rpartition("stopped cleanly")[2], \
        f"the node recovered its logs after a clean shutdown ({context})"

    # the crashes interrupted real work
    rolling_segments = len(segment_bases(node, ROLLING))
    assert rolling_segments >= 20, f"rolling: only {rolling_segments} segments ({context})"
    assert workloads[RETAINED].log_start > 0, f"retained: retention never moved the log start ({context})"
    assert len(compacted) < len(workloads[COMPACTED].acked) / 2, \
        f"compacted: {len(compacted)} records left of {len(workloads[COMPACTED].acked)} updates ({context})"
    print(f"seed {seed}: {time.monotonic() - started:.1f}s, restarts {min(restart_seconds):.2f}-"
          f"{max(restart_seconds):.2f}s; records acknowledged "
          f"{ {topic: len(w.acked) for topic, w in workloads.items()} }; "
          f"rolling segments {rolling_segments}, "
          f"retained offsets {workloads[RETAINED].log_start}..{workloads[RETAINED].high_watermark}, "
          f"compacted records {len(compacted)}")
