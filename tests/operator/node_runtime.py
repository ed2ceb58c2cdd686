"""Real Odradek nodes for the fake kubelet: each Pod the operator creates runs its own init containers and its
`odradek server`, from its own command, volumes and ConfigMap, on this machine.

One machine has one network: every Pod's ports are mapped to free local ports, and the Pod's configuration is
rewritten to match (listeners bind 127.0.0.1 on the mapped ports; advertised listeners and quorum voters name the
mapped ports of the Pods their DNS names point at). Volumes become directories: a ConfigMap's or Secret's files
are written afresh for each start, a claim's directory outlives its Pods as a PersistentVolume does. Nothing else
of the Pod is changed, so the tests run what the operator rendered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import sys
from pathlib import Path

from odradek.operator.image import NODE_COMMAND
from odradek.operator.kube import CONFIG_MAPS, SECRETS, Kube
from odradek.operator.render import CONFIG_KEY
from tests.conftest import free_port

READY_POLL_S = 0.1
INIT_TIMEOUT_S = 60.0
_ADDRESS_LISTS = ("listeners", "advertised.listeners")


class NodeRuntime:
    """`ports[(pod, container port)]`: the local port standing for it, given on first use and kept.
    `kubernetes_nodes[pod]`: the Kubernetes node a Pod "runs on" (its spec.nodeName for the downward API);
    `api_server`: the emulated API's URL, which `odradek operator` commands of init containers are pointed at
    (in a real Pod they find the API from the service account)."""

    def __init__(self, kube: Kube, namespace: str, base: Path, api_server: str | None = None) -> None:
        self.kube, self.namespace, self.base, self.api_server = kube, namespace, base, api_server
        self.ports: dict[tuple[str, int], int] = {}
        self.kubernetes_nodes: dict[str, str] = {}

    def local_port(self, pod: str, port: int) -> int:
        if (pod, port) not in self.ports:
            self.ports[pod, port] = free_port()
        return self.ports[pod, port]

    def local_address(self, host: str, port: int) -> tuple[str, int]:
        """Where a Pod's address (its DNS name, or its name) and port are reached here."""
        return "127.0.0.1", self.local_port(host.split(".")[0], port)

    def bootstrap(self, pods: list[str], port: int) -> str:
        return ",".join(f"127.0.0.1:{self.local_port(pod, port)}" for pod in pods)

    def log_path(self, pod: str) -> Path:
        return self.base / "pods" / pod / "node.log"

    async def start(self, pod: dict) -> asyncio.subprocess.Process:
        name = pod["metadata"]["name"]
        pod_dir = self.base / "pods" / name
        pod_dir.mkdir(parents=True, exist_ok=True)
        volumes = {volume["name"]: await self._volume(pod_dir, volume) for volume in pod["spec"]["volumes"]}
        container = pod["spec"]["containers"][0]
        for mount in container.get("volumeMounts", []):
            config = volumes[mount["name"]] / CONFIG_KEY
            if config.exists():
                config.write_text(self._localized(name, config.read_text(), _mounts(container, volumes)))
        with open(self.log_path(name), "ab") as log:
            for init in pod["spec"].get("initContainers", []):
                proc = await asyncio.create_subprocess_exec(
                    *self._command(pod, init, volumes), env=self._environment(pod, init),
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
                try:
                    async with asyncio.timeout(INIT_TIMEOUT_S):
                        code = await proc.wait()
                finally:
                    if proc.returncode is None:  # timed out, or the Pod went: no init process outlives it
                        proc.kill()
                        await proc.wait()
                if code:
                    raise RuntimeError(f"init container {init['name']} exited with {code}: see {self.log_path(name)}")
            return await asyncio.create_subprocess_exec(
                *self._command(pod, container, volumes), env=self._environment(pod, container),
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)

    def _environment(self, pod: dict, container: dict) -> dict[str, str]:
        """This process's environment with the container's variables: values, and the downward API's
        spec.nodeName."""
        env = dict(os.environ)
        for variable in container.get("env", []):
            if "value" in variable:
                env[variable["name"]] = variable["value"]
            elif (variable.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                env[variable["name"]] = self.kubernetes_nodes.get(pod["metadata"]["name"], "kube-node-0")
            else:
                raise ValueError(f"env {variable['name']}: not supported by the test kubelet")
        return env

    def _command(self, pod: dict, container: dict, volumes: dict[str, Path]) -> list[str]:
        env = self._environment(pod, container)
        command = [_expand(arg, env) for arg in _command(container, _mounts(container, volumes))]
        if command[3:5] == ["operator", "write-rack"] and self.api_server:
            command += ["--server", self.api_server]
        return command

    async def wait_ready(self, pod: dict, proc: asyncio.subprocess.Process) -> None:
        """The readiness probe: the probed port accepts connections (while the process lives)."""
        port = self.local_port(pod["metadata"]["name"], pod["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"])
        while proc.returncode is None:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return
            await asyncio.sleep(READY_POLL_S)
        raise RuntimeError(f"exited with {proc.returncode}")

    async def _volume(self, pod_dir: Path, volume: dict) -> Path:
        if "persistentVolumeClaim" in volume:
            path = self.base / "claims" / volume["persistentVolumeClaim"]["claimName"]
            path.mkdir(parents=True, exist_ok=True)
            return path
        path = pod_dir / "volumes" / volume["name"]
        if path.exists():
            shutil.rmtree(path)  # every volume but a claim is made afresh for each start
        path.mkdir(parents=True)
        if "emptyDir" in volume:
            return path
        if "configMap" in volume:
            source = volume["configMap"]
            data = (await self.kube.get(CONFIG_MAPS, self.namespace, source["name"])).get("data") or {}
            files = {key: text.encode() for key, text in data.items()}
        elif "secret" in volume:
            source = volume["secret"]
            data = (await self.kube.get(SECRETS, self.namespace, source["secretName"])).get("data") or {}
            files = {key: base64.b64decode(text) for key, text in data.items()}
        else:
            raise ValueError(f"volume {volume['name']}: kind not supported by the test kubelet")
        paths = {item["key"]: item["path"] for item in source.get("items", [])} or {key: key for key in files}
        for key, relative in paths.items():
            (path / relative).write_bytes(files[key])
        return path

    def _localized(self, pod: str, text: str, mounts: list[tuple[str, Path]]) -> str:
        """The Pod's server.properties as this machine runs it: addresses mapped, TLS names not checked (the
        nodes' certificates name their DNS names, which do not resolve here)."""
        lines = []
        tls = "ssl.keystore.location" in text
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if not sep or line.startswith("#"):
                lines.append(line)
                continue
            if key in _ADDRESS_LISTS:
                value = ",".join(self._listener(pod, entry) for entry in value.split(",") if entry)
            elif key == "controller.quorum.voters":
                value = ",".join(self._voter(entry) for entry in value.split(","))
            elif key == "metrics.listener":
                value = f"http://127.0.0.1:{self.local_port(pod, int(value.rsplit(':', 1)[1]))}"
            elif key.endswith("ssl.endpoint.identification.algorithm"):
                continue
            else:
                value = _local_paths(value, mounts)
            lines.append(f"{key}={value}")
        if tls:
            lines.append("ssl.endpoint.identification.algorithm=")
        return "\n".join(lines) + "\n"

    def _listener(self, pod: str, entry: str) -> str:
        name, _, address = entry.partition("://")
        host, _, port = address.rpartition(":")
        owner = host.split(".")[0] if host else pod
        return f"{name}://127.0.0.1:{self.local_port(owner, int(port))}"

    def _voter(self, entry: str) -> str:
        node_id, _, address = entry.partition("@")
        host, port = self.local_address(*_host_port(address))
        return f"{node_id}@{host}:{port}"


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _mounts(container: dict, volumes: dict[str, Path]) -> list[tuple[str, Path]]:
    """(mount path, local directory), longest mount path first so that nested mounts map right."""
    found = [(mount["mountPath"], volumes[mount["name"]]) for mount in container.get("volumeMounts", [])]
    return sorted(found, key=lambda pair: -len(pair[0]))


def _command(container: dict, mounts: list[tuple[str, Path]]) -> list[str]:
    """The container's command run here: `odradek` is this interpreter's package, paths under a mount are the
    volume's directory."""
    command = list(container["command"]) + list(container.get("args", []))
    if command[:1] == [NODE_COMMAND[0]]:
        command = [sys.executable, "-m", "odradek", *command[1:]]
    return [_local_path(arg, mounts) for arg in command]


def _expand(arg: str, env: dict[str, str]) -> str:
    """$(VAR) in a command, as the kubelet expands it."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


def _local_paths(value: str, mounts: list[tuple[str, Path]]) -> str:
    """Every mount path in a setting's value (a path, a list of them, or inside a ${provider:path:key}
    reference) as its local directory."""
    for mount_path, local in mounts:
        value = re.sub(r"(?<![\w/.])" + re.escape(mount_path.rstrip("/")) + r"(?=[/:,}]|$)", str(local), value)
    return value


def _local_path(arg: str, mounts: list[tuple[str, Path]]) -> str:
    for mount_path, local in mounts:
        if arg == mount_path or arg.startswith(mount_path.rstrip("/") + "/"):
            return str(local / arg[len(mount_path):].lstrip("/"))
    return arg
