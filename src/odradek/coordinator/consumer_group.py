"""A KIP-848 consumer group: the sans-I/O state machine behind ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

One `ConsumerGroup` per group id. It takes requests and the current time and returns responses and the records
to append to `__consumer_offsets`; it never reads a clock, sleeps or does I/O. Every state change is made by
applying one of the records it emits (`replay`), so replaying the emitted records into a fresh group rebuilds
the same members, epochs and assignments (timers excepted: call `on_loaded(now_ms)` after replaying).

    group = ConsumerGroup("g", session_timeout_ms=45000, heartbeat_interval_ms=5000, default_assignor="uniform")
    response, records = group.heartbeat(now_ms, request, topics, api_version=1, client_id="c", client_host="/1.2.3.4")
    records += group.tick(now_ms)            # session and rebalance timeouts; call at group.next_deadline()
    described = group.describe(now_ms, include_authorized_operations, topic_names)
    group.replay(key, value)                 # loading __consumer_offsets at start

Semantics follow Kafka 4.0's group coordinator (GroupMetadataManager.consumerGroupHeartbeat, ConsumerGroup,
ConsumerGroupMember, CurrentAssignmentBuilder, TargetAssignmentBuilder):

- Epochs. The group epoch is bumped (ConsumerGroupMetadata record) when the group is new, when a member joins,
  leaves, is fenced or changes its subscribed names or regex, and when the subscribed topics' metadata changes
  (a topic created, deleted or given more partitions: ConsumerGroupPartitionMetadata record). When the group
  epoch is ahead of the assignment epoch, a heartbeat computes a new target assignment with the group's
  assignor (the server_assignor most members ask for, else the default), writing a
  ConsumerGroupTargetAssignmentMember record for each member whose target changed and then the
  ConsumerGroupTargetAssignmentMetadata record. The assignor gets the previous target as its sticky input.
- Reconciliation (CurrentAssignmentBuilder). A member moves towards its target: partitions it must give up go
  to `partitions_pending_revocation` and it stays at its epoch (UNREVOKED_PARTITIONS) until a heartbeat reports
  (`topic_partitions`) that it no longer owns them; then it moves to the target epoch and gets the new
  partitions that are free. A partition still assigned to, or pending revocation from, another member is
  never handed out (UNRELEASED_PARTITIONS until it is). The member's current assignment is persisted as a
  ConsumerGroupCurrentMemberAssignment record whenever it changes.
- Heartbeat response: member_id, member_epoch, heartbeat_interval_ms, and the assignment only when the request
  was a full one (epoch 0, or rebalance timeout, subscription and owned partitions all set) or the member's
  assigned partitions changed.
- Member epoch checks: a member epoch ahead of the coordinator's, or behind it other than the previous epoch
  with owned partitions within the current assignment (the lost-response case), is FENCED_MEMBER_EPOCH; epoch
  0 for a known member id is a rejoin and is accepted (KAFKA-19233); an unknown member id with a non-zero epoch
  is UNKNOWN_MEMBER_ID.
- Leaving: epoch -1 removes the member (tombstones for its current assignment, target assignment and metadata,
  in that order, then a group epoch bump); epoch -2 (static members only) keeps the member and its partitions
  at epoch -2 until it rejoins with its instance id or its session times out. A static member rejoining with
  a new member id replaces the departed one and inherits its assignment without a rebalance; while the old
  one is still active the join is UNRELEASED_INSTANCE_ID; another member id heartbeating for the instance is
  FENCED_INSTANCE_ID. A join that changes the instance id of a known member id is INVALID_REQUEST.
- Timeouts: a member not heard from within the session timeout is fenced; a member that has not revoked within
  its rebalance timeout of entering UNREVOKED_PARTITIONS (at the same epoch) is fenced. `heartbeat` runs `tick`
  first, so a deadline that has passed counts even if the shell's timer has not fired yet (its records come
  first in the returned list).
- Validation (GroupCoordinatorService): INVALID_REQUEST for an empty member id (v1+, or any epoch other than a
  v0 join), empty group/instance/rack id, a join without rebalance timeout, without an empty topic_partitions
  array or without names or regex, epoch -2 without instance id, epoch below -2; UNSUPPORTED_ASSIGNOR;
  INVALID_REGULAR_EXPRESSION; GROUP_MAX_SIZE_REACHED for a new member of a full group.

Regex subscriptions are resolved synchronously against the `topics` given to each heartbeat (full match, as
Kafka does; Python's `re` syntax stands in for RE2J), so no ConsumerGroupRegularExpression records are written.
Partition racks are not tracked: ConsumerGroupPartitionMetadata records carry empty partition_metadata, as
Kafka 4.0 writes them when rack-aware assignment is off.

Additions to the agreed API (all keyword arguments with defaults, or new methods):
`heartbeat(..., api_version=None, client_id="", client_host="")` (api_version None: 1 when the request dict has
the v1 field `subscribed_topic_regex`, else 0); `ConsumerGroup(..., max_size=..., member_id_factory=...)`;
`on_loaded(now_ms)`; `validate_offset_fetch(member_id, member_epoch)`; `validate_offset_commit(...,
transactional=False)`; `tombstones()` (the records deleting the group, for DeleteGroups); `group_epoch`,
`assignment_epoch`, `members`, `target_assignment(member_id)`, `preferred_assignor()` (read-only views for the
coordinator and tests); module-level `record_group_id(key)` and `CONSUMER_GROUP_RECORD_TYPES` to route loaded
records to their group.

Persistence: the records of one call are already applied when they are returned (as Kafka's coordinator applies
them to its in-memory state before the write commits). Append them in order as one batch and answer the
heartbeat only once the append succeeded; if it fails, drop this object and rebuild the group by replaying the
log, since its state is ahead of what is durable.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from odradek.coordinator.assignors import ASSIGNORS, MemberSubscription
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import Api, Array, Field, Int8, Int32, String, Struct, Uuid
from odradek.uuid_text import uuid_to_text

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES", "ConsumerGroup", "ConsumerGroupStateError", "MemberState", "Member",
    "record_group_id",
]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
MEMBER_TYPE_CONSUMER = 1
# AclOperation bits a group supports (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS): what Kafka
# reports as authorized operations when no authorizer is configured.
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
_UNSET_AUTHORIZED_OPERATIONS = -(2 ** 31)


class MemberState:
    """ConsumerGroupCurrentMemberAssignmentValue.State (Kafka's MemberState)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupStateError(RuntimeError):
    """An internal invariant broke (a partition owned by two members): a bug, never a client mistake."""


class _RequestError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# ------------------------------------------------------------------------------------------------ records

# Key types (the int16 before the key struct) of the KIP-848 consumer-group records.
METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = frozenset({METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
                                         TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
_INT16 = struct.Struct(">h")


def _schema(name: str, version: int, flexible: bool, fields: list[Field]) -> Api:
    # Only the request side of an Api is used: the compiled, bounds-checked codecs of protocol/schema.py.
    return Api(key=-1, name=name, valid_versions=(version, version), flexible_from=version if flexible else None,
               request=fields, response=[])


def _topic_partitions(name: str) -> Array:
    return Array(Struct(Field("topic_id", Uuid), Field("partitions", Array(Int32)), name=name))


_GROUP_KEY = [Field("group_id", String)]
_MEMBER_KEY = [Field("group_id", String), Field("member_id", String)]
_KEYS = {
    METADATA: _schema("ConsumerGroupMetadataKey", METADATA, False, _GROUP_KEY),
    PARTITION_METADATA: _schema("ConsumerGroupPartitionMetadataKey", PARTITION_METADATA, False, _GROUP_KEY),
    MEMBER_METADATA: _schema("ConsumerGroupMemberMetadataKey", MEMBER_METADATA, False, _MEMBER_KEY),
    TARGET_ASSIGNMENT_METADATA: _schema("ConsumerGroupTargetAssignmentMetadataKey", TARGET_ASSIGNMENT_METADATA,
                                        False, _GROUP_KEY),
    TARGET_ASSIGNMENT_MEMBER: _schema("ConsumerGroupTargetAssignmentMemberKey", TARGET_ASSIGNMENT_MEMBER, False,
                                      _MEMBER_KEY),
    CURRENT_MEMBER_ASSIGNMENT: _schema("ConsumerGroupCurrentMemberAssignmentKey", CURRENT_MEMBER_ASSIGNMENT, False,
                                       _MEMBER_KEY),
}
_VALUES = {
    METADATA: _schema("ConsumerGroupMetadataValue", 0, True, [Field("epoch", Int32)]),
    PARTITION_METADATA: _schema("ConsumerGroupPartitionMetadataValue", 0, True, [
        Field("topics", Array(Struct(
            Field("topic_id", Uuid),
            Field("topic_name", String),
            Field("num_partitions", Int32),
            Field("partition_metadata", Array(Struct(
                Field("partition", Int32),
                Field("racks", Array(String)),
                name="PartitionMetadata",
            ))),
            name="TopicMetadata",
        ))),
    ]),
    MEMBER_METADATA: _schema("ConsumerGroupMemberMetadataValue", 0, True, [
        Field("instance_id", String, nullable_versions="0+"),
        Field("rack_id", String, nullable_versions="0+"),
        Field("client_id", String),
        Field("client_host", String),
        Field("subscribed_topic_names", Array(String)),
        Field("subscribed_topic_regex", String, nullable_versions="0+"),
        Field("rebalance_timeout_ms", Int32, default=-1),
        Field("server_assignor", String, nullable_versions="0+"),
        # Tag 0 (ClassicMemberMetadata) is only written for members using the classic protocol: never here;
        # the decoder skips it.
    ]),
    TARGET_ASSIGNMENT_METADATA: _schema("ConsumerGroupTargetAssignmentMetadataValue", 0, True, [
        Field("assignment_epoch", Int32),
    ]),
    TARGET_ASSIGNMENT_MEMBER: _schema("ConsumerGroupTargetAssignmentMemberValue", 0, True, [
        Field("topic_partitions", _topic_partitions("TopicPartition")),
    ]),
    CURRENT_MEMBER_ASSIGNMENT: _schema("ConsumerGroupCurrentMemberAssignmentValue", 0, True, [
        Field("member_epoch", Int32),
        Field("previous_member_epoch", Int32),
        Field("state", Int8),
        Field("assigned_partitions", _topic_partitions("TopicPartitions")),
        Field("partitions_pending_revocation", _topic_partitions("TopicPartitions")),
    ]),
}


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    body = {"group_id": group_id, "member_id": member_id}
    return _INT16.pack(record_type) + _KEYS[record_type].encode_request(record_type, body)


def _value(record_type: int, body: dict) -> bytes:
    return _INT16.pack(0) + _VALUES[record_type].encode_request(0, body)


def record_group_id(key: bytes) -> tuple[int, str] | None:
    """(record type, group id) of a KIP-848 consumer-group record key; None for any other record type."""
    record_type = _INT16.unpack_from(key, 0)[0]
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    return record_type, _KEYS[record_type].decode_request(record_type, key, 2)["group_id"]


def _decode_value(record_type: int, value: bytes) -> dict:
    # Later value versions only add tagged fields (KIP-915): read them as version 0, skipping unknown tags.
    return _VALUES[record_type].decode_request(0, value, 2)


def _tp_list(assignment: dict[bytes, frozenset[int]]) -> list[dict]:
    return [{"topic_id": topic_id, "partitions": sorted(partitions)}
            for topic_id, partitions in sorted(assignment.items()) if partitions]


def _tp_dict(entries: list[dict] | None) -> dict[bytes, frozenset[int]]:
    result: dict[bytes, frozenset[int]] = {}
    for entry in entries or ():
        partitions = frozenset(entry["partitions"])
        if partitions:
            result[entry["topic_id"]] = result.get(entry["topic_id"], frozenset()) | partitions
    return result


# ------------------------------------------------------------------------------------------------ members

_EMPTY: dict[bytes, frozenset[int]] = {}


@dataclass(frozen=True)
class Member:
    """One member as the coordinator sees it: its metadata (ConsumerGroupMemberMetadata) and its current
    assignment (ConsumerGroupCurrentMemberAssignment)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = MemberState.STABLE
    assigned: dict[bytes, frozenset[int]] = field(default_factory=dict)
    pending_revocation: dict[bytes, frozenset[int]] = field(default_factory=dict)

    def metadata(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor)

    def assignment(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation)

    def with_epoch(self, epoch: int, **changes) -> Member:
        """Kafka's Builder.updateMemberEpoch: the current epoch becomes the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)


def _regex(pattern: str | None) -> re.Pattern | None:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


# ------------------------------------------------------------------------------------------------ the group

class ConsumerGroup:
    def __init__(self, group_id: str, *, session_timeout_ms: int = 45000, heartbeat_interval_ms: int = 5000,
                 default_assignor: str = "uniform", max_size: int = 2 ** 31 - 1,
                 member_id_factory: Callable[[], str] | None = None):
        if default_assignor not in ASSIGNORS:
            raise ValueError(f"unknown assignor {default_assignor!r}; known: {', '.join(sorted(ASSIGNORS))}")
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.default_assignor = default_assignor
        self.max_size = max_size
        self._new_member_id = member_id_factory or (lambda: uuid_to_text(os.urandom(16)))
        self._group_epoch = 0
        self._assignment_epoch = 0
        self._members: dict[str, Member] = {}
        self._static_members: dict[str, str] = {}  # instance id -> member id
        self._target: dict[str, dict[bytes, frozenset[int]]] = {}
        self._subscription_metadata: dict[str, tuple[bytes, int]] = {}  # topic name -> (topic id, partitions)
        self._partition_owner: dict[tuple[bytes, int], tuple[str, int]] = {}  # -> (member id, its epoch)
        self._session_deadline: dict[str, int] = {}
        self._rebalance_deadline: dict[str, tuple[int, int]] = {}  # member id -> (deadline, member epoch)
        self._deleted = False
        self._records: list[tuple[bytes, bytes | None]] | None = None

    # ------------------------------------------------------------------------------------ read-only views

    @property
    def group_epoch(self) -> int:
        return self._group_epoch

    @property
    def assignment_epoch(self) -> int:
        return self._assignment_epoch

    @property
    def members(self) -> MappingProxyType:
        return MappingProxyType(self._members)

    def target_assignment(self, member_id: str) -> dict[bytes, frozenset[int]]:
        return dict(self._target.get(member_id, _EMPTY))

    @property
    def state(self) -> str:
        if self._deleted:
            return "Dead"
        if not self._members:
            return "Empty"
        if self._group_epoch > self._assignment_epoch:
            return "Assigning"
        for member in self._members.values():
            if member.member_epoch != self._assignment_epoch or member.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self._members

    def subscribed_topics(self) -> set[str]:
        """Topic names the group subscribes to: every member's names, and the existing topics its regexes match."""
        names = {name for member in self._members.values() for name in member.subscribed_topic_names}
        return names | set(self._subscription_metadata)

    def preferred_assignor(self) -> str:
        counts: dict[str, int] = {}
        for member in self._members.values():
            if member.server_assignor:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return self.default_assignor
        return min(counts, key=lambda name: (-counts[name], name))

    # ------------------------------------------------------------------------------------ heartbeat

    def heartbeat(self, now_ms: int, request: dict, topics: dict[str, tuple[bytes, int]], *,
                  api_version: int | None = None, client_id: str = "", client_host: str = ""
                  ) -> tuple[dict, list[tuple[bytes, bytes | None]]]:
        if api_version is None:
            api_version = 1 if "subscribed_topic_regex" in request else 0
        # Sessions that ended by now end first, whether or not the shell's timer has fired yet.
        expired = self.tick(now_ms)
        self._records = []
        try:
            self._validate(request, api_version)
            if request["member_epoch"] in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._leave(now_ms, request)
            else:
                response = self._heartbeat(now_ms, request, topics, client_id, client_host)
        except _RequestError as exc:
            # Every check comes before the first record, so a refused request changes nothing.
            assert not self._records, "records emitted before a request error"
            response = {"throttle_time_ms": 0, "error_code": int(exc.code), "error_message": exc.message,
                        "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
        records, self._records = self._records, None
        return response, expired + records

    def _validate(self, request: dict, api_version: int) -> None:
        invalid = ErrorCode.INVALID_REQUEST
        epoch = request["member_epoch"]
        member_id = request.get("member_id") or ""
        if (api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or epoch > 0
                or epoch == LEAVE_GROUP_MEMBER_EPOCH) and not member_id:
            raise _RequestError(invalid, "MemberId can't be empty.")
        if not request.get("group_id"):
            raise _RequestError(invalid, "GroupId can't be empty.")
        if request.get("instance_id") == "":
            raise _RequestError(invalid, "InstanceId can't be empty.")
        if request.get("rack_id") == "":
            raise _RequestError(invalid, "RackId can't be empty.")
        if epoch == 0:
            if request.get("rebalance_timeout_ms", -1) == -1:
                raise _RequestError(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if request.get("topic_partitions") is None or request["topic_partitions"]:
                raise _RequestError(invalid, "TopicPartitions must be empty when (re-)joining.")
            if request.get("subscribed_topic_names") is None and request.get("subscribed_topic_regex") is None:
                raise _RequestError(invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be "
                                             "non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.get("instance_id") is None:
                raise _RequestError(invalid, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _RequestError(invalid, "MemberEpoch is invalid.")
        assignor = request.get("server_assignor")
        if assignor is not None and assignor not in ASSIGNORS:
            raise _RequestError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                f"{', '.join(sorted(ASSIGNORS))}.")
        regex = request.get("subscribed_topic_regex")
        if regex:
            try:
                re.compile(regex)
            except re.error as exc:
                raise _RequestError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.") \
                    from None

    def _heartbeat(self, now_ms: int, request: dict, topics: dict[str, tuple[bytes, int]], client_id: str,
                   client_host: str) -> dict:
        member_id: str = request.get("member_id") or ""
        epoch: int = request["member_epoch"]
        instance_id: str | None = request.get("instance_id")
        owned: list[dict] | None = request.get("topic_partitions")
        joining = epoch == 0
        if len(self._members) >= self.max_size and (not member_id or member_id not in self._members):
            raise _RequestError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                f"The consumer group has reached its maximum capacity of {self.max_size} members.")
        if not member_id:
            member_id = self._new_member_id()

        if instance_id is None:
            member = self._members.get(member_id)
            if member is None:
                if not joining:
                    raise self._unknown_member(member_id)
                member = Member(member_id)
            else:
                self._check_member_epoch(member, epoch, owned)
        else:
            member = self._static_member(now_ms, member_id, epoch, instance_id, owned)
        if member.state == MemberState.UNKNOWN and (owned is None or owned):
            # A state written by a newer version: the member starts over from no partitions.
            raise _RequestError(ErrorCode.FENCED_MEMBER_EPOCH,
                                "The consumer group member is in a unknown state. The member must abandon all "
                                "its partitions and rejoin.")

        # 1. Update the member's metadata; bump the group epoch on a new group, a subscription change or new
        # topic metadata.
        names = request.get("subscribed_topic_names")
        regex = request.get("subscribed_topic_regex")
        timeout = request.get("rebalance_timeout_ms", -1)
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=request["rack_id"] if request.get("rack_id") is not None else member.rack_id,
            rebalance_timeout_ms=timeout if timeout != -1 else member.rebalance_timeout_ms,
            server_assignor=request["server_assignor"] if request.get("server_assignor") is not None
            else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(names))) if names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=regex if regex is not None else member.subscribed_topic_regex,
            client_id=client_id,
            client_host=client_host,
        )
        bump = self._group_epoch == 0
        if member_id not in self._members or updated.metadata() != member.metadata():
            self._emit_member_metadata(updated)
            if (updated.subscribed_topic_names != member.subscribed_topic_names
                    or (updated.subscribed_topic_regex or "") != (member.subscribed_topic_regex or "")):
                bump = True
        metadata = self._compute_subscription_metadata(topics)
        if metadata != self._subscription_metadata:
            self._emit_subscription_metadata(metadata)
            bump = True
        if bump:
            self._emit(_key(METADATA, self.group_id), _value(METADATA, {"epoch": self._group_epoch + 1}))

        # 2. A new target assignment when the group epoch is ahead of it.
        if self._group_epoch > self._assignment_epoch:
            self._compute_target_assignment()

        # 3. Reconcile the member towards its target.
        member = self._members[member_id]
        if joining and member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # The static member is back (with its own member id) after leaving with -2: rejoin from epoch 0.
            member = replace(member, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                             pending_revocation={})
            self._emit_current_assignment(member)
        before = member
        member = self._reconcile(now_ms, member, owned)
        self._session_deadline[member_id] = now_ms + self.session_timeout_ms

        full_request = joining or (
            request.get("rebalance_timeout_ms", -1) != -1
            and (names is not None or regex is not None)
            and owned is not None)
        assignment = None
        if full_request or member.assigned != before.assigned:
            assignment = {"topic_partitions": _tp_list(member.assigned)}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": member_id,
                "member_epoch": member.member_epoch, "heartbeat_interval_ms": self.heartbeat_interval_ms,
                "assignment": assignment}

    def _unknown_member(self, member_id: str) -> _RequestError:
        return _RequestError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")

    @staticmethod
    def _check_member_epoch(member: Member, epoch: int, owned: list[dict] | None) -> None:
        if epoch == 0:
            return  # a known member rejoining (KAFKA-19233)
        if epoch > member.member_epoch:
            raise _RequestError(ErrorCode.FENCED_MEMBER_EPOCH,
                                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                f"all its partitions and rejoin.")
        if epoch < member.member_epoch:
            # The previous epoch with owned partitions within the assignment: the response that bumped the epoch
            # may have been lost.
            subset = owned is not None and all(
                set(entry["partitions"]) <= member.assigned.get(entry["topic_id"], frozenset())
                for entry in owned)
            if epoch != member.previous_member_epoch or not subset:
                raise _RequestError(ErrorCode.FENCED_MEMBER_EPOCH,
                                    f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                                    f"known by the group coordinator ({member.member_epoch}). The member must "
                                    f"abandon all its partitions and rejoin.")

    def _static_member(self, now_ms: int, member_id: str, epoch: int, instance_id: str,
                       owned: list[dict] | None) -> Member:
        existing_id = self._static_members.get(instance_id)
        existing = self._members.get(existing_id) if existing_id is not None else None
        known = self._members.get(member_id)
        if epoch != 0:
            if existing is None:
                raise _RequestError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if existing.member_id != member_id:
                raise _RequestError(ErrorCode.FENCED_INSTANCE_ID,
                                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                                    f"member {existing.member_id}.")
            self._check_member_epoch(existing, epoch, owned)
            return existing
        if known is not None and known.instance_id != instance_id:
            raise _RequestError(ErrorCode.INVALID_REQUEST,
                                f"Member {member_id} cannot change its instance id from {known.instance_id} to "
                                f"{instance_id}.")
        if existing is None:
            return known or Member(member_id)
        if existing.member_id == member_id:
            return existing  # rejoining with its own member id: handled in place
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _RequestError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                f"because the instance id is owned by {existing.member_id} member.")
        # Replace the departed static member: the new member id inherits its target and current assignment.
        replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0,
                              state=MemberState.STABLE, pending_revocation={})
        target = self._target.get(existing.member_id, _EMPTY)
        self._remove_member_records(existing.member_id)
        self._emit_member_metadata(replacement)
        self._emit(_key(TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id),
                   _value(TARGET_ASSIGNMENT_MEMBER, {"topic_partitions": _tp_list(target)}))
        self._emit_current_assignment(replacement)
        return replacement

    # ------------------------------------------------------------------------------------ leaving, fencing

    def _leave(self, now_ms: int, request: dict) -> dict:
        member_id = request["member_id"]
        epoch = request["member_epoch"]
        instance_id = request.get("instance_id")
        if instance_id is None:
            if member_id not in self._members:
                raise self._unknown_member(member_id)
            self._fence(member_id)
        else:
            existing_id = self._static_members.get(instance_id)
            if existing_id is None or existing_id not in self._members:
                raise _RequestError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if existing_id != member_id:
                raise _RequestError(ErrorCode.FENCED_INSTANCE_ID,
                                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                                    f"member {existing_id}.")
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Temporarily gone: keep its partitions (not handed to others) until it rejoins or times out.
                member = self._members[member_id]
                self._emit_current_assignment(replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                                      pending_revocation={}))
                self._rebalance_deadline.pop(member_id, None)
                self._session_deadline[member_id] = now_ms + self.session_timeout_ms
            else:
                self._fence(member_id)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": member_id,
                "member_epoch": epoch, "heartbeat_interval_ms": 0, "assignment": None}

    def _remove_member_records(self, member_id: str) -> None:
        # The order matters: a member metadata tombstone removes the member.
        self._emit(_key(CURRENT_MEMBER_ASSIGNMENT, self.group_id, member_id), None)
        self._emit(_key(TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id), None)
        self._emit(_key(MEMBER_METADATA, self.group_id, member_id), None)

    def _fence(self, member_id: str) -> None:
        self._remove_member_records(member_id)
        # The subscription metadata without the member: what the others still subscribe to.
        remaining = self._subscribed_names(self._subscription_metadata.keys())
        metadata = {name: meta for name, meta in self._subscription_metadata.items() if name in remaining}
        if metadata != self._subscription_metadata:
            self._emit_subscription_metadata(metadata)
        self._emit(_key(METADATA, self.group_id), _value(METADATA, {"epoch": self._group_epoch + 1}))

    def tick(self, now_ms: int) -> list[tuple[bytes, bytes | None]]:
        """Fence members whose session expired, or that did not revoke within their rebalance timeout."""
        self._records = []
        expired = sorted((deadline, member_id) for member_id, deadline in self._session_deadline.items()
                         if deadline <= now_ms)
        for _, member_id in expired:
            if member_id in self._members:
                self._fence(member_id)
        stuck = sorted((deadline, member_id, epoch)
                       for member_id, (deadline, epoch) in self._rebalance_deadline.items() if deadline <= now_ms)
        for _, member_id, epoch in stuck:
            self._rebalance_deadline.pop(member_id, None)
            member = self._members.get(member_id)
            if member is not None and member.member_epoch == epoch:
                self._fence(member_id)
        records, self._records = self._records, None
        return records

    def next_deadline(self) -> int | None:
        deadlines = list(self._session_deadline.values())
        deadlines += [deadline for deadline, _ in self._rebalance_deadline.values()]
        return min(deadlines) if deadlines else None

    def on_loaded(self, now_ms: int) -> None:
        """After replaying the group's records at start: give every member a fresh session (and a rebalance
        timeout to members still revoking), as Kafka does when a coordinator loads a group."""
        for member_id, member in self._members.items():
            self._session_deadline[member_id] = now_ms + self.session_timeout_ms
            if member.state == MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_deadline[member_id] = (now_ms + max(member.rebalance_timeout_ms, 0),
                                                       member.member_epoch)

    def tombstones(self) -> list[tuple[bytes, None]]:
        """The records deleting this (empty) group: for DeleteGroups, or when its offsets have all expired."""
        records: list[tuple[bytes, None]] = []
        for member_id in sorted(self._members):
            for record_type in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA):
                records.append((_key(record_type, self.group_id, member_id), None))
        for record_type in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, METADATA):
            records.append((_key(record_type, self.group_id), None))
        return records

    # ------------------------------------------------------------------------------------ assignment

    def _member_topic_names(self, member: Member, available) -> set[str]:
        names = {name for name in member.subscribed_topic_names if name in available}
        pattern = _regex(member.subscribed_topic_regex)
        if pattern is not None:
            names.update(name for name in available if pattern.fullmatch(name))
        return names

    def _subscribed_names(self, available) -> set[str]:
        names: set[str] = set()
        patterns: set[str] = set()
        for member in self._members.values():
            names.update(name for name in member.subscribed_topic_names if name in available)
            if member.subscribed_topic_regex:
                patterns.add(member.subscribed_topic_regex)
        for pattern in filter(None, map(_regex, sorted(patterns))):  # each distinct regex scans the topics once
            names.update(name for name in available if pattern.fullmatch(name))
        return names

    def _compute_subscription_metadata(self, topics: dict[str, tuple[bytes, int]]) -> dict[str, tuple[bytes, int]]:
        return {name: (topics[name][0], topics[name][1]) for name in self._subscribed_names(topics)}

    def _member_topic_ids(self, member: Member) -> set[bytes]:
        names = self._member_topic_names(member, self._subscription_metadata)
        return {self._subscription_metadata[name][0] for name in names}

    def _compute_target_assignment(self) -> None:
        assignor = ASSIGNORS[self.preferred_assignor()]
        members = {member_id: MemberSubscription(member_id, member.rack_id,
                                                 frozenset(self._member_topic_names(member,
                                                                                    self._subscription_metadata)))
                   for member_id, member in self._members.items()}
        topics = {topic_id: (name, count) for name, (topic_id, count) in self._subscription_metadata.items()}
        current = {member_id: {t: set(ps) for t, ps in self._target.get(member_id, _EMPTY).items()}
                   for member_id in self._members}
        result = assignor(members, topics, current)
        for member_id in sorted(self._members):
            new = {t: frozenset(ps) for t, ps in result.get(member_id, {}).items() if ps}
            if member_id not in self._target or new != self._target[member_id]:
                self._emit(_key(TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id),
                           _value(TARGET_ASSIGNMENT_MEMBER, {"topic_partitions": _tp_list(new)}))
        self._emit(_key(TARGET_ASSIGNMENT_METADATA, self.group_id),
                   _value(TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": self._group_epoch}))

    def _reconcile(self, now_ms: int, member: Member, owned: list[dict] | None) -> Member:
        target_epoch = self._assignment_epoch
        if member.state == MemberState.STABLE and member.member_epoch == target_epoch:
            return member
        target = self._target.get(member.member_id, _EMPTY)
        if member.state == MemberState.STABLE:
            updated = self._next_assignment(member, member.member_epoch, target_epoch, target, owned)
        elif member.state == MemberState.UNREVOKED_PARTITIONS:
            if self._owns_revoked(owned, member.pending_revocation):
                return member
            updated = self._next_assignment(member, member.member_epoch, target_epoch, target, owned)
        elif member.state == MemberState.UNRELEASED_PARTITIONS:
            updated = self._next_assignment(member, member.member_epoch, target_epoch, target, owned)
        else:  # UNKNOWN, and the member owns nothing (checked before any record was emitted)
            updated = self._next_assignment(member, target_epoch, target_epoch, target, owned)
        if updated != member:
            self._emit_current_assignment(updated)
            if updated.state == MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_deadline[member.member_id] = (now_ms + max(updated.rebalance_timeout_ms, 0),
                                                              updated.member_epoch)
            else:
                self._rebalance_deadline.pop(member.member_id, None)
        return updated

    @staticmethod
    def _owns_revoked(owned: list[dict] | None, pending: dict[bytes, frozenset[int]]) -> bool:
        if owned is None:
            return True
        return any(not pending.get(entry["topic_id"], frozenset()).isdisjoint(entry["partitions"])
                   for entry in owned)

    def _next_assignment(self, member: Member, member_epoch: int, target_epoch: int,
                         target: dict[bytes, frozenset[int]], owned: list[dict] | None) -> Member:
        subscribed = self._member_topic_ids(member)
        assigned: dict[bytes, frozenset[int]] = {}
        revoking: dict[bytes, frozenset[int]] = {}
        to_assign: dict[bytes, frozenset[int]] = {}
        unreleased = False
        for topic_id in sorted(set(target) | set(member.assigned)):
            wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
            current = member.assigned.get(topic_id, frozenset())
            keep = current & wanted
            revoke = current - keep
            own_pending = member.pending_revocation.get(topic_id, frozenset())
            free = frozenset(p for p in wanted - keep
                             if (topic_id, p) not in self._partition_owner or p in own_pending)
            unreleased = unreleased or len(free) < len(wanted - keep)
            if keep:
                assigned[topic_id] = keep
            if revoke:
                revoking[topic_id] = revoke
            if free:
                to_assign[topic_id] = free
        if revoking and self._owns_revoked(owned, revoking):
            # Revoke first, at the current epoch; nothing new until the member reports it let them go.
            return member.with_epoch(member_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                                     pending_revocation=revoking)
        for topic_id, partitions in to_assign.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return member.with_epoch(target_epoch, state=state, assigned=assigned, pending_revocation={})

    # ------------------------------------------------------------------------------------ describe, offsets

    def describe(self, now_ms: int, include_authorized_operations: bool, topic_names: dict[bytes, str]) -> dict:
        """One DescribedGroup of ConsumerGroupDescribe. authorized_operations is every group operation when asked
        for (Kafka's answer without an authorizer); a coordinator with an authorizer overwrites it."""

        def described(assignment: dict[bytes, frozenset[int]]) -> dict:
            return {"topic_partitions": [
                {"topic_id": topic_id, "topic_name": topic_names[topic_id], "partitions": sorted(partitions)}
                for topic_id, partitions in sorted(assignment.items()) if topic_id in topic_names and partitions]}

        members = []
        for member_id in sorted(self._members):
            member = self._members[member_id]
            members.append({
                "member_id": member_id,
                "instance_id": member.instance_id,
                "rack_id": member.rack_id,
                "member_epoch": member.member_epoch,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "subscribed_topic_names": list(member.subscribed_topic_names),
                "subscribed_topic_regex": member.subscribed_topic_regex or None,
                "assignment": described(member.assigned),
                "target_assignment": described(self._target.get(member_id, _EMPTY)),
                "member_type": MEMBER_TYPE_CONSUMER,
            })
        return {
            "error_code": 0,
            "error_message": None,
            "group_id": self.group_id,
            "group_state": self.state,
            "group_epoch": self._group_epoch,
            "assignment_epoch": self._assignment_epoch,
            "assignor_name": self.preferred_assignor(),
            "members": members,
            "authorized_operations": ALL_GROUP_OPERATIONS if include_authorized_operations
            else _UNSET_AUTHORIZED_OPERATIONS,
        }

    def validate_offset_commit(self, member_id: str, member_epoch: int, *, transactional: bool = False) -> ErrorCode:
        """OffsetCommit v9+ (and TxnOffsetCommit) against this group (ConsumerGroup.validateOffsetCommit)."""
        if member_epoch < 0 and not self._members:
            return ErrorCode.NONE  # the admin client, or a consumer outside group management, of an empty group
        if transactional and member_epoch == -1 and not member_id:
            return ErrorCode.NONE  # TxnOffsetCommit without member id and generation
        member = self._members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ carrying a member id and epoch (ConsumerGroup.validateOffsetFetch)."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self._members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # ------------------------------------------------------------------------------------ records in, out

    def _emit(self, key: bytes, value: bytes | None) -> None:
        assert self._records is not None
        self._records.append((key, value))
        self.replay(key, value)

    def _emit_member_metadata(self, member: Member) -> None:
        self._emit(_key(MEMBER_METADATA, self.group_id, member.member_id), _value(MEMBER_METADATA, {
            "instance_id": member.instance_id,
            "rack_id": member.rack_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": list(member.subscribed_topic_names),
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "rebalance_timeout_ms": member.rebalance_timeout_ms,
            "server_assignor": member.server_assignor,
        }))

    def _emit_current_assignment(self, member: Member) -> None:
        self._emit(_key(CURRENT_MEMBER_ASSIGNMENT, self.group_id, member.member_id),
                   _value(CURRENT_MEMBER_ASSIGNMENT, {
                       "member_epoch": member.member_epoch,
                       "previous_member_epoch": member.previous_member_epoch,
                       "state": member.state,
                       "assigned_partitions": _tp_list(member.assigned),
                       "partitions_pending_revocation": _tp_list(member.pending_revocation),
                   }))

    def _emit_subscription_metadata(self, metadata: dict[str, tuple[bytes, int]]) -> None:
        self._emit(_key(PARTITION_METADATA, self.group_id), _value(PARTITION_METADATA, {"topics": [
            {"topic_id": topic_id, "topic_name": name, "num_partitions": count, "partition_metadata": []}
            for name, (topic_id, count) in sorted(metadata.items())]}))

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of this group (at load, and for every record the group itself emits)."""
        record_type = _INT16.unpack_from(key, 0)[0]
        if record_type not in CONSUMER_GROUP_RECORD_TYPES:
            raise ValueError(f"record type {record_type} is not a consumer group record")
        key_body = _KEYS[record_type].decode_request(record_type, key, 2)
        if key_body["group_id"] != self.group_id:
            raise ValueError(f"record of group {key_body['group_id']!r} replayed into group {self.group_id!r}")
        body = _decode_value(record_type, value) if value is not None else None
        member_id = key_body.get("member_id")
        if record_type == METADATA:
            if body is None:
                self._deleted = True
            else:
                self._deleted = False
                self._group_epoch = body["epoch"]
        elif record_type == PARTITION_METADATA:
            self._subscription_metadata = {} if body is None else {
                topic["topic_name"]: (topic["topic_id"], topic["num_partitions"]) for topic in body["topics"]}
        elif record_type == TARGET_ASSIGNMENT_METADATA:
            self._assignment_epoch = 0 if body is None else body["assignment_epoch"]
        elif record_type == TARGET_ASSIGNMENT_MEMBER:
            if body is None:
                self._target.pop(member_id, None)
            else:
                self._target[member_id] = _tp_dict(body["topic_partitions"])
        elif record_type == MEMBER_METADATA:
            if body is None:
                self._remove_member(member_id)
            else:
                old = self._members.get(member_id) or Member(member_id)
                if old.instance_id is not None and self._static_members.get(old.instance_id) == member_id:
                    del self._static_members[old.instance_id]
                member = replace(old, instance_id=body["instance_id"], rack_id=body["rack_id"],
                                 client_id=body["client_id"], client_host=body["client_host"],
                                 subscribed_topic_names=tuple(sorted(set(body["subscribed_topic_names"]))),
                                 subscribed_topic_regex=body["subscribed_topic_regex"],
                                 rebalance_timeout_ms=body["rebalance_timeout_ms"],
                                 server_assignor=body["server_assignor"])
                self._members[member_id] = member
                if member.instance_id is not None:
                    self._static_members[member.instance_id] = member_id
        elif record_type == CURRENT_MEMBER_ASSIGNMENT:
            old = self._members.get(member_id)
            if body is None:
                if old is not None:
                    self._set_assignment(old, replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                      previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                      assigned={}, pending_revocation={}))
            else:
                state = body["state"]
                if state not in (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                 MemberState.UNRELEASED_PARTITIONS):
                    state = MemberState.UNKNOWN
                old = old or Member(member_id)
                self._members[member_id] = old
                self._set_assignment(old, replace(old, member_epoch=body["member_epoch"],
                                                  previous_member_epoch=body["previous_member_epoch"],
                                                  state=state, assigned=_tp_dict(body["assigned_partitions"]),
                                                  pending_revocation=_tp_dict(
                                                      body["partitions_pending_revocation"])))

    def _set_assignment(self, old: Member, new: Member) -> None:
        """Store the member and keep the partition -> owner index (assigned and pending revocation) in step."""
        for assignment in (old.assigned, old.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    if self._partition_owner.get((topic_id, partition), ("",))[0] == old.member_id:
                        del self._partition_owner[(topic_id, partition)]
        for assignment in (new.assigned, new.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    holder = self._partition_owner.get((topic_id, partition))
                    if holder is not None and holder[0] != new.member_id:
                        raise ConsumerGroupStateError(
                            f"group {self.group_id}: partition {uuid_to_text(topic_id)}-{partition} of member "
                            f"{new.member_id} (epoch {new.member_epoch}) is still owned by {holder[0]} at epoch "
                            f"{holder[1]}")
                    self._partition_owner[(topic_id, partition)] = (new.member_id, new.member_epoch)
        self._members[new.member_id] = new

    def _remove_member(self, member_id: str) -> None:
        member = self._members.get(member_id)
        if member is None:
            return
        self._set_assignment(member, replace(member, assigned={}, pending_revocation={}))
        del self._members[member_id]
        if member.instance_id is not None and self._static_members.get(member.instance_id) == member_id:
            del self._static_members[member.instance_id]
        self._session_deadline.pop(member_id, None)
        self._rebalance_deadline.pop(member_id, None)
