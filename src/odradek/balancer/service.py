"""The balancer service: on every broker, active on the one that leads partition 0 of `__balancer_execution`.

While active, every `balancer.check.interval.ms` it
  - reads the load samples published since the last tick into its load monitor (`__balancer_samples`);
  - handles the operators' requests in offset order (control.py): computes the proposal of a rebalance, add,
    remove or demote on the current model and starts it, or refuses with a one-line reason; stops and resumes;
  - steps the execution under way (executor.py), which persists its state after every part of a step;
  - with nothing under way, and the mode asking for it, starts what continuous mode calls for (operations.py):
    healing nodes unavailable longer than balancer.node.unavailable.timeout.ms, filling new nodes, shedding a
    log dir above balancer.disk.max.ratio.

Everything it decides is in the topic: the execution, the result of every request, and its own state (the nodes
it keeps empty, when each unavailable node went down, how far it has handled requests). When its node fails, the
partition's new leader takes over from there: leadership of the partition is what elects the service, and the
topic is its memory. A node that loses the leadership stops at the end of its tick. (Two nodes may briefly both
believe they lead while the metadata moves; the actions the executor repeats are harmless to repeat, and the
persisted state is the one written last.)

The blocking work (Kafka clients) runs in a thread, one tick at a time; the node's event loop only looks at the
metadata image.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from dataclasses import replace

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.balancer.control import (
    ACCEPTED,
    ADD_NODES,
    PROPOSAL_OPERATIONS,
    REFUSED,
    REMOVE_NODES,
    REQUEST_KEY,
    RESUME,
    SERVICE_KEY,
    STOP,
    ControlError,
    ControlWriter,
    Request,
    RequestResult,
    ServiceState,
    read_control,
    result_key,
)
from odradek.balancer.execution import RUNNING, STOPPED, STOPPING, ExecutionLimits, Progress
from odradek.balancer.executor import EXECUTION_TOPIC, Executor, ExecutorError, ensure_execution_topic
from odradek.balancer.goals import SETTING_NAMES, BalancerSettings
from odradek.balancer.load_monitor import ClusterMetadata, LoadMonitor, build_model, metadata_from_image
from odradek.balancer.model import BalancerError
from odradek.balancer.operations import automatic_action, plan
from odradek.balancer.optimizer import Proposal
from odradek.balancer.sampler import SAMPLES_TOPIC, decode_sample

log = logging.getLogger(__name__)

HEARTBEAT_MS = 30_000  # the service state is written at least this often while active, so status shows it alive
REEVALUATE_MS = 60_000  # continuous mode looks at an unchanged placement again this often (new load samples)
CLIENT_TIMEOUT_S = 30.0


def service_settings(config) -> dict[str, str]:
    """The balancer.* settings a proposal depends on, as text (kept in the service state for the clients)."""
    names = list(SETTING_NAMES.values()) + ["balancer.window.ms"]
    return {name: str(config[name]) for name in names}


class BalancerService:
    """A task of every broker node (see the module docstring); `stats` feeds the metrics."""

    def __init__(self, node):
        self.node = node
        config = node.config
        self.mode = config["balancer.mode"]
        self.settings = service_settings(config)
        self.interval_s = config["balancer.check.interval.ms"] / 1000
        self.limits = ExecutionLimits(max_moves_per_node=config["balancer.max.moves.per.node"],
                                      max_moves_total=config["balancer.max.moves.total"],
                                      throttle_bytes_per_s=config["balancer.throttle.bytes.per.s"] or None)
        self.timeout_ms = config["balancer.node.unavailable.timeout.ms"]
        self.active = False
        self.progress: Progress | None = None
        self.requests_handled = self.requests_refused = self.automatic_actions = 0
        self._worker: _Worker | None = None
        self._topic_created = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticking = threading.Lock()  # one tick, or one close, at a time
        self._snapshot: tuple[int, ClusterMetadata] | None = None  # (metadata offset applied, the image then)
        self._closing = False

    def metadata_now(self) -> ClusterMetadata:
        """The metadata as the node holds it now, from the worker's thread (a tick's snapshot may be a tick old:
        a topic created just before a request would be missing from it)."""
        async def snapshot() -> ClusterMetadata:
            return self._metadata()

        return asyncio.run_coroutine_threadsafe(snapshot(), self._loop).result(CLIENT_TIMEOUT_S)

    def _metadata(self) -> ClusterMetadata:
        """The image as plain data, made again only when the node has applied more of the metadata log (a walk
        of every partition, on the event loop)."""
        applied = self.node.quorum.applied
        if self._snapshot is None or self._snapshot[0] != applied:
            self._snapshot = (applied, metadata_from_image(self.node.image))
        return self._snapshot[1]

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the cluster unavailable, a failover: the next tick retries
                log.warning("Partition balancer: %s", exc, exc_info=not isinstance(exc, (ControlError, ExecutorError,
                                                                                          KafkaException)))
                try:
                    await self._drop_worker()
                except Exception:  # noqa: BLE001 - closing clients of a failing cluster: nothing more to do
                    log.exception("Partition balancer: closing its clients failed")

    async def _tick(self) -> None:
        image = self.node.image
        topic = image.topics.get(EXECUTION_TOPIC)
        if topic is None:
            if self.mode != "off" and not self._topic_created and self._first_live_broker(image):
                await asyncio.to_thread(self._create_topic)
            return
        partition = topic.partitions.get(0)
        if partition is None or partition.leader != self.node.node_id:
            if self._worker is not None:
                log.info("Partition balancer: %s is led elsewhere now; the balancer runs there", EXECUTION_TOPIC)
            await self._drop_worker()
            return
        if self._worker is not None and self._worker.leader_epoch != partition.leader_epoch:
            # led elsewhere in between (A, B, then A again): what this worker holds may be stale; take over afresh
            await self._drop_worker()
        metadata = self._metadata()
        if self._worker is None:
            log.info("Partition balancer: running on this node (mode %s)", self.mode)
            self._worker = _Worker(self, partition.leader_epoch)
        self.active = True
        await asyncio.to_thread(self._locked_tick, self._worker, metadata)

    def _first_live_broker(self, image) -> bool:
        """Whether this node is the live broker of lowest id: the one that creates the topic (with dedicated
        controllers, no broker is the active controller)."""
        live = [b.broker_id for b in image.brokers.values() if not b.fenced]
        return bool(live) and min(live) == self.node.node_id

    def _create_topic(self) -> None:
        from odradek.security.internal_client import internal_client_properties

        bootstrap, properties = internal_client_properties(self.node.config)
        ensure_execution_topic(AdminClient({**properties, "bootstrap.servers": bootstrap}))
        self._topic_created = True

    def _locked_tick(self, worker: _Worker, metadata: ClusterMetadata) -> None:
        with self._ticking:
            if not self._closing:
                worker.tick(metadata)

    async def _drop_worker(self) -> None:
        self.active = False
        worker, self._worker = self._worker, None
        if worker is not None:
            await asyncio.to_thread(self._close_worker, worker)

    def _close_worker(self, worker: _Worker) -> None:
        with self._ticking:  # a tick of it may still run in its thread
            worker.close()

    def close(self) -> None:
        """At the node's shutdown: waits (a while) for a tick under way, then closes the clients."""
        self._closing = True
        if not self._ticking.acquire(timeout=CLIENT_TIMEOUT_S):
            log.warning("Partition balancer: a tick is still running at shutdown; leaving its clients")
            return
        try:
            if self._worker is not None:
                self._worker.close()
                self._worker = None
        finally:
            self._ticking.release()


class _Worker:
    """The blocking half of an active service: its clients and what it holds between ticks."""

    def __init__(self, service: BalancerService, leader_epoch: int):
        from odradek.security.internal_client import internal_client_properties

        self.service = service
        self.leader_epoch = leader_epoch  # of the partition whose leadership elected this worker
        self.node_id = service.node.node_id
        bootstrap, properties = internal_client_properties(service.node.config)
        self.properties = {**properties, "bootstrap.servers": bootstrap, "log.connection.close": False}
        self.settings = BalancerSettings.from_properties(service.settings)
        self.executor = Executor(bootstrap, client_config={**properties, "log.connection.close": "false"})
        self.writer = ControlWriter(self.properties)
        self.monitor = LoadMonitor(int(service.settings["balancer.window.ms"]))
        self.samples: Consumer | None = None
        self.requests: Consumer | None = None
        self.state: ServiceState | None = None
        self.written_state: bytes | None = None
        self.written_ms = 0
        self.nothing_to_do: str | None = None  # the trigger and placement whose proposal came out empty
        self.answered: set[str] = set()  # the ids of the requests that have a result
        # continuous mode looks again when the metadata changed, a node's unavailability came due, or this long
        # passed (new load samples: a log dir filling up)
        self.evaluated_on: ClusterMetadata | None = None
        self.due_seen: set[int] = set()
        self.evaluated_ms = 0

    # a tick

    def tick(self, metadata: ClusterMetadata) -> None:
        now = _now_ms()
        if self.state is None:
            self._take_over(now)
        self._read_samples(now)
        self._note_unavailable(metadata, now)
        for offset, request in self._new_requests():
            self._handle(request, now)
            self._set_state(requests_handled_to=offset + 1)
            self._write_state(now, force=True)
        execution = self.executor.execution
        if execution is not None and execution.status in (RUNNING, STOPPING):
            progress = self.executor.step()
            self.service.progress = progress
            if progress.status in ("done", STOPPED):
                log.info("Partition balancer: execution %s %s: %d of %d moves done (%d failed), %d of %d leadership "
                         "changes", execution.id, progress.status, progress.moves_done, progress.moves_total,
                         progress.moves_failed, progress.leadership_done, progress.leadership_total)
        elif execution is None or execution.status != STOPPED:
            self._act_by_itself(metadata, now)
        self._write_state(now)

    def _take_over(self, now: int) -> None:
        snapshot = read_control(self.properties, requests_from=0)
        previous = snapshot.service
        self.state = ServiceState(
            self.node_id, self.service.mode, dict(self.service.settings),
            removed_nodes=previous.removed_nodes if previous else (),
            unavailable_since_ms=dict(previous.unavailable_since_ms) if previous else {},
            requests_handled_to=previous.requests_handled_to if previous else 0, updated_ms=now,
            last_automatic=previous.last_automatic if previous else None)
        self.answered = set(snapshot.results)
        self.executor.recover()
        if self.executor.execution is None and snapshot.execution is not None:
            self.executor.execution = snapshot.execution  # done or stopped: kept for status
        self.service.progress = None if snapshot.execution is None else snapshot.execution.progress(now)
        self.requests = Consumer({**self.properties, "group.id": f"odradek-balancer-{self.node_id}",
                                  "enable.auto.commit": False, "enable.partition.eof": False})
        self.requests.assign([TopicPartition(EXECUTION_TOPIC, 0, self.state.requests_handled_to)])
        log.info("Partition balancer: took over (execution %s, requests handled to offset %d, removed nodes %s)",
                 snapshot.execution.id + " " + snapshot.execution.status if snapshot.execution else "none",
                 self.state.requests_handled_to, list(self.state.removed_nodes) or "none")
        self._write_state(now, force=True)

    def _new_requests(self) -> list[tuple[int, Request]]:
        found = []
        while True:
            message = self.requests.poll(0.05 if found else 0.2)
            if message is None:
                return found
            if message.error():
                raise ControlError(f"reading {EXECUTION_TOPIC}: {message.error().str()}")
            if message.key() == REQUEST_KEY and message.value() is not None:
                try:
                    found.append((message.offset(), Request.from_json(message.value())))
                except (KeyError, TypeError, ValueError):
                    log.warning("Partition balancer: skipping an unreadable request at offset %d", message.offset())

    # requests

    def _handle(self, request: Request, now: int) -> None:
        """Answer a request once: a request answered before (by this service or one before it that died before
        recording how far it had handled them) is skipped; one whose execution was started but not answered is
        answered now."""
        if request.id in self.answered:
            return
        execution = self.executor.execution
        busy = execution is not None and execution.status in (RUNNING, STOPPING)
        try:
            if request.operation == STOP:
                if not busy:
                    raise BalancerError("no execution is running")
                self.executor.stop()
                result = self._result(request, ACCEPTED, now, execution_id=execution.id)
            elif request.operation == RESUME:
                resumed = self.executor.resume()
                if resumed is None:
                    raise BalancerError("no stopped execution to resume")
                result = self._result(request, ACCEPTED, now, execution_id=resumed.id)
            elif request.operation in PROPOSAL_OPERATIONS:
                if execution is not None and execution.id == request.id:  # started, then the service died
                    self._note_removals(request)
                    result = self._result(request, ACCEPTED, now, execution_id=execution.id)
                else:
                    if busy:
                        raise BalancerError(f"execution {execution.id} is {execution.status}: wait for it, or stop it")
                    model = self._model(self.service.metadata_now(), now)
                    proposal = plan(request.operation, request.nodes, model, self.settings, request.goals,
                                    self.state.removed_nodes)
                    self._note_removals(request)
                    self._write_state(now, force=True)  # removed nodes first: none may get load back meanwhile
                    execution_id = self._start(proposal, request.id)
                    result = self._result(request, ACCEPTED, now, execution_id, proposal)
            else:
                raise BalancerError(f"unknown operation {request.operation!r}")
        except BalancerError as exc:
            result = self._result(request, REFUSED, now, error=str(exc))
        except (ControlError, ExecutorError, KafkaException):
            raise  # the cluster unavailable: this request is handled again by the next tick
        except Exception as exc:  # noqa: BLE001 - a bug must not stop the service at this request forever
            log.exception("Partition balancer: handling %s failed", request)
            result = self._result(request, REFUSED, now, error=f"internal error: {exc}")
        self.service.requests_handled += 1
        if result.status == REFUSED:
            self.service.requests_refused += 1
        log.info("Partition balancer: %s %s%s: %s%s", request.origin, request.operation,
                 f" {list(request.nodes)}" if request.nodes else "", result.status,
                 f" ({result.error})" if result.error else "")
        self.writer.append(result_key(request.id), result.to_json())
        self.answered.add(request.id)

    def _note_removals(self, request: Request) -> None:
        removed = set(self.state.removed_nodes)
        if request.operation == REMOVE_NODES:
            removed |= set(request.nodes)
        elif request.operation == ADD_NODES:
            removed -= set(request.nodes)
        self._set_state(removed_nodes=tuple(sorted(removed)))

    def _start(self, proposal: Proposal, execution_id: str) -> str | None:
        if proposal.is_empty:
            return None
        try:
            return self.executor.start(proposal, self.service.limits, execution_id=execution_id).id
        except ExecutorError as exc:
            raise BalancerError(str(exc)) from None

    def _result(self, request: Request, status: str, now: int, execution_id: str | None = None,
                proposal: Proposal | None = None, error: str | None = None, reason: str | None = None) -> RequestResult:
        return RequestResult(
            request.id, request.operation, request.nodes, status, error, execution_id,
            len(proposal.replica_moves) if proposal else 0, len(proposal.leadership_changes) if proposal else 0,
            proposal.bytes_moved if proposal else 0, request.requested_ms, now, request.origin, reason)

    # continuous mode

    def _note_unavailable(self, metadata: ClusterMetadata, now: int) -> None:
        since = dict(self.state.unavailable_since_ms)
        for node in metadata.nodes:
            if node in metadata.alive:
                since.pop(node, None)
            else:
                since.setdefault(node, now)
        for node in [n for n in since if n not in metadata.nodes]:
            del since[node]
        removed = tuple(n for n in self.state.removed_nodes if n in metadata.nodes)
        self._set_state(unavailable_since_ms=since, removed_nodes=removed)

    def _act_by_itself(self, metadata: ClusterMetadata, now: int) -> None:
        if self.service.mode == "off":
            return
        metadata = self.service.metadata_now()
        timeout = self.service.timeout_ms
        due = {n for n, since in self.state.unavailable_since_ms.items() if now - since >= timeout}
        if metadata is self.evaluated_on and due <= self.due_seen and now - self.evaluated_ms < REEVALUATE_MS:
            return  # nothing new: the model (a walk of every partition) is not built every tick
        self.evaluated_on, self.due_seen, self.evaluated_ms = metadata, due, now
        model = self._model(metadata, now)
        action = automatic_action(model, self.service.mode, self.settings, now, self.state.unavailable_since_ms,
                                  self.state.removed_nodes, self.service.timeout_ms)
        if action is None:
            self.nothing_to_do = None
            return
        operation, nodes, reason = action
        fingerprint = _fingerprint(operation, nodes, metadata)
        if fingerprint == self.nothing_to_do:
            return
        request = Request(operation, nodes, origin="automatic", requested_ms=now)
        try:
            proposal = plan(operation, nodes, model, self.settings, None, self.state.removed_nodes)
        except BalancerError as exc:
            log.warning("Partition balancer: %s (%s) cannot be done: %s", operation, reason, exc)
            self.nothing_to_do = fingerprint
            return
        if proposal.is_empty:
            log.info("Partition balancer: %s, but no proposal improves on the placement", reason)
            self.nothing_to_do = fingerprint
            return
        execution_id = self._start(proposal, request.id)
        self.service.automatic_actions += 1
        text = f"{operation}{' ' + ','.join(map(str, nodes)) if nodes else ''}: {reason}"
        log.info("Partition balancer: %s; execution %s moves %d replicas (%d bytes), changes %d leaderships", text,
                 execution_id, len(proposal.replica_moves), proposal.bytes_moved, len(proposal.leadership_changes))
        self._set_state(last_automatic=text)
        self.writer.append(result_key(request.id),
                           self._result(request, ACCEPTED, now, execution_id, proposal, reason=reason).to_json())

    # the model and the samples

    def _model(self, metadata: ClusterMetadata, now: int):
        built = build_model(metadata, self.monitor, now)
        self._set_state(samples_coverage=round(built.coverage.ratio, 4))
        return built.model

    def _read_samples(self, now: int) -> None:
        if self.samples is None:
            consumer = Consumer({**self.properties, "group.id": f"odradek-balancer-samples-{self.node_id}",
                                 "enable.auto.commit": False, "allow.auto.create.topics": False})
            try:
                (start,) = consumer.offsets_for_times([TopicPartition(SAMPLES_TOPIC, 0, now - self.monitor.window_ms)],
                                                      timeout=CLIENT_TIMEOUT_S)
            except KafkaException as exc:
                consumer.close()
                if exc.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                    return  # no node has sampled yet
                raise
            if start.error is not None:
                consumer.close()
                return
            consumer.assign([TopicPartition(SAMPLES_TOPIC, 0, start.offset if start.offset >= 0 else -1)])
            self.samples = consumer
        while True:
            message = self.samples.poll(0.05)
            if message is None:
                break
            if message.error():
                raise KafkaException(message.error())
            sample = decode_sample(message.value())
            if sample is not None:
                self.monitor.add(sample)
        self.monitor.expire(now)

    # the state

    def _set_state(self, **changes) -> None:
        self.state = replace(self.state, **changes)

    def _write_state(self, now: int, force: bool = False) -> None:
        value = replace(self.state, updated_ms=0).to_json()
        if value == self.written_state and not force and now - self.written_ms < HEARTBEAT_MS:
            return
        self.state = replace(self.state, updated_ms=now)
        self.writer.append(SERVICE_KEY, self.state.to_json())
        self.written_state, self.written_ms = value, now

    def close(self) -> None:
        for consumer in (self.samples, self.requests):
            if consumer is not None:
                consumer.close()
        self.writer.close()
        self.executor.close()


def _fingerprint(operation: str, nodes: tuple[int, ...], metadata: ClusterMetadata) -> str:
    digest = hashlib.sha256(f"{operation} {nodes} {sorted(metadata.alive)}".encode())
    for p in metadata.partitions:
        digest.update(f"{p.topic} {p.index} {p.replicas} {p.leader}".encode())
    return digest.hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)
