"""Authorization of the administrative APIs, as Kafka's controller (where brokers forward them) and brokers
check them: CreateTopics (CREATE on the cluster or on each topic; DESCRIBE_CONFIGS to see the created
topic's configs), DeleteTopics (DELETE on the cluster or on each topic; a topic the caller may not DESCRIBE
is refused without saying whether it exists), CreatePartitions (ALTER on each topic), DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs (DESCRIBE_CONFIGS or ALTER_CONFIGS on each topic or group, on the
cluster for broker, broker-logger and client-metrics resources), the ACL APIs (DESCRIBE or ALTER on the
cluster), and the cluster-wide ones that need one operation on the cluster: log dirs, leader elections,
reassignments, client quotas, SCRAM credentials, the quorum, features, unregistering a broker, client
metrics resources."""

from __future__ import annotations

from collections import Counter

from odradek.broker.authorization.access import (
    ZERO_UUID,
    Answer,
    Gate,
    Proceed,
    Rule,
    refused_message,
    requires_cluster,
    top_level_error,
    top_level_error_with_message,
)
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
FIRST_TOPIC_ID_DELETE = 6
# config resource types
TOPIC_CONFIGS, BROKER_CONFIGS, BROKER_LOGGER, CLIENT_METRICS, GROUP_CONFIGS = 2, 4, 8, 16, 32
CLUSTER_CONFIG_RESOURCES = frozenset({BROKER_CONFIGS, BROKER_LOGGER, CLIENT_METRICS})


# --- topics


def authorize_create_topics(gate: Gate) -> Answer | Proceed | None:
    """Names given more than once, and `__cluster_metadata`, are the handler's to refuse (INVALID_REQUEST)
    before any authorization, as in Kafka."""
    request, access = gate.request, gate.access
    counts = Counter(t["name"] for t in request["topics"])
    names = {name for name, count in counts.items() if count == 1 and name != CLUSTER_METADATA_TOPIC}
    creatable = names if access.cluster(AclOperation.CREATE) else access.allowed_names(
        AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = access.allowed_names(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    refused = names - creatable
    hidden_configs = names - describable
    if not refused and not hidden_configs:
        return None
    refused_results = [{"name": t["name"], "topic_id": ZERO_UUID, "error_code": TOPIC_DENIED,
                        "error_message": "Authorization failed.", "topic_config_error_code": ErrorCode.NONE,
                        "num_partitions": -1, "replication_factor": -1, "configs": []}
                       for t in request["topics"] if t["name"] in refused]
    kept = [t for t in request["topics"] if t["name"] not in refused]

    def finish(response: dict) -> dict:
        results = [{**r, "configs": [], "num_partitions": -1, "replication_factor": -1,
                    "topic_config_error_code": TOPIC_DENIED}
                   if r["name"] in hidden_configs and r["error_code"] == ErrorCode.NONE else r
                   for r in response["topics"]]
        return {**response, "topics": results + refused_results}

    if not kept:
        return Answer(finish({"throttle_time_ms": 0, "topics": []}))
    return Proceed({**request, "topics": kept}, finish)


def authorize_delete_topics(gate: Gate) -> Answer | Proceed | None:
    request, access, version = gate.request, gate.access, gate.version
    if access.cluster(AclOperation.DELETE):
        return None
    image = gate.node.image
    if version >= FIRST_TOPIC_ID_DELETE:
        entries = [(t.get("name"), t.get("topic_id", ZERO_UUID)) for t in request["topics"]]
    else:
        entries = [(name, ZERO_UUID) for name in request["topic_names"]]

    def resolved(name: str | None, topic_id: bytes) -> str | None:
        if name is None and topic_id != ZERO_UUID:
            topic = image.topics_by_id.get(topic_id)
            return topic.name if topic is not None else None
        return name if topic_id == ZERO_UUID else None  # name and id together: the handler's INVALID_REQUEST

    names = {n for n in (resolved(*entry) for entry in entries) if n is not None}
    describable = access.allowed_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    deletable = access.allowed_names(AclOperation.DELETE, ResourceType.TOPIC, names)
    kept, refused = [], []
    for index, (name, topic_id) in enumerate(entries):
        target = resolved(name, topic_id)
        if target is None:
            kept.append(index)  # unknown id, or neither name nor id: the handler answers
        elif name is None:  # by id: ids are not secret, but a name is shown only if describable
            if target in deletable:
                kept.append(index)
            else:
                refused.append((target if target in describable else None, topic_id))
        elif target not in describable:
            refused.append((name, ZERO_UUID))  # not even whether it exists
        elif target not in image.topics or target in deletable:
            kept.append(index)
        else:
            refused.append((name, ZERO_UUID))
    if not refused:
        return None
    refused_results = [{"name": name, "topic_id": topic_id, "error_code": TOPIC_DENIED, "error_message": None}
                       for name, topic_id in refused]
    if not kept:
        return Answer({"throttle_time_ms": 0, "responses": refused_results})
    if version >= FIRST_TOPIC_ID_DELETE:
        forward = {**request, "topics": [request["topics"][i] for i in kept]}
    else:
        forward = {**request, "topic_names": [request["topic_names"][i] for i in kept]}
    return Proceed(forward, lambda response: {**response, "responses": response["responses"] + refused_results})


def authorize_create_partitions(gate: Gate) -> Answer | Proceed | None:
    """ALTER on each topic (named more than once: the handler's INVALID_REQUEST); refused topics first."""
    request = gate.request
    counts = Counter(t["name"] for t in request["topics"])
    names = {name for name, count in counts.items() if count == 1}
    refused = names - gate.access.allowed_names(AclOperation.ALTER, ResourceType.TOPIC, names)
    if not refused:
        return None
    refused_results = [{"name": t["name"], "error_code": TOPIC_DENIED, "error_message": None}
                       for t in request["topics"] if t["name"] in refused]
    kept = [t for t in request["topics"] if t["name"] not in refused]
    if not kept:
        return Answer({"throttle_time_ms": 0, "results": refused_results})
    return Proceed({**request, "topics": kept},
                   lambda response: {**response, "results": refused_results + response["results"]})


# --- configs


def _config_resource(resource_type: int, name: str, *, broker_logger: bool = True):
    """(ACL resource type, its name, the refusal's error) a config resource is authorized as; None for types
    the handler refuses by itself."""
    if resource_type == TOPIC_CONFIGS:
        return ResourceType.TOPIC, name, TOPIC_DENIED
    if resource_type == GROUP_CONFIGS:
        return ResourceType.GROUP, name, ErrorCode.GROUP_AUTHORIZATION_FAILED
    if resource_type in CLUSTER_CONFIG_RESOURCES and (broker_logger or resource_type != BROKER_LOGGER):
        return ResourceType.CLUSTER, "kafka-cluster", CLUSTER_DENIED
    return None


def authorize_describe_configs(gate: Gate) -> Answer | Proceed | None:
    """DESCRIBE_CONFIGS on each resource; refused resources follow the described ones."""
    request, access = gate.request, gate.access
    kept, refused = [], []
    for resource in request["resources"]:
        target = _config_resource(resource["resource_type"], resource["resource_name"])
        if target is None or access.allowed(AclOperation.DESCRIBE_CONFIGS, target[0], target[1]):
            kept.append(resource)
        else:
            error = target[2]
            refused.append({"error_code": error, "error_message": refused_message(error),
                            "resource_type": resource["resource_type"], "resource_name": resource["resource_name"],
                            "configs": []})
    if not refused:
        return None
    if not kept:
        return Answer({"throttle_time_ms": 0, "results": refused})
    return Proceed({**request, "resources": kept},
                   lambda response: {**response, "results": response["results"] + refused})


def _alter_configs_rule(*, broker_logger: bool) -> Rule:
    """ALTER_CONFIGS on each resource, answered in the request's order. A resource named twice is the
    handler's INVALID_REQUEST, as Kafka finds duplicates before authorizing."""

    def rule(gate: Gate) -> Answer | Proceed | None:
        request, access = gate.request, gate.access
        resources = request["resources"]
        counts = Counter((r["resource_type"], r["resource_name"]) for r in resources)
        refused: dict[int, dict] = {}
        for index, resource in enumerate(resources):
            key = (resource["resource_type"], resource["resource_name"])
            target = _config_resource(*key, broker_logger=broker_logger)
            if counts[key] > 1 or target is None or access.allowed(AclOperation.ALTER_CONFIGS, target[0], target[1]):
                continue
            refused[index] = {"error_code": target[2], "error_message": None, "resource_type": key[0],
                              "resource_name": key[1]}
        if not refused:
            return None

        def finish(response: dict) -> dict:
            answered = iter(response["responses"])
            return {**response, "responses": [refused[i] if i in refused else next(answered)
                                              for i in range(len(resources))]}

        kept = [r for i, r in enumerate(resources) if i not in refused]
        if not kept:
            return Answer(finish({"throttle_time_ms": 0, "responses": []}))
        return Proceed({**request, "resources": kept}, finish)

    return rule


authorize_alter_configs = _alter_configs_rule(broker_logger=False)
authorize_incremental_alter_configs = _alter_configs_rule(broker_logger=True)


# --- one operation on the cluster: the refusals, as each API answers an error for the whole request


def _describe_acls_refusal(error: ErrorCode) -> dict:
    return {**top_level_error_with_message(error), "resources": []}


def _create_acls_refusal(gate: Gate):
    return lambda error: {"throttle_time_ms": 0, "results": [
        {"error_code": error, "error_message": refused_message(error)} for _ in gate.request["creations"]]}


def _delete_acls_refusal(gate: Gate):
    return lambda error: {"throttle_time_ms": 0, "filter_results": [
        {"error_code": error, "error_message": refused_message(error), "matching_acls": []}
        for _ in gate.request["filters"]]}


def _alter_replica_log_dirs_refusal(gate: Gate):
    return lambda error: {"throttle_time_ms": 0, "results": [
        {"topic_name": topic["name"], "partitions": [{"partition_index": p, "error_code": error}
                                                     for p in topic["partitions"]]}
        for directory in gate.request["dirs"] for topic in directory["topics"]]}


def _elect_leaders_refusal(gate: Gate):
    topics = gate.request["topic_partitions"] or []
    return lambda error: {"throttle_time_ms": 0, "error_code": error, "replica_election_results": [
        {"topic": t["topic"], "partition_result": [{"partition_id": p, "error_code": error, "error_message": None}
                                                   for p in t["partitions"]]} for t in topics]}


def _alter_reassignments_refusal(gate: Gate):
    return lambda error: {**top_level_error_with_message(error), "responses": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": error, "error_message": refused_message(error)}
            for p in t["partitions"]]} for t in gate.request["topics"]]}


def _list_reassignments_refusal(gate: Gate):
    return lambda error: {**top_level_error_with_message(error), "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p, "replicas": [], "adding_replicas": [], "removing_replicas": []}
            for p in t["partition_indexes"]]} for t in gate.request["topics"] or []]}


def _alter_client_quotas_refusal(gate: Gate):
    return lambda error: {"throttle_time_ms": 0, "entries": [
        {"error_code": error, "error_message": refused_message(error), "entity": entry["entity"]}
        for entry in gate.request["entries"]]}


def _describe_scram_refusal(gate: Gate):
    return lambda error: {**top_level_error_with_message(error), "results": [
        {"user": "", "error_code": error, "error_message": refused_message(error), "credential_infos": []}
        for _ in gate.request["users"] or []]}


def _alter_scram_refusal(gate: Gate):
    users = sorted({item["name"] for item in [*gate.request["deletions"], *gate.request["upsertions"]]})
    return lambda error: {"throttle_time_ms": 0, "results": [
        {"user": user, "error_code": error, "error_message": refused_message(error)} for user in users]}


def _cluster_rule(operation: AclOperation, refusal_for) -> Rule:
    """requires_cluster, for an API whose error response depends on the request: `refusal_for(gate)` is the
    `response(error)` of that request."""

    def rule(gate: Gate) -> Answer | None:
        if gate.access.cluster(operation):
            return None
        return Answer(refusal_for(gate)(CLUSTER_DENIED))

    rule.__name__ = f"requires_cluster_{operation.name.lower()}"
    return rule


authorize_describe_acls = requires_cluster(AclOperation.DESCRIBE, _describe_acls_refusal)
authorize_create_acls = _cluster_rule(AclOperation.ALTER, _create_acls_refusal)
authorize_delete_acls = _cluster_rule(AclOperation.ALTER, _delete_acls_refusal)
authorize_alter_replica_log_dirs = _cluster_rule(AclOperation.ALTER, _alter_replica_log_dirs_refusal)
authorize_describe_log_dirs = requires_cluster(AclOperation.DESCRIBE, lambda error: {
    **top_level_error(error), "results": []})
authorize_elect_leaders = _cluster_rule(AclOperation.ALTER, _elect_leaders_refusal)
authorize_alter_partition_reassignments = _cluster_rule(AclOperation.ALTER, _alter_reassignments_refusal)
authorize_list_partition_reassignments = _cluster_rule(AclOperation.DESCRIBE, _list_reassignments_refusal)
authorize_describe_client_quotas = requires_cluster(AclOperation.DESCRIBE_CONFIGS, lambda error: {
    **top_level_error_with_message(error), "entries": None})
authorize_alter_client_quotas = _cluster_rule(AclOperation.ALTER_CONFIGS, _alter_client_quotas_refusal)
authorize_describe_user_scram_credentials = _cluster_rule(AclOperation.DESCRIBE, _describe_scram_refusal)
authorize_alter_user_scram_credentials = _cluster_rule(AclOperation.ALTER, _alter_scram_refusal)
authorize_describe_quorum = requires_cluster(AclOperation.DESCRIBE, lambda error: {
    "error_code": error, "error_message": refused_message(error), "topics": [], "nodes": []})
authorize_update_features = requires_cluster(AclOperation.ALTER, lambda error: {
    **top_level_error_with_message(error), "results": []})
authorize_unregister_broker = requires_cluster(AclOperation.ALTER, top_level_error_with_message)
authorize_list_client_metrics_resources = requires_cluster(AclOperation.DESCRIBE_CONFIGS, lambda error: {
    **top_level_error(error), "client_metrics_resources": []})
