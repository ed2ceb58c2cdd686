"""A deterministic, seeded simulator for the Raft core: lossy, reordering network, partitions, crashes, snapshots.

Everything random comes from one `random.Random(seed)`, so a seed replays exactly. Invariants are
checked after every step and raise `InvariantViolation` with the seed in the message.

Three seeds in four run with pre-vote (KIP-996), the others without. Besides random partitions, a seed may
cut off the leader alone now and then: with pre-vote, partitions that leave the leader in the majority elect
nobody, and the simulation must still exercise elections and the old leader's return. Besides the voters, a seed may draw one or two observers (nodes outside the voter set,
KIP-595): they crash, restart and get partitioned like the voters, never vote nor lead, and must end with the
voters' log.

Each node runs a state machine that simply lists the committed entries it applied, in order: it applies up
to its high watermark after every event, resets to an installed snapshot's state when the core hands one
over (`take_installed_snapshot`), and forgets everything on a crash. Nodes, leaders included, snapshot that
state at random committed offsets, so a follower that lags or comes back from a crash often finds the
leader's log start past its own end and has to fetch the snapshot. A snapshot's state is the list of entries
it covers, so the checker compares it with the committed entries directly.
"""

import heapq
import random
from dataclasses import dataclass, field

from odradek.raft.core import RaftConfig, RaftCore, Role
from odradek.raft.log import MemoryLog, QuorumStateStore
from odradek.raft.messages import NO_LEADER, Entry, FetchSnapshotResponse, Send, VoteRequest

STEP_MS = 10
LEADER = Role.LEADER


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimNode:
    node_id: int
    log: MemoryLog = field(default_factory=MemoryLog)
    store: QuorumStateStore = field(default_factory=QuorumStateStore)
    core: RaftCore | None = None
    incarnation: int = 0
    down_until_ms: int = 0
    last_high_watermark: int = 0
    leader_checked_epoch: int = -1
    applied: list[Entry] = field(default_factory=list)  # the state machine: committed entries, in order
    checked_snapshot_end: int = 0  # end offset of the latest snapshot checked against the committed entries
    observer: bool = False
    followed: tuple[int, int] = (0, NO_LEADER)  # (epoch, leader) an observer last followed


class Simulation:
    def __init__(self, seed: int, voters: int, observers: int | None = None):
        self.seed = seed
        self.rng = rng = random.Random(seed)
        # each seed draws its own weather, from calm to hostile
        drop, max_delay_ms = rng.choice((0.0, 0.02, 0.1, 0.25)), rng.choice((5, 20, 40, 100))
        crash_rate, partition_rate = rng.choice((0.0, 0.003, 0.01)), rng.choice((0.0, 0.01, 0.03))
        propose_rate = rng.choice((0.1, 0.3, 1.0))
        self.snapshot_rate = rng.choice((0.0, 0.01, 0.03, 0.1))  # per node and step
        self.isolate_rate = rng.choice((0.0, 0.003, 0.01))  # per step: cut the leader off from all others
        if observers is None:
            observers = rng.choice((0, 0, 0, 1, 2))
        pre_vote = rng.random() < 0.75  # the default is off until the wire carries it: both must hold
        self.voter_ids = frozenset(range(1, voters + 1))
        self.observer_ids = frozenset(range(voters + 1, voters + 1 + observers))
        self.config = RaftConfig(pre_vote=pre_vote)
        self.now_ms = 0
        self.drop, self.max_delay_ms = drop, max_delay_ms
        self.crash_rate, self.partition_rate, self.propose_rate = crash_rate, partition_rate, propose_rate
        self.nodes = {i: SimNode(i, observer=i in self.observer_ids)
                      for i in sorted(self.voter_ids | self.observer_ids)}
        for node in self.nodes.values():
            self._start(node)
        self.in_flight: list[tuple[int, int, int, object]] = []  # a heap of (deliver_at, seq, dst, message)
        self.seq = 0
        self.partition: dict[int, int] | None = None  # node -> side
        self.partition_until_ms = 0
        self.leaders_by_epoch: dict[int, int] = {}
        self.committed: list[Entry] = []
        self.commit_epochs: list[int] = []  # epoch of the leader that first committed each offset
        self.next_proposal = 0
        self.acknowledged: set[int] = set()
        self.pending: dict[int, tuple[int, int]] = {}  # proposal -> (offset, epoch) on its leader
        self.faults = True
        self.snapshots_taken = 0
        self.snapshots_installed = 0
        self.pre_votes_sent = self.votes_sent = 0
        self.observer_leader_changes = 0  # times an observer started following another (epoch, leader)

    # ---- plumbing -----------------------------------------------------------------------------------

    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.last_high_watermark = 0
        node.applied = []  # the state machine is volatile: rebuilt from the snapshot and the log
        node.core = RaftCore(node.node_id, self.voter_ids, node.log, node.store,
                             rng_seed=self.rng.randrange(2**32), now_ms=self.now_ms, config=self.config)
        self._apply(node)

    def alive(self, node: SimNode) -> bool:
        return node.core is not None

    def _send(self, src: int, outputs: list[Send]) -> None:
        for send in outputs:
            if self.faults and self.rng.random() < self.drop:
                continue
            message = send.message
            if type(message) is VoteRequest:
                if message.pre_vote:
                    self.pre_votes_sent += 1
                else:
                    self.votes_sent += 1
            delay = 1 + int(self.rng.random() * (self.max_delay_ms if self.faults else 5))  # 1..max, uniform
            self.seq += 1
            heapq.heappush(self.in_flight, (self.now_ms + delay, self.seq, send.dst, message))

    def fail(self, what: str) -> None:
        raise InvariantViolation(f"seed={self.seed} t={self.now_ms}ms: {what}")

    # ---- one step -----------------------------------------------------------------------------------

    def step(self) -> None:
        self.now_ms = now = self.now_ms + STEP_MS
        rng, nodes = self.rng, self.nodes
        if self.faults:
            self._faults()
        in_flight, partition = self.in_flight, self.partition
        while in_flight and in_flight[0][0] <= now:
            _, _, dst, message = heapq.heappop(in_flight)  # in (deliver_at, seq) order
            node = nodes[dst]
            if node.core is None or (partition is not None and partition[message.src] != partition[dst]):
                continue
            self._send(dst, node.core.handle(message, now))
            self._apply(node, installing=type(message) is FetchSnapshotResponse)
            self.check(node)
        for node in nodes.values():
            core = node.core
            if core is None:
                if now >= node.down_until_ms:
                    self._start(node)
                    self.check(node)
                continue
            if core.role is LEADER and self.faults and rng.random() < self.propose_rate:
                proposal = self.next_proposal
                self.next_proposal += 1
                offset = core.propose(proposal, now)
                self.pending[proposal] = (offset, core.epoch)
            self._send(node.node_id, core.tick(now))
            self._apply(node)
            if self.snapshot_rate and rng.random() < self.snapshot_rate:
                self._snapshot(node)
            self.check(node)

    def _apply(self, node: SimNode, installing: bool = False) -> None:
        """What the shell does after each event: reset to an installed snapshot, then apply up to the high watermark."""
        if len(node.applied) == node.core.high_watermark:
            return  # nothing new (installing a snapshot always raises the high watermark past what was applied)
        installed = node.core.take_installed_snapshot()
        if installed is not None:
            if installing:
                self.snapshots_installed += 1
            node.applied = list(installed.state)
        hw = node.core.high_watermark
        if len(node.applied) < hw:
            node.applied += node.log.read(len(node.applied), hw - len(node.applied))

    def _snapshot(self, node: SimNode) -> None:
        latest = node.log.latest_snapshot()
        start = latest.end_offset if latest is not None else 0
        if len(node.applied) > start:
            end = self.rng.randint(start + 1, len(node.applied))
            node.core.snapshot(end, tuple(node.applied[:end]))
            self.snapshots_taken += 1

    def _faults(self) -> None:
        rng = self.rng
        if self.partition is not None and self.now_ms >= self.partition_until_ms:
            self.partition = None
        if self.partition is None and rng.random() < self.partition_rate:
            self.partition = {i: rng.randrange(2) for i in self.nodes}
            self.partition_until_ms = self.now_ms + rng.randint(100, 1500)
        if self.partition is None and rng.random() < self.isolate_rate:
            # cut the leader off from everyone: the others elect another, and it must rejoin without disrupting it
            leaders = [node.node_id for node in self.nodes.values() if node.core is not None and node.core.is_leader]
            if leaders:
                self.partition = {i: int(i == leaders[0]) for i in self.nodes}
                self.partition_until_ms = self.now_ms + rng.randint(300, 1500)
        if rng.random() < self.crash_rate:
            node = self.nodes[rng.choice(sorted(self.nodes))]
            if self.alive(node):
                node.core = None
                node.log.crash()  # only the flushed prefix survives
                node.down_until_ms = self.now_ms + rng.randint(10, 800)

    # ---- invariants -----------------------------------------------------------------------------------

    def check(self, changed: SimNode | None = None) -> None:
        """Check the invariants on `changed`, the only node an event has changed since the last check (on
        every node if None), and on the records committed so far."""
        if changed is not None and changed.core is not None and changed.core.role is not LEADER \
                and not changed.observer and changed.core.high_watermark == changed.last_high_watermark:
            # the most frequent event by far: only the log end and the snapshot can have changed
            log, hw = changed.log, changed.last_high_watermark
            if hw > log.end_offset:
                self.fail(f"node {changed.node_id} high watermark {hw} beyond its log end {log.end_offset}")
            snapshot = log.latest_snapshot()
            if snapshot is None or snapshot.end_offset == changed.checked_snapshot_end:
                return
        committed_before = len(self.committed)
        for node in [changed] if changed is not None else self.nodes.values():
            core = node.core
            if core is None:
                continue
            log = node.log
            hw = core.high_watermark
            if hw > log.end_offset:
                self.fail(f"node {node.node_id} high watermark {hw} beyond its log end {log.end_offset}")
            if node.observer:
                if core.role not in (Role.UNATTACHED, Role.FOLLOWER) or node.store.state.voted_for != NO_LEADER:
                    self.fail(f"observer {node.node_id} is {core.role.value}, voted for {node.store.state.voted_for}")
                if core.role is Role.FOLLOWER and node.followed != (core.epoch, core.leader_id):
                    node.followed = (core.epoch, core.leader_id)
                    self.observer_leader_changes += 1
            snapshot = log.latest_snapshot()
            if hw == node.last_high_watermark and core.role is not LEADER and (
                    snapshot is None or snapshot.end_offset == node.checked_snapshot_end):
                continue  # the most frequent event by far: nothing else to check
            if hw < node.last_high_watermark:
                self.fail(f"node {node.node_id} high watermark went back {node.last_high_watermark} -> {hw}")
            if snapshot is not None and snapshot.end_offset != node.checked_snapshot_end:
                # a snapshot holds committed entries only, and exactly those
                if list(snapshot.state) != self.committed[:snapshot.end_offset] \
                        or snapshot.end_offset > len(self.committed):
                    self.fail(f"node {node.node_id} snapshot at {snapshot.end_offset} differs from the committed entries")
                if not log.start_offset <= snapshot.end_offset <= log.end_offset:
                    self.fail(f"node {node.node_id} log [{log.start_offset}, {log.end_offset}) and its snapshot at "
                              f"{snapshot.end_offset} leave a hole")
                node.checked_snapshot_end = snapshot.end_offset
            if core.role is LEADER:
                known = self.leaders_by_epoch.setdefault(core.epoch, node.node_id)
                if known != node.node_id:
                    self.fail(f"two leaders in epoch {core.epoch}: {known} and {node.node_id}")
                if hw > len(self.committed):
                    if len(self.committed) < log.start_offset:
                        self.fail(f"leader {node.node_id} dropped uncommitted entries below {log.start_offset}")
                    # commit counts voters only: an observer's copy does not make an entry survive elections
                    acknowledged = sorted(core.voter_offsets().values(), reverse=True)[core.majority - 1]
                    if hw > acknowledged:
                        self.fail(f"leader {node.node_id} committed up to {hw}, a majority of voters only {acknowledged}")
                    self.commit_epochs.extend([core.epoch] * (hw - len(self.committed)))
                    self.committed.extend(log.read(len(self.committed), hw - len(self.committed)))
            elif hw > len(self.committed):
                self.fail(f"node {node.node_id} high watermark {hw} beyond the committed prefix {len(self.committed)}")
            if hw > node.last_high_watermark:
                # entries below the log start were checked through the snapshot
                start = max(min(node.last_high_watermark, len(self.committed)), log.start_offset)
                if list(log.read(start, hw - start)) != self.committed[start:hw]:
                    self.fail(f"node {node.node_id} committed prefix [{start}, {hw}) differs from the quorum's")
                node.last_high_watermark = hw
            if len(node.applied) != hw:
                self.fail(f"node {node.node_id} applied {len(node.applied)} entries, high watermark {hw}")
            if core.role is LEADER and node.leader_checked_epoch != core.epoch:
                # leader completeness: a leader holds every record committed in an earlier epoch, in its log
                # or in its snapshot
                node.leader_checked_epoch = core.epoch
                history = self.history(node)
                for offset, commit_epoch in enumerate(self.commit_epochs):
                    if commit_epoch < core.epoch and (
                            offset >= len(history) or history[offset] != self.committed[offset]):
                        self.fail(f"leader {node.node_id} of epoch {core.epoch} lacks committed offset {offset}")
        if len(self.committed) == committed_before and changed is not None:
            return
        for proposal, (offset, epoch) in list(self.pending.items()):
            if offset < len(self.committed):
                del self.pending[proposal]
                if self.committed[offset] == Entry(epoch, proposal):
                    self.acknowledged.add(proposal)

    @staticmethod
    def history(node: SimNode) -> list[Entry]:
        """The node's whole log: what its snapshot covers below the log start, then the entries held."""
        log = node.log
        snapshot = log.latest_snapshot()
        prefix = list(snapshot.state[:log.start_offset]) if snapshot is not None else []
        return prefix + log.entries

    # ---- runs -----------------------------------------------------------------------------------------

    def run(self, steps: int, settle_steps: int = 200) -> None:
        for _ in range(steps):
            self.step()
        self.heal_and_converge(settle_steps)

    def heal_and_converge(self, settle_steps: int) -> None:
        self.faults = False
        self.partition = None
        for _ in range(settle_steps):
            self.step()
            leaders = [n for n in self.nodes.values() if n.core and n.core.is_leader]
            if len(leaders) == 1 and self._converged(leaders[0]):
                break
        else:
            self.fail("no convergence after healing: " + self.describe())
        final = leaders[0].applied
        for node in self.nodes.values():
            if self.history(node) != final:
                self.fail(f"node {node.node_id}: snapshot and log differ from the leader's applied entries")
        data = [e.data for e in final if e.data is not None]
        if len(data) != len(set(data)):
            self.fail("a proposal appears twice in the final log")
        missing = self.acknowledged - set(data)
        if missing:
            self.fail(f"acknowledged proposals lost: {sorted(missing)[:10]}")
        if final[:len(self.committed)] != self.committed:
            self.fail("final log does not extend the committed records")

    def _converged(self, leader: SimNode) -> bool:
        """Logs end alike, everything is committed, and every state machine applied the same entries."""
        log, core = leader.log, leader.core
        end = log.end_offset
        if core.high_watermark != end or log.last_epoch() != core.epoch:
            return False
        return all(n.core is not None and n.log.end_offset == end and n.log.last_epoch() == core.epoch
                   and n.core.high_watermark == end and n.applied == leader.applied for n in self.nodes.values())

    def describe(self) -> str:
        return "; ".join(
            f"{n.node_id}: {n.core.role.value if n.core else 'down'} epoch={n.core.epoch if n.core else '-'} "
            f"start={n.log.start_offset} end={n.log.end_offset} hw={n.core.high_watermark if n.core else '-'}"
            for n in self.nodes.values())
