"""`odradek cluster info`: cluster id, controller and brokers."""

from __future__ import annotations

import argparse

from confluent_kafka import KafkaError, KafkaException

from odradek.cli.main import is_unreachable, raise_for_kafka_error
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
