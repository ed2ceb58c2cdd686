"""Generate src/odradek/protocol/messages/*.py from Kafka's message specs (JSON with // comments).

Only facts are carried over: names, types, versions, nullable and tagged versions, tags and defaults.
The runtime never reads the JSON; the generated declarations are committed.

    python tools/generate_messages.py [--specs ../shared/kafka-protocol/message]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "odradek" / "protocol" / "messages"
DEFAULT_SPECS = ROOT.parent / "shared" / "kafka-protocol" / "message"

# API key -> Kafka name, for every API Odradek declares.
APIS = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 32: "DescribeConfigs",
    33: "AlterConfigs", 35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups",
    44: "IncrementalAlterConfigs", 47: "OffsetDelete", 60: "DescribeCluster", 61: "DescribeProducers",
    43: "ElectLeaders", 45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 52: "Vote",
    53: "BeginQuorumEpoch", 54: "EndQuorumEpoch", 55: "DescribeQuorum", 56: "AlterPartition", 62: "BrokerRegistration",
    59: "FetchSnapshot", 63: "BrokerHeartbeat", 65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 75: "DescribeTopicPartitions",
    29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 34: "AlterReplicaLogDirs", 38: "CreateDelegationToken",
    39: "RenewDelegationToken", 40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 57: "UpdateFeatures",
    64: "UnregisterBroker", 74: "ListClientMetricsResources", 48: "DescribeClientQuotas", 49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
}

PRIMITIVE_NAMES = {
    "bool": "Bool", "int8": "Int8", "int16": "Int16", "uint16": "UInt16", "int32": "Int32", "uint32": "UInt32",
    "int64": "Int64", "float64": "Float64", "string": "String", "bytes": "Bytes", "records": "Records",
    "uuid": "Uuid",
}


def snake_case(name: str) -> str:
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def load_spec(path: Path) -> dict:
    """Kafka's specs are JSON with whole-line and trailing // comments."""
    lines = []
    for line in path.read_text().splitlines():
        in_string = False
        cut = len(line)
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\" and in_string:
                i += 2
                continue
            if c == '"':
                in_string = not in_string
            elif c == "/" and not in_string and line.startswith("//", i):
                cut = i
                break
            i += 1
        lines.append(line[:cut])
    return json.loads("\n".join(lines))


def lit(value) -> str:
    """A Python literal, strings double-quoted."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def parse_default(kafka_type: str, value: str):
    if value == "null":
        return None
    if kafka_type == "bool":
        return value.lower() == "true"
    if kafka_type in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(value, 0)
    if kafka_type == "float64":
        return float(value)
    return value


class Emitter:
    def __init__(self, common: dict[str, dict]):
        self.common = common
        self.used: set[str] = {"Api", "Field"}
        self.common_emitted: dict[str, str] = {}  # struct name -> constant name
        self.preamble: list[str] = []

    def type_expr(self, field: dict, indent: int) -> str:
        kafka_type = field["type"]
        if kafka_type.startswith("[]"):
            elem = kafka_type[2:]
            self.used.add("Array")
            if elem in PRIMITIVE_NAMES:
                self.used.add(PRIMITIVE_NAMES[elem])
                return f"Array({PRIMITIVE_NAMES[elem]})"
            return f"Array({self.struct_expr(elem, field.get('fields'), indent)})"
        if kafka_type in PRIMITIVE_NAMES:
            self.used.add(PRIMITIVE_NAMES[kafka_type])
            return PRIMITIVE_NAMES[kafka_type]
        return self.struct_expr(kafka_type, field.get("fields"), indent)

    def struct_expr(self, name: str, fields: list | None, indent: int) -> str:
        self.used.add("Struct")
        if fields is None:  # a common struct: declared once at module level
            if name not in self.common_emitted:
                const = snake_case(name).upper()
                self.common_emitted[name] = const
                body = self.fields(self.common[name]["fields"], 1)
                self.preamble.append(f"{const} = Struct(\n{body}\n    name={lit(name)},\n)\n")
            return self.common_emitted[name]
        pad = "    " * indent
        return f"Struct(\n{self.fields(fields, indent + 1)}\n{pad}    name={lit(name)},\n{pad})"

    def fields(self, fields: list[dict], indent: int) -> str:
        return "\n".join(self.field(f, indent) for f in fields)

    def field(self, f: dict, indent: int) -> str:
        pad = "    " * indent
        args = [lit(snake_case(f["name"])), self.type_expr(f, indent)]
        if f.get("versions", "0+") != "0+":
            args.append(f"versions={lit(f['versions'])}")
        if "nullableVersions" in f:
            args.append(f"nullable_versions={lit(f['nullableVersions'])}")
        if "taggedVersions" in f:
            args.append(f"tagged_versions={lit(f['taggedVersions'])}")
        if "tag" in f:
            args.append(f"tag={f['tag']!r}")
        if "default" in f:
            args.append(f"default={lit(parse_default(f['type'], str(f['default'])))}")
        return f"{pad}Field({', '.join(args)}),"


def versions_range(text: str) -> tuple[int, int]:
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def generate_api(key: int, name: str, specs: Path) -> tuple[str, str, str]:
    request = load_spec(specs / f"{name}Request.json")
    response = load_spec(specs / f"{name}Response.json")
    for spec in (request, response):
        if spec["apiKey"] != key:
            raise SystemExit(f"{name}: apiKey {spec['apiKey']} != {key}")
    if request["validVersions"] != response["validVersions"] or \
            request["flexibleVersions"] != response["flexibleVersions"]:
        raise SystemExit(f"{name}: request and response disagree on valid or flexible versions")
    lo, hi = versions_range(request["validVersions"])
    flexible = request["flexibleVersions"]
    flexible_from = None if flexible == "none" else int(flexible.rstrip("+"))

    common: dict[str, dict] = {}
    for spec in (request, response):
        for struct_ in spec.get("commonStructs", []):
            if struct_["name"] in common and common[struct_["name"]] != struct_:
                raise SystemExit(f"{name}: common struct {struct_['name']} differs between request and response")
            common[struct_["name"]] = struct_
    em = Emitter(common)
    req_fields = em.fields(request["fields"], 2)
    resp_fields = em.fields(response["fields"], 2)
    module = snake_case(name)
    const = module.upper()
    schema_names = ", ".join(sorted(em.used, key=lambda n: (n.lower(), n)))
    preamble = "\n".join(em.preamble)
    text = (
        f'"""{name} (API key {key}), from Kafka\'s {name}Request/Response.json by tools/generate_messages.py."""\n\n'
        f"from odradek.protocol.schema import {schema_names}\n\n"
        + (f"{preamble}\n" if preamble else "")
        + f"{const} = Api(\n"
        f"    key={key},\n"
        f"    name={lit(name)},\n"
        f"    valid_versions=({lo}, {hi}),\n"
        f"    flexible_from={flexible_from},\n"
        f"    request=[\n{req_fields}\n    ],\n"
        f"    response=[\n{resp_fields}\n    ],\n"
        f")\n"
    )
    return module, const, text


def generate(specs: Path, out: Path) -> list[Path]:
    written = []
    registry = []
    for key, name in sorted(APIS.items()):
        module, const, text = generate_api(key, name, specs)
        path = out / f"{module}.py"
        path.write_text(text)
        written.append(path)
        registry.append((module, const))
    imports = "\n".join(f"from odradek.protocol.messages.{module} import {const}" for module, const in
                        sorted(registry))
    names = ",\n    ".join(const for _, const in registry)
    init = (
        '"""Registry of the declared Kafka APIs (generated by tools/generate_messages.py; do not edit)."""\n\n'
        "from odradek.protocol.schema import Api\n\n"
        f"{imports}\n\n"
        f"SUPPORTED_APIS: tuple[Api, ...] = (\n    {names},\n)\n\n"
        "API_BY_KEY: dict[int, Api] = {api.key: api for api in SUPPORTED_APIS}\n"
        "_API_BY_NAME: dict[str, Api] = {api.name: api for api in SUPPORTED_APIS}\n\n\n"
        "def api_by_name(name: str) -> Api:\n"
        '    """The Api called `name` in Kafka\'s spelling ("Produce", "ApiVersions"); KeyError if undeclared."""\n'
        "    return _API_BY_NAME[name]\n"
    )
    (out / "__init__.py").write_text(init)
    written.append(out / "__init__.py")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=DEFAULT_SPECS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    written = generate(args.specs, args.out)
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():  # normalise import order so the output is lint-clean
        subprocess.run([str(ruff), "check", "--fix", "--quiet", *map(str, written)], check=False)
    print(f"wrote {len(written)} files to {args.out}")


if __name__ == "__main__":
    main()
