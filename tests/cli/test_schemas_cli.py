"""The schema registry from the command line: `odradek schemas list|get|register|delete|check|config|mode`.

The pure parts (the schema type guess, --reference, the list rows, the registry URL) as units; then real
`python -m odradek schemas ...` runs against one real node serving a schema registry: Avro schemas from a file
and from stdin, listing, showing, compatibility checks that gate on the exit status, compatibility levels,
modes, soft and permanent deletes, a JSON Schema and a .proto registered with the type guessed, references,
and the errors (an invalid schema, a missing file, an unreachable registry) as one line each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from odradek.cli import main as cli
from odradek.cli import schemas
from tests.conftest import NodeProcess, free_port
from tests.registry.conftest import RegistryHttp, registry_settings, wait_until_serving

# ---------------------------------------------------------------------------------------------------
# Units


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


AVRO_V1 = {"type": "record", "name": "Order", "namespace": "com.example",
           "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]}
# v2 adds a field with a default: BACKWARD compatible with v1
AVRO_V2 = {**AVRO_V1, "fields": AVRO_V1["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}
# v3 adds a field without a default: a reader on v3 cannot read what v1 and v2 wrote
AVRO_INCOMPATIBLE = {**AVRO_V1, "fields": AVRO_V2["fields"] + [{"name": "country", "type": "string"}]}
JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
               "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
PROTO = """syntax = "proto3";
package com.example;

message Person {
  string name = 1;
  int32 age = 2;
}
"""


@pytest.mark.parametrize("path, text, expected", [
    ("person.proto", PROTO, "PROTOBUF"),
    ("PERSON.PROTO", "anything", "PROTOBUF"),
    ("-", PROTO, "PROTOBUF"),
    ("-", "// a comment\n/* another */\nmessage M { string a = 1; }", "PROTOBUF"),
    ("person.json", json.dumps(JSON_SCHEMA), "JSON"),
    ("-", '{"type": "object"}', "JSON"),
    ("-", '{"properties": {"a": {"type": "string"}}}', "JSON"),
    ("-", '{"$schema": "https://json-schema.org/draft/2020-12/schema"}', "JSON"),
    ("order.avsc", json.dumps(AVRO_V1), "AVRO"),
    ("-", '"string"', "AVRO"),
    ("-", '["null", "string"]', "AVRO"),
    ("-", "not a schema at all", "AVRO"),
    ("order.json", json.dumps(AVRO_V1), "AVRO"),
])
def test_the_schema_type_is_guessed_from_the_file_name_and_the_document(path, text, expected):
    assert schemas.guess_type(path, text) == expected


def test_schemas_commands_take_their_arguments_and_the_common_options(monkeypatch):
    args = parse("schemas", "register", "orders-value", "order.avsc", "--reference", "com.example.Id=ids:3",
                 "--reference", "a.proto=ns:sub:1", "--normalize", "--type", "avro", "-o", "json")
    assert (args.subject, args.file, args.schema_type, args.normalize, args.output) == (
        "orders-value", "order.avsc", "AVRO", True, "json")
    assert args.reference == [{"name": "com.example.Id", "subject": "ids", "version": 3},
                              {"name": "a.proto", "subject": "ns:sub", "version": 1}]
    args = parse("schemas", "get", "orders-value", "--version", "LATEST")
    assert (args.subject, args.version, args.id, args.output, args.timeout) == (
        "orders-value", "latest", None, "table", schemas.DEFAULT_TIMEOUT_S)
    assert parse("schemas", "get", "--id", "7").id == 7
    assert parse("schemas", "config", "--set", "full_transitive").level == "FULL_TRANSITIVE"
    assert parse("schemas", "mode", "s", "--set", "import", "--force").mode == "IMPORT"

    monkeypatch.delenv(schemas.ENVIRONMENT_VARIABLE, raising=False)
    assert schemas.Registry(parse("schemas", "list")).url == "http://127.0.0.1:8081"
    monkeypatch.setenv(schemas.ENVIRONMENT_VARIABLE, "http://registry.example:18081/")
    assert schemas.Registry(parse("schemas", "list")).url == "http://registry.example:18081"
    registry = schemas.Registry(parse("schemas", "list", "--registry", "https://ops:s%3Acret@r.example/api/"))
    assert registry.url == "https://r.example/api"
    assert registry.authorization == "Basic b3BzOnM6Y3JldA=="  # ops:s:cret


@pytest.mark.parametrize("argv, message", [
    (["schemas", "register", "s", "f", "--reference", "a=b"], "error: argument --reference: expected NAME=SUBJECT:"),
    (["schemas", "register", "s", "f", "--reference", "a=b:x"],
     "error: argument --reference: the version of reference a must be a positive number, got 'x'"),
    (["schemas", "register", "s", "f", "--type", "xml"], "error: argument --type: expected one of AVRO, JSON, "),
    (["schemas", "get", "s", "--version", "0"], "error: argument --version: expected a version number or latest"),
    (["schemas", "get", "s", "--version", "1", "--id", "1"], "error: argument --id: not allowed with argument"),
    (["schemas", "config", "--set", "sideways"], "error: argument --set: expected one of NONE, BACKWARD"),
    (["schemas", "config", "--set", "FULL", "--delete"], "error: argument --delete: not allowed with argument"),
    (["schemas", "check", "s"], "error: the following arguments are required: FILE"),
    (["schemas"], "error: the following arguments are required: ACTION"),
])
def test_usage_errors_are_one_error_line_and_exit_1(capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert len(err.splitlines()) == 1


def test_list_rows_are_one_per_subject_with_its_latest_version():
    rows = schemas.subject_rows([
        {"subject": "b", "version": 2, "id": 4, "schemaType": "JSON", "schema": "{}"},
        {"subject": "a", "version": 1, "id": 1, "schema": "\"string\"", "deleted": True},
        {"subject": "b", "version": 1, "id": 3, "schemaType": "JSON", "schema": "{}"},
        {"subject": "a", "version": 2, "id": 2, "schema": "\"long\""},
    ])
    assert rows == [
        {"subject": "a", "versions": [1, 2], "latest_version": 2, "latest_id": 2, "type": "AVRO",
         "deleted_versions": [1]},
        {"subject": "b", "versions": [1, 2], "latest_version": 2, "latest_id": 4, "type": "JSON"},
    ]


def test_schemas_print_indented_when_json_and_as_they_are_otherwise():
    assert schemas.pretty_schema('{"type":"string"}') == '{\n  "type": "string"\n}'
    assert schemas.pretty_schema(PROTO) == PROTO.rstrip("\n")


# ---------------------------------------------------------------------------------------------------
# End to end


@pytest.fixture(scope="module")
def registry_node(tmp_path_factory):
    """One node serving a schema registry for the module; each test uses its own subjects."""
    node = NodeProcess(tmp_path_factory.mktemp("schemas-cli") / "data", settings=registry_settings()).start()
    node.registry_url = node.settings["schema.registry.listener"]
    try:
        wait_until_serving(node.registry_url, log_text=node.log_text)
        yield node
    finally:
        node.stop()


def run_cli(*argv: str, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != schemas.ENVIRONMENT_VARIABLE}
    environment.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "odradek", *argv], input=input, capture_output=True, text=True,
                          timeout=120, env=environment)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def odradek(node, *argv: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli("schemas", *argv, "--registry", node.registry_url, input=input)
    if check:
        assert proc.returncode == 0, f"odradek schemas {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def odradek_json(node, *argv: str, input: str | None = None):
    return json.loads(odradek(node, *argv, "-o", "json", input=input).stdout)


def assert_error_line(proc: subprocess.CompletedProcess, expected: str, ending: str = "") -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith(expected) and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.rstrip("\n").endswith(ending), proc.stderr
    assert proc.stdout == ""


def write(path, document) -> str:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def listed(node, *argv: str) -> dict[str, dict]:
    return {row["subject"]: row for row in odradek_json(node, "list", *argv)["subjects"]}


def test_register_from_a_file_and_stdin_then_list_and_get(registry_node, tmp_path):
    subject = "cli-orders-value"
    v1 = write(tmp_path / "order.avsc", AVRO_V1)
    out = odradek(registry_node, "register", subject, v1).stdout
    assert out.startswith("Registered AVRO schema id ") and out.endswith(f" as version 1 of subject '{subject}'.\n")
    id1 = int(out.split()[4])
    out = odradek(registry_node, "register", subject, "-", input=json.dumps(AVRO_V2)).stdout
    assert out.endswith(f" as version 2 of subject '{subject}'.\n"), out
    id2 = int(out.split()[4])
    assert id2 != id1
    # The same schema again: the version that holds it, not a new one.
    assert odradek(registry_node, "register", subject, v1).stdout == (
        f"Registered AVRO schema id {id1} as version 1 of subject '{subject}'.\n")
    answer = odradek_json(registry_node, "register", subject, v1)
    assert (answer["id"], answer["version"], answer["subject"]) == (id1, 1, subject)

    lines = odradek(registry_node, "list", "--prefix", "cli-orders").stdout.splitlines()
    assert lines[0].split() == ["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE"]
    assert lines[1].split() == [subject, "1,2", "2", str(id2), "AVRO"]
    assert len(lines) == 2
    assert listed(registry_node, "--prefix", "cli-orders") == {subject: {
        "subject": subject, "versions": [1, 2], "latest_version": 2, "latest_id": id2, "type": "AVRO"}}
    assert odradek(registry_node, "list", "--prefix", "no-such-prefix").stdout == ""

    out = odradek(registry_node, "get", subject).stdout
    header, schema_text = out.split("\n", 1)
    assert header == f"subject: {subject}  version: 2  id: {id2}  type: AVRO"
    assert json.loads(schema_text) == AVRO_V2
    assert schema_text.startswith('{\n  "type": "record",\n')  # indented
    out = odradek(registry_node, "get", subject, "--version", "1").stdout
    assert out.splitlines()[0] == f"subject: {subject}  version: 1  id: {id1}  type: AVRO"
    assert json.loads(out.split("\n", 1)[1]) == AVRO_V1
    # json output is the registry's answer
    status, expected = RegistryHttp(registry_node.registry_url).get(f"/subjects/{subject}/versions/latest")
    assert status == 200
    assert odradek_json(registry_node, "get", subject) == expected
    assert odradek_json(registry_node, "get", subject, "--version", "latest") == expected
    status, expected = RegistryHttp(registry_node.registry_url).get(f"/schemas/ids/{id1}")
    assert odradek_json(registry_node, "get", "--id", str(id1)) == expected
    out = odradek(registry_node, "get", "--id", str(id1)).stdout
    assert out.splitlines()[0] == f"id: {id1}  type: AVRO  subjects: {subject} (version 1)"
    assert json.loads(out.split("\n", 1)[1]) == AVRO_V1

    assert_error_line(odradek(registry_node, "get", "cli-no-such-subject", check=False),
                      "error: Subject 'cli-no-such-subject' not found (error code 40401)")
    assert_error_line(odradek(registry_node, "get", subject, "--version", "9", check=False),
                      "error: Version 9 not found (error code 40402)")
    assert_error_line(odradek(registry_node, "get", "--id", "99999", check=False),
                      "error: Schema 99999 not found (error code 40403)")
    assert_error_line(odradek(registry_node, "get", check=False), "error: give SUBJECT [--version V] or --id N")


def test_check_exits_0_when_compatible_and_1_with_the_reasons_when_not(registry_node, tmp_path):
    subject = "cli-check-value"
    odradek(registry_node, "register", subject, write(tmp_path / "v1.avsc", AVRO_V1))
    compatible = write(tmp_path / "v2.avsc", AVRO_V2)
    incompatible = write(tmp_path / "bad.avsc", AVRO_INCOMPATIBLE)

    proc = odradek(registry_node, "check", subject, compatible)
    assert proc.stdout == f"Compatible: the AVRO schema may follow subject '{subject}'.\n"
    assert odradek_json(registry_node, "check", subject, compatible) == {"is_compatible": True, "messages": []}
    assert odradek(registry_node, "check", subject, "-", "--version", "1", input=json.dumps(AVRO_V2)).stdout == (
        f"Compatible: the AVRO schema may follow version 1 of subject '{subject}'.\n")

    proc = odradek(registry_node, "check", subject, incompatible, check=False)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Incompatible: the AVRO schema may not follow subject '{subject}':"
    assert len(lines) > 1 and all(line.startswith("  - ") for line in lines[1:])
    assert "country" in proc.stdout  # the reason names the field without a default
    assert proc.stderr == ""
    proc = run_cli("schemas", "check", subject, incompatible, "--version", "latest", "-o", "json",
                   "--registry", registry_node.registry_url)
    assert proc.returncode == 1
    answer = json.loads(proc.stdout)
    assert answer["is_compatible"] is False and any("country" in m for m in answer["messages"])

    # A subject without versions takes anything; a missing version of one that has some is an error.
    assert odradek(registry_node, "check", "cli-check-new", incompatible).stdout.startswith("Compatible")
    assert_error_line(odradek(registry_node, "check", subject, compatible, "--version", "5", check=False),
                      "error: Version 5 not found (error code 40402)")


def test_config_shows_sets_and_deletes_compatibility_levels(registry_node, tmp_path):
    subject = "cli-config-value"
    odradek(registry_node, "register", subject, write(tmp_path / "v1.avsc", AVRO_V1))
    assert odradek(registry_node, "config").stdout == "Compatibility level of the registry (global): BACKWARD\n"
    assert odradek(registry_node, "config", subject).stdout == (
        f"Compatibility level of subject '{subject}': BACKWARD (the global level)\n")
    assert odradek(registry_node, "config", subject, "--set", "none").stdout == (
        f"Set the compatibility level of subject '{subject}' to NONE.\n")
    assert odradek(registry_node, "config", subject).stdout == f"Compatibility level of subject '{subject}': NONE\n"
    assert odradek_json(registry_node, "config", subject) == {"compatibilityLevel": "NONE"}
    # At NONE the schema that was incompatible may follow, and is registered.
    incompatible = write(tmp_path / "bad.avsc", AVRO_INCOMPATIBLE)
    assert odradek(registry_node, "check", subject, incompatible).returncode == 0
    assert "as version 2 of" in odradek(registry_node, "register", subject, incompatible).stdout
    assert odradek(registry_node, "config", subject, "--delete").stdout == (
        f"Deleted the compatibility level of subject '{subject}' (it was NONE); it follows the global level.\n")
    assert odradek(registry_node, "config", subject).stdout.endswith("BACKWARD (the global level)\n")
    assert_error_line(odradek(registry_node, "config", subject, "--delete", check=False),
                      f"error: Subject '{subject}' not found (error code 40401)")  # as Confluent answers it

    assert odradek(registry_node, "config", "--set", "FULL_TRANSITIVE").stdout == (
        "Set the compatibility level of the registry (global) to FULL_TRANSITIVE.\n")
    try:
        assert odradek(registry_node, "config", subject).stdout.endswith("FULL_TRANSITIVE (the global level)\n")
        assert odradek_json(registry_node, "config") == {"compatibilityLevel": "FULL_TRANSITIVE"}
    finally:
        assert odradek(registry_node, "config", "--delete").stdout == (
            "Deleted the global compatibility level (it was FULL_TRANSITIVE); the registry's default applies.\n")
    assert odradek(registry_node, "config").stdout.endswith(": BACKWARD\n")


def test_mode_shows_sets_and_deletes_modes(registry_node, tmp_path):
    subject = "cli-mode-value"
    v1 = write(tmp_path / "v1.avsc", AVRO_V1)
    odradek(registry_node, "register", subject, v1)
    assert odradek(registry_node, "mode").stdout == "Mode of the registry (global): READWRITE\n"
    assert odradek(registry_node, "mode", subject).stdout == f"Mode of subject '{subject}': READWRITE (the global mode)\n"
    assert odradek(registry_node, "mode", subject, "--set", "readonly").stdout == (
        f"Set the mode of subject '{subject}' to READONLY.\n")
    assert odradek_json(registry_node, "mode", subject) == {"mode": "READONLY"}
    assert_error_line(odradek(registry_node, "register", subject, write(tmp_path / "v2.avsc", AVRO_V2), check=False),
                      f"error: Subject {subject} is in read-only mode (error code 42205)")
    assert_error_line(odradek(registry_node, "mode", subject, "--set", "IMPORT", check=False),
                      "error: Cannot import since found existing subjects (error code 42205)")
    assert odradek(registry_node, "mode", subject, "--set", "IMPORT", "--force").stdout.endswith("to IMPORT.\n")
    assert odradek(registry_node, "mode", subject, "--delete").stdout == (
        f"Deleted the mode of subject '{subject}' (it was IMPORT); it follows the global mode.\n")
    assert odradek(registry_node, "mode", subject).stdout.endswith("READWRITE (the global mode)\n")
    assert_error_line(odradek(registry_node, "mode", subject, "--delete", check=False),
                      f"error: Subject '{subject}' does not have subject-level mode configured (error code 40409)")
    assert_error_line(odradek(registry_node, "mode", "--delete", check=False), "error: --delete needs a SUBJECT")
    assert_error_line(odradek(registry_node, "mode", subject, "--force", check=False),
                      "error: --force goes with --set MODE")


def test_delete_soft_then_permanent(registry_node, tmp_path):
    subject = "cli-delete-value"
    odradek(registry_node, "register", subject, write(tmp_path / "v1.avsc", AVRO_V1))
    odradek(registry_node, "register", subject, write(tmp_path / "v2.avsc", AVRO_V2))

    assert odradek(registry_node, "delete", subject, "--version", "1").stdout == (
        f"Soft-deleted version 1 of subject '{subject}'.\n")
    assert listed(registry_node, "--prefix", subject)[subject]["versions"] == [2]
    row = listed(registry_node, "--prefix", subject, "--deleted")[subject]
    assert (row["versions"], row["deleted_versions"]) == ([1, 2], [1])
    lines = odradek(registry_node, "list", "--prefix", subject, "--deleted").stdout.splitlines()
    assert lines[0].split() == ["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE", "DELETED"]
    assert lines[1].split()[:3] == [subject, "1,2", "2"] and lines[1].split()[-1] == "1"
    assert odradek(registry_node, "delete", subject, "--version", "1", "--permanent").stdout == (
        f"Permanently deleted version 1 of subject '{subject}'.\n")
    assert listed(registry_node, "--prefix", subject, "--deleted")[subject]["versions"] == [2]

    assert_error_line(odradek(registry_node, "delete", subject, "--permanent", check=False),
                      f"error: Subject '{subject}' was not deleted first before being permanently deleted "
                      "(error code 40405)")
    assert odradek_json(registry_node, "delete", subject) == {"subject": subject, "versions": [2], "permanent": False}
    assert listed(registry_node, "--prefix", subject) == {}
    assert subject in listed(registry_node, "--prefix", subject, "--deleted")
    assert_error_line(odradek(registry_node, "get", subject, check=False),
                      f"error: Subject '{subject}' not found (error code 40401)")
    assert odradek(registry_node, "delete", subject, "--permanent").stdout == (
        f"Permanently deleted subject '{subject}' (version 2).\n")
    assert listed(registry_node, "--prefix", subject, "--deleted") == {}
    assert_error_line(odradek(registry_node, "delete", subject, check=False),
                      f"error: Subject '{subject}' not found (error code 40401)")


def test_json_schema_and_proto_files_are_registered_with_the_type_guessed(registry_node, tmp_path):
    out = odradek(registry_node, "register", "cli-person-json", write(tmp_path / "person.json", JSON_SCHEMA)).stdout
    assert out.startswith("Registered JSON schema id ") and out.endswith("as version 1 of subject 'cli-person-json'.\n")
    out = odradek(registry_node, "get", "cli-person-json").stdout
    assert out.splitlines()[0].endswith("  type: JSON")
    assert json.loads(out.split("\n", 1)[1]) == JSON_SCHEMA
    # JSON Schema from stdin, guessed from the document alone. As in Confluent's rules, a property removed from
    # an open content model is a compatible change; one added to it is not (old data may hold anything there).
    fewer = {**JSON_SCHEMA, "properties": {"name": {"type": "string"}}}
    assert odradek(registry_node, "check", "cli-person-json", "-", input=json.dumps(fewer)).stdout.startswith(
        "Compatible: the JSON schema may follow subject 'cli-person-json'.")
    more = {**JSON_SCHEMA, "properties": {**JSON_SCHEMA["properties"], "email": {"type": "string"}}}
    proc = odradek(registry_node, "check", "cli-person-json", "-", input=json.dumps(more), check=False)
    assert proc.returncode == 1 and proc.stdout.startswith("Incompatible: the JSON schema") and "email" in proc.stdout

    out = odradek(registry_node, "register", "cli-person-proto", write(tmp_path / "person.proto", PROTO)).stdout
    assert out.startswith("Registered PROTOBUF schema id ") and out.endswith("of subject 'cli-person-proto'.\n")
    out = odradek(registry_node, "get", "cli-person-proto").stdout
    assert out.splitlines()[0].endswith("  type: PROTOBUF")
    assert "message Person {" in out and "string name = 1;" in out
    assert odradek_json(registry_node, "get", "cli-person-proto")["schemaType"] == "PROTOBUF"
    rows = listed(registry_node, "--prefix", "cli-person-")
    assert {subject: row["type"] for subject, row in rows.items()} == {
        "cli-person-json": "JSON", "cli-person-proto": "PROTOBUF"}


def test_a_schema_with_a_reference(registry_node, tmp_path):
    address = {"type": "record", "name": "Address", "namespace": "com.example",
               "fields": [{"name": "street", "type": "string"}]}
    customer = {"type": "record", "name": "Customer", "namespace": "com.example",
                "fields": [{"name": "name", "type": "string"}, {"name": "address", "type": "com.example.Address"}]}
    odradek(registry_node, "register", "cli-address", write(tmp_path / "address.avsc", address))
    customer_file = write(tmp_path / "customer.avsc", customer)
    assert_error_line(odradek(registry_node, "register", "cli-customer", customer_file, check=False),
                      "error: Invalid schema ", "(error code 42201)")
    out = odradek(registry_node, "register", "cli-customer", customer_file,
                  "--reference", "com.example.Address=cli-address:1").stdout
    assert out.endswith("as version 1 of subject 'cli-customer'.\n")
    assert odradek(registry_node, "get", "cli-customer").stdout.splitlines()[0].endswith(
        "  references: com.example.Address=cli-address:1")
    assert odradek_json(registry_node, "get", "cli-customer")["references"] == [
        {"name": "com.example.Address", "subject": "cli-address", "version": 1}]


def test_bad_input_is_one_error_line(registry_node, tmp_path):
    invalid = write(tmp_path / "invalid.avsc", {"type": "record", "name": "Broken",
                                                "fields": [{"name": "x", "type": "no_such_type"}]})
    assert_error_line(odradek(registry_node, "register", "cli-bad", invalid, check=False),
                      "error: Invalid schema ", "(error code 42201)")
    refused = odradek(registry_node, "check", "cli-bad", "-", check=False, input="not a schema")
    assert refused.returncode == 1 and "  - Invalid schema " in refused.stdout  # verbose: a reason, as Confluent
    assert_error_line(odradek(registry_node, "register", "cli-bad", "-", "--type", "PROTOBUF", check=False,
                              input="message {"), "error: Invalid schema ", "(error code 42201)")
    assert listed(registry_node, "--prefix", "cli-bad", "--deleted") == {}

    missing = str(tmp_path / "missing.avsc")
    assert_error_line(odradek(registry_node, "register", "cli-bad", missing, check=False),
                      f"error: cannot read {missing}: No such file or directory")
    assert_error_line(odradek(registry_node, "check", "cli-bad", str(tmp_path), check=False),
                      f"error: cannot read {tmp_path}: Is a directory")

    nowhere = f"http://127.0.0.1:{free_port()}"
    assert_error_line(run_cli("schemas", "list", "--registry", nowhere),
                      f"error: cannot reach the schema registry at {nowhere}: Connection refused")
    # the URL from the environment
    assert_error_line(run_cli("schemas", "get", "s", env={schemas.ENVIRONMENT_VARIABLE: nowhere + "/"}),
                      f"error: cannot reach the schema registry at {nowhere}: Connection refused")
    assert_error_line(run_cli("schemas", "config", "--registry", "ftp://example.com"),
                      "error: invalid schema registry URL 'ftp://example.com'")
    # Something that is not a registry: the node's Kafka listener does not speak HTTP.
    proc = run_cli("schemas", "list", "--registry", f"http://{registry_node.bootstrap}", "--timeout", "5")
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1, \
        proc.stderr
