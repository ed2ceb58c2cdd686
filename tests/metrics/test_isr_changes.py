"""Kafka's IsrShrinksPerSec, IsrExpandsPerSec and FailedIsrUpdatesPerSec: a leader's AlterPartition requests,
counted by how the controller answered them."""

import asyncio
from types import SimpleNamespace

from odradek.broker.replica_manager import Partition, ReplicaManager
from odradek.protocol.errors import ErrorCode


class ControllerChannel:
    """Answers each AlterPartition with the next of `answers`: an error code, or an exception to raise."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.sent: list[list[int]] = []

    async def request(self, api_key, api_version, body, timeout_s):
        (partition,) = body["topics"][0]["partitions"]
        self.sent.append(partition["new_isr"])
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"throttle_time_ms": 0, "error_code": 0, "topics": [{"topic_id": bytes(16), "partitions": [
            {"partition_index": 0, "error_code": answer, "leader_id": 1, "leader_epoch": 0,
             "isr": partition["new_isr"], "partition_epoch": 1}]}]}


def leader_of(channel: ControllerChannel) -> tuple[ReplicaManager, Partition]:
    node = SimpleNamespace(node_id=1, log_manager=None, controller=None, controller_channel=channel,
                           image=SimpleNamespace(topics={}), lifecycle=SimpleNamespace(epoch=4))
    replicas = ReplicaManager(node)
    partition = Partition("t", 0, log=None, node_id=1, leader=1, isr=(1, 2, 3), replicas=(1, 2, 3))
    return replicas, partition


def counters(replicas: ReplicaManager) -> tuple[int, int, int]:
    return replicas.isr_shrinks, replicas.isr_expands, replicas.failed_isr_updates


def test_accepted_changes_count_as_shrinks_and_expands_and_the_others_as_failed():
    channel = ControllerChannel(ErrorCode.NONE, ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH,
                                ConnectionError("controller gone"))
    replicas, partition = leader_of(channel)
    asyncio.run(replicas._send_alter_partition(partition, (1, 2)))
    assert counters(replicas) == (1, 0, 0)
    partition.isr = (1, 2)  # what the metadata then says
    asyncio.run(replicas._send_alter_partition(partition, (1, 2, 3)))
    assert counters(replicas) == (1, 1, 0)
    partition.isr = (1, 2, 3)
    partition.pending_isr = (1, 3)
    asyncio.run(replicas._send_alter_partition(partition, (1, 3)))
    assert counters(replicas) == (1, 1, 1)
    assert partition.pending_isr is None  # tried again from the next metadata
    asyncio.run(replicas._send_alter_partition(partition, (1, 3)))
    assert counters(replicas) == (1, 1, 2)
    assert channel.sent == [[1, 2], [1, 2, 3], [1, 3], [1, 3]]
