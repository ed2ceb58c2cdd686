"""The registry's state: what the records of `_schemas` say, and what each write would add to them.

Sans-I/O. `apply` takes the topic's records in offset order (every node's registry reads the whole topic);
the `plan_*` methods check a write against the current state and return the records to append with the
answer to give, raising RegistryError when the write is refused. Only the elected writer plans, after it has
read everything before it, so ids and versions are given by one place at a time.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.registry import compatibility, errors, formats
from odradek.registry import records as rec
from odradek.registry.records import Reference, SchemaRecord
from odradek.registry.schema_types import InvalidSchema, ParsedSchema

log = logging.getLogger(__name__)

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
MAX_VERSION = 2**31 - 1
MAX_ID = 2**31 - 1  # Confluent's framing holds an id in 4 bytes, and Java clients read it as an int
PARSED_CACHE_SIZE = 1000


@dataclass
class Write:
    """Records to append to `_schemas` (key, value; None deletes), and the answer once they are in."""
    records: list[tuple[dict, dict | None]]
    answer: object
    status: int = 200


@dataclass
class RegisterRequest:
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: dict | None = None
    rule_set: dict | None = None
    id: int | None = None  # IMPORT mode only: keep the schema's id from the registry it came from
    version: int | None = None  # IMPORT mode only
    extra: dict = field(default_factory=dict)


def version_json(record: SchemaRecord) -> dict:
    """A subject version as the API answers it."""
    answer = {"subject": record.subject, "version": record.version, "id": record.id}
    answer.update(schema_fields(record))
    if record.deleted:
        answer["deleted"] = True
    return answer


def schema_fields(record: SchemaRecord) -> dict:
    """What the REST API shows of a schema: its record's value (records.py) less subject, version, id, deleted
    and the fields of newer registries."""
    value = record.value()
    return {name: value[name] for name in ("schemaType", "references", "metadata", "ruleSet", "schema") if name in value}


def parse_version(text: str) -> int:
    """A version in a path: 1..2^31-1, or "latest" and -1 (as -1); RegistryError 42202 otherwise."""
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == -1 or 1 <= version <= MAX_VERSION:
        return version
    raise errors.invalid_version(text)


def check_subject(subject: str) -> None:
    if not subject or len(subject) > 10_000 or any(ord(c) < 0x20 for c in subject):
        raise errors.invalid_subject(subject)


def _schema_key(record: SchemaRecord) -> tuple:
    return record.schema_type, record.schema, record.references


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaRecord]] = {}  # subject -> version -> record
        self.ids: dict[int, dict[tuple[str, int], SchemaRecord]] = {}  # id -> the versions that carry it
        # (schemaType, schema, references) -> {id: versions holding it}: one schema, one id, found at once
        self._ids_of_schema: dict[tuple, dict[int, int]] = {}
        self.max_id = 0  # the highest id ever seen, tombstoned ones included
        self.configs: dict[str | None, dict] = {}  # subject (None: global) -> CONFIG value
        self.modes: dict[str | None, str] = {}
        self.next_offset = 0  # the offset after the last record applied
        self._parsed: OrderedDict[tuple, ParsedSchema] = OrderedDict()

    # reading _schemas

    def apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """One record of `_schemas`. A record that cannot be read is logged and skipped, as Confluent's
        registry does, so one bad record does not stop the registry."""
        self.next_offset = offset + 1
        try:
            key_json = json.loads(key) if key else None
            value_json = json.loads(value) if value is not None else None
            if not isinstance(key_json, dict) or (value_json is not None and not isinstance(value_json, dict)):
                raise ValueError("not a JSON object")
            self._apply(key_json, value_json)
        except Exception as exc:  # whatever a record holds, the registry goes on to the next one
            log.warning("_schemas offset %d: skipping a record that cannot be read (%s: %s)", offset,
                        type(exc).__name__, exc)

    def _apply(self, key: dict, value: dict | None) -> None:
        keytype = key.get("keytype")
        if keytype == rec.SCHEMA:
            subject, version = rec.checked_text(key["subject"], "subject"), rec.checked_int(key["version"], "version")
            if value is None:
                self._remove(subject, version)
                self._parsed.clear()  # a reference to this version may name another schema from now on
            else:
                self._put(rec.decode_schema_value(value))
        elif keytype in (rec.CONFIG, rec.MODE):
            subject = key.get("subject")
            if subject is not None:
                rec.checked_text(subject, "subject")
            if keytype == rec.CONFIG and value is None:
                self.configs.pop(subject, None)
            elif keytype == rec.CONFIG:
                if value.get("compatibilityLevel") not in (None, *compatibility.LEVELS):
                    raise ValueError(f"unknown compatibilityLevel {value.get('compatibilityLevel')!r}")
                self.configs[subject] = value
            elif value is None:
                self.modes.pop(subject, None)
            elif value.get("mode") not in MODES:
                raise ValueError(f"unknown mode {value.get('mode')!r}")
            else:
                self.modes[subject] = value["mode"]
        elif keytype == rec.DELETE_SUBJECT and value is not None:
            until = rec.checked_int(value["version"], "version")
            for version, record in self.subjects.get(value["subject"], {}).items():
                if version <= until:
                    record.deleted = True
        elif keytype == rec.CLEAR_SUBJECT and value is not None:
            for version, record in list(self.subjects.get(value["subject"], {}).items()):
                if record.deleted:
                    self._remove(record.subject, version)
        elif keytype == rec.ID_WATERMARK and value is not None:
            self.max_id = max(self.max_id, rec.checked_int(value["maxId"], "maxId"))
        # NOOP and key types of newer registries (contexts, associations) change nothing here

    def _put(self, record: SchemaRecord) -> None:
        self._remove(record.subject, record.version)
        self.subjects.setdefault(record.subject, {})[record.version] = record
        self.ids.setdefault(record.id, {})[(record.subject, record.version)] = record
        held = self._ids_of_schema.setdefault(_schema_key(record), {})
        held[record.id] = held.get(record.id, 0) + 1
        self.max_id = max(self.max_id, record.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject, {})
        old = versions.pop(version, None)
        if not versions:
            self.subjects.pop(subject, None)
        if old is not None:
            holders = self.ids.get(old.id, {})
            holders.pop((subject, version), None)
            if not holders:
                self.ids.pop(old.id, None)
            held = self._ids_of_schema[_schema_key(old)]
            held[old.id] -= 1
            if not held[old.id]:
                del held[old.id]
                if not held:
                    del self._ids_of_schema[_schema_key(old)]

    # queries

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaRecord]:
        return sorted((r for r in self.subjects.get(subject, {}).values() if deleted or not r.deleted),
                      key=lambda r: r.version)

    def subject_names(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s in self.subjects if s.startswith(prefix) and self.versions(s, deleted))

    def version(self, subject: str, version: int, deleted: bool = False) -> SchemaRecord:
        """A subject's version (-1: its latest), with Confluent's errors for what is missing."""
        live = self.versions(subject, deleted)
        if not live:
            raise errors.subject_not_found(subject)
        if version == -1:
            return live[-1]
        record = self.subjects[subject].get(version)
        if record is None or (record.deleted and not deleted):
            raise errors.version_not_found(version)
        return record

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> SchemaRecord:
        holders = self.ids.get(schema_id)
        if not holders:
            raise errors.schema_not_found(schema_id)
        if subject is not None:
            for record in holders.values():
                if record.subject == subject:
                    return record
        return min(holders.values(), key=lambda r: (r.subject, r.version))

    def id_holders(self, schema_id: int, deleted: bool = False) -> list[SchemaRecord]:
        holders = self.ids.get(schema_id)
        if not holders:
            raise errors.schema_not_found(schema_id)
        return sorted((r for r in holders.values() if deleted or not r.deleted), key=lambda r: (r.subject, r.version))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """The ids of live schemas that reference this subject version."""
        found = set()
        for versions in self.subjects.values():
            for record in versions.values():
                if not record.deleted and any(r.subject == subject and r.version == version
                                              for r in record.references):
                    found.add(record.id)
        return sorted(found)

    def compatibility_level(self, subject: str | None) -> str:
        for scope in (subject, None):
            level = self.configs.get(scope, {}).get("compatibilityLevel")
            if level:
                return level
        return compatibility.DEFAULT_LEVEL

    def normalize_default(self, subject: str | None) -> bool:
        for scope in (subject, None):
            if "normalize" in self.configs.get(scope, {}):
                return bool(self.configs[scope]["normalize"])
        return False

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    # schemas

    def resolve_references(self, references: Iterable[Reference]) -> dict[str, str]:
        """Every schema text the references need, transitively, by reference name."""
        resolved: dict[str, str] = {}
        pending = list(references)
        seen: set[tuple[str, int]] = set()
        while pending:
            reference = pending.pop()
            try:
                record = self.version(reference.subject, reference.version)
            except errors.RegistryError:
                raise InvalidSchema(f"reference {reference.name!r} names subject {reference.subject!r} version "
                                    f"{reference.version}, which does not exist") from None
            if (record.subject, record.version) in seen:
                continue
            seen.add((record.subject, record.version))
            resolved.setdefault(reference.name, record.schema)
            pending.extend(record.references)
        return resolved

    def parse(self, schema_type: str, text: str, references: tuple[Reference, ...]) -> ParsedSchema:
        """The schema parsed (cached), or InvalidSchema."""
        cache_key = (schema_type, text, references)
        parsed = self._parsed.get(cache_key)
        if parsed is None:
            parsed = formats.parse(schema_type, text, self.resolve_references(references))
            self._parsed[cache_key] = parsed
            if len(self._parsed) > PARSED_CACHE_SIZE:
                self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(cache_key)
        return parsed

    def parse_request(self, request: RegisterRequest) -> ParsedSchema:
        try:
            return self.parse(request.schema_type, request.schema, request.references)
        except InvalidSchema as exc:
            raise errors.invalid_schema(str(exc)) from None

    def _stored_form(self, request: RegisterRequest, normalize: bool) -> tuple[ParsedSchema, str]:
        parsed = self.parse_request(request)
        return parsed, parsed.normalized() if normalize else parsed.canonical()

    def _same(self, record: SchemaRecord, schema_type: str, text: str, references, normalize: bool) -> bool:
        if record.schema_type != schema_type or record.references != references:
            return False
        if record.schema == text:
            return True
        if not normalize:
            return False
        try:
            return self.parse(record.schema_type, record.schema, record.references).normalized() == text
        except InvalidSchema:
            return False

    def lookup(self, subject: str, request: RegisterRequest, normalize: bool, deleted: bool = False) -> dict:
        """POST /subjects/{subject}: the version of the subject that holds this schema."""
        if not self.versions(subject, deleted):
            raise errors.subject_not_found(subject)
        parsed, text = self._stored_form(request, normalize)
        if not normalize:
            text = parsed.canonical()
        for record in reversed(self.versions(subject, deleted)):
            if self._same(record, request.schema_type, text, request.references, normalize):
                return version_json(record)
        raise errors.schema_not_found()

    def compatibility_errors(self, subject: str, request: RegisterRequest, version: int | None,
                             level: str | None = None) -> list[str]:
        """Why this schema may not follow the subject's versions (version None: those its level checks;
        else that one version)."""
        new = self.parse_request(request)
        level = level or self.compatibility_level(subject)
        if version is None:
            previous = self.versions(subject)
        else:
            previous = [self.version(subject, version)]
            level = level.removesuffix("_TRANSITIVE")
        parsed_previous = []
        for record in previous:
            try:
                parsed_previous.append(self.parse(record.schema_type, record.schema, record.references))
            except InvalidSchema as exc:  # a version stored by another registry that we cannot read
                return [f"version {record.version} cannot be read: {exc}"]
        if any(record.schema_type != request.schema_type for record in previous):
            return [f"schema type {request.schema_type} differs from the subject's earlier versions"]
        return compatibility.errors(level, new, parsed_previous)

    # writes

    def plan_register(self, subject: str, request: RegisterRequest, normalize: bool) -> Write:
        check_subject(subject)
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")
        if request.id is not None and request.id >= 0 and mode != "IMPORT":
            raise errors.not_permitted(f"Subject {subject} is not in import mode")
        if (request.id is None or request.id < 0) and mode != "READWRITE":
            raise errors.not_permitted(f"Subject {subject} is not in read-write mode")
        normalize = normalize or self.normalize_default(subject)
        request = self._with_versions(request)
        parsed, text = self._stored_form(request, normalize)
        if mode == "IMPORT":
            return self._plan_import(subject, request, text)
        for record in self.versions(subject):
            if self._same(record, request.schema_type, text, request.references, normalize):
                return Write([], self._register_answer(record))
        problems = self.compatibility_errors(subject, request, None)
        if problems:
            raise errors.incompatible(subject, problems)
        schema_id = self._existing_id(request.schema_type, text, request.references) or self.max_id + 1
        version = max(self.subjects.get(subject, {0: None}), default=0) + 1
        record = SchemaRecord(subject, version, schema_id, text, request.schema_type, request.references,
                              request.metadata, request.rule_set)
        return Write([(rec.schema_key(subject, version), record.value())], self._register_answer(record))

    def _with_versions(self, request: RegisterRequest) -> RegisterRequest:
        """The request with each reference to a subject's latest version (-1) made that version's number, as
        Confluent stores them, so the reference keeps naming what it named when the schema was registered."""
        if all(reference.version != -1 for reference in request.references):
            return request
        references = []
        for reference in request.references:
            if reference.version == -1:
                try:
                    reference = Reference(reference.name, reference.subject,
                                          self.version(reference.subject, -1).version)
                except errors.RegistryError:
                    raise errors.invalid_schema(f"reference {reference.name!r} names subject {reference.subject!r}, "
                                                "which has no version") from None
            references.append(reference)
        return dataclasses.replace(request, references=tuple(references))

    def _plan_import(self, subject: str, request: RegisterRequest, text: str) -> Write:
        if not 1 <= request.id <= MAX_ID:
            raise errors.unprocessable(f"id {request.id} is out of range: ids are from 1 to {MAX_ID}")
        holders = self.ids.get(request.id, {})
        for holder in holders.values():
            if holder.schema != text or holder.schema_type != request.schema_type:
                raise errors.id_does_not_match(f"Schema with id {request.id} already exists with a different schema")
        existing = self.subjects.get(subject, {})
        version = request.version if request.version not in (None, -1) else max(existing, default=0) + 1
        if not 1 <= version <= MAX_VERSION:
            raise errors.invalid_version(str(request.version))
        if version in existing:
            if existing[version].id == request.id and existing[version].schema == text:
                return Write([], self._register_answer(existing[version]))
            raise errors.not_permitted(f"Subject {subject} version {version} already exists with another schema")
        record = SchemaRecord(subject, version, request.id, text, request.schema_type, request.references,
                              request.metadata, request.rule_set)
        return Write([(rec.schema_key(subject, version), record.value())], self._register_answer(record))

    def _existing_id(self, schema_type: str, text: str, references) -> int | None:
        """The id this schema already has under some subject: one schema, one id."""
        return next(iter(self._ids_of_schema.get((schema_type, text, references), ())), None)

    @staticmethod
    def _register_answer(record: SchemaRecord) -> dict:
        answer = {"id": record.id, "subject": record.subject, "version": record.version}
        answer.update(schema_fields(record))
        return answer

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")

    def plan_delete_version(self, subject: str, version: int, permanent: bool) -> Write:
        self._check_writable(subject)
        if not self.versions(subject, deleted=True):
            raise errors.subject_not_found(subject)
        record = self.version(subject, version, deleted=True) if version != -1 else \
            self.version(subject, -1, deleted=not self.versions(subject))
        if version != -1 and not permanent and record.deleted:
            raise errors.version_soft_deleted(subject, record.version)
        if permanent and not record.deleted:
            raise errors.version_not_soft_deleted(subject, record.version)
        if not permanent and version == -1 and record.deleted:
            raise errors.subject_not_found(subject)
        users = self.referenced_by(subject, record.version)
        if users:
            raise errors.reference_exists(f"One or more references exist to the schema "
                                          f"{{subject={subject},version={record.version}}}: ids {users}")
        key = rec.schema_key(subject, record.version)
        if permanent:
            return Write([(rec.id_watermark_key(), {"maxId": self.max_id}), (key, None)], record.version)
        deleted = SchemaRecord(**{**record.__dict__, "deleted": True})
        return Write([(key, deleted.value())], record.version)

    def plan_delete_subject(self, subject: str, permanent: bool) -> Write:
        self._check_writable(subject)
        every = self.versions(subject, deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        live = [r for r in every if not r.deleted]
        if permanent and live:
            raise errors.subject_not_soft_deleted(subject)
        if not permanent and not live:
            raise errors.subject_soft_deleted(subject)
        for record in every:
            users = [i for i in self.referenced_by(subject, record.version) if i not in {r.id for r in every}]
            if users:
                raise errors.reference_exists(f"One or more references exist to the schema "
                                              f"{{subject={subject},version={record.version}}}: ids {users}")
        if not permanent:
            return Write([(rec.subject_key(rec.DELETE_SUBJECT, subject),
                           {"subject": subject, "version": live[-1].version})], [r.version for r in live])
        records: list[tuple[dict, dict | None]] = [(rec.id_watermark_key(), {"maxId": self.max_id})]
        records += [(rec.schema_key(subject, r.version), None) for r in every]
        records += [(rec.subject_key(rec.CONFIG, subject), None)] if subject in self.configs else []
        records += [(rec.subject_key(rec.MODE, subject), None)] if subject in self.modes else []
        return Write(records, [r.version for r in every])

    def plan_config(self, subject: str | None, body: dict) -> Write:
        if subject is not None:
            check_subject(subject)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        normalize = body.get("normalize")
        if level is None and normalize is None:
            raise errors.invalid_compatibility_level()
        value = dict(self.configs.get(subject, {}))
        answer: dict = {}
        if level is not None:
            if not isinstance(level, str) or level.upper() not in compatibility.LEVELS:
                raise errors.invalid_compatibility_level()
            value["compatibilityLevel"] = answer["compatibility"] = level.upper()
        if normalize is not None:
            if not isinstance(normalize, bool):
                raise errors.unprocessable("normalize must be true or false")
            value["normalize"] = answer["normalize"] = normalize
        if subject is not None:
            value["subject"] = subject
        return Write([(rec.subject_key(rec.CONFIG, subject), value)], answer)

    def config_json(self, subject: str | None, default_to_global: bool = False) -> dict:
        value = self.configs.get(subject)
        if value is None and subject is not None:
            if not default_to_global:
                raise errors.subject_compatibility_not_configured(subject)
            value = self.configs.get(None)
        answer = {"compatibilityLevel": (value or {}).get("compatibilityLevel") or self.compatibility_level(None)}
        if value and "normalize" in value:
            answer["normalize"] = value["normalize"]
        return answer

    def plan_delete_config(self, subject: str | None) -> Write:
        if subject is not None and subject not in self.configs:
            raise errors.subject_not_found(subject)
        answer = self.config_json(subject, default_to_global=True)
        if subject is None and None not in self.configs:
            return Write([], answer)
        return Write([(rec.subject_key(rec.CONFIG, subject), None)], answer)

    def plan_mode(self, subject: str | None, body: dict, force: bool) -> Write:
        if subject is not None:
            check_subject(subject)
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force and self.mode(subject) != "IMPORT":
            holders = self.subject_names() if subject is None else self.versions(subject)
            if holders:
                raise errors.not_permitted("Cannot import since found existing subjects")
        value = {"mode": mode} if subject is None else {"subject": subject, "mode": mode}
        records: list[tuple[dict, dict | None]] = []
        if mode == "IMPORT":  # as Confluent does: soft-deleted versions go, so imports can take their place
            gone = [r for s in ([subject] if subject is not None else list(self.subjects))
                    for r in self.versions(s, deleted=True) if r.deleted]
            if gone:
                records.append((rec.id_watermark_key(), {"maxId": self.max_id}))
                records += [(rec.schema_key(r.subject, r.version), None) for r in gone]
        return Write(records + [(rec.subject_key(rec.MODE, subject), value)], {"mode": mode})

    def mode_json(self, subject: str | None, default_to_global: bool = False) -> dict:
        if subject is not None and subject not in self.modes and not default_to_global:
            raise errors.subject_mode_not_configured(subject)
        return {"mode": self.mode(subject)}

    def plan_delete_mode(self, subject: str) -> Write:
        if subject not in self.modes:
            raise errors.subject_mode_not_configured(subject)
        return Write([(rec.subject_key(rec.MODE, subject), None)], {"mode": self.modes[subject]})
