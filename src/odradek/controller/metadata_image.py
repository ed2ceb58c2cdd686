"""The metadata image: brokers, topics, partitions and configs, rebuilt by applying metadata records in order.

Records mirror Kafka's KRaft metadata records (RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord,
TopicRecord, PartitionRecord, PartitionChangeRecord, ConfigRecord, RemoveTopicRecord). Every node applies
the committed records of the metadata quorum's log, so every node holds the same image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.uuid_text import uuid_from_text

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass
class PartitionImage:
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: list[int] = field(default_factory=list)  # a reassignment under way
    removing_replicas: list[int] = field(default_factory=list)


@dataclass
class BrokerImage:
    broker_id: int
    epoch: int  # the offset of its registration record: a restarted broker gets a new one
    incarnation_id: str
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None
    fenced: bool = True


@dataclass
class TopicImage:
    name: str
    topic_id: bytes
    partitions: dict[int, PartitionImage] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


class MetadataImage:
    def __init__(self):
        self.brokers: dict[int, BrokerImage] = {}
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[bytes, TopicImage] = {}
        self.broker_configs: dict[str, str] = {}
        self.cluster_id: str | None = None
        self.next_producer_id = 0

    @property
    def live_brokers(self) -> list[int]:
        """Registered brokers that are not fenced, in id order: those that may lead and join ISRs."""
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def apply(self, record: dict, offset: int = 0) -> None:
        kind = record["type"]
        if kind == "RegisterBrokerRecord":
            self.brokers[record["broker_id"]] = BrokerImage(
                record["broker_id"], offset, record["incarnation_id"],
                {name: (host, port) for name, host, port in record["endpoints"]}, record.get("rack"))
        elif kind in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            broker = self.brokers.get(record["broker_id"])
            if broker is not None and broker.epoch == record["epoch"]:
                broker.fenced = kind == "FenceBrokerRecord"
        elif kind == "TopicRecord":
            topic = TopicImage(record["name"], uuid_from_text(record["topic_id"]))
            self.topics[topic.name] = topic
            self.topics_by_id[topic.topic_id] = topic
        elif kind == "PartitionRecord":
            topic = self.topics_by_id[uuid_from_text(record["topic_id"])]
            topic.partitions[record["partition"]] = PartitionImage(
                record["partition"], list(record["replicas"]), list(record["isr"]), record["leader"],
                record.get("leader_epoch", 0), record.get("partition_epoch", 0))
        elif kind == "PartitionChangeRecord":
            partition = self.topics_by_id[uuid_from_text(record["topic_id"])].partitions[record["partition"]]
            for key in ("replicas", "isr", "leader", "leader_epoch", "adding_replicas", "removing_replicas"):
                if key in record:
                    setattr(partition, key, record[key])
            partition.partition_epoch += 1
        elif kind == "ConfigRecord":
            target = self._config_target(record)
            if target is not None:
                if record["value"] is None:
                    target.pop(record["name"], None)
                else:
                    target[record["name"]] = record["value"]
        elif kind == "RemoveTopicRecord":
            topic = self.topics_by_id.pop(uuid_from_text(record["topic_id"]))
            del self.topics[topic.name]
        elif kind == "ProducerIdsRecord":
            self.next_producer_id = record["next_producer_id"]
        elif kind == "ClusterRecord":
            self.cluster_id = record["cluster_id"]
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")

    def _config_target(self, record: dict) -> dict[str, str] | None:
        if record["resource_type"] == TOPIC_RESOURCE:
            topic = self.topics.get(record["resource_name"])
            return topic.configs if topic else None
        return self.broker_configs
