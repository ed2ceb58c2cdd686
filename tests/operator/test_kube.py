"""The operator's Kubernetes client against the emulated API: its paths, errors and connection settings."""

from __future__ import annotations

import asyncio
import contextlib

import kmock
import pytest

from odradek.cli.main import main
from odradek.operator.kube import (
    CLUSTERS,
    CONFIG_MAPS,
    DISRUPTION_BUDGETS,
    PODS,
    AlreadyExists,
    Connection,
    Kube,
    KubeError,
)
from tests.operator.kube_emulator import kube_emulator

NS = "odradek-test"
pytestmark = pytest.mark.filterwarnings("ignore:read_binary is deprecated:DeprecationWarning")  # in kmock 0.8


def config_map(name: str, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"},
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}}}


def test_resource_paths():
    assert PODS.path(NS) == f"/api/v1/namespaces/{NS}/pods"
    assert PODS.path(NS, "p", "status") == f"/api/v1/namespaces/{NS}/pods/p/status"
    assert DISRUPTION_BUDGETS.path(NS, "b") == f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/b"
    assert CLUSTERS.path(NS, "c", "status") == f"/apis/odradek.io/v1beta1/namespaces/{NS}/odradekclusters/c/status"


def test_create_get_list_patch_delete_and_their_errors():
    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            created = await kube.create(config_map("one", {"odradek.io/cluster": "c"}))
            assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
            with pytest.raises(AlreadyExists) as exists:
                await kube.create(config_map("one"))
            assert exists.value.status == 409
            await kube.create(config_map("two"))

            # labels are matched here too: the emulator, like some servers, ignores labelSelector
            assert [c["metadata"]["name"] for c in await kube.list(CONFIG_MAPS, NS, {"odradek.io/cluster": "c"})] \
                == ["one"]
            assert len(await kube.list(CONFIG_MAPS, NS)) == 2

            await kube.merge_patch(CONFIG_MAPS, NS, "one", {"data": {"a": None, "b": "2"}})
            assert (await kube.get(CONFIG_MAPS, NS, "one"))["data"] == {"b": "2"}

            assert await kube.delete(CONFIG_MAPS, NS, "one") is True
            assert await kube.delete(CONFIG_MAPS, NS, "one") is False  # already gone: fine
            with pytest.raises(KubeError) as missing:
                await kube.get(CONFIG_MAPS, NS, "one")
            assert missing.value.status == 404 and "HTTP 404" in str(missing.value)

    asyncio.run(test())


def test_watch_sends_the_current_objects_then_changes():
    async def test() -> None:
        async with kube_emulator() as emulator, Kube(Connection(server=str(emulator.url))) as kube:
            await kube.create(config_map("before"))
            async with contextlib.aclosing(kube.watch(CONFIG_MAPS, NS)) as events:
                assert (await anext(events))[0] == "ADDED"
                await kube.delete(CONFIG_MAPS, NS, "before")
                type_, obj = await anext(events)
                assert (type_, obj["metadata"]["name"]) == ("DELETED", "before")

    asyncio.run(asyncio.wait_for(test(), 30))


def test_in_cluster_connection_uses_the_service_account(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("secret-token\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    connection = Connection.in_cluster(str(tmp_path))
    assert connection == Connection(server="https://10.0.0.1:443", token_file=str(tmp_path / "token"),
                                    ca_file=str(tmp_path / "ca.crt"))

    async def test() -> None:
        async with kube_emulator() as emulator:
            # the emulator's URL, with the token: the bearer token is read from the file on each request
            async with Kube(Connection(server=str(emulator.url), token_file=connection.token_file)) as kube:
                await kube.list(PODS, NS)
            (request,) = list(emulator[kmock.action.LIST, kmock.resource("v1/pods")])
            assert request.headers["Authorization"] == "Bearer secret-token"

    asyncio.run(test())


def test_in_cluster_connection_outside_a_pod_is_an_error(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeError, match="KUBERNETES_SERVICE_HOST"):
        Connection.in_cluster()


def test_the_operator_command_needs_a_namespace_and_an_api_server(monkeypatch, capsys):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["operator"]) == 1
    assert "no namespace" in capsys.readouterr().err
    assert main(["operator", "--namespace", NS]) == 1
    assert "not in a Kubernetes pod" in capsys.readouterr().err
