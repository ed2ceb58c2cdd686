"""The controller: validates metadata changes (topics, partitions, configs), makes them durable, applies them.

Every change is a list of metadata records: appended to the metadata log (fsynced), then applied to the
image, then handed to the broker side so it can create, alter or delete partition logs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from odradek.config import BROKER_CONFIG_BY_NAME, BrokerConfig, validate_topic_name
from odradek.controller.metadata_image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    TopicImage,
)
from odradek.controller.metadata_log import MetadataLog
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig
from odradek.uuid_text import uuid_to_text

# Like Kafka's controller (max.records.per.user.op), one operation may not create more than this many partitions.
MAX_PARTITIONS_PER_REQUEST = 10_000
PRODUCER_ID_BLOCK_SIZE = 1000


class Controller:
    def __init__(self, config: BrokerConfig, metadata_dir: str, cluster_id: str,
                 on_records: Callable[[list[dict]], None]):
        self.config = config
        self.node_id = config.node_id
        self.image = MetadataImage()
        self.log = MetadataLog(metadata_dir)
        self._cluster_id = cluster_id
        self._on_records = on_records
        self._producer_ids = iter(())

    def start(self) -> None:
        for record in self.log.replay():
            self.image.apply(record)
        if self.image.cluster_id is None:
            self._commit([{"type": "ClusterRecord", "cluster_id": self._cluster_id}])

    def close(self) -> None:
        self.log.close()

    @property
    def live_brokers(self) -> list[int]:
        return [self.node_id]

    def _commit(self, records: list[dict]) -> None:
        self.log.append(records)
        for record in records:
            self.image.apply(record)
        self._on_records(records)

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, also across restarts: ids are reserved a block at a time."""
        producer_id = next(self._producer_ids, None)
        if producer_id is None:
            start = self.image.next_producer_id
            self._commit([{"type": "ProducerIdsRecord", "next_producer_id": start + PRODUCER_ID_BLOCK_SIZE}])
            self._producer_ids = iter(range(start, start + PRODUCER_ID_BLOCK_SIZE))
            producer_id = next(self._producer_ids)
        return producer_id

    # topics

    def topic_defaults(self) -> dict[str, str]:
        defaults = self.config.topic_defaults()
        for name, value in self.image.broker_configs.items():
            definition = BROKER_CONFIG_BY_NAME.get(name)
            if definition and definition.topic_name:
                defaults[definition.topic_name] = value
        return defaults

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties({**self.topic_defaults(), **topic.configs})

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        for name in configs:
            if name not in TOPIC_CONFIG_NAMES:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        LogConfig.from_properties({**self.topic_defaults(), **configs})

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> TopicImage | None:
        problem = validate_topic_name(name)
        if problem:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name in self.image.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if _collides(name, self.image.topics):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with an existing topic: '.' and '_' are interchangeable in metric names.")
        configs = dict(configs or {})
        self.validate_topic_configs(configs)
        replicas_by_partition = self._place(num_partitions, replication_factor, assignments or {}, 0)
        if validate_only:
            return None
        topic_id = uuid.uuid4().bytes
        records = [{"type": "TopicRecord", "name": name, "topic_id": uuid_to_text(topic_id)}]
        records += [{"type": "ConfigRecord", "resource_type": TOPIC_RESOURCE, "resource_name": name,
                     "name": key, "value": value} for key, value in configs.items()]
        records += [self._partition_record(topic_id, index, replicas) for index, replicas in replicas_by_partition.items()]
        self._commit(records)
        return self.image.topics[name]

    def _partition_record(self, topic_id: bytes, index: int, replicas: list[int]) -> dict:
        return {"type": "PartitionRecord", "topic_id": uuid_to_text(topic_id), "partition": index,
                "replicas": replicas, "isr": list(replicas), "leader": replicas[0], "leader_epoch": 0,
                "partition_epoch": 0}

    def _place(self, num_partitions: int, replication_factor: int, assignments: dict[int, list[int]],
               first_index: int) -> dict[int, list[int]]:
        brokers = self.live_brokers
        if assignments:
            if num_partitions not in (-1, len(assignments)) and first_index == 0:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Both partition count and replica assignments were given.")
            expected = list(range(first_index, first_index + len(assignments)))
            if sorted(assignments) != expected:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions of the assignment must be consecutive from "
                                 f"{first_index}.")
            for replicas in assignments.values():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "A replica assignment is empty or repeats a broker.")
                unknown = [b for b in replicas if b not in brokers]
                if unknown:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in the assignment: {unknown}")
            return dict(assignments)
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if num_partitions > MAX_PARTITIONS_PER_REQUEST:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"Unable to create {num_partitions} partitions at once: at most {MAX_PARTITIONS_PER_REQUEST}.")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if replication_factor > len(brokers):
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): the target replication "
                             f"factor of {replication_factor} cannot be reached because only {len(brokers)} broker(s) "
                             "are registered.")
        return {first_index + i: [brokers[(first_index + i + r) % len(brokers)] for r in range(replication_factor)]
                for i in range(num_partitions)}

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self._commit([{"type": "RemoveTopicRecord", "topic_id": uuid_to_text(topic.topic_id), "name": name}])

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than or equal to the requested {count}.")
        if assignments is not None and len(assignments) != count - current:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Increasing the number of partitions by {count - current} but {len(assignments)} assignments provided.")
        replication_factor = len(topic.partitions[0].replicas)
        placed = self._place(count - current, replication_factor,
                             {current + i: list(r) for i, r in enumerate(assignments or [])}, current)
        if not validate_only:
            self._commit([self._partition_record(topic.topic_id, index, replicas) for index, replicas in placed.items()])

    # configs

    def alter_configs(self, resource_type: int, resource_name: str, changes: dict[str, str | None],
                      validate_only: bool = False) -> None:
        """Apply `changes` (None deletes an override); a full AlterConfigs passes every other key as None."""
        if resource_type == TOPIC_RESOURCE:
            topic = self.image.topics.get(resource_name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource_name} does not exist.")
            merged = {**topic.configs, **changes}
            self.validate_topic_configs({k: v for k, v in merged.items() if v is not None})
        elif resource_type == BROKER_RESOURCE:
            if resource_name not in ("", str(self.node_id)):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource_name}.")
            for name, value in changes.items():
                definition = BROKER_CONFIG_BY_NAME.get(name)
                if definition is None:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown broker config name: {name}")
                if definition.read_only:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Cannot update {name} at run time: it needs a restart.")
                if value is not None and definition.topic_name:
                    LogConfig.from_properties({**self.topic_defaults(), definition.topic_name: value})
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}.")
        if validate_only:
            return
        name_key = resource_name if resource_type == TOPIC_RESOURCE else ""
        self._commit([{"type": "ConfigRecord", "resource_type": resource_type, "resource_name": name_key,
                       "name": key, "value": value} for key, value in changes.items()])


def _collides(name: str, existing: dict) -> bool:
    normalized = name.replace(".", "_")
    return any(other != name and other.replace(".", "_") == normalized for other in existing)
