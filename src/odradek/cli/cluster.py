"""`odradek cluster info|status`: cluster id, controller and brokers; the quorum and replication health."""

from __future__ import annotations

import argparse
from collections import Counter

from confluent_kafka import KafkaError, KafkaException

from odradek.cli.main import CliError, is_unreachable, raise_for_kafka_error
from odradek.cli.output import print_json, print_table
from odradek.cli.topics import admin_client, cluster_metadata

# DescribeCluster answers that mean "this broker cannot describe itself that way": fall back to Metadata.
FALLBACK_CODES = frozenset({"_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION", "INVALID_REQUEST"})


def cluster_info(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    metadata = cluster_metadata(admin, args)  # also proves the cluster is reachable
    info = {
        "cluster_id": metadata.cluster_id,
        "controller": metadata.controller_id if metadata.controller_id >= 0 else None,
        "brokers": [{"id": b.id, "host": b.host, "port": b.port, "rack": None}
                    for b in sorted(metadata.brokers.values(), key=lambda b: b.id)],
    }
    # DescribeCluster (KIP-700) adds racks; older brokers only answer Metadata.
    try:
        described = admin.describe_cluster(request_timeout=args.timeout).result()
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if not isinstance(err, KafkaError) or is_unreachable(err) or err.name() not in FALLBACK_CODES:
            raise_for_kafka_error(exc, args, "cannot describe cluster")
    else:
        info = {
            "cluster_id": described.cluster_id,
            "controller": described.controller.id if described.controller is not None else None,
            "brokers": [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack or None}
                        for n in sorted(described.nodes, key=lambda n: n.id)],
        }

    if args.output == "json":
        print_json(info)
        return 0
    print(f"Cluster ID: {info['cluster_id'] if info['cluster_id'] is not None else '-'}")
    print(f"Controller: {info['controller'] if info['controller'] is not None else '-'}")
    print()
    print_table(["BROKER", "HOST", "PORT", "RACK"],
                [(b["id"], b["host"], b["port"], b["rack"]) for b in info["brokers"]])
    return 0


def describe_quorum(args: argparse.Namespace) -> dict:
    """DescribeQuorum through the bootstrap server (any broker forwards it to the quorum leader), connecting with
    --command-config's TLS and SASL as the admin client does."""
    from odradek.cli.connection import run_requests

    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}

    async def ask(brokers) -> dict:
        await brokers.metadata()  # finds the bootstrap server that answers
        return await brokers.request(brokers.bootstrap_address, 55, 1, body)

    response = run_requests(args, ask)
    partitions = [p for t in response["topics"] for p in t["partitions"]]
    if response["error_code"] or not partitions or partitions[0]["error_code"]:
        code = response["error_code"] or (partitions[0]["error_code"] if partitions else -1)
        raise CliError(f"cannot describe the metadata quorum: error {code}")
    p = partitions[0]
    return {"leader": p["leader_id"], "epoch": p["leader_epoch"], "high_watermark": p["high_watermark"],
            "voters": [{"id": v["replica_id"], "log_end_offset": v["log_end_offset"],
                        "lag": max(0, p["high_watermark"] - v["log_end_offset"])} for v in p["current_voters"]],
            "observers": [{"id": o["replica_id"], "log_end_offset": o["log_end_offset"],
                           "lag": max(0, p["high_watermark"] - o["log_end_offset"])} for o in p["observers"]]}


def cluster_status(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    metadata = cluster_metadata(admin, args)
    quorum = describe_quorum(args)
    leaders = Counter(p.leader for t in metadata.topics.values() for p in t.partitions.values())
    hosted = Counter(r for t in metadata.topics.values() for p in t.partitions.values() for r in p.replicas)
    under = [{"topic": name, "partition": p.id, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
             for name, t in sorted(metadata.topics.items()) for p in sorted(t.partitions.values(), key=lambda p: p.id)
             if len(p.isrs) < len(p.replicas) or p.leader < 0]
    status = {
        "cluster_id": metadata.cluster_id, "controller": metadata.controller_id, "quorum": quorum,
        "brokers": [{"id": b.id, "host": b.host, "port": b.port, "leaders": leaders.get(b.id, 0),
                     "replicas": hosted.get(b.id, 0)} for b in sorted(metadata.brokers.values(), key=lambda b: b.id)],
        "under_replicated": under,
    }
    if args.output == "json":
        print_json(status)
        return 0
    print(f"Cluster ID: {status['cluster_id']}")
    print(f"Metadata quorum: leader {quorum['leader']}, epoch {quorum['epoch']}, "
          f"high watermark {quorum['high_watermark']}")
    print()
    print_table(["NODE", "ROLE", "LOG END", "LAG"],
                [(v["id"], role, v["log_end_offset"], v["lag"])
                 for role, members in (("voter", quorum["voters"]), ("observer", quorum["observers"]))
                 for v in members])
    print()
    print_table(["BROKER", "HOST", "PORT", "LEADERS", "REPLICAS"],
                [(b["id"], b["host"], b["port"], b["leaders"], b["replicas"]) for b in status["brokers"]])
    print()
    if not under:
        print("Under-replicated partitions: none")
    else:
        print("Under-replicated partitions:")
        print_table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
                    [(u["topic"], u["partition"], u["leader"], ",".join(map(str, u["replicas"])),
                      ",".join(map(str, u["isr"]))) for u in under])
    return 0
