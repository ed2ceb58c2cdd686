"""A node with a schema registry, and a small HTTP client of the registry's REST API."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import NodeProcess, free_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryHttp:
    """Confluent's REST API as plain HTTP: (status, JSON body) for each call."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body=None, content_type: str = CONTENT_TYPE, raw: bytes | None = None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None and content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def get(self, path: str):
        return self.call("GET", path)

    def post(self, path: str, body=None, **options):
        return self.call("POST", path, body, **options)

    def put(self, path: str, body):
        return self.call("PUT", path, body)

    def delete(self, path: str):
        return self.call("DELETE", path)

    def ok(self, method: str, path: str, body=None):
        status, answer = self.call(method, path, body)
        assert status == 200, (method, path, status, answer)
        return answer


def registry_settings(port: int | None = None) -> dict[str, str]:
    return {"schema.registry.listener": f"http://127.0.0.1:{port or free_port()}"}


def wait_until_serving(url: str, timeout_s: float = 60.0, log_text=None) -> RegistryHttp:
    """The registry at `url` once it answers; else an AssertionError, with `log_text()` (the node's log) if given."""
    registry = RegistryHttp(url)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if registry.get("/subjects")[0] == 200:
                return registry
        except OSError:
            pass
        if time.monotonic() > deadline:
            log = f":\n{log_text()}" if log_text else ""
            raise AssertionError(f"the registry at {url} did not answer{log}")
        time.sleep(0.1)


def start_registry_node(data_dir) -> NodeProcess:
    """A node serving a schema registry, once the registry answers; its URL is `registry_url`."""
    node = NodeProcess(data_dir, settings=registry_settings()).start()
    node.registry_url = node.settings["schema.registry.listener"]
    wait_until_serving(node.registry_url, log_text=node.log_text)
    return node


@pytest.fixture(scope="module")
def registry_node(tmp_path_factory):
    """One node serving a schema registry, for a whole module; tests use distinct subject names."""
    node = start_registry_node(tmp_path_factory.mktemp("registry") / "data")
    yield node
    node.stop()


@pytest.fixture
def registry(registry_node) -> RegistryHttp:
    return RegistryHttp(registry_node.registry_url)
