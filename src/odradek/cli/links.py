"""`odradek links create|list|describe|pause|resume|promote|delete`: cluster links, whose mirror topics copy
another Kafka cluster's topics byte for byte, at the same offsets.

The commands are Kafka clients of the destination cluster (the one --bootstrap-server names): a link is a
record in its `__cluster_links` topic, which every node reads (links/definition.py). What each command does is
in links/admin.py, shared with the console; here are its arguments and how its answer is printed. The parser
imports no client code; it is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import functools
import sys

from odradek.cli.main import ArgumentParser, CliError, client_config, read_properties
from odradek.cli.output import print_json, print_table


def add_links_parser(commands, client, output) -> None:
    links = commands.add_parser("links", help="mirror topics of another cluster, offsets preserved",
                                description="Manage cluster links: mirror topics that copy another Kafka "
                                            "cluster's topics byte for byte, at the same offsets.")
    sub = links.add_subparsers(dest="links_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("create", parents=[client], help="create a link",
                       description="Create a link from the source cluster to this one: every source topic the "
                                   "patterns select gets a read-only mirror topic here, with the source's "
                                   "partitions, configs and records at the same offsets.")
    p.add_argument("name")
    p.add_argument("--source-bootstrap", required=True, metavar="HOST:PORT",
                   help="the source cluster's bootstrap servers")
    p.add_argument("--source-config", metavar="FILE",
                   help="client properties for the source (librdkafka names: security.protocol, sasl.*, ssl.*)")
    p.add_argument("--topics", required=True, metavar="PATTERN",
                   help="the source topics to mirror: regular expressions a whole name must match, "
                        "comma-separated (internal topics are never mirrored)")
    p.add_argument("--groups", metavar="PATTERN",
                   help="consumer groups whose committed offsets on the mirror topics are copied (for groups "
                        "with no members here): regular expressions, comma-separated")
    p.add_argument("--sync-configs", action="store_true",
                   help="keep copying the source topics' config changes to the mirrors")
    p.add_argument("--sync-acls", action="store_true",
                   help="copy the source's ACLs for the mirror topics and the link's groups")
    p.set_defaults(run=create_link)

    p = sub.add_parser("list", parents=[client, output], help="list links", description="List the links.")
    p.set_defaults(run=list_links)

    p = sub.add_parser("describe", parents=[client, output], help="a link's mirror partitions and their lag",
                       description="Show each mirror partition of a link: its state, the source's and the "
                                   "mirror's end offsets, and how many records the mirror is behind.")
    p.add_argument("name")
    p.set_defaults(run=describe_link)

    for action, paused, text in (("pause", True, "stop mirroring (the mirrors stay read-only)"),
                                 ("resume", False, "mirror again from where the mirrors are")):
        p = sub.add_parser(action, parents=[client], help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("name")
        p.set_defaults(run=lambda args, paused=paused: set_paused(args, paused))

    p = sub.add_parser("promote", parents=[client], help="fail over: make mirror topics writable",
                       description="Stop mirroring the link's mirror topics (or those named) and make them "
                                   "ordinary, writable topics. First waits (up to --timeout) until the mirrors "
                                   "hold the source's records and copies the groups' offsets once more; a "
                                   "source that does not answer is promoted from where the mirrors are. See "
                                   "docs/multi-datacenter.md.")
    p.add_argument("name")
    p.add_argument("--topics", metavar="TOPIC[,TOPIC...]", help="only these mirror topics")
    p.set_defaults(run=promote)

    p = sub.add_parser("delete", parents=[client], help="delete a link",
                       description="Delete a link that has no active mirror topics (promote or delete them "
                                   "first).")
    p.add_argument("name")
    p.set_defaults(run=delete_link)


def one_line_errors(command):
    """A command whose LinkError (links/admin.py) is the CLI's one-line error."""

    @functools.wraps(command)
    def run(*args):
        from odradek.links.definition import LinkError

        try:
            return command(*args)
        except LinkError as exc:
            raise CliError(str(exc)) from None

    return run


@one_line_errors
def create_link(args: argparse.Namespace) -> int:
    from odradek.links import admin
    from odradek.links.definition import LinkDefinition

    source_config = read_properties(args.source_config) if args.source_config else {}
    link = LinkDefinition(args.name, args.source_bootstrap, admin.patterns(args.topics),
                          admin.patterns(args.groups or ""), source_config=source_config,
                          sync_configs=args.sync_configs, sync_acls=args.sync_acls)
    selected = admin.create_link(client_config(args), link, args.timeout)
    print(f"Created link {link.name}: {len(selected)} source topics selected now"
          + (f" ({', '.join(selected)})" if selected else ""))
    return 0


@one_line_errors
def list_links(args: argparse.Namespace) -> int:
    from odradek.links import admin

    rows = admin.list_links(client_config(args), args.timeout)
    if args.output == "json":
        print_json(rows)
    else:
        print_table(("LINK", "SOURCE", "TOPICS", "STATE", "MIRRORS", "PROMOTED"),
                    [tuple(row.values()) for row in rows])
    return 0


@one_line_errors
def describe_link(args: argparse.Namespace) -> int:
    from odradek.links import admin

    link = admin.describe_link(client_config(args), args.name, args.timeout)
    if args.output == "json":
        print_json(link)
    else:
        print(f"Link {link['name']} from {link['source']}, topics {','.join(link['topics'])}"
              + (" (paused)" if link["paused"] else ""))
        print_table(("TOPIC", "PARTITION", "STATE", "SOURCE-END", "MIRROR-END", "LAG", "LAG-SECONDS"),
                    [tuple("-" if v is None else v for v in row.values()) for row in link["partitions"]])
    return 0


@one_line_errors
def set_paused(args: argparse.Namespace, paused: bool) -> int:
    from odradek.links import admin

    admin.set_paused(client_config(args), args.name, paused, args.timeout)
    print(f"{'Paused' if paused else 'Resumed'} link {args.name}")
    return 0


@one_line_errors
def promote(args: argparse.Namespace) -> int:
    from odradek.links import admin

    topics = None if args.topics is None else admin.patterns(args.topics)
    promoted = admin.promote(client_config(args), args.name, topics, args.timeout)
    for warning in promoted["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"Promoted {len(promoted['topics'])} mirror topics of link {promoted['name']}: "
          f"{', '.join(promoted['topics']) or '-'}")
    return 0


@one_line_errors
def delete_link(args: argparse.Namespace) -> int:
    from odradek.links import admin

    admin.delete_link(client_config(args), args.name, args.timeout)
    print(f"Deleted link {args.name}")
    return 0
