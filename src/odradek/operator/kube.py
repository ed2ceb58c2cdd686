"""A small asyncio client of the Kubernetes API on aiohttp: get, list, create, merge-patch, delete and watch.

The operator's handlers run on kopf's event loop and need an async client; this one covers what the operator does
to a cluster's objects, nothing more. Connection settings come from an explicit server URL (tests, a local
`kubectl proxy`) or from the Pod's service account (in-cluster).
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
REQUEST_TIMEOUT_S = 30.0


class KubeError(Exception):
    """The API server refused a request (or a watch stream reported an error)."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(f"HTTP {status}{f' {reason}' if reason else ''}: {message}")
        self.status, self.reason, self.message = status, reason, message


class AlreadyExists(KubeError):
    """409 on create: an object of that name exists."""


@dataclass(frozen=True)
class Resource:
    """A collection of the API: its group/version and plural name."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


PODS = Resource("v1", "pods")
CONFIG_MAPS = Resource("v1", "configmaps")
SERVICES = Resource("v1", "services")
CLAIMS = Resource("v1", "persistentvolumeclaims")
SERVICE_ACCOUNTS = Resource("v1", "serviceaccounts")
DISRUPTION_BUDGETS = Resource("policy/v1", "poddisruptionbudgets")
SECRETS = Resource("v1", "secrets")
NODES = Resource("v1", "nodes", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io/v1", "clusterrolebindings", namespaced=False)
NETWORK_POLICIES = Resource("networking.k8s.io/v1", "networkpolicies")
CLUSTERS = Resource("odradek.io/v1beta1", "odradekclusters")
TOPICS = Resource("odradek.io/v1beta1", "odradektopics")
USERS = Resource("odradek.io/v1beta1", "odradekusers")
REBALANCES = Resource("odradek.io/v1beta1", "odradekrebalances")

_BY_KIND = {("v1", "Pod"): PODS, ("v1", "ConfigMap"): CONFIG_MAPS, ("v1", "Service"): SERVICES,
            ("v1", "PersistentVolumeClaim"): CLAIMS, ("v1", "ServiceAccount"): SERVICE_ACCOUNTS,
            ("v1", "Secret"): SECRETS, ("v1", "Node"): NODES, ("policy/v1", "PodDisruptionBudget"): DISRUPTION_BUDGETS,
            ("networking.k8s.io/v1", "NetworkPolicy"): NETWORK_POLICIES,
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): CLUSTER_ROLE_BINDINGS,
            ("odradek.io/v1beta1", "OdradekCluster"): CLUSTERS, ("odradek.io/v1beta1", "OdradekTopic"): TOPICS,
            ("odradek.io/v1beta1", "OdradekUser"): USERS, ("odradek.io/v1beta1", "OdradekRebalance"): REBALANCES}


def resource_of(obj: Mapping) -> Resource:
    """The collection an object (with apiVersion and kind) belongs to; a KeyError for a kind not listed."""
    return _BY_KIND[obj["apiVersion"], obj["kind"]]


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate: a bearer token file (re-read on every request, since
    bound service account tokens rotate) and a CA bundle, or neither (a test server, `kubectl proxy`)."""

    server: str
    token_file: str | None = None
    ca_file: str | None = None
    insecure: bool = False

    @classmethod
    def in_cluster(cls, service_account_dir: str = SERVICE_ACCOUNT_DIR) -> Connection:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise KubeError(0, "not in a Kubernetes pod: KUBERNETES_SERVICE_HOST/PORT are not set "
                               "(give the API server's URL instead)")
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        return cls(server=f"https://{host}:{port}", token_file=os.path.join(service_account_dir, "token"),
                   ca_file=os.path.join(service_account_dir, "ca.crt"))


class Kube:
    """One aiohttp session to the API server; create it on the loop that uses it, close it there."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        ssl_context: ssl.SSLContext | bool = True
        if connection.insecure:
            ssl_context = False
        elif connection.ca_file:
            ssl_context = ssl.create_default_context(cafile=connection.ca_file)
        self._session = aiohttp.ClientSession(base_url=connection.server,
                                              connector=aiohttp.TCPConnector(ssl=ssl_context),
                                              timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))

    async def close(self) -> None:
        await self._session.close()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def get(self, resource: Resource, namespace: str | None, name: str) -> dict:
        return await self._call("GET", resource.path(namespace, name))

    async def list(self, resource: Resource, namespace: str | None,
                   labels: Mapping[str, str] | None = None) -> list[dict]:
        """The objects of the collection, those with all of `labels` when given (also checked here: a selector
        the server ignores must not widen the result)."""
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels else None
        items = (await self._call("GET", resource.path(namespace), params=params)).get("items") or []
        if labels:
            items = [item for item in items if labels.items() <= _labels(item).items()]
        return items

    async def create(self, obj: Mapping) -> dict:
        """Create the object in its metadata.namespace; AlreadyExists (a KubeError) when it exists."""
        resource = resource_of(obj)
        try:
            return await self._call("POST", resource.path(obj["metadata"].get("namespace")), json=obj)
        except KubeError as e:
            if e.status == 409:
                raise AlreadyExists(e.status, e.message, e.reason) from None
            raise

    async def merge_patch(self, resource: Resource, namespace: str | None, name: str, patch: Mapping,
                          subresource: str | None = None) -> dict:
        """An RFC 7386 merge patch (None deletes a key, lists are replaced); subresource "status" for status."""
        return await self._call("PATCH", resource.path(namespace, name, subresource), data=json.dumps(patch),
                                headers={"Content-Type": "application/merge-patch+json"})

    async def delete(self, resource: Resource, namespace: str | None, name: str) -> bool:
        """Delete the object (in the background); False when it was not there."""
        try:
            await self._call("DELETE", resource.path(namespace, name))
        except KubeError as e:
            if e.status == 404:
                return False
            raise
        return True

    async def watch(self, resource: Resource, namespace: str | None,
                    resource_version: str | None = None) -> AsyncIterator[tuple[str, dict]]:
        """(event type, object) pairs until the server ends the stream; an ERROR event raises KubeError."""
        params = {"watch": "true"}
        if resource_version:
            params["resourceVersion"] = resource_version
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self._session.get(resource.path(namespace), params=params, headers=self._headers(),
                                     timeout=timeout) as response:
            if response.status >= 400:
                raise _error(response.status, await response.text())
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise KubeError(status.get("code", 500), status.get("message", str(status)), status.get("reason"))
                yield event["type"], event["object"]

    async def _call(self, method: str, url: str, **kwargs: Any) -> dict:
        async with self._session.request(method, url, headers=self._headers() | kwargs.pop("headers", {}),
                                         **kwargs) as response:
            text = await response.text()
            if response.status >= 400:
                raise _error(response.status, text)
            return json.loads(text) if text else {}

    def _headers(self) -> dict[str, str]:
        if self.connection.token_file is None:
            return {}
        with open(self.connection.token_file) as f:
            return {"Authorization": f"Bearer {f.read().strip()}"}


def _error(status: int, text: str) -> KubeError:
    """A KubeError from an error response: the Status object's message and reason when the body is one."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return KubeError(status, str(body["message"]), body.get("reason"))
    return KubeError(status, text.strip() or "(no body)")


def _labels(obj: Mapping) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("labels") or {}
