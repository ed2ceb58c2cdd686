"""Producer ids this broker hands out, from blocks the active controller reserves in the metadata log."""

from __future__ import annotations

import asyncio

from odradek.protocol.errors import ErrorCode, KafkaError

ALLOCATE_PRODUCER_IDS = 67


class ProducerIdBlocks:
    def __init__(self, node):
        self.node = node
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """A producer id no broker of the cluster has handed out before, also across restarts."""
        async with self._lock:
            if self._next >= self._end:
                response = await self.node.controller_channel.request(
                    ALLOCATE_PRODUCER_IDS, 0, {"broker_id": self.node.node_id, "broker_epoch": self.node.lifecycle.epoch})
                if response["error_code"] != ErrorCode.NONE:
                    raise KafkaError(ErrorCode(response["error_code"]), "no producer id block")
                self._next = response["producer_id_start"]
                self._end = self._next + response["producer_id_len"]
            producer_id = self._next
            self._next += 1
            return producer_id
