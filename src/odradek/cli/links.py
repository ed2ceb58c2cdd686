"""`odradek links create|list|describe|pause|resume|promote|delete`: cluster links, whose mirror topics copy
another Kafka cluster's topics byte for byte, at the same offsets.

The commands are Kafka clients of the destination cluster (the one --bootstrap-server names): a link is a
record in its `__cluster_links` topic, which every node reads (links/definition.py). `create` also checks
that the source answers. The parser imports no client code; it is imported only when a command runs.
"""

from __future__ import annotations

import argparse

from odradek.cli.main import ArgumentParser, CliError, client_config, raise_for_kafka_error, read_properties
from odradek.cli.output import print_json, print_table

LINKS_TOPIC_REPLICATION = 3  # at most; fewer on a smaller cluster


def add_links_parser(commands, client, output) -> None:
    links = commands.add_parser("links", help="mirror topics of another cluster, offsets preserved",
                                description="Manage cluster links: mirror topics that copy another Kafka "
                                            "cluster's topics byte for byte, at the same offsets.")
    sub = links.add_subparsers(dest="links_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("create", parents=[client], help="create a link",
                       description="Create a link from the source cluster to this one: every source topic the "
                                   "patterns select gets a read-only mirror topic here, with the source's "
                                   "partitions, configs and records at the same offsets.")
    p.add_argument("name")
    p.add_argument("--source-bootstrap", required=True, metavar="HOST:PORT",
                   help="the source cluster's bootstrap servers")
    p.add_argument("--source-config", metavar="FILE",
                   help="client properties for the source (librdkafka names: security.protocol, sasl.*, ssl.*)")
    p.add_argument("--topics", required=True, metavar="PATTERN",
                   help="the source topics to mirror: regular expressions a whole name must match, "
                        "comma-separated (internal topics are never mirrored)")
    p.add_argument("--groups", metavar="PATTERN",
                   help="consumer groups whose committed offsets on the mirror topics are copied (for groups "
                        "with no members here): regular expressions, comma-separated")
    p.add_argument("--sync-configs", action="store_true",
                   help="keep copying the source topics' config changes to the mirrors")
    p.set_defaults(run=create_link)

    p = sub.add_parser("list", parents=[client, output], help="list links", description="List the links.")
    p.set_defaults(run=list_links)

    p = sub.add_parser("describe", parents=[client, output], help="a link's mirror partitions and their lag",
                       description="Show each mirror partition of a link: its state, the source's and the "
                                   "mirror's end offsets, and how many records the mirror is behind.")
    p.add_argument("name")
    p.set_defaults(run=describe_link)

    for action, paused, text in (("pause", True, "stop mirroring (the mirrors stay read-only)"),
                                 ("resume", False, "mirror again from where the mirrors are")):
        p = sub.add_parser(action, parents=[client], help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("name")
        p.set_defaults(run=lambda args, paused=paused: set_paused(args, paused))

    p = sub.add_parser("promote", parents=[client], help="fail over: make mirror topics writable",
                       description="Stop mirroring the link's mirror topics (or those named) and make them "
                                   "ordinary, writable topics. First waits (up to --timeout) until the mirrors "
                                   "hold the source's records and copies the groups' offsets once more; a "
                                   "source that does not answer is promoted from where the mirrors are. See "
                                   "docs/multi-datacenter.md.")
    p.add_argument("name")
    p.add_argument("--topics", metavar="TOPIC[,TOPIC...]", help="only these mirror topics")
    p.set_defaults(run=promote)

    p = sub.add_parser("delete", parents=[client], help="delete a link",
                       description="Delete a link that has no active mirror topics (promote or delete them "
                                   "first).")
    p.add_argument("name")
    p.set_defaults(run=delete_link)


def create_link(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from odradek.links.definition import LinkDefinition, LinkError, link_key
    from odradek.links.store import ensure_links_topic, write_records

    source_config = read_properties(args.source_config) if args.source_config else {}
    try:
        link = LinkDefinition(args.name, args.source_bootstrap,
                              tuple(p.strip() for p in args.topics.split(",") if p.strip()),
                              tuple(p.strip() for p in (args.groups or "").split(",") if p.strip()),
                              source_config=source_config, sync_configs=args.sync_configs)
    except LinkError as exc:
        raise CliError(str(exc)) from None
    config = client_config(args)
    state = _state(args, config)
    if link.name in state.links:
        raise CliError(f"link {link.name} already exists")
    source = AdminClient(_source_config(args, link))
    try:
        selected = sorted(t for t in source.list_topics(timeout=args.timeout).topics if link.mirrors_topic(t))
    except KafkaException as exc:
        raise CliError(f"cannot reach the source cluster at {link.source_bootstrap}: "
                       f"{exc.args[0].str() if exc.args else exc}") from None
    admin = AdminClient(config)
    try:
        brokers = len(admin.list_topics(timeout=args.timeout).brokers)
        ensure_links_topic(admin, max(1, min(LINKS_TOPIC_REPLICATION, brokers)))
        write_records(config, [(link_key(link.name), link.to_json())])
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "create link")
    print(f"Created link {link.name}: {len(selected)} source topics selected now"
          + (f" ({', '.join(selected)})" if selected else ""))
    return 0


def list_links(args: argparse.Namespace) -> int:
    state = _state(args, client_config(args))
    rows = []
    for link in sorted(state.links.values(), key=lambda link: link.name):
        mirrors = [m for m in state.mirrors.values() if m.link == link.name]
        rows.append({"name": link.name, "source": link.source_bootstrap, "topics": ",".join(link.topics),
                     "state": "PAUSED" if link.paused else "ACTIVE",
                     "mirrors": sum(m.state == "ACTIVE" for m in mirrors),
                     "promoted": sum(m.state == "PROMOTED" for m in mirrors)})
    if args.output == "json":
        print_json(rows)
    else:
        print_table(("LINK", "SOURCE", "TOPICS", "STATE", "MIRRORS", "PROMOTED"),
                    [tuple(row.values()) for row in rows])
    return 0


def describe_link(args: argparse.Namespace) -> int:
    config = client_config(args)
    state = _state(args, config)
    link = _link(state, args.name)
    rows = _partitions(args, config, link, [m for m in state.mirrors.values() if m.link == link.name])
    if args.output == "json":
        print_json({"name": link.name, "source": link.source_bootstrap, "topics": list(link.topics),
                    "groups": list(link.groups), "paused": link.paused, "sync_configs": link.sync_configs,
                    "partitions": rows})
    else:
        print(f"Link {link.name} from {link.source_bootstrap}, topics {','.join(link.topics)}"
              + (" (paused)" if link.paused else ""))
        print_table(("TOPIC", "PARTITION", "STATE", "SOURCE-END", "MIRROR-END", "LAG"),
                    [tuple("-" if v is None else v for v in row.values()) for row in rows])
    return 0


def _partitions(args: argparse.Namespace, config: dict, link, mirrors) -> list[dict]:
    """Each partition of these mirror topics: its state, the source's and the mirror's end offsets and the lag
    (None where the source does not answer)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    local = Consumer({**config, "group.id": "odradek-cli-links", "enable.auto.commit": False})
    source = Consumer({**_source_config(args, link), "group.id": "odradek-cli-links", "enable.auto.commit": False})
    rows = []
    try:
        topics = local.list_topics(timeout=args.timeout).topics  # all: naming a topic could create it
        for mirror in sorted(mirrors, key=lambda m: m.topic):
            topic = topics.get(mirror.topic)
            for index in sorted(topic.partitions if topic is not None and topic.error is None else ()):
                partition = TopicPartition(mirror.topic, index)
                mirror_end = local.get_watermark_offsets(partition, timeout=args.timeout)[1]
                try:
                    source_end = source.get_watermark_offsets(partition, timeout=args.timeout)[1]
                except KafkaException:
                    source_end = None  # the source does not answer: the lag is unknown
                rows.append({"topic": mirror.topic, "partition": index, "state": mirror.state,
                             "source_end": source_end, "mirror_end": mirror_end,
                             "lag": None if source_end is None or mirror.state != "ACTIVE"
                             else max(0, source_end - mirror_end)})
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, f"describe link {link.name}")
    finally:
        local.close()
        source.close()
    return rows


def set_paused(args: argparse.Namespace, paused: bool) -> int:
    from dataclasses import replace

    from odradek.links.definition import link_key

    config = client_config(args)
    link = _link(_state(args, config), args.name)
    _write(args, config, [(link_key(link.name), replace(link, paused=paused).to_json())])
    print(f"{'Paused' if paused else 'Resumed'} link {link.name}")
    return 0


def promote(args: argparse.Namespace) -> int:
    import sys
    import time

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from odradek.links.definition import ACTIVE, PROMOTED, MirrorTopic, mirror_key
    from odradek.links.sync import copy_group_offsets

    config = client_config(args)
    state = _state(args, config)
    link = _link(state, args.name)
    active = {m.topic for m in state.mirrors.values() if m.link == link.name and m.state == ACTIVE}
    wanted = active if args.topics is None else {t.strip() for t in args.topics.split(",") if t.strip()}
    unknown = sorted(wanted - active)
    if unknown:
        raise CliError(f"not an active mirror topic of link {link.name}: {', '.join(unknown)}")
    # A planned failover: wait (up to --timeout) until the mirrors hold what the source has, so nothing stays
    # behind; a source that does not answer (a disaster) is promoted from where the mirrors are.
    mirrors = [m for m in state.mirrors.values() if m.topic in wanted]
    deadline = time.monotonic() + args.timeout
    while True:
        lags = [row["lag"] for row in _partitions(args, config, link, mirrors)]
        if all(lag == 0 for lag in lags) or None in lags or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    behind = sum(lag or 0 for lag in lags)
    if None in lags or behind:
        print(f"warning: promoting with {'an unknown number of' if None in lags else behind} records of the "
              "source not mirrored", file=sys.stderr)
    if link.groups:  # a last copy of the groups' offsets, so consumers resume at their latest commits
        source = AdminClient(_source_config(args, link))
        try:
            copy_group_offsets(source, AdminClient(config), config, link, wanted)
        except KafkaException as exc:
            print(f"warning: consumer group offsets not copied (the source does not answer: "
                  f"{exc.args[0].str() if exc.args else exc}); groups resume at the offsets copied before",
                  file=sys.stderr)
    _write(args, config, [(mirror_key(t), MirrorTopic(t, link.name, PROMOTED).to_json()) for t in sorted(wanted)])
    print(f"Promoted {len(wanted)} mirror topics of link {link.name}: {', '.join(sorted(wanted)) or '-'}")
    return 0


def delete_link(args: argparse.Namespace) -> int:
    from odradek.links.definition import ACTIVE, link_key

    config = client_config(args)
    state = _state(args, config)
    link = _link(state, args.name)
    active = sorted(m.topic for m in state.mirrors.values() if m.link == link.name and m.state == ACTIVE)
    if active:
        raise CliError(f"link {link.name} still feeds mirror topics {', '.join(active)}: promote or delete them "
                       "first")
    _write(args, config, [(link_key(link.name), None)])
    print(f"Deleted link {link.name}")
    return 0


def _source_config(args: argparse.Namespace, link) -> dict:
    """Client settings for the source: the CLI's own (timeouts, logging) and the link's source config, never
    the destination's --command-config (its credentials are not the source's)."""
    base = {key: value for key, value in client_config(args).items()
            if key in ("client.id", "socket.connection.setup.timeout.ms", "log.connection.close", "error_cb",
                       "logger", "log_level")}
    return {**base, "bootstrap.servers": link.source_bootstrap, **link.source_config}


def _state(args: argparse.Namespace, config: dict):
    from confluent_kafka import KafkaException

    from odradek.links.store import read_state

    try:
        return read_state(config, args.timeout)
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "read the links")


def _link(state, name: str):
    link = state.links.get(name)
    if link is None:
        raise CliError(f"no link named {name}")
    return link


def _write(args: argparse.Namespace, config: dict, records) -> None:
    from confluent_kafka import KafkaException

    from odradek.links.store import write_records

    try:
        write_records(config, records)
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "write the link")
