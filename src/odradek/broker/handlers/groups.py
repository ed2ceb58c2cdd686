"""FindCoordinator and the classic consumer group APIs, answered by the group coordinator."""

from odradek.broker.group_service import OFFSETS_TOPIC
from odradek.broker.handlers.metadata import INTERNAL_TOPICS
from odradek.broker.replica_manager import now_ms
from odradek.broker.transaction_service import TRANSACTION_TOPIC
from odradek.controller.features import GROUP_VERSION
from odradek.coordinator.group_coordinator import commit_response
from odradek.protocol.errors import ErrorCode

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def handle_find_coordinator(broker, ctx, request: dict) -> dict:
    key_type = request.get("key_type", GROUP_KEY_TYPE)
    offsets_ready = key_type == GROUP_KEY_TYPE and await broker.groups.ensure_offsets_topic()
    transactions_ready = key_type == TRANSACTION_KEY_TYPE and await broker.transactions.ensure_topic()

    internal_topic = TRANSACTION_TOPIC if key_type == TRANSACTION_KEY_TYPE else OFFSETS_TOPIC

    def locate(key: str) -> dict:
        found = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.NONE,
                 "error_message": None}
        if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            found.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"unknown key type {key_type}")
            return found
        if not (offsets_ready or transactions_ready):
            found.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         error_message=f"the {internal_topic} topic is unavailable")
            return found
        if key_type == TRANSACTION_KEY_TYPE and not key:
            found.update(error_code=ErrorCode.INVALID_REQUEST, error_message="empty transactional id")
            return found
        core = broker.groups.core if key_type == GROUP_KEY_TYPE else broker.transactions.core
        index = core.partition_for(key)
        partition = broker.image.topics[internal_topic].partitions.get(index)
        endpoint = next((e for e in broker.broker_endpoints(ctx.connection.listener, key="node_id")
                         if partition is not None and e["node_id"] == partition.leader), None)
        if endpoint is None:
            found.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         error_message=f"the key's {internal_topic} partition has no leader")
        elif partition.leader == broker.node_id and broker.log_manager.is_offline(internal_topic, index):
            found.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         error_message=f"the key's {internal_topic} partition is on an offline log dir")
        else:
            found.update(node_id=endpoint["node_id"], host=endpoint["host"], port=endpoint["port"])
        return found

    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [locate(key) for key in request["coordinator_keys"]]}
    return {"throttle_time_ms": 0, **locate(request["key"])}


def handle_join_group(broker, ctx, request: dict):
    host = "/" + ctx.connection.peer.rsplit(":", 1)[0]
    return broker.groups.park(lambda token: broker.groups.core.join_group(
        now_ms(), ctx.api_version, request, token, client_id=ctx.client_id or "", client_host=host))


def handle_sync_group(broker, ctx, request: dict):
    return broker.groups.park(lambda token: broker.groups.core.sync_group(now_ms(), ctx.api_version, request, token))


def handle_heartbeat(broker, ctx, request: dict) -> dict:
    response = broker.groups.core.heartbeat(now_ms(), ctx.api_version, request)
    broker.groups.apply([])  # the session deadline moved
    return response


def handle_leave_group(broker, ctx, request: dict) -> dict:
    response, actions = broker.groups.core.leave_group(now_ms(), ctx.api_version, request)
    broker.groups.apply(actions)
    return response


async def handle_offset_commit(broker, ctx, request: dict) -> dict:
    return await _commit(broker, request, broker.groups.core.offset_commit, ctx.api_version)


async def handle_txn_offset_commit(broker, ctx, request: dict) -> dict:
    """The offsets go into the producer's transaction; they count once its commit marker is written."""
    return await _commit(broker, request, broker.groups.core.txn_offset_commit, ctx.api_version,
                         lambda: _verify_in_transaction(broker, request, ctx.api_version))


async def _verify_in_transaction(broker, request: dict, version: int) -> tuple[ErrorCode, object]:
    """(error, verification guard) of a TxnOffsetCommit. A producer's first offsets in a transaction are
    verified with the transaction coordinator (KIP-890, as a partition leader does for records): the group's
    offsets partition must be in the producer's ongoing transaction, which AddOffsetsToTxn puts it in. So a
    producer that skipped AddOffsetsToTxn, or a zombie whose transaction was aborted, cannot leave offsets
    waiting for a marker that will not come. No guard (False): nothing to verify, because the producer's
    transaction is open in that partition already (nothing is awaited between this and the append, so it
    stays open), or because the partition is not led here (the coordinator answers NOT_COORDINATOR)."""
    if not request["group_id"]:
        return ErrorCode.NONE, False
    offsets_partition = (OFFSETS_TOPIC, broker.groups.core.partition_for(request["group_id"]))
    guard = broker.replicas.start_verification(*offsets_partition, request["producer_id"])
    if guard is None:
        return ErrorCode.NONE, False
    error = await broker.transactions.verify_offsets(request["transactional_id"], request["producer_id"],
                                                     request["producer_epoch"], offsets_partition, version)
    return error, guard


async def _commit(broker, request: dict, commit, version: int, verify=None) -> dict:
    """Offsets of partitions that do not exist are refused (UNKNOWN_TOPIC_OR_PARTITION) before the
    coordinator sees the request (or `verify()` checks it, for a transaction); the rest are committed as one."""
    topics = broker.image.topics
    existing, unknown = [], {}
    for topic in request["topics"]:
        known = topics.get(topic["name"])
        partitions = [p for p in topic["partitions"] if known is not None and p["partition_index"] in known.partitions]
        if len(partitions) != len(topic["partitions"]):
            unknown[topic["name"]] = [p["partition_index"] for p in topic["partitions"] if p not in partitions]
        if partitions:
            existing.append({**topic, "partitions": partitions})
    response = {"throttle_time_ms": 0, "topics": []}
    if existing or not unknown:
        wanted = {**request, "topics": existing} if unknown else request
        error, verification = await verify() if verify is not None and existing else (ErrorCode.NONE, False)
        if error != ErrorCode.NONE:
            response = commit_response(wanted, lambda topic, index: error)
        else:
            response = await _write_commit(broker, *commit(now_ms(), version, wanted), verification)
    answered = {topic["name"]: topic for topic in response["topics"]}
    for name, indexes in unknown.items():
        refused = [{"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION} for index in indexes]
        if name in answered:
            answered[name]["partitions"] += refused
        else:
            response["topics"].append({"name": name, "partitions": refused})
    return response


async def _write_commit(broker, response: dict, appends: list, verification: object) -> dict:
    if not await broker.groups.write(appends, verification):
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"] == ErrorCode.NONE:
                    partition["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return response


def handle_offset_fetch(broker, ctx, request: dict) -> dict:
    return broker.groups.core.offset_fetch(now_ms(), ctx.api_version, request)


def handle_list_groups(broker, ctx, request: dict) -> dict:
    return broker.groups.core.list_groups(now_ms(), ctx.api_version, request)


def handle_describe_groups(broker, ctx, request: dict) -> dict:
    return broker.groups.core.describe_groups(now_ms(), ctx.api_version, request)


async def handle_delete_groups(broker, ctx, request: dict) -> dict:
    response, appends = broker.groups.core.delete_groups(now_ms(), ctx.api_version, request)
    if not await broker.groups.write(appends):
        for result in response["results"]:
            if result["error_code"] == ErrorCode.NONE:
                result["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return response


async def handle_offset_delete(broker, ctx, request: dict) -> dict:
    response, appends = broker.groups.core.offset_delete(now_ms(), ctx.api_version, request)
    if not await broker.groups.write(appends) and response["error_code"] == ErrorCode.NONE:
        response["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return response


async def handle_consumer_group_heartbeat(broker, ctx, request: dict) -> dict:
    """KIP-848: the member reports its subscription and owned partitions; the coordinator assigns. The
    protocol is off while the cluster's group.version is 0 (`kafka-features downgrade`), as in Kafka."""
    image = broker.controller.image
    if image.features.get(GROUP_VERSION, 0) < 1:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "error_message": "The version of API is not supported.", "member_id": None, "member_epoch": -1,
                "heartbeat_interval_ms": 0, "assignment": None}
    topics = {name: (topic.topic_id, len(topic.partitions)) for name, topic in image.topics.items()
              if name not in INTERNAL_TOPICS}
    host = "/" + ctx.connection.peer.rsplit(":", 1)[0]
    response, appends = broker.groups.core.consumer_group_heartbeat(
        now_ms(), ctx.api_version, request, topics, client_id=ctx.client_id or "", client_host=host)
    if not await broker.groups.write(appends):
        return {**response, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "assignment": None}
    return response


def handle_consumer_group_describe(broker, ctx, request: dict) -> dict:
    topic_names = {topic.topic_id: name for name, topic in broker.controller.image.topics.items()}
    return broker.groups.core.consumer_group_describe(now_ms(), ctx.api_version, request, topic_names)
