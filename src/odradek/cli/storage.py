"""`odradek storage format|random-uuid`: prepare a node's log dirs for a cluster, as kafka-storage.sh does."""

from __future__ import annotations

import argparse

from odradek.cli.main import CliError


def random_uuid(args: argparse.Namespace) -> int:
    from odradek.broker.node import new_cluster_id

    print(new_cluster_id())
    return 0


def format_dirs(args: argparse.Namespace) -> int:
    from odradek.broker.node import format_storage, read_meta_properties
    from odradek.config import BrokerConfig, ConfigError
    from odradek.uuid_text import uuid_from_text

    try:
        uuid_from_text(args.cluster_id)
    except ValueError:
        raise CliError(f"--cluster-id {args.cluster_id!r} is not a base64 UUID (odradek storage random-uuid makes one)") \
            from None
    try:
        config = BrokerConfig.load(args.config, args.overrides)
        formatted = [d for d in config.log_dirs if read_meta_properties(d) is not None]
        if formatted and not args.ignore_formatted:
            raise CliError(f"already formatted: {', '.join(formatted)} (--ignore-formatted skips them)")
        format_storage(config, args.cluster_id)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot format: {exc}") from None
    print(f"Formatted {', '.join(config.log_dirs)} for node {config.node_id} of cluster {args.cluster_id}")
    return 0
