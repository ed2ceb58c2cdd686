"""`odradek operator write-rack`, the rack init container: a Kubernetes node's label, read through the (emulated)
API, written to the file the broker's directory config provider reads; a node without the label fails it."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from odradek.cli.main import main
from odradek.config import BrokerConfig, parse_properties
from odradek.config_providers import ConfigProviders, LocalFiles
from odradek.operator.cluster_spec import assign_node_ids, parse_cluster
from odradek.operator.rack import NODES, RackError, rack_of
from odradek.operator.render import INIT_DIR, RACK_FILE, render
from tests.operator.kube_emulator import kube_emulator
from tests.operator.test_render import CLUSTER_ID, DEDICATED, NAMESPACE, of_kind

pytestmark = pytest.mark.filterwarnings("ignore:read_binary is deprecated:DeprecationWarning")  # in kmock 0.8
ZONE = "topology.kubernetes.io/zone"


def kubernetes_node(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


async def create_node(server: str, node: dict) -> None:
    async with aiohttp.ClientSession() as session, session.post(server + NODES.path(), json=node) as response:
        assert response.status < 300, await response.text()


def write_rack_command(server: str, node: str, output) -> list[str]:
    return ["operator", "write-rack", "--node", node, "--label", ZONE, "--output", str(output), "--server", server]


def test_the_rack_is_the_nodes_label_written_to_the_file(tmp_path, capsys):
    output = tmp_path / RACK_FILE

    async def test() -> None:
        async with kube_emulator() as emulator:
            server = str(emulator.url).rstrip("/")
            await create_node(server, kubernetes_node("worker-1", {ZONE: "eu-west-1a", "kubernetes.io/os": "linux"}))
            # the command runs its own event loop, as in the init container; the emulator serves on this one
            assert await asyncio.to_thread(main, write_rack_command(server, "worker-1", output)) == 0

    asyncio.run(asyncio.wait_for(test(), 60))
    assert output.read_text() == "eu-west-1a"  # no newline: the directory provider takes the content as it is
    assert "rack eu-west-1a" in capsys.readouterr().out
    assert [path.name for path in tmp_path.iterdir()] == [RACK_FILE]  # no temporary file left behind


def test_a_node_without_the_label_or_no_node_is_a_one_line_error(tmp_path, capsys):
    output = tmp_path / RACK_FILE

    async def test() -> None:
        async with kube_emulator() as emulator:
            server = str(emulator.url).rstrip("/")
            await create_node(server, kubernetes_node("worker-2", {"kubernetes.io/os": "linux"}))
            assert await asyncio.to_thread(main, write_rack_command(server, "worker-2", output)) == 1
            assert capsys.readouterr().err == \
                f"error: Kubernetes node worker-2 has no label {ZONE}: it gives the broker's rack\n"
            assert await asyncio.to_thread(main, write_rack_command(server, "worker-9", output)) == 1
            error = capsys.readouterr().err
            assert error.startswith("error: HTTP 404") and error.count("\n") == 1

    asyncio.run(asyncio.wait_for(test(), 60))
    assert not output.exists()


def test_rack_of_reads_only_the_label_asked_for():
    node = kubernetes_node("n", {ZONE: "a", "topology.kubernetes.io/region": "r"})
    assert rack_of(node, ZONE) == "a"
    with pytest.raises(RackError, match="^Kubernetes node n has no label other: it gives the broker's rack$"):
        rack_of(node, "other")


def test_a_rendered_brokers_rack_resolves_from_the_file_the_init_container_writes(tmp_path):
    """The rendered server.properties, with its init directory here: broker.rack is the file's content."""
    spec = parse_cluster(DEDICATED)
    objects = render(spec, assign_node_ids(spec, {}), CLUSTER_ID, NAMESPACE)
    text = of_kind(objects, "ConfigMap")["big-east-3-config"]["data"]["server.properties"]
    (tmp_path / RACK_FILE).write_text("eu-west-1c")
    props = {key: value.replace(INIT_DIR, str(tmp_path)) for key, value in parse_properties(text).items()}
    resolved, warnings = ConfigProviders(props, LocalFiles(), {}).resolve(props)
    config = BrokerConfig(resolved | {"log.dirs": str(tmp_path / "data")})
    assert config["broker.rack"] == "eu-west-1c" and not warnings
