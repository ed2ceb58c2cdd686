"""ACLs from the command line: `odradek acls list|add|remove`, parsing and the bindings `add` builds (as
kafka-acls builds them, --producer and --consumer included) as units, then real `python -m odradek` runs against
a node with an authorizer, and one without."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from odradek.cli import acls
from odradek.cli import main as cli
from odradek.cli.main import CliError
from tests.conftest import NodeProcess

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}

# ---------------------------------------------------------------------------------------------------
# Units: parsing and the bindings to add


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def binding(resource_type: str, name: str, principal: str, operation: str, permission: str = "ALLOW",
            pattern: str = "LITERAL", host: str = "*") -> acls.Binding:
    return acls.Binding(resource_type, name, pattern, principal, host, operation, permission)


def test_acls_commands_take_resources_pattern_types_and_the_common_options():
    args = parse("acls", "list")
    assert (args.topic, args.group, args.transactional_id, args.cluster) == ([], [], [], False)
    assert args.resource_pattern_type == "any" and args.output == "table" and args.bootstrap_server == "localhost:9092"
    args = parse("acls", "add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--operation",
                 "describe_configs", "--topic", "t", "--group", "g", "--cluster", "--resource-pattern-type", "prefixed",
                 "--command-config", "c.properties", "-o", "json")
    assert args.operation == ["IDEMPOTENT_WRITE", "DESCRIBE_CONFIGS"]
    assert (args.topic, args.group, args.cluster, args.resource_pattern_type) == (["t"], ["g"], True, "prefixed")
    assert (args.command_config, args.output) == ("c.properties", "json")
    args = parse("acls", "remove", "--topic", "t", "--principal", "User:a", "--permission", "deny", "--dry-run")
    assert (args.resource_pattern_type, args.principal, args.permission, args.dry_run) == (
        "literal", ["User:a"], "deny", True)


@pytest.mark.parametrize("argv, message", [
    (["acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
     "error: argument --operation: unknown operation 'Fly'"),
    (["acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t",
      "--resource-pattern-type", "match"], "error: argument --resource-pattern-type: invalid choice: 'match'"),
    (["acls"], "error: the following arguments are required: ACTION"),
])
def test_usage_errors_are_one_error_line_and_exit_1(capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert len(err.splitlines()) == 1


def test_add_makes_a_binding_per_principal_host_operation_and_resource():
    args = parse("acls", "add", "--allow-principal", "User:a", "--allow-principal", "User:b", "--allow-host", "10.0.0.1",
                 "--deny-principal", "User:c", "--operation", "Read", "--operation", "Write", "--topic", "t",
                 "--resource-pattern-type", "prefixed")
    assert set(acls.bindings_to_add(args)) == {
        binding("TOPIC", "t", principal, operation, permission, "PREFIXED", host)
        for principal, host, permission in (("User:a", "10.0.0.1", "ALLOW"), ("User:b", "10.0.0.1", "ALLOW"),
                                            ("User:c", "*", "DENY"))
        for operation in ("READ", "WRITE")}


def test_producer_and_consumer_add_what_kafka_acls_adds():
    args = parse("acls", "add", "--producer", "--idempotent", "--allow-principal", "User:p", "--topic", "t",
                 "--transactional-id", "tx")
    assert set(acls.bindings_to_add(args)) == {
        binding("TOPIC", "t", "User:p", "WRITE"), binding("TOPIC", "t", "User:p", "DESCRIBE"),
        binding("TOPIC", "t", "User:p", "CREATE"), binding("TRANSACTIONAL_ID", "tx", "User:p", "WRITE"),
        binding("TRANSACTIONAL_ID", "tx", "User:p", "DESCRIBE"),
        binding("CLUSTER", "kafka-cluster", "User:p", "IDEMPOTENT_WRITE")}
    args = parse("acls", "add", "--consumer", "--allow-principal", "User:c", "--topic", "t", "--group", "g")
    assert set(acls.bindings_to_add(args)) == {
        binding("TOPIC", "t", "User:c", "READ"), binding("TOPIC", "t", "User:c", "DESCRIBE"),
        binding("GROUP", "g", "User:c", "READ")}


@pytest.mark.parametrize("argv, message", [
    (["--operation", "Read", "--topic", "t"], "give --allow-principal or --deny-principal"),
    (["--allow-principal", "alice", "--operation", "Read", "--topic", "t"],
     "expected a string in format principalType:principalName but got alice"),
    (["--allow-principal", "User:a", "--topic", "t"], "give --operation (or --producer, --consumer)"),
    (["--allow-principal", "User:a", "--operation", "Read"], "give a resource"),
    (["--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
     "TOPIC supports only the operations"),
    (["--consumer", "--allow-principal", "User:a", "--topic", "t"], "--consumer needs --topic and --group"),
    (["--producer", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"],
     "--operation cannot be given with --producer or --consumer"),
    (["--deny-principal", "User:a", "--allow-host", "h", "--operation", "Read", "--topic", "t"],
     "--allow-host needs --allow-principal"),
])
def test_add_refuses_what_kafka_acls_refuses(argv, message):
    with pytest.raises(CliError, match=message.replace("(", r"\(").replace(")", r"\)")):
        acls.bindings_to_add(parse("acls", "add", *argv))


# ---------------------------------------------------------------------------------------------------
# End to end


def odradek(node, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "odradek", *argv, "--bootstrap-server", node.bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check:
        assert proc.returncode == 0, f"odradek {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def acl_node(tmp_path_factory):
    node = NodeProcess(tmp_path_factory.mktemp("acls-cli") / "data", settings=AUTHORIZER).start()
    yield node
    node.stop()


def test_add_list_and_remove_acls(acl_node):
    added = odradek(acl_node, "acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
                    "--operation", "Describe", "--topic", "orders", "--group", "billing")
    assert added.stdout.splitlines() == [
        "RESOURCE_TYPE  NAME     PATTERN  PRINCIPAL   HOST  OPERATION  PERMISSION",
        "GROUP          billing  LITERAL  User:alice  *     DESCRIBE   ALLOW",
        "GROUP          billing  LITERAL  User:alice  *     READ       ALLOW",
        "TOPIC          orders   LITERAL  User:alice  *     DESCRIBE   ALLOW",
        "TOPIC          orders   LITERAL  User:alice  *     READ       ALLOW",
    ]
    odradek(acl_node, "acls", "add", "--deny-principal", "User:mallory", "--operation", "All", "--topic", "ord",
            "--resource-pattern-type", "prefixed")

    listed = json.loads(odradek(acl_node, "acls", "list", "--topic", "orders", "--resource-pattern-type", "match",
                                "-o", "json").stdout)
    assert listed == {"acls": [
        {"resource_type": "TOPIC", "resource_name": "ord", "pattern_type": "PREFIXED", "principal": "User:mallory",
         "host": "*", "operation": "ALL", "permission_type": "DENY"},
        {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL", "principal": "User:alice",
         "host": "*", "operation": "DESCRIBE", "permission_type": "ALLOW"},
        {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL", "principal": "User:alice",
         "host": "*", "operation": "READ", "permission_type": "ALLOW"},
    ]}
    everyone = odradek(acl_node, "acls", "list", "--principal", "User:mallory").stdout.splitlines()
    assert everyone[1:] == ["TOPIC          ord   PREFIXED  User:mallory  *     ALL        DENY"]

    planned = odradek(acl_node, "acls", "remove", "--topic", "orders", "--operation", "Read", "--dry-run")
    assert planned.stdout.splitlines()[1:] == ["TOPIC          orders  LITERAL  User:alice  *     READ       ALLOW"]
    removed = odradek(acl_node, "acls", "remove", "--topic", "orders", "--group", "billing", "-o", "json")
    assert [(b["resource_name"], b["operation"]) for b in json.loads(removed.stdout)["removed"]] == [
        ("billing", "DESCRIBE"), ("billing", "READ"), ("orders", "DESCRIBE"), ("orders", "READ")]
    assert odradek(acl_node, "acls", "list", "--topic", "orders").stdout == ""
    assert odradek(acl_node, "acls", "remove", "--topic", "orders").stdout == ""


def test_refusals_are_one_error_line(acl_node):
    empty = odradek(acl_node, "acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "",
                    check=False)
    assert empty.returncode == 1
    assert empty.stderr == ("error: cannot add ALLOW READ for User:a from * on TOPIC '' (LITERAL): "
                            "Invalid empty resource name\n")


def test_without_an_authorizer_add_and_remove_say_so(node):
    added = odradek(node, "acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t",
                    check=False)
    assert (added.returncode, added.stderr) == (
        1, "error: cannot add ALLOW READ for User:a from * on TOPIC 't' (LITERAL): No Authorizer is configured\n")
    removed = odradek(node, "acls", "remove", "--topic", "t", check=False)
    assert (removed.returncode, removed.stderr) == (1, "error: cannot remove ACLs: No Authorizer is configured\n")
