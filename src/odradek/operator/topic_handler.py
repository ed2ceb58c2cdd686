"""Reconciling an OdradekTopic: the Kafka topic made to match its spec, as Strimzi's unidirectional topic operator does.

A pass creates the topic if it is missing, raises its partition count, SETs the config keys the spec names and
DELETEs (back to the default) those the operator set before and the spec no longer names; a key the spec never
named is never touched, so settings a client changed itself stay. The keys the operator set are kept in
status.managedConfigKeys. Decreasing partitions or changing replicas is refused (NotReady, NotSupported) while the
rest of the spec is still applied; renaming a managed topic is refused and nothing applied. A topic that exists
when its resource first sees it is adopted, as Strimzi does; among OdradekTopics naming one topic the oldest
manages it and the others are NotReady (ResourceConflict).

The topic's replicas are its partitions' smallest replica count (replication_factor): a partition the balancer
is moving lists its new replicas with its old until the move ends, which would otherwise read as a changed
replication factor and flap the topic NotReady.

The decisions are pure functions (plan_topic, topic_state) from the spec and what the cluster holds; the shell
around them talks to the cluster with confluent-kafka's AdminClient, whose blocking calls run in a thread.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from odradek.operator.admin_calls import REQUEST_TIMEOUT_S, RequestRefused, future_result
from odradek.operator.crds import CLUSTER_LABEL, TOPIC_NAME
from odradek.operator.status import observed_generation, status_conditions

MANAGED_ANNOTATION = "odradek.io/managed"  # "false": deleting the resource keeps the topic
MANAGED_CONFIG_STATUS = "managedConfigKeys"
LAST_SEEN = ("topicName", "topicId", "partitions", "replicas")  # status fields that describe the topic
# How long a pass waits for the topic or partitions it created to be in the metadata a broker answers with.
CHANGE_VISIBLE_S = 15.0


class TopicSpecError(ValueError):
    """The resource asks for something no topic can be (the CRD schema would normally have refused it)."""


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replicas: int
    config: dict[str, str]


@dataclass(frozen=True)
class TopicState:
    """What the cluster holds for a topic."""

    topic_id: str
    partitions: int
    replicas: int
    config: dict[str, str]  # every config's current value
    overridden: frozenset[str]  # the keys set on the topic itself (not a broker or built-in default)


@dataclass(frozen=True)
class TopicPlan:
    """What one pass does to the topic, and what it refuses."""

    create: bool = False
    partitions: int | None = None  # raise the partition count to this
    set_config: dict[str, str] = field(default_factory=dict)
    delete_config: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()  # one line per change not made
    managed_config: tuple[str, ...] = ()  # the keys the operator has set once the plan is carried out


def parse_topic(resource: Mapping) -> TopicSpec:
    spec = resource.get("spec") or {}
    name = spec.get("topicName") or resource.get("metadata", {}).get("name", "")
    if not re.fullmatch(TOPIC_NAME, name) or name in (".", ".."):
        raise TopicSpecError(f"'{name}' is not a valid topic name (1 to 249 of a-z A-Z 0-9 . _ -)")
    counts = {}
    for key, most in (("partitions", 2**31 - 1), ("replicas", 32767)):  # Int32 and Int16 on the wire
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise TopicSpecError(f"spec.{key} must be an integer from 1 to {most}, got {value!r}")
        counts[key] = value
    config = {}
    for key, value in (spec.get("config") or {}).items():
        if isinstance(value, bool):  # YAML's true/false where a string was meant
            value = "true" if value else "false"
        elif isinstance(value, int | float):
            value = str(value)
        elif not isinstance(value, str):
            raise TopicSpecError(f"spec.config.{key} must be a string, got {value!r}")
        config[key] = value
    return TopicSpec(name, counts["partitions"], counts["replicas"], config)


def managing_resource(resource: Mapping, topic_name: str, others: Iterable[Mapping]) -> str | None:
    """The name of an older OdradekTopic of the same cluster naming the same topic, which manages it instead of
    `resource`; None if `resource` is the oldest. Creation time decides (then name, as two can share a second),
    as in Strimzi. One being deleted is no rival: the topic goes with it, and the next oldest creates it again."""
    def age(obj: Mapping) -> tuple[str, str]:
        meta = obj.get("metadata", {})
        return meta.get("creationTimestamp") or "", meta.get("name") or ""

    def cluster(obj: Mapping) -> str | None:
        return (obj.get("metadata", {}).get("labels") or {}).get(CLUSTER_LABEL)

    mine = resource.get("metadata", {})
    rivals = []
    for other in others:
        meta = other.get("metadata", {})
        if (meta.get("uid"), meta.get("name")) == (mine.get("uid"), mine.get("name")) or meta.get("deletionTimestamp") \
                or cluster(other) != cluster(resource):
            continue
        try:
            other_name = parse_topic(other).name
        except TopicSpecError:
            continue
        if other_name == topic_name and age(other) < age(resource):
            rivals.append(other)
    return age(min(rivals, key=age))[1] if rivals else None


def plan_topic(spec: TopicSpec, state: TopicState | None, managed_before: Iterable[str]) -> TopicPlan:
    """What to do to make the topic match the spec: `state` is what the cluster holds (None: no such topic) and
    `managed_before` the config keys the operator set in earlier passes."""
    if state is None:
        return TopicPlan(create=True, set_config=dict(spec.config), managed_config=tuple(sorted(spec.config)))
    refused = []
    partitions = None
    if spec.partitions > state.partitions:
        partitions = spec.partitions
    elif spec.partitions < state.partitions:
        refused.append(f"partitions cannot be decreased (the topic has {state.partitions}, "
                       f"the spec asks for {spec.partitions})")
    if spec.replicas != state.replicas:
        refused.append(f"replicas cannot be changed by the operator (the topic has {state.replicas}, the spec asks "
                       f"for {spec.replicas}): reassign its partitions instead")
    to_set = {key: value for key, value in spec.config.items()
              if key not in state.overridden or state.config.get(key) != value}
    to_delete = tuple(sorted(key for key in set(managed_before) - set(spec.config) if key in state.overridden))
    return TopicPlan(partitions=partitions, set_config=to_set, delete_config=to_delete, refused=tuple(refused),
                     managed_config=tuple(sorted(spec.config)))


def replication_factor(replica_counts: Iterable[int]) -> int:
    """The topic's replication factor, judged from its partitions' replica counts: the smallest (0 for none).

    A partition being reassigned (the balancer moving a replica) lists its target replicas and those being
    removed together until the move ends, so counts at least as many as before and after it; describing a topic
    through confluent-kafka does not say which replicas are being added (TopicPartitionInfo has replicas and isr
    only). A partition not being moved counts exactly its own. So the smallest count is not raised by moves under
    way unless every partition is being moved at once, where the largest is raised as soon as one is, and the most
    common as soon as most are. And the partition with the fewest replicas, the first to lose data, is the one
    the status reports."""
    return min(replica_counts, default=0)


def topic_state(description, entries: Mapping) -> TopicState:
    """What the cluster holds for a topic, from confluent-kafka's TopicDescription and its ConfigEntry by key."""
    return TopicState(
        topic_id=str(description.topic_id), partitions=len(description.partitions),
        replicas=replication_factor(len(p.replicas) for p in description.partitions),
        config={key: entry.value for key, entry in entries.items()},
        overridden=frozenset(key for key, entry in entries.items()
                             if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value))


def topic_conditions(old_status: Mapping, plan: TopicPlan) -> list[dict]:
    if plan.refused:
        return status_conditions(old_status, [("NotReady", "NotSupported", "; ".join(plan.refused))])
    return status_conditions(old_status, [("Ready", "TopicReady", "the topic matches the spec")])


async def reconcile_topic(namespace: str, resource: Mapping, client_config: dict,
                          others: Iterable[Mapping] = ()) -> dict:
    """Make the topic match the resource's spec; the status to write (the whole status, not a patch).

    `client_config` reaches the cluster as an admin (librdkafka settings with bootstrap.servers); `others` are
    the namespace's OdradekTopics (this one among them or not; other clusters' are skipped), to find an older
    one naming the same topic (none given: no conflict is detected, and every resource naming it manages it).
    """
    old_status = resource.get("status") or {}
    # What the last pass saw, kept when this one cannot look: delete_topic deletes the topicName and topicId kept.
    status: dict = {key: old_status[key] for key in (*LAST_SEEN, MANAGED_CONFIG_STATUS) if key in old_status}
    status |= observed_generation(resource)
    try:
        spec = parse_topic(resource)
    except TopicSpecError as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "InvalidSpec", str(e))])
        return status
    managed_name = old_status.get("topicName") if old_status.get("topicId") else None
    if managed_name is not None and managed_name != spec.name:  # Strimzi refuses it too: the old topic would linger
        status["conditions"] = status_conditions(old_status, [(
            "NotReady", "NotSupported", f"spec.topicName cannot be changed (the resource manages {managed_name})")])
        return status
    if (rival := managing_resource(resource, spec.name, others)) is not None:
        status = {key: status[key] for key in ("observedGeneration",) if key in status}
        status["topicName"] = spec.name
        status["conditions"] = status_conditions(old_status, [(
            "NotReady", "ResourceConflict",
            f"topic {spec.name} is managed by OdradekTopic {namespace}/{rival}, which is older")])
        return status

    try:
        plan, state = await asyncio.to_thread(_apply_topic, client_config, spec,
                                              old_status.get(MANAGED_CONFIG_STATUS) or [])
    except RequestRefused as e:
        status["conditions"] = status_conditions(old_status, [("NotReady", "KafkaError", str(e))])
        return status
    status |= {"topicName": spec.name, "topicId": state.topic_id, "partitions": state.partitions,
               "replicas": state.replicas, MANAGED_CONFIG_STATUS: list(plan.managed_config)}
    status["conditions"] = topic_conditions(old_status, plan)
    return status


async def delete_topic(resource: Mapping, client_config: dict) -> None:
    """Delete the resource's topic from the cluster, unless the resource says odradek.io/managed: "false". Only
    the topic the resource managed is deleted (its name and id are in the status): not one a conflicting resource
    never managed, nor one a client deleted and created again since."""
    annotations = resource.get("metadata", {}).get("annotations") or {}
    status = resource.get("status") or {}
    name, topic_id = status.get("topicName"), status.get("topicId")
    if annotations.get(MANAGED_ANNOTATION) == "false" or not name or not topic_id:
        return
    await asyncio.to_thread(_delete_topic, client_config, name, topic_id)


# ---------------------------------------------------------------------------------------------------
# Cluster I/O (blocking: run in a thread)


def _apply_topic(client_config: dict, spec: TopicSpec, managed_before: Iterable[str]) -> tuple[TopicPlan, TopicState]:
    admin = AdminClient(client_config)
    plan = plan_topic(spec, _describe(admin, spec.name), managed_before)
    if plan.create:
        topic = NewTopic(spec.name, num_partitions=spec.partitions, replication_factor=spec.replicas,
                         config=plan.set_config)
        future_result(admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S)[spec.name],
                      f"create {spec.name}", ignore=KafkaError.TOPIC_ALREADY_EXISTS)
    else:
        if plan.partitions is not None:
            future_result(admin.create_partitions([NewPartitions(spec.name, plan.partitions)],
                                                  request_timeout=REQUEST_TIMEOUT_S)[spec.name],
                          f"raise the partitions of {spec.name}")
        if plan.set_config or plan.delete_config:
            entries = ([ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                        for key, value in plan.set_config.items()]
                       + [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
                          for key in plan.delete_config])
            resource = ConfigResource(ResourceType.TOPIC, spec.name, incremental_configs=entries)
            for future in admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S).values():
                future_result(future, f"alter the config of {spec.name}")
    # The broker answering may not have the new topic or partitions in its metadata yet: the status must.
    made = spec.partitions if plan.create or plan.partitions is not None else 1
    deadline = time.monotonic() + CHANGE_VISIBLE_S
    while ((state := _describe(admin, spec.name)) is None or state.partitions < made) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    if state is None or state.partitions < made:
        raise RuntimeError(f"topic {spec.name} does not have the {made} partitions it was given in the metadata "
                           f"after {CHANGE_VISIBLE_S:g}s")
    return plan, state


def _describe(admin: AdminClient, name: str) -> TopicState | None:
    future = admin.describe_topics(TopicCollection([name]), request_timeout=REQUEST_TIMEOUT_S)[name]
    description = future_result(future, f"describe {name}", ignore=KafkaError.UNKNOWN_TOPIC_OR_PART)
    if description is None:
        return None
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = future_result(admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource],
                            f"describe the config of {name}")
    return topic_state(description, entries)


def _delete_topic(client_config: dict, name: str, topic_id: str) -> None:
    admin = AdminClient(client_config)
    state = _describe(admin, name)
    if state is None or state.topic_id != topic_id:
        return
    future_result(admin.delete_topics([name], request_timeout=REQUEST_TIMEOUT_S)[name], f"delete {name}",
                  ignore=KafkaError.UNKNOWN_TOPIC_OR_PART)
