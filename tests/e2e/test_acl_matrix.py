"""The ACL matrix: every API family asked by principals with and without the ACL it needs, with a DENY
overriding that ALLOW, and with a PREFIXED pattern, against the reference Kafka 4.0 broker and an Odradek node
configured alike (SASL_PLAINTEXT with PLAIN users, Kafka's StandardAuthorizer, the admin a super user). Both
must answer the same error codes (and the same KIP-430 authorized operations and visible names).

Each case gets four principals of its own, one per variant, so all ACLs are created once up front:
  allow     ALLOW <operation> on the LITERAL resource
  none      no ACL for that operation on it (only what the request needs besides)
  deny      the ALLOW plus a DENY of the same operation on the same resource
  prefixed  ALLOW <operation> on a PREFIXED pattern the resource's name starts with
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import build_batch
from odradek.security.acl import AclOperation as OP
from odradek.security.acl import AclPermissionType, PatternType
from odradek.security.acl import ResourceType as RT
from tests.conftest import NodeProcess
from tests.e2e.raw_client import RawClient
from tests.java.conftest import _two_free_ports
from tests.reference_kafka import ReferenceBroker, requires_reference

pytestmark = requires_reference

VARIANTS = ("allow", "none", "deny", "prefixed")
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
CLUSTER = "kafka-cluster"
AUTH_ERRORS = {E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
               E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
ZERO = bytes(16)

# Differences left between the brokers, none of them in what is authorized: (case, variant) -> why. Each must
# still differ (the test says so once it is gone), so the list stays true.
_LEAVE_UNKNOWN_GROUP = ("LeaveGroup of a member of a group the coordinator does not know: Kafka answers NONE with "
                        "UNKNOWN_MEMBER_ID for the member, Odradek UNKNOWN_MEMBER_ID for the request")
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    ("leave_group", "allow"): _LEAVE_UNKNOWN_GROUP,
    ("leave_group", "prefixed"): _LEAVE_UNKNOWN_GROUP,
}


@dataclass(frozen=True)
class Case:
    """One API family: the resource whose ACL varies, what else the request needs, and the probe, which asks
    as the principal and returns what the client sees (error codes, authorized operations, visible names)."""

    name: str
    resource_type: RT
    operation: OP
    probe: Callable[[RawClient, str, Case], object]
    base: Callable[[Case], list[tuple]] = lambda case: []  # (resource type, name, pattern, operation) also allowed
    topics: bool = False  # a topic named as the case's resource, one per variant, created beforehand
    extra_topic: bool = False  # `<case>.t`, a topic the request touches besides the varied resource
    setup: Callable[[RawClient, Case, str], None] | None = None  # as admin, per variant resource

    def resource(self, variant: str) -> str:
        if self.resource_type == RT.CLUSTER:
            return CLUSTER
        return f"{self.name}.{'prefixed' if variant == 'prefixed' else variant}"

    @property
    def topic(self) -> str:
        return f"{self.name}.t"

    def user(self, variant: str) -> str:
        return f"{self.name}_{variant}"


def user_password(user: str) -> str:
    return f"{user}-pw"


# --- probes: requests as a client builds them, answers reduced to what the client sees


def _records() -> bytes:
    return bytes(build_batch([(None, b"value")]))


def partition_codes(topics, partitions_key="partitions", name_key="name", index_key="partition_index",
                    code_key="error_code") -> dict:
    return {(t[name_key], p[index_key]): p[code_key] for t in topics for p in t[partitions_key]}


def probe_produce(client, resource, case):
    response = client.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": resource, "partition_data": [{"index": 0, "records": _records()}]}]})
    return partition_codes(response["responses"], "partition_responses", index_key="index")


def probe_transactional_produce(client, resource, case):
    batch = bytes(build_batch([(None, b"value")], producer_id=1000, producer_epoch=0, base_sequence=0,
                              is_transactional=True))
    response = client.request(0, 9, {"transactional_id": resource, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": case.topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return partition_codes(response["responses"], "partition_responses", index_key="index")


def probe_fetch(client, resource, case):
    response = client.request(1, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [], "topics": [
            {"topic": resource, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                "last_fetched_epoch": -1, "log_start_offset": -1,
                                                "partition_max_bytes": 1 << 20}]}]})
    return response["error_code"], partition_codes(response["responses"], name_key="topic")


def probe_list_offsets(client, resource, case):
    response = client.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": resource, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return partition_codes(response["topics"])


def _metadata(client, names, auto_create=False, operations=True):
    return client.request(3, 12, {"topics": None if names is None else [{"name": n, "topic_id": ZERO} for n in names],
                                  "allow_auto_topic_creation": auto_create,
                                  "include_topic_authorized_operations": operations})


def probe_metadata(client, resource, case):
    return [(t["name"], t["error_code"], t["topic_authorized_operations"])
            for t in _metadata(client, [resource])["topics"]]


def probe_metadata_all_topics(client, resource, case):
    return sorted((t["name"], t["error_code"], t["topic_authorized_operations"])
                  for t in _metadata(client, None)["topics"] if t["name"].startswith(case.name + "."))


def probe_metadata_auto_create(client, resource, case):
    """Whether the topic was refused, and whether it exists after a while. (The first answer for a topic being
    created differs: Kafka says UNKNOWN_TOPIC_OR_PARTITION while it creates it, Odradek answers once created.)"""
    topics = _metadata(client, [resource], auto_create=True)["topics"]
    refused = [(t["name"], t["error_code"]) for t in topics if t["error_code"] in AUTH_ERRORS]
    deadline = time.monotonic() + (0 if refused else 10)
    while True:
        exists = _metadata(client, [resource])["topics"][0]["error_code"] == E.NONE
        if exists or time.monotonic() >= deadline:
            return refused, exists
        time.sleep(0.1)


def probe_describe_every_topic_partitions(client, resource, case):
    response = client.request(75, 0, {"topics": [], "response_partition_limit": 1000, "cursor": None})
    return sorted((t["name"], t["error_code"], t["topic_authorized_operations"]) for t in response["topics"]
                  if t["name"].startswith(case.name + "."))


def probe_describe_topic_partitions(client, resource, case):
    response = client.request(75, 0, {"topics": [{"name": resource}], "response_partition_limit": 100, "cursor": None})
    return [(t["name"], t["error_code"], t["topic_authorized_operations"]) for t in response["topics"]]


def probe_offset_for_leader_epoch(client, resource, case):
    response = client.request(23, 4, {"replica_id": -1, "topics": [
        {"topic": resource, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    return partition_codes(response["topics"], name_key="topic", index_key="partition")


def probe_delete_records(client, resource, case):
    response = client.request(21, 2, {"timeout_ms": 5000, "topics": [
        {"name": resource, "partitions": [{"partition_index": 0, "offset": 0}]}]})
    return partition_codes(response["topics"])


def probe_describe_producers(client, resource, case):
    response = client.request(61, 0, {"topics": [{"name": resource, "partition_indexes": [0]}]})
    return partition_codes(response["topics"])


def _config_results(response, key):
    return [(r["resource_type"], r["resource_name"], r["error_code"]) for r in response[key]]


def probe_describe_topic_configs(client, resource, case):
    return _config_results(client.request(32, 4, {"include_synonyms": False, "include_documentation": False,
                                                  "resources": [{"resource_type": 2, "resource_name": resource,
                                                                 "configuration_keys": ["retention.ms"]}]}), "results")


def probe_describe_broker_configs(client, resource, case):
    return _config_results(client.request(32, 4, {"include_synonyms": False, "include_documentation": False,
                                                  "resources": [{"resource_type": 4, "resource_name": "1",
                                                                 "configuration_keys": ["num.partitions"]}]}),
                           "results")


def probe_alter_topic_configs(client, resource, case):
    return _config_results(client.request(44, 1, {"validate_only": True, "resources": [
        {"resource_type": 2, "resource_name": resource, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}]}), "responses")


def probe_alter_broker_configs(client, resource, case):
    return _config_results(client.request(44, 1, {"validate_only": True, "resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "3600000"}]}]}), "responses")


def _create_topics(client, names, validate_only=True):
    response = client.request(19, 7, {"timeout_ms": 10000, "validate_only": validate_only, "topics": [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} for n in names]})
    return [(t["name"], t["error_code"], t.get("topic_config_error_code", 0)) for t in response["topics"]]


def probe_create_topics(client, resource, case):
    return _create_topics(client, [resource + ".new"] if case.resource_type == RT.CLUSTER else [resource])


def probe_delete_topics(client, resource, case):
    response = client.request(20, 6, {"timeout_ms": 10000, "topics": [{"name": resource, "topic_id": ZERO}]})
    return [(r["name"], r["error_code"]) for r in response["responses"]]


def probe_create_partitions(client, resource, case):
    response = client.request(37, 3, {"timeout_ms": 10000, "validate_only": True, "topics": [
        {"name": resource, "count": 2, "assignments": None}]})
    return [(r["name"], r["error_code"]) for r in response["results"]]


def _commit(client, group, topic, version=8):
    response = client.request(8, version, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                           "group_instance_id": None, "retention_time_ms": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]})
    return partition_codes(response["topics"])


def probe_offset_commit_group(client, resource, case):
    return _commit(client, resource, case.topic)


def probe_offset_commit_topic(client, resource, case):
    return _commit(client, case.name + ".g", resource)


def _offset_fetch(client, group, topic):
    response = client.request(9, 8, {"require_stable": False, "groups": [
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    return [(g["group_id"], g["error_code"], partition_codes(g["topics"])) for g in response["groups"]]


def probe_offset_fetch_group(client, resource, case):
    return _offset_fetch(client, resource, case.topic)


def probe_offset_fetch_topic(client, resource, case):
    return _offset_fetch(client, case.name + ".g", resource)


def probe_offset_fetch_every_topic(client, resource, case):
    response = client.request(9, 8, {"require_stable": False, "groups": [{"group_id": case.name + ".g",
                                                                          "topics": None}]})
    return [(g["error_code"], sorted(partition_codes(g["topics"]).items())) for g in response["groups"]]


def probe_offset_delete(client, resource, case):
    response = client.request(47, 0, {"group_id": resource, "topics": [
        {"name": case.topic, "partitions": [{"partition_index": 0}]}]})
    return response["error_code"], partition_codes(response["topics"])


def _find_coordinator(client, key, key_type):
    response = client.request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})
    return [(c["key"], c["error_code"]) for c in response["coordinators"]]


def probe_find_group_coordinator(client, resource, case):
    return _find_coordinator(client, resource, 0)


def probe_find_transaction_coordinator(client, resource, case):
    return _find_coordinator(client, resource, 1)


def probe_join_group(client, resource, case):
    response = client.request(11, 9, {"group_id": resource, "session_timeout_ms": 10000,
                                      "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                                      "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
                                      "reason": None})
    return response["error_code"]


def probe_sync_group(client, resource, case):
    return client.request(14, 5, {"group_id": resource, "generation_id": 1, "member_id": "nobody",
                                  "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                                  "assignments": []})["error_code"]


def probe_leave_group(client, resource, case):
    response = client.request(13, 5, {"group_id": resource, "members": [
        {"member_id": "nobody", "group_instance_id": None, "reason": None}]})
    return response["error_code"], [m["error_code"] for m in response["members"]]


def probe_heartbeat(client, resource, case):
    return client.request(12, 4, {"group_id": resource, "generation_id": 1, "member_id": "nobody",
                                  "group_instance_id": None})["error_code"]


def probe_describe_groups(client, resource, case):
    response = client.request(15, 5, {"groups": [resource], "include_authorized_operations": True})
    return [(g["group_id"], g["error_code"], g["authorized_operations"] if g["error_code"] == 0 else None)
            for g in response["groups"]]


def probe_list_groups(client, resource, case):
    response = client.request(16, 4, {"states_filter": []})
    return response["error_code"], sorted(g["group_id"] for g in response["groups"]
                                          if g["group_id"].startswith(case.name + "."))


def probe_delete_groups(client, resource, case):
    response = client.request(42, 2, {"groups_names": [resource]})
    return [(r["group_id"], r["error_code"]) for r in response["results"]]


def _consumer_heartbeat(client, group, topic):
    response = client.request(68, 0, {"group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None,
                                      "rack_id": None, "rebalance_timeout_ms": 10000,
                                      "subscribed_topic_names": [topic], "server_assignor": None,
                                      "topic_partitions": []})
    return response["error_code"]


def probe_consumer_heartbeat_group(client, resource, case):
    return _consumer_heartbeat(client, resource, case.topic)


def probe_consumer_heartbeat_topic(client, resource, case):
    return _consumer_heartbeat(client, case.name + ".g", resource)


def probe_consumer_group_describe(client, resource, case):
    response = client.request(69, 0, {"group_ids": [resource], "include_authorized_operations": True})
    return [(g["group_id"], g["error_code"]) for g in response["groups"]]


def _init_producer_id(client, transactional_id):
    return client.request(22, 4, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1})["error_code"]


def probe_init_transactional(client, resource, case):
    return _init_producer_id(client, resource)


def probe_init_idempotent(client, resource, case):
    return _init_producer_id(client, None)


def probe_add_partitions_to_txn_id(client, resource, case):
    return _add_partitions(client, resource, case.topic)


def probe_add_partitions_to_txn_topic(client, resource, case):
    return _add_partitions(client, case.name + ".tx", resource)


def _add_partitions(client, transactional_id, topic):
    response = client.request(24, 3, {"v3_and_below_transactional_id": transactional_id,
                                      "v3_and_below_producer_id": 1000, "v3_and_below_producer_epoch": 0,
                                      "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    return partition_codes(response["results_by_topic_v3_and_below"], "results_by_partition",
                           code_key="partition_error_code")


def probe_add_offsets_to_txn(client, resource, case):
    return client.request(25, 3, {"transactional_id": resource, "producer_id": 1000, "producer_epoch": 0,
                                  "group_id": case.name + ".g"})["error_code"]


def probe_end_txn(client, resource, case):
    return client.request(26, 3, {"transactional_id": resource, "producer_id": 1000, "producer_epoch": 0,
                                  "committed": True})["error_code"]


def probe_txn_offset_commit(client, resource, case):
    """A transaction's offset commit: InitProducerId and AddOffsetsToTxn first, when the id may be written."""
    producer_id, epoch = 1000, 0
    initialized = client.request(22, 4, {"transactional_id": resource, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
    steps = [initialized["error_code"]]
    if initialized["error_code"] == E.NONE:
        producer_id, epoch = initialized["producer_id"], initialized["producer_epoch"]
        steps.append(client.request(25, 3, {"transactional_id": resource, "producer_id": producer_id,
                                            "producer_epoch": epoch, "group_id": case.name + ".g"})["error_code"])
    response = client.request(28, 3, {"transactional_id": resource, "group_id": case.name + ".g",
                                      "producer_id": producer_id, "producer_epoch": epoch, "generation_id": -1,
                                      "member_id": "", "group_instance_id": None, "topics": [
        {"name": case.topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                             "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return steps, partition_codes(response["topics"])


def probe_describe_transactions(client, resource, case):
    response = client.request(65, 0, {"transactional_ids": [resource]})
    return [(s["transactional_id"], s["error_code"]) for s in response["transaction_states"]]


def probe_list_transactions(client, resource, case):
    response = client.request(66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    return response["error_code"], sorted(s["transactional_id"] for s in response["transaction_states"]
                                          if s["transactional_id"].startswith(case.name + "."))


def probe_describe_cluster(client, resource, case):
    response = client.request(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    return response["error_code"], response["cluster_authorized_operations"]


def probe_describe_log_dirs(client, resource, case):
    response = client.request(35, 4, {"topics": []})
    return response["error_code"]


def probe_describe_acls(client, resource, case):
    return client.request(29, 3, {"resource_type_filter": 2, "resource_name_filter": "nothing-here",
                                  "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                                  "operation": 1, "permission_type": 1})["error_code"]


def probe_create_acls(client, resource, case):
    response = client.request(30, 3, {"creations": [
        {"resource_type": 2, "resource_name": "acl-made-by-" + case.name, "resource_pattern_type": 3,
         "principal": "User:nobody", "host": "*", "operation": 3, "permission_type": 3}]})
    return [r["error_code"] for r in response["results"]]


def probe_elect_leaders(client, resource, case):
    response = client.request(43, 2, {"election_type": 0, "timeout_ms": 5000,
                                      "topic_partitions": [{"topic": case.topic, "partitions": [0]}]})
    return response["error_code"], partition_codes(response["replica_election_results"], "partition_result",
                                                   name_key="topic", index_key="partition_id")


def probe_list_partition_reassignments(client, resource, case):
    return client.request(46, 0, {"timeout_ms": 5000, "topics": None})["error_code"]


def probe_describe_user_scram(client, resource, case):
    # named users: Kafka 4.0 never answers an unauthorized request for every user (users null)
    response = client.request(50, 0, {"users": [{"name": "nobody"}]})
    return response["error_code"], [(r["user"], r["error_code"]) for r in response["results"]]


def probe_alter_user_scram(client, resource, case):
    response = client.request(51, 0, {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": []})
    return [(r["user"], r["error_code"]) for r in response["results"]]


def probe_describe_quorum(client, resource, case):
    return client.request(55, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                              "partitions": [{"partition_index": 0}]}]})["error_code"]


def probe_delete_acls(client, resource, case):
    response = client.request(31, 3, {"filters": [
        {"resource_type_filter": 2, "resource_name_filter": "nothing-here", "pattern_type_filter": 3,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]})
    return [r["error_code"] for r in response["filter_results"]]


def probe_alter_reassignments(client, resource, case):
    response = client.request(45, 0, {"timeout_ms": 5000, "topics": [
        {"name": case.topic, "partitions": [{"partition_index": 0, "replicas": None}]}]})
    return response["error_code"], partition_codes(response["responses"])


def probe_alter_replica_log_dirs(client, resource, case):
    response = client.request(34, 2, {"dirs": [{"path": "/no/such/dir", "topics": [
        {"name": case.topic, "partitions": [0]}]}]})
    return partition_codes(response["results"], name_key="topic_name")


def probe_unregister_broker(client, resource, case):
    return client.request(64, 0, {"broker_id": 99})["error_code"]


def probe_client_metrics_resources(client, resource, case):
    return client.request(74, 0, {})["error_code"]


def probe_describe_client_quotas(client, resource, case):
    return client.request(48, 1, {"components": [], "strict": False})["error_code"]


def probe_alter_client_quotas(client, resource, case):
    response = client.request(49, 1, {"validate_only": True, "entries": [
        {"entity": [{"entity_type": "user", "entity_name": "somebody"}],
         "ops": [{"key": "consumer_byte_rate", "value": 1000.0, "remove": False}]}]})
    return [e["error_code"] for e in response["entries"]]


def probe_write_txn_markers(client, resource, case):
    response = client.request(27, 1, {"markers": [
        {"producer_id": 1000, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
         "topics": [{"name": "no.such.topic", "partition_indexes": [0]}]}]})
    return [partition_codes(m["topics"]) for m in response["markers"]]


def probe_update_features(client, resource, case):
    return client.request(57, 1, {"timeout_ms": 5000, "feature_updates": [], "validate_only": True})["error_code"]


# --- the cases


def read_topic(case):
    return [(RT.TOPIC, case.topic, PatternType.LITERAL, OP.READ)]


def describe_topic(case):
    return [(RT.TOPIC, case.topic, PatternType.LITERAL, OP.DESCRIBE)]


def read_group(case):
    return [(RT.GROUP, case.name + ".g", PatternType.LITERAL, OP.READ)]


def write_txn(case):
    return [(RT.TRANSACTIONAL_ID, case.name + ".tx", PatternType.LITERAL, OP.WRITE)]


def describe_case_topics(case):
    return [(RT.TOPIC, case.name + ".", PatternType.PREFIXED, OP.DESCRIBE)]


def commit_offset_as_admin(admin, case, resource):
    assert _commit(admin, resource, case.topic) == {(case.topic, 0): E.NONE}


def commit_offset_of_topic_as_admin(admin, case, resource):
    assert _commit(admin, case.name + ".g", resource) == {(resource, 0): E.NONE}


def init_transaction_as_admin(admin, case, resource):
    wait_until(lambda: _init_producer_id(admin, resource) == E.NONE, f"a producer id for {resource}")


CASES = [
    Case("produce", RT.TOPIC, OP.WRITE, probe_produce, topics=True),
    Case("produce_txn", RT.TRANSACTIONAL_ID, OP.WRITE, probe_transactional_produce,
         base=lambda case: [(RT.TOPIC, case.topic, PatternType.LITERAL, OP.WRITE)], extra_topic=True),
    Case("fetch", RT.TOPIC, OP.READ, probe_fetch, topics=True),
    Case("list_offsets", RT.TOPIC, OP.DESCRIBE, probe_list_offsets, topics=True),
    Case("metadata", RT.TOPIC, OP.DESCRIBE, probe_metadata, topics=True),
    Case("metadata_all", RT.TOPIC, OP.READ, probe_metadata_all_topics, topics=True),
    Case("metadata_create", RT.TOPIC, OP.CREATE, probe_metadata_auto_create, base=describe_case_topics),
    Case("describe_partitions", RT.TOPIC, OP.DESCRIBE, probe_describe_topic_partitions, topics=True),
    Case("describe_all_partitions", RT.TOPIC, OP.DESCRIBE, probe_describe_every_topic_partitions, topics=True),
    Case("leader_epoch", RT.TOPIC, OP.DESCRIBE, probe_offset_for_leader_epoch, topics=True),
    Case("delete_records", RT.TOPIC, OP.DELETE, probe_delete_records, topics=True),
    Case("describe_producers", RT.TOPIC, OP.READ, probe_describe_producers, topics=True),
    Case("topic_configs", RT.TOPIC, OP.DESCRIBE_CONFIGS, probe_describe_topic_configs, topics=True),
    Case("broker_configs", RT.CLUSTER, OP.DESCRIBE_CONFIGS, probe_describe_broker_configs),
    Case("alter_topic_configs", RT.TOPIC, OP.ALTER_CONFIGS, probe_alter_topic_configs, topics=True),
    Case("alter_broker_configs", RT.CLUSTER, OP.ALTER_CONFIGS, probe_alter_broker_configs),
    Case("create_topics", RT.TOPIC, OP.CREATE, probe_create_topics),
    Case("create_topics_cluster", RT.CLUSTER, OP.CREATE, probe_create_topics),
    Case("delete_topics", RT.TOPIC, OP.DELETE, probe_delete_topics, topics=True),
    Case("create_partitions", RT.TOPIC, OP.ALTER, probe_create_partitions, topics=True),
    Case("commit_group", RT.GROUP, OP.READ, probe_offset_commit_group, base=read_topic, extra_topic=True),
    Case("commit_topic", RT.TOPIC, OP.READ, probe_offset_commit_topic, base=read_group, topics=True),
    Case("fetch_offsets_group", RT.GROUP, OP.DESCRIBE, probe_offset_fetch_group, base=describe_topic,
         extra_topic=True),
    Case("fetch_offsets_topic", RT.TOPIC, OP.DESCRIBE, probe_offset_fetch_topic,
         base=lambda case: [(RT.GROUP, case.name + ".g", PatternType.LITERAL, OP.DESCRIBE)], topics=True),
    Case("fetch_offsets_every_topic", RT.TOPIC, OP.DESCRIBE, probe_offset_fetch_every_topic,
         base=lambda case: [(RT.GROUP, case.name + ".g", PatternType.LITERAL, OP.DESCRIBE)], topics=True,
         setup=commit_offset_of_topic_as_admin),
    Case("offset_delete", RT.GROUP, OP.DELETE, probe_offset_delete, base=read_topic, extra_topic=True),
    Case("find_group", RT.GROUP, OP.DESCRIBE, probe_find_group_coordinator),
    Case("find_txn", RT.TRANSACTIONAL_ID, OP.DESCRIBE, probe_find_transaction_coordinator),
    Case("join_group", RT.GROUP, OP.READ, probe_join_group),
    Case("sync_group", RT.GROUP, OP.READ, probe_sync_group),
    Case("heartbeat", RT.GROUP, OP.READ, probe_heartbeat),
    Case("leave_group", RT.GROUP, OP.READ, probe_leave_group),
    Case("describe_groups", RT.GROUP, OP.DESCRIBE, probe_describe_groups),
    Case("list_groups", RT.GROUP, OP.DESCRIBE, probe_list_groups, extra_topic=True, setup=commit_offset_as_admin),
    Case("delete_groups", RT.GROUP, OP.DELETE, probe_delete_groups),
    Case("cg_heartbeat_group", RT.GROUP, OP.READ, probe_consumer_heartbeat_group, base=describe_topic,
         extra_topic=True),
    Case("cg_heartbeat_topic", RT.TOPIC, OP.DESCRIBE, probe_consumer_heartbeat_topic, base=read_group, topics=True),
    Case("cg_describe", RT.GROUP, OP.DESCRIBE, probe_consumer_group_describe),
    Case("init_txn", RT.TRANSACTIONAL_ID, OP.WRITE, probe_init_transactional),
    Case("init_idempotent", RT.CLUSTER, OP.IDEMPOTENT_WRITE, probe_init_idempotent),
    Case("init_idempotent_topic", RT.TOPIC, OP.WRITE, probe_init_idempotent),
    Case("add_partitions_txn", RT.TRANSACTIONAL_ID, OP.WRITE, probe_add_partitions_to_txn_id,
         base=lambda case: [(RT.TOPIC, case.topic, PatternType.LITERAL, OP.WRITE)], extra_topic=True),
    Case("add_partitions_topic", RT.TOPIC, OP.WRITE, probe_add_partitions_to_txn_topic, base=write_txn, topics=True),
    Case("add_offsets_txn", RT.TRANSACTIONAL_ID, OP.WRITE, probe_add_offsets_to_txn, base=read_group),
    Case("end_txn", RT.TRANSACTIONAL_ID, OP.WRITE, probe_end_txn),
    Case("txn_offset_commit", RT.TRANSACTIONAL_ID, OP.WRITE, probe_txn_offset_commit,
         base=lambda case: read_group(case) + read_topic(case), extra_topic=True),
    Case("describe_txns", RT.TRANSACTIONAL_ID, OP.DESCRIBE, probe_describe_transactions),
    Case("list_txns", RT.TRANSACTIONAL_ID, OP.DESCRIBE, probe_list_transactions, setup=init_transaction_as_admin),
    Case("describe_cluster", RT.CLUSTER, OP.DESCRIBE, probe_describe_cluster),
    Case("describe_log_dirs", RT.CLUSTER, OP.DESCRIBE, probe_describe_log_dirs),
    Case("describe_acls", RT.CLUSTER, OP.DESCRIBE, probe_describe_acls),
    Case("create_acls", RT.CLUSTER, OP.ALTER, probe_create_acls),
    Case("elect_leaders", RT.CLUSTER, OP.ALTER, probe_elect_leaders, extra_topic=True),
    Case("list_reassignments", RT.CLUSTER, OP.DESCRIBE, probe_list_partition_reassignments),
    Case("describe_scram", RT.CLUSTER, OP.DESCRIBE, probe_describe_user_scram),
    Case("alter_scram", RT.CLUSTER, OP.ALTER, probe_alter_user_scram),
    Case("describe_quorum", RT.CLUSTER, OP.DESCRIBE, probe_describe_quorum),
    Case("update_features", RT.CLUSTER, OP.ALTER, probe_update_features),
    Case("delete_acls", RT.CLUSTER, OP.ALTER, probe_delete_acls),
    Case("alter_reassignments", RT.CLUSTER, OP.ALTER, probe_alter_reassignments, extra_topic=True),
    Case("alter_log_dirs", RT.CLUSTER, OP.ALTER, probe_alter_replica_log_dirs, extra_topic=True),
    Case("unregister_broker", RT.CLUSTER, OP.ALTER, probe_unregister_broker),
    Case("client_metrics", RT.CLUSTER, OP.DESCRIBE_CONFIGS, probe_client_metrics_resources),
    Case("describe_quotas", RT.CLUSTER, OP.DESCRIBE_CONFIGS, probe_describe_client_quotas),
    Case("alter_quotas", RT.CLUSTER, OP.ALTER_CONFIGS, probe_alter_client_quotas),
    Case("write_markers", RT.CLUSTER, OP.ALTER, probe_write_txn_markers),
]


def acls_of(case: Case) -> list[tuple]:
    """(principal, resource type, name, pattern, operation, permission) of every ACL the case's users get."""
    bindings = []
    for variant in VARIANTS:
        principal = f"User:{case.user(variant)}"
        for resource_type, name, pattern, operation in case.base(case):
            bindings.append((principal, resource_type, name, pattern, operation, AclPermissionType.ALLOW))
        resource = case.resource(variant)
        if variant in ("allow", "deny"):
            bindings.append((principal, case.resource_type, resource, PatternType.LITERAL, case.operation,
                             AclPermissionType.ALLOW))
        if variant == "deny":
            bindings.append((principal, case.resource_type, resource, PatternType.LITERAL, case.operation,
                             AclPermissionType.DENY))
        if variant == "prefixed":
            prefix = CLUSTER if case.resource_type == RT.CLUSTER else f"{case.name}.pre"
            bindings.append((principal, case.resource_type, prefix, PatternType.PREFIXED, case.operation,
                             AclPermissionType.ALLOW))
    return bindings


# --- the two brokers


def broker_settings(port: int, controller_port: int, users: list[str]) -> dict[str, str]:
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{ADMIN}" '
            f'password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}" '
            + " ".join(f'user_{user}="{user_password(user)}"' for user in users) + ";")
    return {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # the controller listener is PLAINTEXT: the broker registers with its controller as ANONYMOUS
        "super.users": f"User:{ADMIN};User:ANONYMOUS",
        "process.roles": "broker,controller",
        "node.id": "1",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


@dataclass
class Target:
    kind: str
    bootstrap: str
    observations: dict = field(default_factory=dict)

    def client(self, user: str, password: str) -> RawClient:
        client = RawClient(self.bootstrap, timeout=30)
        client.sasl_plain(user, password)
        return client


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    users = [case.user(variant) for case in CASES for variant in VARIANTS]
    kafka_port, kafka_controller = _two_free_ports()
    odradek_port, odradek_controller = _two_free_ports()
    kafka = ReferenceBroker(tmp_path_factory.mktemp("acl-kafka"), kafka_port,
                            broker_settings(kafka_port, kafka_controller, users))
    odradek = NodeProcess(tmp_path_factory.mktemp("acl-odradek") / "data", port=odradek_port, settings={
        **broker_settings(odradek_port, odradek_controller, users),
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{odradek_port}",
        "controller.quorum.voters": f"1@127.0.0.1:{odradek_controller}"})
    kafka.start()
    try:
        odradek.start()
        try:
            both = [Target("kafka", kafka.bootstrap), Target("odradek", odradek.bootstrap)]
            for target in both:
                prepare(target)
            yield both
        finally:
            odradek.stop()
    finally:
        kafka.stop()


def prepare(target: Target) -> None:
    """As the admin: the internal topics, every case's topics, every ACL; then each case's setup."""
    with target.client(ADMIN, ADMIN_PASSWORD) as admin:
        wait_until(lambda: _find_coordinator(admin, "warm-up", 0)[0][1] == E.NONE, f"{target.kind}: offsets topic")
        wait_until(lambda: _find_coordinator(admin, "warm-up", 1)[0][1] == E.NONE, f"{target.kind}: txn topic")
        topics = [case.resource(variant) for case in CASES if case.topics for variant in VARIANTS]
        topics += [case.topic for case in CASES if case.extra_topic]
        for name, error, _ in _create_topics(admin, topics, validate_only=False):
            assert error == E.NONE, f"{target.kind}: creating {name}: {error}"
        wait_until(lambda: all(t["error_code"] == E.NONE and t["partitions"] and t["partitions"][0]["leader_id"] >= 0
                               for t in _metadata(admin, topics, operations=False)["topics"]),
                   f"{target.kind}: topics with leaders")
        bindings = [b for case in CASES for b in acls_of(case)]
        response = admin.request(30, 3, {"creations": [
            {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
             "principal": principal, "host": "*", "operation": operation, "permission_type": permission}
            for principal, resource_type, name, pattern, operation, permission in bindings]})
        assert {r["error_code"] for r in response["results"]} == {E.NONE}, response
        wait_until(lambda: acl_count(admin) >= len(bindings), f"{target.kind}: ACLs in the authorizer")
        for case in CASES:
            if case.setup is not None:
                for variant in VARIANTS:
                    case.setup(admin, case, case.resource(variant))


def acl_count(admin: RawClient) -> int:
    response = admin.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                                     "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                     "operation": 1, "permission_type": 1})
    return sum(len(resource["acls"]) for resource in response["resources"])


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# --- the matrix


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_acl_matrix(targets, case):
    seen = {}
    for target in targets:
        seen[target.kind] = {}
        for variant in VARIANTS:
            user = case.user(variant)
            with target.client(user, user_password(user)) as client:
                seen[target.kind][variant] = case.probe(client, case.resource(variant), case)
    kafka, odradek = seen["kafka"], seen["odradek"]
    differences = {variant: (kafka[variant], odradek[variant]) for variant in VARIANTS
                   if kafka[variant] != odradek[variant] and (case.name, variant) not in KNOWN_DIFFERENCES}
    assert not differences, f"{case.name}: variant -> (Kafka, Odradek): {differences}"
    gone = [variant for variant in VARIANTS
            if (case.name, variant) in KNOWN_DIFFERENCES and kafka[variant] == odradek[variant]]
    assert not gone, f"{case.name} {gone}: Odradek now answers as Kafka; remove them from KNOWN_DIFFERENCES"
    # the case tests something: with the ACL the answer is not the one without it, nor with the DENY too
    assert kafka["allow"] != kafka["none"] and kafka["allow"] != kafka["deny"], f"{case.name}: {kafka}"
    assert kafka["prefixed"] == _renamed(kafka["allow"], f"{case.name}.allow", f"{case.name}.prefixed"), kafka


def _renamed(observation, old: str, new: str):
    """The allow variant's observation as the prefixed variant would see it: its resource has another name."""
    if isinstance(observation, str):
        return observation.replace(old, new)
    if isinstance(observation, dict):
        return {_renamed(k, old, new): _renamed(v, old, new) for k, v in observation.items()}
    if isinstance(observation, list | tuple):
        return type(observation)(_renamed(item, old, new) for item in observation)
    return observation
