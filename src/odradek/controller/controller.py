"""The controller: validates metadata changes and commits them through the metadata quorum.

Only the active controller (the quorum's leader, with everything committed applied) runs commands. Each
command reads the image, builds metadata records and waits until the quorum has committed them; by then
every record is applied to the image (by the node, on every node alike). Commands run one at a time, so
each validates against the results of the one before.

Besides topics and configs it keeps the brokers' lifecycle: registration (fenced until caught up with the
metadata log), heartbeats (a broker silent for broker.session.timeout.ms is fenced), and the leadership
of partitions: a fenced broker leaves every ISR it was in (unless it is the last member) and its
leaderships pass to another in-sync replica; with none left the partition waits leaderless for one,
unless unclean.leader.election.enable lets an out-of-sync replica lead.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

from odradek.config import (
    BROKER_CONFIG_BY_NAME,
    BrokerConfig,
    ConfigError,
    convert,
    unprefixed,
    validate_topic_name,
)
from odradek.controller import acls, bootstrap, client_quotas, features, scram_credentials
from odradek.controller.metadata_image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from odradek.controller.placement import place_replicas
from odradek.dynamic_config import DynamicBrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import AclBinding, AclBindingFilter
from odradek.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig
from odradek.uuid_text import uuid_to_text

# Like Kafka's controller (max.records.per.user.op), one operation may not create more than this many partitions.
MAX_PARTITIONS_PER_REQUEST = 10_000
PRODUCER_ID_BLOCK_SIZE = 1000
COMMIT_TIMEOUT_S = 30.0
NO_LEADER = -1


class Quorum(Protocol):
    @property
    def is_active(self) -> bool: ...

    async def propose(self, data: object, timeout_s: float) -> int: ...


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Controller:
    def __init__(self, config: BrokerConfig, image: MetadataImage, quorum: Quorum):
        self.config = config
        self.node_id = config.node_id
        self.image = image
        self.quorum = quorum
        self.dynamic = DynamicBrokerConfig(config, image, config.node_id)
        self._lock = asyncio.Lock()
        self._last_heartbeat_ms: dict[int, int] = {}  # kept by the active controller only

    @property
    def is_active(self) -> bool:
        return self.quorum.is_active

    @property
    def live_brokers(self) -> list[int]:
        return self.image.live_brokers

    async def _commit(self, records: list[dict]) -> int:
        return await self.quorum.propose(records, COMMIT_TIMEOUT_S)

    def check_active(self) -> None:
        if not self.quorum.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the active controller")

    async def activate(self, cluster_id: str) -> None:
        """This node just became the active controller: give every broker a fresh session, name the cluster."""
        async with self._lock:
            now = monotonic_ms()
            self._last_heartbeat_ms = dict.fromkeys(self.image.brokers, now)
            records = []
            if self.image.cluster_id is None:  # a new cluster: also what `storage format` bootstraps it with
                records.append({"type": "ClusterRecord", "cluster_id": cluster_id})
                records += bootstrap.read_records(self.config.log_dirs[0])
            if not self.image.features:  # a new cluster, or one from before feature levels
                records += [{"type": "FeatureLevelRecord", "name": name, "feature_level": level}
                            for name, level in features.DEFAULT_LEVELS.items()]
            if records and self.quorum.is_active:
                await self._commit(records)

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A block of producer ids never handed out before (start, length), also across restarts."""
        async with self._lock:
            self.check_active()
            start = self.image.next_producer_id
            await self._commit([{"type": "ProducerIdsRecord", "next_producer_id": start + PRODUCER_ID_BLOCK_SIZE}])
            return start, PRODUCER_ID_BLOCK_SIZE

    # topics

    def topic_defaults(self) -> dict[str, str]:
        return self.dynamic.current.topic_defaults()

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties({**self.topic_defaults(), **topic.configs})

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        for name in configs:
            if name not in TOPIC_CONFIG_NAMES:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        LogConfig.from_properties({**self.topic_defaults(), **configs})

    async def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                           assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                           validate_only: bool = False) -> TopicImage | None:
        async with self._lock:
            self.check_active()
            problem = validate_topic_name(name)
            if problem:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {problem}")
            if name in self.image.topics:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if _collides(name, self.image.topics):
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with an existing "
                                 "topic: '.' and '_' are interchangeable in metric names.")
            configs = dict(configs or {})
            self.validate_topic_configs(configs)
            replicas_by_partition = self._place(num_partitions, replication_factor, assignments or {}, 0)
            if validate_only:
                return None
            topic_id = uuid.uuid4().bytes
            records = [{"type": "TopicRecord", "name": name, "topic_id": uuid_to_text(topic_id)}]
            records += [{"type": "ConfigRecord", "resource_type": TOPIC_RESOURCE, "resource_name": name,
                         "name": key, "value": value} for key, value in configs.items()]
            records += [self._partition_record(topic_id, index, replicas)
                        for index, replicas in replicas_by_partition.items()]
            await self._commit(records)
            return self.image.topics[name]

    def _partition_record(self, topic_id: bytes, index: int, replicas: list[int]) -> dict:
        live = set(self.live_brokers)
        isr = [r for r in replicas if r in live] or list(replicas)
        leader = next((r for r in isr if r in live), NO_LEADER)
        return {"type": "PartitionRecord", "topic_id": uuid_to_text(topic_id), "partition": index,
                "replicas": replicas, "isr": isr, "leader": leader, "leader_epoch": 0, "partition_epoch": 0}

    def _place(self, num_partitions: int, replication_factor: int, assignments: dict[int, list[int]],
               first_index: int) -> dict[int, list[int]]:
        registered = set(self.image.brokers)
        if assignments:
            if num_partitions not in (-1, len(assignments)) and first_index == 0:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Both partition count and replica assignments were given.")
            expected = list(range(first_index, first_index + len(assignments)))
            if sorted(assignments) != expected:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions of the assignment must be "
                                 f"consecutive from {first_index}.")
            live = set(self.live_brokers)
            sizes = {len(replicas) for replicas in assignments.values()}
            if len(sizes) > 1 or first_index > 0 and replication_factor not in sizes:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "All partitions of a topic must have the same number of replicas.")
            for replicas in assignments.values():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "A replica assignment is empty or repeats a broker.")
                unknown = [b for b in replicas if b not in registered]
                if unknown:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Unknown broker(s) in the assignment: {unknown}")
                if not live.intersection(replicas):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"All brokers of the assignment {replicas} are fenced or shutting down.")
            return dict(assignments)
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if num_partitions > MAX_PARTITIONS_PER_REQUEST:
            raise KafkaError(ErrorCode.POLICY_VIOLATION, f"Unable to create {num_partitions} partitions at once: "
                             f"at most {MAX_PARTITIONS_PER_REQUEST}.")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value.")
        live = self.live_brokers
        if replication_factor > len(live):
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                             f"factor of {replication_factor} cannot be reached because only {len(live)} broker(s) "
                             "are registered.")
        racks = {b: self.image.brokers[b].rack for b in live}
        return place_replicas(racks, num_partitions, replication_factor, first_index)

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            self.check_active()
            if not self.config["delete.topic.enable"]:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            topic = self.image.topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
            await self._commit([{"type": "RemoveTopicRecord", "topic_id": uuid_to_text(topic.topic_id), "name": name}])

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool = False) -> None:
        async with self._lock:
            self.check_active()
            topic = self.image.topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            current = len(topic.partitions)
            if count == current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            if count < current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"The topic {name} currently has {current} "
                                 f"partition(s); {count} would not be an increase.")
            if assignments is not None and len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {count - current} "
                                 f"additional partition(s), but only {len(assignments)} assignment(s) were specified.")
            replication_factor = len(topic.partitions[0].replicas)
            placed = self._place(count - current, replication_factor,
                                 {current + i: list(r) for i, r in enumerate(assignments or [])}, current)
            if not validate_only:
                await self._commit([self._partition_record(topic.topic_id, index, replicas)
                                    for index, replicas in placed.items()])

    # configs

    async def alter_configs(self, resource_type: int, resource_name: str, changes: dict[str, str | None],
                            validate_only: bool = False) -> None:
        """Apply `changes` (None deletes an override); a full AlterConfigs passes every other key as None."""
        async with self._lock:
            self.check_active()
            if resource_type == TOPIC_RESOURCE:
                topic = self.image.topics.get(resource_name)
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{resource_name}' does not exist.")
                merged = {**topic.configs, **changes}
                self.validate_topic_configs({k: v for k, v in merged.items() if v is not None})
            elif resource_type == BROKER_RESOURCE:
                if resource_name != "" and not (resource_name.isdigit() and int(resource_name) in self.image.brokers):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource_name}.")
                self._validate_broker_configs(changes)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}.")
            if validate_only:
                return
            await self._commit([{"type": "ConfigRecord", "resource_type": resource_type, "resource_name": resource_name,
                                 "name": key, "value": value} for key, value in changes.items()])

    def _validate_broker_configs(self, changes: dict[str, str | None]) -> None:
        """Kafka's checks of a dynamic broker config change: only dynamic settings, values of their type and
        range. Names Kafka does not know are kept, as Kafka keeps them (a plugin may read them)."""
        static = sorted(name for name in changes
                        if unprefixed(name) in BROKER_CONFIG_BY_NAME and BROKER_CONFIG_BY_NAME[unprefixed(name)].read_only)
        if static:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Cannot update these configs dynamically: Set({', '.join(static)})")
        for name, value in changes.items():
            definition = BROKER_CONFIG_BY_NAME.get(unprefixed(name))
            if value is None or definition is None:
                continue
            try:
                convert(definition, value)
                if definition.topic_name:
                    LogConfig.from_properties({**self.topic_defaults(), definition.topic_name: value})
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
            except KafkaError as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 exc.message.replace(definition.topic_name, name, 1)) from None

    # SCRAM credentials

    async def alter_scram_credentials(self, deletions: list[dict], upsertions: list[dict]) -> list[dict]:
        """AlterUserScramCredentials: commits the changes that pass Kafka's checks; one result per user."""
        async with self._lock:
            self.check_active()
            records, results = scram_credentials.alter(self.image, deletions, upsertions)
            if records:
                await self._commit(records)
            return results

    # ACLs

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """CreateAcls: commits the bindings that pass Kafka's checks and do not exist yet; one result each."""
        async with self._lock:
            self.check_active()
            records, results = acls.create(self.image, bindings)
            if records:
                await self._commit(records)
            return results

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[tuple[tuple[ErrorCode, str | None], list[AclBinding]]]:
        """DeleteAcls: removes every binding the filters select, at once; per filter its result and bindings."""
        async with self._lock:
            self.check_active()
            records, results = acls.delete(self.image, filters)
            if records:
                await self._commit(records)
            return results

    # client quotas

    async def alter_client_quotas(self, entries: list[dict], validate_only: bool,
                                  resolves: Callable[[str], bool] | None = None) -> list[dict]:
        """AlterClientQuotas: commits the entries that pass Kafka's checks (none with validate_only); one result
        per entity."""
        async with self._lock:
            self.check_active()
            records, results = client_quotas.alter(self.image, entries, resolves)
            if records and not validate_only:
                await self._commit(records)
            return results

    # features

    async def update_features(self, updates: list[features.FeatureUpdate], validate_only: bool) -> None:
        async with self._lock:
            self.check_active()
            problem = features.check_updates(self.image.features, updates, self.node_id)
            if problem is not None:
                raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION, problem)
            if validate_only or not updates:
                return
            await self._commit([{"type": "FeatureLevelRecord", "name": update.name, "feature_level": update.level}
                                for update in updates])

    # brokers

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[tuple[str, str, int]],
                              rack: str | None) -> int:
        """Register a (re)started broker, fenced until it has caught up; returns its broker epoch."""
        async with self._lock:
            self.check_active()
            existing = self.image.brokers.get(broker_id)
            now = monotonic_ms()
            if existing is not None and existing.incarnation_id != incarnation_id and not existing.fenced \
                    and now - self._last_heartbeat_ms.get(broker_id, 0) <= self.config["broker.session.timeout.ms"]:
                raise KafkaError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                                 f"Another broker is registered with id {broker_id} and its session is alive.")
            records = [{"type": "RegisterBrokerRecord", "broker_id": broker_id, "incarnation_id": incarnation_id,
                        "endpoints": [list(e) for e in endpoints], "rack": rack}]
            if existing is not None:
                # A restarted broker lost its in-memory state: it leads nothing until it is caught up again.
                records += self._fence_changes(broker_id)
            epoch = await self._commit(records)
            self._last_heartbeat_ms[broker_id] = monotonic_ms()
            return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                        want_shut_down: bool) -> dict:
        async with self._lock:
            self.check_active()
            broker = self.image.brokers.get(broker_id)
            if broker is None:
                raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
            if broker.epoch != broker_epoch:
                raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"Broker epoch {broker_epoch} is not {broker.epoch}.")
            self._last_heartbeat_ms[broker_id] = monotonic_ms()
            caught_up = metadata_offset >= broker.epoch
            if (want_shut_down or want_fence) and not broker.fenced:
                # Controlled shutdown: leaderships move now, not after a session timeout.
                await self._commit([{"type": "FenceBrokerRecord", "broker_id": broker_id, "epoch": broker.epoch},
                                    *self._fence_changes(broker_id)])
            elif broker.fenced and caught_up and not (want_fence or want_shut_down):
                await self._commit([{"type": "UnfenceBrokerRecord", "broker_id": broker_id, "epoch": broker.epoch},
                                    *self._unfence_changes(broker_id)])
            return {"is_caught_up": caught_up, "is_fenced": broker.fenced, "should_shut_down": want_shut_down}

    async def unregister_broker(self, broker_id: int) -> None:
        """Forget a broker (`kafka-cluster unregister`): it leaves every ISR and its leaderships move, as if
        fenced. A broker still running registers again at its next heartbeat."""
        async with self._lock:
            self.check_active()
            broker = self.image.brokers.get(broker_id)
            if broker is None:
                raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
            changes = self._fence_changes(broker_id) if not broker.fenced else []
            await self._commit([*changes, {"type": "UnregisterBrokerRecord", "broker_id": broker_id,
                                           "epoch": broker.epoch}])
            self._last_heartbeat_ms.pop(broker_id, None)

    async def fence_silent_brokers(self) -> list[int]:
        """Fence every broker whose session expired; returns their ids."""
        async with self._lock:
            if not self.quorum.is_active:
                return []
            timeout = self.config["broker.session.timeout.ms"]
            now = monotonic_ms()
            expired = [b.broker_id for b in self.image.brokers.values()
                       if not b.fenced and now - self._last_heartbeat_ms.setdefault(b.broker_id, now) > timeout]
            if not expired:
                return []
            records = []
            for broker_id in expired:
                records.append({"type": "FenceBrokerRecord", "broker_id": broker_id,
                                "epoch": self.image.brokers[broker_id].epoch})
            records += self._fence_changes(*expired)
            await self._commit(records)
            return expired

    def _fence_changes(self, *fenced: int) -> list[dict]:
        """Partition changes for brokers about to be fenced: out of ISRs, their leaderships handed on."""
        gone = set(fenced)
        live = set(self.live_brokers) - gone
        changes = []
        for topic, partition in self._partitions_of(gone):
            isr = [r for r in partition.isr if r not in gone] or list(partition.isr)
            leader = partition.leader
            if leader in gone or leader == NO_LEADER:
                leader = next((r for r in isr if r in live), NO_LEADER)
                if leader == NO_LEADER and self._unclean_allowed(topic):
                    leader = next((r for r in partition.replicas if r in live), NO_LEADER)
                    if leader != NO_LEADER:
                        isr = [leader]
            changes += _partition_change(topic, partition, isr=isr, leader=leader)
        return changes

    def _unfence_changes(self, broker_id: int) -> list[dict]:
        """A broker back in service leads the leaderless partitions whose ISR it is in (or, where unclean
        election is allowed, whose ISR has no live member)."""
        changes = []
        live = set(self.live_brokers)
        for topic, partition in self._partitions_of({broker_id}):
            if partition.leader != NO_LEADER:
                continue
            if broker_id in partition.isr:
                changes += _partition_change(topic, partition, leader=broker_id)
            elif not live.intersection(partition.isr) and self._unclean_allowed(topic):
                changes += _partition_change(topic, partition, isr=[broker_id], leader=broker_id)
        return changes

    def _partitions_of(self, brokers: set[int]) -> Iterable[tuple[TopicImage, PartitionImage]]:
        for topic in self.image.topics.values():
            for partition in topic.partitions.values():
                if brokers.intersection(partition.replicas):
                    yield topic, partition

    def _unclean_allowed(self, topic: TopicImage) -> bool:
        value = topic.configs.get("unclean.leader.election.enable",
                                  self.topic_defaults().get("unclean.leader.election.enable", "false"))
        return str(value).lower() == "true"

    # partition leaders

    async def elect_leaders(self, unclean: bool, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: the preferred replica (the first) where it is live and in sync, or with `unclean`
        any live replica of a leaderless partition. `partitions` None: every partition."""
        async with self._lock:
            self.check_active()
            if partitions is None:
                partitions = [(t.name, i) for t in self.image.topics.values() for i in t.partitions]
            live = set(self.live_brokers)
            results, records = {}, []
            for name, index in partitions:
                topic = self.image.topics.get(name)
                partition = topic.partitions.get(index) if topic else None
                if partition is None:
                    results[(name, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
                    continue
                if unclean:
                    if partition.leader != NO_LEADER:
                        results[(name, index)] = (ErrorCode.ELECTION_NOT_NEEDED, "the partition has a leader")
                        continue
                    leader = next((r for r in partition.isr if r in live), None)
                    isr = list(partition.isr)
                    if leader is None:
                        leader = next((r for r in partition.replicas if r in live), None)
                        isr = [leader]
                    if leader is None:
                        results[(name, index)] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica is live")
                        continue
                    records += _partition_change(topic, partition, isr=isr, leader=leader)
                else:
                    preferred = partition.replicas[0]
                    if partition.leader == preferred:
                        results[(name, index)] = (ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica leads")
                        continue
                    if preferred not in live or preferred not in partition.isr:
                        results[(name, index)] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                                  f"replica {preferred} is not live and in sync")
                        continue
                    records += _partition_change(topic, partition, leader=preferred)
                results[(name, index)] = (ErrorCode.NONE, None)
            if records:
                await self._commit(records)
            return results

    def imbalanced_partitions(self) -> list[tuple[str, int]]:
        """Partitions not led by their preferred replica (the first) although it is live and in sync."""
        live = set(self.live_brokers)
        return [(topic.name, index) for topic in self.image.topics.values()
                for index, partition in sorted(topic.partitions.items())
                if partition.leader != partition.replicas[0] and partition.replicas[0] in live
                and partition.replicas[0] in partition.isr]

    # reassignment

    async def reassign(self, targets: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: move each partition to its target replicas (None cancels a move).

        A move first adds the new replicas (replicas = target + the ones leaving, adding/removing recorded);
        it completes when every added replica has joined the ISR (see alter_partition): then the replicas
        become the target, the leaving ones drop out of the ISR, and leadership moves if its holder leaves.
        """
        async with self._lock:
            self.check_active()
            registered, live = set(self.image.brokers), set(self.live_brokers)
            results, records = {}, []
            for (name, index), target in targets.items():
                topic = self.image.topics.get(name)
                partition = topic.partitions.get(index) if topic else None
                error = None
                if partition is None:
                    error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
                elif target is None:
                    if not partition.adding_replicas and not partition.removing_replicas:
                        error = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment to cancel")
                    else:
                        original = [r for r in partition.replicas if r not in partition.adding_replicas]
                        records += self._finish_move(topic, partition, original, live)
                elif not target or len(set(target)) != len(target):
                    error = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the target is empty or repeats a broker")
                elif any(b not in registered for b in target):
                    error = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"unknown broker(s) {[b for b in target if b not in registered]}")
                else:
                    original = [r for r in partition.replicas if r not in partition.adding_replicas]
                    adding = [r for r in target if r not in original]
                    if not adding:
                        records += self._finish_move(topic, partition, target, live)
                    else:
                        removing = [r for r in original if r not in target]
                        records += _partition_change(topic, partition, replicas=target + removing, adding=adding,
                                                     removing=removing)
                results[(name, index)] = error or (ErrorCode.NONE, None)
            if records:
                await self._commit(records)
            return results

    def _finish_move(self, topic: TopicImage, partition: PartitionImage, replicas: list[int],
                     live: set[int]) -> list[dict]:
        """Settle a partition on `replicas`: the ISR keeps its members among them, leadership moves if needed."""
        isr = [r for r in partition.isr if r in replicas] or [r for r in replicas if r in live][:1]
        leader = partition.leader
        if leader not in replicas or leader not in isr:
            leader = next((r for r in isr if r in live), NO_LEADER)
        return _partition_change(topic, partition, replicas=list(replicas), isr=isr, leader=leader, adding=[],
                                 removing=[])

    def reassignments(self, partitions: list[tuple[str, int]] | None) -> list[tuple[str, PartitionImage]]:
        """ListPartitionReassignments: the partitions (of `partitions`, or all) with a move under way."""
        found = []
        for topic in self.image.topics.values():
            for index, partition in sorted(topic.partitions.items()):
                if (partition.adding_replicas or partition.removing_replicas) and \
                        (partitions is None or (topic.name, index) in partitions):
                    found.append((topic.name, partition))
        return found

    async def alter_partition(self, broker_id: int, broker_epoch: int, topics: list[dict]) -> list[dict]:
        """AlterPartition from a leader: its new ISR, checked against the leader and partition epochs."""
        async with self._lock:
            self.check_active()
            broker = self.image.brokers.get(broker_id)
            if broker is None or broker.epoch != broker_epoch:
                raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"Broker epoch {broker_epoch} of {broker_id} is stale.")
            live = set(self.live_brokers)
            results, records = [], []
            for entry in topics:
                topic = self.image.topics_by_id.get(entry["topic_id"])
                answers = []
                for request in entry["partitions"]:
                    index = request["partition_index"]
                    partition = topic.partitions.get(index) if topic else None
                    new_isr = request.get("new_isr")
                    stale_member = False
                    if new_isr is None:  # v3 (KIP-903): each member with the broker epoch the leader saw
                        members = request.get("new_isr_with_epochs", [])
                        new_isr = [b["broker_id"] for b in members]
                        stale_member = any(b["broker_epoch"] != -1 and b["broker_id"] in self.image.brokers
                                           and self.image.brokers[b["broker_id"]].epoch != b["broker_epoch"]
                                           for b in members)
                    error = ErrorCode.NONE
                    if partition is None:
                        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif partition.leader != broker_id:
                        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    elif request["leader_epoch"] != partition.leader_epoch:
                        error = ErrorCode.FENCED_LEADER_EPOCH
                    elif request["partition_epoch"] != partition.partition_epoch:
                        error = ErrorCode.INVALID_UPDATE_VERSION
                    elif broker_id not in new_isr or not set(new_isr) <= set(partition.replicas) \
                            or len(set(new_isr)) != len(new_isr):
                        error = ErrorCode.INVALID_REQUEST
                    elif stale_member or any(r not in live and r not in partition.isr for r in new_isr):
                        error = ErrorCode.INELIGIBLE_REPLICA
                    else:
                        records += self._isr_change(topic, partition, list(new_isr), live)
                    answers.append((index, error))
                results.append((entry["topic_id"], topic, answers))
            if records:
                await self._commit(records)
            return [{"topic_id": topic_id, "partitions": [
                self._partition_state(topic, index, error) for index, error in answers]}
                for topic_id, topic, answers in results]

    def _isr_change(self, topic: TopicImage, partition: PartitionImage, new_isr: list[int],
                    live: set[int]) -> list[dict]:
        """A new ISR; when it completes a reassignment (every added replica in sync), the move settles too."""
        if partition.adding_replicas and set(partition.adding_replicas) <= set(new_isr):
            target = [r for r in partition.replicas if r not in partition.removing_replicas]
            in_sync = PartitionImage(partition.partition, partition.replicas, new_isr, partition.leader,
                                     partition.leader_epoch, partition.partition_epoch)
            settled = self._finish_move(topic, in_sync, target, live)
            record = settled[0] if settled else {"type": "PartitionChangeRecord",
                                                 "topic_id": uuid_to_text(topic.topic_id),
                                                 "partition": partition.partition}
            return [{**record, "isr": record.get("isr", new_isr), "adding_replicas": [], "removing_replicas": []}]
        return _partition_change(topic, partition, isr=new_isr)

    @staticmethod
    def _partition_state(topic: TopicImage | None, index: int, error: ErrorCode) -> dict:
        partition = topic.partitions.get(index) if topic else None
        if partition is None:
            return {"partition_index": index, "error_code": error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "leader_id": NO_LEADER, "leader_epoch": -1, "isr": [], "partition_epoch": -1}
        return {"partition_index": index, "error_code": error, "leader_id": partition.leader,
                "leader_epoch": partition.leader_epoch, "isr": list(partition.isr),
                "partition_epoch": partition.partition_epoch}


def _partition_change(topic: TopicImage, partition: PartitionImage, *, isr: list[int] | None = None,
                      leader: int | None = None, replicas: list[int] | None = None,
                      adding: list[int] | None = None, removing: list[int] | None = None) -> list[dict]:
    """The PartitionChangeRecord for what changes of a partition; nothing when nothing does."""
    record = {"type": "PartitionChangeRecord", "topic_id": uuid_to_text(topic.topic_id),
              "partition": partition.partition}
    for key, value, current in (("replicas", replicas, partition.replicas), ("isr", isr, partition.isr),
                                ("adding_replicas", adding, partition.adding_replicas),
                                ("removing_replicas", removing, partition.removing_replicas)):
        if value is not None and value != current:
            record[key] = value
    if leader is not None and leader != partition.leader:
        record["leader"] = leader
        record["leader_epoch"] = partition.leader_epoch + 1
    return [record] if len(record) > 3 else []


def _collides(name: str, existing: dict) -> bool:
    normalized = name.replace(".", "_")
    return any(other != name and other.replace(".", "_") == normalized for other in existing)
