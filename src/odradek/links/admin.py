"""Cluster links managed from outside the nodes: create, list, describe, pause, resume, promote and delete, the
operations behind `odradek links`, the console's Links pages and its REST API.

Each operation is a blocking Kafka client of the destination cluster (`client_properties`: its librdkafka
settings) and, where it must be, of the source, with the link's own source settings only: the destination's
credentials are never sent to the source. Operations return plain data and raise a LinkError whose text is one
line; its subclass says why (no such link, a conflict with the links' state, a cluster that did not answer or
answered with an error), so that a caller can answer with the matching status.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.cli.main import is_unreachable, kafka_error_text
from odradek.links.definition import (
    ACTIVE,
    PROMOTED,
    LinkDefinition,
    LinkError,
    LinkState,
    MirrorTopic,
    link_key,
    mirror_key,
)
from odradek.links.store import ensure_links_topic, read_state, wait_until_applied, write_records
from odradek.links.sync import copy_group_offsets

LINKS_TOPIC_REPLICATION = 3  # at most; fewer on a smaller cluster
# The destination's settings a source client shares: timeouts and logging, never security or credentials.
SHARED_WITH_SOURCE = ("client.id", "socket.connection.setup.timeout.ms", "log.connection.close", "error_cb",
                      "logger", "log_level")
AGE_WAIT_S = 3.0  # at most this long to find the oldest unmirrored record of each lagging partition
OFFSETS_GROUP = "odradek-cli-links"  # librdkafka wants a group id; these consumers only ask for end offsets
PROMOTE_POLL_S = 0.2


class NoSuchLink(LinkError):
    """The link named does not exist."""


class LinkConflict(LinkError):
    """Refused by the links' state: a name taken already, or a delete while the link feeds active mirrors."""


class ClusterUnreachable(LinkError):
    """The destination or the source did not answer in time."""


class ClusterFailure(LinkError):
    """The destination or the source answered with an error."""


def patterns(text: str) -> tuple[str, ...]:
    """Patterns (or topic names) written comma-separated or one a line, blanks dropped."""
    return tuple(p.strip() for p in text.replace("\n", ",").split(",") if p.strip())


def create_link(client_properties: dict, link: LinkDefinition, timeout_s: float) -> list[str]:
    """Record a new link, once the source has answered; the source topics its patterns select now."""
    state = read_links(client_properties, timeout_s)
    if link.name in state.links:
        raise LinkConflict(f"link {link.name} already exists")
    try:
        source = AdminClient(source_properties(client_properties, link))
    except (KafkaException, ValueError, TypeError) as exc:
        raise LinkError(f"source config: {_reason(exc)}") from None
    try:
        selected = sorted(t for t in source.list_topics(timeout=timeout_s).topics if link.mirrors_topic(t))
    except KafkaException as exc:
        failure = ClusterUnreachable if _unreachable(exc) else ClusterFailure
        raise failure(f"cannot reach the source cluster at {link.source_bootstrap}: "
                      f"{exc.args[0].str() if exc.args else exc}") from None
    admin = AdminClient(client_properties)
    try:
        brokers = len(admin.list_topics(timeout=timeout_s).brokers)
        ensure_links_topic(admin, max(1, min(LINKS_TOPIC_REPLICATION, brokers)))
        write_records(client_properties, [(link_key(link.name), link.to_json())])
    except KafkaException as exc:
        raise _cluster_error(exc, client_properties, timeout_s, "create link") from None
    return selected


def list_links(client_properties: dict, timeout_s: float) -> list[dict]:
    """One row per link, by name: its source, topic patterns, state, and how many mirrors are active and
    promoted."""
    state = read_links(client_properties, timeout_s)
    rows = []
    for link in sorted(state.links.values(), key=lambda link: link.name):
        mirrors = _mirrors(state, link)
        rows.append({"name": link.name, "source": link.source_bootstrap, "topics": ",".join(link.topics),
                     "state": "PAUSED" if link.paused else "ACTIVE",
                     "mirrors": sum(m.state == ACTIVE for m in mirrors),
                     "promoted": sum(m.state == PROMOTED for m in mirrors)})
    return rows


def describe_link(client_properties: dict, name: str, timeout_s: float) -> dict:
    """A link's definition (its source config left out) and each of its mirror partitions."""
    state = read_links(client_properties, timeout_s)
    link = find_link(state, name)
    partitions = mirror_partitions(client_properties, link, _mirrors(state, link), timeout_s)
    ages = unmirrored_ages(source_properties(client_properties, link), [p for p in partitions if p["lag"]],
                           min(timeout_s, AGE_WAIT_S))
    for row in partitions:
        row["lag_seconds"] = 0.0 if row["lag"] == 0 else ages.get((row["topic"], row["partition"]))
    return {"name": link.name, "source": link.source_bootstrap, "topics": list(link.topics),
            "groups": list(link.groups), "paused": link.paused, "sync_configs": link.sync_configs,
            "sync_acls": link.sync_acls, "partitions": partitions}


def unmirrored_ages(source_config: dict, lagging: list[dict], wait_s: float) -> dict[tuple[str, int], float]:
    """Seconds behind the source, per lagging partition: how long ago the source wrote the oldest record its
    mirror lacks (the record at the mirror's end). A partition whose missing records the source does not hand
    out within `wait_s` (a transaction marker alone, say) is left out: unknown."""
    if not lagging:
        return {}
    source = Consumer({**source_config, "group.id": OFFSETS_GROUP, "enable.auto.commit": False,
                       "isolation.level": "read_uncommitted"})
    ages: dict[tuple[str, int], float] = {}
    try:
        source.assign([TopicPartition(row["topic"], row["partition"], row["mirror_end"]) for row in lagging])
        deadline = time.monotonic() + wait_s
        while len(ages) < len(lagging) and time.monotonic() < deadline:
            message = source.poll(max(0.0, min(0.5, deadline - time.monotonic())))
            if message is None or message.error():
                continue
            age_s = max(0.0, time.time() - message.timestamp()[1] / 1000)
            ages.setdefault((message.topic(), message.partition()), round(age_s, 3))
    except KafkaException:
        pass  # the source does not answer: the ages are unknown, as the lag is
    finally:
        source.close()
    return ages


def mirror_partitions(client_properties: dict, link: LinkDefinition, mirrors: Iterable[MirrorTopic],
                      timeout_s: float) -> list[dict]:
    """Each partition of these mirror topics: its state, the source's and the mirror's end offsets and the lag
    (None where the source does not answer, and for a promoted mirror, which no longer follows it)."""
    local = Consumer({**client_properties, "group.id": OFFSETS_GROUP, "enable.auto.commit": False})
    source = Consumer({**source_properties(client_properties, link), "group.id": OFFSETS_GROUP,
                       "enable.auto.commit": False})
    rows, source_answers = [], True
    try:
        topics = local.list_topics(timeout=timeout_s).topics  # all: naming a topic could create it
        for mirror in sorted(mirrors, key=lambda m: m.topic):
            topic = topics.get(mirror.topic)
            for index in sorted(topic.partitions if topic is not None and topic.error is None else ()):
                partition = TopicPartition(mirror.topic, index)
                mirror_end = local.get_watermark_offsets(partition, timeout=timeout_s)[1]
                source_end = None  # unknown while the source does not answer
                if source_answers:
                    try:
                        source_end = source.get_watermark_offsets(partition, timeout=timeout_s)[1]
                    except KafkaException:
                        source_answers = False  # not asked again: each question would wait the whole timeout
                rows.append({"topic": mirror.topic, "partition": index, "state": mirror.state,
                             "source_end": source_end, "mirror_end": mirror_end,
                             "lag": None if source_end is None or mirror.state != ACTIVE
                             else max(0, source_end - mirror_end)})
    except KafkaException as exc:
        raise _cluster_error(exc, client_properties, timeout_s, f"describe link {link.name}") from None
    finally:
        local.close()
        source.close()
    return rows


def set_paused(client_properties: dict, name: str, paused: bool, timeout_s: float) -> None:
    """Pause a link (its mirrors stay read-only and stop following the source) or resume it."""
    link = find_link(read_links(client_properties, timeout_s), name)
    _write(client_properties, [(link_key(link.name), replace(link, paused=paused).to_json())], timeout_s)


def promote(client_properties: dict, name: str, topics: Iterable[str] | None, timeout_s: float) -> dict:
    """Make the link's active mirror topics (or those named) ordinary writable topics: {"name", "topics" (those
    promoted), "warnings" (one line each: records left behind, group offsets not copied, nodes that have not
    applied the promotion yet)}.

    A planned failover: first wait (up to `timeout_s`) until the mirrors hold what the source has, so nothing
    stays behind, and copy the groups' offsets once more; a source that does not answer (a disaster) is
    promoted from where the mirrors are."""
    state = read_links(client_properties, timeout_s)
    link = find_link(state, name)
    active = {m.topic for m in _mirrors(state, link) if m.state == ACTIVE}
    wanted = active if topics is None else set(topics)
    unknown = sorted(wanted - active)
    if unknown:
        raise LinkError(f"not an active mirror topic of link {link.name}: {', '.join(unknown)}")
    mirrors = [m for m in state.mirrors.values() if m.topic in wanted]
    warnings = []
    deadline = time.monotonic() + timeout_s
    while True:
        lags = [row["lag"] for row in mirror_partitions(client_properties, link, mirrors, timeout_s)]
        if all(lag == 0 for lag in lags) or None in lags or time.monotonic() > deadline:
            break
        time.sleep(PROMOTE_POLL_S)
    behind = sum(lag or 0 for lag in lags)
    if None in lags or behind:
        warnings.append(f"promoting with {'an unknown number of' if None in lags else behind} records of the "
                        "source not mirrored")
    if link.groups:  # a last copy of the groups' offsets, so consumers resume at their latest commits
        try:
            copy_group_offsets(AdminClient(source_properties(client_properties, link)),
                               AdminClient(client_properties), client_properties, link, wanted)
        except KafkaException as exc:
            warnings.append(f"consumer group offsets not copied (the source does not answer: "
                            f"{exc.args[0].str() if exc.args else exc}); groups resume at the offsets copied before")
    next_offset = _write(client_properties, [(mirror_key(t), MirrorTopic(t, link.name, PROMOTED).to_json())
                                             for t in sorted(wanted)], timeout_s)
    # Each node refuses producers on a mirror until it has read the promotion: say which have not yet.
    try:
        lagging = wait_until_applied(client_properties, next_offset, timeout_s)
    except KafkaException as exc:
        warnings.append(f"cannot tell whether every node has applied the promotion ({_reason(exc)}): producers "
                        "to a node that has not are refused until it does")
    else:
        if lagging:
            nodes = f"node {lagging[0]} has" if len(lagging) == 1 else f"nodes {', '.join(map(str, lagging))} have"
            warnings.append(f"{nodes} not applied the promotion within {timeout_s:g}s: producers to "
                            f"{'that node are' if len(lagging) == 1 else 'those nodes are'} refused until "
                            f"{'it does' if len(lagging) == 1 else 'they do'}")
    return {"name": link.name, "topics": sorted(wanted), "warnings": warnings}


def delete_link(client_properties: dict, name: str, timeout_s: float) -> None:
    """Delete a link that feeds no active mirror topic (promoted mirrors stay as the ordinary topics they are)."""
    state = read_links(client_properties, timeout_s)
    link = find_link(state, name)
    active = sorted(m.topic for m in _mirrors(state, link) if m.state == ACTIVE)
    if active:
        raise LinkConflict(f"link {link.name} still feeds mirror topics {', '.join(active)}: promote or delete "
                           "them first")
    _write(client_properties, [(link_key(link.name), None)], timeout_s)


def read_links(client_properties: dict, timeout_s: float) -> LinkState:
    """The links as `__cluster_links` says now (none when the topic does not exist)."""
    try:
        return read_state(client_properties, timeout_s)
    except KafkaException as exc:
        raise _cluster_error(exc, client_properties, timeout_s, "read the links") from None


def find_link(state: LinkState, name: str) -> LinkDefinition:
    link = state.links.get(name)
    if link is None:
        raise NoSuchLink(f"no link named {name}")
    return link


def source_properties(client_properties: dict, link: LinkDefinition) -> dict:
    """Client settings for the link's source: the destination client's timeouts and logging, and the link's
    source config; never the destination's security settings (its credentials are not the source's)."""
    shared = {key: value for key, value in client_properties.items() if key in SHARED_WITH_SOURCE}
    return {**shared, "bootstrap.servers": link.source_bootstrap, **link.source_config}


def _mirrors(state: LinkState, link: LinkDefinition) -> list[MirrorTopic]:
    return [m for m in state.mirrors.values() if m.link == link.name]


def _write(client_properties: dict, records: list[tuple[bytes, bytes | None]], timeout_s: float) -> int:
    try:
        return write_records(client_properties, records)
    except KafkaException as exc:
        raise _cluster_error(exc, client_properties, timeout_s, "write the link") from None


def _unreachable(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return hasattr(err, "code") and is_unreachable(err)


def _reason(exc: Exception) -> str:
    err = exc.args[0] if exc.args else None
    return kafka_error_text(err) if hasattr(err, "code") else str(exc)


def _cluster_error(exc: KafkaException, client_properties: dict, timeout_s: float, action: str) -> LinkError:
    """The destination's failure in one line: it did not answer, or `action` failed with its answer."""
    if _unreachable(exc):
        return ClusterUnreachable(f"cannot reach {client_properties.get('bootstrap.servers')} "
                                  f"(no answer within {timeout_s:g}s)")
    return ClusterFailure(f"{action}: {_reason(exc)}")
