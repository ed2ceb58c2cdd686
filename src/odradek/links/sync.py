"""Topic sync: the node that leads `__cluster_links` keeps each link's mirror topics in step with the source.

As a Kafka client of both clusters it lists the source's topics, and for each one a link selects: records it
as a mirror (before the topic exists here), creates it with the source's partition count and topic configs,
adds partitions the source gained, and, with sync_configs, copies config changes. A topic of the same name
that already exists here and is not the link's mirror is left alone (and logged). Promoted mirrors are
ordinary topics: nothing is synced to them any more.

With group patterns it also copies the committed offsets of the source's matching consumer groups on the
link's active mirror topics, for groups with no members here (a group consuming here owns its offsets). An
offset is copied as it is, since the mirror's offsets are the source's, but never past the mirror's end: a
consumer that fails over then resumes at the first record it has not committed, and reads what is produced
here after a promotion rather than skipping it.

With sync_acls it also copies the source's ACL bindings on the link's mirror topics and groups, and deletes
the copies of those the source no longer has (acl_sync.py says which; `acls/<link>` records what the link
created). A source that refuses DescribeAcls (no authorizer there, or the link's user may not DESCRIBE the
cluster) is logged once per link, as is a destination without an authorizer.

Each link's source AdminClient is kept from pass to pass (SourceClients), made anew when the link's bootstrap
or source config changes, and dropped when the link is deleted or paused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Set

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka import admin as kafka_admin
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic

from odradek.links.acl_sync import plan_acl_sync
from odradek.links.definition import (
    ACTIVE,
    PROMOTED,
    CopiedAcls,
    LinkDefinition,
    MirrorTopic,
    acls_key,
    mirror_key,
)
from odradek.links.store import wait_until_applied, write_records
from odradek.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
BARRIER_WAIT_S = 2.0  # for the nodes to read a new mirror record; else the next pass creates the topic
# Configs that belong to the destination cluster, never copied from the source
LOCAL_CONFIGS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
                           "min.insync.replicas", "unclean.leader.election.enable"})


# Why a cluster answers no DescribeAcls: it has no authorizer, or the caller may not DESCRIBE the cluster
ACL_REFUSALS = frozenset({KafkaError.SECURITY_DISABLED, KafkaError.CLUSTER_AUTHORIZATION_FAILED})
# DescribeAcls filters of the bindings ACL sync looks at: the LITERAL ones on topics, and on groups
LITERAL_ACL_FILTERS = tuple(
    kafka_admin.AclBindingFilter(resource_type, None, kafka_admin.ResourcePatternType.LITERAL, None, None,
                                 kafka_admin.AclOperation.ANY, kafka_admin.AclPermissionType.ANY)
    for resource_type in (kafka_admin.ResourceType.TOPIC, kafka_admin.ResourceType.GROUP))


class SourceClients:
    """One AdminClient per link for its source cluster, kept from pass to pass (its connections with it), made
    anew when the link's bootstrap or source config changes."""

    def __init__(self, factory: Callable[[dict], AdminClient] = AdminClient):
        self.factory = factory
        self._clients: dict[str, tuple[tuple, AdminClient]] = {}

    def get(self, link: LinkDefinition) -> AdminClient:
        settings = (link.source_bootstrap, tuple(sorted(link.source_config.items())))
        cached = self._clients.get(link.name)
        if cached is None or cached[0] != settings:
            client = self.factory({"bootstrap.servers": link.source_bootstrap, **link.source_config})
            cached = self._clients[link.name] = (settings, client)
        return cached[1]

    def keep_only(self, names: Set[str]) -> None:
        """Drop the clients of links not named (deleted, or paused)."""
        for name in self._clients.keys() - names:
            del self._clients[name]


class TopicSync:
    def __init__(self, reader, client_properties: dict):
        self.reader = reader
        self.client_properties = client_properties
        self.local = AdminClient(dict(client_properties))
        self.sources = SourceClients()
        self._conflicts: set[tuple[str, str]] = set()
        self._acl_refusals: dict[str, str] = {}  # link -> the refusal last logged, until ACL sync works again
        self._missing_acls: dict[str, set] = {}  # link -> copies whose binding the source lacked last pass

    def sync_once(self) -> None:
        """One pass over every link that is not paused (blocking: run it on a thread)."""
        with self.reader.lock:
            links = [link for link in self.reader.state.links.values() if not link.paused]
            mirrors = dict(self.reader.state.mirrors)
            orphans = set(self.reader.state.copied_acls) - set(self.reader.state.links)
        self.sources.keep_only({link.name for link in links})
        for name in sorted(orphans):
            self._forget_copied_acls(name)
        if not links:
            return
        local = self.local.list_topics(timeout=TIMEOUT_S).topics
        for link in links:
            try:
                self._sync_link(link, mirrors, local)
            except KafkaException as exc:
                log.info("Cluster link %s: topic sync failed: %s", link.name, exc)

    def _sync_link(self, link: LinkDefinition, mirrors: dict, local: dict) -> None:
        source = self.sources.get(link)
        selected = {name: meta for name, meta in source.list_topics(timeout=TIMEOUT_S).topics.items()
                    if link.mirrors_topic(name) and meta.error is None}
        configs = _topic_configs(source, list(selected)) if selected else {}
        for name, meta in sorted(selected.items()):
            try:
                self._sync_topic(link, name, meta, mirrors.get(name), local, configs)
            except KafkaException as exc:  # one topic's trouble does not hold up the others
                log.info("Cluster link %s: syncing topic %s failed: %s", link.name, name, exc)
        if link.groups:
            with self.reader.lock:  # now, not as the pass began: a promoted topic's groups are the destination's
                active = {m.topic for m in self.reader.state.mirrors.values()
                          if m.link == link.name and m.state == ACTIVE}
            copy_group_offsets(source, self.local, self.client_properties, link, active & set(local))
        if link.sync_acls:
            try:
                self._sync_acls(link, source)
            except KafkaException as exc:
                log.info("Cluster link %s: ACL sync failed: %s", link.name, exc)

    def _sync_acls(self, link: LinkDefinition, source: AdminClient) -> None:
        """Copy the source's bindings on the link's mirror topics and groups; delete the copies the link made
        of bindings the source no longer has (acl_sync.py)."""
        with self.reader.lock:  # read now: the mirrors this pass recorded count
            state = self.reader.state
            topics = {m.topic for m in state.mirrors.values() if m.link == link.name and m.state == ACTIVE}
            recorded = state.copied_acls.get(link.name, frozenset())
        on_source = self._described_acls(link, source, "the source")
        if on_source is None:
            return
        on_destination = self._described_acls(link, self.local, "this cluster")
        if on_destination is None:
            return
        self._acl_refusals.pop(link.name, None)
        # A copy is deleted only when its binding is missing from the source in two passes running: one answer
        # of a source still loading its ACLs (a restarting node) must not take consumers' access away here.
        missing = {binding for binding in recorded if binding not in on_source}
        unconfirmed = missing - self._missing_acls.get(link.name, set())
        self._missing_acls[link.name] = missing
        changes = plan_acl_sync(link, topics, on_source | unconfirmed, on_destination, recorded)
        for binding in sorted(changes.released, key=str):
            log.info("Cluster link %s: %s is no longer the link's; its copied ACL stays: %s", link.name,
                     binding.resource_name, _text(binding))
        if changes.intent != recorded:
            self._record_copied_acls(link.name, changes.intent)
            recorded = changes.intent
        if changes.create:
            for binding in sorted(changes.create, key=str):
                log.info("Cluster link %s: copying ACL %s", link.name, _text(binding))
            for future in self.local.create_acls([_client_binding(b) for b in changes.create],
                                                 request_timeout=TIMEOUT_S).values():
                future.result(TIMEOUT_S)
        if changes.delete:
            for binding in sorted(changes.delete, key=str):
                log.info("Cluster link %s: deleting copied ACL %s (gone on the source)", link.name,
                         _text(binding))
            for future in self.local.delete_acls([_exact_filter(b) for b in changes.delete],
                                                 request_timeout=TIMEOUT_S).values():
                future.result(TIMEOUT_S)
        if changes.copied != recorded:
            self._record_copied_acls(link.name, changes.copied)

    def _described_acls(self, link: LinkDefinition, admin: AdminClient, cluster: str) -> set[AclBinding] | None:
        """The LITERAL TOPIC and GROUP bindings of a cluster; None (logged once per link) when it refuses
        DescribeAcls."""
        futures = [admin.describe_acls(f, request_timeout=TIMEOUT_S) for f in LITERAL_ACL_FILTERS]
        try:
            return {_binding(b) for future in futures for b in future.result(TIMEOUT_S)}
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() not in ACL_REFUSALS:
                raise
            refusal = f"{cluster} refuses DescribeAcls ({error.name()}: {error.str()}); ACLs are not synced"
            if self._acl_refusals.get(link.name) != refusal:
                self._acl_refusals[link.name] = refusal
                log.warning("Cluster link %s: %s", link.name, refusal)
            return None

    def _record_copied_acls(self, name: str, bindings: Iterable[AclBinding]) -> None:
        bindings = frozenset(bindings)
        write_records(self.client_properties, [(acls_key(name), CopiedAcls(name, bindings).to_json())])
        self._await_state(lambda state: state.copied_acls.get(name) == bindings,
                          f"the copied ACLs of link {name}")

    def _forget_copied_acls(self, name: str) -> None:
        """A deleted link's copies stay as ordinary bindings; its record goes, so that a new link of the same
        name never deletes them."""
        log.info("Cluster link %s was deleted: the ACLs it copied stay", name)
        try:
            write_records(self.client_properties, [(acls_key(name), None)])
            self._await_state(lambda state: name not in state.copied_acls,
                              f"the tombstone of link {name}'s copied ACLs")
        except KafkaException as exc:
            log.info("Cluster link %s: forgetting its copied ACLs failed: %s", name, exc)

    def _sync_topic(self, link: LinkDefinition, name: str, meta, mirror, local: dict, configs: dict) -> None:
        if mirror is not None and mirror.state == PROMOTED and name not in local:
            # a promoted topic deleted since: forget it, so that a link (this one, next pass) may mirror it again
            log.info("Cluster link %s: promoted topic %s no longer exists; its name is free again", link.name, name)
            write_records(self.client_properties, [(mirror_key(name), None)])
            return
        if mirror is not None and (mirror.link != link.name or mirror.state != ACTIVE):
            if (link.name, name) not in self._conflicts:
                self._conflicts.add((link.name, name))
                log.warning("Cluster link %s: topic %s is %s of link %s here; not mirrored", link.name, name,
                            "a mirror" if mirror.state == ACTIVE else "a promoted mirror", mirror.link)
            return
        if mirror is None and name in local:
            if (link.name, name) not in self._conflicts:
                self._conflicts.add((link.name, name))
                log.warning("Cluster link %s: topic %s exists here and is not a mirror; not mirrored",
                            link.name, name)
            return
        if mirror is None:
            with self.reader.lock:  # the link may have gone (or paused) since the pass began
                current = self.reader.state.links.get(link.name)
            if current is None or current.paused:
                return
            write_records(self.client_properties, [(mirror_key(name), MirrorTopic(name, link.name).to_json())])
            self._await_mirror_record(name)
        count = len(meta.partitions)
        if name not in local:
            # Every node must know the topic is a mirror before it exists, or a node leading one of its partitions
            # would take writes into it: create it once they all have read the mirror record (else next pass).
            behind = wait_until_applied(self.client_properties, self.reader.applied_position, BARRIER_WAIT_S)
            if behind:
                log.info("Cluster link %s: mirror topic %s waits for nodes %s to read its record", link.name, name,
                         ", ".join(map(str, behind)))
                return
            log.info("Cluster link %s: creating mirror topic %s (%d partitions)", link.name, name, count)
            self.local.create_topics([NewTopic(name, count, config=configs.get(name, {}))])[name].result(TIMEOUT_S)
            return
        if len(local[name].partitions) < count:
            log.info("Cluster link %s: mirror topic %s grows to %d partitions", link.name, name, count)
            self.local.create_partitions([NewPartitions(name, count)])[name].result(TIMEOUT_S)
        if link.sync_configs:
            self._sync_configs(name, configs.get(name, {}))

    def _await_mirror_record(self, topic: str) -> None:
        """Wait until this node has read the mirror record, so that it refuses producers before the topic
        exists (other nodes read it about as soon)."""
        self._await_state(lambda state: state.read_only(topic) is not None, f"the mirror record of {topic}")

    def _await_state(self, condition: Callable, what: str) -> None:
        """Wait until this node's reader has read back what the sync wrote: the next pass starts from it."""
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            with self.reader.lock:
                if condition(self.reader.state):
                    return
            time.sleep(0.05)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading back {what}"))

    def _sync_configs(self, topic: str, wanted: dict[str, str]) -> None:
        current = _topic_configs(self.local, [topic]).get(topic, {})
        if current == wanted:
            return
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=wanted)
        self.local.alter_configs([resource])[resource].result(TIMEOUT_S)  # replaces the topic's overrides


def _binding(binding: kafka_admin.AclBinding) -> AclBinding:
    """A binding as confluent-kafka gives it, as Odradek's (the same wire codes)."""
    return AclBinding(ResourceType(binding.restype.value), binding.name,
                      PatternType(binding.resource_pattern_type.value), binding.principal, binding.host,
                      AclOperation(binding.operation.value), AclPermissionType(binding.permission_type.value))


def _client_binding(binding: AclBinding) -> kafka_admin.AclBinding:
    return kafka_admin.AclBinding(*_client_fields(binding))


def _exact_filter(binding: AclBinding) -> kafka_admin.AclBindingFilter:
    return kafka_admin.AclBindingFilter(*_client_fields(binding))


def _client_fields(binding: AclBinding) -> tuple:
    return (kafka_admin.ResourceType(binding.resource_type.value), binding.resource_name,
            kafka_admin.ResourcePatternType(binding.pattern_type.value), binding.principal, binding.host,
            kafka_admin.AclOperation(binding.operation.value),
            kafka_admin.AclPermissionType(binding.permission_type.value))


def _text(binding: AclBinding) -> str:
    return (f"{binding.permission_type.name} {binding.principal} {binding.operation.name} on "
            f"{binding.resource_type.name} {binding.resource_name} from {binding.host}")


def _topic_configs(admin: AdminClient, topics: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's own settings (not the cluster's defaults), less the ones that stay local."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in topics]
    found = {}
    for resource, future in admin.describe_configs(resources).items():
        entries = future.result(TIMEOUT_S)
        found[resource.name] = {name: entry.value for name, entry in entries.items()
                                if getattr(entry.source, "value", entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                                and name not in LOCAL_CONFIGS and entry.value is not None}
    return found


def copy_group_offsets(source: AdminClient, local: AdminClient, local_properties: dict, link: LinkDefinition,
                       mirrored: set[str]) -> list[str]:
    """Copy the committed offsets of the source's groups the link selects, on these mirror topics, to the
    groups of the same names here, capped at the mirrors' ends; groups with members here are left alone.
    Returns the groups copied."""
    if not link.groups or not mirrored:
        return []
    listed = source.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    groups = sorted(g.group_id for g in listed.valid if link.mirrors_group(g.group_id))
    if not groups:
        return []
    busy = set()
    for group, future in local.describe_consumer_groups(groups, request_timeout=TIMEOUT_S).items():
        try:
            if future.result(TIMEOUT_S).members:
                busy.add(group)
        except KafkaException:
            pass  # not known here yet
    ends = _ends(local_properties, mirrored)
    copied = []
    for group in groups:
        if group in busy:
            continue
        request = [ConsumerGroupTopicPartitions(group)]
        committed = source.list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
        offsets = [TopicPartition(tp.topic, tp.partition, min(tp.offset, ends[(tp.topic, tp.partition)]))
                   for tp in committed.topic_partitions if tp.offset >= 0 and (tp.topic, tp.partition) in ends]
        if offsets:
            local.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)],
                                               request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
            copied.append(group)
    return copied


def _ends(properties: dict, topics: set[str]) -> dict[tuple[str, int], int]:
    """The high watermark of every partition of these local topics."""
    from confluent_kafka import Consumer

    consumer = Consumer({**properties, "group.id": "odradek-cluster-links-sync"})
    try:
        ends = {}
        for topic, meta in consumer.list_topics(timeout=TIMEOUT_S).topics.items():
            if topic in topics:
                for index in meta.partitions:
                    ends[(topic, index)] = consumer.get_watermark_offsets(TopicPartition(topic, index),
                                                                          timeout=TIMEOUT_S)[1]
        return ends
    finally:
        consumer.close()
