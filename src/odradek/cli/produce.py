"""`odradek produce`: the console producer. Each input line becomes one record.

Lines are parsed as kafka-console-producer's LineMessageReader does: with `parse.headers=true` a line
starts with `k1:v1,k2:v2` followed by `headers.delimiter`; with `parse.key=true` (or --key-separator)
the key runs up to the first `key.separator`; the rest of the line is the value.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Producer

from odradek.cli.main import CliError, client_config, kafka_error_text, raise_for_kafka_error, unescape

MAX_REPORTED_FAILURES = 10
DEFAULT_MESSAGE_TIMEOUT_MS = 30_000

READER_PROPERTIES = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "null.marker": None,
    "ignore.error": "false",
}


class LineError(ValueError):
    """A line that does not have the shape the reader properties ask for."""


Header = tuple[str, bytes | None]


@dataclass
class LineReader:
    """Splits one input line (bytes, newline removed) into headers, key and value."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False
    static_headers: list[Header] = field(default_factory=list)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LineReader:
        props = dict(READER_PROPERTIES)
        for key, value in args.property:
            if key not in READER_PROPERTIES:
                raise CliError(f"unknown --property '{key}' (known: {', '.join(READER_PROPERTIES)})")
            props[key] = unescape(value)
        if args.key_separator is not None:
            props["parse.key"] = "true"
            props["key.separator"] = args.key_separator
        for name in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
            if not props[name]:
                raise CliError(f"{name} must not be empty")
        null_marker = props["null.marker"]
        return cls(
            parse_key=truthy(props["parse.key"], "parse.key"),
            key_separator=props["key.separator"].encode(),
            parse_headers=truthy(props["parse.headers"], "parse.headers"),
            headers_delimiter=props["headers.delimiter"].encode(),
            headers_separator=props["headers.separator"].encode(),
            headers_key_separator=props["headers.key.separator"].encode(),
            null_marker=null_marker.encode() if null_marker else None,
            ignore_error=truthy(props["ignore.error"], "ignore.error"),
            static_headers=[(k, v.encode()) for k, v in args.header],
        )

    def _split(self, enabled: bool, line: bytes, start: int, separator: bytes, what: str) -> bytes | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise LineError(f"no {what} {text_of(separator)!r} found")
        return line[start:index]

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data

    def parse(self, line: bytes) -> tuple[list[Header], bytes | None, bytes | None]:
        header_text = self._split(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        offset = 0 if header_text is None else len(header_text) + len(self.headers_delimiter)
        key = self._split(self.parse_key, line, offset, self.key_separator, "key separator")
        if key is not None:
            offset += len(key) + len(self.key_separator)
        value = line[offset:]
        headers = list(self.static_headers)
        if header_text:
            headers += self._headers(header_text)
        return headers, None if key is None else self._nullable(key), self._nullable(value)

    def _headers(self, header_text: bytes) -> list[Header]:
        headers = []
        for pair in header_text.split(self.headers_separator):
            name, sep, value = pair.partition(self.headers_key_separator)
            if not sep:
                if not self.ignore_error:
                    raise LineError(f"no header key separator {text_of(self.headers_key_separator)!r} "
                                    f"in header {text_of(pair)!r}")
                headers.append((text_of(pair), None))
                continue
            if self.null_marker is not None and name == self.null_marker:
                raise LineError("header key cannot be the null marker")
            headers.append((text_of(name), self._nullable(value)))
        return headers


def truthy(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise CliError(f"{name} must be true or false, got '{value}'")
    return lowered == "true"


def text_of(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def input_lines(stream):
    """Lines without their line ending (\\n or \\r\\n), read one at a time so interactive input flows."""
    for raw in iter(stream.readline, b""):
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        yield raw


class Deliveries:
    """Delivery reports: counts outcomes and reports the first failures on stderr."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.last_error: KafkaError | None = None

    def __call__(self, err, msg) -> None:
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        self.last_error = err
        if self.failed <= MAX_REPORTED_FAILURES:
            print(f"error: record not delivered to {msg.topic()}: {kafka_error_text(err)}", file=sys.stderr)


def producer_config(args: argparse.Namespace) -> dict:
    """Defaults, then --command-config, then the flags, then --producer-property."""
    # murmur2_random: a key goes to the partition Kafka's console producer (any Java producer) gives it.
    defaults = {"acks": "all", "compression.type": "none", "message.timeout.ms": DEFAULT_MESSAGE_TIMEOUT_MS,
                "partitioner": "murmur2_random"}
    overrides: dict = {}
    if args.acks is not None:
        overrides["acks"] = "all" if args.acks in ("all", "-1") else args.acks
    if args.compression is not None:
        overrides["compression.type"] = args.compression
    overrides.update(args.producer_property)
    return client_config(args, defaults, overrides)


def check_topic(producer: Producer, args: argparse.Namespace) -> None:
    try:
        metadata = producer.list_topics(args.topic, timeout=args.timeout)
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "cannot fetch metadata")
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None and topic.error.code() in (
            KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
        raise CliError(f"topic '{args.topic}' does not exist")
    if topic.error is not None and topic.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise CliError(f"not authorized to write to topic '{args.topic}'")
    if args.partition is not None and topic.partitions and args.partition >= len(topic.partitions):
        raise CliError(f"topic '{args.topic}' has no partition {args.partition} "
                       f"(it has {len(topic.partitions)})")


def produce(args: argparse.Namespace) -> int:
    reader = LineReader.from_args(args)
    stream = None
    if args.file:
        try:
            stream = open(args.file, "rb")  # noqa: SIM115
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    try:
        return _produce(args, reader, stream if stream is not None else sys.stdin.buffer)
    finally:
        if stream is not None:
            stream.close()


def _produce(args: argparse.Namespace, reader: LineReader, stream) -> int:
    try:
        producer = Producer(producer_config(args))
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "invalid producer configuration")
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid producer configuration: {exc}") from None
    check_topic(producer, args)

    deliveries = Deliveries()
    bad_lines = 0
    sent = 0
    interrupted = False
    partition = {} if args.partition is None else {"partition": args.partition}
    try:
        for number, line in enumerate(input_lines(stream), 1):
            try:
                headers, key, value = reader.parse(line)
            except LineError as exc:
                bad_lines += 1
                print(f"error: line {number}: {exc}", file=sys.stderr)
                continue
            while True:
                try:
                    producer.produce(args.topic, value=value, key=key, headers=headers or None,
                                     on_delivery=deliveries, **partition)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    producer.poll(0.1)
                except KafkaException as exc:
                    raise_for_kafka_error(exc, args, "cannot produce")
            sent += 1
            producer.poll(0)
    except KeyboardInterrupt:
        interrupted = True

    remaining = producer.flush()
    if remaining:
        deliveries.failed += remaining
    if deliveries.failed:
        reason = f": {kafka_error_text(deliveries.last_error)}" if deliveries.last_error is not None else ""
        print(f"error: {deliveries.failed} of {sent} records not delivered{reason}", file=sys.stderr)
    if bad_lines:
        print(f"error: {bad_lines} input lines skipped", file=sys.stderr)
    if interrupted:
        return 130
    return 1 if deliveries.failed or bad_lines else 0
