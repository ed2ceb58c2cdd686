"""The shell around the Raft core: its clock, its RPCs to the other voters, and commit notifications.

The core decides; this class only moves messages. Requests the core emits go out as Kafka requests to
the destination's controller listener (through `NodeClients`), and the responses go back into the core.
Requests arriving on this node's controller listener go into the core and its reply becomes the RPC's
response. A Fetch that would come back empty is parked until the log or the high watermark moves (or
the fetch's max wait passes), so idle followers do not spin.

Every committed entry is applied once, in order, by `on_commit(offset, data)`; `propose` resolves when
its entry is applied, or fails if another leader's entry took its offset. Every `snapshot_bytes` of applied
entries the state machine's `snapshot_state()` becomes a snapshot and the log prefix below it goes; a
follower too far behind gets the leader's snapshot instead (FetchSnapshot) and `on_snapshot(end_offset,
state)` replaces the state machine's state, as it does at start from the latest snapshot on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable

from odradek.network.client import ClientSecurity, NodeClients
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.raft import wire
from odradek.raft.core import RaftConfig, RaftCore
from odradek.raft.file_log import FileQuorumStateStore, FileRaftLog
from odradek.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchError,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Send,
    VoteRequest,
    VoteResponse,
)

log = logging.getLogger(__name__)

TICK_S = 0.01


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QuorumDriver:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], directory: str, cluster_id: str,
                 config: RaftConfig, fetch_max_wait_ms: int, on_commit: Callable[[int, object], None],
                 on_snapshot: Callable[[int, object], None], snapshot_state: Callable[[], object],
                 snapshot_bytes: int, security: ClientSecurity | None = None):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.on_commit = on_commit
        self.on_snapshot = on_snapshot
        self.snapshot_state = snapshot_state
        self.snapshot_bytes = snapshot_bytes
        self._bytes_since_snapshot = 0
        # A connection answers in order, so a long-polling Fetch would hold up votes behind it: two pools.
        self.clients = NodeClients(f"odradek-raft-{node_id}", security=security)
        self.fetch_clients = NodeClients(f"odradek-raft-fetch-{node_id}", security=security)
        for voter, (host, port) in voters.items():
            if voter != node_id:
                self.clients.set_endpoint(voter, host, port)
                self.fetch_clients.set_endpoint(voter, host, port)
        self.log = FileRaftLog(directory)
        self.core = RaftCore(node_id, set(voters) or {node_id}, self.log, FileQuorumStateStore(directory),
                             rng_seed=random.randrange(2**32), now_ms=monotonic_ms(), config=config)
        self.applied = 0  # entries below this offset have been handed to on_commit
        self._pending: dict[int, tuple[int, asyncio.Future]] = {}  # offset -> (epoch proposed in, future)
        self._fetch_waiters: set[asyncio.Future] = set()
        self._seen = (0, 0)  # (log end, high watermark) at the last wake-up of parked fetches
        self._hw_sent: dict[int, int] = {}  # follower -> high watermark last sent to it
        self._fetch_in_flight = False
        self._tick_scheduled = False
        self._tasks: set[asyncio.Task] = set()
        self._stopped = False
        self._ticker: asyncio.Task | None = None
        self.leader_changed = asyncio.Event()  # set whenever the known leader or epoch changes
        self.on_commit_latency: Callable[[float], None] | None = None  # ms from propose to applied (metrics)
        self._leader = (self.core.leader_id, self.core.epoch)

    # lifecycle

    def start(self) -> None:
        self._install_snapshot()  # the latest one on disk, if any
        self._ticker = asyncio.create_task(self._tick_forever())

    async def stop(self) -> None:
        self._step(self.core.resign(monotonic_ms()))  # hand over at once rather than after a fetch timeout
        await asyncio.sleep(0.05)  # let EndQuorumEpoch go out
        # From now on nothing reaches the core (a tick already scheduled, a reply or a request arriving): each
        # could start or win an election and append to the log closed below.
        self._stopped = True
        for task in [self._ticker, *self._tasks]:
            if task is not None:
                task.cancel()
        for waiter in self._fetch_waiters:
            if not waiter.done():
                waiter.cancel()
        self.clients.close()
        self.fetch_clients.close()
        self.log.close()

    # state

    @property
    def leader_id(self) -> int:
        return self.core.leader_id

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def is_active(self) -> bool:
        """Leader, with a committed entry of its own epoch: everything before it is applied here."""
        core = self.core
        hw = core.high_watermark
        return core.is_leader and hw > 0 and self.log.epoch_at(hw - 1) == core.epoch and self.applied == hw

    async def propose(self, data: object, timeout_s: float) -> int:
        """Append `data` as the active controller and wait until it is committed and applied; its offset."""
        if not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the active controller")
        proposed = time.monotonic()
        offset = self.core.propose(data, monotonic_ms())
        future = asyncio.get_running_loop().create_future()
        self._pending[offset] = (self.core.epoch, future)
        self._schedule_tick()
        try:
            committed = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self._pending.pop(offset, None)
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "the metadata change was not committed in time") from None
        if not committed:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "leadership moved before the change was committed")
        if self.on_commit_latency is not None:
            self.on_commit_latency((time.monotonic() - proposed) * 1000)
        return offset

    # timers and outgoing RPCs

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._tick()

    def _schedule_tick(self) -> None:
        if not self._tick_scheduled:
            self._tick_scheduled = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self._tick_scheduled = False
        if self._stopped:
            return
        try:
            self._step(self.core.tick(monotonic_ms()))
        except Exception:
            log.exception("Raft tick failed")

    def _step(self, sends: list[Send]) -> None:
        for send in sends:
            if isinstance(send.message, FetchRequest):
                if self._fetch_in_flight:
                    continue  # the core's retransmission timer fired while a long poll is still open
                self._fetch_in_flight = True
            task = asyncio.create_task(self._rpc(send))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._install_snapshot()
        self._apply_committed()
        self._wake_fetches()
        if (self.core.leader_id, self.core.epoch) != self._leader:
            self._leader = (self.core.leader_id, self.core.epoch)
            log.info("Metadata quorum: epoch %d, leader %s", self.core.epoch,
                     self.core.leader_id if self.core.leader_id >= 0 else "unknown")
            self.leader_changed.set()
            self.leader_changed.clear()

    async def _rpc(self, send: Send) -> None:
        message = send.message
        try:
            reply = await self._call(send.dst, message)
        except (ConnectionError, TimeoutError, OSError, KafkaError) as exc:
            log.debug("Raft %s to node %d failed: %s", type(message).__name__, send.dst, exc)
            reply = None
        except Exception:  # a malformed answer: drop it, as a lost message
            log.exception("Raft %s to node %d got an unusable answer", type(message).__name__, send.dst)
            reply = None
        finally:
            if isinstance(message, FetchRequest):
                self._fetch_in_flight = False
        if reply is not None and not self._stopped:
            self._step(self.core.handle(reply, monotonic_ms()))

    async def _call(self, dst: int, message: Message) -> Message | None:
        election_s = self.core.config.election_timeout_ms / 1000
        match message:
            case VoteRequest():
                response = await self.clients.request(dst, wire.VOTE, wire.VOTE_VERSION,
                                                      wire.encode_vote_request(self.cluster_id, dst, message), election_s)
                return wire.decode_vote_response(dst, response)
            case BeginQuorumEpoch():
                await self.clients.request(dst, wire.BEGIN_QUORUM_EPOCH, wire.BEGIN_VERSION,
                                           wire.encode_begin_request(self.cluster_id, message), election_s)
            case EndQuorumEpoch():
                await self.clients.request(dst, wire.END_QUORUM_EPOCH, wire.END_VERSION,
                                           wire.encode_end_request(self.cluster_id, message), election_s)
            case FetchSnapshotRequest():
                response = await self.clients.request(
                    dst, wire.FETCH_SNAPSHOT, wire.FETCH_SNAPSHOT_VERSION,
                    wire.encode_fetch_snapshot_request(self.cluster_id, message), election_s * 4)
                return wire.decode_fetch_snapshot_response(dst, response)
            case FetchRequest():
                response = await self.fetch_clients.request(
                    dst, wire.FETCH, wire.FETCH_VERSION,
                    wire.encode_fetch_request(self.cluster_id, message, self.fetch_max_wait_ms),
                    self.fetch_max_wait_ms / 1000 + election_s)
                return wire.decode_fetch_response(dst, message, response)
        return None

    def _install_snapshot(self) -> None:
        snapshot = self.core.take_installed_snapshot()
        if snapshot is not None and snapshot.end_offset > self.applied:
            log.info("Metadata snapshot up to offset %d installed", snapshot.end_offset)
            self.on_snapshot(snapshot.end_offset, snapshot.state)
            self.applied = snapshot.end_offset
            self._bytes_since_snapshot = 0

    def _apply_committed(self) -> None:
        high_watermark = self.core.high_watermark
        while self.applied < high_watermark:
            for entry in self.log.read(self.applied, high_watermark - self.applied):
                offset = self.applied
                if entry.data is not None:
                    self.on_commit(offset, entry.data)
                    self._bytes_since_snapshot += len(json.dumps(entry.data, separators=(",", ":")))
                self.applied = offset + 1
                pending = self._pending.pop(offset, None)
                if pending is not None and not pending[1].done():
                    pending[1].set_result(entry.epoch == pending[0])
        if self._bytes_since_snapshot >= self.snapshot_bytes and self.applied > 0:
            self._bytes_since_snapshot = 0
            try:
                self.core.snapshot(self.applied, self.snapshot_state())
            except ValueError as exc:  # not past the latest snapshot: nothing to gain
                log.debug("No metadata snapshot at %d: %s", self.applied, exc)
            else:
                log.info("Metadata snapshot up to offset %d taken", self.applied)

    def _wake_fetches(self) -> None:
        seen = (self.log.end_offset, self.core.high_watermark)
        if seen != self._seen:
            self._seen = seen
            for waiter in self._fetch_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._fetch_waiters.clear()

    # incoming RPCs (controller listener)

    def _check_cluster(self, request: dict) -> None:
        """Refuse a request of another cluster, or any once stopped (the log is closed)."""
        if self._stopped:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "the metadata quorum driver has stopped")
        if request.get("cluster_id") not in (None, self.cluster_id):
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f"cluster id {request.get('cluster_id')} is not {self.cluster_id}")

    def _reply_to(self, request: Message, sends: list[Send], kind: type) -> Message | None:
        """Split the core's output into the reply to `request` and messages to send on their own."""
        reply, others = None, []
        for send in sends:
            if reply is None and send.dst == request.src and isinstance(send.message, kind):
                reply = send.message
            else:
                others.append(send)
        self._step(others)
        return reply

    def handle_vote(self, request: dict) -> dict:
        try:
            self._check_cluster(request)
        except KafkaError as exc:
            return {"error_code": exc.code, "topics": []}
        message = wire.decode_vote_request(request)
        reply = self._reply_to(message, self.core.handle(message, monotonic_ms()), VoteResponse)
        return wire.encode_vote_response(reply)

    def handle_begin_quorum_epoch(self, request: dict) -> dict:
        return self._handle_epoch_change(request, wire.decode_begin_request)

    def handle_end_quorum_epoch(self, request: dict) -> dict:
        return self._handle_epoch_change(request, wire.decode_end_request)

    def _handle_epoch_change(self, request: dict, decode) -> dict:
        try:
            self._check_cluster(request)
        except KafkaError as exc:
            return wire.encode_epoch_ack(exc.code, self.core.leader_id, self.core.epoch)
        self._step(self.core.handle(decode(request), monotonic_ms()))
        return wire.encode_epoch_ack(ErrorCode.NONE, self.core.leader_id, self.core.epoch)

    async def handle_fetch(self, request: dict) -> dict:
        try:
            self._check_cluster(request)
        except KafkaError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "session_id": 0, "responses": []}
        message = wire.decode_fetch_request(request)
        deadline = monotonic_ms() + min(request["max_wait_ms"], self.fetch_max_wait_ms)
        while True:
            if self._stopped:  # stopped during the long poll
                return {"throttle_time_ms": 0, "error_code": ErrorCode.BROKER_NOT_AVAILABLE, "session_id": 0,
                        "responses": []}
            reply = self._reply_to(message, self.core.handle(message, monotonic_ms()), FetchResponse)
            # What the follower learns of the high watermark: it is capped by the follower's own log end.
            learnt = min(reply.high_watermark, message.fetch_offset)
            remaining = deadline - monotonic_ms()
            if reply.entries or reply.error != FetchError.NONE or reply.diverging_epoch >= 0 or remaining <= 0 \
                    or reply.snapshot_end_offset >= 0 or learnt != self._hw_sent.get(message.src):
                break
            waiter = asyncio.get_running_loop().create_future()
            self._fetch_waiters.add(waiter)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, remaining / 1000)
            self._fetch_waiters.discard(waiter)
        self._hw_sent[message.src] = learnt
        return wire.encode_fetch_response(reply)

    def handle_fetch_snapshot(self, request: dict) -> dict:
        try:
            self._check_cluster(request)
        except KafkaError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "topics": []}
        message = wire.decode_fetch_snapshot_request(request)
        reply = self._reply_to(message, self.core.handle(message, monotonic_ms()), FetchSnapshotResponse)
        return wire.encode_fetch_snapshot_response(reply)
