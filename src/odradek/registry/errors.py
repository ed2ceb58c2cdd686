"""The registry's errors as Confluent Schema Registry answers them: an HTTP status and a JSON body
`{"error_code": N, "message": "..."}`, where N is Confluent's code (40401, 42201, ...) or the HTTP status."""

from __future__ import annotations

VALID_VERSIONS = "Allowed values are between [1, 2^31-1] and the string \"latest\""
LEVEL_NAMES = "none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"


class RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id=None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted. "
                                     "Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                     "permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    return RegistryError(409, 40901, f"Schema being registered is incompatible with an earlier schema for subject "
                                     f"\"{subject}\", details: [{', '.join(messages)}]")


def invalid_schema(reason: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {reason}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. {VALID_VERSIONS}")


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are {LEVEL_NAMES}")


def invalid_mode(mode) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, "
                                     "READONLY_OVERRIDE and IMPORT")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid subject name")


def schema_too_large() -> RegistryError:
    return RegistryError(422, 42209, "Register operation failed because schema is too large")


def bad_request(message: str) -> RegistryError:
    return RegistryError(400, 400, message)


def unprocessable(message: str) -> RegistryError:
    return RegistryError(422, 422, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, 50003, message)


def unknown_leader(message: str) -> RegistryError:
    return RegistryError(500, 50004, message)
