"""Differential tests: one scenario against Kafka 4.0 and against Odradek; a client must see the same.

Each scenario drives a broker with hand-built requests (Odradek's own codec, so every field is visible) and
returns what a client sees, with what legitimately differs between two brokers (ids, ports, timestamps)
normalised away. The observations must be equal, except for the scenarios in KNOWN_DIFFERENCES: each is
documented in docs/compatibility.md, and its test fails once the difference is gone, so the list stays true.
"""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path

import pytest

from odradek.protocol.records import build_batch
from tests.e2e.raw_client import RawClient
from tests.reference_kafka import requires_reference

pytestmark = requires_reference

COMPATIBILITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"

# scenario -> why Odradek answers differently (docs/compatibility.md says the same, at more length)
KNOWN_DIFFERENCES: dict[str, str] = {
    "produce_bad_records": "a batch over max.message.bytes: Odradek names its size and the limit in error_message, "
                           "where Kafka sends null",
    "order_of_described_topic_configs": "Kafka lists a topic's configs in the iteration order of a Java hash map; "
                                        "Odradek alphabetically",
}

TOPIC_CONFIG_KEYS = ["cleanup.policy", "compression.type", "max.message.bytes", "min.insync.replicas",
                     "retention.bytes", "retention.ms", "segment.bytes", "segment.ms", "message.timestamp.type",
                     "unclean.leader.election.enable"]
BROKER_CONFIG_KEYS = ["log.retention.hours", "log.retention.ms", "num.partitions", "message.max.bytes",
                      "log.segment.bytes", "num.io.threads", "node.id", "broker.id", "log.cleaner.threads",
                      "auto.create.topics.enable", "min.insync.replicas", "compression.type",
                      "offsets.topic.replication.factor", "no.such.setting"]


def connect(target) -> RawClient:
    return RawClient(target.bootstrap, timeout=30)


def create_topics(client: RawClient, topics: list[tuple[str, int, int, dict[str, str]]],
                  validate_only: bool = False) -> list[tuple]:
    response = client.request(19, 7, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": replication, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()]}
        for name, partitions, replication, configs in topics], "timeout_ms": 30000, "validate_only": validate_only})
    created = [t["name"] for t in response["topics"] if t["error_code"] == 0 and not validate_only]
    if created:
        wait_for_leaders(client, created)
    return [(t["name"], t["error_code"], t["error_message"]) for t in response["topics"]]


def wait_for_leaders(client: RawClient, topics: list[str]) -> None:
    """A broker learns of a new topic from the metadata log shortly after CreateTopics is answered; a scenario
    starts once every partition has a leader, as a client would wait."""
    deadline = time.monotonic() + 60
    while True:
        response = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": name} for name in topics],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        if all(t["error_code"] == 0 and t["partitions"] and all(p["leader_id"] >= 0 for p in t["partitions"])
               for t in response["topics"]):
            return
        assert time.monotonic() < deadline, f"no leaders for {topics} after 60 s: {response['topics']}"
        time.sleep(0.1)


def produce(client: RawClient, topic: str, partition: int, values: list[bytes], timestamp_ms: int = 1_700_000_000_000,
            acks: int = -1) -> dict:
    records = build_batch([(None, v, []) for v in values], timestamp_ms=timestamp_ms)
    response = client.request(0, 11, {"transactional_id": None, "acks": acks, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    answer = response["responses"][0]["partition_responses"][0]
    return {"error_code": answer["error_code"], "error_message": answer["error_message"],
            "record_errors": answer["record_errors"]}


# What a write to a partition created a moment ago can get while its leader is still taking over: Kafka's broker
# names the leader in Metadata a moment before its replica manager has made it one (seen on a loaded machine).
LEADER_NOT_READY_YET = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER


def write_for_setup(client: RawClient, topic: str, partition: int, values: list[bytes], **options) -> None:
    """A scenario's setup write, retried while the partition's leader is not ready yet; it must then succeed."""
    deadline = time.monotonic() + 60
    while True:
        answer = produce(client, topic, partition, values, **options)
        if answer["error_code"] not in LEADER_NOT_READY_YET or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer["error_code"] == 0, f"the setup write to {topic}-{partition} failed: {answer}"


def without_ids(value):
    """Topic ids, ports and cluster ids differ between any two brokers; everything else must not."""
    if isinstance(value, dict):
        return {k: ("<id>" if k in ("topic_id", "cluster_id") else without_ids(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_ids(v) for v in value]
    if isinstance(value, str):
        return re.sub(r":\d{4,5}\b", ":<port>", value)
    if isinstance(value, bytes):
        return "<id>" if len(value) == 16 else value
    return value


# ------------------------------------------------------------------------------------------- scenarios

def metadata_of_an_unknown_topic(target):
    with connect(target) as client:
        response = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": "no-such-topic"}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": True})
    topic = response["topics"][0]
    return {"error_code": topic["error_code"], "partitions": topic["partitions"], "is_internal": topic["is_internal"],
            "authorized_operations": topic["topic_authorized_operations"]}


def create_topics_with_bad_input(target):
    with connect(target) as client:
        return create_topics(client, [
            ("bad/name", 1, 1, {}),
            ("zero-partitions", 0, 1, {}),
            ("too-many-replicas", 1, 3, {}),
            ("bad-retention", 1, 1, {"retention.ms": "soon"}),
            ("bad-policy", 1, 1, {"cleanup.policy": "forever"}),
            ("negative-max-message", 1, 1, {"max.message.bytes": "-1"}),
            ("unknown-config", 1, 1, {"no.such.config": "1"}),
            ("tiny-segments", 1, 1, {"segment.bytes": "13"}),
        ], validate_only=True)


def create_a_topic_that_exists(target):
    with connect(target) as client:
        first = create_topics(client, [("exists", 2, 1, {})])
        second = create_topics(client, [("exists", 2, 1, {})])
    return {"first": first, "second": second}


def create_partitions_that_are_no_increase(target):
    with connect(target) as client:
        create_topics(client, [("grow", 3, 1, {})])
        answers = []
        for count in (2, 3, 4):
            response = client.request(37, 3, {"topics": [{"name": "grow", "count": count, "assignments": None}],
                                               "timeout_ms": 30000, "validate_only": True})
            answers.append([(r["name"], r["error_code"], r["error_message"]) for r in response["results"]])
        missing = client.request(37, 3, {"topics": [{"name": "no-such-topic", "count": 2, "assignments": None}],
                                          "timeout_ms": 30000, "validate_only": True})
        answers.append([(r["name"], r["error_code"], r["error_message"]) for r in missing["results"]])
    return answers


def produce_bad_records(target):
    with connect(target) as client:
        create_topics(client, [("small-records", 1, 1, {"max.message.bytes": "1000"})])
        write_for_setup(client, "small-records", 0, [b"x"])  # the leader is ready: the answers below are the checks'
        return {
            "too large": produce(client, "small-records", 0, [b"x" * 2000]),
            "fits": produce(client, "small-records", 0, [b"x" * 100]),
            "unknown partition": produce(client, "small-records", 5, [b"x"]),
            "unknown topic": produce(client, "no-such-topic", 0, [b"x"]),
        }


def api_versions_of_an_unsupported_version(target):
    with connect(target) as client:
        # ApiVersions v99, as a newer client sends it: header v2 (api key, version, correlation id, client id,
        # no tagged fields), then a body this broker cannot know.
        client.send_frame(struct.pack(">hhih", 18, 99, 7, 4) + b"diff" + b"\x00" + b"\x05future\x00")
        frame = client.recv_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    keys = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
    return {"correlation_id": correlation_id, "error_code": error_code, "api_keys": keys}


def describe_topic_configs(target):
    with connect(target) as client:
        create_topics(client, [("configured", 1, 1, {"retention.ms": "3600000", "cleanup.policy": "compact",
                                                      "max.message.bytes": "2000000"})])
        return describe_configs(client, [(2, "configured", TOPIC_CONFIG_KEYS), (2, "no-such-topic", None)])


def describe_broker_configs(target):
    with connect(target) as client:
        return describe_configs(client, [(4, "1", BROKER_CONFIG_KEYS), (4, "", None)])


def describe_configs(client: RawClient, resources: list[tuple[int, str, list[str] | None]]) -> list[dict]:
    """Every field of DescribeConfigs v4 but the documentation, for (resource type, name, keys) each."""
    response = client.request(32, 4, {"resources": [
        {"resource_type": kind, "resource_name": name, "configuration_keys": keys} for kind, name, keys in resources],
        "include_synonyms": True, "include_documentation": False})
    return [{"error_code": r["error_code"], "error_message": r["error_message"],
             "configs": sorted((c["name"], c["value"], c["read_only"], c["config_source"], c["is_sensitive"],
                                c["config_type"], [(s["name"], s["value"], s["source"]) for s in c["synonyms"]])
                               for c in r["configs"])} for r in response["results"]]


def list_offsets_by_time(target):
    with connect(target) as client:
        create_topics(client, [("timed", 1, 1, {})])
        for timestamp in (1_000_000, 3_000_000, 2_000_000):
            write_for_setup(client, "timed", 0, [b"a", b"b"], timestamp_ms=timestamp)
        answers = {}
        # earliest, latest, max timestamp, then by time: between, equal, after every record
        for query in (-2, -1, -3, 1_500_000, 2_000_000, 2_500_000, 9_000_000):
            response = client.request(2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "timed", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                  "timestamp": query}]}]})
            answer = response["topics"][0]["partitions"][0]
            answers[query] = (answer["error_code"], answer["timestamp"], answer["offset"])
        twice = client.request(2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "timed", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": t}
                                             for t in (-1, -2)]},
            {"name": "no-such-topic", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                      "timestamp": -1}]}]})
        answers["a partition twice"] = [[(p["partition_index"], p["error_code"], p["timestamp"], p["offset"])
                                         for p in t["partitions"]] for t in twice["topics"]]
    return answers


def describe_cluster(target):
    with connect(target) as client:
        response = client.request(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    return {"error_code": response["error_code"], "error_message": response["error_message"],
            "endpoint_type": response["endpoint_type"], "controller_id": response["controller_id"],
            "brokers": [(b["broker_id"], b["host"], b["rack"]) for b in response["brokers"]],
            "authorized_operations": response["cluster_authorized_operations"]}


def describe_topic_partitions(target):
    with connect(target) as client:
        create_topics(client, [("described", 2, 1, {})])
        response = client.request(75, 0, {"topics": [{"name": "described"}, {"name": "no-such-topic"}],
                                          "response_partition_limit": 2000, "cursor": None})
    return without_ids(response["topics"])


def offsets_of_groups(target):
    with connect(target) as client:
        create_topics(client, [("committed", 1, 1, {})])
        write_for_setup(client, "committed", 0, [b"a", b"b", b"c"])
        coordinator = find_coordinator(client, "committing")
        commit = until_coordinator_serves(lambda: client.request(8, 8, {
            "group_id": "committing", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [
                {"name": "committed", "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                      "committed_leader_epoch": -1, "committed_metadata": "m"}]},
                {"name": "no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                          "committed_leader_epoch": -1, "committed_metadata": None}]}]}),
            lambda response: [p["error_code"] for t in response["topics"] for p in t["partitions"]])
        fetched = client.request(9, 8, {"groups": [
            {"group_id": "committing", "topics": None}, {"group_id": "nobody", "topics": None}],
            "require_stable": True})
        described = client.request(15, 5, {"groups": ["committing", "nobody"], "include_authorized_operations": True})
        listed = client.request(16, 4, {"states_filter": []})
    # The order of topics and groups in a response carries no meaning: Kafka's differs from the request's.
    return {
        "coordinator": (coordinator["error_code"], coordinator["node_id"]),
        "commit": sorted((t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
                         for t in commit["topics"]),
        "fetch": [(g["group_id"], g["error_code"], [(t["name"], [(p["partition_index"], p["committed_offset"],
                                                                  p["metadata"], p["error_code"])
                                                                 for p in t["partitions"]]) for t in g["topics"]])
                  for g in fetched["groups"]],
        "describe": sorted((g["group_id"], g["error_code"], g["group_state"],
                            g["protocol_type"], g["members"], g["authorized_operations"])
                           for g in described["groups"]),
        "list": sorted((g["group_id"], g["protocol_type"], g["group_state"]) for g in listed["groups"]),
    }


def java_tools_describe_a_topic(target, tools):
    with connect(target) as client:
        create_topics(client, [("described-by-tools", 2, 1, {"retention.ms": "86400000",
                                                             "cleanup.policy": "compact,delete"})])
    bootstrap = ("--bootstrap-server", target.bootstrap)
    topic = tools.run("kafka-topics", *bootstrap, "--describe", "--topic", "described-by-tools")
    configs = tools.run("kafka-configs", *bootstrap, "--describe", "--entity-type", "topics",
                        "--entity-name", "described-by-tools")
    missing = tools.run("kafka-topics", *bootstrap, "--describe", "--topic", "no-such-topic")
    groups = tools.run("kafka-consumer-groups", *bootstrap, "--describe", "--group", "no-such-group")
    return [(r.returncode, sorted_configs(re.sub(r"TopicId: \S+", "TopicId: <id>", r.stdout)),
             [re.sub(r"^\[[^]]*\] ", "", line) for line in r.stderr.splitlines()[:1]])  # no log time stamp
            for r in (topic, configs, missing, groups)]


def sorted_configs(text: str) -> str:
    """Kafka lists a topic's configs in a Java hash map's order (see order_of_described_topic_configs)."""
    return re.sub(r"Configs: (\S*)", lambda m: "Configs: " + ",".join(sorted(re.split(r",(?=[a-z.]+=)", m[1]))),
                  text)


def order_of_described_topic_configs(target):
    with connect(target) as client:
        create_topics(client, [("in-order", 1, 1, {})])
        response = client.request(32, 4, {"resources": [
            {"resource_type": 2, "resource_name": "in-order", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    return [c["name"] for c in response["results"][0]["configs"]]


def metadata_of_a_topic(target):
    with connect(target) as client:
        create_topics(client, [("mapped", 3, 1, {})])
        response = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": "mapped"}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    topics = without_ids(response["topics"])
    for topic in topics:  # Kafka lists partitions in a hash map's order
        topic["partitions"].sort(key=lambda p: p["partition_index"])
    return {"brokers": [(b["node_id"], b["host"], b["rack"]) for b in response["brokers"]],
            "controller_id": response["controller_id"], "topics": topics}


def alter_configs_with_bad_input(target):
    with connect(target) as client:
        create_topics(client, [("altered", 1, 1, {})])

        def alter(resource_type: int, name: str, *changes: tuple[str, int, str | None]) -> tuple:
            response = client.request(44, 1, {"resources": [{
                "resource_type": resource_type, "resource_name": name, "configs": [
                    {"name": key, "config_operation": operation, "value": value} for key, operation, value in changes]}],
                "validate_only": True})
            answer = response["responses"][0]
            return answer["error_code"], answer["error_message"]

        set_, delete, append = 0, 1, 2
        return {
            "bad value": alter(2, "altered", ("retention.ms", set_, "soon")),
            "unknown name": alter(2, "altered", ("no.such.config", set_, "1")),
            "append to a number": alter(2, "altered", ("retention.ms", append, "5")),
            "delete what is not set": alter(2, "altered", ("retention.ms", delete, None)),
            "the same name twice": alter(2, "altered", ("retention.ms", set_, "1"), ("retention.ms", set_, "2")),
            "unknown topic": alter(2, "no-such-topic", ("retention.ms", set_, "1")),
            "broker value out of range": alter(4, "1", ("message.max.bytes", set_, "-5")),
            "broker setting not dynamic": alter(4, "1", ("num.partitions", set_, "3")),
            "unknown broker": alter(4, "7", ("log.retention.ms", set_, "1")),
        }


def delete_topics_that_do_not_exist(target):
    with connect(target) as client:
        response = client.request(20, 6, {"topics": [{"name": "no-such-topic", "topic_id": bytes(16)},
                                                     {"name": None, "topic_id": b"\x01" * 16}],
                                          "timeout_ms": 30000})
    return sorted((r["name"] or "", r["error_code"], r["error_message"]) for r in response["responses"])


def fetch_out_of_range(target):
    with connect(target) as client:
        create_topics(client, [("fetched", 1, 1, {})])
        write_for_setup(client, "fetched", 0, [b"a", b"b"])
        answers = []
        for offset in (1, 2, 3, -1):
            response = client.request(1, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": "fetched", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            answer = response["responses"][0]["partitions"][0]
            answers.append({k: answer[k] for k in ("error_code", "high_watermark", "last_stable_offset",
                                                   "log_start_offset", "aborted_transactions",
                                                   "preferred_read_replica")} | {"records": len(answer["records"] or b"")})
    return answers


def quota_entity(**names) -> list[dict]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in names.items()]


def quota_op(key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"key": key, "value": value, "remove": remove}


BAD_QUOTA_ALTERATIONS = [
    [{"entity": [], "ops": [quota_op("producer_byte_rate", 100)]}],
    [{"entity": quota_entity(user="dq-1"), "ops": [quota_op("producer_byte_rate", 1), quota_op("producer_byte_rate", 2)]}],
    [{"entity": quota_entity(user="dq-2"), "ops": [quota_op("producer_byte_rate", 1)]},
     {"entity": quota_entity(user="dq-2"), "ops": [quota_op("consumer_byte_rate", 1)]}],
    [{"entity": quota_entity(user="dq-3"), "ops": [quota_op("no_such_quota", 1)]}],
    [{"entity": quota_entity(user="dq-3"), "ops": [quota_op("producer_byte_rate", 1.5)]}],
    [{"entity": quota_entity(user="dq-3"), "ops": [quota_op("request_percentage", -1)]}],
    [{"entity": quota_entity(client_id="dq-3"), "ops": [quota_op("consumer_byte_rate", 2.0**64)]}],
    [{"entity": quota_entity(user=""), "ops": [quota_op("producer_byte_rate", 1)]}],
    [{"entity": quota_entity(group="dq"), "ops": [quota_op("producer_byte_rate", 1)]}],
    [{"entity": quota_entity(user="dq-4", ip="1.2.3.4"), "ops": [quota_op("producer_byte_rate", 1)]}],
    [{"entity": quota_entity(ip="no such host"), "ops": [quota_op("connection_creation_rate", 1)]}],
    [{"entity": quota_entity(ip="1.2.3.4"), "ops": [quota_op("connection_creation_rate", 2.0**31)]}],
    [{"entity": quota_entity(ip="1.2.3.4"), "ops": [quota_op("producer_byte_rate", 1)]}],
    [{"entity": quota_entity(user=None, client_id=None), "ops": [quota_op("controller_mutation_rate", 0.5),
                                                                 quota_op("no_such_quota", remove=True)]}],
    [{"entity": quota_entity(user="dq-5"), "ops": [quota_op("producer_byte_rate", 1)]},
     {"entity": quota_entity(user="dq-6"), "ops": [quota_op("bad", 1)]},
     {"entity": quota_entity(client_id="dq-7", user="dq-7"), "ops": [quota_op("consumer_byte_rate", 0)]}],
]


def alter_client_quotas_with_bad_input(target):
    with connect(target) as client:
        return [[(e["error_code"], e["error_message"], e["entity"]) for e in client.request(49, 1, {
            "entries": entries, "validate_only": True})["entries"]] for entries in BAD_QUOTA_ALTERATIONS]


def until_quotas_described(client: RawClient, components: list[dict], entities: int) -> None:
    """Wait until DescribeClientQuotas shows `entities` entities for the filter: Kafka acknowledges
    AlterClientQuotas once its controller commits the change, and a broker answers describes from its metadata
    image, which takes the change a moment later."""
    deadline = time.monotonic() + 60
    while True:
        entries = client.request(48, 1, {"components": components, "strict": False})["entries"] or []
        if len(entries) >= entities or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def describe_client_quotas_with_filters(target):
    def component(entity_type, match_type, match=None):
        return {"entity_type": entity_type, "match_type": match_type, "match": match}

    filters = [([component("", 2)], False), ([component("user", 2), component("user", 0, "a")], False),
               ([component("topic", 2)], False), ([component("user", 0)], False), ([component("user", 1, "a")], False),
               ([component("user", 2, "a")], False), ([component("user", 3)], False),
               ([component("ip", 2), component("client-id", 2)], False),
               ([component("user", 0, "dq-described")], True),
               ([component("user", 0, "dq-described"), component("client-id", 2)], False)]
    with connect(target) as client:
        client.request(49, 1, {"entries": [
            {"entity": quota_entity(user="dq-described"), "ops": [quota_op("producer_byte_rate", 1024)]},
            {"entity": quota_entity(user="dq-described", client_id="dq-app"),
             "ops": [quota_op("request_percentage", 12.5)]}], "validate_only": False})
        until_quotas_described(client, [component("user", 0, "dq-described")], 2)
        answers = []
        for components, strict in filters:
            response = client.request(48, 1, {"components": components, "strict": strict})
            entries = response["entries"]
            answers.append((response["error_code"], response["error_message"],
                            None if entries is None else sorted(str(e) for e in entries)))
        client.request(49, 1, {"entries": [
            {"entity": quota_entity(user="dq-described"), "ops": [quota_op("producer_byte_rate", remove=True)]},
            {"entity": quota_entity(user="dq-described", client_id="dq-app"),
             "ops": [quota_op("request_percentage", remove=True)]}], "validate_only": False})
    return answers


COORDINATOR_BUSY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
CONCURRENT_TRANSACTIONS = 51
UNSTABLE_OFFSET_COMMIT = 88


def until_coordinator_serves(send, error_codes, busy=frozenset(COORDINATOR_BUSY)):
    """send() again while the answer says the coordinator is still loading or moving (Kafka's loads its offsets
    partition some time after FindCoordinator names it), or another of the `busy` errors."""
    deadline = time.monotonic() + 60
    while True:
        response = send()
        if not set(error_codes(response)) & busy or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def find_coordinator(client: RawClient, key: str, key_type: int = 0) -> dict:
    """The group's (key_type 1: the transactional id's) coordinator, once there is one (the internal topic is
    created by the first request)."""
    deadline = time.monotonic() + 60
    while True:
        answer = client.request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})["coordinators"][0]
        if answer["error_code"] == 0 or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def offsets_in_transactions(target):
    """TxnOffsetCommit before AddOffsetsToTxn is refused (the coordinator verifies the transaction, KIP-890); after
    it, the offsets wait for the commit marker (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT), then count;
    and the commit of an instance a newer one fenced is refused and changes nothing."""
    txn_id, group = "txo", "txo-group"
    with connect(target) as client:
        create_topics(client, [("txn-offsets", 1, 1, {})])
        find_coordinator(client, txn_id, key_type=1)
        find_coordinator(client, group)

        def init() -> dict:
            return until_coordinator_serves(lambda: client.request(22, 4, {
                "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
                "producer_epoch": -1}), lambda r: [r["error_code"]], COORDINATOR_BUSY | {CONCURRENT_TRANSACTIONS})

        def commit(version: int, producer: dict, offset: int, topics=("txn-offsets",)) -> list:
            response = until_coordinator_serves(lambda: client.request(28, version, {
                "transactional_id": txn_id, "group_id": group, "producer_id": producer["producer_id"],
                "producer_epoch": producer["producer_epoch"], "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]} for topic in topics]}), partition_codes)
            return partition_codes(response)

        def fetched() -> list:
            response = client.request(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
            return [(g["error_code"], [(t["name"], [(p["partition_index"], p["committed_offset"], p["error_code"])
                                                    for p in t["partitions"]]) for t in g["topics"]])
                    for g in response["groups"]]

        def fetch_codes(groups: list) -> list:
            return [code for code, topics in groups for code in [code] + [p[2] for _, ps in topics for p in ps]]

        until_coordinator_serves(fetched, fetch_codes)  # Kafka's loads the group's partition a while after
        first = init()
        seen = {"init": first["error_code"],
                "before AddOffsetsToTxn, v3": commit(3, first, 1),
                "before AddOffsetsToTxn, v4": commit(4, first, 1),
                "before AddOffsetsToTxn, only a topic that does not exist": commit(3, first, 1, ["no-such-topic"]),
                "before AddOffsetsToTxn, with a topic that does not exist": sorted(
                    commit(3, first, 1, ["txn-offsets", "no-such-topic"])),
                "fetch": fetched()}
        seen["AddOffsetsToTxn"] = until_coordinator_serves(lambda: client.request(25, 3, {
            "transactional_id": txn_id, "producer_id": first["producer_id"],
            "producer_epoch": first["producer_epoch"], "group_id": group}), lambda r: [r["error_code"]],
            COORDINATOR_BUSY | {CONCURRENT_TRANSACTIONS})["error_code"]
        seen["after AddOffsetsToTxn"] = commit(3, first, 2)
        seen["fetch while the transaction is open"] = fetched()
        seen["EndTxn"] = client.request(26, 3, {"transactional_id": txn_id, "producer_id": first["producer_id"],
                                                "producer_epoch": first["producer_epoch"], "committed": True})[
            "error_code"]
        # the commit marker reaches the offsets partition a moment after EndTxn answers
        deadline = time.monotonic() + 60
        while not any(topics for _, topics in fetched()) and time.monotonic() < deadline:
            time.sleep(0.1)
        seen["fetch once committed"] = until_coordinator_serves(fetched, fetch_codes,
                                                                COORDINATOR_BUSY | {UNSTABLE_OFFSET_COMMIT})
        second = init()
        seen["fenced instance"] = commit(3, first, 3)
        seen["fetch after the fenced commit"] = fetched()
        seen["epoch bumped"] = second["producer_epoch"] - first["producer_epoch"]
    return seen


def partition_codes(response: dict) -> list:
    return [(t["name"], p["partition_index"], p["error_code"]) for t in response["topics"] for p in t["partitions"]]


SCENARIOS = {f.__name__: f for f in (
    metadata_of_an_unknown_topic, create_topics_with_bad_input, create_a_topic_that_exists,
    create_partitions_that_are_no_increase, produce_bad_records, api_versions_of_an_unsupported_version,
    describe_topic_configs, describe_broker_configs, list_offsets_by_time, describe_cluster,
    describe_topic_partitions, offsets_of_groups, order_of_described_topic_configs, metadata_of_a_topic,
    alter_configs_with_bad_input, delete_topics_that_do_not_exist, fetch_out_of_range,
    alter_client_quotas_with_bad_input, describe_client_quotas_with_filters, offsets_in_transactions)}


TOOL_SCENARIOS = {f.__name__: f for f in (java_tools_describe_a_topic,)}


@pytest.mark.parametrize("name", [*SCENARIOS, *TOOL_SCENARIOS])
def test_odradek_answers_as_kafka_does(name, kafka, odradek, kafka_tools):
    if name in TOOL_SCENARIOS:
        expected, seen = (without_ids(TOOL_SCENARIOS[name](target, kafka_tools)) for target in (kafka, odradek))
    else:
        expected, seen = (without_ids(SCENARIOS[name](target)) for target in (kafka, odradek))
    if name in KNOWN_DIFFERENCES:
        assert seen != expected, (f"{name} now answers as Kafka does: remove it from KNOWN_DIFFERENCES and from "
                                  "docs/compatibility.md")
    else:
        assert seen == expected, f"{name}:\nKafka:   {expected}\nOdradek: {seen}"


def test_every_known_difference_is_documented():
    documented = COMPATIBILITY_DOC.read_text()
    assert [name for name in KNOWN_DIFFERENCES if f"`{name}`" not in documented] == []
