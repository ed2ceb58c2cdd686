"""The bootstrap metadata `odradek storage format` leaves in a node's metadata log dir, as Kafka's
bootstrap.checkpoint: records the first active controller of a new cluster commits with its ClusterRecord.

`bootstrap.json` holds `{"records": [...]}`, metadata records as in the metadata log (today only the
UserScramCredentialRecords of `--add-scram`). Every `storage format` of a metadata log dir writes it, so a
stale one never outlives a new format; once the cluster has its ClusterRecord the file is never read again.
"""

from __future__ import annotations

import json
import os

from odradek.config import ConfigError
from odradek.storage.checkpoint import write_atomic

BOOTSTRAP_FILE = "bootstrap.json"
# What a bootstrap file may hold: records that need nothing else in the image to make sense.
BOOTSTRAP_RECORD_TYPES = frozenset({"UserScramCredentialRecord"})


def write_records(directory: str, records: list[dict]) -> None:
    """Write (or replace) the bootstrap file of a metadata log dir, atomically."""
    _check(records, os.path.join(directory, BOOTSTRAP_FILE))
    data = json.dumps({"records": records}, separators=(",", ":"), allow_nan=False).encode()
    write_atomic(os.path.join(directory, BOOTSTRAP_FILE), data)


def read_records(directory: str) -> list[dict]:
    """The bootstrap records of a metadata log dir; none when it has no bootstrap file."""
    path = os.path.join(directory, BOOTSTRAP_FILE)
    try:
        with open(path, "rb") as f:
            document = json.loads(f.read())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    records = document.get("records") if isinstance(document, dict) else None
    if not isinstance(records, list):
        raise ConfigError(f"{path} is not a bootstrap file: no list of records")
    _check(records, path)
    return records


def _check(records: list[dict], path: str) -> None:
    for record in records:
        kind = record.get("type") if isinstance(record, dict) else None
        if kind not in BOOTSTRAP_RECORD_TYPES:
            raise ConfigError(f"{path}: a bootstrap file cannot hold {kind or 'this record'!r}")
