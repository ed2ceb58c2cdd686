"""Sans-I/O Raft core for the KRaft metadata quorum: pull-based replication with leader epochs.

Protocol in brief (KIP-595):
- Every node is in one epoch. A voter that hears nothing from a leader within the fetch timeout runs
  for leader. With `RaftConfig.pre_vote` (KIP-996) it first becomes prospective and asks the other voters,
  in its current epoch and without changing it, whether they would vote for it. A voter grants a pre-vote,
  changing nothing, if the prospective's log (last epoch, end offset) is at least as up to date as its own
  and it has no live leader (it is not the leader, nor a follower that heard from its leader within the
  fetch timeout). Only with a majority of pre-votes does the node become a candidate: it bumps the epoch,
  votes for itself, persists that, and sends Vote. A voter grants at most one vote per epoch, only to a
  candidate whose log is at least as up to date as its own. So a voter that was partitioned away cannot
  bump the epoch and depose a healthy leader when it comes back; a prospective keeps fetching from the
  leader it knew and follows it again on its first answer. Elections that stall retry, pre-vote first,
  after a seeded random backoff. A voter whose leader resigned (it received EndQuorumEpoch, or it is that
  leader) skips the pre-vote: there is no leader left to disrupt. Without `pre_vote` (the default until
  the wire carries the flag, see RaftConfig) a voter becomes a candidate at once; it still answers
  pre-votes.
- The winner appends a leader-change record in its epoch and sends BeginQuorumEpoch (repeated until
  each voter has fetched). Followers pull: Fetch carries the fetch offset and the epoch of the last
  record before it. If that prefix does not match the leader's log, the leader answers with a
  diverging epoch and end offset and the follower truncates; otherwise it answers with records.
- The leader's high watermark is the largest offset that a majority of voters' fetch offsets (its
  own: the flushed end of its log) have reached, provided the record below it is of the leader's
  epoch. Followers adopt the leader's high watermark, capped by what they hold of the leader's log.
- A leader that has not heard from a majority within the check-quorum timeout, or is asked to
  `resign`, sends EndQuorumEpoch; its successors start their elections at once, in preference order.

Observers (KIP-595): a node constructed with a `node_id` outside `voters` follows the log and never takes part
in elections. It finds the leader by sending Fetch to the voters in turn (an answer from the leader, or a
NOT_LEADER answer naming it, ends the search), then fetches from it like a follower (divergence, snapshots,
the high watermark capped by what it holds of the leader's log), and searches again when the leader has not
answered within the fetch timeout. It answers every VoteRequest with a refusal and ignores EndQuorumEpoch.
The leader serves observers' Fetch and FetchSnapshot, but their offsets never count toward the high
watermark nor towards check-quorum.

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
Not implemented: voter set changes, snapshot chunking.
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
    UNATTACHED = "unattached"  # knows the epoch, no leader yet (may have voted); an observer looking for the leader
    FOLLOWER = "follower"  # a voter or an observer fetching from the leader
    PROSPECTIVE = "prospective"  # a voter running a pre-vote; still fetches from the leader it knew, if any
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
    # Run a pre-vote before each election. Every voter must get VoteRequest.pre_vote across: a peer that loses
    # the flag (Vote v0/v1 on the wire) takes the pre-vote for a vote in the current epoch, where it may already
    # have voted, and refuses it; if every live voter voted for the leader that died, no election ever starts.
    pre_vote: bool = False


class RaftCore:
    def __init__(self, node_id: int, voters: frozenset[int] | set[int], log: RaftLog, store: QuorumStateStore,
                 rng_seed: int, now_ms: int = 0, config: RaftConfig | None = None):
        if not voters:
            raise ValueError("a quorum needs at least one voter")
        self.node_id = node_id
        self.voters = frozenset(voters)
        self._observer = node_id not in self.voters
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
        self._fetch_offsets: dict[int, int] = {}  # voters only
        self._last_fetch_ms: dict[int, int] = {}  # voters only
        self._observer_offsets: dict[int, int] = {}
        self._fetch_times: dict[int, tuple[int, int]] = {}  # on the leader: (last fetch, last caught up) by node
        self._begin_sent_ms = 0
        # prospective and candidate state: the voters that granted the pre-vote, or the vote
        self._votes: set[int] = set()
        self._leader_gone = False  # this epoch's leader resigned: the next election skips the pre-vote
        # follower and observer state
        self._fetch_sent_ms: int | None = None
        self._voter_list = sorted(self.voters)
        self._next_voter = self._rng.randrange(len(self._voter_list)) if self._observer else 0  # leader search
        if state.leader_id == node_id and not self._observer:
            # We led this epoch before a restart: never lead it twice; hand over as a resigned leader.
            self.role = Role.RESIGNED
            self._deadline_ms = now_ms
        elif state.leader_id not in (NO_LEADER, node_id):
            self._become_follower(state.leader_id, now_ms)
        if self.voters == {node_id}:
            self._deadline_ms = now_ms  # the only voter: nobody to wait for

    # ---- public API -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_observer(self) -> bool:
        """Whether this node follows the log without being a voter (its id is not in `voters`)."""
        return self._observer

    def voter_offsets(self) -> dict[int, int]:
        """On the leader, each voter's log end as last acknowledged (its own: the flushed end); else empty."""
        if self.role is not Role.LEADER:
            return {}
        return {voter: self._fetch_offsets.get(voter, 0) for voter in self._others()} | {
            self.node_id: self.log.flushed_end_offset}

    def observer_offsets(self) -> dict[int, int]:
        """On the leader, the log end last acknowledged by each observer that fetched in this epoch; else empty."""
        if self.role is not Role.LEADER:
            return {}
        return dict(self._observer_offsets)

    def fetch_times(self, now_ms: int) -> dict[int, tuple[int, int]]:
        """On the leader, for each replica that fetched in this epoch (and the leader itself, now): when it
        last fetched, and when it last fetched from the log end (was caught up); else empty."""
        if self.role is not Role.LEADER:
            return {}
        return {**self._fetch_times, self.node_id: (now_ms, now_ms)}

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
        elif self._observer:
            if role is Role.FOLLOWER and now_ms >= self._deadline_ms:
                self.role, self.leader_id = Role.UNATTACHED, NO_LEADER  # the leader went quiet: search again
                self._fetch_sent_ms = None
            if self._fetch_sent_ms is None or now_ms - self._fetch_sent_ms >= self.config.fetch_interval_ms:
                out.append(self._fetch(now_ms) if self.role is Role.FOLLOWER else self._find_leader(now_ms))
        elif role is Role.FOLLOWER or (role is Role.PROSPECTIVE and self.leader_id != NO_LEADER):
            if now_ms >= self._deadline_ms:  # no answer from the leader: (again) ask whether we may run
                out += self._start_pre_vote(now_ms) if self.config.pre_vote else self._start_election(now_ms)
            elif self._fetch_sent_ms is None or now_ms - self._fetch_sent_ms >= self.config.fetch_interval_ms:
                out.append(self._fetch(now_ms))
        elif now_ms >= self._deadline_ms:  # unattached, prospective, candidate or resigned: (re)start an election
            if role is Role.RESIGNED or self._leader_gone or not self.config.pre_vote:
                out += self._start_election(now_ms)
            else:
                out += self._start_pre_vote(now_ms)
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

    def _live_leader(self, now_ms: int) -> int:
        """The leader this node vouches for: itself while leading, or the leader a follower heard from within the
        fetch timeout; else NO_LEADER (a prospective that still fetches from its old leader does not vouch)."""
        if self.role is Role.LEADER:
            return self.node_id
        if self.role is Role.FOLLOWER and now_ms < self._deadline_ms:
            return self.leader_id
        return NO_LEADER

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
        self._leader_gone = False
        # Keep a running timer: a candidate with a stale log must not postpone, epoch after epoch, the
        # elections of the voters that reject it. (Pre-vote keeps a stale log from winning the pre-vote, so
        # from bumping epochs at all, but epochs still arrive from candidates that did win one.)
        self._deadline_ms = min(self._deadline_ms, now_ms + self._randomized(self.config.election_timeout_ms))
        if leader_id != NO_LEADER and leader_id != self.node_id:
            self._become_follower(leader_id, now_ms)
        else:
            self._persist()

    def _become_follower(self, leader_id: int, now_ms: int) -> None:
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self._leader_gone = False
        self._fetch_sent_ms = None
        self._deadline_ms = now_ms + self.config.fetch_timeout_ms
        self._persist()

    def _start_pre_vote(self, now_ms: int) -> list[Send]:
        """Become prospective in the current epoch (keeping the leader we knew, to go on fetching from it) and
        ask the voters whether they would vote for us; nothing is persisted."""
        self.role = Role.PROSPECTIVE
        self._votes = {self.node_id}
        self._deadline_ms = now_ms + self._randomized(self.config.election_timeout_ms)
        if len(self._votes) >= self.majority:
            return self._start_election(now_ms)
        request = VoteRequest(self.node_id, self.epoch, self.log.last_epoch(), self.log.end_offset, pre_vote=True)
        return [Send(voter, request) for voter in self._others()]

    def _start_election(self, now_ms: int) -> list[Send]:
        self.epoch += 1
        self.role = Role.CANDIDATE
        self.voted_for = self.node_id
        self.leader_id = NO_LEADER
        self._leader_gone = False
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
        self._observer_offsets = {}
        self._fetch_times = {}
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
        if request.epoch == self.epoch and not self._observer and (request.last_epoch, request.end_offset) >= (
                self.log.last_epoch(), self.log.end_offset):
            if request.pre_vote:  # would we vote for it in the next epoch? Answer without changing anything
                granted = self._live_leader(now_ms) == NO_LEADER
            elif self.role in (Role.UNATTACHED, Role.PROSPECTIVE) and self.leader_id == NO_LEADER \
                    and self.voted_for in (NO_LEADER, request.src):
                granted = True
                if self.voted_for != request.src:
                    self.voted_for = request.src
                    self._persist()
                self.role = Role.UNATTACHED  # a prospective gives up its pre-vote for the candidate
                self._deadline_ms = now_ms + self._randomized(self.config.election_timeout_ms)
        return [Send(request.src, VoteResponse(self.node_id, self.epoch, granted, self._live_leader(now_ms)))]

    def _on_vote_response(self, response: VoteResponse, now_ms: int) -> list[Send]:
        if response.epoch != self.epoch:
            return []
        if response.leader_id not in (NO_LEADER, self.node_id) and self.leader_id == NO_LEADER:
            self._become_follower(response.leader_id, now_ms)
            return [self._fetch(now_ms)]
        # A prospective counts pre-votes, a candidate votes: each asks in its own epoch, so an answer in that
        # epoch is to it (a late vote granted to it as a candidate in this epoch, counted as a pre-vote, is
        # as good as one: that voter had no leader and found our log up to date).
        if response.granted and self.role in (Role.PROSPECTIVE, Role.CANDIDATE) and response.src in self.voters:
            self._votes.add(response.src)
            if len(self._votes) >= self.majority:
                return self._become_leader(now_ms) if self.role is Role.CANDIDATE else self._start_election(now_ms)
        return []

    # ---- EndQuorumEpoch -------------------------------------------------------------------------------

    def _on_end_quorum_epoch(self, message: EndQuorumEpoch, now_ms: int) -> list[Send]:
        if message.epoch != self.epoch or self.leader_id != message.src or self._observer \
                or self.role not in (Role.FOLLOWER, Role.PROSPECTIVE):
            return []
        # Stay in the epoch without a leader; run soon, earlier the higher our rank among the successors, and
        # without a pre-vote: the leader is gone.
        self.role = Role.UNATTACHED
        self._leader_gone = True
        rank = message.preferred_successors.index(self.node_id) if self.node_id in message.preferred_successors else 0
        self._deadline_ms = now_ms + rank * self.config.election_timeout_ms // 2 + self._rng.randrange(20)
        return []

    # ---- Fetch (leader side) ----------------------------------------------------------------------

    def _on_fetch_request(self, request: FetchRequest, now_ms: int) -> list[Send]:
        def reply(**fields) -> list[Send]:
            return [Send(request.src, FetchResponse(self.node_id, self.epoch, self._live_leader(now_ms),
                                                     request.fetch_offset, request.last_fetched_epoch, **fields))]

        if request.epoch < self.epoch:
            return reply(error=FetchError.FENCED_LEADER_EPOCH)
        if self.role is not Role.LEADER:
            return reply(error=FetchError.NOT_LEADER)  # names the leader if we know a live one: observers look
        voter = request.src in self.voters
        if voter:
            self._last_fetch_ms[request.src] = now_ms
        fetch_offset = request.fetch_offset
        caught_up_ms = now_ms if fetch_offset >= self.log.end_offset else self._fetch_times.get(request.src, (0, -1))[1]
        self._fetch_times[request.src] = (now_ms, caught_up_ms)
        if fetch_offset < self.log.start_offset:
            return self._snapshot_id_reply(reply)
        if fetch_offset > 0:
            epoch, end_offset = self.log.end_offset_for_epoch(request.last_fetched_epoch)
            if epoch < 0:  # the last fetched epoch ended inside the snapshotted prefix: cannot be validated
                return self._snapshot_id_reply(reply)
            if epoch != request.last_fetched_epoch or end_offset < fetch_offset:
                return reply(diverging_epoch=epoch, diverging_end_offset=end_offset,
                             high_watermark=self.high_watermark)
        if not voter:
            self._observer_offsets[request.src] = fetch_offset  # never counts toward the high watermark
        elif fetch_offset > self._fetch_offsets.get(request.src, 0):
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
            return [Send(request.src, FetchSnapshotResponse(self.node_id, self.epoch, self._live_leader(now_ms),
                                                             **fields))]

        if request.epoch < self.epoch:
            return reply(error=FetchError.FENCED_LEADER_EPOCH)
        if self.role is not Role.LEADER:
            return reply(error=FetchError.NOT_LEADER)
        if request.src in self.voters:
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

    def _fetch(self, now_ms: int, dst: int | None = None) -> Send:
        self._fetch_sent_ms = now_ms
        end = self.log.end_offset
        return Send(self.leader_id if dst is None else dst,
                    FetchRequest(self.node_id, self.epoch, end, self.log.epoch_at(end - 1)))

    def _find_leader(self, now_ms: int) -> Send:
        """An observer without a leader fetches from the voters in turn: the leader answers, the others name it."""
        self._next_voter = (self._next_voter + 1) % len(self._voter_list)
        return self._fetch(now_ms, self._voter_list[self._next_voter])

    def _from_leader(self, response: FetchResponse | FetchSnapshotResponse, now_ms: int) -> bool:
        """Whether `response` is a successful answer from our leader in our epoch (following its sender if we
        know no leader in this epoch, or following our leader again if we were running a pre-vote)."""
        if response.epoch != self.epoch:
            return False
        leaderless = self.leader_id == NO_LEADER and self.role in (Role.UNATTACHED, Role.PROSPECTIVE)
        if response.error != FetchError.NONE:
            if response.leader_id not in (NO_LEADER, self.node_id) and leaderless:
                self._become_follower(response.leader_id, now_ms)
            return False
        if leaderless or (self.role is Role.PROSPECTIVE and response.src == self.leader_id):
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
