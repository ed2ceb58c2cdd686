"""Sans-I/O Raft core for the KRaft metadata quorum: pull-based replication with leader epochs.

Protocol in brief (KIP-595):
- Every node is in one epoch. A voter that hears nothing from a leader within the fetch timeout
  becomes a candidate: it bumps the epoch, votes for itself, persists that, and sends Vote. A voter
  grants at most one vote per epoch, only to a candidate whose log (last epoch, end offset) is at
  least as up to date as its own. Elections that stall retry after a seeded random backoff.
- The winner appends a leader-change record in its epoch and sends BeginQuorumEpoch (repeated until
  each voter has fetched). Followers pull: Fetch carries the fetch offset and the epoch of the last
  record before it. If that prefix does not match the leader's log, the leader answers with a
  diverging epoch and end offset and the follower truncates; otherwise it answers with records.
- The leader's high watermark is the largest offset that a majority of voters' fetch offsets (its
  own: the flushed end of its log) have reached, provided the record below it is of the leader's
  epoch. Followers adopt the leader's high watermark, capped by what they hold of the leader's log.
- A leader that has not heard from a majority within the check-quorum timeout, or is asked to
  `resign`, sends EndQuorumEpoch; its successors start their elections at once, in preference order.

Snapshots (KIP-630, simplified: whole snapshots, no chunking):
- The shell, never the core on its own, calls `snapshot(end_offset, state)` with its state machine's state
  after every entry below a committed `end_offset`; the log saves it durably and drops the prefix below it.
- A leader that cannot serve or validate a Fetch from its log (the fetch offset is below its log start, or
  the last fetched epoch is older than the epoch before its log start) answers with the id of its latest
  snapshot; the follower sends FetchSnapshot, and the leader answers with its latest snapshot, whole.
- The follower installs it only if it is past its high watermark and its log does not already hold the
  snapshot's last entry (end offset beyond its log end, or another epoch at end offset - 1). So installing
  never discards an entry the follower acknowledged to this leader (an acknowledged fetch offset at or past
  the snapshot's end means the same entry at end offset - 1, by log matching), nor a committed one, and the
  high watermark never goes back: it becomes the snapshot's end offset. Installing empties the log, which
  then starts at the snapshot's end offset. `take_installed_snapshot()` hands the installed snapshot to the
  shell once, to reset its state machine; a core constructed over a log holding a snapshot starts with that
  snapshot pending and its high watermark at its end offset.

The core does no I/O and reads no clock: `handle(message, now_ms)` and `tick(now_ms)` return the
messages to send; it calls the injected `RaftLog` and `QuorumStateStore` directly (these fsync).
Not implemented: pre-vote, observers, voter set changes, snapshot chunking.
"""

import random
from dataclasses import dataclass
from enum import Enum

from odradek.raft.log import QuorumState, QuorumStateStore, RaftLog
from odradek.raft.messages import (
    NO_LEADER,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchError,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Send,
    Snapshot,
    VoteRequest,
    VoteResponse,
)


class Role(Enum):
    UNATTACHED = "unattached"  # knows the epoch, no leader yet (may have voted)
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"
    RESIGNED = "resigned"  # former leader waiting for the next election


@dataclass(frozen=True, slots=True)
class RaftConfig:
    fetch_timeout_ms: int = 400
    election_timeout_ms: int = 200
    election_backoff_max_ms: int = 200
    fetch_interval_ms: int = 20
    begin_retry_ms: int = 50
    max_fetch_entries: int = 16


class RaftCore:
    def __init__(self, node_id: int, voters: frozenset[int] | set[int], log: RaftLog, store: QuorumStateStore,
                 rng_seed: int, now_ms: int = 0, config: RaftConfig | None = None):
        if node_id not in voters:
            raise ValueError("observers are not supported")
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.majority = len(self.voters) // 2 + 1
        self.log = log
        self.store = store
        self.config = config or RaftConfig()
        self._rng = random.Random(rng_seed)
        state = store.load()
        self.epoch = state.epoch
        self.voted_for = state.voted_for
        self.leader_id = NO_LEADER
        snapshot = log.latest_snapshot()
        self.high_watermark = snapshot.end_offset if snapshot is not None else 0  # a snapshot holds committed entries
        self._installed = snapshot  # for take_installed_snapshot
        self.role = Role.UNATTACHED
        self._deadline_ms = now_ms + self._randomized(self.config.fetch_timeout_ms)
        # leader state
        self._fetch_offsets: dict[int, int] = {}
        self._last_fetch_ms: dict[int, int] = {}
        self._begin_sent_ms = 0
        # candidate state
        self._votes: set[int] = set()
        # follower state
        self._fetch_sent_ms: int | None = None
        if state.leader_id == node_id:
            # We led this epoch before a restart: never lead it twice; hand over as a resigned leader.
            self.role = Role.RESIGNED
            self._deadline_ms = now_ms
        elif state.leader_id != NO_LEADER:
            self._become_follower(state.leader_id, now_ms)
        if self.voters == {node_id}:
            self._deadline_ms = now_ms  # the only voter: nobody to wait for

    # ---- public API -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def voter_offsets(self) -> dict[int, int]:
        """On the leader, each voter's log end as last acknowledged (its own: the flushed end); else empty."""
        if self.role is not Role.LEADER:
            return {}
        return {voter: self._fetch_offsets.get(voter, 0) for voter in self._others()} | {
            self.node_id: self.log.flushed_end_offset}

    def propose(self, data: object, now_ms: int) -> int | None:
        """Append `data` on the leader; returns its offset (committed once the high watermark passes it)."""
        if self.role is not Role.LEADER:
            return None
        offset = self.log.end_offset
        self.log.append([Entry(self.epoch, data)])
        return offset

    def snapshot(self, end_offset: int, state: object) -> Snapshot:
        """Save `state`, the state machine's state after every entry below `end_offset`, as the latest snapshot
        and drop the log prefix below it; returns it as saved. On any role. Raises ValueError unless
        latest snapshot's end offset (0 if none) < `end_offset` <= high watermark."""
        latest = self.log.latest_snapshot()
        if not (latest.end_offset if latest is not None else 0) < end_offset <= self.high_watermark:
            raise ValueError(f"node {self.node_id}: cannot snapshot at {end_offset}: the latest snapshot ends at "
                             f"{latest.end_offset if latest else 0}, the high watermark is {self.high_watermark}")
        self.log.save_snapshot(Snapshot(end_offset, self.log.epoch_at(end_offset - 1), state))
        self.log.truncate_prefix_to(end_offset)
        return self.log.latest_snapshot()

    def take_installed_snapshot(self) -> Snapshot | None:
        """The snapshot installed from the leader since the last call (or found in the log at construction),
        once; then None. The shell polls it after `handle` and, given one, resets its state machine to
        `state` with everything below `end_offset` applied."""
        installed, self._installed = self._installed, None
        return installed

    def resign(self, now_ms: int) -> list[Send]:
        if self.role is not Role.LEADER:
            return []
        return self._resign(now_ms)

    def tick(self, now_ms: int) -> list[Send]:
        out: list[Send] = []
        role = self.role
        if role is Role.LEADER:
            self.log.flush()  # batched fsync of proposals; only flushed records count towards commit
            self._advance_high_watermark()
            if now_ms - self._begin_sent_ms >= self.config.begin_retry_ms:
                self._begin_sent_ms = now_ms
                for voter in self._others():
                    if voter not in self._last_fetch_ms:
                        out.append(Send(voter, BeginQuorumEpoch(self.node_id, self.epoch)))
            if now_ms >= self._deadline_ms:
                heard = sum(1 for t in self._last_fetch_ms.values() if now_ms - t < self.config.fetch_timeout_ms)
                if heard + 1 < self.majority:
                    out += self._resign(now_ms)
                else:
                    self._deadline_ms = now_ms + self.config.fetch_timeout_ms
        elif role is Role.FOLLOWER:
            if now_ms >= self._deadline_ms:
                out += self._start_election(now_ms)
            elif self._fetch_sent_ms is None or now_ms - self._fetch_sent_ms >= self.config.fetch_interval_ms:
                out.append(self._fetch(now_ms))
        elif now_ms >= self._deadline_ms:  # unattached, candidate or resigned: (re)start an election
            out += self._start_election(now_ms)
        return out

    def handle(self, message: Message, now_ms: int) -> list[Send]:
        if message.epoch > self.epoch:
            leader = message.src if isinstance(message, BeginQuorumEpoch) else NO_LEADER
            if isinstance(message, FetchResponse | FetchSnapshotResponse | VoteResponse) \
                    and message.leader_id != NO_LEADER:
                leader = message.leader_id
            self._enter_epoch(message.epoch, leader, now_ms)
        match message:
            case VoteRequest():
                return self._on_vote_request(message, now_ms)
            case VoteResponse():
                return self._on_vote_response(message, now_ms)
            case BeginQuorumEpoch():
                if message.epoch == self.epoch and self.role is not Role.LEADER:
                    self._become_follower(message.src, now_ms)
                    return [self._fetch(now_ms)]
                return []
            case EndQuorumEpoch():
                return self._on_end_quorum_epoch(message, now_ms)
            case FetchRequest():
                return self._on_fetch_request(message, now_ms)
            case FetchResponse():
                return self._on_fetch_response(message, now_ms)
            case FetchSnapshotRequest():
                return self._on_fetch_snapshot_request(message, now_ms)
            case FetchSnapshotResponse():
                return self._on_fetch_snapshot_response(message, now_ms)
        raise TypeError(f"unknown message {message!r}")

    # ---- transitions --------------------------------------------------------------------------------

    def _others(self) -> list[int]:
        return sorted(self.voters - {self.node_id})

    def _randomized(self, base_ms: int) -> int:
        return base_ms + self._rng.randrange(self.config.election_backoff_max_ms + 1)

    def _persist(self) -> None:
        self.store.save(QuorumState(self.epoch, self.voted_for, self.leader_id))

    def _enter_epoch(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """A higher epoch was observed: forget the vote and any leadership of the old one."""
        self.epoch = epoch
        self.voted_for = NO_LEADER
        self.leader_id = NO_LEADER
        self.role = Role.UNATTACHED
        # Keep a running timer: a candidate with a stale log must not postpone, epoch after epoch, the
        # elections of the voters that reject it (the liveness problem pre-vote also addresses).
        self._deadline_ms = min(self._deadline_ms, now_ms + self._randomized(self.config.election_timeout_ms))
        if leader_id != NO_LEADER and leader_id != self.node_id:
            self._become_follower(leader_id, now_ms)
        else:
            self._persist()

    def _become_follower(self, leader_id: int, now_ms: int) -> None:
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self._fetch_sent_ms = None
        self._deadline_ms = now_ms + self.config.fetch_timeout_ms
        self._persist()

    def _start_election(self, now_ms: int) -> list[Send]:
        self.epoch += 1
        self.role = Role.CANDIDATE
        self.voted_for = self.node_id
        self.leader_id = NO_LEADER
        self._persist()
        self._votes = {self.node_id}
        self._deadline_ms = now_ms + self._randomized(self.config.election_timeout_ms)
        if len(self._votes) >= self.majority:
            return self._become_leader(now_ms)
        request = VoteRequest(self.node_id, self.epoch, self.log.last_epoch(), self.log.end_offset)
        return [Send(voter, request) for voter in self._others()]

    def _become_leader(self, now_ms: int) -> list[Send]:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self._persist()
        self._fetch_offsets = {}
        self._last_fetch_ms = {}
        self._deadline_ms = now_ms + self.config.fetch_timeout_ms
        self.log.append([Entry(self.epoch, None)])  # leader-change record: lets this epoch commit
        self.log.flush()
        self._begin_sent_ms = now_ms
        begin = BeginQuorumEpoch(self.node_id, self.epoch)
        return [Send(voter, begin) for voter in self._others()]

    def _resign(self, now_ms: int) -> list[Send]:
        """Step down in the current epoch; the most caught-up voters are asked to run first."""
        successors = tuple(sorted(self._others(), key=lambda v: (-self._fetch_offsets.get(v, 0), v)))
        self.role = Role.RESIGNED
        self._deadline_ms = now_ms + self._randomized(self.config.election_timeout_ms)
        end = EndQuorumEpoch(self.node_id, self.epoch, successors)
        return [Send(voter, end) for voter in successors]

    # ---- Vote -------------------------------------------------------------------------------------

    def _on_vote_request(self, request: VoteRequest, now_ms: int) -> list[Send]:
        granted = False
        if request.epoch == self.epoch and self.role is Role.UNATTACHED and self.leader_id == NO_LEADER:
            log_ok = (request.last_epoch, request.end_offset) >= (self.log.last_epoch(), self.log.end_offset)
            if log_ok and self.voted_for in (NO_LEADER, request.src):
                granted = True
                if self.voted_for != request.src:
                    self.voted_for = request.src
                    self._persist()
                self._deadline_ms = now_ms + self._randomized(self.config.election_timeout_ms)
        return [Send(request.src, VoteResponse(self.node_id, self.epoch, granted, self.leader_id))]

    def _on_vote_response(self, response: VoteResponse, now_ms: int) -> list[Send]:
        if response.epoch != self.epoch:
            return []
        if response.leader_id != NO_LEADER and self.role is not Role.LEADER and response.leader_id != self.node_id:
            self._become_follower(response.leader_id, now_ms)
            return [self._fetch(now_ms)]
        if self.role is Role.CANDIDATE and response.granted:
            self._votes.add(response.src)
            if len(self._votes) >= self.majority:
                return self._become_leader(now_ms)
        return []

    # ---- EndQuorumEpoch -------------------------------------------------------------------------------

    def _on_end_quorum_epoch(self, message: EndQuorumEpoch, now_ms: int) -> list[Send]:
        if message.epoch != self.epoch or self.leader_id != message.src or self.role is not Role.FOLLOWER:
            return []
        # Stay in the epoch without a leader; run soon, earlier the higher our rank among the successors.
        self.role = Role.UNATTACHED
        rank = message.preferred_successors.index(self.node_id) if self.node_id in message.preferred_successors else 0
        self._deadline_ms = now_ms + rank * self.config.election_timeout_ms // 2 + self._rng.randrange(20)
        return []

    # ---- Fetch (leader side) ----------------------------------------------------------------------

    def _on_fetch_request(self, request: FetchRequest, now_ms: int) -> list[Send]:
        def reply(**fields) -> list[Send]:
            leader = self.node_id if self.role is Role.LEADER else self.leader_id
            return [Send(request.src, FetchResponse(self.node_id, self.epoch, leader, request.fetch_offset,
                                                     request.last_fetched_epoch, **fields))]

        if request.epoch < self.epoch:
            return reply(error=FetchError.FENCED_LEADER_EPOCH)
        if self.role is not Role.LEADER or request.src not in self.voters:
            return reply(error=FetchError.NOT_LEADER)
        self._last_fetch_ms[request.src] = now_ms
        fetch_offset = request.fetch_offset
        if fetch_offset < self.log.start_offset:
            return self._snapshot_id_reply(reply)
        if fetch_offset > 0:
            epoch, end_offset = self.log.end_offset_for_epoch(request.last_fetched_epoch)
            if epoch < 0:  # the last fetched epoch ended inside the snapshotted prefix: cannot be validated
                return self._snapshot_id_reply(reply)
            if epoch != request.last_fetched_epoch or end_offset < fetch_offset:
                return reply(diverging_epoch=epoch, diverging_end_offset=end_offset,
                             high_watermark=self.high_watermark)
        if fetch_offset > self._fetch_offsets.get(request.src, 0):
            self._fetch_offsets[request.src] = fetch_offset
            self._advance_high_watermark()
        entries = self.log.read(fetch_offset, self.config.max_fetch_entries)
        return reply(entries=entries, high_watermark=self.high_watermark)

    def _snapshot_id_reply(self, reply) -> list[Send]:
        snapshot = self.log.latest_snapshot()  # the log start is above 0: a snapshot covers the prefix
        return reply(snapshot_end_offset=snapshot.end_offset, snapshot_epoch=snapshot.epoch,
                     high_watermark=self.high_watermark)

    def _on_fetch_snapshot_request(self, request: FetchSnapshotRequest, now_ms: int) -> list[Send]:
        def reply(**fields) -> list[Send]:
            leader = self.node_id if self.role is Role.LEADER else self.leader_id
            return [Send(request.src, FetchSnapshotResponse(self.node_id, self.epoch, leader, **fields))]

        if request.epoch < self.epoch:
            return reply(error=FetchError.FENCED_LEADER_EPOCH)
        if self.role is not Role.LEADER or request.src not in self.voters:
            return reply(error=FetchError.NOT_LEADER)
        self._last_fetch_ms[request.src] = now_ms
        snapshot = self.log.latest_snapshot()
        if snapshot is None:
            return reply(error=FetchError.SNAPSHOT_NOT_FOUND)
        # Always the latest, even if newer than the one asked for: the follower decides whether it needs it.
        return reply(snapshot_end_offset=snapshot.end_offset, snapshot_epoch=snapshot.epoch, state=snapshot.state)

    def _advance_high_watermark(self) -> None:
        offsets = sorted([self.log.flushed_end_offset, *self._fetch_offsets.values()], reverse=True)
        if len(offsets) < self.majority:
            return
        candidate = offsets[self.majority - 1]
        if candidate > self.high_watermark and self.log.epoch_at(candidate - 1) == self.epoch:
            self.high_watermark = candidate

    # ---- Fetch (follower side) ----------------------------------------------------------------------

    def _fetch(self, now_ms: int) -> Send:
        self._fetch_sent_ms = now_ms
        end = self.log.end_offset
        return Send(self.leader_id, FetchRequest(self.node_id, self.epoch, end, self.log.epoch_at(end - 1)))

    def _from_leader(self, response: FetchResponse | FetchSnapshotResponse, now_ms: int) -> bool:
        """Whether `response` is a successful answer from our leader in our epoch (following its sender if we
        know no leader in this epoch)."""
        if response.epoch != self.epoch:
            return False
        if response.error != FetchError.NONE:
            if response.leader_id not in (NO_LEADER, self.node_id) and self.leader_id == NO_LEADER \
                    and self.role is Role.UNATTACHED:
                self._become_follower(response.leader_id, now_ms)
            return False
        if self.role is Role.UNATTACHED and self.leader_id == NO_LEADER:
            self._become_follower(response.src, now_ms)
        return self.role is Role.FOLLOWER and response.src == self.leader_id

    def _on_fetch_response(self, response: FetchResponse, now_ms: int) -> list[Send]:
        if not self._from_leader(response, now_ms):
            return []
        end = self.log.end_offset
        if (response.fetch_offset, response.last_fetched_epoch) != (end, self.log.epoch_at(end - 1)):
            return []  # answer to an older request: our log has moved since (log matching: same
            # offset and epoch of the last record means the same prefix, so a match is safe to apply)
        self._deadline_ms = now_ms + self.config.fetch_timeout_ms
        if response.snapshot_end_offset >= 0:
            self._fetch_sent_ms = now_ms  # the fetch timer also retries a lost FetchSnapshot
            return [Send(self.leader_id, FetchSnapshotRequest(self.node_id, self.epoch, response.snapshot_end_offset,
                                                              response.snapshot_epoch))]
        if response.diverging_epoch >= 0:
            _, own_end = self.log.end_offset_for_epoch(response.diverging_epoch)
            truncate_to = min(response.diverging_end_offset, own_end)
            if truncate_to < self.high_watermark:
                raise AssertionError(f"node {self.node_id}: truncating below high watermark {self.high_watermark}")
            self.log.truncate_to(truncate_to)
            self.log.flush()
            return [self._fetch(now_ms)]
        if response.entries:
            self.log.append(response.entries)
            self.log.flush()  # fsync before the next Fetch acknowledges these records
        matched = self.log.end_offset  # the prefix up to here is now known to equal the leader's
        self.high_watermark = max(self.high_watermark, min(response.high_watermark, matched))
        return [self._fetch(now_ms)]

    def _on_fetch_snapshot_response(self, response: FetchSnapshotResponse, now_ms: int) -> list[Send]:
        if not self._from_leader(response, now_ms):
            return []
        self._deadline_ms = now_ms + self.config.fetch_timeout_ms
        snapshot = Snapshot(response.snapshot_end_offset, response.snapshot_epoch, response.state)
        log = self.log
        end = snapshot.end_offset
        # Install only what we lack (see the module docstring): never over entries we may have acknowledged.
        if end > self.high_watermark and (end > log.end_offset or log.epoch_at(end - 1) != snapshot.epoch):
            log.save_snapshot(snapshot)  # durable; empties the log, which then starts at `end`
            self.high_watermark = end
            self._installed = log.latest_snapshot()
        return [self._fetch(now_ms)]
