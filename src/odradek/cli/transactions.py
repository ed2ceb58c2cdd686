"""`odradek transactions list|describe|describe-producers|abort`, like Kafka's kafka-transactions.sh.

`list` asks every broker for the transactions it coordinates (ListTransactions); `describe` asks the
transactional id's coordinator (FindCoordinator, DescribeTransactions); `describe-producers` asks a
partition's leader for its producers' state (DescribeProducers), which shows the start offset of each open
transaction; `abort` ends a hanging transaction, one left open on a partition that its coordinator no longer
knows about, by writing an abort marker there (DescribeProducers finds the producer whose transaction starts
at `--start-offset`, then WriteTxnMarkers).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from odradek.cli.main import CliError
from odradek.cli.output import print_json, print_table

FIND_COORDINATOR, WRITE_TXN_MARKERS = 10, 27
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, METADATA = 61, 65, 66, 3
TRANSACTION_KEY_TYPE = 1


class _Cluster:
    """Raw requests to named brokers, found through the bootstrap server's Metadata."""

    def __init__(self, args: argparse.Namespace):
        self.bootstrap = args.bootstrap_server.split(",")[0]
        self.timeout = args.timeout
        self.connections: dict = {}

    async def request(self, address: tuple[str, int], api_key: int, version: int, body: dict) -> dict:
        from odradek.network.client import NodeConnection

        connection = self.connections.get(address)
        if connection is None:
            connection = self.connections[address] = NodeConnection(*address, client_id="odradek-cli")
        try:
            return await connection.request(api_key, version, body, self.timeout)
        except (OSError, TimeoutError) as exc:
            raise CliError(f"cannot reach broker {address[0]}:{address[1]}: {exc or type(exc).__name__}") from None

    async def metadata(self, topics: list[str] | None = None) -> dict:
        host, port = self.bootstrap.rsplit(":", 1)
        body = {"topics": None if topics is None else [{"name": t, "topic_id": bytes(16)} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        return await self.request((host, int(port)), METADATA, 12, body)

    @staticmethod
    def address(metadata: dict, node_id: int) -> tuple[str, int]:
        for broker in metadata["brokers"]:
            if broker["node_id"] == node_id:
                return broker["host"], broker["port"]
        raise CliError(f"broker {node_id} is not in the cluster's metadata")

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


def _run(args: argparse.Namespace, work):
    cluster = _Cluster(args)

    async def go():
        try:
            return await work(cluster)
        finally:
            cluster.close()

    return asyncio.run(go())


def _error_name(code: int) -> str:
    from odradek.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def list_transactions(args: argparse.Namespace) -> int:
    async def work(cluster: _Cluster) -> list[dict]:
        metadata = await cluster.metadata([])
        rows = []
        body = {"state_filters": args.state, "producer_id_filters": args.producer_id,
                "duration_filter": args.duration_ms if args.duration_ms is not None else -1}
        for broker in sorted(metadata["brokers"], key=lambda b: b["node_id"]):
            response = await cluster.request((broker["host"], broker["port"]), LIST_TRANSACTIONS, 1, body)
            if response["error_code"]:
                raise CliError(f"broker {broker['node_id']} cannot list transactions: "
                               f"{_error_name(response['error_code'])}")
            rows += [{"transactional_id": t["transactional_id"], "coordinator": broker["node_id"],
                      "producer_id": t["producer_id"], "state": t["transaction_state"]}
                     for t in response["transaction_states"]]
        return sorted(rows, key=lambda r: r["transactional_id"])

    rows = _run(args, work)
    if args.output == "json":
        print_json(rows)
    else:
        print_table(["TRANSACTIONAL_ID", "COORDINATOR", "PRODUCER_ID", "STATE"],
                    [(r["transactional_id"], r["coordinator"], r["producer_id"], r["state"]) for r in rows])
    return 0


def describe_transaction(args: argparse.Namespace) -> int:
    async def work(cluster: _Cluster) -> dict:
        metadata = await cluster.metadata([])
        host, port = cluster.bootstrap.rsplit(":", 1)
        found = await cluster.request((host, int(port)), FIND_COORDINATOR, 4, {
            "key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [args.transactional_id]})
        coordinator = found["coordinators"][0]
        if coordinator["error_code"]:
            raise CliError(f"cannot find the coordinator of {args.transactional_id!r}: "
                           f"{_error_name(coordinator['error_code'])}")
        address = cluster.address(metadata, coordinator["node_id"])
        response = await cluster.request(address, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [args.transactional_id]})
        state = response["transaction_states"][0]
        if state["error_code"]:
            raise CliError(f"cannot describe {args.transactional_id!r}: {_error_name(state['error_code'])}")
        start = state["transaction_start_time_ms"]
        return {"coordinator": coordinator["node_id"], "transactional_id": state["transactional_id"],
                "producer_id": state["producer_id"], "producer_epoch": state["producer_epoch"],
                "state": state["transaction_state"], "timeout_ms": state["transaction_timeout_ms"],
                "start_time_ms": start if start >= 0 else None,
                "duration_ms": int(time.time() * 1000) - start if start >= 0 else None,
                "partitions": [f"{t['topic']}-{p}" for t in state["topics"] for p in t["partitions"]]}

    info = _run(args, work)
    if args.output == "json":
        print_json(info)
    else:
        print_table(["COORDINATOR", "TRANSACTIONAL_ID", "PRODUCER_ID", "EPOCH", "STATE", "TIMEOUT_MS", "START_TIME_MS",
                     "DURATION_MS", "PARTITIONS"],
                    [(info["coordinator"], info["transactional_id"], info["producer_id"], info["producer_epoch"],
                      info["state"], info["timeout_ms"], info["start_time_ms"], info["duration_ms"],
                      ",".join(info["partitions"]))])
    return 0


async def _producers(cluster: _Cluster, topic: str, partition: int) -> tuple[tuple[str, int], list[dict]]:
    """(leader address, active producers) of one partition."""
    metadata = await cluster.metadata([topic])
    topics = [t for t in metadata["topics"] if t["name"] == topic]
    if not topics or topics[0]["error_code"]:
        raise CliError(f"unknown topic {topic!r}")
    leaders = {p["partition_index"]: p["leader_id"] for p in topics[0]["partitions"]}
    if partition not in leaders:
        raise CliError(f"topic {topic!r} has no partition {partition}")
    if leaders[partition] < 0:
        raise CliError(f"partition {topic}-{partition} has no leader")
    address = cluster.address(metadata, leaders[partition])
    response = await cluster.request(address, DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic, "partition_indexes": [partition]}]})
    answer = response["topics"][0]["partitions"][0]
    if answer["error_code"]:
        raise CliError(f"cannot describe the producers of {topic}-{partition}: {_error_name(answer['error_code'])}")
    return address, answer["active_producers"]


def describe_producers(args: argparse.Namespace) -> int:
    _, producers = _run(args, lambda cluster: _producers(cluster, args.topic, args.partition))
    rows = [{"producer_id": p["producer_id"], "epoch": p["producer_epoch"], "last_sequence": p["last_sequence"],
             "last_timestamp": p["last_timestamp"], "coordinator_epoch": p["coordinator_epoch"],
             "txn_start_offset": p["current_txn_start_offset"] if p["current_txn_start_offset"] >= 0 else None}
            for p in producers]
    if args.output == "json":
        print_json(rows)
    else:
        print_table(["PRODUCER_ID", "EPOCH", "LAST_SEQUENCE", "LAST_TIMESTAMP", "COORDINATOR_EPOCH", "TXN_START_OFFSET"],
                    [tuple(r.values()) for r in rows])
    return 0


def abort_transaction(args: argparse.Namespace) -> int:
    async def work(cluster: _Cluster) -> dict:
        address, producers = await _producers(cluster, args.topic, args.partition)
        matching = [p for p in producers if p["current_txn_start_offset"] == args.start_offset]
        if not matching:
            raise CliError(f"no open transaction starts at offset {args.start_offset} of "
                           f"{args.topic}-{args.partition}")
        producer = matching[0]
        response = await cluster.request(address, WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"],
            "transaction_result": False, "coordinator_epoch": producer["coordinator_epoch"],
            "topics": [{"name": args.topic, "partition_indexes": [args.partition]}]}]})
        code = response["markers"][0]["topics"][0]["partitions"][0]["error_code"]
        if code:
            raise CliError(f"cannot abort the transaction at {args.topic}-{args.partition}@{args.start_offset}: "
                           f"{_error_name(code)}")
        return producer

    producer = _run(args, work)
    print(f"Aborted the transaction of producer {producer['producer_id']} (epoch {producer['producer_epoch']}) "
          f"starting at offset {args.start_offset} of {args.topic}-{args.partition}")
    return 0
