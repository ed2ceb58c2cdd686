"""The console's client of a schema registry (Confluent Schema Registry's REST API, Odradek's or Confluent's).

Plain HTTP with aiohttp's client from the console's own event loop, with a short timeout per request, so a
registry that is down or slow costs a page a few seconds and a clear message. Only reads, and the
compatibility check (which changes nothing), are asked: the console deletes and registers nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp
from yarl import URL

from odradek.console.cluster import ConsoleError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
TIMEOUT_S = 5.0  # each request to the registry
CONNECTIONS = 8  # requests in flight to the registry at once, for the whole console
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class RegistryUnavailable(ConsoleError):
    """The registry did not answer, or answered something that is not its API."""


class RegistryRefused(ConsoleError):
    """The registry answered with one of its errors: `status` is the HTTP status, `error_code` Confluent's code
    (40401 subject not found, 42201 invalid schema, ...)."""

    def __init__(self, text: str, status: int, error_code: int | None):
        super().__init__(text, str(error_code) if error_code is not None else None)
        self.status = status
        self.error_code = error_code


def subject_path(subject: str, tail: str = "") -> str:
    return f"/subjects/{quote(subject, safe='')}{tail}"


class RegistryClient:
    """One registry, at `url`. `port`, when given, is asked for the port of a URL that names port 0 (a node
    whose registry took a free port serves the console too)."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S, port: Callable[[], int | None] | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._port = port
        self._session: aiohttp.ClientSession | None = None

    @property
    def base(self) -> str:
        """The URL requests go to: `url`, with the port filled in when it was 0."""
        parts = urlsplit(self.url)
        bound = self._port() if self._port is not None and parts.port == 0 else None
        if not bound:
            return self.url
        host = parts.hostname or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return urlunsplit((parts.scheme, f"{host}:{bound}", parts.path, "", ""))

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                connector=aiohttp.TCPConnector(limit=CONNECTIONS),
                headers={"Accept": ACCEPT})
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, path: str, body: dict | None = None):
        """The JSON answer of one request; RegistryRefused for the registry's own errors, RegistryUnavailable
        when it does not answer (within the timeout) or answers something else than its API."""
        base = self.base
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": CONTENT_TYPE} if data is not None else None
        try:
            target = URL(base + path, encoded=True)
            async with self._client().request(method, target, data=data, headers=headers) as response:
                status, raw = response.status, await response.read()
        except TimeoutError:
            raise RegistryUnavailable(f"the schema registry at {base} did not answer within "
                                      f"{self.timeout_s:g} s") from None
        except (aiohttp.ClientError, ValueError, OSError) as exc:
            raise RegistryUnavailable(f"cannot reach the schema registry at {base}: "
                                      f"{exc or type(exc).__name__}") from None
        try:
            answer = json.loads(raw) if raw.strip() else None
        except (ValueError, UnicodeDecodeError):
            answer = None
            if status < 400:
                raise RegistryUnavailable(f"{base} answered {method} {path} with something that is not JSON: is it "
                                          "a schema registry?") from None
        if status >= 400:
            if isinstance(answer, dict) and "message" in answer:
                code = answer.get("error_code")
                raise RegistryRefused(str(answer["message"]), status, code if isinstance(code, int) else None)
            raise RegistryUnavailable(f"the schema registry at {base} answered {method} {path} with HTTP {status}")
        return answer

    # -----------------------------------------------------------------------------------------------
    # What the pages ask

    async def subjects(self) -> list[str]:
        answer = await self.call("GET", "/subjects")
        if not isinstance(answer, list):
            raise RegistryUnavailable(f"{self.base}/subjects did not answer a list of subjects")
        return [str(s) for s in answer]

    async def versions(self, subject: str) -> list[int]:
        answer = await self.call("GET", subject_path(subject, "/versions"))
        if not isinstance(answer, list):
            raise RegistryUnavailable(f"the versions of '{subject}' are not a list")
        return sorted(int(v) for v in answer)

    async def version(self, subject: str, version: int | str) -> dict:
        """{subject, version, id, schema, schemaType (AVRO when missing), references ([] when missing)}."""
        answer = await self.call("GET", subject_path(subject, f"/versions/{version}"))
        if not isinstance(answer, dict) or "schema" not in answer:
            raise RegistryUnavailable(f"version {version} of '{subject}' is not a schema")
        answer.setdefault("schemaType", "AVRO")
        answer.setdefault("references", [])
        return answer

    async def global_level(self) -> str:
        answer = await self.call("GET", "/config")
        return str((answer or {}).get("compatibilityLevel") or (answer or {}).get("compatibility") or "")

    async def subject_level(self, subject: str) -> str | None:
        """The subject's own compatibility level, or None when it has none (the global one applies)."""
        try:
            answer = await self.call("GET", f"/config/{quote(subject, safe='')}")
        except RegistryRefused as exc:
            if exc.status == 404:
                return None
            raise
        return str((answer or {}).get("compatibilityLevel") or (answer or {}).get("compatibility") or "") or None

    async def check(self, subject: str, schema: str, schema_type: str, references: list | None = None) -> dict:
        """{is_compatible, messages} of `schema` against the subject's versions, as its compatibility level
        says; RegistryRefused when the registry refuses the request (an invalid schema: 42201)."""
        body: dict = {"schema": schema, "schemaType": schema_type}
        if references:
            body["references"] = references
        answer = await self.call("POST", f"/compatibility{subject_path(subject, '/versions')}?verbose=true", body)
        if not isinstance(answer, dict) or "is_compatible" not in answer:
            raise RegistryUnavailable("the compatibility check answered no is_compatible")
        return {"is_compatible": bool(answer["is_compatible"]),
                "messages": [m if isinstance(m, str) else json.dumps(m) for m in answer.get("messages") or []]}
