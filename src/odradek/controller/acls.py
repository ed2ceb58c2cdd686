"""ACL bindings in the metadata log: what CreateAcls and DeleteAcls write (as Kafka's AclControlManager), the
records' form, and keeping a node's authorizer in step with the committed records. Sans-I/O over the image.

An AccessControlEntryRecord creates one binding under a new random id; a RemoveAccessControlEntryRecord
names the id of the binding it removes. Creating a binding that already exists succeeds without a record;
one DeleteAcls request removes every binding any of its filters selects, all in one batch or none.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from odradek.config import BrokerConfig, ConfigError
from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_binding,
    validate_filter,
)
from odradek.security.authorizer import Authorizer, parse_super_users
from odradek.uuid_text import uuid_from_text, uuid_to_text

log = logging.getLogger(__name__)

ENTRY_RECORD = "AccessControlEntryRecord"
REMOVE_RECORD = "RemoveAccessControlEntryRecord"

# Kafka's controller writes at most this many records for one request (max.records.per.user.op).
MAX_RECORDS_PER_USER_OP = 10_000
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."

Result = tuple[ErrorCode, str | None]
OK: Result = (ErrorCode.NONE, None)


def entry_record(acl_id: bytes, binding: AclBinding) -> dict:
    return {"type": ENTRY_RECORD, "id": uuid_to_text(acl_id), "resource_type": int(binding.resource_type),
            "resource_name": binding.resource_name, "pattern_type": int(binding.pattern_type),
            "principal": binding.principal, "host": binding.host, "operation": int(binding.operation),
            "permission_type": int(binding.permission_type)}


def binding_of(record: dict) -> AclBinding:
    return AclBinding(ResourceType(record["resource_type"]), record["resource_name"],
                      PatternType(record["pattern_type"]), record["principal"], record["host"],
                      AclOperation(record["operation"]), AclPermissionType(record["permission_type"]))


def create(image: MetadataImage, bindings: list[AclBinding]) -> tuple[list[dict], list[Result]]:
    """(records to commit, one result per binding): the controller's checks (the broker's, such as the
    CLUSTER resource's name, come first, in the handler); a binding that exists, or comes twice, is a success
    with one record at most."""
    existing = {binding_of(record) for record in image.acls.values()}
    ids = set(image.acls)
    records: list[dict] = []
    results: list[Result] = []
    for binding in bindings:
        refusal = validate_binding(binding)
        if refusal is not None:
            results.append(refusal)
            continue
        if binding not in existing:
            existing.add(binding)
            acl_id = _new_id(ids)
            records.append(entry_record(acl_id, binding))
        results.append(OK)
    if len(records) > MAX_RECORDS_PER_USER_OP:
        return [], [(ErrorCode.POLICY_VIOLATION, TOO_LARGE_BATCH)] * len(bindings)
    return records, results


def delete(image: MetadataImage, filters: list[AclBindingFilter]
           ) -> tuple[list[dict], list[tuple[Result, list[AclBinding]]]]:
    """(records to commit, per filter its result and the bindings it selects). A binding two filters select is
    listed by both and removed once. More removals than one request may make fail every filter."""
    removed: dict[str, None] = {}
    results: list[tuple[Result, list[AclBinding]]] = []
    for acl_filter in filters:
        refusal = validate_filter(acl_filter)
        if refusal is not None:
            results.append((refusal, []))
            continue
        matching = []
        for acl_id, record in image.acls.items():
            binding = binding_of(record)
            if acl_filter.matches(binding):
                matching.append(binding)
                removed[acl_id] = None
        results.append((OK, matching))
    if len(removed) > MAX_RECORDS_PER_USER_OP:
        return [], [((ErrorCode.UNKNOWN_SERVER_ERROR, None), []) for _ in filters]
    return [{"type": REMOVE_RECORD, "id": acl_id} for acl_id in removed], results


def _new_id(taken: set[str]) -> bytes:
    while True:
        acl_id = uuid.uuid4().bytes
        text = uuid_to_text(acl_id)
        if text not in taken:
            taken.add(text)
            return acl_id


# ---------------------------------------------------------------------------------------------------
# A node's authorizer, in step with the metadata log


def new_authorizer(config: BrokerConfig) -> Authorizer | None:
    """The authorizer authorizer.class.name asks for, or None when it is empty (every request allowed)."""
    if not config["authorizer.class.name"].strip():
        return None
    try:
        super_users = parse_super_users(config["super.users"] or "")
    except ValueError as exc:
        raise ConfigError(f"super.users: {exc}") from None
    return Authorizer(super_users, config["allow.everyone.if.no.acl.found"])


def replay(authorizer: Authorizer, records: Iterable[dict]) -> None:
    """Apply the ACL records among committed `records` to the authorizer, as every node does."""
    for record in records:
        kind = record["type"]
        if kind == ENTRY_RECORD:
            acl_id = uuid_from_text(record["id"])
            binding = binding_of(record)
            try:
                authorizer.add_acl(acl_id, binding)
            except ValueError as exc:  # the controller writes each binding once: a bug, not a client's doing
                log.error("Cannot apply %s %s: %s", ENTRY_RECORD, record["id"], exc)
        elif kind == REMOVE_RECORD:
            try:
                authorizer.remove_acl(uuid_from_text(record["id"]))
            except KeyError:
                log.error("Cannot apply %s %s: no ACL has that id", REMOVE_RECORD, record["id"])


def load(authorizer: Authorizer, image: MetadataImage) -> None:
    """Make the authorizer hold exactly the image's bindings (after a snapshot replaced the image)."""
    wanted = {uuid_from_text(acl_id): record for acl_id, record in image.acls.items()}
    for acl_id, _ in authorizer.acls_with_ids(AclBindingFilter()):
        if acl_id not in wanted:
            authorizer.remove_acl(acl_id)
    held = {acl_id for acl_id, _ in authorizer.acls_with_ids(AclBindingFilter())}
    replay(authorizer, [record for acl_id, record in wanted.items() if acl_id not in held])
