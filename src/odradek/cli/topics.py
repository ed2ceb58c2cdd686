"""`odradek topics`: list, create, describe, alter and delete topics through the admin API."""

from __future__ import annotations

import argparse

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from odradek.cli.main import CliError, client_config, kafka_error_text, raise_for_kafka_error
from odradek.cli.output import print_json, print_table

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})


def admin_client(args: argparse.Namespace) -> AdminClient:
    try:
        return AdminClient(client_config(args))
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "invalid client configuration")
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid client configuration: {exc}") from None


def cluster_metadata(admin: AdminClient, args: argparse.Namespace) -> ClusterMetadata:
    """Metadata for every topic; the first call of each command, so it is where 'cannot reach' shows."""
    try:
        return admin.list_topics(timeout=args.timeout)
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "cannot fetch metadata")


def wait(future, args: argparse.Namespace, action: str) -> object:
    """The result of one admin future; a KafkaException becomes `error: <action>: <reason>`."""
    try:
        return future.result()
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, action)


def error_of(exc: KafkaException) -> KafkaError | None:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def replication_factor(topic) -> int | None:
    partitions = list(topic.partitions.values())
    return len(partitions[0].replicas) if partitions else None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


# ---------------------------------------------------------------------------------------------------
# list


def list_topics(args: argparse.Namespace) -> int:
    metadata = cluster_metadata(admin_client(args), args)
    rows = []
    for name in sorted(metadata.topics):
        if args.exclude_internal and is_internal(name):
            continue
        topic = metadata.topics[name]
        rows.append({"name": name, "partitions": len(topic.partitions),
                     "replication_factor": replication_factor(topic), "internal": is_internal(name)})
    if args.output == "json":
        print_json({"topics": rows})
    elif rows:
        print_table(["TOPIC", "PARTITIONS", "REPLICATION-FACTOR"],
                    [(r["name"], r["partitions"], r["replication_factor"]) for r in rows])
    return 0


# ---------------------------------------------------------------------------------------------------
# create


def create_topic(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    metadata = cluster_metadata(admin, args)
    name = args.name
    if name in metadata.topics and metadata.topics[name].error is None:
        if args.if_not_exists:
            return 0
        raise CliError(f"topic '{name}' already exists")
    new_topic = NewTopic(name,
                         num_partitions=args.partitions or -1,
                         replication_factor=args.replication_factor or -1,
                         config=dict(args.config))
    futures = admin.create_topics([new_topic], operation_timeout=args.timeout, request_timeout=args.timeout)
    try:
        futures[name].result()
    except KafkaException as exc:
        err = error_of(exc)
        if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            if args.if_not_exists:
                return 0
            raise CliError(f"topic '{name}' already exists") from None
        if err is not None and err.code() == KafkaError.INVALID_CONFIG:
            raise CliError(f"invalid --config for topic '{name}': {kafka_error_text(err)}") from None
        raise_for_kafka_error(exc, args, f"cannot create topic '{name}'")
    print(f"Created topic {name}.")
    return 0


# ---------------------------------------------------------------------------------------------------
# describe


def topic_overrides(admin: AdminClient, names: list[str], args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Each topic's own configuration overrides (source DYNAMIC_TOPIC_CONFIG), sorted by name."""
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, request_timeout=args.timeout)
    overrides: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        entries = wait(future, args, f"cannot describe configuration of topic '{resource.name}'")
        selected = {}
        for key, entry in entries.items():
            source = getattr(entry.source, "value", entry.source)  # a ConfigSource or its int
            explicit = source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value or (
                source == ConfigSource.UNKNOWN_CONFIG.value and not entry.is_default)
            if explicit:
                selected[key] = "<sensitive>" if entry.is_sensitive else entry.value
        overrides[resource.name] = dict(sorted(selected.items()))
    return overrides


def describe_topics(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    metadata = cluster_metadata(admin, args)
    if args.names:
        missing = [n for n in args.names if n not in metadata.topics or metadata.topics[n].error is not None
                   and metadata.topics[n].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART]
        if missing:
            raise CliError("; ".join(f"topic '{n}' does not exist" for n in missing))
        names = list(dict.fromkeys(args.names))
    else:
        names = sorted(n for n in metadata.topics if not (args.exclude_internal and is_internal(n)))
    configs = topic_overrides(admin, names, args)

    described = []
    for name in names:
        topic = metadata.topics[name]
        partitions = [topic.partitions[i] for i in sorted(topic.partitions)]
        described.append({
            "name": name,
            "internal": is_internal(name),
            "partition_count": len(partitions),
            "replication_factor": replication_factor(topic),
            "partitions": [{
                "partition": p.id,
                "leader": p.leader if p.leader >= 0 else None,
                "replicas": list(p.replicas),
                "isr": list(p.isrs),
                "error": None if p.error is None else p.error.name(),
            } for p in partitions],
            "configs": configs.get(name, {}),
        })

    if args.output == "json":
        print_json({"topics": described})
        return 0
    for index, topic in enumerate(described):
        if index:
            print()
        config_text = ",".join(f"{k}={v}" for k, v in topic["configs"].items()) or "-"
        print(f"Topic: {topic['name']}  PartitionCount: {topic['partition_count']}  "
              f"ReplicationFactor: {topic['replication_factor'] if topic['replication_factor'] is not None else '-'}  "
              f"Configs: {config_text}")
        print_table(["PARTITION", "LEADER", "REPLICAS", "ISR"],
                    [(p["partition"], p["leader"] if p["error"] is None else p["error"], p["replicas"], p["isr"])
                     for p in topic["partitions"]])
    return 0


# ---------------------------------------------------------------------------------------------------
# alter


def alter_topic(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    clash = sorted({k for k, _ in args.config} & set(args.delete_config))
    if clash:
        raise CliError(f"config {', '.join(repr(k) for k in clash)} both set and deleted")
    admin = admin_client(args)
    metadata = cluster_metadata(admin, args)
    name = args.name
    topic = metadata.topics.get(name)
    if topic is None or (topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise CliError(f"topic '{name}' does not exist")
    done = []

    if args.config or args.delete_config:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in args.config]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in args.delete_config]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = admin.incremental_alter_configs([resource], request_timeout=args.timeout)
        for future in futures.values():
            try:
                future.result()
            except KafkaException as exc:
                err = error_of(exc)
                if err is not None and err.code() == KafkaError.INVALID_CONFIG:
                    raise CliError(f"invalid --config for topic '{name}': {kafka_error_text(err)}") from None
                raise_for_kafka_error(exc, args, f"cannot alter configuration of topic '{name}'")
        done += [f"set {k}={v}" for k, v in args.config] + [f"deleted {k}" for k in args.delete_config]

    if args.partitions is not None:
        current = len(topic.partitions)
        futures = admin.create_partitions([NewPartitions(name, args.partitions)],
                                          operation_timeout=args.timeout, request_timeout=args.timeout)
        wait(futures[name], args, f"cannot change partitions of topic '{name}' (it has {current})")
        done.append(f"partitions {current} -> {args.partitions}")

    print(f"Altered topic {name}: {'; '.join(done)}.")
    return 0


# ---------------------------------------------------------------------------------------------------
# delete


def delete_topics(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    metadata = cluster_metadata(admin, args)
    names = list(dict.fromkeys(args.names))
    failures = []
    present = []
    for name in names:
        if name in metadata.topics:
            present.append(name)
        elif not args.if_exists:
            failures.append(f"topic '{name}' does not exist")
    if present:
        futures = admin.delete_topics(present, operation_timeout=args.timeout, request_timeout=args.timeout)
        for name in present:
            try:
                futures[name].result()
            except KafkaException as exc:
                err = error_of(exc)
                if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    if not args.if_exists:
                        failures.append(f"topic '{name}' does not exist")
                    continue
                try:
                    raise_for_kafka_error(exc, args, f"cannot delete topic '{name}'")
                except CliError as error:
                    failures.append(str(error))
                continue
            print(f"Deleted topic {name}.")
    if failures:
        raise CliError("; ".join(failures))
    return 0
