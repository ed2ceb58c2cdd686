"""A broker's rack from the Kubernetes node its Pod runs on, as Strimzi does it: the Pod's `rack` init container
(`odradek operator write-rack`) reads the node's label spec.rack.topologyKey through the API and writes its value
to a file in an emptyDir, which the broker's server.properties reads with
`broker.rack=${dir:<that dir>:rack.id}` (config_providers.py). A node without the label stops the Pod there,
as Strimzi's init container does: a broker with a wrong rack would place replicas badly without saying so.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

from odradek.operator.kube import NODES, Connection, Kube


class RackError(Exception):
    """The node has no such label; the message is one line naming both."""


def rack_of(node: Mapping, label: str) -> str:
    """The value of the Kubernetes node's label `label`; a RackError when it has none."""
    labels = node.get("metadata", {}).get("labels") or {}
    if label not in labels:
        name = node.get("metadata", {}).get("name")
        raise RackError(f"Kubernetes node {name} has no label {label}: it gives the broker's rack")
    return labels[label]


async def read_rack(connection: Connection, node_name: str, label: str) -> str:
    async with Kube(connection) as kube:
        return rack_of(await kube.get(NODES, None, node_name), label)


def write_atomically(path: str, text: str) -> None:
    """Write the file through a temporary one in its directory and a rename: a reader sees all of it or none."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".rack-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from a node running as another user
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


async def write_rack(connection: Connection, node_name: str, label: str, output: str) -> str:
    """Read the node's rack and write it (without a newline: the directory provider takes a file's content as it
    is) to `output`; the rack written."""
    rack = await read_rack(connection, node_name, label)
    write_atomically(output, rack)
    return rack
