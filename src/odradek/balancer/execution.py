"""The execution of a proposal, sans-I/O: which reassignments to start next within the concurrency limits, the
replication throttles they need, leadership changes last, progress and an estimated time to finish, stop and
resume; serializable to JSON so that another process can pick up a half-done execution.

The driver (executor.py) calls, every poll:

    execution.observe(now_ms, ongoing, replicas, leaders)  # ListPartitionReassignments and Metadata
    execution.start_moves(now_ms)                          # marks moves started (persist before sending)
    changes = execution.throttle_changes()                 # SETs and DELETEs, then:
    execution.throttles_applied(changes, now_ms)
    execution.reassignments_to_send()                      # started moves not yet accepted (sent again)
    execution.reassignment_sent(key, error, now_ms)        # each AlterPartitionReassignments answer
    execution.leadership_actions()                         # reorders (reassignments), preferred elections
    execution.election_result(key, error)                  # each ElectLeaders answer

Replica moves: pending -> in_progress -> done (or failed, with the error). A move is done once the cluster
shows no reassignment of its partition in progress and its replicas are the target set. A started move that
the cluster shows neither in progress nor done (the driver died before sending it, or the metadata lags) is
sent again: a reassignment to the replicas a partition already has, or is moving to, changes nothing.

Concurrency: a move in flight counts against every node it adds or removes a replica on (max_moves_per_node)
and against the total (max_moves_total). Moves start in the proposal's order; one blocked by a busy node is
skipped, not waited for.

Throttles, as Kafka's kafka-reassign-partitions applies them: for the topics of the moves in flight,
`leader.replication.throttled.replicas` lists each moving partition's current replicas and
`follower.replication.throttled.replicas` its added replicas (`partition:node` entries); every node a move in
flight involves gets `leader.replication.throttled.rate` and `follower.replication.throttled.rate`. The
execution keeps the throttles it has applied and computes the difference from those the moves in flight
need, so a throttle goes when its moves are done (a topic's lists shrink as its moves finish), and applying
a difference twice is harmless.

Leadership changes run after every replica move has finished, in batches: the new leader is made the first
replica (a reassignment that copies nothing) and a preferred-leader election run; a change is done when the
new leader leads and is first.

Stop (Cruise Control's stop_proposal_execution): no new move starts; moves in flight finish; the status is
then `stopped`. `resume` continues where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from odradek.balancer.optimizer import Proposal, ReplicaChange

FORMAT_VERSION = 1

# Statuses of an execution.
RUNNING = "running"
STOPPING = "stopping"  # stop asked: no new move starts, those in flight finish
STOPPED = "stopped"
DONE = "done"

# States of a move or a leadership change.
PENDING = "pending"
IN_PROGRESS = "in_progress"
SUCCEEDED = "done"
FAILED = "failed"

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"

TopicPartition = tuple[str, int]


class ExecutionError(Exception):
    """An execution that cannot be built or restored (a bad proposal, limits or JSON)."""


@dataclass(frozen=True)
class ExecutionLimits:
    """max_moves_per_node: moves in flight that add or remove a replica on one node; max_moves_total: in flight
    in all; throttle_bytes_per_s: the replication throttle rate of the nodes involved (None: no throttle);
    leadership_batch: leadership changes per batch; max_election_attempts: preferred elections tried per change
    before it is given up as failed."""

    max_moves_per_node: int = 5
    max_moves_total: int = 10
    throttle_bytes_per_s: int | None = None
    leadership_batch: int = 1000
    max_election_attempts: int = 30

    def __post_init__(self):
        if self.max_moves_per_node < 1 or self.max_moves_total < 1 or self.leadership_batch < 1:
            raise ExecutionError("execution limits must be at least 1")
        if self.throttle_bytes_per_s is not None and self.throttle_bytes_per_s < 1:
            raise ExecutionError("the throttle rate must be at least 1 byte/s, or None for no throttle")


@dataclass
class MoveTask(ReplicaChange):
    topic: str
    partition: int
    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]
    bytes_moved: int
    goal: str
    state: str = PENDING
    started_ms: int | None = None
    finished_ms: int | None = None
    acknowledged: bool = False  # the cluster accepted the reassignment (or showed it in progress)
    error: str | None = None

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


    @property
    def nodes(self) -> tuple[int, ...]:
        """The nodes the move counts against: those it adds or removes a replica on."""
        return tuple(sorted(set(self.added) | set(self.removed)))

    @property
    def involved(self) -> tuple[int, ...]:
        """Every node that copies for it: old replicas (leaders of the copy) and added ones."""
        return tuple(sorted(set(self.old_replicas) | set(self.new_replicas)))


@dataclass
class LeaderTask:
    topic: str
    partition: int
    old_leader: int | None
    new_leader: int
    goal: str
    state: str = PENDING
    election_attempts: int = 0
    error: str | None = None

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class ConfigChange:
    """One config to set (value) or delete (value None) on a resource: kind "broker" (name the node id) or
    "topic"."""

    kind: str
    name: str
    key: str
    value: str | None


@dataclass(frozen=True)
class LeadershipActions:
    """reorders: reassignments that make the new leader first (copy nothing); elections: partitions that need
    a preferred-leader election."""

    reorders: tuple[tuple[TopicPartition, tuple[int, ...]], ...]
    elections: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Progress:
    status: str
    moves_total: int
    moves_done: int
    moves_in_flight: int
    moves_failed: int
    bytes_total: int
    bytes_done: int
    leadership_total: int
    leadership_done: int
    leadership_failed: int
    eta_ms: int | None  # None: no rate observed yet (or nothing left: 0)

    @property
    def finished(self) -> bool:
        return self.status == DONE


@dataclass
class Execution:
    """One proposal's execution (see the module docstring). Build it with `from_proposal`; restore it with
    `from_json`."""

    id: str
    limits: ExecutionLimits
    moves: list[MoveTask]
    leadership: list[LeaderTask]
    status: str = RUNNING
    created_ms: int = 0
    run_started_ms: int | None = None  # when this run (the first, or the last resume) began
    run_started_bytes: int = 0
    run_started_moves: int = 0
    finished_ms: int | None = None
    applied_throttles: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # What the cluster showed last, for the partitions of the leadership changes.
    observed_replicas: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    observed_leaders: dict[TopicPartition, int | None] = field(default_factory=dict)
    observed_ongoing: frozenset[TopicPartition] = frozenset()

    @classmethod
    def from_proposal(cls, proposal: Proposal, limits: ExecutionLimits, *, execution_id: str,
                      now_ms: int) -> Execution:
        moves = [MoveTask(m.topic, m.partition, tuple(m.old_replicas), tuple(m.new_replicas), m.bytes_moved, m.goal)
                 for m in proposal.replica_moves]
        if len({m.key for m in moves}) != len(moves):
            raise ExecutionError("the proposal moves a partition twice")
        leadership = [LeaderTask(c.topic, c.partition, c.old_leader, c.new_leader, c.goal)
                      for c in proposal.leadership_changes]
        execution = cls(execution_id, limits, moves, leadership, created_ms=now_ms, run_started_ms=now_ms)
        execution._advance(now_ms)
        return execution

    # -------------------------------------------------------------------------------------------------
    # Observations

    def observe(self, now_ms: int, ongoing: Collection[TopicPartition],
                replicas: Mapping[TopicPartition, tuple[int, ...]],
                leaders: Mapping[TopicPartition, int | None]) -> None:
        """What the cluster shows: the partitions with a reassignment in progress, and each partition's replicas
        (in order) and leader. Marks the moves done that are."""
        ongoing = frozenset(ongoing)
        self.observed_ongoing = ongoing
        for move in self.moves:
            if move.state != IN_PROGRESS:
                continue
            if move.key in ongoing:
                move.acknowledged = True
                continue
            current = replicas.get(move.key)
            if current is None:
                move.state, move.error, move.finished_ms = FAILED, "the partition no longer exists", now_ms
            elif set(current) == set(move.new_replicas):
                # Possibly done before anyone saw it in progress (a small partition): the replicas are the target.
                move.state, move.finished_ms = SUCCEEDED, now_ms
            else:
                move.acknowledged = False  # neither in progress nor done: send it again
        for change in self.leadership:
            if change.key in replicas:
                self.observed_replicas[change.key] = tuple(replicas[change.key])
                self.observed_leaders[change.key] = leaders.get(change.key)
            elif change.state in (PENDING, IN_PROGRESS) and self._replica_phase_over():
                change.state, change.error = FAILED, "the partition no longer exists"
        for change in self._leadership_batch():
            current = self.observed_replicas.get(change.key)
            if current is None:
                continue
            if change.new_leader not in current:
                change.state, change.error = FAILED, f"node {change.new_leader} is no longer a replica"
            elif current[0] == change.new_leader and self.observed_leaders.get(change.key) == change.new_leader:
                change.state = SUCCEEDED
        self._advance(now_ms)

    def reassignment_sent(self, key: TopicPartition, error: str | None, now_ms: int) -> None:
        """The answer to a move's AlterPartitionReassignments: None, or the error (the move fails)."""
        move = self._move(key)
        if move.state != IN_PROGRESS:
            return
        if error is None:
            move.acknowledged = True
        else:
            move.state, move.error, move.finished_ms = FAILED, error, now_ms
        self._advance(now_ms)

    def election_result(self, key: TopicPartition, error: str | None) -> None:
        """The answer to a preferred-leader election (None or ELECTION_NOT_NEEDED: fine). After
        max_election_attempts failed ones the change fails with the last error."""
        change = next(c for c in self.leadership if c.key == key)
        if change.state != IN_PROGRESS or error is None:
            return
        if change.election_attempts >= self.limits.max_election_attempts:
            change.state, change.error = FAILED, error

    def throttles_applied(self, changes: Collection[ConfigChange], now_ms: int) -> None:
        for change in changes:
            if change.value is None:
                self.applied_throttles.pop((change.kind, change.name, change.key), None)
            else:
                self.applied_throttles[(change.kind, change.name, change.key)] = change.value
        self._advance(now_ms)

    # -------------------------------------------------------------------------------------------------
    # Decisions

    def start_moves(self, now_ms: int) -> list[MoveTask]:
        """Marks the pending moves that the limits allow as in progress, in the proposal's order, and returns
        them. Persist the execution before sending them (see reassignments_to_send)."""
        if self.status != RUNNING:
            return []
        in_flight = [m for m in self.moves if m.state == IN_PROGRESS]
        per_node: dict[int, int] = {}
        for move in in_flight:
            for node in move.nodes:
                per_node[node] = per_node.get(node, 0) + 1
        total = len(in_flight)
        started = []
        for move in self.moves:
            if total >= self.limits.max_moves_total:
                break
            if move.state != PENDING:
                continue
            if any(per_node.get(node, 0) >= self.limits.max_moves_per_node for node in move.nodes):
                continue
            move.state, move.started_ms, move.acknowledged = IN_PROGRESS, now_ms, False
            for node in move.nodes:
                per_node[node] = per_node.get(node, 0) + 1
            total += 1
            started.append(move)
        return started

    def reassignments_to_send(self) -> list[MoveTask]:
        """Moves in progress that the cluster has neither accepted nor shown in progress: (re)send them, after
        applying throttle_changes()."""
        return [m for m in self.moves if m.state == IN_PROGRESS and not m.acknowledged]

    def desired_throttles(self) -> dict[tuple[str, str, str], str]:
        """The throttle configs the moves in flight need: (kind, name, key) -> value."""
        rate = self.limits.throttle_bytes_per_s
        if rate is None:
            return {}
        leader_lists: dict[str, set[tuple[int, int]]] = {}
        follower_lists: dict[str, set[tuple[int, int]]] = {}
        nodes: set[int] = set()
        for move in self.moves:
            if move.state != IN_PROGRESS:
                continue
            leader_lists.setdefault(move.topic, set()).update((move.partition, n) for n in move.old_replicas)
            follower_lists.setdefault(move.topic, set()).update((move.partition, n) for n in move.added)
            nodes.update(move.involved)
        desired: dict[tuple[str, str, str], str] = {}
        for node in sorted(nodes):
            desired[("broker", str(node), LEADER_THROTTLED_RATE)] = str(rate)
            desired[("broker", str(node), FOLLOWER_THROTTLED_RATE)] = str(rate)
        for topic, entries in sorted(leader_lists.items()):
            desired[("topic", topic, LEADER_THROTTLED_REPLICAS)] = _replica_list(entries)
        for topic, entries in sorted(follower_lists.items()):
            if entries:
                desired[("topic", topic, FOLLOWER_THROTTLED_REPLICAS)] = _replica_list(entries)
        return desired

    def throttle_changes(self) -> list[ConfigChange]:
        """What to set and delete so that the applied throttles become the desired ones. Apply them, then call
        throttles_applied with them."""
        desired = self.desired_throttles()
        changes = [ConfigChange(kind, name, key, value) for (kind, name, key), value in sorted(desired.items())
                   if self.applied_throttles.get((kind, name, key)) != value]
        changes += [ConfigChange(kind, name, key, None) for (kind, name, key) in sorted(self.applied_throttles)
                    if (kind, name, key) not in desired]
        return changes

    def leadership_actions(self) -> LeadershipActions:
        """For the current leadership batch (empty until every replica move has finished): the reorders to
        send and the elections to run. Counts an election attempt for each election returned."""
        reorders, elections = [], []
        for change in self._leadership_batch():
            current = self.observed_replicas.get(change.key)
            if current is None or change.new_leader not in current:
                continue
            if current[0] != change.new_leader:
                if change.key not in self.observed_ongoing:
                    reorders.append((change.key, (change.new_leader,) + tuple(n for n in current
                                                                              if n != change.new_leader)))
            elif self.observed_leaders.get(change.key) != change.new_leader:
                change.election_attempts += 1
                elections.append(change.key)
        return LeadershipActions(tuple(reorders), tuple(elections))

    def stop(self, now_ms: int) -> None:
        """No new move starts; those in flight finish (then the status is stopped)."""
        if self.status == RUNNING:
            self.status = STOPPING
            self._advance(now_ms)

    def resume(self, now_ms: int) -> None:
        if self.status in (STOPPING, STOPPED):
            self.status = RUNNING
            self.run_started_ms = now_ms
            self.run_started_bytes = self._bytes_done()
            self.run_started_moves = sum(1 for m in self.moves if m.state == SUCCEEDED)
            self._advance(now_ms)

    def topics(self) -> set[str]:
        """The topics of its moves and leadership changes."""
        return {m.topic for m in self.moves} | {c.topic for c in self.leadership}

    # -------------------------------------------------------------------------------------------------
    # Progress

    @property
    def finished(self) -> bool:
        return self.status == DONE

    def progress(self, now_ms: int) -> Progress:
        done = [m for m in self.moves if m.state == SUCCEEDED]
        bytes_total = sum(m.bytes_moved for m in self.moves)
        bytes_done = self._bytes_done()
        remaining_moves = [m for m in self.moves if m.state in (PENDING, IN_PROGRESS)]
        eta = None
        if self.status == DONE or not remaining_moves:
            eta = 0
        elif self.run_started_ms is not None and now_ms > self.run_started_ms:
            elapsed = now_ms - self.run_started_ms
            bytes_rate = (bytes_done - self.run_started_bytes) / elapsed
            remaining_bytes = sum(m.bytes_moved for m in remaining_moves)
            moves_rate = (len(done) - self.run_started_moves) / elapsed
            if remaining_bytes and bytes_rate > 0:
                eta = round(remaining_bytes / bytes_rate)
            elif moves_rate > 0:
                eta = round(len(remaining_moves) / moves_rate)
        return Progress(
            status=self.status, moves_total=len(self.moves), moves_done=len(done),
            moves_in_flight=sum(1 for m in self.moves if m.state == IN_PROGRESS),
            moves_failed=sum(1 for m in self.moves if m.state == FAILED), bytes_total=bytes_total,
            bytes_done=bytes_done, leadership_total=len(self.leadership),
            leadership_done=sum(1 for c in self.leadership if c.state == SUCCEEDED),
            leadership_failed=sum(1 for c in self.leadership if c.state == FAILED), eta_ms=eta)

    # -------------------------------------------------------------------------------------------------
    # Persistence

    def to_json(self) -> str:
        return json.dumps({
            "version": FORMAT_VERSION, "id": self.id, "status": self.status, "created_ms": self.created_ms,
            "run_started_ms": self.run_started_ms, "run_started_bytes": self.run_started_bytes,
            "run_started_moves": self.run_started_moves, "finished_ms": self.finished_ms,
            "limits": {"max_moves_per_node": self.limits.max_moves_per_node,
                       "max_moves_total": self.limits.max_moves_total,
                       "throttle_bytes_per_s": self.limits.throttle_bytes_per_s,
                       "leadership_batch": self.limits.leadership_batch,
                       "max_election_attempts": self.limits.max_election_attempts},
            "moves": [{"topic": m.topic, "partition": m.partition, "old_replicas": list(m.old_replicas),
                       "new_replicas": list(m.new_replicas), "bytes_moved": m.bytes_moved, "goal": m.goal,
                       "state": m.state, "started_ms": m.started_ms, "finished_ms": m.finished_ms,
                       "acknowledged": m.acknowledged, "error": m.error} for m in self.moves],
            "leadership": [{"topic": c.topic, "partition": c.partition, "old_leader": c.old_leader,
                            "new_leader": c.new_leader, "goal": c.goal, "state": c.state,
                            "election_attempts": c.election_attempts, "error": c.error} for c in self.leadership],
            "applied_throttles": [[kind, name, key, value]
                                  for (kind, name, key), value in sorted(self.applied_throttles.items())],
        }, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Execution:
        try:
            data = json.loads(text)
            if data.get("version") != FORMAT_VERSION:
                raise ExecutionError(f"unknown execution format version {data.get('version')!r}")
            moves = [MoveTask(m["topic"], m["partition"], tuple(m["old_replicas"]), tuple(m["new_replicas"]),
                              m["bytes_moved"], m["goal"], m["state"], m["started_ms"], m["finished_ms"],
                              m["acknowledged"], m["error"]) for m in data["moves"]]
            leadership = [LeaderTask(c["topic"], c["partition"], c["old_leader"], c["new_leader"], c["goal"],
                                     c["state"], c["election_attempts"], c["error"]) for c in data["leadership"]]
            return cls(data["id"], ExecutionLimits(**data["limits"]), moves, leadership, status=data["status"],
                       created_ms=data["created_ms"], run_started_ms=data["run_started_ms"],
                       run_started_bytes=data["run_started_bytes"], run_started_moves=data["run_started_moves"],
                       finished_ms=data["finished_ms"],
                       applied_throttles={(k, n, key): v for k, n, key, v in data["applied_throttles"]})
        except (KeyError, TypeError, ValueError) as exc:
            raise ExecutionError(f"not an execution: {exc}") from None

    # -------------------------------------------------------------------------------------------------

    def _move(self, key: TopicPartition) -> MoveTask:
        return next(m for m in self.moves if m.key == key)

    def _bytes_done(self) -> int:
        return sum(m.bytes_moved for m in self.moves if m.state == SUCCEEDED)

    def _replica_phase_over(self) -> bool:
        return all(m.state in (SUCCEEDED, FAILED) for m in self.moves)

    def _leadership_batch(self) -> list[LeaderTask]:
        return [c for c in self.leadership if c.state == IN_PROGRESS]

    def _advance(self, now_ms: int) -> None:
        """Status and leadership batches from the tasks' states."""
        if self.status in (STOPPED, DONE):
            return
        in_flight = any(m.state == IN_PROGRESS for m in self.moves)
        if self.status == STOPPING:
            if not in_flight and not self._leadership_batch() and not self.applied_throttles:
                self.status = STOPPED
            return
        if not self._replica_phase_over():
            return
        if not self._leadership_batch():
            for change in [c for c in self.leadership if c.state == PENDING][:self.limits.leadership_batch]:
                change.state = IN_PROGRESS
        if not self._leadership_batch() and not self.applied_throttles:
            self.status, self.finished_ms = DONE, now_ms


def _replica_list(entries: set[tuple[int, int]]) -> str:
    return ",".join(f"{partition}:{node}" for partition, node in sorted(entries))
