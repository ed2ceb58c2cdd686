"""`odradek operator`: run the Kubernetes operator (docs/kubernetes.md) on one namespace, until SIGINT or SIGTERM;
and `odradek operator write-rack`, which the operator's Pods run as an init container to learn their broker's rack.

The parser imports nothing of the operator; kopf is imported only when the operator runs.
"""

from __future__ import annotations

import argparse
import os

from odradek.cli.main import ArgumentParser, CliError

NAMESPACE_ENV = "POD_NAMESPACE"  # the operator's Deployment (deploy/operator.yaml) sets it from the Pod's namespace


def add_operator_parser(commands) -> None:
    p = commands.add_parser("operator", help="run the Kubernetes operator",
                            description="Run the Kubernetes operator: reconcile the OdradekCluster resources of one "
                                        "namespace (their Pods, ConfigMaps, claims, Services, disruption budget and "
                                        "service account) and write their status. Stops on SIGINT or SIGTERM.")
    p.add_argument("--namespace", "-n", default=os.environ.get(NAMESPACE_ENV), metavar="NS",
                   help=f"the namespace to watch (default ${NAMESPACE_ENV})")
    p.add_argument("--server", metavar="URL",
                   help="the API server's URL, without authentication or TLS checks (kubectl proxy, a test "
                        "server); default: in-cluster, with the Pod's service account")
    p.add_argument("-v", "--verbose", action="store_true", help="log each handler's steps")
    p.set_defaults(run=run)
    # optional, so that `odradek operator --namespace NS` stays the operator itself
    actions = p.add_subparsers(dest="operator_command", metavar="ACTION", parser_class=ArgumentParser,
                               help="none: run the operator")
    rack = actions.add_parser("write-rack", help="write a Kubernetes node's label to a file (a Pod's broker.rack)",
                              description="Read the Kubernetes node NODE through the API and write the value of its "
                                          "label KEY to FILE (atomically, without a newline); the rack init "
                                          "container of an OdradekCluster's Pods. A node without the label is an "
                                          "error.")
    rack.add_argument("--node", required=True, metavar="NODE", help="the Kubernetes node's name")
    rack.add_argument("--label", required=True, metavar="KEY", help="the label, e.g. topology.kubernetes.io/zone")
    rack.add_argument("--output", required=True, metavar="FILE", help="the file to write")
    # SUPPRESS: given before write-rack, the operator's --server stays
    rack.add_argument("--server", metavar="URL", default=argparse.SUPPRESS,
                      help="the API server's URL, without authentication or TLS checks; default: in-cluster, "
                           "with the Pod's service account")
    rack.set_defaults(run=run_write_rack)


def run(args: argparse.Namespace) -> int:
    if not args.namespace:
        raise CliError(f"no namespace: give --namespace or set {NAMESPACE_ENV}")
    import kopf

    from odradek.operator.kube import Connection, KubeError
    from odradek.operator.main import run_operator

    if args.server is None:
        try:
            Connection.in_cluster()
        except KubeError as e:
            raise CliError(e.message) from None
    kopf.configure(verbose=args.verbose)
    run_operator(args.namespace, args.server)
    return 0


def run_write_rack(args: argparse.Namespace) -> int:
    import asyncio

    import aiohttp

    from odradek.operator.kube import Connection, KubeError
    from odradek.operator.rack import RackError, write_rack

    if args.server:
        connection = Connection(server=args.server)
    else:
        try:
            connection = Connection.in_cluster()
        except KubeError as e:
            raise CliError(e.message) from None
    try:
        rack = asyncio.run(write_rack(connection, args.node, args.label, args.output))
    except (KubeError, RackError) as e:
        raise CliError(str(e)) from None
    except aiohttp.ClientError as e:
        raise CliError(f"cannot reach the Kubernetes API at {connection.server}: {e}") from None
    except OSError as e:
        raise CliError(f"cannot write {args.output}: {e.strerror}") from None
    print(f"node {args.node}: rack {rack} written to {args.output}")
    return 0
