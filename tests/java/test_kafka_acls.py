"""Kafka 4.0's kafka-acls.sh against a node with an authorizer (authorizer.class.name set to Kafka's
StandardAuthorizer, User:ANONYMOUS a super user): --add, --list and --remove with principals, hosts, operations,
every resource kind, pattern types, the --producer and --consumer conveniences, --bootstrap-controller, and
refusals, printing what the tool prints against Kafka 4.0.

The tool keeps a resource's entries, and the resources, in Java hash sets: their order differs from run to run,
against Kafka as against Odradek, so each block of its output is compared as a set of lines.
`KAFKA_TOOLS_TARGET=reference` runs this module against the reference Kafka broker, where every test passes.
"""

from __future__ import annotations

import pytest

from tests.java.conftest import running_tools_broker
from tests.reference_kafka import requires_reference

pytestmark = requires_reference

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}
ERROR = "Error while executing ACL command: "


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_tools_broker(tmp_path_factory.mktemp("acl-broker"), settings=AUTHORIZER) as broker:
        yield broker


@pytest.fixture
def tools(kafka_tools):
    return kafka_tools


def bs(broker) -> tuple[str, str]:
    return ("--bootstrap-server", broker.bootstrap)


def pattern(resource_type: str, name: str, pattern_type: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={resource_type}, name={name}, patternType={pattern_type})"


def entry(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"


def blocks(stdout: str, heading: str) -> dict[str, set[str]]:
    """The tool's output as {resource pattern: its entries}, for blocks that start with `heading` ("Adding ACLs
    for resource" or "Current ACLs for resource") and end with an empty line."""
    found: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in stdout.splitlines():
        if line.startswith(heading):
            assert line.rstrip().endswith("`:"), line
            resource = line[len(heading):].strip().removeprefix("`").removesuffix("`:")
            assert resource not in found, stdout
            current = found[resource] = set()
        elif line.strip() and current is not None:
            assert line.startswith(("\t", " \t")), stdout
            current.add(line.strip())
        else:
            current = None
    return found


def listed(tools, broker, *args: str) -> dict[str, set[str]]:
    result = tools.ok("kafka-acls", *bs(broker), "--list", *args)
    return blocks(result.stdout, "Current ACLs for resource ")


def list_until(tools, broker, expected: dict[str, set[str]], *args: str) -> None:
    """--list until it shows `expected` (a broker applies an ACL a moment after it is acknowledged, in Kafka)."""
    tools.run_until(lambda r: r.returncode == 0 and blocks(r.stdout, "Current ACLs for resource ") == expected,
                    "kafka-acls", *bs(broker), "--list", *args, timeout=30)


def test_add_prints_each_resources_new_entries_and_list_shows_them(tools, broker):
    added = tools.ok("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:bob", "--allow-principal",
                     "User:carol", "--deny-principal", "User:mallory", "--operation", "Write", "--operation",
                     "Describe", "--topic", "orders", "--resource-pattern-type", "prefixed")
    orders = pattern("TOPIC", "orders", "PREFIXED")
    entries = {entry(p, op, permission) for p, permission in (("User:bob", "ALLOW"), ("User:carol", "ALLOW"),
                                                              ("User:mallory", "DENY"))
               for op in ("WRITE", "DESCRIBE")}
    assert blocks(added.stdout, "Adding ACLs for resource ") == {orders: entries}, added
    assert added.lines[0] == f"Adding ACLs for resource `{orders}`: ", added
    list_until(tools, broker, {orders: entries}, "--topic", "orders", "--resource-pattern-type", "prefixed")

    again = tools.ok("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:bob", "--operation", "Write",
                     "--topic", "orders", "--resource-pattern-type", "prefixed")  # exists: still a success
    assert blocks(again.stdout, "Adding ACLs for resource ") == {orders: {entry("User:bob", "WRITE")}}
    assert listed(tools, broker, "--topic", "orders", "--resource-pattern-type", "prefixed") == {orders: entries}

    # match: what applies to a topic named orders-eu; literal (the default): that pattern alone
    assert listed(tools, broker, "--topic", "orders-eu", "--resource-pattern-type", "match") == {orders: entries}
    assert listed(tools, broker, "--topic", "orders") == {}
    with_hosts = tools.ok("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:dave", "--allow-host",
                          "10.0.0.1", "--allow-host", "10.0.0.2", "--deny-principal", "User:dave", "--deny-host",
                          "10.0.0.3", "--operation", "Read", "--topic", "orders-eu")
    eu = pattern("TOPIC", "orders-eu")
    eu_entries = {entry("User:dave", "READ", host="10.0.0.1"), entry("User:dave", "READ", host="10.0.0.2"),
                  entry("User:dave", "READ", "DENY", host="10.0.0.3")}
    assert blocks(with_hosts.stdout, "Adding ACLs for resource ") == {eu: eu_entries}, with_hosts
    list_until(tools, broker, {orders: entries, eu: eu_entries}, "--topic", "orders-eu",
               "--resource-pattern-type", "match")

    by_principal = tools.ok("kafka-acls", *bs(broker), "--list", "--principal", "User:dave")
    assert by_principal.lines[0] == "ACLs for principal `User:dave`", by_principal
    assert blocks(by_principal.stdout, "Current ACLs for resource ") == {eu: eu_entries}
    nobody = tools.ok("kafka-acls", *bs(broker), "--list", "--principal", "User:nobody")
    assert nobody.lines == ["ACLs for principal `User:nobody`"], nobody


def test_remove_with_force_removes_the_entries_named_or_every_entry_of_a_resource(tools, broker):
    tools.ok("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:erin", "--allow-principal", "User:fay",
             "--operation", "Read", "--operation", "Describe", "--group", "removals")
    group = pattern("GROUP", "removals")
    list_until(tools, broker, {group: {entry(p, op) for p in ("User:erin", "User:fay") for op in ("READ", "DESCRIBE")}},
               "--group", "removals")

    removed = tools.ok("kafka-acls", *bs(broker), "--remove", "--allow-principal", "User:erin", "--operation",
                       "Read", "--group", "removals", "--force")
    assert removed.stdout == "", removed
    list_until(tools, broker, {group: {entry("User:erin", "DESCRIBE"), entry("User:fay", "READ"),
                                       entry("User:fay", "DESCRIBE")}}, "--group", "removals")
    nothing = tools.ok("kafka-acls", *bs(broker), "--remove", "--allow-principal", "User:nobody", "--operation",
                       "Read", "--group", "removals", "--force")
    assert nothing.stdout == "", nothing

    everything = tools.ok("kafka-acls", *bs(broker), "--remove", "--group", "removals", "--force")
    assert everything.stdout == "", everything
    list_until(tools, broker, {}, "--group", "removals")

    asked = tools.run("kafka-acls", *bs(broker), "--remove", "--group", "removals")  # no --force: it asks
    assert asked.lines[0] == f"Are you sure you want to delete all ACLs for resource filter `{group}`? (y/n)", asked


def test_producer_and_consumer_conveniences_add_what_clients_need(tools, broker):
    producer = tools.ok("kafka-acls", *bs(broker), "--add", "--producer", "--allow-principal", "User:prod",
                        "--topic", "conv-topic", "--transactional-id", "conv-tx", "--idempotent")
    assert blocks(producer.stdout, "Adding ACLs for resource ") == {
        pattern("CLUSTER", "kafka-cluster"): {entry("User:prod", "IDEMPOTENT_WRITE")},
        pattern("TRANSACTIONAL_ID", "conv-tx"): {entry("User:prod", "WRITE"), entry("User:prod", "DESCRIBE")},
        pattern("TOPIC", "conv-topic"): {entry("User:prod", op) for op in ("WRITE", "DESCRIBE", "CREATE")},
    }, producer
    consumer = tools.ok("kafka-acls", *bs(broker), "--add", "--consumer", "--allow-principal", "User:cons",
                        "--topic", "conv-topic", "--group", "conv-group")
    assert blocks(consumer.stdout, "Adding ACLs for resource ") == {
        pattern("GROUP", "conv-group"): {entry("User:cons", "READ")},
        pattern("TOPIC", "conv-topic"): {entry("User:cons", "READ"), entry("User:cons", "DESCRIBE")},
    }, consumer
    list_until(tools, broker, {pattern("TOPIC", "conv-topic"): {
        entry("User:prod", "WRITE"), entry("User:prod", "DESCRIBE"), entry("User:prod", "CREATE"),
        entry("User:cons", "READ"), entry("User:cons", "DESCRIBE")}}, "--topic", "conv-topic")
    assert listed(tools, broker, "--cluster") == {
        pattern("CLUSTER", "kafka-cluster"): {entry("User:prod", "IDEMPOTENT_WRITE")}}
    assert listed(tools, broker, "--transactional-id", "conv-tx") == {
        pattern("TRANSACTIONAL_ID", "conv-tx"): {entry("User:prod", "WRITE"), entry("User:prod", "DESCRIBE")}}

    # --list without a resource: every binding, these among them
    everything = listed(tools, broker)
    assert everything[pattern("GROUP", "conv-group")] == {entry("User:cons", "READ")}
    tools.ok("kafka-acls", *bs(broker), "--remove", "--producer", "--allow-principal", "User:prod", "--topic",
             "conv-topic", "--transactional-id", "conv-tx", "--idempotent", "--force")
    list_until(tools, broker, {pattern("TOPIC", "conv-topic"): {entry("User:cons", "READ"),
                                                                entry("User:cons", "DESCRIBE")}},
               "--topic", "conv-topic")
    assert listed(tools, broker, "--cluster") == {}


def test_bootstrap_controller_adds_lists_and_removes_on_the_controller(tools, broker):
    controller = ("--bootstrap-controller", broker.controller_bootstrap)
    added = tools.ok("kafka-acls", *controller, "--add", "--allow-principal", "User:ctl", "--operation", "Describe",
                     "--group", "ctl-group", "--allow-host", "10.0.0.1")
    group = pattern("GROUP", "ctl-group")
    assert blocks(added.stdout, "Adding ACLs for resource ") == {group: {entry("User:ctl", "DESCRIBE",
                                                                                host="10.0.0.1")}}
    listed_there = tools.ok("kafka-acls", *controller, "--list", "--group", "ctl-group")
    assert blocks(listed_there.stdout, "Current ACLs for resource ") == {
        group: {entry("User:ctl", "DESCRIBE", host="10.0.0.1")}}
    list_until(tools, broker, {group: {entry("User:ctl", "DESCRIBE", host="10.0.0.1")}}, "--group", "ctl-group")
    tools.ok("kafka-acls", *controller, "--remove", "--group", "ctl-group", "--force")
    list_until(tools, broker, {}, "--group", "ctl-group")


def test_bad_input_fails_with_kafkas_errors(tools, broker):
    empty = tools.run("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:x", "--operation", "Read",
                      "--topic", "")
    assert empty.returncode == 1, empty
    assert empty.lines[:3] == [
        f"Adding ACLs for resource `{pattern('TOPIC', '')}`: ", f" \t{entry('User:x', 'READ')}", "",
    ], empty
    assert empty.lines[3] == (ERROR + "org.apache.kafka.common.errors.InvalidRequestException: "
                              "Invalid empty resource name"), empty
    # the tool's own checks, before it asks the broker
    colonless = tools.run("kafka-acls", *bs(broker), "--add", "--allow-principal", "alice", "--operation", "Read",
                          "--topic", "t")
    assert colonless.lines[0] == ERROR + ("expected a string in format principalType:principalName but got "
                                          "alice"), colonless
    matching = tools.run("kafka-acls", *bs(broker), "--add", "--allow-principal", "User:a", "--operation", "Read",
                         "--topic", "t", "--resource-pattern-type", "match")
    assert matching.returncode == 1 and matching.stderr.splitlines()[0] == (
        "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."), matching
    assert listed(tools, broker, "--topic", "t") == {}
