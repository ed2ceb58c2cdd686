"""Scale of one node: many partitions, many idle connections, a big consumer group; side by side.

    .venv/bin/python benchmarks/scale.py [--brokers odradek tansu noida-db] [--partitions 10000]
        [--connections 1000] [--members 50] [--runs 3] [--only partitions|connections|group]

- partitions: a node with 1,000 partitions, idle: its RSS. Then --partitions in all: the time to create
  them, Metadata for all of them (median of --runs), one record produced to every partition, the restart
  time (SIGTERM, start, until Metadata answers for every partition) and the idle RSS.
- connections: --connections idle client connections (each sent one ApiVersions request): RSS before and
  after, and the cost per connection.
- group: --members confluent-kafka consumers join one group on a topic with as many partitions: the time
  until every member holds its partitions (Odradek runs with group.initial.rebalance.delay.ms=0).

Each broker runs alone, in turn. Every figure is printed as it is measured, then a table per scenario puts
the brokers side by side with each figure's ratio to the first broker's; a step a broker fails is reported
as such (for example Tansu keeps no data across a restart: its storage is memory only).
"""

import argparse
import socket
import statistics
import struct
import threading
import time
import uuid
from collections.abc import Callable

from brokers import BROKERS, Broker
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create(bootstrap: str, topic: str, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.perf_counter()
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=600).values():
        future.result(600)
    return time.perf_counter() - start


def metadata_seconds(bootstrap: str, expected_partitions: int) -> float:
    """One Metadata request for all topics, timed, on a connected client."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=60)  # connect first
    start = time.perf_counter()
    topics = admin.list_topics(timeout=60).topics
    seconds = time.perf_counter() - start
    found = sum(len(t.partitions) for name, t in topics.items() if not name.startswith("__"))
    if found != expected_partitions:
        raise RuntimeError(f"Metadata listed {found} partitions, expected {expected_partitions}")
    return seconds


MB = 2**20

Figures = dict[str, tuple[float, str]]  # what was measured -> (value, unit)


def record(figures: Figures, name: str, value: float, unit: str) -> None:
    figures[name] = (value, unit)
    print(f"  - {name}: {value:,.1f} {unit}", flush=True)


def partitions_scenario(broker: type[Broker], figures: Figures, total: int, runs: int) -> None:
    node = broker()
    try:
        create(node.bootstrap, "idle-1000", 1000)
        time.sleep(2)
        record(figures, "idle RSS with 1,000 partitions", node.rss_bytes() / MB, "MB")
        record(figures, f"creating {total - 1000:,} more partitions", create(node.bootstrap, "wide", total - 1000),
               "s")
        seconds = statistics.median(metadata_seconds(node.bootstrap, total) for _ in range(runs))
        record(figures, f"Metadata for all {total:,} partitions (median of {runs})", seconds * 1000, "ms")
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 20, "acks": 1})
        start = time.perf_counter()
        for p in range(total - 1000):
            producer.produce("wide", b"x" * 100, partition=p)
            producer.poll(0)
        for p in range(1000):
            producer.produce("idle-1000", b"x" * 100, partition=p)
        if producer.flush(120):
            raise RuntimeError("records to some partitions were not acknowledged")
        record(figures, f"one record to each of the {total:,} partitions", time.perf_counter() - start, "s")
        record(figures, f"idle RSS with {total:,} partitions", node.rss_bytes() / MB, "MB")
        node.stop(keep_data=True)
        start = time.perf_counter()
        record(figures, "restart: listening after", node.start(), "s")
        metadata_seconds(node.bootstrap, total)
        record(figures, "restart: Metadata complete after", time.perf_counter() - start, "s")
    finally:
        node.stop()


API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, api key 18, version 0, correlation 1, no client


def connections_scenario(broker: type[Broker], figures: Figures, count: int) -> None:
    node = broker()
    sockets = []
    try:
        time.sleep(1)
        before = node.rss_bytes()
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", node.port))
            s.sendall(API_VERSIONS_V0)
            sockets.append(s)
        for s in sockets:  # every connection is served, so the node holds its state
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            s.recv(size, socket.MSG_WAITALL)
        time.sleep(1)
        after = node.rss_bytes()
        record(figures, "RSS before the connections", before / MB, "MB")
        record(figures, f"RSS with {count:,} idle connections", after / MB, "MB")
        record(figures, "memory per connection", (after - before) / count / 1024, "KiB")
    finally:
        for s in sockets:
            s.close()
        node.stop()


def group_scenario(broker: type[Broker], figures: Figures, members: int) -> None:
    node = broker({"group.initial.rebalance.delay.ms": "0"})  # only Odradek takes settings
    consumers: list[Consumer] = []
    try:
        topic, group = f"group-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
        create(node.bootstrap, topic, members)
        assigned: dict[int, int] = {}
        lock = threading.Lock()

        def on_assign(index):
            def record(consumer, partitions):
                with lock:
                    assigned[index] = len(partitions)
            return record

        start = time.perf_counter()
        for i in range(members):
            consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                                 "partition.assignment.strategy": "range", "session.timeout.ms": 30000})
            consumer.subscribe([topic], on_assign=on_assign(i))
            consumers.append(consumer)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for consumer in consumers:
                consumer.poll(0)
            with lock:
                if len(assigned) == members and sum(assigned.values()) == members:
                    break
            time.sleep(0.01)
        else:
            raise RuntimeError(f"the group did not settle: {len(assigned)} members assigned")
        record(figures, f"{members} members (classic protocol, range): every one assigned after",
               time.perf_counter() - start, "s")
    finally:
        for consumer in consumers:
            consumer.close()
        node.stop()


def side_by_side(title: str, results: dict[str, Figures], failures: dict[str, str]) -> None:
    print(f"\n### {title}\n")
    names = list(results)
    print("| figure | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    first = results[names[0]]
    for figure, (base, unit) in first.items():
        cells = []
        for name in names:
            value = results[name].get(figure)
            if value is None:
                cells.append("not measured")
            elif name == names[0] or not base:
                cells.append(f"{value[0]:,.1f} {unit}")
            else:
                cells.append(f"{value[0]:,.1f} {unit} (x{value[0] / base:.2f})")
        print(f"| {figure} | " + " | ".join(cells) + " |")
    for name, failure in failures.items():
        print(f"\n{name}: stopped at the step after its last figure: {failure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=list(BROKERS))
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["partitions", "connections", "group"])
    args = parser.parse_args()
    scenarios: dict[str, Callable[[type[Broker], Figures], None]] = {
        "partitions": lambda broker, figures: partitions_scenario(broker, figures, args.partitions, args.runs),
        "connections": lambda broker, figures: connections_scenario(broker, figures, args.connections),
        "group": lambda broker, figures: group_scenario(broker, figures, args.members),
    }
    for scenario, run in scenarios.items():
        if args.only not in (None, scenario):
            continue
        results: dict[str, Figures] = {}
        failures: dict[str, str] = {}
        for name in args.brokers:
            print(f"{scenario}, {name}:", flush=True)
            results[name] = {}
            try:
                run(BROKERS[name], results[name])
            except Exception as exc:  # a broker failing a step is a finding, not the end of the benchmark
                failures[name] = f"{type(exc).__name__}: {exc}"
                print(f"  - failed: {failures[name]}", flush=True)
        side_by_side(scenario, results, failures)


if __name__ == "__main__":
    main()
