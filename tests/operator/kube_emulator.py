"""A Kubernetes API server for tests: kmock's KubernetesEmulator with what Odradek's operator relies on added.

kmock 0.8 keeps objects in memory and serves create, get, list, merge/JSON patch, delete (with finalizers) and
watch. What a real API server does and kmock does not, added here: metadata.uid, creationTimestamp,
resourceVersion and generation; generateName; 422 for a failed JSON-patch test. Still missing (tests must not rely
on them): label selectors (ignored: Kube.list filters client-side), garbage collection by ownerReferences, PUT,
validation and defaults, 409 conflicts on stale resourceVersions, watch resumption from a resourceVersion.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import jsonpatch
import kmock
import yaml

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds.yaml"


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    _versions: itertools.count = attrs.field(factory=lambda: itertools.count(1))

    async def _handle(self, request: kmock.Request) -> Any:
        if request.resource is not None and request.action == kmock.action.CREATE and isinstance(request.data, dict):
            self._on_create(request.data)
        elif request.resource is not None and request.action == kmock.action.UPDATE and request.name:
            self._on_patch(request)
        try:
            return await super()._handle(request)
        except (jsonpatch.JsonPatchConflict, jsonpatch.JsonPatchTestFailed) as e:
            # kmock answers 500; kopf removes its finalizer with a `test` op and retries only on 422
            raise kmock.KubernetesError(status=422, reason="Invalid", message=str(e)) from e

    def _on_create(self, obj: dict) -> None:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):  # kopf's Events: kmock would store all as None
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        meta.setdefault("uid", str(uuid.uuid4()))  # ownerReferences need the owner's uid
        meta.setdefault("creationTimestamp", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta["resourceVersion"] = str(next(self._versions))  # kopf's finalizer removal tests it
        meta["generation"] = 1  # the operator reports status.observedGeneration

    def _on_patch(self, request: kmock.Request) -> None:
        key = (request.resource, request.namespace, request.name)
        old = self.objects[key] if key in self.objects else None
        generation = old.get("metadata", {}).get("generation", 0) if old is not None and not old.deleted else 0
        version = str(next(self._versions))
        data = request.data
        if isinstance(data, dict):  # a merge patch
            data.setdefault("metadata", {})["resourceVersion"] = version
            if "spec" in data and request.subresource != "status":
                data["metadata"]["generation"] = generation + 1
        elif isinstance(data, list):  # a JSON patch
            data.append({"op": "add", "path": "/metadata/resourceVersion", "value": version})
            if any(op.get("path", "").startswith("/spec") for op in data):
                data.append({"op": "add", "path": "/metadata/generation", "value": generation + 1})


def declare_crds(emulator: kmock.KubernetesEmulator, crds_yaml: Path = CRDS) -> list[str]:
    """Discovery entries (which list and discovery need) for every served version of every CRD in the file."""
    declared = []
    for crd in yaml.safe_load_all(crds_yaml.read_text()):
        if not crd or crd.get("kind") != "CustomResourceDefinition":
            continue
        spec, names = crd["spec"], crd["spec"]["names"]
        for version in spec["versions"]:
            key = f"{spec['group']}/{version['name']}/{names['plural']}"
            emulator.resources[key] = kmock.ResourceInfo(
                kind=names["kind"], singular=names.get("singular"), namespaced=spec["scope"] == "Namespaced",
                shortnames=names.get("shortNames", []), categories=names.get("categories", []),
                verbs=["get", "list", "watch", "create", "update", "patch", "delete"],
                subresources=list(version.get("subresources", {})))
            declared.append(key)
    return declared


@contextlib.asynccontextmanager
async def kube_emulator() -> AsyncIterator[KubeEmulator]:
    """The emulator serving on a random 127.0.0.1 port of the running loop (its URL: `.url`), knowing the
    builtin resources (kmock's bundled discovery) and Odradek's CRDs."""
    async with KubeEmulator() as emulator, kmock.Server(emulator):
        emulator.resources.load_bundled()
        declare_crds(emulator)
        yield emulator
