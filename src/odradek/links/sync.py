"""Topic sync: the node that leads `__cluster_links` keeps each link's mirror topics in step with the source.

As a Kafka client of both clusters it lists the source's topics, and for each one a link selects: records it
as a mirror (before the topic exists here), creates it with the source's partition count and topic configs,
adds partitions the source gained, and, with sync_configs, copies config changes. A topic of the same name
that already exists here and is not the link's mirror is left alone (and logged). Promoted mirrors are
ordinary topics: nothing is synced to them any more.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException
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
            mirror = mirrors.get(name)
            if mirror is not None and (mirror.link != link.name or mirror.state != ACTIVE):
                continue
            if mirror is None and name in local:
                if (link.name, name) not in self._conflicts:
                    self._conflicts.add((link.name, name))
                    log.warning("Cluster link %s: topic %s exists here and is not a mirror; not mirrored",
                                link.name, name)
                continue
            if mirror is None:
                write_records(self.client_properties, [(mirror_key(name), MirrorTopic(name, link.name).to_json())])
            count = len(meta.partitions)
            if name not in local:
                log.info("Cluster link %s: creating mirror topic %s (%d partitions)", link.name, name, count)
                self.local.create_topics([NewTopic(name, count, config=configs.get(name, {}))])[name].result(
                    TIMEOUT_S)
                continue
            if len(local[name].partitions) < count:
                log.info("Cluster link %s: mirror topic %s grows to %d partitions", link.name, name, count)
                self.local.create_partitions([NewPartitions(name, count)])[name].result(TIMEOUT_S)
            if link.sync_configs:
                self._sync_configs(name, configs.get(name, {}))

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
