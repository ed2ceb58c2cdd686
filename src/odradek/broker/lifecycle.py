"""The broker's life as the controller sees it: registration, heartbeats, controlled shutdown.

A starting broker registers (with a fresh incarnation id, so the controller knows it restarted) and is
fenced until its heartbeats show it has applied the metadata log up to its registration; only then does
it lead partitions and appear in Metadata. Heartbeats keep its session alive. On shutdown it asks to be
fenced first, so its leaderships move at once rather than after broker.session.timeout.ms.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from odradek.config import SECURITY_PROTOCOL_IDS
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

BROKER_REGISTRATION, BROKER_HEARTBEAT = 62, 63
REGISTRATION_VERSION, HEARTBEAT_VERSION = 3, 1
FENCED_HEARTBEAT_INTERVAL_S = 0.05
SHUTDOWN_TIMEOUT_S = 5.0


class BrokerLifecycle:
    def __init__(self, node):
        self.node = node
        self.incarnation_id = uuid.uuid4().bytes
        self.epoch = -1
        self.fenced = True
        self._interval_s = node.config["broker.heartbeat.interval.ms"] / 1000
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """Register and wait until unfenced."""
        await self._register()
        while self.fenced:
            try:
                await self._heartbeat(want_shut_down=False)
            except (KafkaError, ConnectionError, TimeoutError) as exc:
                # A busy or moving controller: the broker waits for it, as it does once it runs.
                if isinstance(exc, KafkaError) and exc.code != ErrorCode.NOT_CONTROLLER:
                    raise
                log.info("Heartbeat to the controller failed: %s; asking again", exc)
            if self.fenced:
                await asyncio.sleep(FENCED_HEARTBEAT_INTERVAL_S)
        self._task = asyncio.create_task(self._heartbeat_forever())

    async def shut_down(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            async with asyncio.timeout(SHUTDOWN_TIMEOUT_S):
                while not await self._heartbeat(want_shut_down=True):
                    await asyncio.sleep(FENCED_HEARTBEAT_INTERVAL_S)
        except (TimeoutError, KafkaError, ConnectionError) as exc:
            log.warning("Controlled shutdown did not complete (%s); leaderships move after the session timeout",
                        exc or "timed out")

    async def _register(self) -> None:
        config = self.node.config
        protocols = config.security_protocols()
        body = {"broker_id": self.node.node_id, "cluster_id": self.node.cluster_id,
                "incarnation_id": self.incarnation_id,
                "listeners": [{"name": a.name, "host": a.host, "port": a.port,
                               "security_protocol": SECURITY_PROTOCOL_IDS[protocols.get(a.name, "PLAINTEXT")]}
                              for a in config.advertised_listeners],
                "features": [], "rack": config["broker.rack"], "is_migrating_zk_broker": False, "log_dirs": [],
                "previous_broker_epoch": self.epoch}
        while True:
            response = await self.node.controller_channel.request(BROKER_REGISTRATION, REGISTRATION_VERSION, body)
            error = ErrorCode(response["error_code"])
            if error == ErrorCode.NONE:
                self.epoch = response["broker_epoch"]
                self.fenced = True
                log.info("Registered broker %d with the controller: broker epoch %d", self.node.node_id, self.epoch)
                return
            if error != ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                raise KafkaError(error, "broker registration refused")
            log.info("Broker %d is still registered by an earlier process; retrying", self.node.node_id)
            await asyncio.sleep(self._interval_s)

    async def _heartbeat(self, *, want_shut_down: bool) -> bool:
        """One heartbeat; True when the controller agrees the broker may shut down."""
        body = {"broker_id": self.node.node_id, "broker_epoch": self.epoch,
                "current_metadata_offset": self.node.quorum.applied - 1, "want_fence": False,
                "want_shut_down": want_shut_down}
        response = await self.node.controller_channel.request(BROKER_HEARTBEAT, HEARTBEAT_VERSION, body,
                                                               timeout_s=max(1.0, self._interval_s * 2))
        error = ErrorCode(response["error_code"])
        if error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            await self._register()  # the controller lost or replaced our registration: start over, fenced
            return False
        if error != ErrorCode.NONE:
            raise KafkaError(error, "heartbeat refused")
        if self.fenced and not response["is_fenced"]:
            log.info("Broker %d is unfenced", self.node.node_id)
        self.fenced = response["is_fenced"]
        return response["should_shut_down"]

    async def _heartbeat_forever(self) -> None:
        while True:
            await asyncio.sleep(FENCED_HEARTBEAT_INTERVAL_S if self.fenced else self._interval_s)
            try:
                await self._heartbeat(want_shut_down=False)
            except (KafkaError, ConnectionError, TimeoutError) as exc:
                log.info("Heartbeat to the controller failed: %s", exc)
