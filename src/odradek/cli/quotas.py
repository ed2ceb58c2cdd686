"""`odradek quotas describe|alter`: the client quotas of users, client ids and addresses, as
`kafka-configs.sh --entity-type users|clients|ips` manages them.

confluent-kafka's admin client has no client-quota API, so these commands send DescribeClientQuotas (48) and
AlterClientQuotas (49) themselves, connecting as cli/connection.py does (with --command-config's TLS and SASL).
As Kafka's admin client does, describe asks the bootstrap server and alter the controller that Metadata names
(any broker forwards it to the active controller).

The parser imports no client code; the protocol is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import math

from odradek.cli.main import ArgumentParser, CliError
from odradek.cli.output import print_json, print_table

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT, MATCH_DEFAULT = 0, 1
USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)  # in the order Kafka names an entity's parts
DEFAULT_NAME = "<default>"
USER_CLIENT_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)


# ---------------------------------------------------------------------------------------------------
# Parser


def add_quotas_parser(commands, client, output) -> None:
    quotas = commands.add_parser("quotas", help="describe and alter client quotas of users, client ids and addresses",
                                 description="Manage client quotas, as kafka-configs.sh --entity-type "
                                             "users|clients|ips does.")
    sub = quotas.add_subparsers(dest="quotas_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("describe", parents=[client, output], help="list quotas",
                       description="List the quotas of the entities that match: without entity options, every "
                                   "quota; with them, the entities that have those names (or are those defaults), "
                                   "alone or combined with other types unless --strict.")
    _add_entity_flags(p)
    p.add_argument("--strict", action="store_true",
                   help="only entities of exactly the types given (user=alice, not user=alice, client-id=app)")
    p.set_defaults(run=describe_quotas)

    p = sub.add_parser("alter", parents=[client], help="set or remove quotas of one entity",
                       description="Set (--add) or remove (--delete) quotas of one entity: a user, a client id, "
                                   "a user and a client id, or an address; or the default of each. Keys: "
                                   f"{', '.join(USER_CLIENT_KEYS)} (users and client ids); "
                                   f"{', '.join(IP_KEYS)} (addresses).")
    _add_entity_flags(p)
    p.add_argument("--add", metavar="KEY=VALUE", type=quota_values, action="append", default=[],
                   help="set a quota (repeatable, or comma-separated as kafka-configs' --add-config)")
    p.add_argument("--delete", metavar="KEY", type=quota_keys, action="append", default=[],
                   help="remove a quota (repeatable, or comma-separated)")
    p.add_argument("--validate-only", action="store_true", help="let the node check the change, and change nothing")
    p.set_defaults(run=alter_quotas)


def _add_entity_flags(p) -> None:
    group = p.add_argument_group("entity")
    for flag, metavar, what in (("user", "NAME", "user (principal name)"), ("client-id", "ID", "client id"),
                                ("ip", "ADDR", "address (IP, or a host name the node resolves)")):
        exclusive = group.add_mutually_exclusive_group()
        exclusive.add_argument(f"--{flag}", metavar=metavar, help=f"this {what}")
        exclusive.add_argument(f"--{flag}-default", action="store_true", help=f"the default {what.split(' (')[0]}")


# ---------------------------------------------------------------------------------------------------
# Pure parts


def quota_values(text: str) -> list[tuple[str, float]]:
    """`key=value[,key=value...]` -> [(key, value)]; values are numbers."""
    pairs = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got '{item}'")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"the value of {key} must be a number, got '{value.strip()}'")
        pairs.append((key, number))
    return pairs


def quota_keys(text: str) -> list[str]:
    keys = [key.strip() for key in text.split(",")]
    if not all(keys):
        raise argparse.ArgumentTypeError(f"expected KEY[,KEY...], got '{text}'")
    return keys


def entity_of(args: argparse.Namespace) -> dict[str, str | None]:
    """The entity the flags name, {type: name}, a default's name None; types in Kafka's order."""
    entity: dict[str, str | None] = {}
    for entity_type in ENTITY_TYPES:
        attribute = entity_type.replace("-", "_")
        if getattr(args, attribute) is not None:
            entity[entity_type] = getattr(args, attribute)
        elif getattr(args, f"{attribute}_default"):
            entity[entity_type] = None
    return entity


def entity_text(entity: dict[str, str | None]) -> str:
    """As Kafka writes an entity: `user=alice, client-id=<default>`."""
    return ", ".join(f"{t}={DEFAULT_NAME if entity[t] is None else entity[t]}" for t in sorted(entity, key=_type_order))


def value_text(value: float) -> str:
    """1024.0 -> '1024', 12.5 -> '12.5'."""
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def json_value(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _type_order(entity_type: str) -> tuple[int, str]:
    return (ENTITY_TYPES.index(entity_type) if entity_type in ENTITY_TYPES else len(ENTITY_TYPES), entity_type)


def quota_rows(entries: list[dict]) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    """DescribeClientQuotas' entries -> [(entity, {key: value})]: types in Kafka's order (user, client-id, ip),
    entities sorted by them (a default before names), keys sorted."""
    rows = []
    for entry in entries:
        named = {d["entity_type"]: d["entity_name"] for d in entry["entity"]}
        entity = {t: named[t] for t in sorted(named, key=_type_order)}
        rows.append((entity, dict(sorted((v["key"], v["value"]) for v in entry["values"]))))
    return sorted(rows, key=lambda row: [(_type_order(t), name is not None, name or "") for t, name in row[0].items()])


def alteration_ops(args: argparse.Namespace, entity: dict[str, str | None]) -> list[dict]:
    """AlterClientQuotas' ops for --add and --delete: the last value of a key added twice, keys deleted once."""
    added = dict(pair for pairs in args.add for pair in pairs)
    deleted = list(dict.fromkeys(key for keys in args.delete for key in keys))
    if not added and not deleted:
        raise CliError("give --add KEY=VALUE or --delete KEY")
    both = [key for key in deleted if key in added]
    if both:
        raise CliError(f"{', '.join(both)}: both added and deleted")
    # The node ignores the removal of a key it does not know; a typo would look like a success.
    known = IP_KEYS if IP in entity else USER_CLIENT_KEYS
    unknown = [key for key in deleted if key not in known]
    if unknown:
        kind = "addresses" if IP in entity else "users and client ids"
        raise CliError(f"cannot delete {', '.join(unknown)}: the quotas of {kind} are {', '.join(known)}")
    return ([{"key": key, "value": value, "remove": False} for key, value in added.items()]
            + [{"key": key, "value": 0.0, "remove": True} for key in deleted])


def _error_text(code: int, message: str | None) -> str:
    from odradek.protocol.errors import ErrorCode

    if message:
        return message.rstrip(".")
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


# ---------------------------------------------------------------------------------------------------
# Commands


def describe_quotas(args: argparse.Namespace) -> int:
    from odradek.cli.connection import run_requests

    entity = entity_of(args)
    body = {"components": [{"entity_type": t, "match_type": MATCH_EXACT if name is not None else MATCH_DEFAULT,
                            "match": name} for t, name in entity.items()],
            "strict": args.strict}

    async def work(brokers) -> dict:
        await brokers.metadata()
        return await brokers.request(brokers.bootstrap_address, DESCRIBE_CLIENT_QUOTAS, 1, body)

    response = run_requests(args, work)
    if response["error_code"]:
        raise CliError(f"cannot describe quotas: {_error_text(response['error_code'], response['error_message'])}")
    rows = quota_rows(response["entries"] or [])
    if args.output == "json":
        print_json({"quotas": [{"entity": entity, "values": {key: json_value(v) for key, v in values.items()}}
                               for entity, values in rows]})
    elif rows:
        print_table(["ENTITY", "KEY", "VALUE"],
                    [(entity_text(entity), key, value_text(value)) for entity, values in rows
                     for key, value in values.items()])
    return 0


def alter_quotas(args: argparse.Namespace) -> int:
    from odradek.cli.connection import run_requests

    entity = entity_of(args)
    if not entity:
        raise CliError("give the entity: --user, --client-id, --ip or their -default")
    ops = alteration_ops(args, entity)
    body = {"entries": [{"entity": [{"entity_type": t, "entity_name": name} for t, name in entity.items()],
                         "ops": ops}],
            "validate_only": args.validate_only}

    async def work(brokers) -> dict:
        metadata = await brokers.metadata()
        return await brokers.request(brokers.node_address(metadata, metadata["controller_id"]), ALTER_CLIENT_QUOTAS,
                                     1, body)

    response = run_requests(args, work)
    text = entity_text(entity)
    for entry in response["entries"]:
        if entry["error_code"]:
            raise CliError(f"cannot alter the quotas of {text}: "
                           f"{_error_text(entry['error_code'], entry['error_message'])}")
    changes = []
    if any(not op["remove"] for op in ops):
        changes.append("set " + ", ".join(f"{op['key']}={value_text(op['value'])}" for op in ops if not op["remove"]))
    if any(op["remove"] for op in ops):
        changes.append("deleted " + ", ".join(op["key"] for op in ops if op["remove"]))
    if args.validate_only:
        print(f"Validated, not altered (--validate-only), the quotas of {text}: {'; '.join(changes)}.")
    else:
        print(f"Altered the quotas of {text}: {'; '.join(changes)}.")
    return 0
