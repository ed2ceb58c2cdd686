"""`odradek acls`: list, add and remove ACL bindings, as `kafka-acls.sh` does.

Through the admin API (DescribeAcls, CreateAcls, DeleteAcls). A binding allows or denies a principal
("User:alice") an operation, from a host, on the resources a pattern matches: a LITERAL name ("*" is every
resource of the type) or a PREFIXED one. `--producer` and `--consumer` add the bindings a producer or a
consumer needs, as kafka-acls does.

The parser imports no client library, so building the `odradek` parser stays cheap; confluent-kafka is
imported only when a command runs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from odradek.cli.main import ArgumentParser, CliError, raise_for_kafka_error
from odradek.cli.output import print_json, print_table

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
RESOURCE_FLAGS = (("topic", "TOPIC"), ("group", "GROUP"), ("transactional_id", "TRANSACTIONAL_ID"))
# kafka-acls' operation names; confluent-kafka knows no CreateTokens or DescribeTokens (nor USER resources)
OPERATIONS = ("Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite", "All")
SUPPORTED_OPERATIONS = {  # per resource type, as Kafka's AclEntry.supportedOperations, plus All
    "TOPIC": {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    "GROUP": {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    "CLUSTER": {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"},
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE"},
}
HEADERS = ["RESOURCE_TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


# ---------------------------------------------------------------------------------------------------
# Parser


def add_acls_parser(commands, client, output) -> None:
    acls = commands.add_parser("acls", help="list, add and remove ACLs",
                               description="Manage ACL bindings, as kafka-acls.sh does. The nodes need an "
                                           "authorizer (authorizer.class.name); without one every request is "
                                           "allowed and these commands fail with SECURITY_DISABLED.")
    sub = acls.add_subparsers(dest="acls_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("list", parents=[client, output], help="list ACL bindings",
                       description="List ACL bindings: every one, or those on the resources named.")
    _add_resource_flags(p, ("literal", "prefixed", "match", "any"), "any")
    p.add_argument("--principal", metavar="PRINCIPAL", action="append", default=[],
                   help="only bindings of this principal, as Type:name (repeatable)")
    p.set_defaults(run=list_acls)

    p = sub.add_parser("add", parents=[client, output], help="add ACL bindings",
                       description="Add a binding for every principal, host, operation and resource given "
                                   "(bindings that exist already are kept as they are).")
    _add_resource_flags(p, ("literal", "prefixed"), "literal")
    _add_entry_flags(p)
    p.add_argument("--producer", action="store_true",
                   help="what a producer needs: Write, Describe and Create on the topics, Write and Describe "
                        "on the transactional ids")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--consumer", action="store_true",
                   help="what a consumer needs: Read and Describe on the topics, Read on the groups")
    p.set_defaults(run=add_acls)

    p = sub.add_parser("remove", parents=[client, output], help="remove ACL bindings",
                       description="Remove the bindings on the resources named that match the filter: all of "
                                   "them unless --principal, --host, --operation or --permission narrow it.")
    _add_resource_flags(p, ("literal", "prefixed", "match", "any"), "literal")
    p.add_argument("--principal", metavar="PRINCIPAL", action="append", default=[],
                   help="only bindings of this principal, as Type:name (repeatable)")
    p.add_argument("--host", metavar="HOST", action="append", default=[],
                   help="only bindings for this host (repeatable; '*' is the binding for every host)")
    p.add_argument("--operation", metavar="OPERATION", action="append", default=[], type=operation_name,
                   help=f"only bindings of this operation (repeatable): {', '.join(OPERATIONS)}")
    p.add_argument("--permission", choices=("allow", "deny"), help="only ALLOW or only DENY bindings")
    p.add_argument("--dry-run", action="store_true", help="only list the bindings that would be removed")
    p.set_defaults(run=remove_acls)


def _add_resource_flags(p, pattern_types: tuple[str, ...], default: str) -> None:
    group = p.add_argument_group("resources")
    group.add_argument("--topic", metavar="NAME", action="append", default=[], help="a topic (repeatable)")
    group.add_argument("--group", metavar="NAME", action="append", default=[],
                       help="a consumer group (repeatable)")
    group.add_argument("--transactional-id", metavar="ID", action="append", default=[],
                       help="a transactional id (repeatable)")
    group.add_argument("--cluster", action="store_true", help="the cluster")
    group.add_argument("--resource-pattern-type", choices=pattern_types, default=default,
                       help=f"how the names match resources (default {default}): literal (the name; '*' is "
                            "every resource), prefixed (every name starting with it)"
                            + (", match (every binding that applies to the name), any"
                               if "any" in pattern_types else ""))


def _add_entry_flags(p) -> None:
    group = p.add_argument_group("bindings")
    group.add_argument("--allow-principal", metavar="PRINCIPAL", action="append", default=[],
                       help="allow this principal, as Type:name ('User:*' is everyone; repeatable)")
    group.add_argument("--deny-principal", metavar="PRINCIPAL", action="append", default=[],
                       help="deny this principal (repeatable)")
    group.add_argument("--allow-host", metavar="HOST", action="append", default=[],
                       help="the allowed principals only from this IP address (repeatable; default: any)")
    group.add_argument("--deny-host", metavar="HOST", action="append", default=[],
                       help="the denied principals only from this IP address (repeatable; default: any)")
    group.add_argument("--operation", metavar="OPERATION", action="append", default=[], type=operation_name,
                       help=f"the operation (repeatable): {', '.join(OPERATIONS)}")


# ---------------------------------------------------------------------------------------------------
# Pure parts


@dataclass(frozen=True, order=True)
class Binding:
    """A binding by Kafka's names: what the commands print and send."""

    resource_type: str      # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID; UNKNOWN: a type confluent-kafka lacks
    resource_name: str
    pattern_type: str       # LITERAL, PREFIXED
    principal: str
    host: str
    operation: str          # READ, IDEMPOTENT_WRITE, ...
    permission_type: str    # ALLOW, DENY

    def row(self) -> tuple[str, ...]:
        return (self.resource_type, self.resource_name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission_type)

    def document(self) -> dict:
        return dict(zip(("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                         "permission_type"), self.row(), strict=True))


def operation_name(text: str) -> str:
    """Read, IdempotentWrite, idempotent-write or IDEMPOTENT_WRITE -> IDEMPOTENT_WRITE."""
    key = text.replace("_", "").replace("-", "").lower()
    for name in OPERATIONS:
        if name.lower() == key:
            return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()
    raise argparse.ArgumentTypeError(f"unknown operation '{text}' (one of {', '.join(OPERATIONS)})")


def check_principal(principal: str) -> str:
    if ":" not in principal:
        raise CliError(f"expected a string in format principalType:principalName but got {principal}")
    return principal


def resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(resource type, name) of the resource flags, in the order of kafka-acls' kinds."""
    named = [(kind, name) for flag, kind in RESOURCE_FLAGS for name in getattr(args, flag)]
    if args.cluster:
        named.append(("CLUSTER", CLUSTER_NAME))
    return list(dict.fromkeys(named))


def bindings_to_add(args: argparse.Namespace) -> list[Binding]:
    """The bindings `acls add` asks for, as kafka-acls builds them (with its checks)."""
    pattern = args.resource_pattern_type.upper()
    allow = [check_principal(p) for p in args.allow_principal]
    deny = [check_principal(p) for p in args.deny_principal]
    if not allow and not deny:
        raise CliError("give --allow-principal or --deny-principal")
    if (args.allow_host and not allow) or (args.deny_host and not deny):
        raise CliError("--allow-host needs --allow-principal, and --deny-host --deny-principal")
    entries = [(principal, host, "ALLOW") for principal in allow for host in args.allow_host or [WILDCARD]]
    entries += [(principal, host, "DENY") for principal in deny for host in args.deny_host or [WILDCARD]]
    wanted: list[tuple[str, str, list[str]]] = []  # (resource type, name, operations)
    if args.producer or args.consumer:
        if args.operation:
            raise CliError("--operation cannot be given with --producer or --consumer")
        if args.producer:
            if not args.topic and not args.transactional_id:
                raise CliError("--producer needs --topic or --transactional-id")
            wanted += [("TOPIC", name, ["WRITE", "DESCRIBE", "CREATE"]) for name in args.topic]
            wanted += [("TRANSACTIONAL_ID", name, ["WRITE", "DESCRIBE"]) for name in args.transactional_id]
            if args.idempotent:
                wanted.append(("CLUSTER", CLUSTER_NAME, ["IDEMPOTENT_WRITE"]))
        if args.consumer:
            if not args.topic or not args.group:
                raise CliError("--consumer needs --topic and --group")
            wanted += [("TOPIC", name, ["READ", "DESCRIBE"]) for name in args.topic]
            wanted += [("GROUP", name, ["READ"]) for name in args.group]
    else:
        if args.idempotent:
            raise CliError("--idempotent goes with --producer")
        if not args.operation:
            raise CliError("give --operation (or --producer, --consumer)")
        named = resources(args)
        if not named:
            raise CliError("give a resource: --topic, --group, --transactional-id or --cluster")
        for resource_type, _ in named:
            supported = SUPPORTED_OPERATIONS[resource_type]
            unsupported = [op for op in args.operation if op != "ALL" and op not in supported]
            if unsupported:
                raise CliError(f"{resource_type} supports only the operations {', '.join(sorted(supported))} "
                               f"and ALL, not {', '.join(unsupported)}")
        wanted = [(resource_type, name, args.operation) for resource_type, name in named]
    bindings = [Binding(resource_type, name, "LITERAL" if resource_type == "CLUSTER" else pattern, principal,
                        host, operation, permission)
                for resource_type, name, operations in wanted for operation in operations
                for principal, host, permission in entries]
    return list(dict.fromkeys(bindings))


def print_bindings(args: argparse.Namespace, bindings: list[Binding], key: str) -> None:
    rows = sorted(set(bindings))
    if args.output == "json":
        print_json({key: [binding.document() for binding in rows]})
    elif rows:
        print_table(HEADERS, [binding.row() for binding in rows])


# ---------------------------------------------------------------------------------------------------
# Talking to the cluster


def _admin(args: argparse.Namespace):
    from odradek.cli.topics import admin_client

    return admin_client(args)


def _from_client(acl) -> Binding:
    return Binding(acl.restype.name.replace("BROKER", "CLUSTER"), acl.name, acl.resource_pattern_type.name,
                   acl.principal, acl.host, acl.operation.name, acl.permission_type.name)


def _to_client(binding: Binding):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[binding.resource_type.replace("CLUSTER", "BROKER")], binding.resource_name,
                      ResourcePatternType[binding.pattern_type], binding.principal, binding.host,
                      AclOperation[binding.operation], AclPermissionType[binding.permission_type])


def _filters(args: argparse.Namespace, principals: list[str], hosts: list[str], operations: list[str],
             permission: str | None) -> list:
    """confluent-kafka filters: each resource named (or every resource) by each principal, host and operation
    asked for (or any)."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    named = resources(args) or [("ANY", None)]
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    permission_type = AclPermissionType[permission.upper()] if permission else AclPermissionType.ANY
    return [AclBindingFilter(ResourceType[resource_type.replace("CLUSTER", "BROKER")], name, pattern,
                             principal, host, AclOperation[operation], permission_type)
            for resource_type, name in named for principal in principals or [None] for host in hosts or [None]
            for operation in operations or ["ANY"]]


def describe(admin, args: argparse.Namespace, filters: list) -> list[Binding]:
    from confluent_kafka import KafkaException

    found: list[Binding] = []
    for acl_filter in filters:
        try:
            found += [_from_client(acl) for acl in
                      admin.describe_acls(acl_filter, request_timeout=args.timeout).result()]
        except KafkaException as exc:
            raise_for_kafka_error(exc, args, "cannot list ACLs")
    return list(dict.fromkeys(found))


# ---------------------------------------------------------------------------------------------------
# Commands


def list_acls(args: argparse.Namespace) -> int:
    principals = [check_principal(p) for p in args.principal]
    bindings = describe(_admin(args), args, _filters(args, [], [], [], None))
    if principals:
        bindings = [binding for binding in bindings if binding.principal in principals]
    print_bindings(args, bindings, "acls")
    return 0


def add_acls(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    bindings = bindings_to_add(args)
    admin = _admin(args)
    requested = {binding: _to_client(binding) for binding in bindings}
    futures = admin.create_acls(list(requested.values()), request_timeout=args.timeout)
    failures = []
    for binding, client_binding in requested.items():
        try:
            futures[client_binding].result()
        except KafkaException as exc:
            try:
                raise_for_kafka_error(exc, args, f"cannot add {_describe_binding(binding)}")
            except CliError as error:
                failures.append(str(error))
    if failures:
        raise CliError("; ".join(failures))
    print_bindings(args, bindings, "added")
    return 0


def remove_acls(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    if not resources(args):
        raise CliError("give a resource: --topic, --group, --transactional-id or --cluster")
    principals = [check_principal(p) for p in args.principal]
    filters = _filters(args, principals, args.host, args.operation, args.permission)
    admin = _admin(args)
    if args.dry_run:
        print_bindings(args, describe(admin, args, filters), "removed")
        return 0
    removed: list[Binding] = []
    for future in admin.delete_acls(filters, request_timeout=args.timeout).values():
        try:
            removed += [_from_client(acl) for acl in future.result()]
        except KafkaException as exc:
            raise_for_kafka_error(exc, args, "cannot remove ACLs")
    print_bindings(args, removed, "removed")
    return 0


def _describe_binding(binding: Binding) -> str:
    return (f"{binding.permission_type} {binding.operation} for {binding.principal} from {binding.host} on "
            f"{binding.resource_type} {binding.resource_name!r} ({binding.pattern_type})")
