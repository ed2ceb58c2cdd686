"""A classic-protocol consumer group: its state machine, members, protocol selection and static members.

Pure data and bookkeeping, as in Kafka's ClassicGroup / ClassicGroupMember: no timers and no replies. The
coordinator (`group_coordinator.py`) drives it and turns what it decides into replies and log appends. A
request parked on a member (`awaiting_join` / `awaiting_sync`) is a `Parked(token, version)`.

States and the transitions Kafka allows (ClassicGroupState):

    Empty --join--> PreparingRebalance --all joined--> CompletingRebalance --leader sync--> Stable
      ^                  ^      |                            |                               |
      |                  |      +--no members left-----------|--> Empty                      |
      |                  +-----------------------------------+-------------------------------+ (join/leave/expiry)
    Dead is terminal (the group was unloaded or deleted).
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from enum import Enum

__all__ = ["ClassicGroup", "ClassicGroupMember", "GroupState", "Parked", "subscribed_topics"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass(frozen=True)
class Parked:
    """A JoinGroup or SyncGroup request waiting for the group: answered later with a Reply to `token`."""
    token: object
    version: int


class ClassicGroupMember:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "awaiting_join",
                 "awaiting_sync", "is_new")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]], assignment: bytes = b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols  # (name, metadata) in the member's preference order
        self.assignment = assignment
        self.awaiting_join: Parked | None = None
        self.awaiting_sync: Parked | None = None
        self.is_new = False

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.protocols

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry should spare this member (Kafka: awaiting a rebalance counts as alive)."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None

    def __repr__(self) -> str:
        return f"ClassicGroupMember({self.member_id!r}, instance={self.group_instance_id!r})"


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (any version: `topics` is always the first field)."""
    pos = 2  # int16 version
    (count,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    if count < 0 or count * 2 > len(metadata) - pos:
        raise ValueError("bad topic count")
    topics = []
    for _ in range(count):
        (size,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if size < 0 or pos + size > len(metadata):
            raise ValueError("bad topic name")
        topics.append(bytes(metadata[pos:pos + size]).decode())
        pos += size
    return topics


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int | None = None, state: GroupState = GroupState.EMPTY,
                 generation_id: int = 0, protocol_type: str | None = None, protocol_name: str | None = None,
                 leader_id: str | None = None, current_state_timestamp: int | None = None):
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.current_state_timestamp = current_state_timestamp if current_state_timestamp is not None else now_ms
        self.members: dict[str, ClassicGroupMember] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.supported_protocols: Counter[str] = Counter()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
                f"members={list(self.members)})")

    # -- state --------------------------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: invalid transition {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- members ------------------------------------------------------------------------------------

    def add(self, member: ClassicGroupMember, parked: Parked | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"static member {member.group_instance_id} is already in the group")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise AssertionError("the group and member protocol types differ")
        if not self.leader_id:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.protocols)
        member.awaiting_join = parked
        if parked is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        """Drop a member (or a pending member id); elect the next member as leader if it led."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.protocols)
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int, parked: Parked | None) -> None:
        """New protocols/timeouts and the parked JoinGroup (the caller answers any superseded one first)."""
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if parked is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif parked is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = parked

    def take_join(self, member: ClassicGroupMember) -> Parked | None:
        """Unpark the member's JoinGroup (to answer it)."""
        parked = member.awaiting_join
        if parked is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
        return parked

    @staticmethod
    def take_sync(member: ClassicGroupMember) -> Parked | None:
        parked = member.awaiting_sync
        member.awaiting_sync = None
        return parked

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> tuple[ClassicGroupMember, ClassicGroupMember]:
        """Give a static member a new member id; returns (old, new). The caller fences the old one's parked requests."""
        old = self.members.pop(old_member_id)
        new = ClassicGroupMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                                 old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                                 old.protocols, old.assignment)
        if old.awaiting_join is not None:
            self.num_awaiting_join -= 1  # the old member's JoinGroup is answered FENCED_INSTANCE_ID
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return old, new

    def add_pending_member(self, member_id: str) -> None:
        self.pending_join_members.add(member_id)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick a member that did; False if no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def validate_member(self, member_id: str, group_instance_id: str | None) -> str | None:
        """None if the member id (and instance id) is current, else the error name."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return "UNKNOWN_MEMBER_ID"
            if existing != member_id:
                return "FENCED_INSTANCE_ID"
        if member_id not in self.members:
            return "UNKNOWN_MEMBER_ID"
        return None

    # -- protocols ----------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if self.state == GroupState.EMPTY:
            return protocol_type != "" and bool(names)
        return (self.protocol_type is not None and self.protocol_type == protocol_type
                and any(self.supported_protocols[name] == len(self.members) for name in names))

    def select_protocol(self) -> str:
        """Kafka's vote: every member votes its preferred protocol among those all support; most votes wins."""
        candidates = {name for name, count in self.supported_protocols.items() if count == len(self.members)}
        votes: Counter[str] = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes.items(), key=lambda item: item[1])[0]

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        try:
            topics: set[str] = set()
            for member in self.members.values():
                topics.update(subscribed_topics(member.metadata(self.protocol_name)))
            return topics
        except (ValueError, struct.error, UnicodeDecodeError):
            return None  # not a parseable consumer subscription: treated as subscribed to everything

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_members(self) -> list[dict]:
        """The JoinGroup response member list given to the leader."""
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]
