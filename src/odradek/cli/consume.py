"""`odradek consume`: the console consumer.

Without --group it assign()s the topic's partitions (or just --partition) at the requested start
positions and never commits; with --group it subscribe()s as a member of that group and commits.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from odradek.cli.main import CliError, client_config, kafka_error_text, raise_for_kafka_error
from odradek.cli.output import record_json, record_line, write_line

# Group id for assign() mode: librdkafka insists on one, but nothing is ever committed under it.
ASSIGN_MODE_GROUP = "odradek-console-consumer"
BATCH = 500
POLL_S = 0.5

MISSING_TOPIC_CODES = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})


def consumer_config(args: argparse.Namespace) -> dict:
    defaults = {
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "enable.partition.eof": False,
    }
    overrides: dict = {"isolation.level": args.isolation_level}
    if args.group:
        overrides["group.id"] = args.group
    else:
        defaults["group.id"] = ASSIGN_MODE_GROUP
        overrides["enable.auto.commit"] = False
        overrides["enable.auto.offset.store"] = False
    overrides.update(args.consumer_property)
    return client_config(args, defaults, overrides)


def start_offset(args: argparse.Namespace) -> int | None:
    """The start position asked for by the flags, or None for 'whatever the group / reset policy says'."""
    if args.from_beginning:
        return OFFSET_BEGINNING
    if args.offset == "earliest":
        return OFFSET_BEGINNING
    if args.offset == "latest":
        return OFFSET_END
    if args.offset is not None:
        return args.offset
    return None


def start_positions(consumer: Consumer, args: argparse.Namespace,
                    partitions: list[TopicPartition]) -> list[TopicPartition]:
    """Partitions with .offset set: explicit offsets, or the offsets for --from-timestamp."""
    if args.from_timestamp is not None:
        query = [TopicPartition(tp.topic, tp.partition, args.from_timestamp) for tp in partitions]
        try:
            found = consumer.offsets_for_times(query, timeout=args.timeout)
        except KafkaException as exc:
            raise_for_kafka_error(exc, args, "cannot look up offsets by timestamp")
        positions = []
        for tp in found:
            if tp.error is not None:
                raise CliError(f"cannot look up offset by timestamp in partition {tp.partition}: "
                               f"{kafka_error_text(tp.error)}")
            # -1: no record at or after that time; start at the end, so only new records print.
            positions.append(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END))
        return positions
    offset = start_offset(args)
    if offset is None:
        offset = OFFSET_END
    return [TopicPartition(tp.topic, tp.partition, offset) for tp in partitions]


def topic_partitions(consumer: Consumer, args: argparse.Namespace) -> list[TopicPartition]:
    try:
        metadata = consumer.list_topics(args.topic, timeout=args.timeout)
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "cannot fetch metadata")
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None and topic.error.code() in MISSING_TOPIC_CODES:
        raise CliError(f"topic '{args.topic}' does not exist")
    if topic.error is not None and topic.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise CliError(f"not authorized to read topic '{args.topic}'")
    ids = sorted(topic.partitions)
    if args.partition is not None:
        if args.partition not in topic.partitions:
            raise CliError(f"topic '{args.topic}' has no partition {args.partition} (it has {len(ids)})")
        ids = [args.partition]
    return [TopicPartition(args.topic, p) for p in ids]


class Printer:
    """Writes records to stdout in the chosen --format."""

    def __init__(self, args: argparse.Namespace):
        self.format = args.format
        self.print_key = args.print_key or args.format == "kv"
        self.print_headers = args.print_headers
        self.count = 0

    def __call__(self, msg) -> None:
        self.count += 1
        headers = msg.headers()
        if self.format == "json":
            ts_type, ts = msg.timestamp()
            line = record_json(msg.topic(), msg.partition(), msg.offset(), ts if ts_type else None, ts_type,
                               msg.key(), msg.value(), headers)
            write_line(line.encode("utf-8"))
        else:
            write_line(record_line(msg.key(), msg.value(), headers, self.print_key, self.print_headers))


def consume(args: argparse.Namespace) -> int:
    if args.group and args.partition is not None:
        raise CliError("--partition cannot be used with --group (the group assigns partitions)")
    try:
        consumer = Consumer(consumer_config(args))
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "invalid consumer configuration")
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid consumer configuration: {exc}") from None

    printer = Printer(args)
    started = False
    try:
        partitions = topic_partitions(consumer, args)
        if args.group:
            subscribe(consumer, args)
        else:
            consumer.assign(start_positions(consumer, args, partitions))
        started = True
        run(consumer, args, printer)
    except KeyboardInterrupt:
        return 130
    finally:
        try:
            sys.stdout.flush()
        finally:
            consumer.close()
            if started:
                print(f"Processed a total of {printer.count} messages", file=sys.stderr)
    return 0


def subscribe(consumer: Consumer, args: argparse.Namespace) -> None:
    explicit = args.offset is not None or args.from_timestamp is not None

    def on_assign(consumer: Consumer, assigned: list[TopicPartition]) -> None:
        # Only --offset / --from-timestamp override the group's committed positions; --from-beginning
        # just makes the reset policy 'earliest', as kafka-console-consumer does.
        if explicit and assigned:
            consumer.assign(start_positions(consumer, args, assigned))

    if explicit:
        consumer.subscribe([args.topic], on_assign=on_assign)
    else:
        consumer.subscribe([args.topic])


def run(consumer: Consumer, args: argparse.Namespace, printer: Printer) -> None:
    """Print records until --max-messages, or until idle for --timeout-ms."""
    idle_s = args.timeout_ms / 1000 if args.timeout_ms else None
    last_activity = time.monotonic()
    while args.max_messages is None or printer.count < args.max_messages:
        wait = POLL_S
        if idle_s is not None:
            left = last_activity + idle_s - time.monotonic()
            if left <= 0:
                break
            wait = min(wait, left)
        batch = args.max_messages - printer.count if args.max_messages else BATCH
        messages = consumer.consume(num_messages=min(batch, BATCH), timeout=wait)
        for msg in messages:
            err = msg.error()
            if err is not None:
                check_error(err, args)
                continue
            printer(msg)
        if any(m.error() is None for m in messages):
            last_activity = time.monotonic()
            sys.stdout.flush()


def check_error(err: KafkaError, args: argparse.Namespace) -> None:
    """Partition EOF and retriable errors are not fatal; anything else ends the command."""
    if err.code() == KafkaError._PARTITION_EOF:
        return
    if err.code() in MISSING_TOPIC_CODES:
        raise CliError(f"topic '{args.topic}' does not exist")
    if err.fatal() or not err.retriable():
        raise CliError(f"consume failed: {kafka_error_text(err)}")
