"""The classic group protocol, driven the way clients drive it: join, member id required, sync, heartbeats."""

from __future__ import annotations

import itertools
import os
import random
import struct

import pytest

from odradek.coordinator import Append, GroupCoordinator, Reply
from odradek.coordinator.group_coordinator import java_string_hash
from odradek.protocol.errors import ErrorCode as E

GROUP = "group-1"
TOPIC = "orders"


# ---------------------------------------------------------------------------------------------- consumer protocol

def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription(*topics: str, version: int = 0) -> bytes:
    """ConsumerProtocolSubscription: int16 version, [topics], user_data (null)."""
    out = struct.pack(">hi", version, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", 0)  # owned partitions
    return out


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: int16 version, [topic, [partition]], user_data (null)."""
    out = struct.pack(">hi", 0, len(partitions))
    for topic, parts in partitions.items():
        out += _str(topic) + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out + struct.pack(">i", -1)


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    pos = 2
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    result = {}
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        (k,) = struct.unpack_from(">i", data, pos)
        result[topic] = list(struct.unpack_from(f">{k}i", data, pos + 4))
        pos += 4 + 4 * k
    return result


def range_assign(member_ids: list[str], partitions: int, topic: str = TOPIC) -> dict[str, bytes]:
    """Kafka's range assignor over one topic: members sorted, contiguous runs."""
    members = sorted(member_ids)
    per, extra = divmod(partitions, len(members))
    result, start = {}, 0
    for i, member in enumerate(members):
        n = per + (1 if i < extra else 0)
        result[member] = assignment({topic: list(range(start, start + n))})
        start += n
    return result


# ---------------------------------------------------------------------------------------------- harness

class Harness:
    """A coordinator, a fake clock, the replies received per token and every Append written."""

    def __init__(self, **config):
        counter = itertools.count()
        config.setdefault("initial_rebalance_delay_ms", 0)
        config.setdefault("new_uuid", lambda: f"uuid{next(counter)}")
        self.config = config
        self.c = GroupCoordinator(**config)
        self.now = 1_000_000
        self.replies: dict[object, dict] = {}
        self.appends: list[Append] = []
        self.tokens = itertools.count()

    def run(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, Append):
                self.appends.append(action)
            else:
                assert isinstance(action, Reply)
                assert action.token not in self.replies, f"token {action.token} answered twice"
                self.replies[action.token] = action.response

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers at their deadlines in order (as an event loop would)."""
        end = self.now + ms
        while (deadline := self.c.next_deadline()) is not None and deadline <= end:
            self.now = max(self.now, deadline)
            self.run(self.c.tick(self.now))
        self.now = end
        self.run(self.c.tick(self.now))

    def join_request(self, token, *, member_id="", instance_id=None, protocols=None, session=10_000,
                     rebalance=30_000, version=9, group=GROUP, client_id="client", protocol_type="consumer"):
        request = {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
                   "member_id": member_id, "group_instance_id": instance_id, "protocol_type": protocol_type,
                   "protocols": protocols if protocols is not None
                   else [{"name": "range", "metadata": subscription(TOPIC)}]}
        self.run(self.c.join_group(self.now, version, request, token, client_id=client_id, client_host="/127.0.0.1"))
        return self.replies.get(token)

    def sync_request(self, token, member_id, generation, *, assignments=None, instance_id=None, version=5,
                     group=GROUP):
        request = {"group_id": group, "generation_id": generation, "member_id": member_id,
                   "group_instance_id": instance_id, "protocol_type": "consumer", "protocol_name": "range",
                   "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}
        self.run(self.c.sync_group(self.now, version, request, token))
        return self.replies.get(token)

    def heartbeat(self, member_id, generation, *, instance_id=None, group=GROUP) -> int:
        return self.c.heartbeat(self.now, 4, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                              "group_instance_id": instance_id})["error_code"]

    def leave(self, *members, version=5, group=GROUP) -> dict:
        request = {"group_id": group, "members": [{"member_id": m, "group_instance_id": i, "reason": None}
                                                   for m, i in members]}
        response, actions = self.c.leave_group(self.now, version, request)
        self.run(actions)
        return response

    def group(self, group=GROUP):
        return self.c.groups.get(group)


class Client:
    """One consumer: follows the join / member-id-required / sync dance."""

    def __init__(self, h: Harness, name: str, instance_id: str | None = None, session=10_000, rebalance=30_000):
        self.h, self.name, self.instance_id = h, name, instance_id
        self.session, self.rebalance = session, rebalance
        self.member_id = ""
        self.generation = -1
        self.join_token = None
        self.sync_token = None
        self.join_response = None
        self.assignment: dict[str, list[int]] | None = None

    def join(self, version=9):
        """Send JoinGroup (again with the given id after MEMBER_ID_REQUIRED); returns the response or None."""
        self.join_token = (self.name, "join", next(self.h.tokens))
        response = self.h.join_request(self.join_token, member_id=self.member_id, instance_id=self.instance_id,
                                       session=self.session, rebalance=self.rebalance, version=version,
                                       client_id=self.name)
        if response is not None and response["error_code"] == E.MEMBER_ID_REQUIRED:
            self.member_id = response["member_id"]
            return self.join(version)
        return response

    def joined(self) -> dict:
        response = self.h.replies[self.join_token]
        assert response["error_code"] == E.NONE, response
        self.member_id = response["member_id"]
        self.generation = response["generation_id"]
        self.join_response = response
        return response

    @property
    def is_leader(self) -> bool:
        return self.join_response["leader"] == self.member_id

    def sync(self, partitions=6):
        assignments = None
        if self.is_leader:
            assignments = range_assign([m["member_id"] for m in self.join_response["members"]], partitions)
        self.sync_token = (self.name, "sync", next(self.h.tokens))
        return self.h.sync_request(self.sync_token, self.member_id, self.generation, assignments=assignments,
                                   instance_id=self.instance_id)

    def synced(self) -> dict[str, list[int]]:
        response = self.h.replies[self.sync_token]
        assert response["error_code"] == E.NONE, response
        assert response["protocol_type"] == "consumer" and response["protocol_name"] == "range"
        self.assignment = parse_assignment(response["assignment"])
        return self.assignment

    def heartbeat(self) -> int:
        return self.h.heartbeat(self.member_id, self.generation, instance_id=self.instance_id)


def form_group(h: Harness, clients: list[Client], partitions=6) -> None:
    """All clients join, the join completes, followers sync first and the leader's sync releases them."""
    for c in clients:
        c.join()
    h.advance(0)
    for c in clients:
        c.joined()
    leader = next(c for c in clients if c.is_leader)
    for c in clients:
        if c is not leader:
            assert c.sync() is None  # parked until the leader's assignment arrives
    leader.sync(partitions)
    for c in clients:
        c.synced()
    assert h.group().state.value == "Stable"


# ---------------------------------------------------------------------------------------------- tests

def test_partition_for_matches_kafka_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    # Values checked against Java's String.hashCode (jshell), including a surrogate pair.
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("\N{GRINNING FACE}") == 1772899
    c = GroupCoordinator()
    assert c.partition_for("abc") == 96354 % 50
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE: Utils.abs gives 0
    assert c.partition_for("polygenelubricants") == 0
    assert c.partition_for("console-consumer-1") == abs(java_string_hash("console-consumer-1")) % 50


def test_first_join_requires_a_member_id_then_three_members_split_the_partitions():
    h = Harness()
    first = h.join_request("t0")
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"] == "client-uuid0"
    assert h.appends and h.appends[0].partition == h.c.partition_for(GROUP)  # the new group's empty metadata
    clients = [Client(h, f"c{i}") for i in range(3)]
    form_group(h, clients)
    owned = [p for c in clients for p in c.assignment[TOPIC]]
    assert sorted(owned) == list(range(6))
    assert all(len(c.assignment[TOPIC]) == 2 for c in clients)
    leader = next(c for c in clients if c.is_leader)
    assert len(leader.join_response["members"]) == 3
    assert all(c.join_response["members"] == [] for c in clients if c is not leader)
    assert {c.join_response["generation_id"] for c in clients} == {1}
    assert all(c.join_response["protocol_type"] == "consumer" for c in clients)
    assert all(c.heartbeat() == E.NONE for c in clients)
    # The pending member id from the very first JoinGroup never came back: it expires, nothing else changes.
    for _ in range(3):
        h.advance(4_000)
        assert all(c.heartbeat() == E.NONE for c in clients)
    assert h.group().state.value == "Stable" and h.group().generation_id == 1
    assert not h.group().pending_join_members


def test_old_join_versions_return_empty_protocol_name_on_errors():
    h = Harness()
    response = h.join_request("t", member_id="nobody", version=6)
    assert response["error_code"] == E.UNKNOWN_MEMBER_ID and response["protocol_name"] == ""
    response = h.join_request("t2", session=10, version=7)
    assert response["error_code"] == E.INVALID_SESSION_TIMEOUT and response["protocol_name"] is None
    response = h.join_request("t3", group="", version=7)
    assert response["error_code"] == E.INVALID_GROUP_ID


def test_join_v3_adds_the_member_without_member_id_required():
    h = Harness()
    c = Client(h, "old")
    c.join(version=3)
    h.advance(0)
    assert c.joined()["generation_id"] == 1 and c.member_id.startswith("old-")


def test_member_leaving_triggers_a_rebalance_to_a_new_generation():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    form_group(h, [a, b])
    response = h.leave((b.member_id, None))
    assert response["members"][0]["error_code"] == E.NONE and response["error_code"] == E.NONE
    assert h.group().state.value == "PreparingRebalance"
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    a.join()
    h.advance(0)
    assert a.joined()["generation_id"] == 2 and a.is_leader
    a.sync()
    assert a.synced() == {TOPIC: list(range(6))}
    # LeaveGroup v0-2 carry the member's error at the top level.
    response, _ = h.c.leave_group(h.now, 1, {"group_id": GROUP, "member_id": b.member_id})
    assert response["error_code"] == E.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_the_group_and_persists_it():
    h = Harness()
    a = Client(h, "a")
    form_group(h, [a])
    h.appends.clear()
    h.leave((a.member_id, None))
    group = h.group()
    assert group.state.value == "Empty" and group.generation_id == 2
    assert len(h.appends) == 1 and h.appends[0].records[0][1] is not None


def test_member_that_stops_heartbeating_is_expelled_after_its_session_timeout():
    h = Harness()
    a, b = Client(h, "a", session=10_000), Client(h, "b", session=10_000)
    form_group(h, [a, b])
    h.advance(6_000)
    assert a.heartbeat() == E.NONE  # b stays silent
    h.advance(3_999)
    assert a.heartbeat() == E.NONE and b.member_id in h.group().members
    h.advance(1)  # b's session (10 s since its last heartbeat) is over
    assert h.group().state.value == "PreparingRebalance"
    assert b.member_id not in h.group().members
    assert b.heartbeat() == E.UNKNOWN_MEMBER_ID
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    a.join()
    h.advance(0)
    assert a.joined()["generation_id"] == 2


def test_rebalance_timeout_expels_a_member_that_does_not_rejoin():
    h = Harness()
    a = Client(h, "a", session=10_000, rebalance=20_000)
    b = Client(h, "b", session=10_000, rebalance=20_000)
    form_group(h, [a, b])
    leader, follower = (a, b) if a.is_leader else (b, a)
    assert leader.join() is None  # the leader rejoins: a rebalance starts, the follower must rejoin too
    assert h.group().state.value == "PreparingRebalance"
    # The follower keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins.
    for _ in range(3):
        h.advance(6_000)
        assert follower.heartbeat() == E.REBALANCE_IN_PROGRESS
    assert h.replies.get(leader.join_token) is None
    h.advance(2_000)  # 20 s: the rebalance timeout
    assert follower.member_id not in h.group().members
    assert follower.heartbeat() == E.UNKNOWN_MEMBER_ID
    response = leader.joined()
    assert response["generation_id"] == 2 and [m["member_id"] for m in response["members"]] == [leader.member_id]
    assert h.group().state.value == "CompletingRebalance"


def test_leader_rejoining_while_stable_forces_a_rebalance():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    form_group(h, [a, b])
    leader, follower = (a, b) if a.is_leader else (b, a)
    assert follower.join() is not None  # same metadata from a follower: current generation, no rebalance
    assert h.group().state.value == "Stable"
    assert leader.join() is None
    assert h.group().state.value == "PreparingRebalance"
    follower.join()
    assert h.replies[leader.join_token]["generation_id"] == 2


def test_changed_subscription_while_stable_triggers_a_rebalance():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    form_group(h, [a, b])
    follower = a if not a.is_leader else b
    token = "resubscribe"
    assert h.join_request(token, member_id=follower.member_id,
                          protocols=[{"name": "range", "metadata": subscription(TOPIC, "other")}]) is None
    assert h.group().state.value == "PreparingRebalance"


def test_initial_rebalance_delay_waits_and_extends_while_members_join():
    h = Harness(initial_rebalance_delay_ms=3_000)
    a, b, c = Client(h, "a", rebalance=10_000), Client(h, "b", rebalance=10_000), Client(h, "c", rebalance=10_000)
    a.join()
    h.advance(2_000)
    b.join()  # extends the delay
    h.advance(1_500)
    assert h.replies.get(a.join_token) is None  # 3.5 s: the first delay ran out, extended by another 3 s
    c.join()
    h.advance(2_000)
    assert h.replies.get(a.join_token) is None
    h.advance(1_000)  # 6.5 s: second delay over, c joined during it: extend once more (remaining 4 s)
    assert h.replies.get(a.join_token) is None
    h.advance(3_000)
    for client in (a, b, c):
        assert client.joined()["generation_id"] == 1
    assert len(next(x for x in (a, b, c) if x.is_leader).join_response["members"]) == 3


def test_initial_rebalance_delay_is_bounded_by_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3_000)
    clients = [Client(h, f"m{i}", rebalance=5_000) for i in range(10)]
    start = h.now
    for client in clients:
        client.join()
        h.advance(1_000)
        if h.replies.get(clients[0].join_token) is not None:
            break
    assert h.replies.get(clients[0].join_token) is not None
    assert h.now - start <= 3_000 + 5_000


def test_protocol_selection_by_vote_and_inconsistent_protocols():
    h = Harness()
    a = Client(h, "a")
    b = Client(h, "b")
    protocols_a = [{"name": "roundrobin", "metadata": b"ra"}, {"name": "range", "metadata": b"ga"}]
    protocols_b = [{"name": "range", "metadata": b"gb"}, {"name": "roundrobin", "metadata": b"rb"}]
    c_protocols = [{"name": "range", "metadata": b"gc"}]
    for client, protocols in ((a, protocols_a), (b, protocols_b)):
        client.join_token = client.name
        response = h.join_request(client.name, protocols=protocols, client_id=client.name)
        client.member_id = response["member_id"]
        h.join_request(client.name + "2", member_id=client.member_id, protocols=protocols)
        client.join_token = client.name + "2"
    third = h.join_request("c", protocols=c_protocols)
    h.join_request("c2", member_id=third["member_id"], protocols=c_protocols)
    h.advance(0)
    response = h.replies["a2"]
    assert response["protocol_name"] == "range"  # two votes for range, one for roundrobin
    bad = h.join_request("bad", protocols=[{"name": "sticky", "metadata": b""}])
    assert bad["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    bad = h.join_request("bad2", protocol_type="connect")
    assert bad["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_errors():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    form_group(h, [a, b])
    assert h.sync_request("x1", "ghost", 1)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.sync_request("x2", a.member_id, 7)["error_code"] == E.ILLEGAL_GENERATION
    assert h.sync_request("x3", a.member_id, 1, group="other")["error_code"] == E.UNKNOWN_MEMBER_ID
    request = {"group_id": GROUP, "generation_id": 1, "member_id": a.member_id, "protocol_type": "consumer",
               "protocol_name": "roundrobin", "assignments": []}
    h.run(h.c.sync_group(h.now, 5, request, "x4"))
    assert h.replies["x4"]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.heartbeat(a.member_id, 9) == E.ILLEGAL_GENERATION
    b.join() if b.is_leader else a.join()  # the leader rejoins
    assert h.sync_request("x5", a.member_id, 1)["error_code"] == E.REBALANCE_IN_PROGRESS


def test_follower_parked_in_sync_gets_rebalance_in_progress_when_a_member_joins():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    for c in (a, b):
        c.join()
    h.advance(0)
    a.joined(), b.joined()
    follower = a if not a.is_leader else b
    assert follower.sync() is None
    newcomer = Client(h, "c")
    newcomer.join()
    assert h.replies[follower.sync_token]["error_code"] == E.REBALANCE_IN_PROGRESS
    assert h.group().state.value == "PreparingRebalance"


def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout():
    h = Harness()
    a = Client(h, "a", rebalance=20_000)
    b = Client(h, "b", rebalance=20_000)
    for c in (a, b):
        c.join()
    h.advance(0)
    a.joined(), b.joined()
    leader, follower = (a, b) if a.is_leader else (b, a)
    assert follower.sync() is None
    h.advance(8_000)
    assert follower.heartbeat() == E.NONE
    assert leader.heartbeat() == E.NONE
    h.advance(8_000)
    assert follower.heartbeat() == E.NONE
    h.advance(5_000)  # 21 s: the leader's SyncGroup never came
    assert h.replies[follower.sync_token]["error_code"] == E.REBALANCE_IN_PROGRESS
    assert leader.member_id not in h.group().members


def test_max_group_size():
    h = Harness(max_group_size=2)
    a, b, c = Client(h, "a"), Client(h, "b"), Client(h, "c")
    form_group(h, [a, b])
    response = c.join()
    assert response["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_static_member_restart_without_rebalance_fences_the_old_member_id():
    h = Harness()
    a = Client(h, "a", instance_id="instance-a")
    b = Client(h, "b", instance_id="instance-b")
    form_group(h, [a, b])
    assert a.member_id.startswith("instance-a-")
    generation = h.group().generation_id
    old_id, old_assignment = a.member_id, a.assignment
    was_leader = a.is_leader
    restarted = Client(h, "a2", instance_id="instance-a")  # same instance id, no member id
    h.appends.clear()
    response = restarted.join()
    assert response["error_code"] == E.NONE and response["generation_id"] == generation
    assert h.group().state.value == "Stable"
    assert len(h.appends) == 1  # the new member id is persisted before the answer
    if was_leader:
        assert response["skip_assignment"] and len(response["members"]) == 2
    restarted.joined()
    assert restarted.sync() is not None
    assert restarted.synced() == old_assignment
    # The old member id is fenced everywhere.
    assert h.heartbeat(old_id, generation, instance_id="instance-a") == E.FENCED_INSTANCE_ID
    assert h.sync_request("old", old_id, generation, instance_id="instance-a")["error_code"] == E.FENCED_INSTANCE_ID
    response = h.join_request("oldjoin", member_id=old_id, instance_id="instance-a")
    assert response["error_code"] == E.FENCED_INSTANCE_ID
    assert b.heartbeat() == E.NONE and restarted.heartbeat() == E.NONE


def test_static_leader_restart_before_join_v9_returns_the_old_leader_id():
    h = Harness()
    a = Client(h, "a", instance_id="ia")
    form_group(h, [a])
    old = a.member_id
    restarted = Client(h, "a2", instance_id="ia")
    response = restarted.join(version=8)
    assert response["error_code"] == E.NONE and response["leader"] == old and response["member_id"] != old


def test_static_member_parked_join_is_fenced_when_replaced():
    h = Harness()
    a, b = Client(h, "a", instance_id="ia"), Client(h, "b")
    form_group(h, [a, b])
    leader = a if a.is_leader else b
    leader.join()  # rebalance; a's rejoin parks (or is the leader's)
    if leader is b:
        a.join()
    assert h.replies.get(a.join_token) is None or leader is a
    restarted = Client(h, "a2", instance_id="ia")
    restarted.join()
    assert h.replies[a.join_token]["error_code"] == E.FENCED_INSTANCE_ID


def test_admin_leave_by_instance_id_and_unknown_members():
    h = Harness()
    a, b = Client(h, "a", instance_id="ia"), Client(h, "b")
    form_group(h, [a, b])
    response = h.leave(("", "ia"), ("", "nope"), ("ghost", None))
    assert [m["error_code"] for m in response["members"]] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert a.member_id not in h.group().members
    assert h.leave((b.member_id, "wrong-instance"))["members"][0]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.leave(("x", None), group="unknown")["error_code"] == E.UNKNOWN_MEMBER_ID


def test_describe_and_list_groups():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    form_group(h, [a, b])
    described = h.c.describe_groups(h.now, 5, {"groups": [GROUP, "nope"]})["groups"]
    assert described[0]["group_state"] == "Stable" and described[0]["protocol_data"] == "range"
    assert described[0]["protocol_type"] == "consumer"
    members = {m["member_id"]: m for m in described[0]["members"]}
    assert parse_assignment(members[a.member_id]["member_assignment"]) == a.assignment
    assert members[a.member_id]["member_metadata"] == subscription(TOPIC)
    assert members[a.member_id]["client_id"] == "a" and members[a.member_id]["client_host"] == "/127.0.0.1"
    assert described[1]["group_state"] == "Dead" and described[1]["error_code"] == 0
    v6 = h.c.describe_groups(h.now, 6, {"groups": ["nope"]})["groups"][0]
    assert v6["error_code"] == E.GROUP_ID_NOT_FOUND and v6["group_state"] == "Dead"
    a.join() if a.is_leader else b.join()
    described = h.c.describe_groups(h.now, 5, {"groups": [GROUP]})["groups"][0]
    assert described["group_state"] == "PreparingRebalance" and described["protocol_data"] == ""
    assert all(m["member_metadata"] == b"" for m in described["members"])
    listed = h.c.list_groups(h.now, 5, {"states_filter": [], "types_filter": []})["groups"]
    assert listed == [{"group_id": GROUP, "protocol_type": "consumer", "group_state": "PreparingRebalance",
                       "group_type": "classic"}]
    assert h.c.list_groups(h.now, 5, {"states_filter": ["stable"], "types_filter": []})["groups"] == []
    assert len(h.c.list_groups(h.now, 5, {"states_filter": ["PreparingRebalance"], "types_filter": []})["groups"]) == 1
    assert h.c.list_groups(h.now, 5, {"states_filter": [], "types_filter": ["consumer"]})["groups"] == []
    assert len(h.c.list_groups(h.now, 5, {"states_filter": [], "types_filter": ["Classic"]})["groups"]) == 1


def test_unload_answers_parked_requests_with_not_coordinator():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    for c in (a, b):
        c.join()
    h.advance(0)
    a.joined(), b.joined()
    follower = a if not a.is_leader else b
    follower.sync()
    h.run(h.c.unload(h.c.partition_for(GROUP)))
    assert h.replies[follower.sync_token]["error_code"] == E.NOT_COORDINATOR
    assert follower.heartbeat() == E.NOT_COORDINATOR
    assert h.c.next_deadline() is None or all(k[0] == "expire" for k in h.c._timers._live)


def test_every_encoded_response_fits_the_codec():
    from odradek.protocol.messages import API_BY_KEY
    h = Harness()
    a = Client(h, "a", instance_id="i")
    form_group(h, [a])
    for version in range(2, 10):
        response = h.join_request(("enc", version), member_id="ghost", version=version)
        API_BY_KEY[11].encode_response(version, response)
    for version in range(0, 6):
        API_BY_KEY[14].encode_response(version, h.sync_request(("s", version), a.member_id, 1, version=version))
    for version in range(0, 6):
        request = {"group_id": GROUP, "member_id": "x", "members": [{"member_id": "x", "group_instance_id": None}]}
        API_BY_KEY[13].encode_response(version, h.c.leave_group(h.now, version, request)[0])
    for version in range(0, 7):
        API_BY_KEY[15].encode_response(version, h.c.describe_groups(h.now, version, {"groups": [GROUP, "x"]}))
    for version in range(0, 6):
        API_BY_KEY[16].encode_response(version, h.c.list_groups(h.now, version, {}))


# ---------------------------------------------------------------------------------------------- randomized

class SimMember:
    def __init__(self, name, instance_id=None):
        self.name = name
        self.instance_id = instance_id
        self.member_id = ""
        self.state = "out"  # out, joining, joined, syncing, stable, dead
        self.token = None
        self.response = None
        self.generation = -1


def test_randomized_members_keep_group_invariants():
    seed = int(os.environ.get("ODRADEK_SEED", random.randrange(2**32)))
    try:
        _run_simulation(seed, steps=1500)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (replay with ODRADEK_SEED={seed})") from exc


def _run_simulation(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    h = Harness(initial_rebalance_delay_ms=rng.choice([0, 500]), min_session_timeout_ms=1000)
    partitions = 10
    members = [SimMember(f"m{i}", instance_id=f"static-{i}" if i % 3 == 0 else None) for i in range(6)]
    by_token: dict = {}
    leader_assignments: dict[int, dict[str, bytes]] = {}  # generation -> what its leader sent
    synced: dict[int, dict[str, list[int]]] = {}           # generation -> member -> partitions
    last_generation = 0
    incarnation = [None]  # the group object: offset expiry deletes an empty group, a join recreates it
    seen = set()

    def handle(token, response):
        m, kind, generation = by_token.pop(token)
        error = response["error_code"]
        if kind == "join":
            if error == E.NONE:
                m.member_id, m.generation, m.response, m.state = (response["member_id"], response["generation_id"],
                                                                  response, "joined")
            elif error == E.MEMBER_ID_REQUIRED:
                m.member_id, m.state = response["member_id"], "out"
            else:
                if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                    m.member_id = ""
                m.state = "out"
        else:
            if error == E.NONE:
                assert m.generation == generation
                parts = parse_assignment(response["assignment"]).get(TOPIC, [])
                sent = leader_assignments.get(generation, {})
                assert response["assignment"] == sent.get(m.instance_id or m.member_id, b""), \
                    f"assignment not from this generation's leader: {m.name} {m.member_id} {generation} {sorted(sent)}"
                owners = synced.setdefault(generation, {})
                me = m.instance_id or m.member_id
                for other, other_parts in owners.items():
                    if other != me:
                        assert not set(parts) & set(other_parts), f"generation {generation}: {parts} shared"
                owners[me] = parts
                m.state = "stable"
            else:
                if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                    m.member_id = ""
                m.state = "out"

    def run(actions):
        for action in actions:
            if isinstance(action, Append):
                h.appends.append(action)
                continue
            assert action.token not in seen, f"token {action.token} answered twice"
            seen.add(action.token)
            handle(action.token, action.response)

    def check():
        nonlocal last_generation
        group = h.group()
        if group is None:
            return
        if group is not incarnation[0]:
            incarnation[0] = group
            last_generation = 0
            leader_assignments.clear()
            synced.clear()
        assert group.generation_id >= last_generation, "generation went backwards"
        last_generation = group.generation_id
        if group.state.value == "Stable":
            sent = leader_assignments.get(group.generation_id)
            assert sent is not None, "Stable without a leader sync in this generation"
            for member in group.members.values():
                assert member.assignment == sent.get(member.group_instance_id or member.member_id, b""), \
                    f"{member} of a Stable group holds an assignment its leader did not send"

    token_ids = itertools.count()
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.15:
            ms = rng.choice([10, 100, 1000, 3000, 7000, 12000])
            end = h.now + ms
            while (deadline := h.c.next_deadline()) is not None and deadline <= end:
                h.now = max(h.now, deadline)
                run(h.c.tick(h.now))
            h.now = end
            run(h.c.tick(h.now))
            check()
            continue
        m = rng.choice(members)
        action = rng.random()
        if m.state == "dead":
            if action < 0.1:  # restart (static members keep their instance id)
                m.state = "out"
            continue
        if action < 0.03:
            # Crash: silent from now on; its parked requests are still answered (to the old incarnation).
            members[members.index(m)] = SimMember(m.name, m.instance_id)
            replacement = next(x for x in members if x.name == m.name)
            replacement.state = "dead"
            continue
        if m.state == "out":
            token = ("join", next(token_ids))
            by_token[token] = (m, "join", None)
            request = {"group_id": GROUP, "session_timeout_ms": 5000, "rebalance_timeout_ms": 8000,
                       "member_id": m.member_id, "group_instance_id": m.instance_id, "protocol_type": "consumer",
                       "protocols": [{"name": "range", "metadata": subscription(TOPIC)}]}
            m.state = "joining"
            run(h.c.join_group(h.now, 9, request, token, client_id=m.name))
        elif m.state == "joined":
            token = ("sync", next(token_ids))
            by_token[token] = (m, "sync", m.generation)
            assignments = []
            if m.response["leader"] == m.member_id and m.response["members"]:
                sent = range_assign([x["member_id"] for x in m.response["members"]], partitions)
                group = h.group()
                if group is not None and group.generation_id == m.generation and \
                        group.state.value == "CompletingRebalance" and group.is_leader(m.member_id):
                    # Keyed by instance id for static members: a restarted one keeps its assignment.
                    identity = {x["member_id"]: x["group_instance_id"] or x["member_id"]
                                for x in m.response["members"]}
                    leader_assignments[m.generation] = {identity[k]: v for k, v in sent.items()}
                assignments = [{"member_id": k, "assignment": v} for k, v in sent.items()]
            m.state = "syncing"
            run(h.c.sync_group(h.now, 5, {"group_id": GROUP, "generation_id": m.generation,
                                          "member_id": m.member_id, "group_instance_id": m.instance_id,
                                          "protocol_type": "consumer", "protocol_name": "range",
                                          "assignments": assignments}, token))
        elif m.state in ("stable", "joining", "syncing") and action < 0.7:
            if m.state == "joining":
                continue
            error = h.heartbeat(m.member_id, m.generation, instance_id=m.instance_id)
            if m.state == "stable" and error != E.NONE:
                if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID, E.ILLEGAL_GENERATION):
                    m.member_id = "" if error != E.ILLEGAL_GENERATION else m.member_id
                m.state = "out"
        elif m.state == "stable" and action < 0.8:
            response, actions = h.c.leave_group(h.now, 5, {"group_id": GROUP, "members": [
                {"member_id": m.member_id, "group_instance_id": m.instance_id}]})
            run(actions)
            m.state, m.member_id = "out", ""
        elif m.state == "stable":
            m.state = "out"  # rejoin (e.g. a metadata refresh)
        check()

    # Let everything time out: every parked request must have been answered.
    for _ in range(10):
        end = h.now + 60_000
        while (deadline := h.c.next_deadline()) is not None and deadline <= end:
            h.now = max(h.now, deadline)
            run(h.c.tick(h.now))
        h.now = end
        check()
    assert not by_token, f"unanswered parked requests: {list(by_token)}"
    group = h.group()
    assert group is None or group.state.value == "Empty"


@pytest.mark.parametrize("seed", [1, 2, 3, 42, 1234])
def test_randomized_fixed_seeds(seed):
    _run_simulation(seed, steps=800)
