"""The SQL server's command topic: one compacted partition holding the catalog as commands.

The server reads it to its end when it starts (read_committed), and appends each accepted statement's
commands before it acts on them, so a restart finds every stream, table and persistent query again.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.sql.catalog import Command, decode_command, encode_command

_TIMEOUT_S = 30.0


def command_topic_name(service_id: str) -> str:
    """As ksqlDB names its command topic after `ksql.service.id`."""
    return f"_odradek-sql-{service_id}_command_topic"


class CommandLog:
    def __init__(self, bootstrap: str, client_config: dict, topic: str, replication_factor: int = 3):
        self.topic = topic
        self.transactional_id = f"odradek-sql-{topic}"
        self.client_config = {"bootstrap.servers": bootstrap, **client_config}
        self.replication_factor = replication_factor
        self.admin = AdminClient(dict(self.client_config))
        self.producer: Producer | None = None

    def ensure_topic(self) -> None:
        metadata = self.admin.list_topics(timeout=_TIMEOUT_S)
        if self.topic in metadata.topics:
            return
        replicas = max(1, min(self.replication_factor, len(metadata.brokers)))
        new = NewTopic(self.topic, num_partitions=1, replication_factor=replicas,
                       config={"cleanup.policy": "compact", "min.insync.replicas": str(min(2, replicas))})
        try:
            self.admin.create_topics([new])[self.topic].result(_TIMEOUT_S)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def read_all(self) -> list[tuple[int, Command]]:
        """Every command in the topic, in order, with its offset."""
        consumer = Consumer({**self.client_config, "group.id": "odradek-sql-command-reader",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        commands: list[tuple[int, Command]] = []
        try:
            consumer.assign([TopicPartition(self.topic, 0, 0)])
            deadline = time.monotonic() + _TIMEOUT_S
            while True:
                message = consumer.poll(1.0)
                if message is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"timed out reading the command topic {self.topic}")
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        return commands
                    raise KafkaException(message.error())
                commands.append((message.offset(), decode_command(message.key(), message.value())))
        finally:
            consumer.close()

    def append(self, commands: list[Command]) -> list[int]:
        """Write a statement's commands in one transaction (all or none) and return their offsets.

        The transactional id is the service's, so a server that starts fences any earlier one still writing
        under the same service id; a write that fails or times out is aborted, never applied later.
        """
        if self.producer is None:
            self.producer = Producer({**self.client_config, "transactional.id": self.transactional_id,
                                      "acks": "all", "linger.ms": 0})
            self.producer.init_transactions(_TIMEOUT_S)
        errors: list = []
        offsets: dict[int, int] = {}

        def delivered(index: int):
            def callback(err, message):
                if err:
                    errors.append(err)
                else:
                    offsets[index] = message.offset()
            return callback

        self.producer.begin_transaction()
        try:
            for index, command in enumerate(commands):
                key, value = encode_command(command)
                self.producer.produce(self.topic, key=key, value=value, partition=0, on_delivery=delivered(index))
            if self.producer.flush(_TIMEOUT_S):
                raise TimeoutError(f"the command topic {self.topic} did not take the command within "
                                   f"{_TIMEOUT_S:g}s")
            if errors:
                raise KafkaException(errors[0])
            self.producer.commit_transaction(_TIMEOUT_S)
        except BaseException:
            self._abort()
            raise
        return [offsets[i] for i in range(len(commands))]

    def _abort(self) -> None:
        try:
            self.producer.abort_transaction(_TIMEOUT_S)
        except KafkaException:  # fenced, or the transaction is beyond saving: start over with a new producer
            self.producer = None

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(_TIMEOUT_S)
