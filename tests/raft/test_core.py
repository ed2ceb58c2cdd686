"""Focused behaviour of the Raft core: elections, divergence truncation, high watermark by majority, snapshots."""

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
CONFIG = RaftConfig()


def make(node_id: int, entries: list[Entry] = (), state: QuorumState | None = None, voters=VOTERS) -> RaftCore:
    log = MemoryLog()
    log.append(list(entries))
    log.flush()
    store = QuorumStateStore()
    if state is not None:
        store.save(state)
    return RaftCore(node_id, voters, log, store, rng_seed=node_id, now_ms=0, config=CONFIG)


def deliver(nodes: dict[int, RaftCore], outputs: list[Send], now_ms: int) -> None:
    """Deliver messages and their answers; followers fetch forever, so stop after a few rounds."""
    queue = list(outputs)
    for _ in range(60):
        if not queue:
            break
        send = queue.pop(0)
        queue += nodes[send.dst].handle(send.message, now_ms)


def elect(nodes: dict[int, RaftCore], candidate: int, now_ms: int = 10_000) -> None:
    deliver(nodes, nodes[candidate].tick(now_ms), now_ms)


def test_voter_that_hears_no_leader_becomes_candidate_and_wins_with_a_majority():
    nodes = {i: make(i) for i in VOTERS}
    assert nodes[1].tick(100) == []
    outputs = nodes[1].tick(CONFIG.fetch_timeout_ms + CONFIG.election_backoff_max_ms)
    assert nodes[1].role is Role.CANDIDATE and nodes[1].epoch == 1
    assert nodes[1].store.load() == QuorumState(1, 1, NO_LEADER)  # vote for itself persisted first
    assert {s.dst for s in outputs} == {2, 3} and all(isinstance(s.message, VoteRequest) for s in outputs)
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
    outputs = node.tick(1)
    assert node.role is Role.CANDIDATE and node.epoch == 4 and len(outputs) == 2


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


def test_candidate_follows_the_leader_that_announces_the_same_epoch():
    node = make(3)
    node.tick(10_000)
    assert node.role is Role.CANDIDATE
    [fetch] = node.handle(BeginQuorumEpoch(src=2, epoch=node.epoch), 10_000)
    assert node.role is Role.FOLLOWER and node.leader_id == 2 and fetch.dst == 2


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
    assert {s.message for s in outputs} == {VoteRequest(src=2, epoch=1, last_epoch=2, end_offset=3)}


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
