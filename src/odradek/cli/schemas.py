"""`odradek schemas`: subjects, schemas, compatibility checks, compatibility levels and modes of a schema
registry that speaks Confluent Schema Registry's REST API (an Odradek node's schema.registry.listener, or
Confluent's own registry).

The registry is plain HTTP, so the commands use urllib: no client library, nothing of Kafka. Every command
takes --registry URL (default $ODRADEK_SCHEMA_REGISTRY_URL, else http://127.0.0.1:8081; `user:password@` in
the URL is sent as HTTP basic authentication) and --timeout. An error the registry answers
(`{"error_code": N, "message": "..."}`) is printed as `error: <message> (error code N)`.

`schemas check` exits 1 when the schema is incompatible, so a CI pipeline can gate on it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from odradek.cli.main import ArgumentParser, CliError, positive_float, positive_int
from odradek.cli.output import print_json, print_table

ENVIRONMENT_VARIABLE = "ODRADEK_SCHEMA_REGISTRY_URL"
DEFAULT_REGISTRY = "http://127.0.0.1:8081"
DEFAULT_TIMEOUT_S = 30.0  # a write goes through the registry's Kafka topic; allow it more than a read
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; qs=0.9, application/json; qs=0.5"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")

TYPE_GUESS = ("default: PROTOBUF for a *.proto file (or a text that is not JSON and starts with a "
              "syntax/package/import/message declaration), JSON for a JSON object with \"$schema\", "
              "\"properties\" or \"type\": \"object\", else AVRO")


# ---------------------------------------------------------------------------------------------------
# Parser


def add_schemas_parser(commands, output) -> None:
    registry = ArgumentParser(add_help=False)
    group = registry.add_argument_group("registry")
    group.add_argument("--registry", metavar="URL",
                       help=f"the schema registry (default ${ENVIRONMENT_VARIABLE}, else {DEFAULT_REGISTRY}); "
                            "user:password@ in the URL is sent as basic authentication")
    group.add_argument("--timeout", metavar="SECONDS", type=positive_float, default=DEFAULT_TIMEOUT_S,
                       help=f"give up when the registry does not answer within this long "
                            f"(default {DEFAULT_TIMEOUT_S:g})")
    common = [registry, output]

    schemas = commands.add_parser("schemas", help="subjects, schemas, compatibility and modes of a schema registry",
                                  description="Manage the schemas of a schema registry with Confluent Schema "
                                              "Registry's REST API (an Odradek node's schema.registry.listener).")
    sub = schemas.add_subparsers(dest="schemas_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("list", parents=common, help="list subjects",
                       description="List the subjects: their versions, and the id and type of the latest.")
    p.add_argument("--prefix", metavar="P", default="", help="only subjects whose name starts with P")
    p.add_argument("--deleted", action="store_true", help="include soft-deleted subjects and versions")
    p.set_defaults(run=list_subjects)

    p = sub.add_parser("get", parents=common, help="show a schema",
                       description="Show a subject's version (the latest by default), or the schema with an id. "
                                   "Table output: a header line, then the schema (JSON indented, .proto as is); "
                                   "json output: the registry's answer.")
    p.add_argument("subject", metavar="SUBJECT", nargs="?")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--version", metavar="V", type=version_arg, help="a version number, or latest (default)")
    which.add_argument("--id", metavar="N", type=positive_int, help="the schema with this id (no SUBJECT)")
    p.set_defaults(run=get_schema)

    p = sub.add_parser("register", parents=common, help="register a schema under a subject",
                       description="Register a schema as the next version of a subject (or find the version "
                                   "that already holds it), and print its id and version.")
    _add_schema_input(p)
    p.add_argument("--reference", metavar="NAME=SUBJECT:VERSION", type=reference_arg, action="append", default=[],
                   help="a schema this one refers to by NAME (an Avro full name, a JSON Schema $ref, a .proto "
                        "import path), registered as SUBJECT's VERSION (repeatable)")
    p.add_argument("--normalize", action="store_true", help="register the schema's normalized form")
    p.set_defaults(run=register_schema)

    p = sub.add_parser("delete", parents=common, help="delete a subject or one of its versions",
                       description="Soft-delete a subject (every version) or one version; --permanent then removes "
                                   "what was soft-deleted (the registry wants a soft delete first).")
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("--version", metavar="V", type=version_arg, help="only this version (a number, or latest)")
    p.add_argument("--permanent", action="store_true", help="hard-delete what was soft-deleted before")
    p.set_defaults(run=delete_schemas)

    p = sub.add_parser("check", parents=common, help="check a schema's compatibility with a subject",
                       description="Check whether a schema may be registered under a subject: against the "
                                   "versions the subject's compatibility level checks, or against one version. "
                                   "Exit status 0 when compatible, 1 when not (the reasons are printed).")
    _add_schema_input(p)
    p.add_argument("--reference", metavar="NAME=SUBJECT:VERSION", type=reference_arg, action="append", default=[],
                   help="a schema this one refers to (repeatable; see register)")
    p.add_argument("--version", metavar="V", type=version_arg, help="check against this version only (or latest)")
    p.set_defaults(run=check_schema)

    p = sub.add_parser("config", parents=common, help="show or change a compatibility level",
                       description="Show, set or delete the compatibility level of a subject, or the global one "
                                   "without SUBJECT. A subject without its own level follows the global one.")
    p.add_argument("subject", metavar="SUBJECT", nargs="?")
    change = p.add_mutually_exclusive_group()
    change.add_argument("--set", metavar="LEVEL", type=choice(LEVELS), dest="level",
                        help=f"set the level: {', '.join(LEVELS)}")
    change.add_argument("--delete", action="store_true",
                        help="remove the subject's own level (it follows the global one again), or the global "
                             "level (back to the default)")
    p.set_defaults(run=config)

    p = sub.add_parser("mode", parents=common, help="show or change a mode",
                       description="Show, set or delete the mode of a subject, or the global one without SUBJECT: "
                                   f"{', '.join(MODES)}.")
    p.add_argument("subject", metavar="SUBJECT", nargs="?")
    change = p.add_mutually_exclusive_group()
    change.add_argument("--set", metavar="MODE", type=choice(MODES), dest="mode", help=f"set the mode: {', '.join(MODES)}")
    change.add_argument("--delete", action="store_true",
                        help="remove the subject's own mode (it follows the global one again)")
    p.add_argument("--force", action="store_true", help="with --set IMPORT: even when subjects exist")
    p.set_defaults(run=mode)


def _add_schema_input(p) -> None:
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("file", metavar="FILE", help="the schema's file, or - for stdin")
    p.add_argument("--type", metavar="TYPE", type=choice(SCHEMA_TYPES), dest="schema_type",
                   help=f"{', '.join(SCHEMA_TYPES)} ({TYPE_GUESS})")


# ---------------------------------------------------------------------------------------------------
# Argument types and the pure parts


def choice(names: tuple[str, ...]):
    """A case-insensitive choice among `names`, given back upper-case."""
    def parse(text: str) -> str:
        if text.upper() not in names:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(names)}, got '{text}'")
        return text.upper()
    return parse


def version_arg(text: str) -> str:
    """A version: a number 1..2^31-1, or latest."""
    if text.lower() == "latest" or text == "-1":
        return "latest"
    try:
        version = int(text)
    except ValueError:
        version = 0
    if not 1 <= version < 2**31:
        raise argparse.ArgumentTypeError(f"expected a version number or latest, got '{text}'")
    return str(version)


def reference_arg(text: str) -> dict:
    """NAME=SUBJECT:VERSION -> a reference as the registry takes it (the subject may contain ':')."""
    name, sep, rest = text.partition("=")
    subject, colon, version = rest.rpartition(":")
    if not sep or not name.strip() or not colon or not subject:
        raise argparse.ArgumentTypeError(f"expected NAME=SUBJECT:VERSION, got '{text}'")
    try:
        number = int(version)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"the version of reference {name.strip()} must be a positive number, "
                                         f"got '{version}'")
    return {"name": name.strip(), "subject": subject, "version": number}


PROTO_START = re.compile(r"\A(?:\s|//[^\n]*\n|/\*.*?\*/)*(?:syntax|edition|package|import|message|enum|option)\b",
                         re.DOTALL)


def guess_type(path: str, text: str) -> str:
    """The schema type when --type is not given: PROTOBUF for a *.proto file (or a text that is not JSON and
    starts with a .proto declaration); JSON for a JSON object with "$schema", "properties" or "type": "object"
    (none of which an Avro schema has); AVRO for everything else."""
    if path.lower().endswith(".proto"):
        return "PROTOBUF"
    try:
        document = json.loads(text)
    except ValueError:
        return "PROTOBUF" if PROTO_START.match(text) else "AVRO"
    if isinstance(document, dict) and ("$schema" in document or "properties" in document
                                       or document.get("type") == "object"):
        return "JSON"
    return "AVRO"


def read_schema(path: str) -> str:
    """The schema text of FILE, or of stdin for -."""
    if path == "-":
        try:
            return sys.stdin.read()
        except UnicodeDecodeError:
            raise CliError("stdin is not UTF-8 text") from None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"cannot read {path}: not UTF-8 text") from None


def schema_request(args: argparse.Namespace) -> dict:
    """The body of a register or compatibility request for FILE and the flags."""
    text = read_schema(args.file)
    body: dict = {"schema": text, "schemaType": args.schema_type or guess_type(args.file, text)}
    if args.reference:
        body["references"] = args.reference
    return body


def pretty_schema(text: str) -> str:
    """JSON (Avro, JSON Schema) indented; anything else (.proto) as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text.rstrip("\n")


def subject_rows(versions: list[dict]) -> list[dict]:
    """GET /schemas' answer (every version of every subject) -> one row per subject, sorted by name."""
    by_subject: dict[str, list[dict]] = {}
    for version in versions:
        by_subject.setdefault(version["subject"], []).append(version)
    rows = []
    for subject in sorted(by_subject):
        held = sorted(by_subject[subject], key=lambda v: v["version"])
        latest = held[-1]
        row = {"subject": subject, "versions": [v["version"] for v in held], "latest_version": latest["version"],
               "latest_id": latest["id"], "type": latest.get("schemaType") or "AVRO"}
        if any(v.get("deleted") for v in held):
            row["deleted_versions"] = [v["version"] for v in held if v.get("deleted")]
        rows.append(row)
    return rows


def references_text(references: list[dict] | None) -> str:
    return ", ".join(f"{r['name']}={r['subject']}:{r['version']}" for r in references or ())


def _quoted(subject: str) -> str:
    return quote(subject, safe="")


# ---------------------------------------------------------------------------------------------------
# HTTP


class Registry:
    """Confluent Schema Registry's REST API over urllib: JSON in, JSON out, one-line CliErrors."""

    def __init__(self, args: argparse.Namespace):
        url = (args.registry or os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_REGISTRY).strip()
        if "://" not in url:
            url = "http://" + url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"invalid schema registry URL '{url}': expected http(s)://HOST[:PORT]")
        self.authorization = None
        netloc = parts.netloc
        if "@" in netloc:
            credentials, _, netloc = netloc.rpartition("@")
            user, _, password = credentials.partition(":")
            token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
            self.authorization = f"Basic {token}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.timeout = args.timeout

    def call(self, method: str, path: str, body=None, **query) -> object:
        import http.client
        import urllib.error
        import urllib.request

        params = {k: ("true" if v is True else v) for k, v in query.items() if v not in (None, False)}
        url = self.url + path + (f"?{urlencode(params)}" if params else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", ACCEPT)
        request.add_header("User-Agent", "odradek-cli")
        if data is not None:
            request.add_header("Content-Type", CONTENT_TYPE)
        if self.authorization:
            request.add_header("Authorization", self.authorization)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise CliError(self._error_text(error)) from None
        except urllib.error.URLError as error:
            reason = error.reason
            if isinstance(reason, TimeoutError):
                raise CliError(self._slow()) from None
            text = getattr(reason, "strerror", None) or str(reason)
            raise CliError(f"cannot reach the schema registry at {self.url}: {text}") from None
        except TimeoutError:
            raise CliError(self._slow()) from None
        except (OSError, http.client.HTTPException) as exc:
            text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise CliError(f"cannot reach the schema registry at {self.url}: {text}") from None
        try:
            return json.loads(raw) if raw.strip() else None
        except (ValueError, UnicodeDecodeError):
            raise CliError(f"the schema registry at {self.url} answered {method} {path} with something other "
                           "than JSON") from None

    def _slow(self) -> str:
        return f"the schema registry at {self.url} did not answer within {self.timeout:g}s"

    def _error_text(self, error) -> str:
        try:
            raw = error.read()
        except OSError:
            raw = b""
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            body = None
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            message = body["message"].strip().rstrip(".")
            code = body.get("error_code", error.code)
            return f"{message} (error code {code})"
        return f"the schema registry at {self.url} answered HTTP {error.code} {error.reason}"

    def get(self, path: str, **query):
        return self.call("GET", path, **query)

    def post(self, path: str, body, **query):
        return self.call("POST", path, body, **query)

    def put(self, path: str, body, **query):
        return self.call("PUT", path, body, **query)

    def delete(self, path: str, **query):
        return self.call("DELETE", path, **query)


def registry_error_code(error: CliError) -> int | None:
    """The registry's error code of a CliError Registry raised, or None."""
    found = re.search(r"\(error code (\d+)\)$", str(error))
    return int(found.group(1)) if found else None


# ---------------------------------------------------------------------------------------------------
# Commands


def list_subjects(args: argparse.Namespace) -> int:
    registry = Registry(args)
    versions = registry.get("/schemas", subjectPrefix=args.prefix or None, deleted=args.deleted)
    rows = subject_rows(versions or [])
    if args.output == "json":
        print_json({"subjects": rows})
    elif rows:
        headers = ["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE"]
        if args.deleted:
            print_table(headers + ["DELETED"], [(r["subject"], r["versions"], r["latest_version"], r["latest_id"],
                                                  r["type"], r.get("deleted_versions", [])) for r in rows])
        else:
            print_table(headers, [(r["subject"], r["versions"], r["latest_version"], r["latest_id"], r["type"])
                                  for r in rows])
    return 0


def get_schema(args: argparse.Namespace) -> int:
    registry = Registry(args)
    if args.id is not None:
        if args.subject is not None:
            raise CliError("give SUBJECT [--version V] or --id N, not both")
        answer = registry.get(f"/schemas/ids/{args.id}")
        if args.output == "json":
            print_json(answer)
            return 0
        header = f"id: {args.id}  type: {answer.get('schemaType') or 'AVRO'}"
        try:
            holders = registry.get(f"/schemas/ids/{args.id}/versions")
        except CliError:  # an older registry without this endpoint: the header without the subjects
            holders = []
        if holders:
            header += "  subjects: " + ", ".join(f"{h['subject']} (version {h['version']})" for h in holders)
    else:
        if args.subject is None:
            raise CliError("give SUBJECT [--version V] or --id N")
        version = args.version or "latest"
        answer = registry.get(f"/subjects/{_quoted(args.subject)}/versions/{version}")
        if args.output == "json":
            print_json(answer)
            return 0
        header = (f"subject: {answer['subject']}  version: {answer['version']}  id: {answer['id']}  "
                  f"type: {answer.get('schemaType') or 'AVRO'}")
    if answer.get("references"):
        header += f"  references: {references_text(answer['references'])}"
    print(header)
    print(pretty_schema(answer["schema"]))
    return 0


def register_schema(args: argparse.Namespace) -> int:
    body = schema_request(args)
    registry = Registry(args)
    path = f"/subjects/{_quoted(args.subject)}"
    answer = registry.post(path + "/versions", body, normalize=args.normalize)
    if not isinstance(answer, dict) or "id" not in answer:
        raise CliError(f"the schema registry at {registry.url} answered the registration with {answer!r}")
    if "version" not in answer:  # Confluent's registry answers {"id": N} only: find the version
        found = registry.post(path, body, normalize=args.normalize)
        answer = {**answer, "subject": args.subject, "version": found["version"]}
    if args.output == "json":
        print_json(answer)
    else:
        print(f"Registered {body['schemaType']} schema id {answer['id']} as version {answer['version']} of "
              f"subject '{args.subject}'.")
    return 0


def delete_schemas(args: argparse.Namespace) -> int:
    registry = Registry(args)
    path = f"/subjects/{_quoted(args.subject)}"
    how = "Permanently deleted" if args.permanent else "Soft-deleted"
    if args.version is not None:
        deleted = registry.delete(f"{path}/versions/{args.version}", permanent=args.permanent)
        versions = [deleted]
        text = f"{how} version {deleted} of subject '{args.subject}'."
    else:
        versions = registry.delete(path, permanent=args.permanent) or []
        text = (f"{how} subject '{args.subject}' "
                f"(version{'s' if len(versions) != 1 else ''} {', '.join(str(v) for v in versions)}).")
    if args.output == "json":
        print_json({"subject": args.subject, "versions": versions, "permanent": args.permanent})
    else:
        print(text)
    return 0


def check_schema(args: argparse.Namespace) -> int:
    body = schema_request(args)
    registry = Registry(args)
    path = f"/compatibility/subjects/{_quoted(args.subject)}/versions"
    if args.version is not None:
        path += f"/{args.version}"
    answer = registry.post(path, body, verbose=True)
    compatible = bool(answer.get("is_compatible"))
    if args.version is None:
        against = f"subject '{args.subject}'"
    elif args.version == "latest":
        against = f"the latest version of subject '{args.subject}'"
    else:
        against = f"version {args.version} of subject '{args.subject}'"
    if args.output == "json":
        print_json(answer)
    elif compatible:
        print(f"Compatible: the {body['schemaType']} schema may follow {against}.")
    else:
        messages = answer.get("messages") or []
        print(f"Incompatible: the {body['schemaType']} schema may not follow {against}"
              f"{':' if messages else '.'}")
        for message in messages:
            print(f"  - {message}")
    return 0 if compatible else 1


def config(args: argparse.Namespace) -> int:
    registry = Registry(args)
    path = "/config" + (f"/{_quoted(args.subject)}" if args.subject is not None else "")
    scope = f"subject '{args.subject}'" if args.subject is not None else "the registry (global)"
    if args.level is not None:
        answer = registry.put(path, {"compatibility": args.level})
        text = f"Set the compatibility level of {scope} to {answer.get('compatibility', args.level)}."
    elif args.delete:
        answer = registry.delete(path)
        was = answer.get("compatibilityLevel") or answer.get("compatibility")
        if args.subject is not None:
            text = f"Deleted the compatibility level of {scope} (it was {was}); it follows the global level."
        else:
            text = f"Deleted the global compatibility level (it was {was}); the registry's default applies."
    else:
        answer, inherited = _own_or_global(registry, path, args.subject, not_configured=40408)
        level = answer.get("compatibilityLevel") or answer.get("compatibility")
        text = f"Compatibility level of {scope}: {level}" + (" (the global level)" if inherited else "")
        if "normalize" in answer:
            text += f"; normalize: {'true' if answer['normalize'] else 'false'}"
    if args.output == "json":
        print_json(answer)
    else:
        print(text)
    return 0


def _own_or_global(registry, path: str, subject: str | None, not_configured: int) -> tuple[dict, bool]:
    """A subject's own config or mode, else the global one (the registry answers `not_configured` when the
    subject has none of its own); (the answer, whether it is the global one)."""
    try:
        return registry.get(path), False
    except CliError as error:
        if subject is None or registry_error_code(error) != not_configured:
            raise
        return registry.get(path, defaultToGlobal=True), True


def mode(args: argparse.Namespace) -> int:
    registry = Registry(args)
    if args.force and args.mode is None:
        raise CliError("--force goes with --set MODE")
    path = "/mode" + (f"/{_quoted(args.subject)}" if args.subject is not None else "")
    scope = f"subject '{args.subject}'" if args.subject is not None else "the registry (global)"
    if args.mode is not None:
        answer = registry.put(path, {"mode": args.mode}, force=args.force)
        text = f"Set the mode of {scope} to {answer.get('mode', args.mode)}."
    elif args.delete:
        if args.subject is None:
            raise CliError("--delete needs a SUBJECT (the global mode is changed with --set)")
        answer = registry.delete(path)
        text = f"Deleted the mode of {scope} (it was {answer.get('mode')}); it follows the global mode."
    else:
        answer, inherited = _own_or_global(registry, path, args.subject, not_configured=40409)
        text = f"Mode of {scope}: {answer.get('mode')}" + (" (the global mode)" if inherited else "")
    if args.output == "json":
        print_json(answer)
    else:
        print(text)
    return 0
