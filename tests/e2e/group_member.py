"""A consumer-group member in its own process, so tests can close it or kill -9 it.

Prints one JSON object per line: {"assignment": [partitions]} whenever its assignment changes,
{"record": [partition, offset]} for every record it consumes (after committing it synchronously), and
{"error": "..."} for every error the consumer reports (a test that fails shows them).
"""

import json
import signal
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    if extra.get("group.protocol") != "consumer":  # KIP-848 members get their timeouts from the broker
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer = Consumer({**config, **extra})
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer.subscribe([topic])
    shown = None
    while not stopping:
        msg = consumer.poll(0.1)
        assignment = sorted(tp.partition for tp in consumer.assignment())
        if assignment != shown:
            shown = assignment
            print(json.dumps({"assignment": assignment}), flush=True)
        if msg is None:
            continue
        if msg.error():
            print(json.dumps({"error": f"{msg.error().name()}: {msg.error().str()}"}), flush=True)
            continue
        consumer.commit(msg, asynchronous=False)
        print(json.dumps({"record": [msg.partition(), msg.offset()]}), flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
