"""Raft RPCs of the KRaft metadata quorum (KIP-595, KIP-630 snapshots, KIP-996 pre-vote), as immutable values.

Every message carries its sender (`src`) and the sender's leader epoch; the shell around the core
maps them onto the Kafka wire APIs Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot.
"""

from dataclasses import dataclass
from typing import Any

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class Entry:
    """One record in the replicated log; `data is None` marks the leader-change control record."""

    epoch: int
    data: Any = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state machine's `state` after applying every entry below `end_offset` (KIP-630's snapshot id is
    (end_offset, epoch)); `epoch` is the epoch of the entry at `end_offset - 1`. `state` is opaque to Raft and
    JSON-serialisable."""

    end_offset: int
    epoch: int
    state: Any = None


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate asks for a vote in `epoch`, its log ending at `end_offset` with a record of `last_epoch`.

    With `pre_vote` (KIP-996; Vote v2's PreVote on the wire) a prospective candidate asks, at its current `epoch`
    (Kafka's ReplicaEpoch) and without having changed it, whether it would get the vote if it ran in the next
    one; the receiver answers without voting (it adopts a higher epoch, as from any message). VoteResponse needs
    no echo of it: a node waits for answers of one kind at a time (pre-votes while prospective, votes while a
    candidate)."""

    src: int
    epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    epoch: int
    granted: bool
    leader_id: int = NO_LEADER


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    """The new leader announces itself; repeated until each voter has fetched in the epoch."""

    src: int
    epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """The leader resigns its epoch; `preferred_successors` go first in the next election."""

    src: int
    epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Pull replication: the follower asks from `fetch_offset`, whose previous record has `last_fetched_epoch`."""

    src: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int


class FetchError:
    NONE = "NONE"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"  # the fetcher's epoch is older than the receiver's
    NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"  # the receiver is not the leader of that epoch
    SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"  # FetchSnapshot to a leader that holds no snapshot


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Records from `fetch_offset`; or a diverging epoch telling the follower where to truncate; or, when the
    leader no longer holds the log at `fetch_offset` (it is only in a snapshot), the id of its latest snapshot
    (`snapshot_end_offset` >= 0) telling the follower to send FetchSnapshot."""

    src: int
    epoch: int
    leader_id: int
    fetch_offset: int  # echoes of the request, so the follower can drop answers to older requests
    last_fetched_epoch: int
    error: str = FetchError.NONE
    entries: tuple[Entry, ...] = ()
    high_watermark: int = 0
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """A follower asks the leader for the snapshot a FetchResponse named; `position` is always 0 (no chunking)."""

    src: int
    epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int
    position: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """The leader's latest snapshot, whole (it may be newer than the one requested), or an error."""

    src: int
    epoch: int
    leader_id: int
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1
    state: Any = None
    error: str = FetchError.NONE


Message = (VoteRequest | VoteResponse | BeginQuorumEpoch | EndQuorumEpoch | FetchRequest | FetchResponse
           | FetchSnapshotRequest | FetchSnapshotResponse)


@dataclass(frozen=True, slots=True)
class Send:
    """Output of the core: deliver `message` to node `dst` (best effort; the core retries by itself)."""

    dst: int
    message: Message
