"""The executor: runs an Execution (execution.py) against a cluster as a Kafka admin client, persisting it after
every step to the compacted topic `__balancer_execution` (key "execution"), from which another process picks up
a half-done execution (`recover`).

    executor = Executor("localhost:9092")
    executor.start(proposal, ExecutionLimits(max_moves_per_node=2, throttle_bytes_per_s=10_000_000))
    executor.run_until_done(poll_interval=1.0)     # or call executor.step() from a service's loop
    executor.close()

    executor = Executor("localhost:9092")          # later, in another process
    if executor.recover() is not None:             # the persisted execution, if running or stopping
        executor.run_until_done()

Requests: AlterPartitionReassignments and ListPartitionReassignments through Odradek's own protocol client
(`odradek.network.client.NodeConnection`: this confluent-kafka has no API for them), sent to a bootstrap server
(which forwards them to the active controller); Metadata, IncrementalAlterConfigs, ElectLeaders and the
persisted state through confluent-kafka. One executor at a time may run an execution: nothing here fences a
second one (the service that drives it will, by running it on the active controller only).

A step: observe (ListPartitionReassignments and Metadata), start the moves the limits allow, apply the throttle
changes, send the reassignments not yet accepted, then the leadership actions; the state is persisted after
each part that changed it, and always before a request that acts on it, so a process that dies between two
parts leaves a state from which the next one redoes, harmlessly, what may not have happened.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.balancer.execution import (
    ConfigChange,
    Execution,
    ExecutionLimits,
    Progress,
)
from odradek.balancer.optimizer import Proposal
from odradek.network.client import NodeConnection
from odradek.protocol.errors import ErrorCode
from odradek.security.client_properties import client_security

log = logging.getLogger(__name__)

EXECUTION_TOPIC = "__balancer_execution"
EXECUTION_KEY = b"execution"
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
REQUEST_TIMEOUT_S = 30.0


class ExecutorError(Exception):
    """The executor cannot do what it was asked: an unfinished execution exists, or a request failed."""


class Executor:
    """Runs one execution at a time against the cluster at `bootstrap` (see the module docstring). client_config:
    librdkafka-named client properties (security), for confluent-kafka and, translated by
    security/client_properties.py, for the protocol client."""

    def __init__(self, bootstrap: str, *, client_config: Mapping[str, str] | None = None,
                 topic: str = EXECUTION_TOPIC):
        self.bootstrap = bootstrap
        self.topic = topic
        self._config = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self._admin = AdminClient(self._config)
        self._producer: Producer | None = None
        self._loop = asyncio.new_event_loop()
        self._servers = [_address(s) for s in bootstrap.split(",") if s.strip()]
        self._security = client_security(client_config or {})
        self._connection: NodeConnection | None = None
        self._persisted: str | None = None
        self.execution: Execution | None = None

    # -------------------------------------------------------------------------------------------------
    # Starting, resuming, stopping

    def start(self, proposal: Proposal, limits: ExecutionLimits, execution_id: str | None = None) -> Execution:
        """Start executing the proposal. ExecutorError while another execution is running or stopping (a stopped
        one, at rest with no move in flight and no throttle left, is replaced)."""
        self._ensure_topic()
        current = self.load()
        if current is not None and current.status not in ("done", "stopped"):
            raise ExecutorError(f"execution {current.id} is {current.status}: resume or stop it first")
        self.execution = Execution.from_proposal(proposal, limits, execution_id=execution_id or uuid.uuid4().hex,
                                                 now_ms=_now_ms())
        self._persist()
        return self.execution

    def recover(self) -> Execution | None:
        """Pick up the persisted execution as it was left, running or stopping (a process or controller taking
        over from one that died); None when there is none, or it is done or stopped."""
        self._ensure_topic()
        current = self.load()
        if current is None or current.status in ("done", "stopped"):
            return None
        self.execution = current
        self._persisted = current.to_json()
        return current

    def resume(self) -> Execution | None:
        """The operator's resume: the persisted execution, if stopped or stopping, runs again (new moves start);
        a running one is picked up as recover() does. None when there is none, or it is done."""
        self._ensure_topic()
        current = self.load()
        if current is None or current.finished:
            return None
        self.execution = current
        self._persisted = current.to_json()
        current.resume(_now_ms())
        self._persist()
        return current

    def stop(self) -> None:
        """Cruise Control's stop_proposal_execution: no new move starts; those in flight finish as steps go on."""
        if self.execution is not None:
            self.execution.stop(_now_ms())
            self._persist()

    def load(self) -> Execution | None:
        """The execution persisted last, or None. The topic holds the balancer's control records too
        (control.py), so it is read from its start."""
        from odradek.balancer.control import ControlError, read_control

        try:
            return read_control(self._config, timeout_s=REQUEST_TIMEOUT_S).execution
        except ControlError as exc:
            raise ExecutorError(str(exc)) from None

    # -------------------------------------------------------------------------------------------------
    # Running

    def step(self) -> Progress:
        """One poll: observe, start moves, throttles, reassignments, leadership. Returns the progress."""
        execution = self._require()
        ongoing = self._ongoing_reassignments()
        replicas, leaders, unsure = self._partitions()
        if unsure & execution.topics():
            # Metadata had an error for a topic of the execution (its leader moving, say): a partition missing
            # from it would count as deleted. Act next time.
            log.info("balancer execution %s: metadata errors for %s; waiting", execution.id, sorted(unsure))
            return execution.progress(_now_ms())
        now = _now_ms()
        execution.observe(now, ongoing, replicas, leaders)
        self._persist()
        if execution.start_moves(now):
            self._persist()  # before sending: a successor resends what this one may not have sent
        changes = execution.throttle_changes()
        if changes:
            self._apply_configs(changes)
            execution.throttles_applied(changes, _now_ms())
            self._persist()
        to_send = execution.reassignments_to_send()
        if to_send:
            errors = self._reassign({m.key: m.new_replicas for m in to_send})
            for move in to_send:
                execution.reassignment_sent(move.key, errors.get(move.key), _now_ms())
            self._persist()
        actions = execution.leadership_actions()
        if actions.reorders:
            self._reassign(dict(actions.reorders))
        if actions.elections:
            for key, error in self._elect(actions.elections).items():
                execution.election_result(key, error)
        self._persist()
        progress = execution.progress(_now_ms())
        log.debug("balancer execution %s: %s, %d/%d moves (%d in flight, %d failed), %d/%d leaderships",
                  execution.id, progress.status, progress.moves_done, progress.moves_total, progress.moves_in_flight,
                  progress.moves_failed, progress.leadership_done, progress.leadership_total)
        return progress

    def run_until_done(self, poll_interval: float = 1.0, timeout: float | None = None,
                       max_failed_steps: int = 10) -> Progress:
        """Step until the execution is done or stopped (or timeout seconds pass: ExecutorError). A step that
        fails (the cluster unavailable, a controller failing over) is retried after poll_interval, up to
        max_failed_steps in a row; then its error is raised."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failed = 0
        while True:
            try:
                progress = self.step()
                failed = 0
            except (ExecutorError, KafkaException) as exc:
                failed += 1
                if failed >= max_failed_steps:
                    raise
                log.warning("balancer execution step failed (%d in a row): %s", failed, exc)
                time.sleep(poll_interval)
                continue
            if progress.status in ("done", "stopped"):
                return progress
            if deadline is not None and time.monotonic() > deadline:
                raise ExecutorError(f"execution not finished within {timeout}s: {progress}")
            time.sleep(poll_interval)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(REQUEST_TIMEOUT_S)
        self._drop_connection()
        self._loop.close()

    # -------------------------------------------------------------------------------------------------
    # I/O

    def _require(self) -> Execution:
        if self.execution is None:
            raise ExecutorError("no execution: start or resume one")
        return self.execution

    def _ensure_topic(self) -> None:
        ensure_execution_topic(self._admin, self.topic)

    def _persist(self) -> None:
        text = self._require().to_json()
        if text == self._persisted:
            return
        if self._producer is None:
            self._producer = Producer({**self._config, "enable.idempotence": True, "acks": "all", "linger.ms": 0})
        failure: list = []
        self._producer.produce(self.topic, text.encode(), EXECUTION_KEY, partition=0,
                               on_delivery=lambda error, _message: error and failure.append(error))
        if self._producer.flush(REQUEST_TIMEOUT_S) or failure:
            raise ExecutorError(f"persisting the execution to {self.topic}: {failure or 'timed out'}")
        self._persisted = text

    def _partitions(self) -> tuple[dict[tuple[str, int], tuple[int, ...]], dict[tuple[str, int], int | None], set[str]]:
        """Every partition's replicas and leader, and the topics Metadata answered with an error (other than
        unknown: a deleted topic is simply absent)."""
        metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        replicas, leaders, unsure = {}, {}, set()
        for name, topic in metadata.topics.items():
            if topic.error is not None:
                if topic.error.code() != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    unsure.add(name)
                continue
            for index, partition in topic.partitions.items():
                replicas[(name, index)] = tuple(partition.replicas)
                leaders[(name, index)] = partition.leader if partition.leader >= 0 else None
        return replicas, leaders, unsure

    def _request(self, api_key: int, body: dict) -> dict:
        last = None
        for _ in range(len(self._servers) * 2):
            if self._connection is None:
                host, port = self._servers[0]
                self._connection = NodeConnection(host, port, client_id="odradek-balancer",
                                                  security=self._security)
            try:
                response = self._loop.run_until_complete(self._connection.request(api_key, 0, body, REQUEST_TIMEOUT_S))
            except (ConnectionError, TimeoutError, OSError) as exc:
                last = exc
                self._drop_connection()
                self._servers.append(self._servers.pop(0))  # the next bootstrap server
                continue
            if response["error_code"] == ErrorCode.NONE:
                return response
            last = ExecutorError(f"{ErrorCode(response['error_code']).name}: {response['error_message']}")
            if response["error_code"] not in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT):
                break
            time.sleep(0.5)
        raise ExecutorError(f"request {api_key} failed: {last}")

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._loop.run_until_complete(_closed(self._connection))
            self._connection = None

    def _ongoing_reassignments(self) -> set[tuple[str, int]]:
        response = self._request(LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 30000, "topics": None})
        return {(t["name"], p["partition_index"]) for t in response["topics"] for p in t["partitions"]}

    def _reassign(self, targets: Mapping[tuple[str, int], tuple[int, ...]]) -> dict[tuple[str, int], str]:
        """Sends the reassignments; the error of each partition that has one."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, index), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": index, "replicas": list(replicas)})
        response = self._request(ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": 30000, "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]})
        errors = {}
        for topic in response["responses"]:
            for p in topic["partitions"]:
                if p["error_code"] != ErrorCode.NONE:
                    errors[(topic["name"], p["partition_index"])] = \
                        f"{ErrorCode(p['error_code']).name}: {p['error_message']}"
        return errors

    def _elect(self, keys: tuple[tuple[str, int], ...]) -> dict[tuple[str, int], str | None]:
        partitions = [TopicPartition(topic, index) for topic, index in keys]
        try:
            results = self._admin.elect_leaders(ElectionType.PREFERRED, partitions).result(REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            return {key: str(exc) for key in keys}
        errors: dict[tuple[str, int], str | None] = {}
        for tp, error in results.items():  # error: a KafkaError per partition (KafkaException in older clients)
            code = error.args[0].code() if isinstance(error, KafkaException) else error.code() if error else None
            if code == ErrorCode.ELECTION_NOT_NEEDED:
                error = None
            errors[(tp.topic, tp.partition)] = None if error is None else str(error)
        return errors

    def _apply_configs(self, changes: list[ConfigChange]) -> None:
        resources: dict[tuple[str, str], list[ConfigEntry]] = {}
        for change in changes:
            operation = AlterConfigOpType.SET if change.value is not None else AlterConfigOpType.DELETE
            resources.setdefault((change.kind, change.name), []).append(
                ConfigEntry(change.key, change.value, incremental_operation=operation))
        requests = [ConfigResource(ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC, name,
                                   incremental_configs=entries) for (kind, name), entries in resources.items()]
        topics = [r for r in requests if r.restype == ResourceType.TOPIC]
        brokers = [r for r in requests if r.restype == ResourceType.BROKER]
        for batch in ([topics] if topics else []) + [[b] for b in brokers]:  # one broker per call (librdkafka)
            for future in self._admin.incremental_alter_configs(batch).values():
                future.result(REQUEST_TIMEOUT_S)


def ensure_execution_topic(admin: AdminClient, topic: str = EXECUTION_TOPIC) -> None:
    """Create the compacted one-partition topic of the execution and the balancer's control records (replicated
    on min(3, nodes)) unless it exists, and wait until it has a leader."""
    brokers = admin.list_topics(timeout=REQUEST_TIMEOUT_S).brokers
    new_topic = NewTopic(topic, 1, replication_factor=min(3, len(brokers)),
                         config={"cleanup.policy": "compact", "min.insync.replicas": "1"})
    try:
        admin.create_topics([new_topic])[topic].result(REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while True:  # created at the controller; the brokers learn of it, and of its leader, a little later
        found = admin.list_topics(topic, timeout=REQUEST_TIMEOUT_S).topics.get(topic)
        if found is not None and found.error is None and 0 in found.partitions and found.partitions[0].leader >= 0:
            return
        if time.monotonic() > deadline:
            raise ExecutorError(f"{topic} has no leader after {REQUEST_TIMEOUT_S}s")
        time.sleep(0.2)


async def _closed(connection: NodeConnection) -> None:
    connection.close()
    await asyncio.sleep(0)  # lets its read loop end


def _now_ms() -> int:
    return int(time.time() * 1000)


def _address(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]") or "localhost", int(port)
