"""The `odradek` command: argument parsing, dispatch, client configuration and error reporting.

The parser for every subcommand lives here; each command's behaviour lives in its own module
(`topics`, `produce`, `consume`, `cluster`), imported only when that command runs, so `odradek server`
never imports the client library and the client commands never import broker code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_TIMEOUT_S = 10.0


class CliError(Exception):
    """A user or cluster error: printed as one `error: ...` line on stderr, exit code 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 1, like Kafka's tools."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message} (see '{self.prog} --help')\n")


# ---------------------------------------------------------------------------------------------------
# Argument types


def key_value(text: str) -> tuple[str, str]:
    """`key=value` (the value may itself contain '=')."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got '{text}'")
    return key.strip(), value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'")
    return value


def unescape(text: str) -> str:
    """Separators given on the command line may be written as escapes: '\\t', '\\n', '\\\\'."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


# ---------------------------------------------------------------------------------------------------
# Client configuration shared by every client command


def read_properties(path: str) -> dict[str, str]:
    """A Java-style properties file of `key=value` lines; blank lines and `#` / `!` comments skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    props: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{path}:{number}: expected key=value, got '{line}'")
        props[key.strip()] = value.strip()
    return props


class ClientErrors:
    """Collects librdkafka's global errors (error_cb) so a command can explain why it gave up."""

    def __init__(self) -> None:
        self.last = None

    def __call__(self, err) -> None:
        self.last = err


def client_config(args: argparse.Namespace, defaults: dict | None = None, overrides: dict | None = None) -> dict:
    """librdkafka configuration for a command, later sources winning: the CLI's base settings,
    `defaults`, the --command-config file, then `overrides` (what the command's own flags ask for).

    librdkafka logs connection failures straight to stderr; the CLI reports those as one `error:` line
    instead, so its log goes to a Python logger that only prints with --verbose.
    """
    config: dict = {
        "bootstrap.servers": args.bootstrap_server,
        "client.id": "odradek-cli",
        "socket.connection.setup.timeout.ms": max(1000, int(args.timeout * 1000)),
        "log.connection.close": False,
        "error_cb": ClientErrors(),
    }
    if args.verbose:
        config["logger"] = librdkafka_logger()
    else:
        config["log_level"] = 0
    config.update(defaults or {})
    if args.command_config:
        config.update(read_properties(args.command_config))
    config.update(overrides or {})
    return config


def librdkafka_logger() -> logging.Logger:
    logger = logging.getLogger("odradek.cli.librdkafka")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("librdkafka %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    return logger


UNREACHABLE_CODES = frozenset({
    "_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_WAIT_COORD",
})


def is_unreachable(err) -> bool:
    """A KafkaError that means the client never got an answer from the cluster."""
    return err is not None and err.name() in UNREACHABLE_CODES


def kafka_error_text(err) -> str:
    """librdkafka error strings are prefixed `Broker: ` / `Local: `; keep the human part."""
    text = err.str() if hasattr(err, "str") else str(err)
    return text.rstrip(".")


def raise_for_kafka_error(exc: Exception, args: argparse.Namespace, action: str | None = None) -> NoReturn:
    """Turn a confluent_kafka KafkaException into a CliError with one clear line."""
    err = exc.args[0] if exc.args else None
    if hasattr(err, "code") and is_unreachable(err):
        raise CliError(f"cannot reach {args.bootstrap_server} (no answer within {args.timeout:g}s)") from None
    text = kafka_error_text(err) if hasattr(err, "code") else str(exc)
    raise CliError(f"{action}: {text}" if action else text) from None


# ---------------------------------------------------------------------------------------------------
# Parser


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="odradek", description="Odradek: a Kafka-compatible broker, and tools to talk to it.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    commands.required = True

    server = commands.add_parser("server", help="run a broker node", description="Run a broker node.")
    server.add_argument("--config", metavar="FILE", help="server properties file")
    server.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="override one setting (repeatable)")
    server.set_defaults(run=run_server)
    add_storage_parser(commands)
    add_dev_cluster_parser(commands)

    client = ArgumentParser(add_help=False)
    group = client.add_argument_group("connection")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT", default=DEFAULT_BOOTSTRAP,
                       help=f"broker to connect to (default {DEFAULT_BOOTSTRAP})")
    group.add_argument("--command-config", metavar="FILE",
                       help="file of extra client properties, key=value lines (librdkafka names)")
    group.add_argument("--timeout", metavar="SECONDS", type=positive_float, default=DEFAULT_TIMEOUT_S,
                       help=f"give up when the cluster does not answer within this long (default {DEFAULT_TIMEOUT_S:g})")
    group.add_argument("-v", "--verbose", action="store_true", help="show librdkafka's log on stderr")

    output = ArgumentParser(add_help=False)
    output.add_argument("--output", "-o", choices=("table", "json"), default="table",
                        help="table for people (default), json for scripts")

    add_topics_parser(commands, client, output)
    add_produce_parser(commands, client)
    add_consume_parser(commands, client)
    _module("groups").add_groups_parser(commands, client, output)
    add_cluster_parser(commands, client, output)
    add_transactions_parser(commands, client, output)
    _module("users").add_users_parser(commands, client, output)
    _module("acls").add_acls_parser(commands, client, output)
    _module("quotas").add_quotas_parser(commands, client, output)
    _module("schemas").add_schemas_parser(commands, output)
    _module("console").add_console_parser(commands, client)
    _module("sql").add_sql_parser(commands, client)
    _module("links").add_links_parser(commands, client, output)
    _module("balancer").add_balancer_parser(commands, client, output)
    _module("operator").add_operator_parser(commands)
    return parser


def add_storage_parser(commands) -> None:
    storage = commands.add_parser("storage", help="format a node's log dirs for a cluster",
                                  description="Prepare log dirs, as kafka-storage.sh does.")
    sub = storage.add_subparsers(dest="storage_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True
    p = sub.add_parser("random-uuid", help="print a new cluster id", description="Print a new cluster id.")
    p.set_defaults(run=lambda args: _module("storage").random_uuid(args))
    p = sub.add_parser("format", help="write meta.properties with the cluster id into every log dir",
                       description="Format the log dirs of the node the settings describe. Every node of a "
                                   "cluster is formatted with the same cluster id before its first start.")
    p.add_argument("--cluster-id", "-t", required=True, metavar="ID", help="the cluster's id (random-uuid)")
    p.add_argument("--config", metavar="FILE", help="server properties file")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                   help="override one setting (repeatable)")
    p.add_argument("--ignore-formatted", "-g", action="store_true", help="skip dirs that are already formatted")
    p.add_argument("--add-scram", "-S", metavar="CREDENTIAL", action="append", default=[],
                   help="a SCRAM user the new cluster starts with (repeatable), as kafka-storage.sh: "
                        "'SCRAM-SHA-256=[name=alice,password=alice-secret]'; also iterations=N, salt=BASE64, "
                        "saltedpassword=BASE64 (with salt, instead of password)")
    p.set_defaults(run=lambda args: _module("storage").format_dirs(args))


def add_dev_cluster_parser(commands) -> None:
    p = commands.add_parser("dev-cluster", help="run a local cluster of several nodes",
                            description="Start a local cluster: separate node processes on 127.0.0.1, each with its "
                                        "own ports and data dir, all of them voters of the metadata quorum. Prints "
                                        "each node's address and metrics URL, and the bootstrap servers; Ctrl-C "
                                        "stops the nodes.")
    p.add_argument("--nodes", type=positive_int, default=3,
                   help="nodes that are both controllers (quorum voters) and brokers (default 3)")
    p.add_argument("--broker-only", type=non_negative_int, default=0, metavar="N",
                   help="more nodes that are brokers only (process.roles=broker; default 0)")
    p.add_argument("--dir", default="./dev-cluster", help="parent of the nodes' data dirs (default ./dev-cluster)")
    p.add_argument("--base-port", type=positive_int, default=19092,
                   help="node N listens on base+2(N-1) for clients, the next port for the quorum, and "
                        "base+2(N-1)+1000 for its metrics (default 19092)")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                   help="a setting for every node (repeatable)")
    p.set_defaults(run=lambda args: _module("dev_cluster").run(args))


def add_topics_parser(commands, client, output) -> None:
    topics = commands.add_parser("topics", help="list, create, describe, alter and delete topics",
                                 description="Manage topics.")
    sub = topics.add_subparsers(dest="topics_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("list", parents=[client, output], help="list topics", description="List topics.")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.set_defaults(run=lambda args: _topics().list_topics(args))

    p = sub.add_parser("create", parents=[client], help="create a topic", description="Create a topic.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", type=positive_int, help="partition count (default: broker's num.partitions)")
    p.add_argument("--replication-factor", type=positive_int,
                   help="replicas per partition (default: broker's default.replication.factor)")
    p.add_argument("--config", metavar="KEY=VALUE", type=key_value, action="append", default=[],
                   help="topic configuration override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed quietly when the topic exists")
    p.set_defaults(run=lambda args: _topics().create_topic(args))

    p = sub.add_parser("describe", parents=[client, output], help="describe topics",
                       description="Describe topics: partitions, leaders, replicas, ISR and configuration "
                                   "overrides. Without NAME, every topic.")
    p.add_argument("names", metavar="NAME", nargs="*")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.set_defaults(run=lambda args: _topics().describe_topics(args))

    p = sub.add_parser("alter", parents=[client], help="add partitions or change a topic's configuration",
                       description="Add partitions to a topic or change its configuration.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", type=positive_int, help="new total partition count (can only grow)")
    p.add_argument("--config", metavar="KEY=VALUE", type=key_value, action="append", default=[],
                   help="set a configuration override (repeatable)")
    p.add_argument("--delete-config", metavar="KEY", action="append", default=[],
                   help="remove a configuration override, back to the default (repeatable)")
    p.set_defaults(run=lambda args: _topics().alter_topic(args))

    p = sub.add_parser("delete", parents=[client], help="delete topics", description="Delete topics.")
    p.add_argument("names", metavar="NAME", nargs="+")
    p.add_argument("--if-exists", action="store_true", help="succeed quietly for topics that do not exist")
    p.set_defaults(run=lambda args: _topics().delete_topics(args))


def add_produce_parser(commands, client) -> None:
    p = commands.add_parser(
        "produce", parents=[client], help="write lines from stdin (or a file) as records",
        description="Console producer: each input line becomes one record.")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--key-separator", metavar="SEP", type=unescape,
                   help="split each line into key and value at the first SEP (escapes like \\t allowed)")
    p.add_argument("--header", metavar="KEY=VALUE", type=key_value, action="append", default=[],
                   help="header added to every record (repeatable)")
    p.add_argument("--property", metavar="KEY=VALUE", type=key_value, action="append", default=[],
                   help="line-reader property, as kafka-console-producer: parse.key, key.separator, "
                        "parse.headers, headers.delimiter, headers.separator, headers.key.separator, "
                        "null.marker, ignore.error (repeatable)")
    p.add_argument("--producer-property", metavar="KEY=VALUE", type=key_value, action="append", default=[],
                   help="librdkafka producer property (repeatable)")
    p.add_argument("--partition", type=non_negative_int, help="write every record to this partition")
    p.add_argument("--acks", choices=("0", "1", "all", "-1"),
                   help="acknowledgements to wait for (default all)")
    p.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="batch compression codec (default none)")
    p.add_argument("--file", metavar="FILE", help="read lines from FILE instead of stdin")
    p.set_defaults(run=lambda args: _module("produce").produce(args))


def add_consume_parser(commands, client) -> None:
    p = commands.add_parser(
        "consume", parents=[client], help="print records of a topic",
        description="Console consumer. Without --group, reads every partition (or --partition) directly, "
                    "starting at the end unless told otherwise; with --group, joins that consumer group.")
    p.add_argument("topic", metavar="TOPIC")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", metavar="N", type=offset_spec,
                       help="start at offset N (or 'earliest' / 'latest') in each partition read")
    start.add_argument("--from-timestamp", metavar="TIME", type=timestamp_ms,
                       help="start at the first record at or after TIME: ISO 8601 (naive times are local) "
                            "or epoch milliseconds")
    p.add_argument("--partition", type=non_negative_int, help="read only this partition")
    p.add_argument("--group", metavar="GROUP", help="consume as a member of this consumer group")
    p.add_argument("--max-messages", metavar="N", type=positive_int, help="exit after N records")
    p.add_argument("--timeout-ms", metavar="T", type=positive_int,
                   help="exit when no record arrived for T milliseconds")
    p.add_argument("--format", choices=("value", "kv", "json"), default="value",
                   help="value (default): the value; kv: key<TAB>value; json: one object per record")
    p.add_argument("--print-key", action="store_true", help="value format: print key<TAB> before the value")
    p.add_argument("--print-headers", action="store_true",
                   help="value/kv formats: print k:v,k:v<TAB> (or NO_HEADERS) first")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted", help="default read_uncommitted, as kafka-console-consumer")
    p.add_argument("--consumer-property", metavar="KEY=VALUE", type=key_value, action="append", default=[],
                   help="librdkafka consumer property (repeatable)")
    p.set_defaults(run=lambda args: _module("consume").consume(args))


def add_cluster_parser(commands, client, output) -> None:
    cluster = commands.add_parser("cluster", help="cluster information", description="Cluster information.")
    sub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True
    p = sub.add_parser("info", parents=[client, output], help="cluster id, controller and brokers",
                       description="Show the cluster id, the controller and the brokers.")
    p.set_defaults(run=lambda args: _module("cluster").cluster_info(args))
    p = sub.add_parser("status", parents=[client, output], help="quorum, nodes, leaders, under-replicated partitions",
                       description="Show the metadata quorum (leader, epoch, each voter's lag), the brokers, how "
                                   "many partitions each leads, and the partitions whose ISR is short of replicas.")
    p.set_defaults(run=lambda args: _module("cluster").cluster_status(args))


def add_transactions_parser(commands, client, output) -> None:
    transactions = commands.add_parser("transactions", help="list, describe and abort transactions",
                                       description="Inspect transactions, like kafka-transactions.sh.")
    sub = transactions.add_subparsers(dest="transactions_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True
    p = sub.add_parser("list", parents=[client, output], help="list transactional ids and their state",
                       description="List the transactional ids every coordinator knows, with producer id and state.")
    p.add_argument("--state", metavar="STATE", action="append", default=[],
                   help="only this state (repeatable): Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
                        "CompleteAbort")
    p.add_argument("--producer-id", metavar="ID", type=non_negative_int, action="append", default=[],
                   help="only this producer id (repeatable)")
    p.add_argument("--duration-ms", metavar="MS", type=non_negative_int,
                   help="only transactions open for at least this long")
    p.set_defaults(run=lambda args: _module("transactions").list_transactions(args))
    p = sub.add_parser("describe", parents=[client, output], help="describe a transactional id",
                       description="Show a transactional id's coordinator, producer id and epoch, state, timeout, "
                                   "how long its transaction has been open and its partitions.")
    p.add_argument("--transactional-id", required=True, metavar="ID")
    p.set_defaults(run=lambda args: _module("transactions").describe_transaction(args))
    p = sub.add_parser("describe-producers", parents=[client, output], help="producers of a partition",
                       description="Show the producers a partition's leader knows: epoch, last sequence, and the "
                                   "start offset of an open transaction.")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", required=True, type=non_negative_int)
    p.set_defaults(run=lambda args: _module("transactions").describe_producers(args))
    p = sub.add_parser("abort", parents=[client], help="abort a hanging transaction on a partition",
                       description="Write an abort marker for the open transaction that starts at --start-offset of "
                                   "the partition (find it with describe-producers). For transactions their "
                                   "coordinator no longer knows; it fences nothing at the coordinator.")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", required=True, type=non_negative_int)
    p.add_argument("--start-offset", required=True, type=non_negative_int)
    p.set_defaults(run=lambda args: _module("transactions").abort_transaction(args))


def offset_spec(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    return non_negative_int(text)


def timestamp_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date/time (naive times are in the local time zone, as Kafka's tools)."""
    from datetime import datetime

    text = text.strip()
    if text.lstrip("-").isdigit():
        value = int(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected a time, got '{text}'")
        return value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ISO 8601 (2024-05-01T12:00:00Z) or epoch milliseconds, got '{text}'") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, like Kafka's tools
    return int(moment.timestamp() * 1000)


def _topics():
    return _module("topics")


def _module(name: str):
    import importlib

    return importlib.import_module(f"odradek.cli.{name}")


def run_server(args: argparse.Namespace) -> int:
    from odradek.broker.node import run_server as run

    return run(args.config, args.overrides)


# ---------------------------------------------------------------------------------------------------
# Entry point


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 1
    if args.command not in ("server", "dev-cluster", "operator"):
        interrupt_on_sigterm()
    try:
        return args.run(args) or 0
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout closed early (`consume ... | head`): not an error. Point stdout at /dev/null so the
        # interpreter's final flush does not complain either.
        silence_stdout()
        return 0
    except Exception as exc:
        # A KafkaException a command did not translate: still one line, never a traceback.
        kafka = sys.modules.get("confluent_kafka")
        if kafka is None or not isinstance(exc, kafka.KafkaException):
            raise
        try:
            raise_for_kafka_error(exc, args)
        except CliError as error:
            print(f"error: {error}", file=sys.stderr)
        return 1


def interrupt_on_sigterm() -> None:
    """SIGTERM ends a client command like Ctrl-C: the producer flushes, the consumer closes."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (main() called from a test thread)
        pass


def silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
