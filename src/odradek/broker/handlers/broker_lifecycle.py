"""Requests brokers send the active controller: BrokerRegistration, BrokerHeartbeat, AlterPartition and
AllocateProducerIds. Each runs the controller command; its KafkaError becomes the response's error code."""

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.uuid_text import uuid_to_text


async def handle_broker_registration(broker, ctx, request: dict) -> dict:
    response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "broker_epoch": -1}
    try:
        if request["cluster_id"] != broker.cluster_id:
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f"cluster id {request['cluster_id']} is not {broker.cluster_id}")
        endpoints = [(listener["name"], listener["host"], listener["port"]) for listener in request["listeners"]]
        response["broker_epoch"] = await broker.controller.register_broker(
            request["broker_id"], uuid_to_text(request["incarnation_id"]), endpoints, request["rack"])
    except KafkaError as exc:
        response["error_code"] = exc.code
    return response


async def handle_broker_heartbeat(broker, ctx, request: dict) -> dict:
    response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "is_caught_up": False, "is_fenced": True,
                "should_shut_down": False}
    try:
        response.update(await broker.controller.heartbeat(
            request["broker_id"], request["broker_epoch"], request["current_metadata_offset"], request["want_fence"],
            request["want_shut_down"]))
    except KafkaError as exc:
        response["error_code"] = exc.code
    return response


async def handle_alter_partition(broker, ctx, request: dict) -> dict:
    try:
        topics = await broker.controller.alter_partition(request["broker_id"], request["broker_epoch"],
                                                         request["topics"])
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "topics": []}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": topics}


async def handle_allocate_producer_ids(broker, ctx, request: dict) -> dict:
    try:
        start, length = await broker.controller.allocate_producer_ids()
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "producer_id_start": -1, "producer_id_len": 0}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id_start": start, "producer_id_len": length}
