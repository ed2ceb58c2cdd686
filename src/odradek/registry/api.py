"""Confluent Schema Registry's REST API over a SchemaStore, as an aiohttp application.

Reads are answered from this node's state. Writes go to `writer.write(plan)`, which runs them here when this
node is the writer and forwards them to the writer otherwise (server.py). Every answer is JSON with
Confluent's content type; every error is `{"error_code": N, "message": "..."}` with Confluent's codes.
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from odradek.registry import errors
from odradek.registry.errors import RegistryError
from odradek.registry.formats import SCHEMA_TYPES
from odradek.registry.records import parse_references
from odradek.registry.schema_types import InvalidSchema
from odradek.registry.state import RegisterRequest, RegistryState, parse_version, schema_fields, version_json

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_CONTENT_TYPES = {"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                          "application/json", "application/octet-stream", ""}
MAX_BODY_BYTES = 16 * 1024 * 1024
INLINE_PARSE_BYTES = 64 * 1024
OFFSET_HEADER = "X-Odradek-Schemas-Offset"  # the writer's offset after a write, for read-your-writes

STORE_KEY = web.AppKey("schema_store", object)
WRITER_KEY = web.AppKey("schema_writer", object)


def reply(answer, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=json.dumps(answer).encode(), content_type=CONTENT_TYPE.split(";")[0],
                        headers=headers)


def error_reply(error: RegistryError) -> web.Response:
    return reply(error.body(), error.status)


@web.middleware
async def confluent_errors(request: web.Request, handler):
    """Confluent's error bodies for everything, including what aiohttp itself refuses."""
    try:
        return await handler(request)
    except RegistryError as error:
        return error_reply(error)
    except web.HTTPRequestEntityTooLarge:
        return error_reply(errors.schema_too_large())
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return reply({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception:
        log.exception("schema registry request %s %s failed", request.method, request.path)
        return error_reply(errors.store_error("Internal error; see the node's log"))


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def subject_of(request: web.Request) -> str:
    return request.match_info["subject"]


async def body_of(request: web.Request) -> dict:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in ACCEPTED_CONTENT_TYPES:
        raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
    raw = await request.read()
    try:
        if len(raw) > INLINE_PARSE_BYTES:  # a large body is parsed off the node's event loop
            body = await asyncio.get_running_loop().run_in_executor(None, parse_json, raw)
        else:
            body = parse_json(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"Unexpected character in the request body: {exc}") from None
    except RecursionError:
        raise errors.bad_request("The request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise errors.unprocessable("The request body must be a JSON object")
    return body


def parse_json(raw: bytes):
    return json.loads(raw) if raw.strip() else {}


def register_request(body: dict) -> RegisterRequest:
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise errors.invalid_schema("Empty schema")
    try:
        schema.encode()
    except UnicodeEncodeError:
        raise errors.invalid_schema("the schema is not valid Unicode (it holds a lone surrogate)") from None
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise errors.invalid_schema(f"unknown schemaType {schema_type!r}")
    try:
        references = parse_references(body.get("references"))
    except ValueError as exc:
        raise errors.unprocessable(str(exc)) from None
    for name in ("id", "version"):
        if body.get(name) is not None and type(body.get(name)) is not int:
            raise errors.unprocessable(f"{name} must be an integer")
    for name in ("metadata", "ruleSet"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise errors.unprocessable(f"{name} must be a JSON object")
    return RegisterRequest(schema, schema_type.upper(), references, body.get("metadata"), body.get("ruleSet"),
                           body.get("id"), body.get("version"))


def schema_id_of(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise errors.schema_not_found(request.match_info["id"]) from None


def formatted(state: RegistryState, answer: dict, schema_type: str, references, fmt: str) -> dict:
    """`?format=serialized`: a Protobuf schema as its base64 FileDescriptorProto, as Confluent answers it."""
    if fmt == "serialized" and schema_type == "PROTOBUF":
        try:
            answer["schema"] = state.parse(schema_type, answer["schema"], references).serialized()
        except InvalidSchema as exc:
            raise errors.invalid_schema(str(exc)) from None
    return answer


# reads


async def root(request: web.Request) -> web.Response:
    return reply({})


async def schema_types(request: web.Request) -> web.Response:
    return reply(list(SCHEMA_TYPES))


async def list_schemas(request: web.Request) -> web.Response:
    prefix, deleted, latest_only = request.query.get("subjectPrefix", ""), flag(request, "deleted"), \
        flag(request, "latestOnly")

    def query(state: RegistryState):
        found = []
        for subject in state.subject_names(deleted, prefix):
            versions = state.versions(subject, deleted)
            found += [version_json(r) for r in (versions[-1:] if latest_only else versions)]
        return found
    return reply(await request.app[STORE_KEY].read(query))


async def schema_by_id(request: web.Request) -> web.Response:
    schema_id, subject, fmt = schema_id_of(request), request.query.get("subject"), request.query.get("format", "")

    def query(state: RegistryState):
        record = state.schema_by_id(schema_id, subject)
        return formatted(state, schema_fields(record), record.schema_type, record.references, fmt)
    return reply(await request.app[STORE_KEY].read(query))


async def raw_schema_by_id(request: web.Request) -> web.Response:
    schema_id = schema_id_of(request)
    body = await request.app[STORE_KEY].read(lambda state: raw_schema(state.schema_by_id(schema_id).schema))
    return web.Response(body=body, content_type=CONTENT_TYPE)


def raw_schema(text: str) -> bytes:
    """What /schema endpoints answer: the schema itself, JSON for Avro and JSON Schema, a JSON string for .proto."""
    try:
        json.loads(text)
        return text.encode(errors="backslashreplace")
    except (ValueError, RecursionError):
        return json.dumps(text).encode()


async def subjects_of_id(request: web.Request) -> web.Response:
    schema_id, deleted = schema_id_of(request), flag(request, "deleted")
    holders = await request.app[STORE_KEY].read(lambda state: state.id_holders(schema_id, deleted))
    return reply(sorted({r.subject for r in holders}))


async def versions_of_id(request: web.Request) -> web.Response:
    schema_id, deleted = schema_id_of(request), flag(request, "deleted")
    holders = await request.app[STORE_KEY].read(lambda state: state.id_holders(schema_id, deleted))
    return reply([{"subject": r.subject, "version": r.version} for r in holders])


async def list_subjects(request: web.Request) -> web.Response:
    prefix, deleted = request.query.get("subjectPrefix", ""), flag(request, "deleted")
    return reply(await request.app[STORE_KEY].read(lambda state: state.subject_names(deleted, prefix)))


async def list_versions(request: web.Request) -> web.Response:
    subject, deleted = subject_of(request), flag(request, "deleted")

    def query(state: RegistryState):
        versions = state.versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return [r.version for r in versions]
    return reply(await request.app[STORE_KEY].read(query))


async def get_version(request: web.Request) -> web.Response:
    subject, version = subject_of(request), parse_version(request.match_info["version"])
    deleted, fmt = flag(request, "deleted"), request.query.get("format", "")

    def query(state: RegistryState):
        record = state.version(subject, version, deleted)
        return formatted(state, version_json(record), record.schema_type, record.references, fmt)
    return reply(await request.app[STORE_KEY].read(query))


async def get_raw_version(request: web.Request) -> web.Response:
    subject, version, deleted = subject_of(request), parse_version(request.match_info["version"]), \
        flag(request, "deleted")
    body = await request.app[STORE_KEY].read(lambda state: raw_schema(state.version(subject, version, deleted).schema))
    return web.Response(body=body, content_type=CONTENT_TYPE)


async def referenced_by(request: web.Request) -> web.Response:
    subject, version = subject_of(request), parse_version(request.match_info["version"])

    def query(state: RegistryState):
        record = state.version(subject, version, deleted=True)
        return state.referenced_by(subject, record.version)
    return reply(await request.app[STORE_KEY].read(query))


async def lookup(request: web.Request) -> web.Response:
    subject, body = subject_of(request), await body_of(request)
    schema_request, normalize, deleted = register_request(body), flag(request, "normalize"), flag(request, "deleted")
    return reply(await request.app[STORE_KEY].read(
        lambda state: state.lookup(subject, schema_request, normalize or state.normalize_default(subject), deleted)))


async def check_compatibility(request: web.Request) -> web.Response:
    subject, body = subject_of(request), await body_of(request)
    schema_request = register_request(body)
    version = request.match_info.get("version")
    version = parse_version(version) if version is not None else None

    verbose = flag(request, "verbose")

    def query(state: RegistryState):
        if version is not None and version != -1 and (
                version not in state.subjects.get(subject, {}) or state.subjects[subject][version].deleted):
            raise errors.version_not_found(version)
        try:
            if version in (None, -1) and not state.versions(subject):
                state.parse_request(schema_request)  # nothing to be compatible with, but it must be a schema
                return []
            return state.compatibility_errors(subject, schema_request, version)
        except errors.RegistryError as error:
            if verbose and error.error_code == 42201:  # as Confluent: an invalid schema is one more message
                return [error.message]
            raise
    problems = await request.app[STORE_KEY].read(query)
    answer: dict = {"is_compatible": not problems}
    if verbose:
        answer["messages"] = problems
    return reply(answer)


async def get_config(request: web.Request) -> web.Response:
    subject = request.match_info.get("subject")
    default_to_global = flag(request, "defaultToGlobal")
    return reply(await request.app[STORE_KEY].read(lambda state: state.config_json(subject, default_to_global)))


async def get_mode(request: web.Request) -> web.Response:
    subject = request.match_info.get("subject")
    default_to_global = flag(request, "defaultToGlobal")
    return reply(await request.app[STORE_KEY].read(lambda state: state.mode_json(subject, default_to_global)))


# writes


async def written(request: web.Request, plan) -> web.Response:
    return await request.app[WRITER_KEY](request, plan)


def write_reply(write, offset: int) -> web.Response:
    return reply(write.answer, write.status, headers={OFFSET_HEADER: str(offset)})


async def register(request: web.Request) -> web.Response:
    subject, body = subject_of(request), await body_of(request)
    schema_request, normalize = register_request(body), flag(request, "normalize")
    return await written(request, lambda state: state.plan_register(subject, schema_request, normalize))


async def delete_subject(request: web.Request) -> web.Response:
    subject, permanent = subject_of(request), flag(request, "permanent")
    return await written(request, lambda state: state.plan_delete_subject(subject, permanent))


async def delete_version(request: web.Request) -> web.Response:
    subject, version = subject_of(request), parse_version(request.match_info["version"])
    permanent = flag(request, "permanent")
    return await written(request, lambda state: state.plan_delete_version(subject, version, permanent))


async def put_config(request: web.Request) -> web.Response:
    subject, body = request.match_info.get("subject"), await body_of(request)
    return await written(request, lambda state: state.plan_config(subject, body))


async def delete_config(request: web.Request) -> web.Response:
    subject = request.match_info.get("subject")
    return await written(request, lambda state: state.plan_delete_config(subject))


async def put_mode(request: web.Request) -> web.Response:
    subject, body, force = request.match_info.get("subject"), await body_of(request), flag(request, "force")
    return await written(request, lambda state: state.plan_mode(subject, body, force))


async def delete_mode(request: web.Request) -> web.Response:
    subject = request.match_info["subject"]
    return await written(request, lambda state: state.plan_delete_mode(subject))


SUBJECT = "/subjects/{subject}"
VERSION = SUBJECT + "/versions/{version}"
ROUTES = [
    ("GET", "/", root),
    ("GET", "/schemas/types", schema_types),
    ("GET", "/schemas", list_schemas),
    ("GET", "/schemas/ids/{id}", schema_by_id),
    ("GET", "/schemas/ids/{id}/schema", raw_schema_by_id),
    ("GET", "/schemas/ids/{id}/subjects", subjects_of_id),
    ("GET", "/schemas/ids/{id}/versions", versions_of_id),
    ("GET", "/subjects", list_subjects),
    ("POST", SUBJECT, lookup),
    ("DELETE", SUBJECT, delete_subject),
    ("GET", SUBJECT + "/versions", list_versions),
    ("POST", SUBJECT + "/versions", register),
    ("GET", VERSION, get_version),
    ("GET", VERSION + "/schema", get_raw_version),
    ("GET", VERSION + "/referencedby", referenced_by),
    ("DELETE", VERSION, delete_version),
    ("POST", "/compatibility" + VERSION, check_compatibility),
    ("POST", "/compatibility" + SUBJECT + "/versions", check_compatibility),
    ("GET", "/config", get_config),
    ("PUT", "/config", put_config),
    ("DELETE", "/config", delete_config),
    ("GET", "/config/{subject}", get_config),
    ("PUT", "/config/{subject}", put_config),
    ("DELETE", "/config/{subject}", delete_config),
    ("GET", "/mode", get_mode),
    ("PUT", "/mode", put_mode),
    ("GET", "/mode/{subject}", get_mode),
    ("PUT", "/mode/{subject}", put_mode),
    ("DELETE", "/mode/{subject}", delete_mode),
]


def build_app(store, writer) -> web.Application:
    """`await writer(request, plan)` answers a write, doing it here or on the writer node."""
    app = web.Application(middlewares=[confluent_errors], client_max_size=MAX_BODY_BYTES)
    app[STORE_KEY] = store
    app[WRITER_KEY] = writer
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app

