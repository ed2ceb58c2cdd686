"""The records of `_schemas`, in Confluent Schema Registry's JSON format, so a topic written by Confluent's
registry (or copied from a Kafka cluster) is read as it is, and ours can be read by it.

Keys name what a record is about (`{"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}`); the
topic is compacted on them, and a null value deletes. One key type is Odradek's own: ID_WATERMARK holds the
highest schema id ever given, written with every permanent delete so that an id outlives the compaction of
its last record and is never given again (Confluent's own registry can reuse one there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
NOOP = "NOOP"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
ID_WATERMARK = "ID_WATERMARK"


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class SchemaRecord:
    """One version of a subject: the value of a SCHEMA key."""
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: dict | None = None
    rule_set: dict | None = None
    deleted: bool = False
    extra: dict = field(default_factory=dict)  # fields of newer registries, kept as they were

    def value(self) -> dict:
        value = dict(self.extra)
        value.update({"subject": self.subject, "version": self.version, "id": self.id})
        if self.schema_type != "AVRO":
            value["schemaType"] = self.schema_type
        if self.references:
            value["references"] = [reference.to_json() for reference in self.references]
        if self.metadata is not None:
            value["metadata"] = self.metadata
        if self.rule_set is not None:
            value["ruleSet"] = self.rule_set
        value["schema"] = self.schema
        value["deleted"] = self.deleted
        return value


def encode(payload: dict | None) -> bytes | None:
    return None if payload is None else json.dumps(payload, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> dict:
    return {"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1}


def subject_key(keytype: str, subject: str | None) -> dict:
    """A CONFIG, MODE, DELETE_SUBJECT or CLEAR_SUBJECT key; CONFIG and MODE with subject None are global."""
    return {"keytype": keytype, "subject": subject, "magic": 0}


def noop_key() -> dict:
    return {"keytype": NOOP, "magic": 0}


def id_watermark_key() -> dict:
    return {"keytype": ID_WATERMARK, "magic": 0}


def parse_references(items) -> tuple[Reference, ...]:
    """References as JSON gives them; ValueError on a malformed one."""
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ValueError("references must be a list")
    references = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not isinstance(item.get("subject"), str) or type(item.get("version")) is not int:
            raise ValueError(f"a reference needs a name, a subject and an integer version, got {item!r}")
        references.append(Reference(item["name"], item["subject"], item["version"]))
    return tuple(references)


def checked_int(value, name: str) -> int:
    """An int a record holds, in Java's int range as Confluent's records hold them; ValueError otherwise."""
    if type(value) is not int or not -(2**31) <= value < 2**31:
        raise ValueError(f"{name} is not a 32-bit integer: {value!r}")
    return value


def checked_text(value, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string: {value!r}")
    return value


def decode_schema_value(value: dict) -> SchemaRecord:
    known = {"subject", "version", "id", "schema", "schemaType", "references", "metadata", "ruleSet", "deleted"}
    return SchemaRecord(
        subject=checked_text(value["subject"], "subject"), version=checked_int(value["version"], "version"),
        id=checked_int(value["id"], "id"), schema=checked_text(value["schema"], "schema"),
        schema_type=checked_text(value.get("schemaType") or "AVRO", "schemaType"),
        references=parse_references(value.get("references")),
        metadata=value.get("metadata"), rule_set=value.get("ruleSet"), deleted=bool(value.get("deleted")),
        extra={k: v for k, v in value.items() if k not in known})
