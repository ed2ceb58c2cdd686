"""`odradek dev-cluster`: a local cluster of node processes, for development and tests.

Node N (from 1) gets node.id N, a data dir DIR/node-N, a client listener on base+2(N-1), a controller
listener on the port after it, its metrics.listener (Prometheus /metrics and the web console) on its
client port + 1000, and its schema.registry.listener on its client port + 2000. The first --nodes nodes are voters of the metadata quorum and brokers
(KRaft's combined mode); --broker-only more nodes are brokers only, following the quorum as observers.
The cluster id is kept in DIR/cluster.id, so a restart of the command brings back the same cluster.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from odradek.cli.main import CliError

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
METRICS_PORT_OFFSET = 1000  # node N's metrics port: its client port + this
REGISTRY_PORT_OFFSET = 2000  # node N's schema registry port: its client port + this
PER_NODE_PORTS = {"metrics.listener": METRICS_PORT_OFFSET, "schema.registry.listener": REGISTRY_PORT_OFFSET}


def node_settings(node_id: int, voters: int, directory: Path, base_port: int) -> dict[str, str]:
    quorum = ",".join(f"{n}@127.0.0.1:{base_port + 2 * (n - 1) + 1}" for n in range(1, voters + 1))
    port = base_port + 2 * (node_id - 1)
    common = {"controller.quorum.voters": quorum, "log.dirs": str(directory / f"node-{node_id}"),
              **{name: f"http://127.0.0.1:{port + offset}" for name, offset in PER_NODE_PORTS.items()}}
    if node_id > voters:
        return {"node.id": str(node_id), "process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                **common}
    return {"node.id": str(node_id), "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}",
            **common}


def run(args: argparse.Namespace) -> int:
    from odradek.broker.node import format_storage, new_cluster_id, read_meta_properties
    from odradek.config import BrokerConfig, ConfigError, parse_overrides

    try:
        extra = parse_overrides(args.overrides)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    for name, offset in PER_NODE_PORTS.items():
        if extra.get(name):  # one value for every node would be one port for all of them
            raise CliError(f"--set {name}={extra[name]}: each node has its own, on its client port + {offset}; "
                           f"--set {name}= turns them off")
    directory = Path(args.dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    id_file = directory / "cluster.id"
    cluster_id = id_file.read_text().strip() if id_file.exists() else new_cluster_id()
    id_file.write_text(cluster_id + "\n")
    try:
        settings = [{**node_settings(n, args.nodes, directory, args.base_port), **extra}
                    for n in range(1, args.nodes + args.broker_only + 1)]
        for node in settings:
            config = BrokerConfig(node)
            if read_meta_properties(config.log_dirs[0]) is None:
                format_storage(config, cluster_id)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    processes = []
    stopping = False

    def stop(signum=None, frame=None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for node in settings:
            command = [sys.executable, "-m", "odradek", "server"]
            for key, value in node.items():
                command += ["--set", f"{key}={value}"]
            with open(directory / f"node-{node['node.id']}.log", "ab") as log_file:
                processes.append(subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT))
        ports = [int(node["listeners"].split(",")[0].rsplit(":", 1)[1]) for node in settings]
        _wait_until_listening(processes, ports, directory, lambda: stopping)
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)
        print(f"Cluster {cluster_id}: {len(settings)} nodes ({args.nodes} of them controllers), data in {directory}")
        for node, port in zip(settings, ports, strict=True):
            metrics = f", metrics {node['metrics.listener']}/metrics" if node["metrics.listener"] else ""
            registry = f", schema registry {node['schema.registry.listener']}" if node["schema.registry.listener"] else ""
            print(f"Node {node['node.id']}: 127.0.0.1:{port}{metrics}{registry}")
        print(f"Bootstrap servers: {bootstrap}", flush=True)
        reported: set[int] = set()
        while not stopping and any(p.poll() is None for p in processes):
            for i, process in enumerate(processes):
                if process.poll() is not None and i not in reported:  # killed on purpose, perhaps: keep going
                    reported.add(i)
                    print(f"node {i + 1} exited with status {process.returncode}; the others keep running",
                          file=sys.stderr, flush=True)
            time.sleep(0.2)
        return 0 if stopping else 1
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()


def _wait_until_listening(processes: list, ports: list[int], directory: Path, stopping) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = set(range(len(ports)))
    while waiting:
        if stopping():
            raise KeyboardInterrupt
        for i in list(waiting):
            if processes[i].poll() is not None:
                raise CliError(f"node {i + 1} exited with status {processes[i].returncode}; see "
                               f"{directory}/node-{i + 1}.log")
            try:
                with socket.create_connection(("127.0.0.1", ports[i]), timeout=0.2):
                    waiting.discard(i)
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise CliError(f"node(s) {sorted(i + 1 for i in waiting)} did not start within {START_TIMEOUT_S:g} s; "
                           f"see {directory}/node-N.log")
        time.sleep(0.1)
