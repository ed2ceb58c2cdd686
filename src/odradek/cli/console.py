"""`odradek console`: the web console on its own, pointed at any Kafka cluster (Odradek or Apache Kafka).

The same console a node serves on its HTTP port, as a separate process: it reaches the cluster through
--bootstrap-server with --command-config's TLS and SASL settings. With a SASL connection people log in with
their own cluster credentials (the file's sasl.username and sasl.password are not used). With
--schema-registry it shows that registry's subjects too. The parser imports neither aiohttp nor the client
library; the command does, when it runs.
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from odradek.cli.main import CliError, positive_float, positive_int, read_properties

DEFAULT_LISTEN = "http://127.0.0.1:9645"


def listen_address(text: str) -> tuple[str, int]:
    """`http://HOST:PORT` (or `HOST:PORT`) -> (host, port); port 0 takes a free one."""
    parts = urlsplit(text if "://" in text else f"http://{text}")
    if parts.scheme != "http":
        raise argparse.ArgumentTypeError(f"expected http://HOST:PORT, got '{text}' (put TLS in front of the console "
                                         "with a reverse proxy)")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.path not in ("", "/"):
        raise argparse.ArgumentTypeError(f"expected http://HOST:PORT, got '{text}'")
    return parts.hostname, port


def registry_address(text: str) -> str:
    """A schema registry's base URL: http(s)://HOST[:PORT][/PATH], without credentials, query or fragment."""
    parts = urlsplit(text.strip())
    try:
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected http://HOST:PORT, got '{text}' (a port is a number)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(f"expected http://HOST:PORT (or https://), got '{text}'")
    if parts.username is not None or parts.password is not None:
        raise argparse.ArgumentTypeError("the console does not log in to a schema registry: give its URL without "
                                         "credentials")
    return text.strip().rstrip("/")


def add_console_parser(commands, client) -> None:
    from odradek.console.settings import DEFAULT_SAMPLE_INTERVAL_S, DEFAULT_SCAN_BUDGET

    p = commands.add_parser(
        "console", parents=[client], help="serve the web console for a cluster",
        description="Serve the web console (topics, messages, consumer groups, transactions, quorum, ACLs, and "
                    "with --schema-registry the registry's schemas) for the "
                    "cluster at --bootstrap-server, as a client of it. Without SASL in --command-config nobody logs "
                    "in, so keep it on 127.0.0.1 (the default); with SASL, people log in with their own cluster "
                    "credentials and the cluster's ACLs apply. Ctrl-C stops it.")
    p.add_argument("--listen", metavar="URL", type=listen_address, default=listen_address(DEFAULT_LISTEN),
                   help=f"where to serve the console (default {DEFAULT_LISTEN}; port 0 picks a free port)")
    p.add_argument("--scan-budget", metavar="N", type=positive_int, default=DEFAULT_SCAN_BUDGET,
                   help=f"records a filtered message search may read beyond its page (default {DEFAULT_SCAN_BUDGET})")
    p.add_argument("--sample-interval", metavar="SECONDS", type=positive_float, default=DEFAULT_SAMPLE_INTERVAL_S,
                   help="how often the charts sample log end offsets and lag while someone looks "
                        f"(default {DEFAULT_SAMPLE_INTERVAL_S:g})")
    p.add_argument("--schema-registry", metavar="URL", type=registry_address, default=None,
                   help="the schema registry whose subjects the Schemas pages show (Confluent's REST API, as "
                        "http://127.0.0.1:8081: a node's schema.registry.listener); without it there are no "
                        "Schemas pages")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from odradek.cli.connection import client_security
    from odradek.console.settings import from_properties
    from odradek.console.web import is_loopback, serve

    properties = read_properties(args.command_config) if args.command_config else {}
    settings = from_properties(args.bootstrap_server, properties, timeout_s=args.timeout,
                               scan_budget=args.scan_budget, sample_interval_s=args.sample_interval,
                               schema_registry=args.schema_registry or "")
    if settings.note:
        raise CliError(settings.note)
    # The TLS and SASL settings must make sense before anyone tries to log in with them.
    probe = settings.client_properties("user", "password") if settings.login_mechanisms else settings.client_properties()
    client_security(probe)
    host, port = args.listen
    if not is_loopback(host) and not settings.login_required:
        print(f"warning: the console on {host} is open to anyone who can reach it, with the rights of its cluster "
              "connection (no login without SASL)", file=sys.stderr)

    def announce(address: str) -> None:
        login = "people log in with their SASL credentials" if settings.login_required else "no login"
        schemas = f", schemas from {args.schema_registry}" if args.schema_registry else ""
        print(f"Odradek console at {address} for the cluster at {args.bootstrap_server} ({login}{schemas})",
              flush=True)

    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    try:
        runner(serve(settings, host, port, announce))
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return 0
