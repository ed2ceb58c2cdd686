"""The balancer's control records, kept beside the execution (key "execution", executor.py) in its compacted
topic `__balancer_execution`:

    key "request"        an operator's request (the CLI, the HTTP API): an operation, its nodes and goals. Any
                         client appends one; the balancer service reads them in offset order.
    key "result:<id>"    what the service did with request <id>: accepted (the execution it started, the size of
                         the proposal) or refused, with a one-line reason.
    key "service"        the service's own state: the node that runs it, its mode and goal settings, the nodes
                         removed (kept empty until they leave or are added again), when each unavailable node was
                         first seen down, the offset up to which requests are handled, and its last automatic action.

So every decision the service takes survives the node that runs it: a successor reads the state and goes on from
the next request. `read_control` reads the topic's current end as a `ControlSnapshot`; `append` writes records.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.balancer.execution import Execution, ExecutionError
from odradek.balancer.executor import EXECUTION_KEY, EXECUTION_TOPIC

REQUEST_KEY = b"request"
SERVICE_KEY = b"service"
RESULT_PREFIX = b"result:"
READ_TIMEOUT_S = 30.0
ATTEMPT_TIMEOUT_S = 2.0

# Operations an operator asks for, and the service's own ("heal": rebuild an unavailable node's replicas).
REBALANCE, ADD_NODES, REMOVE_NODES, DEMOTE, HEAL = "rebalance", "add_nodes", "remove_nodes", "demote", "heal"
STOP, RESUME = "stop", "resume"
PROPOSAL_OPERATIONS = (REBALANCE, ADD_NODES, REMOVE_NODES, DEMOTE)
OPERATIONS = PROPOSAL_OPERATIONS + (STOP, RESUME)

ACCEPTED, REFUSED = "accepted", "refused"


class ControlError(Exception):
    """The control topic cannot be read or written."""


@dataclass(frozen=True)
class Request:
    operation: str
    nodes: tuple[int, ...] = ()
    goals: tuple[str, ...] | None = None  # None: every goal
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    requested_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    origin: str = "client"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes) -> Request:
        """ValueError for anything but a request of the right types (the topic takes any client's records)."""
        data = json.loads(value)
        nodes, goals = data.get("nodes") or [], data.get("goals")
        if not (isinstance(data["operation"], str) and isinstance(data["id"], str) and isinstance(nodes, list)
                and all(type(n) is int for n in nodes) and (goals is None or isinstance(goals, list)
                                                             and all(isinstance(g, str) for g in goals))):
            raise ValueError(f"not a balancer request: {data!r:.200}")
        return cls(data["operation"], tuple(nodes), None if goals is None else tuple(goals), data["id"],
                   int(data.get("requested_ms", 0)), str(data.get("origin", "client")))


@dataclass(frozen=True)
class RequestResult:
    """What the service did with a request (or, for its own actions, with a trigger: origin "automatic")."""

    id: str
    operation: str
    nodes: tuple[int, ...]
    status: str  # accepted or refused
    error: str | None = None
    execution_id: str | None = None
    replica_moves: int = 0
    leadership_changes: int = 0
    bytes_to_move: int = 0
    requested_ms: int = 0
    handled_ms: int = 0
    origin: str = "client"
    reason: str | None = None  # an automatic action's trigger

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes) -> RequestResult:
        data = json.loads(value)
        data["nodes"] = tuple(data.get("nodes") or ())
        return cls(**data)


@dataclass(frozen=True)
class ServiceState:
    node_id: int
    mode: str
    settings: Mapping[str, str]  # the balancer.* goal settings the service proposes with
    removed_nodes: tuple[int, ...] = ()
    unavailable_since_ms: Mapping[int, int] = field(default_factory=dict)
    requests_handled_to: int = 0  # the offset after the last request handled
    updated_ms: int = 0
    last_automatic: str | None = None
    samples_coverage: float | None = None  # sampled partitions / partitions, at the last model built

    def to_json(self) -> bytes:
        data = asdict(self)
        data["unavailable_since_ms"] = {str(k): v for k, v in self.unavailable_since_ms.items()}
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes) -> ServiceState:
        data = json.loads(value)
        data["removed_nodes"] = tuple(data.get("removed_nodes") or ())
        data["unavailable_since_ms"] = {int(k): v for k, v in (data.get("unavailable_since_ms") or {}).items()}
        return cls(**data)


@dataclass
class ControlSnapshot:
    """The topic read to its end: the execution, the service's state, every result kept, and the requests from
    `requests_from` on (with their offsets)."""

    execution: Execution | None = None
    service: ServiceState | None = None
    results: dict[str, RequestResult] = field(default_factory=dict)
    requests: list[tuple[int, Request]] = field(default_factory=list)
    end_offset: int = 0


def read_control(properties: Mapping[str, str], requests_from: int | None = None,
                 timeout_s: float = READ_TIMEOUT_S) -> ControlSnapshot:
    """Read the control topic from its start to its current end (an empty snapshot when it does not exist), with
    the requests from offset `requests_from` on (None: none). properties: librdkafka client properties with
    bootstrap.servers."""
    snapshot = ControlSnapshot()
    deadline = time.monotonic() + timeout_s
    while True:
        # A consumer per attempt, each with fresh metadata: one that asked a leader that has just died waits out
        # its whole timeout rather than look for the new one.
        consumer = _consumer(properties)
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(EXECUTION_TOPIC, 0), timeout=ATTEMPT_TIMEOUT_S)
            break
        except KafkaException as exc:
            consumer.close()
            error = exc.args[0]
            if error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                                KafkaError._UNKNOWN_PARTITION):
                return snapshot
            if not (error.retriable() or error.code() == KafkaError._TIMED_OUT) or time.monotonic() > deadline:
                raise ControlError(f"reading {EXECUTION_TOPIC}: {error.str()}") from None
            time.sleep(0.2)
    try:
        snapshot.end_offset = high
        if high <= low:
            return snapshot
        consumer.assign([TopicPartition(EXECUTION_TOPIC, 0, low)])
        position = low
        while position < high:
            if time.monotonic() > deadline:
                raise ControlError(f"reading {EXECUTION_TOPIC}: not at its end within {timeout_s}s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise ControlError(f"reading {EXECUTION_TOPIC}: {message.error().str()}")
            position = message.offset() + 1
            _take(snapshot, message.key() or b"", message.value(), message.offset(), requests_from)
        return snapshot
    finally:
        consumer.close()


def _consumer(properties: Mapping[str, str]) -> Consumer:
    return Consumer({**properties, "group.id": f"odradek-balancer-{uuid.uuid4().hex}", "enable.auto.commit": False,
                     "enable.partition.eof": False, "allow.auto.create.topics": False,
                     "isolation.level": "read_uncommitted"})


def _take(snapshot: ControlSnapshot, key: bytes, value: bytes | None, offset: int, requests_from: int | None) -> None:
    if value is None:  # a tombstone
        return
    try:
        if key == EXECUTION_KEY:
            snapshot.execution = Execution.from_json(value)
        elif key == SERVICE_KEY:
            snapshot.service = ServiceState.from_json(value)
        elif key.startswith(RESULT_PREFIX):
            result = RequestResult.from_json(value)
            snapshot.results[result.id] = result
        elif key == REQUEST_KEY and requests_from is not None and offset >= requests_from:
            snapshot.requests.append((offset, Request.from_json(value)))
    except (KeyError, TypeError, ValueError, AttributeError, ExecutionError):
        return  # not ours, or of a later version: skipped, as a poison record must not stop the balancer


class ControlWriter:
    """Appends control records (acks=all, idempotent) and waits for each to be acknowledged."""

    def __init__(self, properties: Mapping[str, str]):
        self._producer = Producer({**properties, "enable.idempotence": True, "acks": "all", "linger.ms": 0})

    def append(self, key: bytes, value: bytes, timeout_s: float = READ_TIMEOUT_S) -> int:
        """The offset the record was written at."""
        outcome: list = []
        self._producer.produce(EXECUTION_TOPIC, value, key, partition=0,
                               on_delivery=lambda error, message: outcome.append((error, message)))
        if self._producer.flush(timeout_s) or not outcome:
            raise ControlError(f"writing to {EXECUTION_TOPIC}: not acknowledged within {timeout_s}s")
        error, message = outcome[0]
        if error is not None:
            raise ControlError(f"writing to {EXECUTION_TOPIC}: {error.str()}")
        return message.offset()

    def close(self) -> None:
        self._producer.flush(READ_TIMEOUT_S)


def result_key(request_id: str) -> bytes:
    return RESULT_PREFIX + request_id.encode()
