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
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic

from odradek.links.definition import ACTIVE, LinkDefinition, MirrorTopic, mirror_key
from odradek.links.store import write_records

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
# Configs that belong to the destination cluster, never copied from the source
LOCAL_CONFIGS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
                           "min.insync.replicas", "unclean.leader.election.enable"})


class TopicSync:
    def __init__(self, reader, client_properties: dict):
        self.reader = reader
        self.client_properties = client_properties
        self.local = AdminClient(dict(client_properties))
        self._conflicts: set[tuple[str, str]] = set()

    def sync_once(self) -> None:
        """One pass over every link that is not paused (blocking: run it on a thread)."""
        with self.reader.lock:
            links = [link for link in self.reader.state.links.values() if not link.paused]
            mirrors = dict(self.reader.state.mirrors)
        if not links:
            return
        local = self.local.list_topics(timeout=TIMEOUT_S).topics
        for link in links:
            try:
                self._sync_link(link, mirrors, local)
            except KafkaException as exc:
                log.info("Cluster link %s: topic sync failed: %s", link.name, exc)

    def _sync_link(self, link: LinkDefinition, mirrors: dict, local: dict) -> None:
        source = AdminClient({"bootstrap.servers": link.source_bootstrap, **link.source_config})
        selected = {name: meta for name, meta in source.list_topics(timeout=TIMEOUT_S).topics.items()
                    if link.mirrors_topic(name) and meta.error is None}
        if not selected:
            return
        configs = _topic_configs(source, list(selected))
        for name, meta in sorted(selected.items()):
            try:
                self._sync_topic(link, name, meta, mirrors.get(name), local, configs)
            except KafkaException as exc:  # one topic's trouble does not hold up the others
                log.info("Cluster link %s: syncing topic %s failed: %s", link.name, name, exc)
        if link.groups:
            active = {m.topic for m in mirrors.values() if m.link == link.name and m.state == ACTIVE}
            copy_group_offsets(source, self.local, self.client_properties, link, active & set(local))

    def _sync_topic(self, link: LinkDefinition, name: str, meta, mirror, local: dict, configs: dict) -> None:
        if mirror is not None and (mirror.link != link.name or mirror.state != ACTIVE):
            return
        if mirror is None and name in local:
            if (link.name, name) not in self._conflicts:
                self._conflicts.add((link.name, name))
                log.warning("Cluster link %s: topic %s exists here and is not a mirror; not mirrored",
                            link.name, name)
            return
        if mirror is None:
            write_records(self.client_properties, [(mirror_key(name), MirrorTopic(name, link.name).to_json())])
            self._await_mirror_record(name)
        count = len(meta.partitions)
        if name not in local:
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
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            with self.reader.lock:
                if self.reader.state.read_only(topic) is not None:
                    return
            time.sleep(0.05)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading back the mirror record of {topic}"))

    def _sync_configs(self, topic: str, wanted: dict[str, str]) -> None:
        current = _topic_configs(self.local, [topic]).get(topic, {})
        if current == wanted:
            return
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=wanted)
        self.local.alter_configs([resource])[resource].result(TIMEOUT_S)  # replaces the topic's overrides


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
