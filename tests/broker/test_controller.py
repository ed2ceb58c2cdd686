"""The controller against an in-memory quorum: topic, partition and config commands and their validation,
producer id blocks, the brokers' lifecycle (registration, heartbeats, fencing), leader election and AlterPartition.

Durability of what the controller commits is the metadata quorum's business (tests/raft).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import Counter

import pytest

from odradek.config import BrokerConfig
from odradek.controller import controller as controller_module
from odradek.controller import features
from odradek.controller.controller import PRODUCER_ID_BLOCK_SIZE, Controller
from odradek.controller.metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage, PartitionImage
from odradek.protocol.errors import ErrorCode, KafkaError

SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms's default


def run_async(test):
    """Run an async test body in a fresh event loop (the project does not use pytest-asyncio)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


class MemoryQuorum:
    """A metadata quorum in memory: each proposal is one entry at the next offset, applied to the image before
    propose returns, as the node does with a committed entry. Records go through JSON, as in the real log."""

    def __init__(self, image: MetadataImage):
        self.image = image
        self.entries: list[tuple[int, list[dict]]] = []
        self.active = True
        self.failure: KafkaError | None = None  # raised by the next proposals instead of committing
        self.next_offset = 0

    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    async def propose(self, records: list[dict], timeout_s: float) -> int:
        if not self.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "not the active controller")
        if self.failure is not None:
            raise self.failure
        committed = json.loads(json.dumps(records, allow_nan=False))
        await asyncio.sleep(0)  # committing takes a while: other tasks run meanwhile
        offset = self.next_offset
        self.next_offset += 1
        self.entries.append((offset, committed))
        for record in json.loads(json.dumps(committed)):
            self.image.apply(record, offset)
        return offset

    def records(self, kind: str | None = None) -> list[dict]:
        return [r for _, entry in self.entries for r in entry if kind is None or r["type"] == kind]


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> FakeClock:
    """The controller's clock, moved by hand."""
    fake = FakeClock()
    monkeypatch.setattr(controller_module, "monotonic_ms", fake)
    return fake


class Cluster:
    """One controller over an in-memory quorum, and the brokers it has registered with their epochs."""

    def __init__(self, settings: dict[str, str] | None = None):
        self.config = BrokerConfig(settings or {})
        self.image = MetadataImage()
        self.quorum = MemoryQuorum(self.image)
        self.controller = Controller(self.config, self.image, self.quorum)
        self.epochs: dict[int, int] = {}
        self._incarnations = 0

    async def register(self, broker_id: int, rack: str | None = None) -> int:
        self._incarnations += 1
        epoch = await self.controller.register_broker(
            broker_id, f"incarnation-{self._incarnations}", [("PLAINTEXT", "127.0.0.1", 9000 + broker_id)], rack)
        self.epochs[broker_id] = epoch
        return epoch

    async def heartbeat(self, broker_id: int, *, caught_up: bool = True, want_fence: bool = False,
                        want_shut_down: bool = False) -> dict:
        epoch = self.epochs[broker_id]
        offset = self.quorum.last_offset if caught_up else epoch - 1
        return await self.controller.heartbeat(broker_id, epoch, offset, want_fence, want_shut_down)

    async def add_brokers(self, *broker_ids: int, racks: list[str | None] | None = None) -> None:
        """Register the brokers and unfence them with a caught-up heartbeat."""
        for broker_id, rack in zip(broker_ids, racks or [None] * len(broker_ids), strict=True):
            await self.register(broker_id, rack)
            await self.heartbeat(broker_id)

    def partition(self, topic: str, index: int = 0) -> PartitionImage:
        return self.image.topics[topic].partitions[index]

    async def alter_isr(self, topic: str, new_isr: list[int] | None, index: int = 0, *, sender: int | None = None,
                        **overrides) -> dict:
        """AlterPartition of one partition from its leader (or `sender`), at its current epochs; its answer."""
        partition = self.partition(topic, index)
        sender = partition.leader if sender is None else sender
        request = {"partition_index": index, "leader_epoch": partition.leader_epoch, "leader_recovery_state": 0,
                   "partition_epoch": partition.partition_epoch}
        if new_isr is not None:  # else overrides carry new_isr_with_epochs (AlterPartition v3)
            request["new_isr"] = new_isr
        request.update(overrides)
        topic_id = request.pop("topic_id", self.image.topics[topic].topic_id)
        answer = await self.controller.alter_partition(sender, self.epochs[sender],
                                                       [{"topic_id": topic_id, "partitions": [request]}])
        assert [t["topic_id"] for t in answer] == [topic_id]
        [state] = answer[0]["partitions"]
        return state


async def start_cluster(*broker_ids: int, settings: dict[str, str] | None = None,
                        racks: list[str | None] | None = None) -> Cluster:
    cluster = Cluster(settings)
    await cluster.add_brokers(*broker_ids, racks=racks)
    return cluster


async def expect_error(code: ErrorCode, awaitable) -> KafkaError:
    with pytest.raises(KafkaError) as failure:
        await awaitable
    assert failure.value.code == code, failure.value
    return failure.value


# topics


@run_async
async def test_create_topic_commits_topic_configs_and_partitions_as_one_entry():
    cluster = await start_cluster(1, 2, 3)
    before = len(cluster.quorum.entries)
    topic = await cluster.controller.create_topic("orders", 4, 2, configs={"retention.ms": "1000"})
    assert len(cluster.quorum.entries) == before + 1
    _, records = cluster.quorum.entries[-1]
    assert [r["type"] for r in records] == ["TopicRecord", "ConfigRecord"] + ["PartitionRecord"] * 4
    assert topic is cluster.image.topics["orders"]
    assert cluster.image.topics_by_id[topic.topic_id] is topic
    assert len(topic.topic_id) == 16
    assert topic.configs == {"retention.ms": "1000"}
    assert sorted(topic.partitions) == [0, 1, 2, 3]
    for partition in topic.partitions.values():
        assert len(set(partition.replicas)) == 2
        assert partition.isr == partition.replicas
        assert partition.leader == partition.replicas[0]
        assert (partition.leader_epoch, partition.partition_epoch) == (0, 0)
    assert cluster.controller.log_config(topic).retention_ms == 1000


@run_async
async def test_topic_ids_are_unique():
    cluster = await start_cluster(1)
    first = await cluster.controller.create_topic("a", 1, 1)
    second = await cluster.controller.create_topic("b", 1, 1)
    assert first.topic_id != second.topic_id


@run_async
async def test_partition_count_and_replication_factor_default_to_the_broker_config():
    cluster = await start_cluster(1, 2, settings={"num.partitions": "3", "default.replication.factor": "2"})
    topic = await cluster.controller.create_topic("defaults")
    assert sorted(topic.partitions) == [0, 1, 2]
    assert all(len(p.replicas) == 2 for p in topic.partitions.values())


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "bad name", "a/b", "naïve", "tab\t"])
@run_async
async def test_illegal_topic_names_are_rejected(name):
    cluster = await start_cluster(1)
    await expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, cluster.controller.create_topic(name, 1, 1))
    assert cluster.image.topics == {}


@pytest.mark.parametrize("name", ["x" * 249, "a.b-c_D9", "..."])
@run_async
async def test_legal_topic_names_are_accepted(name):
    cluster = await start_cluster(1)
    await cluster.controller.create_topic(name, 1, 1)
    assert list(cluster.image.topics) == [name]


@pytest.mark.parametrize("existing,new", [("a.b", "a_b"), ("a_b", "a.b"), ("x.y_z", "x_y.z")])
@run_async
async def test_names_colliding_on_dot_and_underscore_are_rejected(existing, new):
    cluster = await start_cluster(1)
    await cluster.controller.create_topic(existing, 1, 1)
    await expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, cluster.controller.create_topic(new, 1, 1))
    assert list(cluster.image.topics) == [existing]


def _invalid(call, code, id):
    return pytest.param(call, code, id=id)


INVALID_CHANGES = [
    _invalid(lambda c: c.create_topic("existing"), ErrorCode.TOPIC_ALREADY_EXISTS, "duplicate topic"),
    _invalid(lambda c: c.create_topic("new", 0), ErrorCode.INVALID_PARTITIONS, "zero partitions"),
    _invalid(lambda c: c.create_topic("new", -2), ErrorCode.INVALID_PARTITIONS, "negative partitions"),
    _invalid(lambda c: c.create_topic("new", 10_001, 1), ErrorCode.POLICY_VIOLATION, "10,001 partitions"),
    _invalid(lambda c: c.create_topic("new", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 0"),
    _invalid(lambda c: c.create_topic("new", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR,
             "replication factor above the live brokers"),
    _invalid(lambda c: c.create_topic("new", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG,
             "bad config value"),
    _invalid(lambda c: c.create_topic("new", configs={"no.such": "1"}), ErrorCode.INVALID_CONFIG,
             "unknown config"),
    _invalid(lambda c: c.create_topic("new", configs={"segment.bytes": "13"}), ErrorCode.INVALID_CONFIG,
             "segment.bytes below Kafka 4.0's floor of 14"),
    _invalid(lambda c: c.create_topic("new", assignments={0: [7]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "unknown broker in assignment"),
    _invalid(lambda c: c.create_topic("new", assignments={0: [1], 1: [1, 7]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "unknown broker in a later assignment"),
    _invalid(lambda c: c.create_topic("new", assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "empty assignment"),
    _invalid(lambda c: c.create_topic("new", assignments={0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "broker repeated in assignment"),
    _invalid(lambda c: c.create_topic("new", assignments={1: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "assignment not from partition 0"),
    _invalid(lambda c: c.create_topic("new", assignments={0: [1], 2: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "assignment with a gap"),
    _invalid(lambda c: c.create_topic("new", 2, assignments={0: [1]}), ErrorCode.INVALID_REQUEST,
             "partition count disagreeing with assignments"),
    _invalid(lambda c: c.create_partitions("existing", 1, None), ErrorCode.INVALID_PARTITIONS,
             "partition count not increased"),
    _invalid(lambda c: c.create_partitions("missing", 4, None), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
             "partitions of a missing topic"),
    _invalid(lambda c: c.create_partitions("existing", 3, [[1]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "fewer assignments than new partitions"),
    _invalid(lambda c: c.create_partitions("existing", 2, [[7]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
             "new partition on an unknown broker"),
    _invalid(lambda c: c.create_partitions("existing", 10_002, None), ErrorCode.POLICY_VIOLATION,
             "10,001 new partitions"),
    _invalid(lambda c: c.delete_topic("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "delete a missing topic"),
    _invalid(lambda c: c.alter_configs(TOPIC_RESOURCE, "missing", {"retention.ms": "1"}),
             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "configs of a missing topic"),
    _invalid(lambda c: c.alter_configs(TOPIC_RESOURCE, "existing", {"retention.ms": "soon"}),
             ErrorCode.INVALID_CONFIG, "bad topic config value"),
    _invalid(lambda c: c.alter_configs(TOPIC_RESOURCE, "existing", {"no.such": "1"}), ErrorCode.INVALID_CONFIG,
             "unknown topic config"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "1", {"log.dirs": "/x"}), ErrorCode.INVALID_REQUEST,
             "read-only broker config"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "", {"num.partitions": "3"}), ErrorCode.INVALID_REQUEST,
             "num.partitions is not dynamic in Kafka"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "soon"}), ErrorCode.INVALID_REQUEST,
             "bad broker default of a topic config"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "1", {"log.cleaner.threads": "abc"}), ErrorCode.INVALID_REQUEST,
             "bad value of a dynamic broker config"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "1", {"log.segment.bytes": "13"}), ErrorCode.INVALID_REQUEST,
             "broker default of a topic config out of range"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "9", {"log.retention.ms": "1"}), ErrorCode.INVALID_REQUEST,
             "unknown broker id"),
    _invalid(lambda c: c.alter_configs(BROKER_RESOURCE, "one", {"log.retention.ms": "1"}), ErrorCode.INVALID_REQUEST,
             "broker id not a number"),
    _invalid(lambda c: c.alter_configs(99, "x", {"a": "b"}), ErrorCode.INVALID_REQUEST, "unknown resource type"),
]


@pytest.mark.parametrize("call,code", INVALID_CHANGES)
@run_async
async def test_invalid_changes_are_rejected_without_committing(call, code):
    cluster = await start_cluster(1)
    await cluster.register(2)  # registered but fenced: not counted as a live broker
    await cluster.controller.create_topic("existing", 1, 1, configs={"retention.ms": "1000"})
    entries = len(cluster.quorum.entries)
    await expect_error(code, call(cluster.controller))
    assert len(cluster.quorum.entries) == entries
    assert list(cluster.image.topics) == ["existing"]
    assert list(cluster.image.topics["existing"].partitions) == [0]
    assert cluster.image.topics["existing"].configs == {"retention.ms": "1000"}
    assert not any(cluster.image.broker_configs.values())


@run_async
async def test_ten_thousand_partitions_are_allowed_in_one_request():
    cluster = await start_cluster(1)
    assert await cluster.controller.create_topic("big", 10_000, 1, validate_only=True) is None
    await cluster.controller.create_topic("small", 1, 1)
    await cluster.controller.create_partitions("small", 10_001, None, validate_only=True)


@run_async
async def test_replication_factor_counts_live_brokers_only():
    cluster = await start_cluster(1, 3)
    await cluster.register(2)  # fenced until it heartbeats
    await expect_error(ErrorCode.INVALID_REPLICATION_FACTOR, cluster.controller.create_topic("t", 6, 3))
    topic = await cluster.controller.create_topic("t", 6, 2)
    assert all(sorted(p.replicas) == [1, 3] for p in topic.partitions.values())


@run_async
async def test_manual_assignment_is_kept_and_fenced_replicas_stay_out_of_the_isr():
    cluster = await start_cluster(1, 2)
    await cluster.register(3)  # fenced
    topic = await cluster.controller.create_topic("t", assignments={0: [3, 1], 1: [2, 1]})
    assert (topic.partitions[0].replicas, topic.partitions[0].isr, topic.partitions[0].leader) == ([3, 1], [1], 1)
    assert (topic.partitions[1].replicas, topic.partitions[1].isr, topic.partitions[1].leader) == ([2, 1], [2, 1], 2)


@run_async
async def test_manual_assignments_of_one_topic_share_one_replication_factor():
    cluster = await start_cluster(1, 2)
    await expect_error(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       cluster.controller.create_topic("t", assignments={0: [1, 2], 1: [1]}))


@run_async
async def test_new_partitions_keep_the_topic_replication_factor():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", 1, 2)
    await expect_error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, cluster.controller.create_partitions("t", 2, [[1]]))


@run_async
async def test_manual_assignment_on_fenced_brokers_only_is_rejected():
    cluster = await start_cluster(1)
    await cluster.register(2)  # fenced
    await expect_error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, cluster.controller.create_topic("t", assignments={0: [2]}))


@run_async
async def test_validate_only_validates_and_commits_nothing():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("existing", 1, 2)
    entries = len(cluster.quorum.entries)
    assert await cluster.controller.create_topic("dry", 4, 2, validate_only=True) is None
    await cluster.controller.create_partitions("existing", 3, None, validate_only=True)
    await cluster.controller.alter_configs(TOPIC_RESOURCE, "existing", {"retention.ms": "5"}, validate_only=True)
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "5"}, validate_only=True)
    assert len(cluster.quorum.entries) == entries
    assert list(cluster.image.topics) == ["existing"]
    assert list(cluster.image.topics["existing"].partitions) == [0]
    assert cluster.image.topics["existing"].configs == {} and not any(cluster.image.broker_configs.values())
    await expect_error(ErrorCode.INVALID_TOPIC_EXCEPTION, cluster.controller.create_topic("bad name", validate_only=True))
    await expect_error(ErrorCode.INVALID_REPLICATION_FACTOR,
                       cluster.controller.create_topic("dry", 1, 3, validate_only=True))
    await expect_error(ErrorCode.INVALID_CONFIG, cluster.controller.alter_configs(
        TOPIC_RESOURCE, "existing", {"retention.ms": "soon"}, validate_only=True))


@run_async
async def test_create_partitions_adds_placed_partitions_and_leaves_the_others_alone():
    cluster = await start_cluster(1, 2, 3)
    topic = await cluster.controller.create_topic("t", 2, 2)
    old = {i: (list(p.replicas), p.leader) for i, p in topic.partitions.items()}
    await cluster.controller.create_partitions("t", 5, None)
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert {i: (p.replicas, p.leader) for i, p in topic.partitions.items() if i < 2} == old
    for partition in topic.partitions.values():
        assert len(set(partition.replicas)) == 2
        assert partition.isr == partition.replicas and partition.leader == partition.replicas[0]
    # placement goes on rotating where it stopped, not from the first broker again
    assert [topic.partitions[i].leader for i in range(5)] == [1, 2, 3, 1, 2]


@run_async
async def test_create_partitions_with_assignments_uses_them_from_the_next_index():
    cluster = await start_cluster(1, 2, 3)
    await cluster.controller.create_topic("t", 1, 2)
    await cluster.controller.create_partitions("t", 3, [[3, 1], [2, 3]])
    assert cluster.partition("t", 1).replicas == [3, 1] and cluster.partition("t", 1).leader == 3
    assert cluster.partition("t", 2).replicas == [2, 3] and cluster.partition("t", 2).leader == 2


@run_async
async def test_delete_topic_frees_the_name_for_a_new_topic():
    cluster = await start_cluster(1)
    old = await cluster.controller.create_topic("t", 2, 1, configs={"retention.ms": "1000"})
    await cluster.controller.delete_topic("t")
    assert cluster.image.topics == {} and cluster.image.topics_by_id == {}
    assert cluster.quorum.records()[-1] == {"type": "RemoveTopicRecord", "name": "t",
                                            "topic_id": cluster.quorum.records("TopicRecord")[0]["topic_id"]}
    new = await cluster.controller.create_topic("t", 1, 1)
    assert new.topic_id != old.topic_id
    assert new.configs == {} and sorted(new.partitions) == [0]


@run_async
async def test_delete_topic_is_refused_when_deletion_is_disabled():
    cluster = await start_cluster(1, settings={"delete.topic.enable": "false"})
    await cluster.controller.create_topic("t", 1, 1)
    await expect_error(ErrorCode.TOPIC_DELETION_DISABLED, cluster.controller.delete_topic("t"))
    assert list(cluster.image.topics) == ["t"]


# configs


@run_async
async def test_alter_topic_configs_sets_and_deletes_overrides():
    cluster = await start_cluster(1)
    topic = await cluster.controller.create_topic("t", 1, 1, configs={"retention.ms": "1000"})
    await cluster.controller.alter_configs(TOPIC_RESOURCE, "t", {"retention.ms": None, "segment.ms": "60000"})
    assert topic.configs == {"segment.ms": "60000"}
    config = cluster.controller.log_config(topic)
    assert config.segment_ms == 60000 and config.retention_ms == 7 * 24 * 3600 * 1000


@run_async
async def test_alter_topic_configs_changes_only_the_named_overrides():
    cluster = await start_cluster(1)
    topic = await cluster.controller.create_topic("t", 1, 1, configs={"cleanup.policy": "compact"})
    await expect_error(ErrorCode.INVALID_CONFIG,
                       cluster.controller.alter_configs(TOPIC_RESOURCE, "t", {"min.cleanable.dirty.ratio": "2"}))
    await cluster.controller.alter_configs(TOPIC_RESOURCE, "t", {"retention.ms": "5"})
    assert topic.configs == {"cleanup.policy": "compact", "retention.ms": "5"}
    await cluster.controller.alter_configs(TOPIC_RESOURCE, "t", {"cleanup.policy": None})
    assert topic.configs == {"retention.ms": "5"}


@run_async
async def test_dynamic_broker_default_flows_into_topic_configs_under_topic_overrides():
    cluster = await start_cluster(1)
    plain = await cluster.controller.create_topic("plain", 1, 1)
    overridden = await cluster.controller.create_topic("overridden", 1, 1, configs={"retention.ms": "1000"})
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "5000"})
    assert cluster.image.broker_configs[""] == {"log.retention.ms": "5000"}
    assert cluster.controller.log_config(plain).retention_ms == 5000
    assert cluster.controller.log_config(overridden).retention_ms == 1000
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": None})
    assert cluster.controller.log_config(plain).retention_ms == 7 * 24 * 3600 * 1000


@run_async
async def test_a_brokers_own_dynamic_config_wins_over_the_cluster_default_and_only_there():
    cluster = await start_cluster(1, 2)
    plain = await cluster.controller.create_topic("plain", 1, 1)
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "5000"})
    await cluster.controller.alter_configs(BROKER_RESOURCE, "1", {"log.retention.ms": "7000"})
    await cluster.controller.alter_configs(BROKER_RESOURCE, "2", {"log.retention.ms": "9000"})
    assert cluster.image.broker_configs == {"": {"log.retention.ms": "5000"}, "1": {"log.retention.ms": "7000"},
                                            "2": {"log.retention.ms": "9000"}}
    assert cluster.controller.log_config(plain).retention_ms == 7000  # this controller is node 1
    await cluster.controller.alter_configs(BROKER_RESOURCE, "1", {"log.retention.ms": None})
    assert cluster.controller.log_config(plain).retention_ms == 5000


@run_async
async def test_unknown_broker_config_names_are_kept_as_kafka_keeps_them():
    cluster = await start_cluster(1)
    await cluster.controller.alter_configs(BROKER_RESOURCE, "1", {"some.plugin.setting": "x"})
    assert cluster.image.broker_configs["1"] == {"some.plugin.setting": "x"}


@run_async
async def test_feature_levels_start_at_the_defaults_and_change_only_within_what_is_supported():
    cluster = await start_cluster(1)
    await cluster.controller.activate("cluster")
    assert cluster.image.features == {"metadata.version": 25, "group.version": 1}
    downgrade = features.FeatureUpdate("group.version", 0, features.SAFE_DOWNGRADE)
    await cluster.controller.update_features([downgrade], validate_only=True)
    assert cluster.image.features["group.version"] == 1
    await cluster.controller.update_features([downgrade], validate_only=False)
    assert "group.version" not in cluster.image.features  # level 0: not finalized
    for update in (features.FeatureUpdate("group.version", 2, features.UPGRADE),
                   features.FeatureUpdate("metadata.version", 21, features.SAFE_DOWNGRADE),
                   features.FeatureUpdate("transaction.version", 2, features.UPGRADE),
                   features.FeatureUpdate("no.such.feature", 1, features.UPGRADE)):
        error = await expect_error(ErrorCode.INVALID_UPDATE_VERSION,
                                   cluster.controller.update_features([update], validate_only=False))
        assert error.message.startswith("The update failed for all features since the following feature had an "
                                        f"error: Invalid update version {update.level} for feature {update.name}") \
            or "Refusing to perform the requested downgrade" in error.message
    assert cluster.image.features == {"metadata.version": 25}


@run_async
async def test_unregistering_a_broker_forgets_it_and_moves_its_leaderships():
    cluster = await start_cluster(1, 2)
    topic = await cluster.controller.create_topic("t", assignments={0: [2, 1]})
    assert topic.partitions[0].leader == 2
    await cluster.controller.unregister_broker(2)
    assert 2 not in cluster.image.brokers
    assert topic.partitions[0].leader == 1 and topic.partitions[0].isr == [1]
    await expect_error(ErrorCode.BROKER_ID_NOT_REGISTERED, cluster.controller.unregister_broker(2))


# the active controller


INACTIVE_CALLS = [
    pytest.param(lambda k: k.controller.create_topic("new", 1, 1), id="create_topic"),
    pytest.param(lambda k: k.controller.delete_topic("existing"), id="delete_topic"),
    pytest.param(lambda k: k.controller.create_partitions("existing", 2, None), id="create_partitions"),
    pytest.param(lambda k: k.controller.alter_configs(TOPIC_RESOURCE, "existing", {"retention.ms": "1"}),
                 id="alter_configs"),
    pytest.param(lambda k: k.controller.allocate_producer_ids(), id="allocate_producer_ids"),
    pytest.param(lambda k: k.controller.register_broker(3, "new", [("PLAINTEXT", "h", 1)], None), id="register_broker"),
    pytest.param(lambda k: k.controller.heartbeat(2, k.epochs[2], k.quorum.last_offset, True, False), id="heartbeat"),
    pytest.param(lambda k: k.alter_isr("existing", [1]), id="alter_partition"),
    pytest.param(lambda k: k.controller.create_topic("bad name"), id="create_topic with a bad name"),
]


@pytest.mark.parametrize("call", INACTIVE_CALLS)
@run_async
async def test_commands_answer_not_controller_when_the_quorum_is_not_active(call):
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("existing", assignments={0: [1, 2]})
    entries = len(cluster.quorum.entries)
    cluster.quorum.active = False
    await expect_error(ErrorCode.NOT_CONTROLLER, call(cluster))
    assert len(cluster.quorum.entries) == entries
    cluster.quorum.active = True
    try:
        await call(cluster)  # the same command goes through once this node is the active controller
    except KafkaError as exc:
        assert exc.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    else:
        assert len(cluster.quorum.entries) == entries + 1


@run_async
async def test_an_inactive_controller_fences_no_one(clock):
    cluster = await start_cluster(1)
    clock.advance(10 * SESSION_TIMEOUT_MS)
    cluster.quorum.active = False
    assert await cluster.controller.fence_silent_brokers() == []
    cluster.quorum.active = True
    assert await cluster.controller.fence_silent_brokers() == [1]


@run_async
async def test_a_failed_commit_changes_nothing_and_releases_the_controller():
    cluster = await start_cluster(1)
    cluster.quorum.failure = KafkaError(ErrorCode.REQUEST_TIMED_OUT, "not committed in time")
    await expect_error(ErrorCode.REQUEST_TIMED_OUT, cluster.controller.create_topic("t", 1, 1))
    assert cluster.image.topics == {}
    cluster.quorum.failure = None
    await asyncio.wait_for(cluster.controller.create_topic("t", 1, 1), timeout=1)
    assert list(cluster.image.topics) == ["t"]


@run_async
async def test_commands_run_one_at_a_time_and_see_each_other():
    cluster = await start_cluster(1)
    results = await asyncio.gather(*(cluster.controller.create_topic("same", 1, 1) for _ in range(3)),
                                   return_exceptions=True)
    assert sum(not isinstance(r, Exception) for r in results) == 1
    assert sorted(r.code for r in results if isinstance(r, KafkaError)) == [ErrorCode.TOPIC_ALREADY_EXISTS] * 2
    assert len(cluster.quorum.records("TopicRecord")) == 1


@run_async
async def test_activate_names_the_cluster_once_and_gives_every_broker_a_fresh_session(clock):
    cluster = await start_cluster(1, 2)
    clock.advance(10 * SESSION_TIMEOUT_MS)  # e.g. this node was a follower all along
    await cluster.controller.activate("cluster-x")
    assert cluster.image.cluster_id == "cluster-x"
    assert cluster.quorum.records("ClusterRecord") == [{"type": "ClusterRecord", "cluster_id": "cluster-x"}]
    assert await cluster.controller.fence_silent_brokers() == []
    await cluster.controller.activate("cluster-y")
    assert cluster.image.cluster_id == "cluster-x" and len(cluster.quorum.records("ClusterRecord")) == 1
    clock.advance(SESSION_TIMEOUT_MS + 1)
    assert await cluster.controller.fence_silent_brokers() == [1, 2]


# producer ids


@run_async
async def test_producer_id_blocks_are_disjoint_and_survive_replay():
    cluster = await start_cluster(1)
    blocks = [await cluster.controller.allocate_producer_ids() for _ in range(3)]
    assert all(length == PRODUCER_ID_BLOCK_SIZE for _, length in blocks)
    ids = [set(range(start, start + length)) for start, length in blocks]
    assert len(set().union(*ids)) == 3 * PRODUCER_ID_BLOCK_SIZE  # no id handed out twice
    end = max(start + length for start, length in blocks)

    replayed = MetadataImage()
    for offset, records in cluster.quorum.entries:
        for record in records:
            replayed.apply(record, offset)
    assert replayed.next_producer_id == end
    successor = Controller(cluster.config, replayed, MemoryQuorum(replayed))  # the next active controller
    start, _ = await successor.allocate_producer_ids()
    assert start == end


@run_async
async def test_replaying_the_committed_entries_rebuilds_the_same_image(clock):
    cluster = await start_cluster(1, 2, 3, racks=["a", "b", None])
    await cluster.controller.activate("cluster-x")
    await cluster.controller.create_topic("t", 3, 3, configs={"retention.ms": "1000"})
    await cluster.controller.create_topic("gone", 1, 1)
    await cluster.controller.create_partitions("t", 4, None)
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "5000"})
    await cluster.controller.delete_topic("gone")
    await cluster.alter_isr("t", [cluster.partition("t").leader])
    await cluster.heartbeat(2, want_shut_down=True)
    await cluster.controller.allocate_producer_ids()

    replayed = MetadataImage()
    for offset, records in cluster.quorum.entries:
        for record in records:
            replayed.apply(record, offset)
    image = cluster.image
    assert (replayed.brokers, replayed.topics, replayed.broker_configs, replayed.cluster_id,
            replayed.next_producer_id) == (image.brokers, image.topics, image.broker_configs, image.cluster_id,
                                           image.next_producer_id)
    assert replayed.topics_by_id.keys() == image.topics_by_id.keys()


# broker lifecycle


@run_async
async def test_registration_returns_the_entry_offset_as_epoch_and_leaves_the_broker_fenced():
    cluster = await start_cluster(1)
    await cluster.controller.create_topic("t", 1, 1)
    epoch = await cluster.controller.register_broker(2, "incarnation-x", [("PLAINTEXT", "h2", 9093)], "rack-b")
    offset, records = cluster.quorum.entries[-1]
    assert epoch == offset and epoch > 0
    assert records == [{"type": "RegisterBrokerRecord", "broker_id": 2, "incarnation_id": "incarnation-x",
                        "endpoints": [["PLAINTEXT", "h2", 9093]], "rack": "rack-b"}]
    broker = cluster.image.brokers[2]
    assert (broker.epoch, broker.fenced, broker.rack, broker.endpoints) == (epoch, True, "rack-b",
                                                                            {"PLAINTEXT": ("h2", 9093)})
    assert cluster.controller.live_brokers == [1]


@run_async
async def test_heartbeat_behind_the_registration_keeps_the_broker_fenced():
    cluster = await start_cluster(1)
    epoch = await cluster.register(2)
    entries = len(cluster.quorum.entries)
    answer = await cluster.controller.heartbeat(2, epoch, epoch - 1, False, False)
    assert answer == {"is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    assert cluster.image.brokers[2].fenced and len(cluster.quorum.entries) == entries


@run_async
async def test_caught_up_heartbeat_unfences_the_broker():
    cluster = await start_cluster(1)
    epoch = await cluster.register(2)
    answer = await cluster.controller.heartbeat(2, epoch, epoch, False, False)
    assert answer == {"is_caught_up": True, "is_fenced": False, "should_shut_down": False}
    assert not cluster.image.brokers[2].fenced
    assert cluster.controller.live_brokers == [1, 2]
    assert cluster.quorum.records()[-1] == {"type": "UnfenceBrokerRecord", "broker_id": 2, "epoch": epoch}
    entries = len(cluster.quorum.entries)
    assert (await cluster.heartbeat(2))["is_fenced"] is False  # a live broker's heartbeat commits nothing
    assert len(cluster.quorum.entries) == entries


@run_async
async def test_a_fenced_broker_asking_to_stay_fenced_is_not_unfenced():
    cluster = await start_cluster(1)
    await cluster.register(2)
    answer = await cluster.heartbeat(2, want_fence=True)
    assert answer["is_caught_up"] and answer["is_fenced"]
    assert cluster.image.brokers[2].fenced


@run_async
async def test_an_unfenced_broker_leads_the_leaderless_partitions_whose_isr_it_is_in():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2], 1: [2, 1]})
    await cluster.heartbeat(2, want_fence=True)  # both partitions: ISR [1], led by 1
    await cluster.heartbeat(1, want_fence=True)  # the last ISR member: both leaderless with ISR [1]
    for index in (0, 1):
        assert (cluster.partition("t", index).leader, cluster.partition("t", index).isr) == (-1, [1])
    leader_epochs = [cluster.partition("t", i).leader_epoch for i in (0, 1)]

    await cluster.heartbeat(2)  # live again, but out of sync: leads nothing
    assert [cluster.partition("t", i).leader for i in (0, 1)] == [-1, -1]

    answer = await cluster.heartbeat(1)
    assert answer["is_fenced"] is False
    for index, leader_epoch in zip((0, 1), leader_epochs, strict=True):
        partition = cluster.partition("t", index)
        assert (partition.leader, partition.isr, partition.leader_epoch) == (1, [1], leader_epoch + 1)


@run_async
async def test_heartbeat_with_a_wrong_epoch_is_stale():
    cluster = await start_cluster(1)
    epoch = cluster.epochs[1]
    for wrong in (epoch + 1, epoch + 7, -1):
        await expect_error(ErrorCode.STALE_BROKER_EPOCH,
                           cluster.controller.heartbeat(1, wrong, cluster.quorum.last_offset, False, True))
    assert not cluster.image.brokers[1].fenced


@run_async
async def test_heartbeat_of_an_unknown_broker_is_refused():
    cluster = await start_cluster(1)
    await expect_error(ErrorCode.BROKER_ID_NOT_REGISTERED, cluster.controller.heartbeat(5, 0, 0, False, False))


@run_async
async def test_new_incarnation_is_refused_while_the_old_session_is_alive(clock):
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    entries = len(cluster.quorum.entries)
    clock.advance(SESSION_TIMEOUT_MS - 1)
    await expect_error(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                       cluster.controller.register_broker(1, "impostor", [("PLAINTEXT", "h", 1)], None))
    assert len(cluster.quorum.entries) == entries and cluster.image.brokers[1].incarnation_id == "incarnation-1"
    await cluster.heartbeat(1)  # the session goes on
    clock.advance(SESSION_TIMEOUT_MS - 1)
    await expect_error(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                       cluster.controller.register_broker(1, "impostor", [("PLAINTEXT", "h", 1)], None))


@run_async
async def test_new_incarnation_after_the_session_expired_replaces_the_old_one(clock):
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    old_epoch = cluster.epochs[1]
    clock.advance(SESSION_TIMEOUT_MS + 1)
    await cluster.heartbeat(2)
    new_epoch = await cluster.register(1)  # restarted before the controller fenced it
    assert new_epoch > old_epoch
    broker = cluster.image.brokers[1]
    assert (broker.epoch, broker.fenced, broker.incarnation_id) == (new_epoch, True, "incarnation-3")
    partition = cluster.partition("t")
    assert (partition.leader, partition.isr, partition.leader_epoch) == (2, [2], 1)
    await expect_error(ErrorCode.STALE_BROKER_EPOCH,
                       cluster.controller.heartbeat(1, old_epoch, cluster.quorum.last_offset, False, False))


@run_async
async def test_new_incarnation_after_a_controlled_shutdown_is_accepted_at_once():
    cluster = await start_cluster(1, 2)
    await cluster.heartbeat(1, want_shut_down=True)
    epoch = await cluster.register(1)
    assert cluster.image.brokers[1].epoch == epoch and cluster.image.brokers[1].fenced


@run_async
async def test_controlled_shutdown_fences_the_broker_and_hands_its_leaderships_on():
    cluster = await start_cluster(1, 2, 3)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 1, 3]})
    await cluster.controller.create_topic("pair", assignments={0: [2, 3]})
    await cluster.controller.create_topic("solo", assignments={0: [1]})
    answer = await cluster.heartbeat(1, want_shut_down=True)
    assert answer == {"is_caught_up": True, "is_fenced": True, "should_shut_down": True}
    assert cluster.image.brokers[1].fenced and cluster.controller.live_brokers == [2, 3]

    def state(topic, index=0):
        p = cluster.partition(topic, index)
        return p.leader, p.isr, p.leader_epoch, p.partition_epoch

    assert state("t", 0) == (2, [2, 3], 1, 1)  # led by 1: the next ISR member leads, one leader epoch later
    assert state("t", 1) == (2, [2, 3], 0, 1)  # 1 was a follower: it only leaves the ISR
    assert state("pair") == (2, [2, 3], 0, 0)  # 1 is no replica: untouched
    assert state("solo") == (-1, [1], 1, 1)  # the last ISR member stays in it; the partition waits leaderless
    entries = len(cluster.quorum.entries)
    assert (await cluster.heartbeat(1, want_shut_down=True))["should_shut_down"] is True
    assert len(cluster.quorum.entries) == entries  # already fenced: nothing more to commit


@run_async
async def test_fence_request_moves_leaderships_like_a_shutdown():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    answer = await cluster.heartbeat(1, want_fence=True)
    assert answer["is_fenced"] is True and answer["should_shut_down"] is False
    assert (cluster.partition("t").leader, cluster.partition("t").isr) == (2, [2])


@run_async
async def test_silent_brokers_are_fenced_and_their_partitions_re_elected(clock):
    cluster = await start_cluster(1, 2, 3)
    topic = await cluster.controller.create_topic("t", 3, 3)
    assert sorted(p.leader for p in topic.partitions.values()) == [1, 2, 3]
    clock.advance(SESSION_TIMEOUT_MS)
    assert await cluster.controller.fence_silent_brokers() == []  # a session lasts the whole timeout
    await cluster.heartbeat(3)
    clock.advance(1)
    assert await cluster.controller.fence_silent_brokers() == [1, 2]
    assert [cluster.image.brokers[b].fenced for b in (1, 2, 3)] == [True, True, False]
    fenced = cluster.quorum.entries[-1][1][:2]
    assert fenced == [{"type": "FenceBrokerRecord", "broker_id": b, "epoch": cluster.epochs[b]} for b in (1, 2)]
    for partition in topic.partitions.values():
        assert partition.leader == 3 and partition.isr == [3]
        assert partition.leader_epoch == (0 if partition.replicas[0] == 3 else 1)
    entries = len(cluster.quorum.entries)
    clock.advance(SESSION_TIMEOUT_MS)
    assert await cluster.controller.fence_silent_brokers() == [3]
    assert await cluster.controller.fence_silent_brokers() == []
    assert len(cluster.quorum.entries) == entries + 1


@run_async
async def test_session_timeout_is_the_configured_one(clock):
    cluster = await start_cluster(1, settings={"broker.session.timeout.ms": "500"})
    clock.advance(501)
    assert await cluster.controller.fence_silent_brokers() == [1]


# unclean leader election


@pytest.mark.parametrize("unclean", [True, False])
@run_async
async def test_unclean_election_lets_an_out_of_sync_replica_lead(unclean):
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic(
        "t", assignments={0: [1, 2]}, configs={"unclean.leader.election.enable": str(unclean).lower()})
    await cluster.alter_isr("t", [1])
    await cluster.heartbeat(1, want_shut_down=True)
    partition = cluster.partition("t")
    if unclean:
        assert (partition.leader, partition.isr, partition.leader_epoch) == (2, [2], 1)
    else:
        assert (partition.leader, partition.isr, partition.leader_epoch) == (-1, [1], 1)


@run_async
async def test_unclean_election_follows_the_dynamic_broker_default():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("default", assignments={0: [1, 2]})
    await cluster.controller.create_topic("clean", assignments={0: [1, 2]},
                                          configs={"unclean.leader.election.enable": "false"})
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"unclean.leader.election.enable": "true"})
    await cluster.alter_isr("default", [1])
    await cluster.alter_isr("clean", [1])
    await cluster.heartbeat(1, want_shut_down=True)
    assert (cluster.partition("default").leader, cluster.partition("default").isr) == (2, [2])
    assert (cluster.partition("clean").leader, cluster.partition("clean").isr) == (-1, [1])


@run_async
async def test_unclean_election_when_an_out_of_sync_replica_comes_back():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]},
                                          configs={"unclean.leader.election.enable": "true"})
    await cluster.alter_isr("t", [1])
    await cluster.heartbeat(2, want_fence=True)
    await cluster.heartbeat(1, want_shut_down=True)  # no live replica left: leaderless with ISR [1]
    assert (cluster.partition("t").leader, cluster.partition("t").isr) == (-1, [1])
    await cluster.heartbeat(2)
    assert (cluster.partition("t").leader, cluster.partition("t").isr) == (2, [2])


# AlterPartition


@run_async
async def test_alter_partition_shrinks_and_expands_the_isr():
    cluster = await start_cluster(1, 2, 3)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3]})
    shrunk = await cluster.alter_isr("t", [1, 2])
    assert shrunk == {"partition_index": 0, "error_code": ErrorCode.NONE, "leader_id": 1, "leader_epoch": 0,
                      "isr": [1, 2], "partition_epoch": 1}
    assert cluster.quorum.records()[-1] == {"type": "PartitionChangeRecord", "partition": 0, "isr": [1, 2],
                                            "topic_id": cluster.quorum.records("TopicRecord")[0]["topic_id"]}
    expanded = await cluster.alter_isr("t", [1, 2, 3])
    assert (expanded["error_code"], expanded["isr"], expanded["partition_epoch"]) == (ErrorCode.NONE, [1, 2, 3], 2)
    partition = cluster.partition("t")
    assert (partition.leader, partition.isr, partition.leader_epoch, partition.partition_epoch) == (1, [1, 2, 3], 0, 2)


@run_async
async def test_alter_partition_takes_the_isr_with_broker_epochs():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    state = await cluster.alter_isr("t", None, new_isr_with_epochs=[{"broker_id": 1, "broker_epoch": cluster.epochs[1]}])
    assert (state["error_code"], state["isr"]) == (ErrorCode.NONE, [1])


@run_async
async def test_alter_partition_refuses_a_replica_of_a_past_incarnation():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    await cluster.alter_isr("t", [1])
    old_epoch = cluster.epochs[2]
    await cluster.heartbeat(2, want_shut_down=True)
    await cluster.register(2)
    await cluster.heartbeat(2)
    state = await cluster.alter_isr("t", None, new_isr_with_epochs=[
        {"broker_id": 1, "broker_epoch": cluster.epochs[1]}, {"broker_id": 2, "broker_epoch": old_epoch}])
    assert state["error_code"] == ErrorCode.INELIGIBLE_REPLICA


ALTER_PARTITION_CASES = [
    pytest.param({}, ErrorCode.NONE, id="valid"),
    pytest.param({"leader_epoch": 1}, ErrorCode.FENCED_LEADER_EPOCH, id="newer leader epoch"),
    pytest.param({"leader_epoch": -1}, ErrorCode.FENCED_LEADER_EPOCH, id="older leader epoch"),
    pytest.param({"partition_epoch": 0}, ErrorCode.INVALID_UPDATE_VERSION, id="stale partition epoch"),
    pytest.param({"partition_epoch": 2}, ErrorCode.INVALID_UPDATE_VERSION, id="future partition epoch"),
    pytest.param({"sender": 2}, ErrorCode.NOT_LEADER_OR_FOLLOWER, id="sender not the leader"),
    pytest.param({"new_isr": [1, 2, 3]}, ErrorCode.INELIGIBLE_REPLICA, id="adds a fenced broker"),
    pytest.param({"new_isr": [2]}, ErrorCode.INVALID_REQUEST, id="ISR without the leader"),
    pytest.param({"new_isr": [1, 4]}, ErrorCode.INVALID_REQUEST, id="ISR with a live non-replica"),
    pytest.param({"new_isr": [1, 1]}, ErrorCode.INVALID_REQUEST, id="ISR repeating a broker"),
    pytest.param({"partition_index": 5}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, id="unknown partition"),
    pytest.param({"topic_id": bytes(16)}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, id="unknown topic id"),
]


@pytest.mark.parametrize("change,code", ALTER_PARTITION_CASES)
@run_async
async def test_alter_partition_is_checked_against_the_leader_and_partition_epochs(change, code):
    cluster = await start_cluster(1, 2, 3, 4)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3]})
    await cluster.alter_isr("t", [1, 2])  # partition epoch 1
    await cluster.heartbeat(3, want_fence=True)  # out of the ISR already: nothing changes but its fencing
    assert cluster.partition("t").partition_epoch == 1
    entries = len(cluster.quorum.entries)
    change = dict(change)
    state = await cluster.alter_isr("t", change.pop("new_isr", [1]), sender=change.pop("sender", 1), **change)
    assert state["error_code"] == code
    partition = cluster.partition("t")
    if code == ErrorCode.NONE:
        assert (partition.isr, partition.partition_epoch, len(cluster.quorum.entries)) == ([1], 2, entries + 1)
        assert (state["isr"], state["partition_epoch"]) == ([1], 2)
        return
    assert (partition.isr, partition.partition_epoch, len(cluster.quorum.entries)) == ([1, 2], 1, entries)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        assert (state["leader_id"], state["isr"], state["partition_epoch"]) == (-1, [], -1)
    else:  # the current state, for the sender to catch up with
        assert (state["leader_id"], state["leader_epoch"], state["isr"], state["partition_epoch"]) == (1, 0, [1, 2], 1)


@run_async
async def test_alter_partition_from_a_stale_or_unknown_broker_is_refused():
    cluster = await start_cluster(1, 2)
    topic = await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    request = [{"topic_id": topic.topic_id, "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "new_isr": [1]}]}]
    for broker_id, epoch in ((1, cluster.epochs[1] + 1), (1, cluster.epochs[1] + 7), (7, 0)):
        await expect_error(ErrorCode.STALE_BROKER_EPOCH, cluster.controller.alter_partition(broker_id, epoch, request))
    assert cluster.partition("t").isr == [1, 2]
    [answer] = await cluster.controller.alter_partition(1, cluster.epochs[1], request)
    assert answer["partitions"][0]["isr"] == [1]


@run_async
async def test_alter_partition_commits_the_accepted_changes_of_a_request_as_one_entry():
    cluster = await start_cluster(1, 2, 3)
    topic = await cluster.controller.create_topic("t", assignments={0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 3, 2]})
    entries = len(cluster.quorum.entries)
    answer = await cluster.controller.alter_partition(1, cluster.epochs[1], [{"topic_id": topic.topic_id, "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "new_isr": [1, 3]},
        {"partition_index": 1, "leader_epoch": 0, "partition_epoch": 7, "new_isr": [1]},
        {"partition_index": 2, "leader_epoch": 0, "partition_epoch": 0, "new_isr": [1]}]}])
    assert [(p["partition_index"], p["error_code"], p["isr"]) for p in answer[0]["partitions"]] == [
        (0, ErrorCode.NONE, [1, 3]), (1, ErrorCode.INVALID_UPDATE_VERSION, [1, 2, 3]), (2, ErrorCode.NONE, [1])]
    assert len(cluster.quorum.entries) == entries + 1
    assert [r["partition"] for r in cluster.quorum.entries[-1][1]] == [0, 2]


# placement


@run_async
async def test_leaders_and_replicas_spread_evenly_over_the_brokers():
    cluster = await start_cluster(1, 2, 3)
    topic = await cluster.controller.create_topic("t", 30, 3)
    partitions = list(topic.partitions.values())
    assert all(sorted(p.replicas) == [1, 2, 3] for p in partitions)
    assert Counter(p.leader for p in partitions) == {1: 10, 2: 10, 3: 10}
    assert Counter(tuple(p.replicas[1:]) for p in partitions).most_common(1)[0][1] <= 5  # followers vary too


@run_async
async def test_replicas_of_a_partition_sit_in_different_racks():
    racks = ["a", "a", "b", "b", "c", "c"]
    cluster = await start_cluster(1, 2, 3, 4, 5, 6, racks=racks)
    topic = await cluster.controller.create_topic("t", 30, 3)
    for partition in topic.partitions.values():
        assert len({racks[b - 1] for b in partition.replicas}) == 3, partition
    assert Counter(p.leader for p in topic.partitions.values()) == dict.fromkeys(range(1, 7), 5)
    assert Counter(b for p in topic.partitions.values() for b in p.replicas) == dict.fromkeys(range(1, 7), 15)


@run_async
async def test_new_partitions_continue_the_spread():
    cluster = await start_cluster(1, 2, 3)
    await cluster.controller.create_topic("t", 2, 1)
    await cluster.controller.create_partitions("t", 6, None)
    assert Counter(p.leader for p in cluster.image.topics["t"].partitions.values()) == {1: 2, 2: 2, 3: 2}


# leader elections on request


@run_async
async def test_preferred_election_moves_leadership_back_to_the_first_replica():
    cluster = await start_cluster(1, 2, 3)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]})
    await cluster.heartbeat(1, want_fence=True)  # 1's leadership of t-0 moves to 2
    assert cluster.partition("t", 0).leader == 2
    results = await cluster.controller.elect_leaders(False, [("t", 0), ("t", 1), ("nope", 0)])
    assert results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 1 is fenced and out of the ISR
    assert results[("t", 1)][0] == ErrorCode.ELECTION_NOT_NEEDED
    assert results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await cluster.heartbeat(1)  # unfenced; back in the ISR as its leader would report
    await cluster.alter_isr("t", [2, 3, 1], sender=2)
    assert cluster.controller.imbalanced_partitions() == [("t", 0)]
    epoch = cluster.partition("t", 0).leader_epoch
    results = await cluster.controller.elect_leaders(False, None)
    assert results[("t", 0)] == (ErrorCode.NONE, None)
    assert (cluster.partition("t", 0).leader, cluster.partition("t", 0).leader_epoch) == (1, epoch + 1)
    assert cluster.controller.imbalanced_partitions() == []


@run_async
async def test_unclean_election_on_request_needs_a_leaderless_partition():
    cluster = await start_cluster(1, 2)
    await cluster.controller.create_topic("t", assignments={0: [1, 2]})
    await cluster.alter_isr("t", [1])
    await cluster.heartbeat(1, want_shut_down=True)  # the only ISR member: the partition waits leaderless
    assert cluster.partition("t").leader == -1
    assert (await cluster.controller.elect_leaders(False, [("t", 0)]))[("t", 0)][0] == \
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    results = await cluster.controller.elect_leaders(True, [("t", 0)])
    assert results[("t", 0)] == (ErrorCode.NONE, None)
    assert (cluster.partition("t").leader, cluster.partition("t").isr) == (2, [2])
    assert (await cluster.controller.elect_leaders(True, [("t", 0)]))[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED


# reassignment


@run_async
async def test_a_reassignment_adds_replicas_then_settles_once_they_are_in_sync():
    cluster = await start_cluster(1, 2, 3, 4)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3]})
    results = await cluster.controller.reassign({("t", 0): [4, 2, 3], ("t", 9): [1], ("nope", 0): [1]})
    assert results[("t", 0)] == (ErrorCode.NONE, None)
    assert results[("t", 9)][0] == results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    p = cluster.partition("t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ([4, 2, 3, 1], [4], [1], 1)
    assert [name for name, _ in cluster.controller.reassignments(None)] == ["t"]
    await cluster.alter_isr("t", [1, 2, 3, 4])  # the new replica caught up: the move settles
    p = cluster.partition("t")
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ([4, 2, 3], [2, 3, 4], [], [])
    assert p.leader in (2, 3, 4) and p.leader_epoch == 1  # the leaving leader handed over
    assert cluster.controller.reassignments(None) == []


@run_async
async def test_a_reassignment_can_be_cancelled_and_bad_targets_are_refused():
    cluster = await start_cluster(1, 2, 3, 4)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3]})
    assert (await cluster.controller.reassign({("t", 0): None}))[("t", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    for bad in ([], [1, 1], [1, 9]):
        assert (await cluster.controller.reassign({("t", 0): bad}))[("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    await cluster.controller.reassign({("t", 0): [4, 2, 3]})
    assert (await cluster.controller.reassign({("t", 0): None}))[("t", 0)] == (ErrorCode.NONE, None)
    p = cluster.partition("t")
    # As Kafka's revert: the replicas less the added ones, in their current order.
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ([2, 3, 1], [], [], 1)


@run_async
async def test_a_reassignment_that_only_drops_replicas_settles_at_once():
    cluster = await start_cluster(1, 2, 3)
    await cluster.controller.create_topic("t", assignments={0: [1, 2, 3]})
    await cluster.controller.reassign({("t", 0): [2, 3]})
    p = cluster.partition("t")
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ([2, 3], [2, 3], 2, [])


@run_async
async def test_snapshot_records_rebuild_the_same_image():
    cluster = await start_cluster(1, 2, 3, racks=["a", "b", None])
    await cluster.controller.create_topic("t", 4, 3, configs={"retention.ms": "1000"})
    await cluster.controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "5000"})
    await cluster.controller.reassign({("t", 0): [2, 3]})
    await cluster.heartbeat(3, want_fence=True)
    await cluster.controller.allocate_producer_ids()
    rebuilt = MetadataImage()
    for record in json.loads(json.dumps(cluster.image.snapshot_records())):
        rebuilt.apply(record, offset=10_000)  # a snapshot's records keep their own epochs
    assert rebuilt.snapshot_records() == cluster.image.snapshot_records()
    assert rebuilt.brokers == cluster.image.brokers and rebuilt.live_brokers == [1, 2]
    assert {n: (t.topic_id, t.partitions, t.configs) for n, t in rebuilt.topics.items()} == \
        {n: (t.topic_id, t.partitions, t.configs) for n, t in cluster.image.topics.items()}
