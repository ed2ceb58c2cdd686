"""`odradek storage format|random-uuid`: prepare a node's log dirs for a cluster, as kafka-storage.sh does."""

from __future__ import annotations

import argparse
import os

from odradek.cli.main import CliError


def random_uuid(args: argparse.Namespace) -> int:
    from odradek.broker.node import new_cluster_id

    cluster_id = new_cluster_id()
    while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: `--cluster-id -x...` would read as a flag
        cluster_id = new_cluster_id()
    print(cluster_id)
    return 0


def format_dirs(args: argparse.Namespace) -> int:
    from odradek.broker.node import format_storage, read_meta_properties
    from odradek.config import BrokerConfig, ConfigError
    from odradek.controller import bootstrap
    from odradek.uuid_text import uuid_from_text

    try:
        uuid_from_text(args.cluster_id)
    except ValueError:
        raise CliError(f"--cluster-id {args.cluster_id!r} is not a base64 UUID (odradek storage random-uuid makes one)") \
            from None
    try:
        # Checked before anything is written, as Kafka does, even when every dir turns out to be formatted.
        records = scram_records(args.add_scram)
        config = BrokerConfig.load(args.config, args.overrides)
        formatted = [d for d in config.log_dirs if read_meta_properties(d) is not None]
        if formatted and not args.ignore_formatted:
            raise CliError(f"already formatted: {', '.join(formatted)} (--ignore-formatted skips them)")
        metadata_dir = config.log_dirs[0]
        if metadata_dir not in formatted:
            # Before meta.properties, as Kafka writes bootstrap.checkpoint: a formatted dir always has it.
            os.makedirs(metadata_dir, exist_ok=True)
            bootstrap.write_records(metadata_dir, records)
        format_storage(config, args.cluster_id)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot format: {exc}") from None
    written = [d for d in config.log_dirs if d not in formatted]
    if not written:
        print("All of the log dirs are already formatted.")
        return 0
    print(f"Formatted {', '.join(written)} for node {config.node_id} of cluster {args.cluster_id}")
    if records and metadata_dir in written:
        users = sorted({(r["name"], r["mechanism"]) for r in records})
        print(f"Bootstrap SCRAM credentials: {', '.join(f'{name} ({mechanism_name(code)})' for name, code in users)}")
    return 0


def scram_records(arguments: list[str]) -> list[dict]:
    """UserScramCredentialRecords for `--add-scram` arguments, in order (a later one for the same user and
    mechanism wins, as the records are applied in turn)."""
    from odradek.controller.scram_credentials import credential_record
    from odradek.security.scram import parse_add_scram

    return [credential_record(*parse_add_scram(text)) for text in arguments]


def mechanism_name(code: int) -> str:
    from odradek.security.scram import ScramMechanism

    return ScramMechanism.by_code(code).name
