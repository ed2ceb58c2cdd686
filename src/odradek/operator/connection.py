"""How the operator reaches a cluster it runs: the REPLICATION listener of its brokers, addressed by the Pods'
DNS names, over mutual TLS with the operator's certificate from the cluster CA (a super user), as
librdkafka-named client properties (the admin client, the balancer's admin and Odradek's own protocol client all
take them). The certificate and key are files only the operator's user reads: every client takes those.

Tests run every node on one machine and give the operator an AddressMap from a Pod's address to where it
listens there; in a real cluster the DNS names resolve and no map is given.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from odradek.operator.certificates import CA_CERT, OPERATOR_CERT, OPERATOR_KEY
from odradek.operator.cluster_spec import REPLICATION_PORT, ClusterSpec
from odradek.operator.render import node_address, nodes

# (host, port) of a Pod's listener -> (host, port) to connect to
AddressMap = Callable[[str, int], tuple[str, int]]


def admin_properties(spec: ClusterSpec, node_ids: Mapping[str, list[int]], namespace: str,
                     tls: Mapping[str, str], address_map: AddressMap | None = None) -> dict[str, str]:
    """Client properties reaching the cluster's brokers on the REPLICATION listener; `tls` from operator_tls."""
    addresses = [(node_address(spec.name, namespace, node.name), REPLICATION_PORT)
                 for node in nodes(spec, node_ids) if node.pool.is_broker]
    properties = {"client.id": "odradek-operator", **tls}
    if address_map is not None:
        addresses = [address_map(*address) for address in addresses]
        # the nodes' certificates name their DNS names, not the addresses they are reached at here
        properties["ssl.endpoint.identification.algorithm"] = "none"
    return properties | {"bootstrap.servers": ",".join(f"{host}:{port}" for host, port in addresses)}


def operator_tls(namespace: str, cluster: str, secret_data: Mapping[str, str]) -> dict[str, str]:
    """The TLS client properties of the operator's certificate (its Secret's data, base64), written to files in
    a directory of this process's own, readable by its user only (rewritten only when they change)."""
    directory = _private_directory() / namespace / cluster
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = {}
    for key, setting in ((CA_CERT, "ssl.ca.location"), (OPERATOR_CERT, "ssl.certificate.location"),
                         (OPERATOR_KEY, "ssl.key.location")):
        path = directory / key
        content = base64.b64decode(secret_data[key])
        if not path.exists() or path.read_bytes() != content:
            partial = directory / f".{key}.partial"
            with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
                out.write(content)
            partial.replace(path)  # a client reading it meanwhile sees the old file or the new, never half
        files[setting] = str(path)
    return {"security.protocol": "ssl", **files}


@functools.cache
def _private_directory() -> Path:
    """Made once per process (mode 0700): two operators on one machine (tests) never share key files."""
    return Path(tempfile.mkdtemp(prefix="odradek-operator-"))


async def balancer_call(properties: Mapping[str, str], method: str, *args, **kwargs):
    """A BalancerAdmin call (which blocks) off the event loop."""
    from odradek.balancer.admin import BalancerAdmin

    def call():
        admin = BalancerAdmin(properties)
        try:
            return getattr(admin, method)(*args, **kwargs)
        finally:
            admin.close()

    return await asyncio.to_thread(call)
