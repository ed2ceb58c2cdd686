"""SCRAM credentials in the metadata log (KIP-554): what AlterUserScramCredentials writes, what
DescribeUserScramCredentials answers, with Kafka's checks and messages. Sans-I/O over the metadata image."""

from __future__ import annotations

import base64

from odradek.controller.metadata_image import MetadataImage
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import ScramCredential, ScramMechanism

ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
NOT_FOUND_TO_DESCRIBE = "Attempt to describe a user credential that does not exist: "
NOT_FOUND_TO_DELETE = "Attempt to delete a user credential that does not exist"


def credential_record(user: str, mechanism: ScramMechanism, credential: ScramCredential) -> dict:
    return {"type": "UserScramCredentialRecord", "name": user, "mechanism": mechanism.code,
            "salt": _text(credential.salt), "stored_key": _text(credential.stored_key),
            "server_key": _text(credential.server_key), "iterations": credential.iterations}


def credential_of(image: MetadataImage, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
    record = image.scram_credentials.get((user, mechanism.code))
    if record is None:
        return None
    return ScramCredential(base64.b64decode(record["salt"]), base64.b64decode(record["stored_key"]),
                           base64.b64decode(record["server_key"]), record["iterations"])


def alter(image: MetadataImage, deletions: list[dict], upsertions: list[dict]) -> tuple[list[dict], list[dict]]:
    """(records to commit, one result per user): a user named twice fails as a whole, as in Kafka."""
    errors: dict[str, tuple[ErrorCode, str]] = {}
    to_delete: dict[str, dict] = {}
    to_upsert: dict[str, dict] = {}
    for deletion in deletions:
        user = deletion["name"]
        if user in errors:
            continue
        if to_delete.pop(user, None) is not None:
            errors[user] = (ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE)
            continue
        error = _check_user_and_mechanism(user, deletion["mechanism"])
        if error is None and (user, deletion["mechanism"]) not in image.scram_credentials:
            error = (ErrorCode.RESOURCE_NOT_FOUND, NOT_FOUND_TO_DELETE)
        if error is None:
            to_delete[user] = deletion
        else:
            errors[user] = error
    for upsertion in upsertions:
        user = upsertion["name"]
        if user in errors:
            continue
        if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
            errors[user] = (ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE)
            continue
        error = _check_user_and_mechanism(user, upsertion["mechanism"])
        if error is None:
            mechanism = ScramMechanism.by_code(upsertion["mechanism"])
            if upsertion["iterations"] < mechanism.min_iterations:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif upsertion["iterations"] > mechanism.max_iterations:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if error is None:
            to_upsert[user] = upsertion
        else:
            errors[user] = error
    records = [{"type": "RemoveUserScramCredentialRecord", "name": user, "mechanism": deletion["mechanism"]}
               for user, deletion in to_delete.items()]
    for user, upsertion in to_upsert.items():
        mechanism = ScramMechanism.by_code(upsertion["mechanism"])
        credential = ScramCredential.from_salted_password(mechanism, bytes(upsertion["salted_password"]),
                                                          bytes(upsertion["salt"]), upsertion["iterations"])
        records.append(credential_record(user, mechanism, credential))
    results = [{"user": user, "error_code": ErrorCode.NONE, "error_message": None} for user in [*to_delete, *to_upsert]]
    results += [{"user": user, "error_code": code, "error_message": message} for user, (code, message) in errors.items()]
    return records, results


def describe(image: MetadataImage, users: list[str] | None) -> list[dict]:
    """DescribeUserScramCredentials results; no users named: every user that has a credential."""
    by_user: dict[str, list[dict]] = {}
    for (user, code), record in sorted(image.scram_credentials.items()):
        by_user.setdefault(user, []).append({"mechanism": code, "iterations": record["iterations"]})
    if not users:
        return [{"user": user, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": infos}
                for user, infos in by_user.items()]
    results = []
    for user in dict.fromkeys(users):
        if users.count(user) > 1:
            results.append({"user": user, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                            "error_message": DESCRIBED_TWICE + user, "credential_infos": []})
        elif user not in by_user:
            results.append({"user": user, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                            "error_message": NOT_FOUND_TO_DESCRIBE + user, "credential_infos": []})
        else:
            results.append({"user": user, "error_code": ErrorCode.NONE, "error_message": None,
                            "credential_infos": by_user[user]})
    return results


def _check_user_and_mechanism(user: str, code: int) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if ScramMechanism.by_code(code) is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _text(data: bytes) -> str:
    return base64.b64encode(data).decode()
