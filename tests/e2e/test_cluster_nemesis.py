"""A three-node cluster under a seeded nemesis (kill -9 and restart, SIGSTOP and SIGCONT, network cuts through
proxies) while an idempotent acks=all producer writes numbered records and two consumers read them; afterwards
the history must show no acknowledged write lost, no duplicate, and every read a prefix of the final log.

Replay a failure with `pytest tests/e2e/test_cluster_nemesis.py --seed N`: the fault schedule comes from the
seed (the timing of the clients and nodes around it does not).
"""

import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.errors import KafkaError as KafkaPythonError
from kafka.errors import OffsetOutOfRangeError

from tests.e2e.history import History, assert_valid, summary
from tests.e2e.nemesis import (
    Nemesis,
    ProxiedCluster,
    ProxyNetwork,
    in_sync_everywhere,
    partition_view,
    plan_faults,
)
from tests.e2e.test_cluster import create_topic, wait_for

TOPIC = "nemesis"
PARTITIONS = 3
NEMESIS_SECONDS = 45.0
PRODUCE_RATE = 250  # records per second, over all partitions
HEAL_TIMEOUT_S = 60.0


@pytest.fixture
def network():
    network = ProxyNetwork()
    yield network
    network.close()


@pytest.fixture
def proxied_cluster(tmp_path, network):
    # The live consumer's group.id makes the group coordinator create __consumer_offsets: keep it small.
    cluster = ProxiedCluster(tmp_path, 3, network, {"min.insync.replicas": "2", "offsets.topic.num.partitions": "3"})
    try:
        yield cluster.start()
    finally:
        cluster.stop()


class NumberedProducer:
    """Writes 0, 1, 2, ... (value = number, partition = number % PARTITIONS) at PRODUCE_RATE from its own thread,
    with idempotence and acks=all; records every delivery report. Only its thread touches the client."""

    def __init__(self, bootstrap: str):
        self.errors: list[str] = []
        self.fatal: list[str] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "message.timeout.ms": 120000, "retry.backoff.ms": 100, "linger.ms": 5,
                                  "error_cb": self._on_error})
        self.sent: set[int] = set()
        self.acked: dict[int, tuple[int, int]] = {}
        self.failed: dict[int, str] = {}
        self.undelivered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="nemesis-producer", daemon=True)

    def _on_error(self, error: KafkaError) -> None:
        (self.fatal if error.fatal() else self.errors).append(str(error))

    def _delivered(self, error, message) -> None:
        value = int(message.value())
        if error is None:
            self.acked[value] = (message.partition(), message.offset())
        else:
            self.failed[value] = str(error)

    def _run(self) -> None:
        started, value = time.monotonic(), 0
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * PRODUCE_RATE)
            while value < due and not self.stop.is_set():
                try:
                    self.producer.produce(TOPIC, value=str(value).encode(), partition=value % PARTITIONS,
                                          on_delivery=self._delivered)
                except BufferError:
                    self.producer.poll(0.1)
                    continue
                self.sent.add(value)
                value += 1
            self.producer.poll(0.02)
        self.undelivered = self.producer.flush(60)
        self.producer = None  # destroyed here, not by whichever thread drops the last reference


class LiveReader:
    """A reader thread (`_run`, in each subclass) recording per partition the (offset, value) pairs it read, its
    errors and anomalies."""

    name = ""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.read: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        self.errors: Counter = Counter()
        self.anomalies: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"nemesis {self.name} reader", daemon=True)


class ConfluentLiveReader(LiveReader):
    """assign + seek to the beginning, then read everything as it comes; librdkafka follows leader changes.
    auto.offset.reset=error: a consumer told that its position is out of range must not silently rewind."""

    name = "confluent live"

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "nemesis-live",
                             "enable.auto.commit": False, "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
                             "topic.metadata.refresh.interval.ms": 1000})
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    error = message.error()
                    self.errors[error.name()] += 1
                    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE,
                                        KafkaError._LOG_TRUNCATION):
                        self.anomalies.append(f"{self.name}: {error}")
                        self._resume(consumer)
                    continue
                self.read[message.partition()].append((message.offset(), int(message.value())))
        finally:
            consumer.close()

    def _resume(self, consumer: Consumer) -> None:
        """Continue right after what was read, as if nothing happened; the checker judges what comes next."""
        consumer.assign([TopicPartition(TOPIC, p, records[-1][0] + 1 if records else OFFSET_BEGINNING)
                         for p, records in self.read.items()])


class KafkaPythonLiveReader(LiveReader):
    """The same with kafka-python; on any client error it makes a new consumer at its own positions."""

    name = "kafka-python live"

    def _consumer(self) -> KafkaConsumer:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap.split(","), enable_auto_commit=False,
                                 auto_offset_reset="none", metadata_max_age_ms=1000, retry_backoff_ms=100,
                                 reconnect_backoff_max_ms=1000, request_timeout_ms=10000, fetch_max_wait_ms=100)
        partitions = [KafkaPythonPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            records = self.read[tp.partition]
            if records:
                consumer.seek(tp, records[-1][0] + 1)
            else:
                consumer.seek_to_beginning(tp)
        return consumer

    def _run(self) -> None:
        consumer = None
        while not self.stop.is_set():
            try:
                consumer = consumer or self._consumer()
                for tp, records in consumer.poll(timeout_ms=200).items():
                    self.read[tp.partition] += [(r.offset, int(r.value)) for r in records]
            except (KafkaPythonError, OSError) as exc:
                self.errors[type(exc).__name__] += 1
                if isinstance(exc, OffsetOutOfRangeError):
                    self.anomalies.append(f"{self.name}: {exc!r}")
                if consumer is not None:
                    consumer.close()
                consumer = None
                time.sleep(0.2)
        if consumer is not None:
            consumer.close()


def read_fully_confluent(bootstrap: str, timeout: float = 60) -> dict[int, list[tuple[int, int]]]:
    """Every partition from offset 0 to its high watermark, with a fresh consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-final", "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        read: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout
        while any(read[p][-1][0] + 1 < end if read[p] else end > 0 for p, end in ends.items()):
            assert time.monotonic() < deadline, f"final read stuck: high watermarks {ends}, read " \
                f"{ {p: (r[-1][0] if r else None) for p, r in read.items()} }"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert not message.error(), f"final read: {message.error()}"
            read[message.partition()].append((message.offset(), int(message.value())))
        return read
    finally:
        consumer.close()


def read_fully_kcat(bootstrap: str) -> dict[int, list[tuple[int, int]]]:
    out = subprocess.run(["kcat", "-b", bootstrap, "-t", TOPIC, "-C", "-e", "-q", "-f", "%p %o %s\n"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    read: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    for line in out.splitlines():
        partition, offset, value = map(int, line.split())
        read[partition].append((offset, value))
    return read


def roles(bootstrap: str) -> dict[str, int]:
    """"leader p" -> the leader of partition p, "controller" -> the active controller, as Metadata says now."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=5)
    found = {f"leader {p.id}": p.leader for p in metadata.topics[TOPIC].partitions.values()}
    return {**found, "controller": metadata.controller_id}


def test_proxy_network_identifies_nodes_by_client_id_and_cuts_links(network):
    """A node's connection is forwarded until its link to the proxy's owner is cut; a cut closes it and
    refuses new ones until healed. Other clients' connections are not cut."""
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        port = network.add_proxy(owner=1, target_port=upstream.getsockname()[1])

        def request(client_id: str) -> bytes:
            name = client_id.encode()
            body = struct.pack(">hhih", 3, 12, 7, len(name)) + name + b"\0"
            return struct.pack(">i", len(body)) + body

        def connect(client_id: str) -> tuple[socket.socket, socket.socket]:
            client = socket.create_connection(("127.0.0.1", port), timeout=5)
            client.sendall(request(client_id))
            upstream.settimeout(5)
            accepted, _ = upstream.accept()
            accepted.settimeout(5)
            assert accepted.recv(100) == request(client_id)
            return client, accepted

        fetcher, fetcher_upstream = connect("odradek-replica-fetcher-2")
        fetcher_upstream.sendall(b"reply")
        assert fetcher.recv(100) == b"reply"
        stranger, stranger_upstream = connect("rdkafka")

        network.cut(2, 1)
        assert fetcher.recv(100) == b"" and fetcher_upstream.recv(100) == b""
        refused = socket.create_connection(("127.0.0.1", port), timeout=5)
        refused.sendall(request("odradek-raft-2"))
        assert refused.recv(100) == b""
        assert network.refused == 1 and network.severed == 1
        stranger.sendall(b"still here")
        assert stranger_upstream.recv(100) == b"still here"
        raft3, _ = connect("odradek-raft-3")  # 3-1 is not cut

        network.heal(1, 2)
        connect("odradek-raft-fetch-2")
        assert network.unknown_sources == {"rdkafka"}
        for sock in (fetcher, fetcher_upstream, stranger, stranger_upstream, refused, raft3):
            sock.close()


@pytest.mark.timeout(120)
def test_a_leader_that_wrote_nothing_in_its_epoch_rejoins_the_isr_as_a_follower(cluster_factory):
    """Found by the nemesis (seed 9). Leader B takes over in epoch 1 and is frozen before anyone writes; C takes over in epoch 2. B's epoch cache
    ends with (1, 10), C's has no epoch 1: C tells B it diverged at epoch 0, end offset 10 = B's log end. B must
    drop its empty epoch and follow, not ask again forever."""
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    create_topic(cluster, "empty-epoch", partitions=1, replication=3)

    def in_sync():
        return in_sync_everywhere(cluster.nodes, "empty-epoch", 1, 3)

    wait_for(in_sync, 30, "a full ISR")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all"})
    for value in range(10):
        producer.produce("empty-epoch", str(value).encode(), partition=0)
    assert producer.flush(30) == 0

    def freeze_until_leadership_moves(node_id: int) -> int:
        """SIGSTOP the node until both others name one new leader, then SIGCONT it; the new leader."""
        others = [node for i, node in enumerate(cluster.nodes, 1) if i != node_id]

        def new_leader() -> int | None:
            leaders = {partition_view(node, "empty-epoch")[0][0] for node in others}
            leader = leaders.pop() if len(leaders) == 1 else -1
            return leader if leader not in (-1, node_id) else None

        pid = cluster.node(node_id).proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            return wait_for(new_leader, 20, f"leadership to move off node {node_id}")
        finally:
            os.kill(pid, signal.SIGCONT)

    first = in_sync()[0][0]
    second = freeze_until_leadership_moves(first)
    wait_for(in_sync, 30, f"node {first} to rejoin the ISR under node {second}")
    third = freeze_until_leadership_moves(second)  # nothing was written in the second leader's epoch
    try:
        wait_for(in_sync, 20, f"node {second} to rejoin the ISR under node {third}")
    except AssertionError as exc:
        loops = cluster.node(second).log_text().count("Truncating empty-epoch-0")
        raise AssertionError(f"{exc}; node {second} logged 'Truncating empty-epoch-0' {loops} times") from None


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by `make test`")
@pytest.mark.timeout(240)
def test_acknowledged_writes_survive_kills_freezes_and_network_cuts(proxied_cluster, network, seed):
    cluster = proxied_cluster
    plan = plan_faults(random.Random(seed), cluster.ids, NEMESIS_SECONDS, PARTITIONS)
    nemesis = Nemesis(cluster, plan, lambda: roles(cluster.bootstrap))
    print(f"seed {seed}; fault plan:\n" + "\n".join(f"  {fault}" for fault in plan))
    started = time.monotonic()
    try:
        report = run_under_nemesis(cluster, network, nemesis)
    except Exception as exc:
        raise AssertionError(
            f"seed {seed} (replay: pytest tests/e2e/test_cluster_nemesis.py --seed {seed}), "
            f"{time.monotonic() - started:.0f}s in: {exc}\nnemesis:\n  " + "\n  ".join(nemesis.events)
            + f"\n{cluster.log_excerpt()}\nthe failure, again (CI keeps an output's end): {exc}") from exc
    print(f"{report}; {time.monotonic() - started:.0f}s in all\nnemesis:\n  " + "\n  ".join(nemesis.events))


def run_under_nemesis(cluster: ProxiedCluster, network: ProxyNetwork, nemesis: Nemesis) -> str:
    """Write and read while the nemesis runs; heal; read everything; check the history. A summary."""
    create_topic(cluster, TOPIC, partitions=PARTITIONS, replication=3, min_insync_replicas=2)
    wait_for(lambda: in_sync_everywhere(cluster.nodes, TOPIC, PARTITIONS, 3), 30, "the new topic's replicas to be in sync")
    producer = NumberedProducer(cluster.bootstrap)
    readers = [ConfluentLiveReader(cluster.bootstrap), KafkaPythonLiveReader(cluster.bootstrap)]
    faults = threading.Thread(target=nemesis.run, name="nemesis", daemon=True)
    try:
        producer.thread.start()
        for reader in readers:
            reader.thread.start()
        time.sleep(2)
        faults.start()
        faults.join(NEMESIS_SECONDS + 90)
        assert not faults.is_alive(), "the nemesis did not finish"
        assert not nemesis.errors, "healing failed: " + "; ".join(nemesis.errors)

        healed_at = time.monotonic()
        states = wait_for(lambda: in_sync_everywhere(cluster.nodes, TOPIC, PARTITIONS, 3), HEAL_TIMEOUT_S,
                          "every partition's ISR to hold all 3 replicas after healing")
        in_sync_after = time.monotonic() - healed_at
        producer.stop.set()
        producer.thread.join(90)
        assert not producer.thread.is_alive(), "the producer did not finish flushing"
        assert not producer.fatal, f"the idempotent producer hit fatal errors: {producer.fatal}"

        final = read_fully_confluent(cluster.bootstrap)
        kcat = read_fully_kcat(cluster.bootstrap)
        # The live readers catch up with the final log, however many leaders they had to follow.
        ends = {p: records[-1][0] if records else -1 for p, records in final.items()}

        def lagging() -> dict[str, list[int]]:
            """reader -> its last offset per partition, for readers behind the final log."""
            last = {r.name: [records[-1][0] if records else -1 for records in r.read.values()] for r in readers}
            return {name: offsets for name, offsets in last.items()
                    if any(offset < ends[p] for p, offset in enumerate(offsets))}

        deadline = time.monotonic() + 20
        while lagging() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        nemesis.stop_event.set()
        producer.stop.set()
        for reader in readers:
            reader.stop.set()
        for thread in (faults, producer.thread, *(reader.thread for reader in readers)):
            if thread.ident is not None:
                thread.join(30)

    history = History(attempted=producer.sent, acked=producer.acked, failed=producer.failed,
                      live_reads={reader.name: reader.read for reader in readers},
                      final_reads={"confluent final": final, "kcat final": kcat})
    extras = (f"{producer.undelivered} without a delivery report; ISR whole "
              f"{in_sync_after:.1f}s after healing, partition -> (leader, epoch, isr): {states}; proxies "
              f"refused {network.refused} connections and severed {network.severed}; reader errors "
              f"{ {r.name: dict(r.errors) for r in readers} }; producer errors "
              f"{Counter(producer.errors).most_common(3)}")
    report = f"{summary(history)}; {extras}"
    assert_valid(history, f"{extras}\n")
    assert producer.acked, "nothing was acknowledged"
    anomalies = [anomaly for reader in readers for anomaly in reader.anomalies]
    assert not anomalies, f"live readers were told their position is out of range: {anomalies}"
    assert not network.unknown_sources, \
        f"node-to-node connections the proxies could not attribute: {network.unknown_sources}"
    assert not lagging(), f"live readers did not catch up with the final log (last offsets " \
        f"{list(ends.values())}) within 20s: {lagging()}"
    return report
