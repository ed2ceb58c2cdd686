"""The sans-I/O classic group coordinator: consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and offsets.

No sockets, clocks, sleeps or threads: every call takes `now_ms` and returns what the shell must do. Behaviour
follows Kafka 4.0's group coordinator (GroupMetadataManager, ClassicGroup, OffsetMetadataManager,
GroupCoordinatorService), classic protocol only.

Actions
    Reply(token, response)      answer a request that was parked (JoinGroup, SyncGroup) or the calling one.
    Append(partition, records)  write these (key, value|None) records to `__consumer_offsets-<partition>`
                                before sending any Reply that follows it in the same action list.
The coordinator applies its own changes at once (it assumes every Append succeeds, but for a transactional
one, whose `undo` the shell calls when the log refuses it); `load()` rebuilds the same state from the records
after a restart.

API (requests and responses are the codec's snake_case dicts; `version` is the request's api version):

    partition_for(group_id) -> int                     abs(Java String.hashCode) % num_partitions (Utils.abs)
    join_group(now_ms, version, request, token, *, client_id="", client_host="") -> [Reply | Append]
    sync_group(now_ms, version, request, token) -> [Reply | Append]
        Both may return no Reply for `token` (the request is parked); it is answered by a Reply from a
        later call (another member's join/sync/leave, or tick()). Every parked token is answered exactly once.
    heartbeat(now_ms, version, request) -> response
    leave_group(now_ms, version, request) -> (response, [Reply | Append])
    offset_commit(now_ms, version, request) -> (response, [Append])
    offset_fetch(now_ms, version, request) -> response          v1-7 one group, v8+ `groups`
    list_groups / describe_groups(now_ms, version, request) -> response
    delete_groups / offset_delete(now_ms, version, request) -> (response, [Append])
    tick(now_ms) -> [Reply | Append]       session, join, sync and initial-delay timers; offset expiry
    next_deadline() -> int | None          the earliest now_ms at which tick() has work
    load(records, now_ms, *, partition=None)   replay one partition's log (last write wins, tombstones delete)
    unload(partition) -> [Reply]           forget the partition's groups; parked requests get NOT_COORDINATOR

Groups of an unloaded partition answer NOT_COORDINATOR until `load()` is called for it again; every partition
counts as owned until it is unloaded.

Extensions to the brief's shape: `join_group` takes the request header's client id and the client's host (the
dynamic member id is `<client_id>-<uuid4>`, a static one `<group_instance_id>-<uuid4>`, as in Kafka); `load`
takes an optional `partition` to mark an empty log as owned; `unload` returns the replies to parked requests;
`offsets_retention_check_interval_ms` (Kafka's offsets.retention.check.interval.ms) sets how often offsets
expire, and `new_uuid` lets tests make member ids reproducible.

Deviation from Kafka: when a member is removed while it has a parked SyncGroup (an admin LeaveGroup of a static
member), or a member re-sends JoinGroup/SyncGroup while its previous one is still parked, the orphaned request
is answered (UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS) instead of being left to the client's request timeout,
because a never-answered request would block its connection's in-order responses.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.coordinator import records as rec
from odradek.coordinator.classic_group import ClassicGroup, ClassicGroupMember, GroupState, Parked
from odradek.coordinator.consumer_group import ALL_GROUP_OPERATIONS, ConsumerGroup, record_group_id
from odradek.protocol.errors import ErrorCode

__all__ = ["Append", "GroupCoordinator", "OffsetAndMetadata", "Reply"]

E = ErrorCode
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's classicGroupNewMemberJoinTimeoutMs
OFFSET_COMMIT_DEFAULT_RETENTION = -1


@dataclass(frozen=True)
class Reply:
    token: object
    response: dict


@dataclass(frozen=True)
class Append:
    partition: int
    records: list[tuple[bytes, bytes | None]]
    producer: tuple[int, int] | None = None  # (producer id, epoch): a transactional write (TxnOffsetCommit)
    # For a transactional write the log may refuse (a fenced producer's epoch): forgets what it would have added.
    undo: Callable[[], None] | None = None


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int       # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int   # -1: none (only commits with an explicit retention time carry one)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, wrapping at 32 bits)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _java_length(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def commit_response(request: dict, error_for: Callable[[str, int], ErrorCode]) -> dict:
    """An (Txn)OffsetCommit response: each requested partition with the error `error_for(topic, index)`."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": int(error_for(t["name"], p["partition_index"]))}
            for p in t["partitions"]]}
        for t in request["topics"]]}


def _join_response(version: int, error: ErrorCode, member_id: str = "", generation_id: int = -1,
                   protocol_type: str | None = None, protocol_name: str | None = None, leader: str | None = "",
                   members: list[dict] | None = None, skip_assignment: bool = False) -> dict:
    if protocol_name is None and version < 7:
        protocol_name = ""  # not nullable before v7 (Kafka's JoinGroupResponse does the same)
    return {"throttle_time_ms": 0, "error_code": int(error), "generation_id": generation_id,
            "protocol_type": protocol_type, "protocol_name": protocol_name, "leader": leader or "",
            "skip_assignment": skip_assignment, "member_id": member_id, "members": members or []}


def _sync_response(error: ErrorCode, protocol_type: str | None = None, protocol_name: str | None = None,
                   assignment: bytes = b"") -> dict:
    return {"throttle_time_ms": 0, "error_code": int(error), "protocol_type": protocol_type,
            "protocol_name": protocol_name, "assignment": assignment}


class _Timers:
    """Keyed one-shot timers (scheduling a key again replaces it), like Kafka's coordinator timer."""

    def __init__(self):
        self._heap: list[tuple[int, int, tuple]] = []
        self._live: dict[tuple, tuple[int, int, Callable]] = {}
        self._seq = 0

    def schedule(self, key: tuple, deadline: int, callback: Callable[[int, list], None]) -> None:
        self._seq += 1
        self._live[key] = (deadline, self._seq, callback)
        heapq.heappush(self._heap, (deadline, self._seq, key))

    def cancel(self, key: tuple) -> None:
        self._live.pop(key, None)

    def cancel_where(self, predicate: Callable[[tuple], bool]) -> None:
        for key in [k for k in self._live if predicate(k)]:
            del self._live[key]

    def deadline(self, key: tuple) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Callable | None:
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        return self._live.pop(key)[2]


class GroupCoordinator:
    def __init__(self, *, num_partitions: int = 50, initial_rebalance_delay_ms: int = 3000,
                 min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1800000,
                 max_group_size: int = 2**31 - 1, offsets_retention_ms: int = 7 * 24 * 3600 * 1000,
                 offset_metadata_max_bytes: int = 4096, offsets_retention_check_interval_ms: int = 600000,
                 consumer_session_timeout_ms: int = 45000, consumer_heartbeat_interval_ms: int = 5000,
                 consumer_default_assignor: str = "uniform", new_uuid: Callable[[], str] | None = None):
        self.num_partitions = num_partitions
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.max_group_size = max_group_size
        self.offsets_retention_ms = offsets_retention_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self.consumer_session_timeout_ms = consumer_session_timeout_ms
        self.consumer_heartbeat_interval_ms = consumer_heartbeat_interval_ms
        self.consumer_default_assignor = consumer_default_assignor
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups (group.protocol=consumer); they share the group id namespace and offsets with classic ones
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # TxnOffsetCommit: producer id -> group -> (topic, partition) -> offset, until its marker arrives
        self.pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        self._timers = _Timers()
        self._unloaded: set[int] = set()
        self._started = False

    # ------------------------------------------------------------------------------------------ helpers

    def partition_for(self, group_id: str) -> int:
        h = java_string_hash(group_id)
        return (0 if h == -(1 << 31) else abs(h)) % self.num_partitions

    @property
    def unloaded_partitions(self) -> frozenset[int]:
        return frozenset(self._unloaded)

    def _owns(self, group_id: str) -> bool:
        return self.partition_for(group_id) not in self._unloaded

    def _start(self, now_ms: int) -> None:
        if not self._started:
            self._started = True
            self._schedule_offset_expiry(now_ms)

    def _schedule_offset_expiry(self, now_ms: int) -> None:
        self._timers.schedule(("expire",), now_ms + self.offsets_retention_check_interval_ms,
                              self._cleanup_group_metadata)

    def _append(self, out: list, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        if records:
            out.append(Append(self.partition_for(group_id), records))

    def _group_metadata_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
        members = tuple(rec.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name), assignment=assignment.get(m.member_id, b""),
        ) for m in group.members.values())
        ts = group.current_state_timestamp
        return rec.group_metadata_record(group.group_id, rec.GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
            leader=group.leader_id, current_state_timestamp=-1 if ts is None else ts, members=members))

    def _empty_group_metadata_record(self, group: ClassicGroup) -> tuple[bytes, bytes]:
        ts = group.current_state_timestamp
        return rec.group_metadata_record(group.group_id, rec.GroupMetadataValue(
            protocol_type="", generation=0, protocol=None, leader=None,
            current_state_timestamp=-1 if ts is None else ts))

    def _reply_join(self, out: list, group: ClassicGroup, member: ClassicGroupMember, error: ErrorCode,
                    **fields) -> bool:
        parked = group.take_join(member)
        if parked is None:
            return False
        out.append(Reply(parked.token, _join_response(parked.version, error, **fields)))
        return True

    def _reply_sync(self, out: list, member: ClassicGroupMember, response: dict) -> bool:
        parked = ClassicGroup.take_sync(member)
        if parked is None:
            return False
        out.append(Reply(parked.token, response))
        return True

    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, now_ms: int, timeout_ms: int) -> None:
        gid = group.group_id
        self._timers.schedule(("hb", gid, member_id), now_ms + timeout_ms,
                              lambda now, out: self._expire_heartbeat(gid, member_id, now, out))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int) -> None:
        self._schedule_heartbeat(group, member.member_id, now_ms, member.session_timeout_ms)

    # ------------------------------------------------------------------------------------------ join

    def join_group(self, now_ms: int, version: int, request: dict, token: object, *, client_id: str = "",
                   client_host: str = "") -> list[Reply | Append]:
        self._start(now_ms)
        out: list = []
        member_id = request["member_id"]
        group_id = request["group_id"]

        def fail(error: ErrorCode) -> list:
            return [Reply(token, _join_response(version, error, member_id=member_id))]

        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        if not self._owns(group_id):
            return fail(E.NOT_COORDINATOR)
        session_timeout = request["session_timeout_ms"]
        if not self.min_session_timeout_ms <= session_timeout <= self.max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)

        unknown_member = member_id == ""
        group = self.groups.get(group_id)
        is_new_group = group is None
        if group is None:
            if not unknown_member:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = ClassicGroup(group_id, now_ms)

        parked = Parked(token, version)
        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                self._timers.cancel(("hb", group_id, member_id))
            out.append(Reply(token, _join_response(version, E.GROUP_MAX_SIZE_REACHED)))
        elif unknown_member:
            self._join_new_member(now_ms, group, request, parked, client_id, client_host, out)
        else:
            self._join_existing_member(now_ms, group, request, parked, client_id, client_host, out)
        if is_new_group and not any(isinstance(a, Append) for a in out):
            out.insert(0, Append(self.partition_for(group_id), [self._empty_group_metadata_record(group)]))
        return out

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.state == GroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or \
                group.num_awaiting_join < self.max_group_size
        return member_id in group.members or len(group.members) < self.max_group_size

    @staticmethod
    def _protocols(request: dict) -> list[tuple[str, bytes]]:
        return [(p["name"], bytes(p["metadata"])) for p in request["protocols"]]

    @staticmethod
    def _rebalance_timeout(request: dict) -> int:
        timeout = request.get("rebalance_timeout_ms", -1)
        return request["session_timeout_ms"] if timeout == -1 else timeout

    def _join_new_member(self, now_ms: int, group: ClassicGroup, request: dict, parked: Parked, client_id: str,
                         client_host: str, out: list) -> None:
        version = parked.version
        if group.state == GroupState.DEAD:
            out.append(Reply(parked.token, _join_response(version, E.COORDINATOR_NOT_AVAILABLE)))
            return
        if not group.supports_protocols(request["protocol_type"], self._protocols(request)):
            out.append(Reply(parked.token, _join_response(version, E.INCONSISTENT_GROUP_PROTOCOL)))
            return
        instance_id = request.get("group_instance_id")
        new_member_id = f"{instance_id if instance_id is not None else client_id}-{self._new_uuid()}"
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                self._update_static_member(now_ms, group, request, existing, new_member_id, parked, out)
            else:
                self._add_member(now_ms, group, request, new_member_id, parked, client_id, client_host, out)
        elif version >= 4:  # KIP-394: the member must come back with the id it is given
            group.add_pending_member(new_member_id)
            self._schedule_heartbeat(group, new_member_id, now_ms, request["session_timeout_ms"])
            out.append(Reply(parked.token, _join_response(version, E.MEMBER_ID_REQUIRED, member_id=new_member_id)))
        else:
            self._add_member(now_ms, group, request, new_member_id, parked, client_id, client_host, out)

    def _join_existing_member(self, now_ms: int, group: ClassicGroup, request: dict, parked: Parked,
                              client_id: str, client_host: str, out: list) -> None:
        version = parked.version
        member_id = request["member_id"]
        instance_id = request.get("group_instance_id")

        def answer(error: ErrorCode, **fields) -> None:
            out.append(Reply(parked.token, _join_response(version, error, member_id=member_id, **fields)))

        if group.state == GroupState.DEAD:
            return answer(E.COORDINATOR_NOT_AVAILABLE)
        protocols = self._protocols(request)
        if not group.supports_protocols(request["protocol_type"], protocols):
            return answer(E.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_join_members:
            if instance_id is not None:  # Kafka: IllegalStateException (a pending member is never static)
                return answer(E.UNKNOWN_SERVER_ERROR)
            return self._add_member(now_ms, group, request, member_id, parked, client_id, client_host, out)
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return answer(E[error])
        member = group.members[member_id]
        current = {"generation_id": group.generation_id, "protocol_type": group.protocol_type,
                   "protocol_name": group.protocol_name, "leader": group.leader_id}
        if group.state == GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(now_ms, group, member, request, parked, out)
        elif group.state == GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retry of a JoinGroup whose response was lost: answer with the current generation.
                answer(E.NONE, members=group.current_members() if group.is_leader(member_id) else [], **current)
            else:
                self._update_member_and_rebalance(now_ms, group, member, request, parked, out)
        elif group.state == GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining forces a rebalance (e.g. new topic metadata); so do changed protocols.
                self._update_member_and_rebalance(now_ms, group, member, request, parked, out)
            else:
                answer(E.NONE, **current)
        else:  # Empty: the member is not known any more
            answer(E.UNKNOWN_MEMBER_ID)

    def _add_member(self, now_ms: int, group: ClassicGroup, request: dict, member_id: str, parked: Parked,
                    client_id: str, client_host: str, out: list) -> None:
        member = ClassicGroupMember(member_id, request.get("group_instance_id"), client_id, client_host,
                                    self._rebalance_timeout(request), request["session_timeout_ms"],
                                    request["protocol_type"], self._protocols(request))
        member.is_new = True
        if group.state == GroupState.PREPARING_REBALANCE and group.previous_state == GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, parked)
        # A new member cannot heartbeat while its JoinGroup is parked: its join times out instead.
        self._schedule_heartbeat(group, member_id, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(now_ms, group, out)

    def _update_member_and_rebalance(self, now_ms: int, group: ClassicGroup, member: ClassicGroupMember,
                                     request: dict, parked: Parked, out: list) -> None:
        if member.awaiting_join is not None:
            self._reply_join(out, group, member, E.REBALANCE_IN_PROGRESS, member_id=member.member_id)
        group.update_member(member, self._protocols(request), self._rebalance_timeout(request),
                            request["session_timeout_ms"], parked)
        self._maybe_prepare_rebalance_or_complete_join(now_ms, group, out)

    def _update_static_member(self, now_ms: int, group: ClassicGroup, request: dict, old_member_id: str,
                              new_member_id: str, parked: Parked, out: list) -> None:
        """KIP-345: a static member rejoining with an unknown member id takes over its instance id."""
        current_leader = group.leader_id
        old, new = group.replace_static_member(request["group_instance_id"], old_member_id, new_member_id)
        fenced_join = old.awaiting_join
        old.awaiting_join = None
        if fenced_join is not None:
            out.append(Reply(fenced_join.token, _join_response(
                fenced_join.version, E.FENCED_INSTANCE_ID, member_id=old_member_id)))
        self._reply_sync(out, old, _sync_response(E.FENCED_INSTANCE_ID))
        self._timers.cancel(("hb", group.group_id, old_member_id))
        self._reschedule_heartbeat(group, new, now_ms)
        group.update_member(new, self._protocols(request), self._rebalance_timeout(request),
                            request["session_timeout_ms"], parked)
        if group.state == GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance; persist the new member id, then answer.
                self._append(out, group.group_id, [self._group_metadata_record(
                    group, {m.member_id: m.assignment for m in group.members.values()})])
                current = {"generation_id": group.generation_id, "protocol_type": group.protocol_type,
                           "protocol_name": group.protocol_name}
                if parked.version >= 9:
                    is_leader = group.is_leader(new_member_id)
                    self._reply_join(out, group, new, E.NONE, member_id=new_member_id, leader=group.leader_id,
                                     members=group.current_members() if is_leader else [],
                                     skip_assignment=is_leader, **current)
                else:
                    # The old leader id is returned so a restarted static leader does not reassign.
                    self._reply_join(out, group, new, E.NONE, member_id=new_member_id, leader=current_leader,
                                     **current)
            else:
                self._maybe_prepare_rebalance_or_complete_join(now_ms, group, out)
        elif group.state == GroupState.COMPLETING_REBALANCE:
            # The leader may already have been given the old member id: rebalance so assignments match.
            self._prepare_rebalance(now_ms, group, out)
        else:
            self._maybe_complete_join_phase(now_ms, group, out)

    # ------------------------------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance_or_complete_join(self, now_ms: int, group: ClassicGroup, out: list) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(now_ms, group, out)
        else:
            self._maybe_complete_join_phase(now_ms, group, out)

    def _maybe_complete_join_phase(self, now_ms: int, group: ClassicGroup, out: list) -> None:
        if (group.state == GroupState.PREPARING_REBALANCE and group.previous_state != GroupState.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(now_ms, group, out)

    def _prepare_rebalance(self, now_ms: int, group: ClassicGroup, out: list) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(now_ms, group, E.REBALANCE_IN_PROGRESS, out)
        group.pending_sync_members.clear()
        gid = group.group_id
        self._timers.cancel(("sync", gid))
        initial = group.state == GroupState.EMPTY
        if initial:
            # A new group waits for more members: the delay restarts while members keep joining, up to
            # the rebalance timeout (Kafka's initial delayed join).
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._timers.schedule(("join", gid), now_ms + delay,
                                  lambda now, out: self._try_complete_initial_rebalance(gid, delay, remaining,
                                                                                        now, out))
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        if not initial:
            self._maybe_complete_join_else_schedule(now_ms, group, out)

    def _maybe_complete_join_else_schedule(self, now_ms: int, group: ClassicGroup, out: list) -> None:
        if group.has_all_members_joined():
            self._complete_join(now_ms, group, out)
        else:
            gid = group.group_id
            self._timers.schedule(("join", gid), now_ms + group.rebalance_timeout_ms(),
                                  lambda now, out: self._complete_join_by_id(gid, now, out))

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int, now_ms: int,
                                        out: list) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self._timers.schedule(
                ("join", group_id), now_ms + new_delay,
                lambda now, out: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining, now, out))
        else:
            self._complete_join(now_ms, group, out)

    def _complete_join_by_id(self, group_id: str, now_ms: int, out: list) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(now_ms, group, out)

    def _complete_join(self, now_ms: int, group: ClassicGroup, out: list) -> None:
        gid = group.group_id
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        self._timers.cancel(("join", gid))
        # Dynamic members that did not rejoin in time leave; static ones stay until their session expires.
        for member in [m for m in group.members.values() if m.awaiting_join is None and m.group_instance_id is None]:
            self._remove_member(group, member, out)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # No member rejoined: wait another rebalance timeout for session expiry to clear them out.
            self._timers.schedule(("join", gid), now_ms + group.rebalance_timeout_ms(),
                                  lambda now, out: self._complete_join_by_id(gid, now, out))
            return
        group.init_next_generation(now_ms)
        if group.state == GroupState.EMPTY:
            self._append(out, gid, [self._group_metadata_record(group, {})])
            return
        for member in group.members.values():
            self._reply_join(out, group, member, E.NONE, member_id=member.member_id,
                             generation_id=group.generation_id, protocol_type=group.protocol_type,
                             protocol_name=group.protocol_name, leader=group.leader_id,
                             members=group.current_members() if group.is_leader(member.member_id) else [])
            self._reschedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self._timers.schedule(("sync", gid), now_ms + group.rebalance_timeout_ms(),
                              lambda now, out: self._expire_pending_sync(gid, generation, now, out))

    def _expire_pending_sync(self, group_id: str, generation: int, now_ms: int, out: list) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                member = group.members.get(member_id)
                if member is not None:
                    self._remove_member(group, member, out)
                else:
                    group.remove(member_id)
            self._prepare_rebalance(now_ms, group, out)

    def _reset_and_propagate_assignment(self, now_ms: int, group: ClassicGroup, error: ErrorCode,
                                        out: list) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(now_ms, group, error, out)

    def _propagate_assignment(self, now_ms: int, group: ClassicGroup, error: ErrorCode, out: list) -> None:
        ok = error == E.NONE
        for member in group.members.values():
            response = _sync_response(error, group.protocol_type if ok else None,
                                      group.protocol_name if ok else None, member.assignment)
            if self._reply_sync(out, member, response):
                self._reschedule_heartbeat(group, member, now_ms)

    def _remove_member(self, group: ClassicGroup, member: ClassicGroupMember, out: list) -> None:
        """Drop a member; a parked JoinGroup (and SyncGroup) of it is answered UNKNOWN_MEMBER_ID."""
        self._timers.cancel(("hb", group.group_id, member.member_id))
        self._reply_join(out, group, member, E.UNKNOWN_MEMBER_ID)
        self._reply_sync(out, member, _sync_response(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)

    def _expire_heartbeat(self, group_id: str, member_id: str, now_ms: int, out: list) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return
        if member_id in group.pending_join_members:
            group.remove(member_id)
            if group.state == GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(now_ms, group, out)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._remove_member(group, member, out)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(now_ms, group, out)
        elif group.state == GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(now_ms, group, out)

    # ------------------------------------------------------------------------------------------ sync

    def sync_group(self, now_ms: int, version: int, request: dict, token: object) -> list[Reply | Append]:
        self._start(now_ms)
        group_id = request["group_id"]
        if not group_id:
            return [Reply(token, _sync_response(E.INVALID_GROUP_ID))]
        if not self._owns(group_id):
            return [Reply(token, _sync_response(E.NOT_COORDINATOR))]
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.EMPTY:
            return [Reply(token, _sync_response(E.UNKNOWN_MEMBER_ID))]
        member_id = request["member_id"]
        error = self._validate_sync(group, request)
        if error is not None:
            return [Reply(token, _sync_response(error))]
        if group.state == GroupState.PREPARING_REBALANCE:
            return [Reply(token, _sync_response(E.REBALANCE_IN_PROGRESS))]
        out: list = []
        member = group.members[member_id]
        if group.state == GroupState.COMPLETING_REBALANCE:
            self._reply_sync(out, member, _sync_response(E.REBALANCE_IN_PROGRESS))  # a superseded SyncGroup
            member.awaiting_sync = Parked(token, version)
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {a["member_id"]: bytes(a["assignment"]) for a in request["assignments"]}
                for mid in group.members:
                    assignment.setdefault(mid, b"")
                self._append(out, group_id, [self._group_metadata_record(group, assignment)])
                for m in group.members.values():
                    m.assignment = assignment[m.member_id]
                self._propagate_assignment(now_ms, group, E.NONE, out)
                group.transition_to(GroupState.STABLE, now_ms)
            return out
        # Stable: the assignment of this generation is already known.
        self._remove_pending_sync_member(group, member_id)
        return [Reply(token, _sync_response(E.NONE, group.protocol_type, group.protocol_name, member.assignment))]

    @staticmethod
    def _validate_sync(group: ClassicGroup, request: dict) -> ErrorCode | None:
        if group.state == GroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(request["member_id"], request.get("group_instance_id"))
        if error is not None:
            return E[error]
        if request["generation_id"] != group.generation_id:
            return E.ILLEGAL_GENERATION
        for asked, actual in ((request.get("protocol_type"), group.protocol_type),
                              (request.get("protocol_name"), group.protocol_name)):
            if asked is not None and actual is not None and asked != actual:
                return E.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE) or \
                not group.pending_sync_members:
            self._timers.cancel(("sync", group.group_id))

    # ------------------------------------------------------------------------------------------ heartbeat

    def heartbeat(self, now_ms: int, version: int, request: dict) -> dict:
        self._start(now_ms)

        def answer(error: ErrorCode) -> dict:
            return {"throttle_time_ms": 0, "error_code": int(error)}

        group_id = request["group_id"]
        if not group_id:
            return answer(E.INVALID_GROUP_ID)
        if not self._owns(group_id):
            return answer(E.NOT_COORDINATOR)
        group = self.groups.get(group_id)
        if group is None:
            return answer(E.UNKNOWN_MEMBER_ID)
        if group.state == GroupState.DEAD:
            return answer(E.COORDINATOR_NOT_AVAILABLE)
        error = group.validate_member(request["member_id"], request.get("group_instance_id"))
        if error is not None:
            return answer(E[error])
        if request["generation_id"] != group.generation_id:
            return answer(E.ILLEGAL_GENERATION)
        if group.state == GroupState.EMPTY:
            return answer(E.UNKNOWN_MEMBER_ID)
        self._reschedule_heartbeat(group, group.members[request["member_id"]], now_ms)
        if group.state == GroupState.PREPARING_REBALANCE:
            return answer(E.REBALANCE_IN_PROGRESS)
        return answer(E.NONE)

    # ------------------------------------------------------------------------------------------ leave

    def leave_group(self, now_ms: int, version: int, request: dict) -> tuple[dict, list[Reply | Append]]:
        self._start(now_ms)
        if version >= 3:
            identities = request["members"]
        else:
            identities = [{"member_id": request["member_id"], "group_instance_id": None}]

        def answer(error: ErrorCode, members: list[dict] | None = None) -> dict:
            members = members or []
            if version < 3 and error == E.NONE:  # v0-2 carry the member's error at the top level
                error = next((E(m["error_code"]) for m in members if m["error_code"]), E.NONE)
            return {"throttle_time_ms": 0, "error_code": int(error), "members": members}

        group_id = request["group_id"]
        if not group_id:
            return answer(E.INVALID_GROUP_ID), []
        if not self._owns(group_id):
            return answer(E.NOT_COORDINATOR), []
        group = self.groups.get(group_id)
        if group is None:
            return answer(E.UNKNOWN_MEMBER_ID), []
        if group.state == GroupState.DEAD:
            return answer(E.COORDINATOR_NOT_AVAILABLE), []
        out: list = []
        responses = []
        for identity in identities:
            member_id = identity["member_id"]
            instance_id = identity.get("group_instance_id")
            error = E.NONE
            if member_id == "":
                # Administrative removal of a static member by its instance id.
                existing = group.static_members.get(instance_id) if instance_id is not None else None
                if existing is None:
                    error = E.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member(group, group.members[existing], out)
            elif member_id in group.pending_join_members:
                group.remove(member_id)
                self._timers.cancel(("hb", group_id, member_id))
            else:
                name = group.validate_member(member_id, instance_id)
                if name is not None:
                    error = E[name]
                else:
                    self._remove_member(group, group.members[member_id], out)
            responses.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": int(error)})
        if any(r["error_code"] == 0 for r in responses):
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(now_ms, group, out)
            elif group.state == GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(now_ms, group, out)
        return answer(E.NONE, responses), out

    # ------------------------------------------------------------------------------------------ offsets

    def offset_commit(self, now_ms: int, version: int, request: dict) -> tuple[dict, list[Append]]:
        self._start(now_ms)
        group_id = request["group_id"]

        def answer(error: ErrorCode) -> dict:
            return commit_response(request, lambda topic, index: error)

        if group_id is None:
            return answer(E.INVALID_GROUP_ID), []
        if not self._owns(group_id):
            return answer(E.NOT_COORDINATOR), []
        generation = request.get("generation_id_or_member_epoch", -1)
        member_id = request.get("member_id", "")
        instance_id = request.get("group_instance_id")
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = self._validate_consumer_group_commit(consumer_group, version, member_id, generation)
            if error is not None:
                return answer(error), []
        else:
            group = self.groups.get(group_id)
            if group is None:
                if generation >= 0:
                    error = E.GROUP_ID_NOT_FOUND if version >= 9 else E.ILLEGAL_GENERATION
                    return answer(error), []
                group = self.groups[group_id] = ClassicGroup(group_id, now_ms)  # a "simple" group: offsets only
            error = self._validate_offset_commit(group, member_id, instance_id, generation)
            if error is not None:
                return answer(error), []
            if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                self._reschedule_heartbeat(group, group.members[member_id], now_ms)
        retention = request.get("retention_time_ms", OFFSET_COMMIT_DEFAULT_RETENTION)
        expire = -1 if retention == OFFSET_COMMIT_DEFAULT_RETENTION else now_ms + retention
        records, errors = self._offset_records(request, group_id, now_ms, expire, lambda topic, index, value:
                                               self._put_offset(group_id, topic, index, value))
        response = commit_response(request, lambda topic, index: errors.get((topic, index), E.NONE))
        out: list = []
        self._append(out, group_id, records)
        return response, out

    def txn_offset_commit(self, now_ms: int, version: int, request: dict) -> tuple[dict, list[Append]]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and take effect when its
        commit marker reaches the group's partition (an abort drops them)."""
        self._start(now_ms)
        group_id = request["group_id"]

        def answer(error: ErrorCode) -> dict:
            return commit_response(request, lambda topic, index: error)

        if not group_id:
            return answer(E.INVALID_GROUP_ID), []
        if not self._owns(group_id):
            return answer(E.NOT_COORDINATOR), []
        generation = request.get("generation_id", -1)
        member_id = request.get("member_id", "")
        instance_id = request.get("group_instance_id")
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_commit(member_id, generation, transactional=True)
            if error != E.NONE:
                return answer(error), []
        else:
            group = self.groups.get(group_id)
            if group is None:
                if generation >= 0:
                    return answer(E.ILLEGAL_GENERATION), []
                group = self.groups[group_id] = ClassicGroup(group_id, now_ms)
            error = self._validate_offset_commit(group, member_id, instance_id, generation)
            if error is not None and error != E.REBALANCE_IN_PROGRESS:  # Kafka lets a transaction commit then
                return answer(error), []
        producer_id = request["producer_id"]
        pending = self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {})
        replaced: dict[tuple[str, int], OffsetAndMetadata | None] = {}

        def keep_pending(topic: str, index: int, value: OffsetAndMetadata) -> None:
            replaced.setdefault((topic, index), pending.get((topic, index)))
            pending[(topic, index)] = value

        def undo() -> None:
            # A zombie's commit refused by the log must not ride on the next commit marker of its producer id.
            groups = self.pending_txn_offsets.get(producer_id, {})
            offsets = groups.get(group_id, {})
            for key, previous in replaced.items():
                if previous is None:
                    offsets.pop(key, None)
                else:
                    offsets[key] = previous
            if not offsets:
                groups.pop(group_id, None)
            if not groups:
                self.pending_txn_offsets.pop(producer_id, None)

        records, errors = self._offset_records(request, group_id, now_ms, -1, keep_pending)
        response = commit_response(request, lambda topic, index: errors.get((topic, index), E.NONE))
        out: list = []
        if records:
            out.append(Append(self.partition_for(group_id), records, (producer_id, request["producer_epoch"]), undo))
        return response, out

    def _offset_records(self, request: dict, group_id: str, now_ms: int, expire: int, keep) -> tuple[list, dict]:
        """The records of a commit's offsets, each offset handed to `keep(topic, index, value)`; and the
        partitions refused (metadata too large)."""
        records = []
        errors: dict[tuple[str, int], ErrorCode] = {}
        for topic in request["topics"]:
            for p in topic["partitions"]:
                metadata = p.get("committed_metadata")
                if metadata is not None and _java_length(metadata) > self.offset_metadata_max_bytes:
                    errors[(topic["name"], p["partition_index"])] = E.OFFSET_METADATA_TOO_LARGE
                    continue
                value = OffsetAndMetadata(p["committed_offset"], p.get("committed_leader_epoch", -1),
                                          metadata or "", now_ms, expire)
                keep(topic["name"], p["partition_index"], value)
                records.append(rec.offset_commit_record(group_id, topic["name"], p["partition_index"],
                                                        self._offset_value(value)))
        return records, errors

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker reached `partition` of `__consumer_offsets`: its groups' offsets of this
        producer's transaction become committed offsets, or are dropped."""
        groups = self.pending_txn_offsets.get(producer_id)
        if not groups:
            return
        for group_id in [g for g in groups if self.partition_for(g) == partition]:
            offsets = groups.pop(group_id)
            if commit:
                for (topic, index), value in offsets.items():
                    self._put_offset(group_id, topic, index, value)
        if not groups:
            del self.pending_txn_offsets[producer_id]

    def restore_pending_offsets(self, producer_id: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Loading: offset commits of a transaction whose marker is not in the log yet stay pending."""
        for key, value in records:
            record = rec.decode_record(key, value)
            if isinstance(record, rec.OffsetCommitRecord) and record.value is not None:
                k, v = record.key, record.value
                self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(k.group, {})[(k.topic, k.partition)] = (
                    OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp))

    def _has_pending_offset(self, group_id: str, topic: str, index: int) -> bool:
        return any((topic, index) in groups.get(group_id, ()) for groups in self.pending_txn_offsets.values())

    @staticmethod
    def _offset_value(o: OffsetAndMetadata) -> rec.OffsetCommitValue:
        return rec.OffsetCommitValue(offset=o.offset, metadata=o.metadata, commit_timestamp=o.commit_timestamp,
                                     leader_epoch=o.leader_epoch, expire_timestamp=o.expire_timestamp)

    @staticmethod
    def _validate_consumer_group_commit(group: ConsumerGroup, version: int, member_id: str,
                                        member_epoch: int) -> ErrorCode | None:
        if member_epoch < 0 and not member_id:
            return None if group.is_empty() else E.UNKNOWN_MEMBER_ID  # an admin or simple commit
        if version < 9:
            return E.UNSUPPORTED_VERSION  # members of KIP-848 groups commit with member epochs (v9+)
        error = group.validate_offset_commit(member_id, member_epoch)
        return None if error == E.NONE else error

    @staticmethod
    def _validate_offset_commit(group: ClassicGroup, member_id: str, instance_id: str | None,
                                generation: int) -> ErrorCode | None:
        if group.state == GroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state == GroupState.EMPTY:
            return None  # a commit from outside the group protocol (e.g. a simple consumer or an admin)
        if generation >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not None:
                return E[error]
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif group.state != GroupState.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if group.state == GroupState.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return None

    def _put_offset(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = value

    def _remove_offset(self, group_id: str, topic: str, partition: int) -> bool:
        topics = self.offsets.get(group_id)
        if topics is None or partition not in topics.get(topic, {}):
            return False
        del topics[topic][partition]
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self.offsets[group_id]
        return True

    def offset_fetch(self, now_ms: int, version: int, request: dict) -> dict:
        self._start(now_ms)
        if version >= 8:
            return {"throttle_time_ms": 0, "groups": [self._fetch_group(g["group_id"], g.get("topics"),
                                                                        request.get("require_stable", False))
                                                      for g in request["groups"]]}
        result = self._fetch_group(request["group_id"], request.get("topics"), request.get("require_stable", False))
        error = result["error_code"]
        if version < 2 and error:
            for t in result["topics"]:
                for p in t["partitions"]:
                    p["error_code"] = error
        return {"throttle_time_ms": 0, "topics": result["topics"], "error_code": error}

    def _fetch_group(self, group_id: str | None, topics: list[dict] | None, require_stable: bool = False) -> dict:
        if group_id is None:
            return {"group_id": group_id, "topics": [], "error_code": int(E.INVALID_GROUP_ID)}
        if not self._owns(group_id):
            return {"group_id": group_id, "topics": [], "error_code": int(E.NOT_COORDINATOR)}
        group = self.groups.get(group_id)
        live = group_id in self.consumer_groups or (group is not None and group.state != GroupState.DEAD)
        offsets = self.offsets.get(group_id, {}) if live else {}

        def partition(index: int, o: OffsetAndMetadata | None, topic: str) -> dict:
            if require_stable and self._has_pending_offset(group_id, topic, index):
                return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                        "metadata": "", "error_code": int(E.UNSTABLE_OFFSET_COMMIT)}
            if o is None:
                return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                        "metadata": "", "error_code": 0}
            return {"partition_index": index, "committed_offset": o.offset, "committed_leader_epoch": o.leader_epoch,
                    "metadata": o.metadata, "error_code": 0}

        if topics is None:
            result = [{"name": name, "partitions": [partition(i, o, name) for i, o in parts.items()]}
                      for name, parts in offsets.items()]
        else:
            result = [{"name": t["name"], "partitions": [partition(i, offsets.get(t["name"], {}).get(i), t["name"])
                                                         for i in t["partition_indexes"]]} for t in topics]
        return {"group_id": group_id, "topics": result, "error_code": 0}

    def offset_delete(self, now_ms: int, version: int, request: dict) -> tuple[dict, list[Append]]:
        self._start(now_ms)
        group_id = request["group_id"]

        def fail(error: ErrorCode) -> tuple[dict, list]:
            return {"error_code": int(error), "throttle_time_ms": 0, "topics": []}, []

        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        if not self._owns(group_id):
            return fail(E.NOT_COORDINATOR)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:  # KIP-848: offsets of topics no member subscribes to may go
            subscribed_topics = consumer_group.subscribed_topics()
        else:
            group = self.groups.get(group_id)
            if group is None or group.state == GroupState.DEAD:
                return fail(E.GROUP_ID_NOT_FOUND)
            if group.state != GroupState.EMPTY and not group.uses_consumer_protocol():
                return fail(E.NON_EMPTY_GROUP)
            subscribed_topics = {name for name in (t["name"] for t in request["topics"])
                                 if group.is_subscribed_to_topic(name)}
        records = []
        topics = []
        for topic in request["topics"]:
            name = topic["name"]
            subscribed = name in subscribed_topics
            parts = []
            for p in topic["partitions"]:
                index = p["partition_index"]
                if subscribed:
                    parts.append({"partition_index": index, "error_code": int(E.GROUP_SUBSCRIBED_TO_TOPIC)})
                    continue
                parts.append({"partition_index": index, "error_code": 0})
                if self._remove_offset(group_id, name, index):
                    records.append(rec.offset_commit_tombstone(group_id, name, index))
            topics.append({"name": name, "partitions": parts})
        out: list = []
        self._append(out, group_id, records)
        return {"error_code": 0, "throttle_time_ms": 0, "topics": topics}, out

    # ------------------------------------------------------------------------------------------ admin

    def list_groups(self, now_ms: int, version: int, request: dict) -> dict:
        self._start(now_ms)
        states = {s.strip().lower() for s in request.get("states_filter") or []}
        types = {t.strip().lower() for t in request.get("types_filter") or []}
        groups = []
        for group in self.groups.values():
            if not self._owns(group.group_id):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            groups.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                           "group_state": group.state.value, "group_type": "classic"})
        for group_id, consumer_group in self.consumer_groups.items():
            if not self._owns(group_id):
                continue
            if (states and consumer_group.state.lower() not in states) or (types and "consumer" not in types):
                continue
            groups.append({"group_id": group_id, "protocol_type": "consumer", "group_state": consumer_group.state,
                           "group_type": "consumer"})
        return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}

    def describe_groups(self, now_ms: int, version: int, request: dict) -> dict:
        self._start(now_ms)
        described = []
        operations = ALL_GROUP_OPERATIONS if request.get("include_authorized_operations") else -(2 ** 31)
        for group_id in request["groups"]:
            entry = {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": "",
                     "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": operations}
            group = self.groups.get(group_id)
            if not self._owns(group_id):
                entry["error_code"] = int(E.NOT_COORDINATOR)
            elif group is None:
                entry["group_state"] = GroupState.DEAD.value
                if version >= 6:  # KIP-1043
                    entry["error_code"] = int(E.GROUP_ID_NOT_FOUND)
                    entry["error_message"] = f"Group {group_id} not found."
            else:
                stable = group.state == GroupState.STABLE
                entry["group_state"] = group.state.value
                entry["protocol_type"] = group.protocol_type or ""
                entry["protocol_data"] = (group.protocol_name or "") if stable else ""
                entry["members"] = [{
                    "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment,
                } for m in group.members.values()]
            described.append(entry)
        return {"throttle_time_ms": 0, "groups": described}

    def delete_groups(self, now_ms: int, version: int, request: dict) -> tuple[dict, list[Append]]:
        self._start(now_ms)
        results = []
        out: list = []
        for group_id in request["groups_names"]:
            error = E.NONE
            group = self.groups.get(group_id)
            consumer_group = self.consumer_groups.get(group_id)
            if not self._owns(group_id):
                error = E.NOT_COORDINATOR
            elif consumer_group is not None:
                if not consumer_group.is_empty():
                    error = E.NON_EMPTY_GROUP
                else:
                    records = [rec.offset_commit_tombstone(group_id, topic, partition)
                               for topic, parts in self.offsets.pop(group_id, {}).items() for partition in parts]
                    self._append(out, group_id, records + consumer_group.tombstones())
                    del self.consumer_groups[group_id]
            elif group is None or group.state == GroupState.DEAD:
                error = E.GROUP_ID_NOT_FOUND
            elif group.state != GroupState.EMPTY:
                error = E.NON_EMPTY_GROUP
            else:
                self._append(out, group_id, self._delete_group(group))
            results.append({"group_id": group_id, "error_code": int(error)})
        return {"throttle_time_ms": 0, "results": results}, out

    def _delete_group(self, group: ClassicGroup) -> list[tuple[bytes, None]]:
        """Tombstones for every offset and the group metadata; the group is gone at once."""
        gid = group.group_id
        records: list[tuple[bytes, None]] = [rec.offset_commit_tombstone(gid, topic, partition)
                                             for topic, parts in self.offsets.pop(gid, {}).items() for partition in parts]
        records.append(rec.group_metadata_tombstone(gid))
        self._drop_group(group)
        return records

    def _drop_group(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.groups.pop(gid, None)
        self._timers.cancel_where(lambda key: len(key) > 1 and key[1] == gid)

    # ------------------------------------------------------------------------------------------ expiry

    def _cleanup_group_metadata(self, now_ms: int, out: list) -> None:
        by_partition: dict[int, list] = {}
        for group_id, group in list(self.groups.items()):
            records: list = []
            all_expired = self._cleanup_expired_offsets(group, now_ms, records)
            if all_expired and group.state == GroupState.EMPTY:
                records.extend(self._delete_group(group))
            if records:
                by_partition.setdefault(self.partition_for(group_id), []).extend(records)
        for group_id, consumer_group in list(self.consumer_groups.items()):
            records = self._expire_consumer_group_offsets(group_id, consumer_group, now_ms)
            if consumer_group.is_empty() and not self.offsets.get(group_id):
                records += consumer_group.tombstones()
                del self.consumer_groups[group_id]
            if records:
                by_partition.setdefault(self.partition_for(group_id), []).extend(records)
        for partition, records in by_partition.items():
            out.append(Append(partition, records))
        self._schedule_offset_expiry(now_ms)

    def _expire_consumer_group_offsets(self, group_id: str, group: ConsumerGroup, now_ms: int) -> list:
        """A KIP-848 group's offsets of topics it does not subscribe to expire retention after their commit."""
        records: list = []
        subscribed = group.subscribed_topics()
        for topic, parts in list(self.offsets.get(group_id, {}).items()):
            if topic in subscribed:
                continue
            for partition, o in list(parts.items()):
                expired = now_ms >= o.expire_timestamp if o.expire_timestamp != -1 \
                    else now_ms - o.commit_timestamp >= self.offsets_retention_ms
                if expired:
                    self._remove_offset(group_id, topic, partition)
                    records.append(rec.offset_commit_tombstone(group_id, topic, partition))
        return records

    def _cleanup_expired_offsets(self, group: ClassicGroup, now_ms: int, records: list) -> bool:
        """Tombstone the group's expired offsets; True if it has none left (Kafka's cleanupExpiredOffsets)."""
        gid = group.group_id
        topics = self.offsets.get(gid)
        if not topics:
            return True
        if group.protocol_type is not None:
            if group.state == GroupState.EMPTY:
                # KIP-211: an empty group's offsets expire retention after the group became empty.
                def base(o: OffsetAndMetadata) -> int:
                    ts = group.current_state_timestamp
                    return o.commit_timestamp if ts is None else ts
            elif group.uses_consumer_protocol() and group.subscribed_topics is not None \
                    and group.state == GroupState.STABLE:
                # KIP-496: offsets of topics nobody subscribes to any more expire from their commit.
                def base(o: OffsetAndMetadata) -> int:
                    return o.commit_timestamp
            else:
                return False
        else:
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
        all_expired = True
        for topic, parts in list(topics.items()):
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for partition, o in list(parts.items()):
                expired = now_ms >= o.expire_timestamp if o.expire_timestamp != -1 \
                    else now_ms - base(o) >= self.offsets_retention_ms
                if expired:
                    self._remove_offset(gid, topic, partition)
                    records.append(rec.offset_commit_tombstone(gid, topic, partition))
                else:
                    all_expired = False
        return all_expired

    # ------------------------------------------------------------------------------------------ timers

    def tick(self, now_ms: int) -> list[Reply | Append]:
        self._start(now_ms)
        out: list = []
        while (callback := self._timers.pop_due(now_ms)) is not None:
            callback(now_ms, out)
        for group_id, consumer_group in list(self.consumer_groups.items()):
            deadline = consumer_group.next_deadline()
            if deadline is not None and deadline <= now_ms:
                self._append(out, group_id, consumer_group.tick(now_ms))
        return out

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (g.next_deadline() for g in self.consumer_groups.values()) if d is not None]
        classic = self._timers.next_deadline()
        if classic is not None:
            deadlines.append(classic)
        return min(deadlines, default=None)

    # ------------------------------------------------------------------------------------------ KIP-848 groups

    def consumer_group_heartbeat(self, now_ms: int, version: int, request: dict, topics: dict[str, tuple[bytes, int]],
                                 *, client_id: str = "", client_host: str = "") -> tuple[dict, list[Append]]:
        """ConsumerGroupHeartbeat; `topics` is the cluster's topics, name -> (topic id, partition count)."""
        self._start(now_ms)
        group_id = request.get("group_id") or ""

        def refuse(error: ErrorCode, message: str | None = None) -> tuple[dict, list]:
            return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}, []

        if group_id and not self._owns(group_id):
            return refuse(E.NOT_COORDINATOR)
        group = self.consumer_groups.get(group_id)
        if group is None and group_id:
            classic = self.groups.get(group_id)
            if classic is not None and classic.state not in (GroupState.EMPTY, GroupState.DEAD):
                return refuse(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if request.get("member_epoch") != 0:
                return refuse(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            if classic is not None:  # an empty classic group (offsets only) becomes a consumer group
                self.groups.pop(group_id, None)
                self._timers.cancel_where(lambda key: len(key) > 1 and key[1] == group_id)
            group = self.consumer_groups[group_id] = self._new_consumer_group(group_id)
        elif group is None:
            group = ConsumerGroup("", session_timeout_ms=self.consumer_session_timeout_ms)  # validation answers
        response, records = group.heartbeat(now_ms, request, topics, api_version=version, client_id=client_id,
                                            client_host=client_host)
        out: list = []
        if group_id:
            self._append(out, group_id, records)
        return response, out

    def _new_consumer_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id, session_timeout_ms=self.consumer_session_timeout_ms,
                             heartbeat_interval_ms=self.consumer_heartbeat_interval_ms,
                             default_assignor=self.consumer_default_assignor, max_size=self.max_group_size)

    def consumer_group_describe(self, now_ms: int, version: int, request: dict,
                                topic_names: dict[bytes, str]) -> dict:
        described = []
        for group_id in request["group_ids"]:
            group = self.consumer_groups.get(group_id)
            if not self._owns(group_id):
                described.append(_missing_consumer_group(group_id, E.NOT_COORDINATOR))
            elif group is None:
                error = E.GROUP_ID_NOT_FOUND
                message = (f"Group {group_id} is not a consumer group." if group_id in self.groups
                           else f"Group {group_id} not found.")
                described.append(_missing_consumer_group(group_id, error, message))
            else:
                described.append(group.describe(now_ms, request.get("include_authorized_operations", False),
                                                topic_names))
        return {"throttle_time_ms": 0, "groups": described}

    # ------------------------------------------------------------------------------------------ load

    def load(self, records: Iterable[tuple[bytes, bytes | None]], now_ms: int, *,
             partition: int | None = None) -> None:
        """Replay a `__consumer_offsets` partition (in log order); then members must heartbeat to stay."""
        self._start(now_ms)
        if partition is not None:
            self._unloaded.discard(partition)
        touched: set[str] = set()
        consumer_groups_touched: set[str] = set()
        for key, value in records:
            routed = record_group_id(key)
            if routed is not None:
                gid = routed[1]
                group = self.consumer_groups.get(gid) or self._new_consumer_group(gid)
                try:
                    group.replay(key, value)
                except ValueError:
                    continue  # an undecodable record is skipped, as records of unknown types are
                self.consumer_groups[gid] = group
                consumer_groups_touched.add(gid)
                continue
            record = rec.decode_record(key, value)
            if record is None:
                continue
            gid = record.key.group
            self._unloaded.discard(self.partition_for(gid))
            touched.add(gid)
            if isinstance(record, rec.OffsetCommitRecord):
                k = record.key
                if record.value is None:
                    self._remove_offset(gid, k.topic, k.partition)
                    continue
                if gid not in self.groups:
                    self.groups[gid] = ClassicGroup(gid, now_ms)
                v = record.value
                self._put_offset(gid, k.topic, k.partition, OffsetAndMetadata(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp))
            elif record.value is None:
                old = self.groups.get(gid)
                if old is not None:
                    self._drop_group(old)
            else:
                old = self.groups.get(gid)
                if old is not None:
                    self._drop_group(old)
                self.groups[gid] = self._group_from_record(gid, record.value, now_ms)
        for gid in consumer_groups_touched:
            consumer_group = self.consumer_groups[gid]
            if consumer_group.state == "Dead":
                del self.consumer_groups[gid]
                continue
            consumer_group.on_loaded(now_ms)
            shell = self.groups.get(gid)
            if shell is not None and not shell.members:  # the offsets-only classic shell of a consumer group
                self._drop_group(shell)
        for gid in touched:
            group = self.groups.get(gid)
            if group is None:
                continue
            for member in group.members.values():
                self._reschedule_heartbeat(group, member, now_ms)
            if len(group.members) > self.max_group_size:
                self._prepare_rebalance(now_ms, group, [])

    @staticmethod
    def _group_from_record(group_id: str, value: rec.GroupMetadataValue, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(
            group_id, now_ms, state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation_id=value.generation, protocol_type=value.protocol_type or None,
            protocol_name=value.protocol, leader_id=value.leader,
            current_state_timestamp=None if value.current_state_timestamp == -1 else value.current_state_timestamp)
        for m in value.members:
            group.add(ClassicGroupMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout, m.session_timeout,
                value.protocol_type, [(value.protocol, m.subscription)], m.assignment))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def unload(self, partition: int) -> list[Reply]:
        """Give up a partition: its groups go Dead and their parked requests get NOT_COORDINATOR."""
        self._unloaded.add(partition)
        out: list = []
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) != partition:
                continue
            group.transition_to(GroupState.DEAD, group.current_state_timestamp or 0)
            for member in group.members.values():
                self._reply_join(out, group, member, E.NOT_COORDINATOR, member_id=member.member_id)
                self._reply_sync(out, member, _sync_response(E.NOT_COORDINATOR))
            self._drop_group(group)
            self.offsets.pop(group_id, None)
        for producer_id, groups in list(self.pending_txn_offsets.items()):
            for group_id in [g for g in groups if self.partition_for(g) == partition]:
                del groups[group_id]
            if not groups:
                del self.pending_txn_offsets[producer_id]
        return out


def _missing_consumer_group(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": int(error), "error_message": message, "group_id": group_id, "group_state": "Dead",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}
