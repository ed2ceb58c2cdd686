"""Fault injection for cluster tests: per-node TCP proxies that can cut links between nodes, a cluster wired
through them, and a seeded nemesis that kills, freezes and isolates nodes and heals them again.

Node-to-node traffic goes through proxies; the test's clients connect to the nodes' PLAINTEXT listeners
directly. Every node j has one proxy in front of its REPLICATION listener (advertised to the other brokers, so
follower fetches go through it) and one in front of its CONTROLLER listener (every node's
controller.quorum.voters names the proxies, so Raft traffic and broker-to-controller requests go through it).

A proxy knows who is connecting from the Kafka client_id of the first request on a connection: nodes name
their connections "odradek-raft-{id}", "odradek-raft-fetch-{id}", "odradek-broker-{id}" and
"odradek-replica-fetcher-{id}". The pair (source id, j) is then the link the connection belongs to. Cutting a
pair closes the connections in both directions at once and refuses new ones (closed right after their first
request) until the pair is healed.

The proxies run on their own event loop in a background thread, so the test's synchronous clients are not
affected; `ProxyNetwork.cut`/`heal` are called from any thread and return once the change is in effect.
"""

import asyncio
import itertools
import os
import random
import re
import signal
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import FAST_CLUSTER_SETTINGS, NodeProcess, free_port
from tests.e2e.raw_client import RawClient

SOURCE_CLIENT_ID = re.compile(r"^odradek-(?:raft-fetch|raft|broker|replica-fetcher)-(\d+)$")
MAX_FIRST_FRAME = 100 * 1024 * 1024


def client_id_of(frame: bytes) -> str | None:
    """The client_id of a request frame (without its size prefix): api_key, api_version and correlation_id,
    then a nullable int16-length string. None when the frame is too short or has no client_id."""
    if len(frame) < 10:
        return None
    (length,) = struct.unpack_from(">h", frame, 8)
    if length < 0 or 10 + length > len(frame):
        return None
    return frame[10:10 + length].decode("utf-8", "replace")


def source_node(frame: bytes) -> int | None:
    """The node id that opened a connection, from the client_id of its first request; None for other clients."""
    match = SOURCE_CLIENT_ID.match(client_id_of(frame) or "")
    return int(match.group(1)) if match else None


def link(a: int, b: int) -> frozenset[int]:
    return frozenset((a, b))


@dataclass(eq=False)
class _Connection:
    source: int | None
    owner: int
    sides: list[asyncio.StreamWriter]

    def abort(self) -> None:
        for writer in self.sides:
            writer.transport.abort()


class ProxyNetwork:
    """TCP proxies, each owned by one node, and the set of cut node pairs."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="nemesis-proxies", daemon=True)
        self._servers: list[asyncio.Server] = []
        self._cut: set[frozenset[int]] = set()
        self._connections: set[_Connection] = set()
        self.refused = 0  # connections closed because their link was cut
        self.severed = 0  # open connections closed by a cut
        self.unknown_sources: set[str | None] = set()  # client ids the proxies forwarded without a node id
        self._thread.start()

    def _call(self, function: Callable, *args):
        async def run():
            return function(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def add_proxy(self, owner: int, target_port: int, port: int = 0) -> int:
        """Listen on 127.0.0.1:port (0: any free port) in front of owner's 127.0.0.1:target_port; the port."""
        async def start() -> int:
            server = await asyncio.start_server(
                lambda reader, writer: self._serve(owner, target_port, reader, writer), "127.0.0.1", port)
            self._servers.append(server)
            return server.sockets[0].getsockname()[1]
        return asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def cut(self, a: int, b: int) -> None:
        """Cut the link between nodes a and b: close their connections both ways, refuse new ones."""
        self._call(self._cut_now, link(a, b))

    def heal(self, a: int, b: int) -> None:
        self._call(self._cut.discard, link(a, b))

    def heal_all(self) -> None:
        self._call(self._cut.clear)

    def cut_links(self) -> set[frozenset[int]]:
        return set(self._call(set, self._cut))

    def close(self) -> None:
        async def stop():
            for server in self._servers:
                server.close()
            for connection in list(self._connections):
                connection.abort()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()

    def _is_cut(self, source: int | None, owner: int) -> bool:
        return source is not None and link(source, owner) in self._cut

    def _cut_now(self, pair: frozenset[int]) -> None:
        self._cut.add(pair)
        for connection in list(self._connections):
            if connection.source is not None and link(connection.source, connection.owner) == pair:
                self.severed += 1
                connection.abort()

    async def _serve(self, owner: int, target_port: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        connection = _Connection(None, owner, [writer])
        try:
            head = await reader.readexactly(4)
            (size,) = struct.unpack(">i", head)
            if not 0 < size <= MAX_FIRST_FRAME:
                return
            frame = await reader.readexactly(size)
            connection.source = source_node(frame)
            if connection.source is None:
                self.unknown_sources.add(client_id_of(frame))
            if self._is_cut(connection.source, owner):
                self.refused += 1
                return
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target_port)
            connection.sides.append(upstream_writer)
            if self._is_cut(connection.source, owner):  # cut while connecting
                self.refused += 1
                return
            self._connections.add(connection)
            upstream_writer.write(head + frame)
            pipes = [asyncio.ensure_future(self._pipe(reader, upstream_writer)),
                     asyncio.ensure_future(self._pipe(upstream_reader, writer))]
            _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(connection)
            connection.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass


class ProxiedCluster:
    """Nodes 1..count that are all voters of one metadata quorum, whose node-to-node traffic goes through a
    ProxyNetwork; formatted with one cluster id, like conftest's Cluster."""

    def __init__(self, directory: Path, count: int, network: ProxyNetwork, settings: dict[str, str] | None = None):
        from odradek.broker.node import format_storage, new_cluster_id
        from odradek.config import BrokerConfig

        self.network = network
        self.cluster_id = new_cluster_id()
        ids = range(1, count + 1)
        ports = {i: {"client": free_port(), "replication": free_port(), "controller": free_port()} for i in ids}
        for i in ids:
            ports[i]["replication proxy"] = network.add_proxy(i, ports[i]["replication"])
            ports[i]["controller proxy"] = network.add_proxy(i, ports[i]["controller"])
        self.ports = ports
        voters = ",".join(f"{i}@127.0.0.1:{ports[i]['controller proxy']}" for i in ids)
        self.nodes: list[NodeProcess] = []
        for i in ids:
            p = ports[i]
            node_settings = {
                "node.id": str(i),
                "listeners": f"PLAINTEXT://127.0.0.1:{p['client']},REPLICATION://127.0.0.1:{p['replication']},"
                             f"CONTROLLER://127.0.0.1:{p['controller']}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p['client']},"
                                        f"REPLICATION://127.0.0.1:{p['replication proxy']}",
                "inter.broker.listener.name": "REPLICATION",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                **FAST_CLUSTER_SETTINGS, **(settings or {}),
            }
            node = NodeProcess(directory / f"node-{i}", port=p["client"], settings=node_settings)
            format_storage(BrokerConfig({**node_settings, "log.dirs": str(node.data_dir)}), self.cluster_id)
            self.nodes.append(node)

    @property
    def ids(self) -> list[int]:
        return list(range(1, len(self.nodes) + 1))

    def node(self, node_id: int) -> NodeProcess:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def client_settings(self, settings: dict | None = None, bootstrap: str | None = None) -> dict:
        """confluent-kafka settings, as conftest's Cluster.client_settings gives them; clients need no security here."""
        return {"bootstrap.servers": bootstrap or self.bootstrap, **(settings or {})}

    def start(self, timeout: float = 60.0) -> "ProxiedCluster":
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            node.wait_listening(timeout)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                os.kill(node.proc.pid, signal.SIGCONT)
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop()

    def log_excerpt(self, pattern: str = r"WARNING|ERROR|CRITICAL|Traceback|Error|Truncat|Leading [^_]|ISR of [^_]",
                    lines: int = 40) -> str:
        """The last `lines` log lines of each node that match `pattern`, for failure messages."""
        parts = []
        for node_id, node in zip(self.ids, self.nodes, strict=True):
            matching = [line for line in node.log_text().splitlines() if re.search(pattern, line)]
            parts.append(f"--- node {node_id} ({node.log_path}), last {min(lines, len(matching))} of "
                         f"{len(matching)} lines matching {pattern!r}:")
            parts += matching[-lines:]
        return "\n".join(parts)


def partition_view(node: NodeProcess, topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    """partition -> (leader, leader epoch, sorted ISR) as this one node's Metadata answer has it."""
    with RawClient(node.bootstrap, timeout=5) as client:
        response = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": topic}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    (found,) = response["topics"]
    return {p["partition_index"]: (p["leader_id"], p["leader_epoch"], tuple(sorted(p["isr_nodes"])))
            for p in found["partitions"] if p["error_code"] == 0}


def in_sync_everywhere(nodes: list[NodeProcess], topic: str, partitions: int, replicas: int) -> dict | None:
    """The partitions' (leader, epoch, ISR) when every node answers Metadata with the same ones, each with a
    leader and `replicas` in-sync replicas; else None. One node's answer may be stale: a node that was just
    frozen or cut off still believes what it last heard."""
    try:
        views = [partition_view(node, topic) for node in nodes]
    except OSError:
        return None
    first = views[0]
    if len(first) != partitions or any(view != first for view in views[1:]):
        return None
    return first if all(leader >= 0 and len(isr) == replicas for leader, _, isr in first.values()) else None


FAULT_KINDS = ("kill", "pause", "isolate", "cut pair")


# A fault's target: a node id, or a role resolved when the fault starts ("leader 2": the leader of partition
# 2 of the test's topic; "controller": the active controller), so that faults hit the nodes that matter.
Target = int | str


@dataclass(frozen=True)
class Fault:
    kind: str  # one of FAULT_KINDS
    nodes: tuple[Target, ...]  # the node (kill, pause, isolate) or the pair (cut pair)
    duration_s: float  # how long the fault lasts before it is healed
    gap_s: float  # how long all stays healthy before the next fault

    def __str__(self) -> str:
        names = [f"node {n}" if isinstance(n, int) else f"the {n.replace('leader ', 'leader of partition ')}"
                 for n in self.nodes]
        what = f"cut {names[0]} from {names[1]}" if self.kind == "cut pair" else f"{self.kind} {names[0]}"
        return f"{what} for {self.duration_s:.1f}s, then {self.gap_s:.1f}s healthy"


def plan_faults(rng: random.Random, node_ids: list[int], total_s: float, partitions: int) -> list[Fault]:
    """A schedule of one-at-a-time faults whose planned durations add up to about total_s; the same for the
    same seed, however long each step really takes. Half the faults target a role (a partition's leader, the
    active controller) rather than a node id."""
    plan: list[Fault] = []
    elapsed = 0.0
    while elapsed < total_s:
        kind = rng.choice(FAULT_KINDS)
        role: Target = rng.choice([f"leader {rng.randrange(partitions)}", "controller"])
        if kind == "cut pair":
            nodes = tuple(sorted(rng.sample(node_ids, 2))) if rng.random() < 0.5 else (role, rng.choice(node_ids))
        else:
            nodes = (rng.choice(node_ids),) if rng.random() < 0.5 else (role,)
        duration = {"kill": rng.uniform(0.5, 3.0), "pause": rng.uniform(1.0, 4.0),
                    "isolate": rng.uniform(1.0, 5.0), "cut pair": rng.uniform(1.0, 5.0)}[kind]
        fault = Fault(kind, nodes, round(duration, 2), round(rng.uniform(1.0, 3.0), 2))
        plan.append(fault)
        elapsed += fault.duration_s + fault.gap_s
    return plan


@dataclass
class Nemesis:
    """Runs a fault plan against a ProxiedCluster from a thread, logging what it did and when."""

    cluster: ProxiedCluster
    plan: list[Fault]
    roles: Callable[[], dict[str, int]]  # role name -> node id now, e.g. {"leader 0": 2, "controller": 1}
    events: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # things that went wrong healing, e.g. a node that won't start
    stop_event: threading.Event = field(default_factory=threading.Event)
    _started: float = field(default_factory=time.monotonic)
    _paused: set[int] = field(default_factory=set)

    def log(self, message: str) -> None:
        self.events.append(f"{time.monotonic() - self._started:7.2f}s {message}")

    def run(self) -> None:
        self._started = time.monotonic()
        try:
            for number, fault in zip(itertools.count(1), self.plan):
                if self.stop_event.is_set():
                    break
                nodes = self._resolve(fault.nodes)
                self.log(f"fault {number}/{len(self.plan)}: {fault}: nodes {nodes}")
                if nodes is None:
                    continue
                self._inject(fault.kind, nodes)
                self.stop_event.wait(fault.duration_s)
                self._heal(fault.kind, nodes)
                self.stop_event.wait(fault.gap_s)
        except Exception as exc:  # the test reports it; the nodes must still be healed
            self.errors.append(f"nemesis failed: {exc!r}")
        finally:
            self.heal_all()
            self.log("done")

    def _resolve(self, targets: tuple[Target, ...]) -> tuple[int, ...] | None:
        """Node ids for the targets; None (the fault is skipped) when a role has no node or a pair collapses."""
        if all(isinstance(target, int) for target in targets):
            return targets
        try:
            roles = self.roles()
        except Exception as exc:  # a cluster that cannot answer right now: skip this fault
            self.log(f"cannot resolve {targets}: {exc!r}")
            return None
        nodes = tuple(target if isinstance(target, int) else roles.get(target, -1) for target in targets)
        if any(node not in self.cluster.ids for node in nodes) or len(set(nodes)) < len(nodes):
            return None
        return nodes

    def _inject(self, kind: str, nodes: tuple[int, ...]) -> None:
        network, node_id = self.cluster.network, nodes[0]
        if kind == "kill":
            self.cluster.node(node_id).kill()
        elif kind == "pause":
            os.kill(self.cluster.node(node_id).proc.pid, signal.SIGSTOP)
            self._paused.add(node_id)
        elif kind == "isolate":
            for other in self.cluster.ids:
                if other != node_id:
                    network.cut(node_id, other)
        elif kind == "cut pair":
            network.cut(*nodes)

    def _heal(self, kind: str, nodes: tuple[int, ...]) -> None:
        node_id = nodes[0]
        if kind == "kill":
            self._restart(node_id)
        elif kind == "pause":
            self._resume(node_id)
        else:
            self.cluster.network.heal_all()
        self.log(f"healed: {kind} {'-'.join(map(str, nodes))}")

    def _resume(self, node_id: int) -> None:
        node = self.cluster.node(node_id)
        if node.proc and node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGCONT)
        self._paused.discard(node_id)

    def _restart(self, node_id: int) -> None:
        node = self.cluster.node(node_id)
        if node.proc and node.proc.poll() is None:
            return
        if node.proc and node.proc.returncode not in (None, -signal.SIGKILL):
            self.errors.append(f"node {node_id} had exited by itself with {node.proc.returncode}")
        try:
            node.spawn().wait_listening(30)
        except RuntimeError as exc:
            self.errors.append(f"node {node_id} did not restart: {str(exc)[-2000:]}")

    def heal_all(self) -> None:
        """Network healed, every node running and not frozen."""
        self.cluster.network.heal_all()
        for node_id in list(self._paused):
            self._resume(node_id)
        for node_id in self.cluster.ids:
            self._restart(node_id)
