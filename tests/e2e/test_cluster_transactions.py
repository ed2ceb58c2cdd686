"""Transactions on a three-node cluster under faults: exactly-once consume-transform-produce while the leaders of
the data partitions and of the transaction coordinator's __transaction_state partition are killed with -9; an
idempotent producer whose connections a proxy keeps dropping; a transaction whose coordinator dies before or
while it commits.

The cluster tests run twice (the `security` fixture): with PLAINTEXT listeners, and with SASL_SSL on every
listener. The dropped-connections test runs PLAINTEXT only: its proxy reads the Kafka frames to cut connections
just as a Produce response comes back, which it could not do in a TLS stream without terminating TLS itself.

Replay a failure with `pytest tests/e2e/test_cluster_transactions.py --seed N`: the fault choices come from the
seed (the timing of the clients and nodes around them does not).
"""

import asyncio
import os
import random
import struct
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordinator.group_coordinator import java_string_hash
from tests.conftest import NodeProcess, free_port
from tests.e2e.test_cluster import create_topic, wait_for

INTERNAL_PARTITIONS = 3
TXN_CLUSTER_SETTINGS = {
    "min.insync.replicas": "2",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS),
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
CLIENT_SETTINGS = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 50,
                   "socket.connection.setup.timeout.ms": 3000, "topic.metadata.refresh.interval.ms": 2000}
if os.environ.get("TXN_TEST_RDKAFKA_DEBUG"):  # e.g. "eos,protocol,broker" to see what librdkafka does
    CLIENT_SETTINGS["debug"] = os.environ["TXN_TEST_RDKAFKA_DEBUG"]


# Helpers ---------------------------------------------------------------------------------------------------------


def txn_state_partition(transactional_id: str, partitions: int = INTERNAL_PARTITIONS) -> int:
    """The __transaction_state partition of a transactional id, as Kafka computes it."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def running(cluster) -> list[NodeProcess]:
    return [node for node in cluster.nodes if node.proc is not None and node.proc.poll() is None]


def running_bootstrap(cluster) -> str:
    return ",".join(node.bootstrap for node in running(cluster))


def leaders(cluster, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, isr) from the Metadata of a running node."""
    metadata = AdminClient(cluster.client_settings(bootstrap=running_bootstrap(cluster))).list_topics(topic, timeout=10)
    found = metadata.topics[topic]
    if found.error is not None:
        raise KafkaException(found.error)
    return {p.id: (p.leader, list(p.isrs)) for p in found.partitions.values()}


def live_leader(cluster, topic: str, partition: int, timeout: float = 30) -> int:
    """The leader of a partition, once it is a running node."""
    alive = {i for i, node in enumerate(cluster.nodes, 1) if node in running(cluster)}
    return wait_for(lambda: (lambda leader: leader if leader in alive else None)(
        leaders(cluster, topic).get(partition, (-1, []))[0]), timeout, f"a live leader of {topic}-{partition}")


def all_in_sync(cluster, topics: list[str]) -> bool:
    try:
        return all(leader > 0 and len(isr) == len(cluster.nodes)
                   for topic in topics for leader, isr in leaders(cluster, topic).values())
    except KafkaException:
        return False


def list_offsets(cluster, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) as the partition's leader answers ListOffsets latest."""
    node = cluster.node(live_leader(cluster, topic, partition))
    answers = []
    with cluster.raw_client(node) as client:
        for isolation in (1, 0):
            response = client.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                "timestamp": -1}]}]})
            result = response["topics"][0]["partitions"][0]
            if result["error_code"] != 0:
                return (-1, -1)
            answers.append(result["offset"])
    return answers[0], answers[1]


def feed(cluster, topic: str, count: int, partitions: int) -> None:
    """Values 0..count-1, value n in partition n % partitions, by a plain idempotent producer; all acknowledged."""
    producer = Producer(cluster.client_settings({"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    failed = []
    for n in range(count):
        producer.produce(topic, value=str(n).encode(), key=str(n).encode(), partition=n % partitions,
                         on_delivery=lambda err, msg: err is not None and failed.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:5]


def read_to_end(connection: dict, topic: str, partitions: int, isolation: str, expect: int,
                timeout: float = 60) -> dict[int, list[tuple[int, str]]]:
    """partition -> [(offset, value)], from the beginning until at least `expect` records were read and every
    partition reported its end (the LSO for read_committed) after its last record; then one more second, so
    that records past the expected count (duplicates) are seen too. `connection`: bootstrap.servers and
    security, as cluster.client_settings() gives them."""
    consumer = Consumer({**connection, "group.id": f"final-{isolation}", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "error",
                         **CLIENT_SETTINGS})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    settled = None
    try:
        while settled is None or time.monotonic() < settled:
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} ({isolation}): {sum(map(len, read.values()))} of {expect} "
                                     f"records within {timeout}s, partitions at their end: {sorted(at_end)}")
            message = consumer.poll(0.2)
            if message is not None:
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                    elif message.error().code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        raise AssertionError(f"reading {topic}: {message.error()}")
                else:
                    at_end.discard(message.partition())
                    read[message.partition()].append((message.offset(), message.value().decode()))
            if settled is None and len(at_end) == partitions and sum(map(len, read.values())) >= expect:
                settled = time.monotonic() + 1.0
        return read
    finally:
        consumer.close()


def is_txn_error(exc: KafkaException) -> KafkaError:
    return exc.args[0]


class Wedged(Exception):
    """A librdkafka call did not return long after its own timeout."""


def bounded(call, timeout_s: float, what: str):
    """call() from a helper thread; Wedged if it has not returned within timeout_s.

    librdkafka 2.x can block send_offsets_to_transaction forever, whatever its timeout, when the cached group
    coordinator was dropped from Metadata (a killed, fenced node) and no other broker changes state
    (confluentinc/librdkafka#5511, #5456). A wedged producer is abandoned (its thread stays blocked) and a new
    instance fences it, as an application's watchdog would."""
    result, error = [], []

    def run():
        try:
            result.append(call())
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=run, name=f"bounded {what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise Wedged(f"{what} still blocked after {timeout_s:.0f}s")
    if error:
        raise error[0]
    return result[0] if result else None


# 1. Exactly-once consume-transform-produce under kill -9 of leaders and of the coordinator -----------------------

EOS_RECORDS = 3000
EOS_PARTITIONS = 3
EOS_BATCH = 100
EOS_PACE_S = 45.0  # the input is let through at EOS_RECORDS / EOS_PACE_S records a second, so faults land mid-run
EOS_SECONDS = 110  # the loop's own deadline


class Pipeline:
    """Reads `source` read_committed, writes each record's value to `sink` and the input offsets in one
    transaction per batch; recovers from errors as confluent-kafka's transactional API documents them."""

    def __init__(self, cluster, source: str, sink: str, tid: str, group: str, deadline: float):
        self.cluster, self.source, self.sink, self.tid, self.group = cluster, source, sink, tid, group
        self.deadline = deadline
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.committed: dict[int, int] = {}  # input partition -> next offset, as of the last known commit
        self.stats: Counter = Counter()
        self.events: list[str] = []
        self.wedged: list[Producer] = []  # abandoned producers, kept referenced while their calls block

    @property
    def progress(self) -> int:
        return sum(self.committed.values())

    def _check_deadline(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            raise AssertionError(f"pipeline: {what} past the deadline; progress {self.progress}, stats {self.stats}")

    def build(self) -> None:
        """A new producer (its init_transactions fences the old one and ends its transaction) and a new consumer
        at the group's committed offsets."""
        self.close()
        while True:
            self._check_deadline("init_transactions")
            producer = Producer(self.cluster.client_settings({
                "transactional.id": self.tid, "linger.ms": 5, "client.id": "pipeline-producer",
                "transaction.timeout.ms": 10000, **CLIENT_SETTINGS}))
            try:
                bounded(lambda producer=producer: producer.init_transactions(10), 20, "init_transactions")
                self.producer = producer
                break
            except KafkaException as exc:
                self.stats[f"init-{is_txn_error(exc).name()}"] += 1
                time.sleep(0.3)
            except Wedged as exc:
                self.stats["wedged-init"] += 1
                self.events.append(f"{exc} at progress {self.progress}")
                self.wedged.append(producer)
        self.consumer = Consumer(self.cluster.client_settings({
            "group.id": self.group, "client.id": "pipeline-consumer", "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            **CLIENT_SETTINGS}))
        self.rewind()

    def rewind(self) -> None:
        """Assign the input at the group's committed offsets (which wait for an open offset commit's outcome)."""
        partitions = [TopicPartition(self.source, p) for p in range(EOS_PARTITIONS)]
        while True:
            self._check_deadline("reading committed offsets")
            try:
                committed = self.consumer.committed(partitions, 10)
                break
            except KafkaException as exc:
                self.stats[f"committed-{is_txn_error(exc).name()}"] += 1
                time.sleep(0.3)
        errors = [tp for tp in committed if tp.error is not None]
        if errors:
            self.stats["committed-partition-error"] += 1
            time.sleep(0.3)
            return self.rewind()
        self.committed = {tp.partition: max(tp.offset, 0) for tp in committed}
        self.consumer.assign([TopicPartition(self.source, p, o if o > 0 else OFFSET_BEGINNING)
                              for p, o in self.committed.items()])
        self.stats["rewinds"] += 1

    def close(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:
                pass
        self.consumer = None
        self.producer = None  # dropped without ceremony, as a crashed process would

    def step(self, most: int = EOS_BATCH) -> None:
        batch = self.consumer.consume(most, 0.5)
        messages = [m for m in batch if not m.error()]
        for m in batch:
            if m.error():
                self.stats[f"consume-{m.error().name()}"] += 1
        if not messages:
            return
        positions = {}
        for m in messages:
            assert m.offset() >= positions.get(m.partition(), self.committed.get(m.partition(), 0)), \
                f"consumer went backwards at {m.partition()}/{m.offset()}"
            positions[m.partition()] = m.offset() + 1
        producer = self.producer
        try:
            producer.begin_transaction()
            for m in messages:
                producer.produce(self.sink, key=m.value(), value=m.value(), partition=m.partition())
                producer.poll(0)
            offsets = [TopicPartition(self.source, p, o) for p, o in sorted(positions.items())]
            metadata = self.consumer.consumer_group_metadata()
            bounded(lambda: producer.send_offsets_to_transaction(offsets, metadata, 10), 20,
                    "send_offsets_to_transaction")
            self.commit(producer)
            self.committed.update(positions)
            self.stats["commits"] += 1
        except Wedged as exc:
            self.stats["wedged"] += 1
            self.events.append(f"{exc} at progress {self.progress}: abandoning the producer")
            self.wedged.append(producer)
            self.build()
        except KafkaException as exc:
            error = is_txn_error(exc)
            self.stats[f"error-{error.name()}"] += 1
            self.events.append(f"{error.name()} (fatal={error.fatal()}, abortable={error.txn_requires_abort()}, "
                               f"retriable={error.retriable()}) at progress {self.progress}")
            if error.fatal():
                self.build()
            elif error.txn_requires_abort():
                self.abort()
            else:
                # Outcome unknown (e.g. a commit that kept timing out): a new instance fences this one and
                # resumes from whatever the coordinator decided.
                self.build()

    def commit(self, producer: Producer) -> None:
        while True:
            try:
                bounded(lambda: producer.commit_transaction(10), 20, "commit_transaction")
                return
            except KafkaException as exc:
                error = is_txn_error(exc)
                if error.retriable() and not error.txn_requires_abort() and not error.fatal() \
                        and time.monotonic() < self.deadline:
                    self.stats[f"commit-retry-{error.name()}"] += 1
                    continue
                raise

    def abort(self) -> None:
        while True:
            try:
                producer = self.producer
                bounded(lambda producer=producer: producer.abort_transaction(10), 20, "abort_transaction")
                self.stats["aborts"] += 1
                self.rewind()
                return
            except KafkaException as exc:
                error = is_txn_error(exc)
                self.stats[f"abort-{error.name()}"] += 1
                if error.retriable() and not error.fatal() and time.monotonic() < self.deadline:
                    continue
                self.build()
                return
            except Wedged as exc:
                self.stats["wedged"] += 1
                self.events.append(f"{exc} at progress {self.progress}: abandoning the producer")
                self.wedged.append(self.producer)
                self.build()
                return


class CommittedObserver:
    """A read_committed consumer that reads the sink from the beginning while the faults run."""

    def __init__(self, cluster, topic: str, partitions: int):
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.read: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        self.errors: Counter = Counter()
        self.anomalies: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="committed-observer", daemon=True)

    def _run(self) -> None:
        consumer = Consumer(self.cluster.client_settings({
            "group.id": "observer", "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "error", "fetch.wait.max.ms": 100, **CLIENT_SETTINGS}))
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    self.errors[message.error().name()] += 1
                    if message.error().code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE,
                                                  KafkaError._LOG_TRUNCATION):
                        self.anomalies.append(str(message.error()))
                    continue
                self.read[message.partition()].append((message.offset(), message.value().decode()))
        finally:
            consumer.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("security", ["PLAINTEXT"])  # SASL_SSL through kills: the coordinator failover tests below
def test_exactly_once_pipeline_survives_kill_9_of_leaders_and_the_coordinator(cluster_factory, seed, security):
    rng = random.Random(seed)
    cluster = cluster_factory(3, TXN_CLUSTER_SETTINGS, security=security)
    source, sink = "eos-in", "eos-out"
    for topic in (source, sink):
        create_topic(cluster, topic, partitions=EOS_PARTITIONS, replication=3, min_insync_replicas=2)
    feed(cluster, source, EOS_RECORDS, EOS_PARTITIONS)
    tid, group = f"eos-{seed}", f"eos-group-{seed}"
    coordinator_partition = txn_state_partition(tid)

    started = time.monotonic()
    pipeline = Pipeline(cluster, source, sink, tid, group, started + EOS_SECONDS)
    pipeline.build()  # creates __transaction_state and __consumer_offsets
    internal = ["__transaction_state", "__consumer_offsets"]
    wait_for(lambda: all_in_sync(cluster, [source, sink, *internal]), 30, "every replica in sync")

    # Four faults at seeded points of the input, each kind at least once: the leader of an input partition,
    # of an output partition, and of the coordinator's __transaction_state partition.
    kinds = ["input", "output", "coordinator", rng.choice(["input", "output", "coordinator"])]
    rng.shuffle(kinds)
    plan = [(kind, rng.randrange(EOS_PARTITIONS), round(EOS_RECORDS * (0.1 + 0.18 * i + rng.uniform(0, 0.08))),
             round(rng.uniform(1.5, 4.0), 2)) for i, kind in enumerate(kinds)]
    faults: list[str] = []
    fault_errors: list[str] = []
    stop = threading.Event()

    def nemesis() -> None:
        try:
            for kind, partition, at_progress, down_s in plan:
                while pipeline.progress < at_progress and not stop.is_set():
                    time.sleep(0.02)
                if stop.is_set():
                    return
                topic, p = {"input": (source, partition), "output": (sink, partition),
                            "coordinator": ("__transaction_state", coordinator_partition)}[kind]
                victim = live_leader(cluster, topic, p)
                cluster.node(victim).kill()
                faults.append(f"{time.monotonic() - started:6.1f}s progress {pipeline.progress}: killed node "
                              f"{victim}, leader of {topic}-{p} ({kind}); down {down_s}s")
                time.sleep(down_s)
                cluster.node(victim).start()
                wait_for(lambda: all_in_sync(cluster, [source, sink, *internal]), 40,
                         f"node {victim} back in every ISR")
                faults.append(f"{time.monotonic() - started:6.1f}s node {victim} back in every ISR")
        except Exception as exc:
            fault_errors.append(repr(exc))

    observer = CommittedObserver(cluster, sink, EOS_PARTITIONS)
    observer.thread.start()
    killer = threading.Thread(target=nemesis, name="nemesis", daemon=True)
    killer.start()

    def context() -> str:
        return (f"seed {seed} (replay: --seed {seed}); plan {plan}\nfaults:\n  " + "\n  ".join(faults)
                + f"\nfault errors: {fault_errors}\npipeline stats {dict(pipeline.stats)}\nerrors:\n  "
                + "\n  ".join(pipeline.events[-30:]) + f"\nobserver errors {dict(observer.errors)}")

    try:
        try:
            while pipeline.progress < EOS_RECORDS:
                allowed = int(EOS_RECORDS * (time.monotonic() - started) / EOS_PACE_S) - pipeline.progress
                if allowed < 5 and pipeline.progress + allowed < EOS_RECORDS:
                    time.sleep(0.05)
                else:
                    pipeline.step(max(1, min(EOS_BATCH, allowed)))
                pipeline._check_deadline("processing")
        finally:
            stop.set()
            killer.join(60)
        pipeline.close()
        assert not fault_errors, f"the nemesis failed: {fault_errors}"
        assert len(faults) == 2 * len(plan), "every fault ran during the pipeline"
        elapsed = time.monotonic() - started
        wait_for(lambda: all_in_sync(cluster, [source, sink, *internal]), 40, "every replica in sync at the end")

        final = read_to_end(cluster.client_settings(), sink, EOS_PARTITIONS, "read_committed", EOS_RECORDS)
        counts = Counter(int(v) for records in final.values() for _, v in records)
        duplicates = {n: c for n, c in counts.items() if c > 1}
        missing = sorted(set(range(EOS_RECORDS)) - set(counts))
        assert not duplicates and not missing, \
            f"duplicates {sorted(duplicates.items())[:20]} ({len(duplicates)}), missing {missing[:20]} " \
            f"({len(missing)})"
        assert len(counts) == EOS_RECORDS and sum(counts.values()) == EOS_RECORDS
        for p, records in final.items():
            assert all(int(v) % EOS_PARTITIONS == p for _, v in records), f"partition {p} holds foreign values"
            assert [int(v) for _, v in records] == sorted(int(v) for _, v in records), \
                f"output partition {p} is out of input order"

        # Every transaction has ended: the LSO has reached the high watermark of each output partition.
        for p in range(EOS_PARTITIONS):
            wait_for(lambda p=p: (lambda lso, hw: lso == hw and lso >= 0)(*list_offsets(cluster, sink, p)), 20,
                     f"the LSO of {sink}-{p} to reach its high watermark")
        uncommitted = read_to_end(cluster.client_settings(), sink, EOS_PARTITIONS, "read_uncommitted", EOS_RECORDS)
        aborted_records = sum(map(len, uncommitted.values())) - EOS_RECORDS

        # The concurrent read_committed consumer saw a subset of the final log, in order, no aborted record.
        deadline = time.monotonic() + 20
        while sum(map(len, observer.read.values())) < EOS_RECORDS and time.monotonic() < deadline:
            time.sleep(0.2)
        observer.stop.set()
        observer.thread.join(30)
        assert not observer.anomalies, f"the observer was told its position is out of range: {observer.anomalies}"
        for p, records in observer.read.items():
            offsets = [o for o, _ in records]
            assert offsets == sorted(set(offsets)), f"observer read partition {p} out of order or twice"
            foreign = sorted(set(records) - set(final[p]))
            assert not foreign, f"the read_committed observer read {len(foreign)} records of partition {p} that " \
                                f"are not committed, e.g. (offset, value) {foreign[:10]}"
        observed = sum(map(len, observer.read.values()))
        assert observed == EOS_RECORDS, f"the observer caught up with only {observed} records"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{context()}") from None
    finally:
        stop.set()
        observer.stop.set()
    print(f"seed {seed}: {EOS_RECORDS} records exactly once in {elapsed:.1f}s through {len(plan)} kills; "
          f"{aborted_records} aborted records in the log; stats {dict(pipeline.stats)}\n  " + "\n  ".join(faults))


# 2. Idempotent producer whose connections keep dropping -----------------------------------------------------------


class ChaosProxy:
    """A TCP proxy on its own event loop thread in front of one node, forwarding whole Kafka frames. Once armed
    it resets every connection now and then, cuts some connections just as a Produce response arrives (the batch
    was written, the client never hears so and sends it again), and delays some requests."""

    def __init__(self, port: int, target_port: int, rng: random.Random, drop_produce_response: float = 0.05,
                 reset_every: tuple[float, float] = (0.5, 2.0), max_delay_s: float = 0.02):
        self.port, self.target_port, self.rng = port, target_port, rng
        self.drop_produce_response, self.reset_every, self.max_delay_s = drop_produce_response, reset_every, max_delay_s
        self.armed = threading.Event()
        self.stats: Counter = Counter()
        self.loop = asyncio.new_event_loop()
        self._connections: set[tuple] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name="chaos-proxy", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self._resetter = asyncio.ensure_future(self._reset_now_and_then())

    async def _reset_now_and_then(self) -> None:
        while True:
            await asyncio.sleep(self.rng.uniform(*self.reset_every))
            if self.armed.is_set() and self._connections:
                self.stats["resets"] += 1
                self.stats["connections reset"] += len(self._connections)
                for pair in list(self._connections):
                    for side in pair:
                        side.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, upstream_writer)
        in_flight: dict[int, int] = {}  # correlation id -> api key
        self._connections.add(pair)
        try:
            pipes = [asyncio.ensure_future(self._pipe(reader, upstream_writer, pair, in_flight, requests=True)),
                     asyncio.ensure_future(self._pipe(upstream_reader, writer, pair, in_flight, requests=False))]
            _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
        finally:
            self._connections.discard(pair)
            for side in pair:
                side.transport.abort()

    async def _pipe(self, reader, writer, pair, in_flight: dict[int, int], requests: bool) -> None:
        buffer = b""
        try:
            while data := await reader.read(65536):
                buffer += data
                while len(buffer) >= 4 and len(buffer) >= 4 + (size := struct.unpack_from(">i", buffer)[0]):
                    frame, buffer = buffer[:4 + size], buffer[4 + size:]
                    if requests:
                        api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
                        in_flight[correlation_id] = api_key
                        if self.armed.is_set() and self.rng.random() < 0.2:
                            self.stats["requests delayed"] += 1
                            await asyncio.sleep(self.rng.uniform(0, self.max_delay_s))
                    else:
                        api_key = in_flight.pop(struct.unpack_from(">i", frame, 4)[0], None)
                        if api_key == 0 and self.armed.is_set() and self.rng.random() < self.drop_produce_response:
                            self.stats["produce responses dropped"] += 1
                            for side in pair:
                                side.transport.abort()
                            return
                    writer.write(frame)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass

    def close(self) -> None:
        async def stop():
            self._resetter.cancel()
            self._server.close()
            for pair in list(self._connections):
                for side in pair:
                    side.transport.abort()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


IDEMPOTENT_RECORDS = 6000
IDEMPOTENT_PARTITIONS = 3


@pytest.mark.timeout(150)
def test_idempotent_producer_through_dropped_connections_writes_each_record_once_in_order(tmp_path, seed):
    rng = random.Random(seed)
    proxy_port = free_port()
    node = NodeProcess(tmp_path / "data", settings={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
                                                    "num.partitions": str(IDEMPOTENT_PARTITIONS)})
    proxy = ChaosProxy(proxy_port, node.port, random.Random(rng.random()))
    try:
        node.start()
        bootstrap = f"127.0.0.1:{proxy_port}"  # every connection, bootstrap or advertised, goes through the proxy
        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
        admin.create_topics([NewTopic("drops", IDEMPOTENT_PARTITIONS, 1)])["drops"].result(30)

        acked: dict[int, tuple[int, int]] = {}
        failed: dict[int, str] = {}
        fatal: list[str] = []

        def delivered(err, msg):
            value = int(msg.value())
            if err is not None:
                failed[value] = err.name()
            else:
                acked[value] = (msg.partition(), msg.offset())

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                fatal.append(str(err))

        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 2, "batch.num.messages": 20, "max.in.flight.requests.per.connection": 5,
                             "message.timeout.ms": 120000, "request.timeout.ms": 5000, "error_cb": on_error,
                             **CLIENT_SETTINGS})
        proxy.armed.set()
        started = time.monotonic()
        for n in range(IDEMPOTENT_RECORDS):
            producer.produce("drops", value=str(n).encode(), partition=n % IDEMPOTENT_PARTITIONS, on_delivery=delivered)
            producer.poll(0)
            if n % 100 == 99:
                time.sleep(rng.uniform(0.1, 0.5))  # spread the writes over the faults
        remaining = producer.flush(100)
        produce_s = time.monotonic() - started
        proxy.armed.clear()
        context = f"seed {seed}; proxy {dict(proxy.stats)}; {len(acked)} acked, {len(failed)} failed " \
                  f"({Counter(failed.values())}), {remaining} undelivered, fatal {fatal}"
        assert proxy.stats["resets"] >= 5 and proxy.stats["produce responses dropped"] >= 5, f"too few faults: {context}"
        assert not fatal and not failed and remaining == 0, context
        assert len(acked) == IDEMPOTENT_RECORDS, context

        log = read_to_end({"bootstrap.servers": bootstrap}, "drops", IDEMPOTENT_PARTITIONS, "read_uncommitted",
                          IDEMPOTENT_RECORDS)
        counts = Counter(int(v) for records in log.values() for _, v in records)
        duplicates = sorted(n for n, c in counts.items() if c > 1)
        assert not duplicates, f"{len(duplicates)} values written twice, e.g. {duplicates[:20]}; {context}"
        assert sorted(counts) == list(range(IDEMPOTENT_RECORDS)), f"lost values; {context}"
        for p, records in log.items():
            expected = list(range(p, IDEMPOTENT_RECORDS, IDEMPOTENT_PARTITIONS))
            assert [int(v) for _, v in records] == expected, f"partition {p} is not the sent sequence; {context}"
            assert [o for o, _ in records] == list(range(len(records))), f"partition {p} has offset gaps"
            at = {o: int(v) for o, v in records}
            wrong = [(v, o) for v, (q, o) in acked.items() if q == p and at.get(o) != v]
            assert not wrong, f"acknowledged (value, offset) not where acknowledged: {wrong[:10]}; {context}"
        print(f"{context}; produced in {produce_s:.1f}s")
        assert "Traceback" not in node.log_text()
    finally:
        proxy.close()
        node.stop()


# 3. A transaction whose coordinator is killed -----------------------------------------------------------------------

LEDGER_PER_PARTITION = 50


@pytest.mark.timeout(150)
@pytest.mark.parametrize("moment", ["before-commit", "during-commit"])
def test_transaction_is_all_or_nothing_across_a_coordinator_failover(cluster_factory, seed, moment, security):
    rng = random.Random(seed)
    cluster = cluster_factory(3, TXN_CLUSTER_SETTINGS, security=security)
    topic = "ledger"
    create_topic(cluster, topic, partitions=2, replication=3, min_insync_replicas=2)
    tid = f"ledger-{seed}"
    config = cluster.client_settings({"transactional.id": tid, "linger.ms": 5, "transaction.timeout.ms": 15000,
                                      **CLIENT_SETTINGS})
    producer = Producer(config)
    producer.init_transactions(30)

    def write(producer: Producer, prefix: str) -> None:
        for i in range(LEDGER_PER_PARTITION):
            for p in (0, 1):
                producer.produce(topic, value=f"{prefix}-{p}-{i}".encode(), partition=p)
        assert producer.flush(30) == 0

    producer.begin_transaction()
    write(producer, "first")
    producer.commit_transaction(30)
    wait_for(lambda: all_in_sync(cluster, [topic, "__transaction_state"]), 30, "every replica in sync")

    coordinator = live_leader(cluster, "__transaction_state", txn_state_partition(tid))
    producer.begin_transaction()
    write(producer, "middle")  # in the partitions' logs, not yet committed
    lso, hw = list_offsets(cluster, topic, 0)
    assert lso < hw, f"an open transaction holds the LSO back: LSO {lso}, high watermark {hw}"

    events: list[str] = []
    outcome = None
    commit_error: list[KafkaException] = []
    started = time.monotonic()

    def commit() -> None:
        try:
            producer.commit_transaction(40)
        except KafkaException as exc:
            commit_error.append(exc)

    if moment == "before-commit":
        cluster.node(coordinator).kill()
        events.append(f"killed coordinator node {coordinator}, then commit")
        committer = threading.Thread(target=commit)
        committer.start()
    else:
        committer = threading.Thread(target=commit)
        committer.start()
        time.sleep(rng.uniform(0.0, 0.05))
        returned = not committer.is_alive()
        cluster.node(coordinator).kill()
        events.append(f"commit, then killed coordinator node {coordinator} "
                      f"({'after' if returned else 'before'} commit_transaction returned)")
    committer.join(60)
    assert not committer.is_alive(), "commit_transaction did not return"

    # The documented recovery: retry a retriable commit, abort an abortable transaction, replace a fatal producer.
    attempts = 0
    while outcome is None:
        attempts += 1
        assert attempts < 10, f"no outcome after {attempts} attempts: {events}"
        if not commit_error:
            outcome = "committed"
            break
        error = is_txn_error(commit_error.pop())
        events.append(f"commit: {error.name()} fatal={error.fatal()} abortable={error.txn_requires_abort()} "
                      f"retriable={error.retriable()}")
        if error.fatal():
            producer = Producer(config)
            producer.init_transactions(30)  # finishes or aborts the old transaction, whichever was decided
            outcome = "unknown (fenced)"
        elif error.txn_requires_abort():
            producer.abort_transaction(30)
            outcome = "aborted"
        else:
            commit()
    events.append(f"outcome {outcome} after {time.monotonic() - started:.1f}s")

    cluster.node(coordinator).start()
    producer.begin_transaction()
    write(producer, "last")
    producer.commit_transaction(30)
    events.append("the next transaction committed")

    expect = 2 * LEDGER_PER_PARTITION * (2 if outcome == "aborted" else 3)
    committed = read_to_end(cluster.client_settings(), topic, 2, "read_committed", 2 * LEDGER_PER_PARTITION * 2,
                            timeout=30)
    seen = Counter(v.split("-")[0] for records in committed.values() for _, v in records)
    context = f"seed {seed}; {moment}; {events}; read_committed saw {dict(seen)}"
    assert seen["first"] == 2 * LEDGER_PER_PARTITION and seen["last"] == 2 * LEDGER_PER_PARTITION, \
        f"the LSO did not advance past the failed-over transaction: {context}"
    assert seen["middle"] in (0, 2 * LEDGER_PER_PARTITION), f"the transaction was not all-or-nothing: {context}"
    if outcome == "committed":
        assert seen["middle"] == 2 * LEDGER_PER_PARTITION, f"a committed transaction is missing: {context}"
    elif outcome == "aborted":
        assert seen["middle"] == 0, f"an aborted transaction is visible: {context}"
    for p, records in committed.items():
        prefixes = [v.split("-")[0] for _, v in records]
        middle = [v for v in (r[1] for r in records) if v.startswith("middle")]
        assert middle in ([], [f"middle-{p}-{i}" for i in range(LEDGER_PER_PARTITION)]), context
        assert prefixes == sorted(prefixes, key=["first", "middle", "last"].index), context
    assert sum(seen.values()) == expect or outcome.startswith("unknown"), context
    wait_for(lambda: all_in_sync(cluster, [topic, "__transaction_state"]), 40, "the restarted node back in sync")
    for p in (0, 1):
        lso, hw = list_offsets(cluster, topic, p)
        assert lso == hw, f"partition {p}: LSO {lso} behind the high watermark {hw}; {context}"
    uncommitted = read_to_end(cluster.client_settings(), topic, 2, "read_uncommitted", 2 * LEDGER_PER_PARTITION * 3)
    assert sum(v.startswith("middle") for r in uncommitted.values() for _, v in r) == 2 * LEDGER_PER_PARTITION
    print(context)
