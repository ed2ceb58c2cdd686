"""Scale of one node: many partitions, many idle connections, a big consumer group.

    .venv/bin/python benchmarks/scale.py [--partitions 10000] [--connections 1000] [--members 50] [--runs 3]

- partitions: a node with 1,000 partitions, idle: its RSS. Then --partitions in all: the time to create
  them, Metadata for all of them (median of --runs), one record produced to every partition, the restart
  time (SIGTERM, start, until Metadata answers for every partition) and the idle RSS.
- connections: --connections idle client connections (each sent one ApiVersions request): RSS before and
  after, and the cost per connection.
- group: --members confluent-kafka consumers join one group on a topic with as many partitions: the time
  until every member holds its partitions (the node runs with group.initial.rebalance.delay.ms=0).
"""

import argparse
import socket
import statistics
import struct
import threading
import time
import uuid

from brokers import Odradek
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


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def partitions_scenario(total: int, runs: int) -> None:
    node = Odradek()
    try:
        create(node.bootstrap, "idle-1000", 1000)
        time.sleep(2)
        print(f"- idle node with 1,000 partitions: RSS {mb(node.rss_bytes())}")
        created = create(node.bootstrap, "wide", total - 1000)
        print(f"- creating {total - 1000:,} more partitions ({total:,} in all): {created:.1f} s")
        seconds = statistics.median(metadata_seconds(node.bootstrap, total) for _ in range(runs))
        print(f"- Metadata for all {total:,} partitions: {seconds * 1000:.0f} ms (median of {runs})")
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 20, "acks": 1})
        start = time.perf_counter()
        for p in range(total - 1000):
            producer.produce("wide", b"x" * 100, partition=p)
            producer.poll(0)
        for p in range(1000):
            producer.produce("idle-1000", b"x" * 100, partition=p)
        producer.flush(120)
        print(f"- one record to each of the {total:,} partitions: {time.perf_counter() - start:.1f} s")
        print(f"- idle with {total:,} partitions: RSS {mb(node.rss_bytes())}")
        node.stop(keep_data=True)
        start = time.perf_counter()
        listening = node.start()
        metadata_seconds(node.bootstrap, total)
        print(f"- restart with {total:,} partitions: listening after {listening:.1f} s, Metadata complete after "
              f"{time.perf_counter() - start:.1f} s")
    finally:
        node.stop()


API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, api key 18, version 0, correlation 1, no client


def connections_scenario(count: int) -> None:
    node = Odradek()
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
        print(f"- {count:,} idle connections: RSS {mb(before)} -> {mb(after)}, "
              f"{(after - before) / count / 1024:.1f} KiB per connection")
    finally:
        for s in sockets:
            s.close()
        node.stop()


def group_scenario(members: int) -> None:
    node = Odradek({"group.initial.rebalance.delay.ms": "0"})
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
        print(f"- consumer group of {members} members (classic protocol, range): every member assigned after "
              f"{time.perf_counter() - start:.1f} s")
    finally:
        for consumer in consumers:
            consumer.close()
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["partitions", "connections", "group"])
    args = parser.parse_args()
    if args.only in (None, "partitions"):
        partitions_scenario(args.partitions, args.runs)
    if args.only in (None, "connections"):
        connections_scenario(args.connections)
    if args.only in (None, "group"):
        group_scenario(args.members)


if __name__ == "__main__":
    main()
