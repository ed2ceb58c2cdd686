"""Running `odradek console` for tests, and talking to it over HTTP like a browser that keeps its cookie."""

from __future__ import annotations

import http.cookiejar
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer

from tests.conftest import free_port
from tests.registry.conftest import RegistryHttp

# The users of the SASL node (tests/console/conftest.py: secured_node); PLAIN, from its JAAS config.
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
BOB, BOB_PASSWORD = "bob", "bob-secret"


class ConsoleProcess:
    """`odradek console` on a free 127.0.0.1 port, its output in `log_path`."""

    def __init__(self, bootstrap: str, log_path: Path, extra_args: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        args = [sys.executable, "-m", "odradek", "console", "--bootstrap-server", bootstrap,
                "--listen", self.url, "--sample-interval", "1", *extra_args]
        log = open(log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait_ready(self, timeout: float = 60.0) -> ConsoleProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the console exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/assets/console.css", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the console did not answer within {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Browser:
    """An HTTP client with a cookie jar: GET pages, POST forms with the page's CSRF token."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.plain = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)
        self.csrf: str | None = None

    def get(self, path: str, follow: bool = True) -> tuple[int, str, str]:
        """(status, final URL, body)."""
        return self._open(urllib.request.Request(self.base + path), follow)

    def get_json(self, path: str) -> dict:
        status, _, body = self.get(path)
        answer = json.loads(body)
        if status != 200:
            raise AssertionError(f"{path}: {status} {answer}")
        return answer

    def get_json_status(self, path: str) -> int:
        return self.get(path)[0]

    def post(self, path: str, fields: dict[str, str], *, csrf: bool = True, follow: bool = True
             ) -> tuple[int, str, str]:
        data = dict(fields)
        if csrf:
            data["csrf"] = self.csrf or ""
        request = urllib.request.Request(self.base + path, data=urllib.parse.urlencode(data).encode(), method="POST")
        return self._open(request, follow)

    def _open(self, request, follow: bool) -> tuple[int, str, str]:
        opener = self.opener if follow else self.plain
        try:
            with opener.open(request, timeout=60) as response:
                status, final, body = response.status, response.url, response.read().decode()
        except urllib.error.HTTPError as error:
            status, final, body = error.code, error.geturl() or request.full_url, error.read().decode()
        found = re.search(r'name="csrf" value="([^"]+)"', body)
        if found:
            self.csrf = found.group(1)
        return status, final, body


def query_of(address: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(address).query))


def consume_one_and_commit(bootstrap: str, topic: str, group: str, timeout_s: float = 60) -> None:
    """A group member reads the first record of `topic`, commits past it and leaves: the group is then Empty."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    message = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            break
    assert message is not None and message.error() is None, f"no record of {topic} within {timeout_s}s"
    consumer.commit(message, asynchronous=False)
    consumer.close()


# ---------------------------------------------------------------------------------------------------
# A node's schema registry (schema.registry.listener), over plain HTTP

def register_schema(base: str, subject: str, schema: object, schema_type: str = "AVRO") -> int:
    """Register `schema` (JSON-encoded unless a string) under `subject`; its id."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    body = {"schema": text} if schema_type == "AVRO" else {"schema": text, "schemaType": schema_type}
    return RegistryHttp(base).ok("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)["id"]
