"""`odradek operator`: run the Kubernetes operator (docs/kubernetes.md) on one namespace, until SIGINT or SIGTERM.

The parser imports nothing of the operator; kopf is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import os

from odradek.cli.main import CliError

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
