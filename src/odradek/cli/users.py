"""`odradek users`: list, add and remove the SCRAM credentials of users (KIP-554).

What `kafka-configs.sh --entity-type users` does for SCRAM, through the admin API:
DescribeUserScramCredentials and AlterUserScramCredentials. As Kafka's admin client, the client salts the
password (a random salt, Hi(password, salt, iterations)): the password itself never leaves this process.

The parser imports no client library, so building the `odradek` parser stays cheap; confluent-kafka is
imported only when a command runs.
"""

from __future__ import annotations

import argparse
import sys

from odradek.cli.main import ArgumentParser, CliError, positive_int, raise_for_kafka_error
from odradek.cli.output import print_json, print_table

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_MECHANISM = "SCRAM-SHA-256"
DEFAULT_ITERATIONS = 4096  # Kafka's default, and its minimum


# ---------------------------------------------------------------------------------------------------
# Parser


def add_users_parser(commands, client, output) -> None:
    users = commands.add_parser("users", help="list, add and remove users' SCRAM credentials",
                                description="Manage the SCRAM credentials of users (SCRAM-SHA-256, SCRAM-SHA-512).")
    sub = users.add_subparsers(dest="users_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("list", parents=[client, output], help="list users and their SCRAM mechanisms",
                       description="List the users that have SCRAM credentials, with each mechanism's iterations. "
                                   "Without NAME, every user.")
    p.add_argument("names", metavar="NAME", nargs="*")
    p.set_defaults(run=list_users)

    p = sub.add_parser("add", parents=[client], help="add a user's SCRAM credential, or change its password",
                       description="Add a SCRAM credential for a user, or replace the one the user has for that "
                                   "mechanism (a new password). The password is salted here; only the salted "
                                   "form is sent.")
    p.add_argument("name", metavar="NAME")
    secret = p.add_mutually_exclusive_group(required=True)
    secret.add_argument("--password", metavar="PASSWORD", help="the password (visible to other local users in ps)")
    secret.add_argument("--password-file", metavar="FILE",
                        help="read the password from the first line of FILE ('-' for stdin)")
    p.add_argument("--mechanism", choices=MECHANISMS, default=DEFAULT_MECHANISM,
                   help=f"default {DEFAULT_MECHANISM}")
    p.add_argument("--iterations", metavar="N", type=positive_int, default=DEFAULT_ITERATIONS,
                   help=f"SCRAM iterations (default {DEFAULT_ITERATIONS}; Kafka accepts 4096..16384)")
    p.set_defaults(run=add_user)

    p = sub.add_parser("remove", parents=[client], help="remove a user's SCRAM credentials",
                       description="Remove a user's SCRAM credential for one mechanism, or all of them.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--mechanism", choices=MECHANISMS, help="only this mechanism (default: every one the user has)")
    p.set_defaults(run=remove_user)


# ---------------------------------------------------------------------------------------------------
# Pure parts


def read_password(args: argparse.Namespace) -> str:
    """--password, or the first line of --password-file (its line break dropped)."""
    if args.password is not None:
        password = args.password
    elif args.password_file == "-":
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise CliError(f"cannot read {args.password_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CliError(f"cannot read {args.password_file}: not UTF-8 text") from None
    if not password:
        raise CliError("the password is empty")
    return password


def mechanism_name(mechanism) -> str:
    """confluent-kafka's ScramMechanism.SCRAM_SHA_256 -> Kafka's name, SCRAM-SHA-256."""
    return mechanism.name.replace("_", "-")


def user_rows(descriptions: dict) -> list[dict]:
    """UserScramCredentialsDescriptions by user -> one document per user, sorted, mechanisms in Kafka's order."""
    return [{"user": user,
             "credentials": [{"mechanism": mechanism_name(info.mechanism), "iterations": info.iterations}
                             for info in sorted(descriptions[user].scram_credential_infos,
                                                key=lambda info: info.mechanism.value)]}
            for user in sorted(descriptions)]


# ---------------------------------------------------------------------------------------------------
# Talking to the cluster


def _admin(args: argparse.Namespace):
    from odradek.cli.topics import admin_client

    return admin_client(args)


def _is_not_found(exc) -> bool:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError.RESOURCE_NOT_FOUND


def describe(admin, args: argparse.Namespace, names: list[str]) -> tuple[dict, list[str]]:
    """(descriptions by user, the named users without credentials); no names: every user."""
    from confluent_kafka import KafkaException

    if not names:
        try:
            return admin.describe_user_scram_credentials(request_timeout=args.timeout).result(), []
        except KafkaException as exc:
            raise_for_kafka_error(exc, args, "cannot describe users")
    try:
        futures = admin.describe_user_scram_credentials(names, request_timeout=args.timeout)
    except (ValueError, TypeError) as exc:  # confluent-kafka's own checks: an empty user name
        raise CliError(f"cannot describe users: {exc}") from None
    found, missing = {}, []
    for name in names:
        try:
            found[name] = futures[name].result()
        except KafkaException as exc:
            if _is_not_found(exc):
                missing.append(name)
                continue
            raise_for_kafka_error(exc, args, f"cannot describe user '{name}'")
    return found, missing


def alter(admin, args: argparse.Namespace, alteration, action: str) -> None:
    from confluent_kafka import KafkaException

    try:
        futures = admin.alter_user_scram_credentials([alteration], request_timeout=args.timeout)
    except (ValueError, TypeError) as exc:  # confluent-kafka's own checks: an empty user name
        raise CliError(f"{action}: {exc}") from None
    try:
        futures[alteration.user].result()
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, action)


# ---------------------------------------------------------------------------------------------------
# Commands


def list_users(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.names))
    found, missing = describe(_admin(args), args, names)
    if missing:
        raise CliError("; ".join(f"user '{name}' has no SCRAM credentials" for name in missing))
    rows = user_rows(found)
    if args.output == "json":
        print_json({"users": rows})
    elif rows:
        print_table(["USER", "MECHANISM", "ITERATIONS"],
                    [(row["user"], c["mechanism"], c["iterations"]) for row in rows for c in row["credentials"]])
    return 0


def add_user(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from odradek.security.scram import random_nonce

    password = read_password(args)
    mechanism = ScramMechanism[args.mechanism.replace("-", "_")]
    # A salt as Kafka's admin client makes them; librdkafka computes Hi(password, salt, iterations).
    upsertion = UserScramCredentialUpsertion(args.name, ScramCredentialInfo(mechanism, args.iterations),
                                             password.encode(), random_nonce().encode())
    admin = _admin(args)
    alter(admin, args, upsertion, f"cannot set the {args.mechanism} credential of user '{args.name}'")
    print(f"Set the {args.mechanism} credential of user '{args.name}' ({args.iterations} iterations).")
    return 0


def remove_user(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    admin = _admin(args)
    if args.mechanism is not None:
        mechanisms = [args.mechanism]
    else:
        found, missing = describe(admin, args, [args.name])
        if missing:
            raise CliError(f"user '{args.name}' has no SCRAM credentials")
        mechanisms = [c["mechanism"] for row in user_rows(found) for c in row["credentials"]]
    # One request per mechanism: a user may appear only once in an AlterUserScramCredentials request.
    for name in mechanisms:
        deletion = UserScramCredentialDeletion(args.name, ScramMechanism[name.replace("-", "_")])
        alter(admin, args, deletion, f"cannot remove the {name} credential of user '{args.name}'")
        print(f"Removed the {name} credential of user '{args.name}'.")
    return 0
