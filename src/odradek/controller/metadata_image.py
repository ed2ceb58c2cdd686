"""The metadata image: brokers, topics, partitions and configs, rebuilt by applying metadata records in order.

Records mirror Kafka's KRaft metadata records (RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord,
UnregisterBrokerRecord, TopicRecord, PartitionRecord, PartitionChangeRecord, ConfigRecord, RemoveTopicRecord,
FeatureLevelRecord, UserScramCredentialRecord, RemoveUserScramCredentialRecord, ClientQuotaRecord,
AccessControlEntryRecord, RemoveAccessControlEntryRecord; byte fields in base64). Every node applies the
committed records of the metadata quorum's log, so every node holds the same image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from odradek.uuid_text import uuid_from_text, uuid_to_text

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
        # dynamic broker configs by resource name: "" holds the cluster-wide defaults, "1" broker 1's own
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.cluster_id: str | None = None
        self.next_producer_id = 0
        self.features: dict[str, int] = {}  # finalized feature levels
        self.features_epoch = -1  # the metadata offset of the last feature level change
        # (user, SCRAM mechanism code) -> its UserScramCredentialRecord (salt, stored and server key, iterations)
        self.scram_credentials: dict[tuple[str, int], dict] = {}
        # ACL id (its text form) -> its AccessControlEntryRecord, oldest first
        self.acls: dict[str, dict] = {}
        # client quota entity, as sorted (entity type, name or None for the default) pairs -> {quota key: value}
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}

    @property
    def live_brokers(self) -> list[int]:
        """Registered brokers that are not fenced, in id order: those that may lead and join ISRs."""
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def apply(self, record: dict, offset: int = 0) -> None:
        kind = record["type"]
        if kind == "RegisterBrokerRecord":  # a snapshot's copy carries the epoch and fencing it had
            self.brokers[record["broker_id"]] = BrokerImage(
                record["broker_id"], record.get("epoch", offset), record["incarnation_id"],
                {name: (host, port) for name, host, port in record["endpoints"]}, record.get("rack"),
                record.get("fenced", True))
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
                record.get("leader_epoch", 0), record.get("partition_epoch", 0),
                list(record.get("adding_replicas", ())), list(record.get("removing_replicas", ())))
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
        elif kind == "FeatureLevelRecord":
            if record["feature_level"]:
                self.features[record["name"]] = record["feature_level"]
            else:
                self.features.pop(record["name"], None)
            self.features_epoch = record.get("epoch", offset)
        elif kind == "UserScramCredentialRecord":
            self.scram_credentials[(record["name"], record["mechanism"])] = record
        elif kind == "RemoveUserScramCredentialRecord":
            self.scram_credentials.pop((record["name"], record["mechanism"]), None)
        elif kind == "AccessControlEntryRecord":
            self.acls[record["id"]] = record
        elif kind == "RemoveAccessControlEntryRecord":
            self.acls.pop(record["id"], None)
        elif kind == "ClientQuotaRecord":  # a value is a float, or its text where JSON has none (inf, nan)
            entity = tuple(sorted((e["entity_type"], e["entity_name"]) for e in record["entity"]))
            values = self.client_quotas.setdefault(entity, {})
            if record["remove"]:
                values.pop(record["key"], None)
                if not values:
                    del self.client_quotas[entity]
            else:
                values[record["key"]] = float(record["value"])
        elif kind == "UnregisterBrokerRecord":
            broker = self.brokers.get(record["broker_id"])
            if broker is not None and broker.epoch == record["epoch"]:
                del self.brokers[record["broker_id"]]
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")

    def load_snapshot(self, records: list[dict]) -> None:
        """Become the image a snapshot's records describe, forgetting everything before."""
        self.__init__()
        for record in records:
            self.apply(record)

    def snapshot_records(self) -> list[dict]:
        """Records that rebuild this image from nothing: the state of a metadata snapshot."""
        records: list[dict] = []
        if self.cluster_id is not None:
            records.append({"type": "ClusterRecord", "cluster_id": self.cluster_id})
        records.append({"type": "ProducerIdsRecord", "next_producer_id": self.next_producer_id})
        records += [{"type": "FeatureLevelRecord", "name": name, "feature_level": level, "epoch": self.features_epoch}
                    for name, level in sorted(self.features.items())]
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            records.append({"type": "RegisterBrokerRecord", "broker_id": b.broker_id, "epoch": b.epoch,
                            "incarnation_id": b.incarnation_id, "fenced": b.fenced, "rack": b.rack,
                            "endpoints": [[name, host, port] for name, (host, port) in b.endpoints.items()]})
        records += [{"type": "ConfigRecord", "resource_type": BROKER_RESOURCE, "resource_name": resource, "name": name,
                     "value": value} for resource, configs in sorted(self.broker_configs.items())
                    for name, value in sorted(configs.items())]
        records += [record for _, record in sorted(self.scram_credentials.items())]
        records += list(self.acls.values())
        records += [client_quota_record(entity, key, value) for entity, values in sorted(self.client_quotas.items(),
                                                                                         key=_entity_order)
                    for key, value in sorted(values.items())]
        for topic in self.topics.values():
            topic_id = uuid_to_text(topic.topic_id)
            records.append({"type": "TopicRecord", "name": topic.name, "topic_id": topic_id})
            records += [{"type": "ConfigRecord", "resource_type": TOPIC_RESOURCE, "resource_name": topic.name,
                         "name": name, "value": value} for name, value in sorted(topic.configs.items())]
            records += [{"type": "PartitionRecord", "topic_id": topic_id, "partition": p.partition,
                         "replicas": p.replicas, "isr": p.isr, "leader": p.leader, "leader_epoch": p.leader_epoch,
                         "partition_epoch": p.partition_epoch, "adding_replicas": p.adding_replicas,
                         "removing_replicas": p.removing_replicas} for _, p in sorted(topic.partitions.items())]
        return records

    def _config_target(self, record: dict) -> dict[str, str] | None:
        if record["resource_type"] == TOPIC_RESOURCE:
            topic = self.topics.get(record["resource_name"])
            return topic.configs if topic else None
        return self.broker_configs.setdefault(record["resource_name"], {})

    def dynamic_broker_configs(self, broker_id: int | str) -> tuple[dict[str, str], dict[str, str]]:
        """(broker `broker_id`'s own dynamic configs, the cluster-wide dynamic defaults)."""
        return self.broker_configs.get(str(broker_id), {}), self.broker_configs.get("", {})


def client_quota_record(entity, key: str, value: float | None) -> dict:
    """A ClientQuotaRecord setting `key` of `entity` ((type, name) pairs) to `value`, or removing it (None)."""
    return {"type": "ClientQuotaRecord",
            "entity": [{"entity_type": entity_type, "entity_name": name} for entity_type, name in entity],
            "key": key, "value": 0.0 if value is None else value if math.isfinite(value) else str(value),
            "remove": value is None}


def _entity_order(item: tuple) -> tuple:
    """Sorts entities with default (None) names, which do not compare with names."""
    return tuple((entity_type, name is not None, name or "") for entity_type, name in item[0])
