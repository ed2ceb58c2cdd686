"""Focused behaviour of the Raft core: elections with pre-vote, divergence truncation, high watermark by majority,
snapshots, observers."""

from dataclasses import replace

import pytest

from odradek.raft.core import RaftConfig, RaftCore, Role
from odradek.raft.log import MemoryLog, QuorumState, QuorumStateStore
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
    Send,
    Snapshot,
    VoteRequest,
    VoteResponse,
)

VOTERS = frozenset({1, 2, 3})
CONFIG = RaftConfig(pre_vote=True)


def make(node_id: int, entries: list[Entry] = (), state: QuorumState | None = None, voters=VOTERS,
         config: RaftConfig = CONFIG) -> RaftCore:
    log = MemoryLog()
    log.append(list(entries))
    log.flush()
    store = QuorumStateStore()
    if state is not None:
        store.save(state)
    return RaftCore(node_id, voters, log, store, rng_seed=node_id, now_ms=0, config=config)


def deliver(nodes: dict[int, RaftCore], outputs: list[Send], now_ms: int) -> None:
    """Deliver messages and their answers; followers fetch forever, so stop after a few rounds."""
    queue = list(outputs)
    for _ in range(60):
        if not queue:
            break
        send = queue.pop(0)
        queue += nodes[send.dst].handle(send.message, now_ms)


def elect(nodes: dict[int, RaftCore], candidate: int, now_ms: int = 10_000) -> None:
    """`candidate` times out and runs: its pre-vote, then its election, and everything they lead to, delivered."""
    deliver(nodes, nodes[candidate].tick(now_ms), now_ms)


def run(nodes: dict[int, RaftCore], start_ms: int, end_ms: int, cut: frozenset[int] | set[int] = frozenset(),
        rewrite=None) -> list[Send]:
    """Tick every node each 10 ms; a message arrives at the next tick, unless its sender or receiver is `cut`
    off (`rewrite`, if given, may change it on the way). Returns what the cut-off nodes tried to send."""
    in_flight: list[tuple[int, Send]] = []  # (sender, send)
    tried: list[Send] = []
    for now in range(start_ms, end_ms, 10):
        arriving, in_flight = in_flight, []
        for _, send in arriving:
            message = rewrite(send.message) if rewrite else send.message
            in_flight += [(send.dst, reply) for reply in nodes[send.dst].handle(message, now)]
        for node in nodes.values():
            in_flight += [(node.node_id, send) for send in node.tick(now)]
        tried += [send for src, send in in_flight if src in cut]
        in_flight = [(src, send) for src, send in in_flight if src not in cut and send.dst not in cut]
    return tried


def leader_of(nodes: dict[int, RaftCore]) -> RaftCore:
    [leader] = [node for node in nodes.values() if node.is_leader]
    return leader


def test_voter_that_hears_no_leader_runs_a_pre_vote_then_an_election_and_wins_with_a_majority():
    nodes = {i: make(i) for i in VOTERS}
    assert nodes[1].tick(100) == []
    pre_votes = nodes[1].tick(CONFIG.fetch_timeout_ms + CONFIG.election_backoff_max_ms)
    assert nodes[1].role is Role.PROSPECTIVE and nodes[1].epoch == 0
    assert nodes[1].store.load() == QuorumState()  # a pre-vote persists nothing
    assert [(s.dst, s.message) for s in pre_votes] == [
        (2, VoteRequest(src=1, epoch=0, last_epoch=0, end_offset=0, pre_vote=True)),
        (3, VoteRequest(src=1, epoch=0, last_epoch=0, end_offset=0, pre_vote=True))]
    [granted] = nodes[2].handle(pre_votes[0].message, 1000)
    assert granted.message == VoteResponse(src=2, epoch=0, granted=True)
    assert nodes[2].epoch == 0 and nodes[2].store.load() == QuorumState()  # granting a pre-vote changes nothing
    outputs = nodes[1].handle(granted.message, 1000)  # 2 of 3 with its own: now the real election
    assert nodes[1].role is Role.CANDIDATE and nodes[1].epoch == 1
    assert nodes[1].store.load() == QuorumState(1, 1, NO_LEADER)  # vote for itself persisted first
    assert {s.dst for s in outputs} == {2, 3}
    assert all(s.message == VoteRequest(src=1, epoch=1, last_epoch=0, end_offset=0) for s in outputs)
    deliver(nodes, outputs, 1000)
    assert nodes[1].is_leader
    assert [n.role for n in (nodes[2], nodes[3])] == [Role.FOLLOWER, Role.FOLLOWER]
    assert nodes[2].store.load() == QuorumState(1, 1, 1)
    assert nodes[1].log.entries == [Entry(1, None)]  # the leader-change record
    assert nodes[2].log.entries == [Entry(1, None)]  # fetched after BeginQuorumEpoch


def test_one_vote_per_epoch():
    voter = make(3)
    first = voter.handle(VoteRequest(src=1, epoch=1, last_epoch=0, end_offset=0), 0)
    second = voter.handle(VoteRequest(src=2, epoch=1, last_epoch=0, end_offset=0), 0)
    assert first[0].message.granted and not second[0].message.granted
    assert voter.store.load().voted_for == 1


def test_vote_refused_to_a_candidate_with_a_less_up_to_date_log():
    voter = make(3, [Entry(1), Entry(2)], QuorumState(2))
    shorter = voter.handle(VoteRequest(src=1, epoch=3, last_epoch=2, end_offset=1), 0)
    older_epoch = voter.handle(VoteRequest(src=2, epoch=3, last_epoch=1, end_offset=5), 0)
    assert not shorter[0].message.granted and not older_epoch[0].message.granted
    assert voter.epoch == 3 and voter.store.load().voted_for == NO_LEADER


def test_stale_epoch_vote_is_refused_and_tells_the_current_epoch():
    voter = make(3, state=QuorumState(5, NO_LEADER, 2))
    [reply] = voter.handle(VoteRequest(src=1, epoch=4, last_epoch=0, end_offset=0), 0)
    assert reply.message == VoteResponse(src=3, epoch=5, granted=False, leader_id=2)


def test_leader_restarted_does_not_lead_its_old_epoch_again():
    node = make(1, [Entry(3)], QuorumState(3, 1, 1))
    assert node.role is Role.RESIGNED
    outputs = node.tick(1)  # no pre-vote: the leader of its epoch is gone, it was that leader
    assert node.role is Role.CANDIDATE and node.epoch == 4 and len(outputs) == 2
    assert not any(s.message.pre_vote for s in outputs)


def test_follower_truncates_its_diverging_suffix_and_then_catches_up():
    # Leader 1 (epoch 3) has epochs 1,1,3; follower 2 has 1,1,2,2 from a deposed epoch-2 leader.
    leader = make(1, [Entry(1, "a"), Entry(1, "b"), Entry(3, None)], QuorumState(3, 1, 1))
    leader.role = Role.LEADER  # as if just elected in epoch 3
    leader.leader_id = 1
    follower = make(2, [Entry(1, "a"), Entry(1, "b"), Entry(2, "x"), Entry(2, "y")], QuorumState(3, 1, 1))
    assert follower.role is Role.FOLLOWER
    [fetch] = follower.tick(0)
    assert fetch.message == FetchRequest(src=2, epoch=3, fetch_offset=4, last_fetched_epoch=2)
    [answer] = leader.handle(fetch.message, 0)
    assert (answer.message.diverging_epoch, answer.message.diverging_end_offset) == (1, 2)
    [refetch] = follower.handle(answer.message, 0)
    assert follower.log.entries == [Entry(1, "a"), Entry(1, "b")]
    assert refetch.message.fetch_offset == 2 and refetch.message.last_fetched_epoch == 1
    [records] = leader.handle(refetch.message, 0)
    follower.handle(records.message, 0)
    assert follower.log.entries == leader.log.entries


def test_follower_ignores_an_answer_to_an_older_fetch():
    follower = make(2, [Entry(1), Entry(1)], QuorumState(1, 1, 1))
    stale = FetchResponse(src=1, epoch=1, leader_id=1, fetch_offset=1, last_fetched_epoch=1,
                          entries=(Entry(1, "late"),), high_watermark=2)
    assert follower.handle(stale, 0) == []
    assert follower.log.end_offset == 2 and follower.high_watermark == 0


def test_high_watermark_advances_when_a_majority_has_fetched_and_only_in_the_leaders_epoch():
    voters = frozenset({1, 2, 3, 4, 5})
    nodes = {i: make(i, voters=voters) for i in voters}
    elect(nodes, 1)  # delivers everything: all followers fetched the leader-change record
    leader = nodes[1]
    assert leader.is_leader and leader.high_watermark == 1
    leader.propose("p", 10_001)
    leader.tick(10_001)  # flush: the leader's own copy counts
    assert leader.high_watermark == 1
    fetch = lambda i: FetchRequest(src=i, epoch=1, fetch_offset=2, last_fetched_epoch=1)  # noqa: E731
    leader.handle(fetch(2), 10_001)
    assert leader.high_watermark == 1  # 2 of 5
    [reply] = leader.handle(fetch(3), 10_001)
    assert leader.high_watermark == 2 and reply.message.high_watermark == 2  # 3 of 5

    # A record of an older epoch is not committed by counting replicas alone (Raft's commit rule).
    old = make(1, [Entry(1, "old")], QuorumState(1), voters=frozenset({1, 2, 3}))
    old.epoch, old.role, old.leader_id = 2, Role.LEADER, 1
    old.handle(FetchRequest(src=2, epoch=2, fetch_offset=1, last_fetched_epoch=1), 0)
    assert old.high_watermark == 0


def test_unflushed_records_on_the_leader_do_not_count():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1)
    leader = nodes[1]
    leader.propose("p", 10_001)
    leader.handle(FetchRequest(src=2, epoch=1, fetch_offset=2, last_fetched_epoch=1), 10_001)
    assert leader.high_watermark == 1  # follower 2 has it, the leader has not fsynced it yet
    leader.tick(10_001)
    assert leader.high_watermark == 2


def test_leader_without_a_quorum_resigns_and_followers_run_after_end_quorum_epoch():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1, now_ms=1_000)
    leader = nodes[1]
    outputs = leader.tick(1_000 + 2 * CONFIG.fetch_timeout_ms + 1)  # nobody fetched since
    assert leader.role is Role.RESIGNED
    ends = [s for s in outputs if isinstance(s.message, EndQuorumEpoch)]
    assert {s.dst for s in ends} == {2, 3}
    deliver(nodes, ends, 2_000)
    assert nodes[2].role is Role.UNATTACHED
    nodes[2].tick(2_000 + CONFIG.election_timeout_ms + 20)
    nodes[3].tick(2_000 + CONFIG.election_timeout_ms + 20)
    assert Role.CANDIDATE in (nodes[2].role, nodes[3].role)


def test_fetch_from_an_older_epoch_is_fenced():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1)
    [reply] = nodes[1].handle(FetchRequest(src=2, epoch=0, fetch_offset=0, last_fetched_epoch=0), 0)
    assert reply.message.error == FetchError.FENCED_LEADER_EPOCH and reply.message.leader_id == 1


@pytest.mark.parametrize("pre_vote_granted", [False, True])
def test_prospective_or_candidate_follows_the_leader_that_announces_the_same_epoch(pre_vote_granted):
    node = make(3)
    node.tick(10_000)
    if pre_vote_granted:
        node.handle(VoteResponse(src=1, epoch=0, granted=True), 10_000)
    assert node.role is (Role.CANDIDATE if pre_vote_granted else Role.PROSPECTIVE)
    [fetch] = node.handle(BeginQuorumEpoch(src=2, epoch=node.epoch), 10_000)
    assert node.role is Role.FOLLOWER and node.leader_id == 2 and fetch.dst == 2


# ---- pre-vote (KIP-996) ------------------------------------------------------------------------------


def test_pre_vote_is_refused_while_a_leader_is_live_and_changes_nothing():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1, now_ms=1_000)  # node 2 last heard from leader 1 at 1_000
    leader, follower = nodes[1], nodes[2]
    state = follower.store.load()
    pre_vote = VoteRequest(src=3, epoch=1, last_epoch=1, end_offset=9, pre_vote=True)  # even with a longer log
    [reply] = follower.handle(pre_vote, 1_000 + CONFIG.fetch_timeout_ms - 1)
    assert reply.message == VoteResponse(src=2, epoch=1, granted=False, leader_id=1)
    [reply] = leader.handle(pre_vote, 1_000 + CONFIG.fetch_timeout_ms - 1)
    assert reply.message == VoteResponse(src=1, epoch=1, granted=False, leader_id=1)
    assert (follower.role, follower.leader_id, follower.store.load()) == (Role.FOLLOWER, 1, state)
    assert leader.is_leader and leader.epoch == 1
    # Once the leader has been silent for the fetch timeout, the follower grants it, and still changes nothing.
    [reply] = follower.handle(pre_vote, 1_000 + CONFIG.fetch_timeout_ms)
    assert reply.message == VoteResponse(src=2, epoch=1, granted=True)
    assert (follower.role, follower.epoch, follower.store.load()) == (Role.FOLLOWER, 1, state)


def test_pre_vote_needs_an_up_to_date_log_and_a_higher_epoch_is_adopted_without_a_vote():
    voter = make(3, [Entry(1), Entry(2)], QuorumState(2))
    shorter = voter.handle(VoteRequest(src=1, epoch=2, last_epoch=2, end_offset=1, pre_vote=True), 0)
    older = voter.handle(VoteRequest(src=2, epoch=2, last_epoch=1, end_offset=5, pre_vote=True), 0)
    stale = voter.handle(VoteRequest(src=2, epoch=1, last_epoch=2, end_offset=5, pre_vote=True), 0)
    assert not any(reply.message.granted for reply in shorter + older + stale)
    assert stale[0].message.epoch == 2  # tells the prospective the current epoch
    # The prospective's epoch is its current one (Kafka's ReplicaEpoch): a higher one is adopted, nothing voted.
    [reply] = voter.handle(VoteRequest(src=1, epoch=4, last_epoch=2, end_offset=2, pre_vote=True), 0)
    assert reply.message == VoteResponse(src=3, epoch=4, granted=True)
    assert voter.store.load() == QuorumState(4, NO_LEADER, NO_LEADER)


def test_prospective_runs_the_election_only_after_a_majority_of_pre_votes():
    voters = frozenset({1, 2, 3, 4, 5})
    node = make(1, voters=voters)
    pre_votes = node.tick(10_000)
    assert len(pre_votes) == 4 and node.role is Role.PROSPECTIVE
    assert node.handle(VoteResponse(src=2, epoch=0, granted=True), 10_000) == []
    assert node.handle(VoteResponse(src=3, epoch=0, granted=False), 10_000) == []
    assert node.handle(VoteResponse(src=2, epoch=0, granted=True), 10_000) == []  # counted once
    assert node.role is Role.PROSPECTIVE and node.epoch == 0 and node.store.load() == QuorumState()
    votes = node.handle(VoteResponse(src=4, epoch=0, granted=True), 10_000)
    assert node.role is Role.CANDIDATE and node.epoch == 1 and node.store.load() == QuorumState(1, 1, NO_LEADER)
    assert len(votes) == 4 and not any(s.message.pre_vote for s in votes)
    # No majority before the backoff: the next attempt is a pre-vote again, in the same epoch.
    retry = node.tick(10_000 + CONFIG.election_timeout_ms + CONFIG.election_backoff_max_ms)
    assert node.role is Role.PROSPECTIVE and node.epoch == 1 and all(s.message.pre_vote for s in retry)


def test_follower_whose_leader_went_quiet_keeps_fetching_and_follows_it_again_when_it_answers():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1, now_ms=1_000)
    leader, follower = nodes[1], nodes[2]
    outputs = follower.tick(1_000 + CONFIG.fetch_timeout_ms)
    assert follower.role is Role.PROSPECTIVE and follower.leader_id == 1 and follower.epoch == 1
    assert {s.dst for s in outputs} == {1, 3} and all(s.message.pre_vote for s in outputs)
    [fetch] = follower.tick(1_000 + CONFIG.fetch_timeout_ms + CONFIG.fetch_interval_ms)
    assert fetch.dst == 1 and isinstance(fetch.message, FetchRequest)
    [answer] = leader.handle(fetch.message, 1_500)
    follower.handle(answer.message, 1_500)
    assert follower.role is Role.FOLLOWER and follower.leader_id == 1 and follower.epoch == 1
    # A late pre-vote grant changes nothing now.
    assert follower.handle(VoteResponse(src=3, epoch=1, granted=True), 1_500) == []
    assert follower.role is Role.FOLLOWER and follower.epoch == 1


def test_a_partitioned_voter_that_rejoins_changes_neither_the_leader_nor_the_epoch():
    nodes = {i: make(i) for i in VOTERS}
    run(nodes, 0, 2_000)
    leader = leader_of(nodes)
    epoch = leader.epoch
    lost = nodes[min(VOTERS - {leader.node_id})]
    tried = run(nodes, 2_000, 6_000, cut={lost.node_id})  # cut off for ten fetch timeouts
    votes = [s.message for s in tried if isinstance(s.message, VoteRequest)]
    assert len(votes) > 10 and all(vote.pre_vote and vote.epoch == epoch for vote in votes)
    assert lost.role is Role.PROSPECTIVE and lost.epoch == epoch and lost.store.load().epoch == epoch
    assert leader.is_leader and leader.epoch == epoch
    # Its pre-votes, delivered late, are refused although its log is as up to date as anyone's: there is a
    # live leader. They change nothing.
    assert (votes[-1].last_epoch, votes[-1].end_offset) == (leader.log.last_epoch(), leader.log.end_offset)
    for node in nodes.values():
        if node is not lost:
            [reply] = node.handle(votes[-1], 6_000)
            assert not reply.message.granted and reply.message.leader_id == leader.node_id
    run(nodes, 6_000, 7_000)  # healed
    assert leader_of(nodes) is leader and all(node.epoch == epoch for node in nodes.values())
    assert lost.role is Role.FOLLOWER and lost.leader_id == leader.node_id
    leader.propose("after", 7_000)
    run(nodes, 7_000, 7_200)
    assert lost.log.entries == leader.log.entries and lost.high_watermark == leader.high_watermark


def test_without_pre_vote_configured_a_voter_runs_at_once_and_still_answers_pre_votes():
    config = RaftConfig()
    assert not config.pre_vote  # until the wire carries the flag: see RaftConfig
    nodes = {i: make(i, config=config) for i in VOTERS}
    elect(nodes, 1, now_ms=1_000)
    follower = nodes[2]
    outputs = follower.tick(1_000 + CONFIG.fetch_timeout_ms)
    assert follower.role is Role.CANDIDATE and follower.epoch == 2 and follower.store.load() == QuorumState(2, 2)
    assert all(s.message == VoteRequest(src=2, epoch=2, last_epoch=1, end_offset=1) for s in outputs)
    [reply] = nodes[3].handle(VoteRequest(src=1, epoch=1, last_epoch=1, end_offset=1, pre_vote=True), 1_000)
    assert reply.message == VoteResponse(src=3, epoch=1, granted=False, leader_id=1)  # 3 still follows 1


def test_a_pre_vote_lost_on_the_wire_would_stall_elections():
    """Why pre-vote needs Vote v2 on the wire (the node sends it): a peer that drops the flag (Vote v0) takes a
    pre-vote for a vote in the current epoch; once every live voter has voted for the leader that died, none is
    ever granted."""
    def old_wire(message):
        return replace(message, pre_vote=False) if isinstance(message, VoteRequest) else message

    nodes = {i: make(i) for i in VOTERS}
    run(nodes, 0, 2_000, rewrite=old_wire)
    dead = leader_of(nodes)
    assert all(node.voted_for == dead.node_id for node in nodes.values())
    run(nodes, 2_000, 12_000, cut={dead.node_id}, rewrite=old_wire)
    assert not any(node.is_leader for node in nodes.values() if node is not dead)


# ---- snapshots (KIP-630) ----------------------------------------------------------------------------


def leader_of_epoch(epoch: int, entries: list[Entry]) -> RaftCore:
    """Node 1 as the leader of `epoch` with `entries` (ending with its leader-change record), all committed."""
    leader = make(1, entries, QuorumState(epoch, 1, 1))
    leader.role, leader.leader_id, leader.high_watermark = Role.LEADER, 1, len(entries)
    return leader


def fetch_snapshot_round(leader: RaftCore, follower: RaftCore, fetch: FetchRequest, now_ms: int = 0) -> Send:
    """Fetch -> snapshot id -> FetchSnapshot -> snapshot; returns the follower's next Fetch."""
    [pointer] = leader.handle(fetch, now_ms)
    snapshot = leader.log.latest_snapshot()
    assert (pointer.message.snapshot_end_offset, pointer.message.snapshot_epoch) == (snapshot.end_offset, snapshot.epoch)
    assert pointer.message.entries == () and pointer.message.diverging_epoch == -1
    [ask] = follower.handle(pointer.message, now_ms)
    assert ask.dst == leader.node_id
    assert ask.message == FetchSnapshotRequest(follower.node_id, leader.epoch, snapshot.end_offset, snapshot.epoch)
    [answer] = leader.handle(ask.message, now_ms)
    assert answer.message == FetchSnapshotResponse(leader.node_id, leader.epoch, leader.node_id, snapshot.end_offset,
                                                   snapshot.epoch, snapshot.state)
    [refetch] = follower.handle(answer.message, now_ms)
    return refetch


def test_follower_far_behind_installs_the_leaders_snapshot_then_fetches_the_rest():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1)  # everyone holds the leader-change record
    leader, lagging = nodes[1], nodes[3]
    for n in range(5):
        leader.propose(f"p{n}", 10_001)
    leader.tick(10_001)  # flush
    deliver({1: leader, 2: nodes[2]}, [Send(1, FetchRequest(src=2, epoch=1, fetch_offset=1, last_fetched_epoch=1))],
            10_001)
    assert leader.high_watermark == 6  # node 3 heard nothing of it
    snapshot = leader.snapshot(4, ["p0", "p1", "p2"])
    assert snapshot == Snapshot(4, 1, ["p0", "p1", "p2"])
    assert leader.log.start_offset == 4 and leader.log.latest_snapshot() == snapshot
    assert leader.log.read(4, 10) == (Entry(1, "p3"), Entry(1, "p4"))

    [fetch] = lagging.tick(10_100)
    assert fetch.message == FetchRequest(src=3, epoch=1, fetch_offset=1, last_fetched_epoch=1)  # below the log start
    refetch = fetch_snapshot_round(leader, lagging, fetch.message, 10_100)
    assert lagging.log.start_offset == lagging.log.end_offset == 4 and lagging.log.latest_snapshot() == snapshot
    assert lagging.high_watermark == 4
    assert lagging.take_installed_snapshot() == snapshot and lagging.take_installed_snapshot() is None
    assert refetch.message == FetchRequest(src=3, epoch=1, fetch_offset=4, last_fetched_epoch=1)
    [records] = leader.handle(refetch.message, 10_100)
    lagging.handle(records.message, 10_100)
    assert lagging.log.read(4, 10) == leader.log.read(4, 10) and lagging.high_watermark == 6


@pytest.mark.parametrize("suffix", [
    [Entry(2, "x"), Entry(2, "y"), Entry(2, "z")],  # fetch offset past the log start, epoch 2 not in the log
    [Entry(2, "x")],  # fetch offset below the log start
])
def test_follower_with_a_divergent_suffix_behind_a_snapshot_installs_it_and_drops_the_suffix(suffix):
    # Leader 1 of epoch 3 snapshotted up to its own leader-change record and more; follower 2 holds records of
    # a deposed epoch-2 leader where the snapshot has epoch 3.
    leader = leader_of_epoch(3, [Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c"), Entry(3, "d")])
    leader.snapshot(4, "state at 4")
    follower = make(2, [Entry(1, "a"), Entry(1, "b"), *suffix], QuorumState(3, 1, 1))
    [fetch] = follower.tick(0)
    refetch = fetch_snapshot_round(leader, follower, fetch.message)
    assert follower.log.start_offset == follower.log.end_offset == 4 and follower.high_watermark == 4
    assert follower.log.latest_snapshot() == Snapshot(4, 3, "state at 4")
    assert refetch.message == FetchRequest(src=2, epoch=3, fetch_offset=4, last_fetched_epoch=3)
    [records] = leader.handle(refetch.message, 0)
    follower.handle(records.message, 0)
    assert follower.log.read(4, 10) == (Entry(3, "d"),) and follower.high_watermark == 5


def test_a_divergence_past_the_snapshot_is_truncated_not_answered_with_the_snapshot():
    # The snapshot ends at 4 (epoch 3); the follower's epoch-3 suffix from offset 4 on was never committed.
    leader = leader_of_epoch(4, [Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c"), Entry(4, None)])
    leader.snapshot(4, "state at 4")
    follower = make(2, [Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c"), Entry(3, "old")],
                    QuorumState(4, 1, 1))
    [fetch] = follower.tick(0)
    [answer] = leader.handle(fetch.message, 0)
    assert (answer.message.diverging_epoch, answer.message.diverging_end_offset) == (3, 4)  # from the snapshot's id
    assert answer.message.snapshot_end_offset == -1
    [refetch] = follower.handle(answer.message, 0)
    assert follower.log.end_offset == 4 and refetch.message.fetch_offset == 4
    [records] = leader.handle(refetch.message, 0)
    follower.handle(records.message, 0)
    assert follower.log.read(0, 10) == (Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c"), Entry(4, None))
    assert follower.log.latest_snapshot() is None and follower.take_installed_snapshot() is None


def test_a_snapshot_the_follower_does_not_need_is_not_installed():
    leader = leader_of_epoch(3, [Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c"), Entry(3, "d")])
    leader.snapshot(4, "state at 4")
    answer = FetchSnapshotResponse(1, 3, 1, 4, 3, "state at 4")
    # The follower already holds the snapshot's last entry (it may have acknowledged entries past it): a late
    # answer to an older FetchSnapshot must not empty its log.
    caught_up = make(2, [Entry(1, "a"), Entry(1, "b"), Entry(3, None), Entry(3, "c"), Entry(3, "d")],
                     QuorumState(3, 1, 1))
    [refetch] = caught_up.handle(answer, 0)
    assert caught_up.log.end_offset == 5 and caught_up.log.latest_snapshot() is None
    assert caught_up.take_installed_snapshot() is None and refetch.message.fetch_offset == 5
    # Nor a snapshot at or below the high watermark.
    installed = make(3, [], QuorumState(3, 1, 1))
    installed.handle(FetchSnapshotResponse(1, 3, 1, 5, 3, "state at 5"), 0)
    assert installed.take_installed_snapshot() == Snapshot(5, 3, "state at 5")
    installed.handle(answer, 0)
    assert installed.log.latest_snapshot() == Snapshot(5, 3, "state at 5") and installed.high_watermark == 5
    assert installed.take_installed_snapshot() is None


def test_snapshots_are_of_committed_offsets_only_and_move_forward():
    leader = leader_of_epoch(1, [Entry(1, None), Entry(1, "a"), Entry(1, "b")])
    leader.high_watermark = 2
    for bad in (0, 3):
        with pytest.raises(ValueError):
            leader.snapshot(bad, "state")
    leader.snapshot(2, "state at 2")
    for bad in (1, 2):
        with pytest.raises(ValueError):
            leader.snapshot(bad, "state")
    assert leader.log.latest_snapshot() == Snapshot(2, 1, "state at 2") and leader.log.start_offset == 2


def test_a_restarted_node_starts_from_its_snapshot():
    log = MemoryLog()
    log.append([Entry(1, None), Entry(2, None), Entry(2, "a")])
    log.save_snapshot(Snapshot(3, 2, "state at 3"))
    log.truncate_prefix_to(3)
    node = RaftCore(2, VOTERS, log, QuorumStateStore(), rng_seed=2, now_ms=0, config=CONFIG)
    assert node.high_watermark == 3 and node.take_installed_snapshot() == Snapshot(3, 2, "state at 3")
    outputs = node.tick(10_000)
    assert {s.message for s in outputs} == {VoteRequest(src=2, epoch=0, last_epoch=2, end_offset=3, pre_vote=True)}


def test_fetch_snapshot_errors_and_retry_after_a_lost_answer():
    leader = leader_of_epoch(2, [Entry(1, "a"), Entry(2, None)])
    [reply] = leader.handle(FetchSnapshotRequest(src=2, epoch=2, snapshot_end_offset=1, snapshot_epoch=1), 0)
    assert reply.message.error == FetchError.SNAPSHOT_NOT_FOUND
    [reply] = leader.handle(FetchSnapshotRequest(src=2, epoch=1, snapshot_end_offset=1, snapshot_epoch=1), 0)
    assert reply.message.error == FetchError.FENCED_LEADER_EPOCH and reply.message.leader_id == 1
    follower = make(3, [Entry(1, "a")], QuorumState(2, 1, 1))
    [reply] = follower.handle(FetchSnapshotRequest(src=2, epoch=2, snapshot_end_offset=1, snapshot_epoch=1), 0)
    assert reply.message.error == FetchError.NOT_LEADER and reply.message.leader_id == 1
    assert follower.handle(reply.message, 0) == []  # an error installs nothing
    assert follower.log.latest_snapshot() is None
    # The FetchSnapshot (or its answer) is lost: the fetch timer asks again.
    [pointer] = leader_with_snapshot().handle(FetchRequest(src=3, epoch=2, fetch_offset=1, last_fetched_epoch=1), 0)
    [ask] = follower.handle(pointer.message, 100)
    assert isinstance(ask.message, FetchSnapshotRequest)
    assert follower.tick(100 + CONFIG.fetch_interval_ms - 1) == []
    [retry] = follower.tick(100 + CONFIG.fetch_interval_ms)
    assert isinstance(retry.message, FetchRequest)


def leader_with_snapshot() -> RaftCore:
    leader = leader_of_epoch(2, [Entry(1, "a"), Entry(2, None), Entry(2, "b")])
    leader.snapshot(2, "state at 2")
    return leader


# ---- observers (KIP-595) -----------------------------------------------------------------------------------


def test_a_node_outside_the_voters_is_an_observer_that_never_votes_nor_runs():
    observer = make(4)
    assert observer.is_observer and not make(1).is_observer and observer.role is Role.UNATTACHED
    sent = [send for now in range(0, 5_000, 10) for send in observer.tick(now)]
    assert sent and all(isinstance(s.message, FetchRequest) for s in sent)  # looking for the leader, only
    assert {s.dst for s in sent} == VOTERS and observer.epoch == 0
    for request in (VoteRequest(src=1, epoch=0, last_epoch=0, end_offset=0),
                    VoteRequest(src=1, epoch=0, last_epoch=0, end_offset=0, pre_vote=True),
                    VoteRequest(src=2, epoch=3, last_epoch=0, end_offset=0)):
        [reply] = observer.handle(request, 5_000)
        assert not reply.message.granted
    assert observer.store.load().voted_for == NO_LEADER and observer.role is Role.UNATTACHED


def test_observer_finds_the_leader_through_any_voter_and_follows_the_log():
    nodes = {i: make(i) for i in [*VOTERS, 4, 5]}
    run(nodes, 0, 2_000)
    leader = leader_of(nodes)
    for n in range(20):
        leader.propose(f"p{n}", 2_000)
    run(nodes, 2_000, 2_500)
    for observer in (nodes[4], nodes[5]):
        assert observer.role is Role.FOLLOWER and observer.leader_id == leader.node_id
        assert observer.epoch == leader.epoch and observer.log.entries == leader.log.entries
        assert observer.high_watermark == leader.high_watermark == leader.log.end_offset
    assert leader.observer_offsets() == {4: leader.log.end_offset, 5: leader.log.end_offset}
    assert set(leader.voter_offsets()) == VOTERS
    assert nodes[4].observer_offsets() == {} and nodes[4].voter_offsets() == {}
    # A voter that is not the leader names it; the leader answers with records.
    follower = next(node for node in nodes.values() if not node.is_leader and not node.is_observer)
    fetch = FetchRequest(src=6, epoch=0, fetch_offset=0, last_fetched_epoch=0)
    [named] = follower.handle(fetch, 2_500)
    assert named.message.error == FetchError.FENCED_LEADER_EPOCH and named.message.leader_id == leader.node_id
    [named] = follower.handle(replace(fetch, epoch=leader.epoch), 2_500)
    assert named.message.error == FetchError.NOT_LEADER and named.message.leader_id == leader.node_id
    [answer] = leader.handle(replace(fetch, epoch=leader.epoch), 2_500)
    assert answer.message.error == FetchError.NONE and answer.message.entries


def test_observer_fetches_count_neither_toward_the_high_watermark_nor_toward_check_quorum():
    nodes = {i: make(i) for i in VOTERS}
    elect(nodes, 1, now_ms=1_000)
    leader = nodes[1]
    leader.propose("p", 1_000)
    leader.tick(1_000)  # flushed: one voter of three has it
    now = 1_000
    while leader.is_leader:
        for observer in (4, 5):
            [reply] = leader.handle(FetchRequest(src=observer, epoch=1, fetch_offset=2, last_fetched_epoch=1), now)
            assert reply.message.error == FetchError.NONE and reply.message.high_watermark == 1
        assert leader.high_watermark == 1 and leader.observer_offsets() == {4: 2, 5: 2}
        leader.tick(now)
        now += 10
    # No voter fetched: observers do not keep a leader in office.
    assert leader.role is Role.RESIGNED and now <= 1_000 + 2 * CONFIG.fetch_timeout_ms + 10


def test_observer_searches_again_when_its_leader_goes_quiet_and_never_starts_an_election():
    nodes = {i: make(i) for i in [*VOTERS, 4]}
    run(nodes, 0, 2_000)
    old = leader_of(nodes)
    epoch, observer = old.epoch, nodes[4]
    assert observer.leader_id == old.node_id
    run(nodes, 2_000, 2_000 + CONFIG.fetch_timeout_ms + 10, cut={old.node_id})
    assert observer.role is Role.UNATTACHED and observer.leader_id == NO_LEADER  # searching
    run(nodes, 2_500, 5_000, cut={old.node_id})
    new = leader_of({i: node for i, node in nodes.items() if i != old.node_id})
    assert new.epoch > epoch and observer.leader_id == new.node_id and observer.epoch == new.epoch
    assert observer.log.entries == new.log.entries and observer.high_watermark == new.high_watermark
    assert observer.store.load().voted_for == NO_LEADER


def test_observer_ignores_end_quorum_epoch():
    observer = make(4, state=QuorumState(2, NO_LEADER, 1))
    assert observer.role is Role.FOLLOWER
    assert observer.handle(EndQuorumEpoch(src=1, epoch=2, preferred_successors=(2, 3, 4)), 100) == []
    assert observer.role is Role.FOLLOWER and observer.leader_id == 1
    outputs = observer.tick(100)
    assert [(s.dst, type(s.message)) for s in outputs] == [(1, FetchRequest)]


def test_observer_truncates_a_divergent_suffix_like_a_follower():
    leader = leader_of_epoch(3, [Entry(1, "a"), Entry(1, "b"), Entry(3, None)])
    observer = make(4, [Entry(1, "a"), Entry(1, "b"), Entry(2, "x"), Entry(2, "y")], QuorumState(3, NO_LEADER, 1))
    [fetch] = observer.tick(0)
    [answer] = leader.handle(fetch.message, 0)
    assert (answer.message.diverging_epoch, answer.message.diverging_end_offset) == (1, 2)
    [refetch] = observer.handle(answer.message, 0)
    [records] = leader.handle(refetch.message, 0)
    observer.handle(records.message, 0)
    assert observer.log.entries == leader.log.entries and observer.high_watermark == 3
    assert leader.observer_offsets() == {4: 2} and leader.high_watermark == 3


def test_observer_far_behind_installs_the_leaders_snapshot():
    leader = leader_with_snapshot()
    observer = make(4, [Entry(1, "a")], QuorumState(2, NO_LEADER, 1))
    [fetch] = observer.tick(0)
    refetch = fetch_snapshot_round(leader, observer, fetch.message)
    assert observer.take_installed_snapshot() == leader.log.latest_snapshot() and observer.high_watermark == 2
    [records] = leader.handle(refetch.message, 0)
    observer.handle(records.message, 0)
    assert observer.log.read(2, 10) == (Entry(2, "b"),) and observer.high_watermark == 3
