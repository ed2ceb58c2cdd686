"""`odradek sql`: the streaming SQL server (ksqlDB's REST API, Spark as the engine), and `odradek sql shell`.

The server is a client of the cluster at --bootstrap-server: its catalog lives in the command topic
`_odradek-sql-<service id>_command_topic`, its persistent queries' checkpoints under --state-dir. The
parser imports neither Spark nor aiohttp; the command does, when it runs.
"""

from __future__ import annotations

import argparse
import signal
import threading

from odradek.cli.console import listen_address
from odradek.cli.main import CliError, positive_int, read_properties

DEFAULT_LISTEN = "http://127.0.0.1:8088"  # ksqlDB's port
DEFAULT_STATE_DIR = "odradek-sql-state"


def _key_value(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got '{text}'")
    return name.strip(), value.strip()


def add_sql_parser(commands, client) -> None:
    p = commands.add_parser(
        "sql", parents=[client], help="run the streaming SQL server (or its shell)",
        description="Run the streaming SQL server: ksqlDB's dialect and REST API (/ksql, /query, /query-stream, "
                    "/info, /healthcheck), with persistent queries running on Spark Structured Streaming and "
                    "written exactly once. `odradek sql shell` is its interactive client. See docs/sql.md.")
    p.add_argument("--listen", metavar="URL", type=listen_address, default=listen_address(DEFAULT_LISTEN),
                   help=f"where to serve the REST API (default {DEFAULT_LISTEN})")
    p.add_argument("--state-dir", metavar="DIR", default=DEFAULT_STATE_DIR,
                   help=f"where persistent queries keep their checkpoints (default ./{DEFAULT_STATE_DIR})")
    p.add_argument("--service-id", metavar="ID", default="default_",
                   help="names the command topic; servers with different ids keep separate catalogs "
                        "(default default_, as ksql.service.id)")
    p.add_argument("--spark-master", metavar="URL", default="local[2,4]",
                   help="where queries run: local[N] (the default, local[2,4]: 2 cores, a task retried 4 times) "
                        "or a cluster's master URL such as spark://host:7077")
    p.add_argument("--spark-conf", metavar="KEY=VALUE", type=_key_value, action="append", default=[],
                   help="a Spark setting for the queries' session (repeatable)")
    p.add_argument("--schema-registry", metavar="URL", default=None,
                   help="the schema registry for AVRO and JSON_SR formats (Confluent's REST API)")
    p.add_argument("--trigger-interval-ms", metavar="MS", type=positive_int, default=500,
                   help="how often persistent and push queries run a micro-batch (default 500)")
    p.add_argument("--auto-offset-reset", choices=("earliest", "latest"), default="latest",
                   help="where new queries start reading unless a request sets auto.offset.reset (default latest, "
                        "as ksqlDB)")
    p.add_argument("--replication-factor", metavar="N", type=positive_int, default=3,
                   help="replicas of the topics the server creates, at most the number of brokers (default 3)")
    p.set_defaults(run=run)
    sub = p.add_subparsers(dest="sql_command", metavar="ACTION")
    shell = sub.add_parser("shell", help="the interactive SQL client",
                           description="An interactive client of an Odradek SQL server (or ksqlDB): statements "
                                       "end with ';', results print as tables, history is kept in "
                                       "~/.odradek_sql_history.")
    from odradek.cli.sql_shell import add_shell_arguments, run_shell

    add_shell_arguments(shell)
    shell.set_defaults(run=run_shell)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from aiohttp import web

    from odradek.sql.engine import Engine, EngineConfig
    from odradek.sql.server import SqlServer

    config = EngineConfig(
        bootstrap=args.bootstrap_server,
        state_dir=args.state_dir,
        client_config=read_properties(args.command_config) if args.command_config else {},
        service_id=args.service_id,
        spark_master=args.spark_master,
        spark_config=dict(args.spark_conf),
        registry_url=args.schema_registry,
        trigger_interval_ms=args.trigger_interval_ms,
        offset_reset=args.auto_offset_reset,
        replication_factor=args.replication_factor,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, port = args.listen
    engine = Engine(config)

    async def serve() -> None:
        runner = web.AppRunner(SqlServer(engine).app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        bound = runner.addresses[0][1] if runner.addresses else port
        try:
            await asyncio.to_thread(engine.start)
        except Exception as exc:
            raise CliError(f"the SQL server could not start: {str(exc).splitlines()[0]}") from None
        print(f"Odradek SQL server at http://{host}:{bound} for the cluster at {args.bootstrap_server} "
              f"(Spark {config.spark_master}, {len(engine.catalog.queries)} persistent queries)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        await runner.cleanup()

    try:
        asyncio.run(serve())
    finally:
        stopper = threading.Thread(target=engine.stop, daemon=True)
        stopper.start()
        stopper.join(60)
    return 0
