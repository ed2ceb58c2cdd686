"""Committed offsets: generation checks, fetch, expiry, DeleteGroups, OffsetDelete, and reload from the log."""

from odradek.coordinator import Append, GroupCoordinator
from odradek.coordinator import records as rec
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import API_BY_KEY
from tests.coordinator.test_classic_group import GROUP, TOPIC, Client, Harness, form_group, subscription

DAY = 24 * 3600 * 1000


def commit(h: Harness, offsets: dict[tuple[str, int], int], *, generation=-1, member_id="", instance_id=None,
           version=9, group=GROUP, metadata="m", retention=-1) -> dict[tuple[str, int], int]:
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": 3, "committed_metadata": metadata})
    request = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
               "group_instance_id": instance_id, "retention_time_ms": retention,
               "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}
    response, actions = h.c.offset_commit(h.now, version, request)
    API_BY_KEY[8].encode_response(version, response)
    h.run(actions)
    return {(t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]}


def fetch(h: Harness, topics: dict[str, list[int]] | None, *, group=GROUP, version=9) -> dict[tuple[str, int], tuple]:
    request_topics = None if topics is None else [{"name": t, "partition_indexes": p} for t, p in topics.items()]
    if version >= 8:
        response = h.c.offset_fetch(h.now, version, {"groups": [{"group_id": group, "topics": request_topics}]})
        API_BY_KEY[9].encode_response(version, response)
        result_topics = response["groups"][0]["topics"]
    else:
        response = h.c.offset_fetch(h.now, version, {"group_id": group, "topics": request_topics})
        API_BY_KEY[9].encode_response(version, response)
        result_topics = response["topics"]
    return {(t["name"], p["partition_index"]): (p["committed_offset"], p["committed_leader_epoch"], p["metadata"])
            for t in result_topics for p in t["partitions"]}


def test_simple_commit_and_fetch_without_a_group_protocol():
    h = Harness()
    assert commit(h, {(TOPIC, 0): 10, (TOPIC, 1): 20}) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    assert len(h.appends) == 1 and len(h.appends[0].records) == 2
    assert fetch(h, {TOPIC: [0, 1, 2]}) == {(TOPIC, 0): (10, 3, "m"), (TOPIC, 1): (20, 3, "m"), (TOPIC, 2): (-1, -1, "")}
    assert fetch(h, None) == {(TOPIC, 0): (10, 3, "m"), (TOPIC, 1): (20, 3, "m")}
    assert fetch(h, {TOPIC: [0]}, version=5) == {(TOPIC, 0): (10, 3, "m")}
    assert fetch(h, None, version=3) == {(TOPIC, 0): (10, 3, "m"), (TOPIC, 1): (20, 3, "m")}
    assert fetch(h, {TOPIC: [0]}, group="unknown") == {(TOPIC, 0): (-1, -1, "")}
    assert fetch(h, None, group="unknown") == {}
    listed = h.c.list_groups(h.now, 5, {})["groups"]
    assert listed == [{"group_id": GROUP, "protocol_type": "", "group_state": "Empty", "group_type": "classic"}]


def test_offset_fetch_v8_handles_several_groups():
    h = Harness()
    commit(h, {(TOPIC, 0): 1}, group="a")
    commit(h, {(TOPIC, 0): 2}, group="b")
    response = h.c.offset_fetch(h.now, 8, {"groups": [
        {"group_id": "a", "topics": None}, {"group_id": "b", "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
    assert [g["topics"][0]["partitions"][0]["committed_offset"] for g in response["groups"]] == [1, 2]


def test_metadata_too_large_fails_only_that_partition():
    h = Harness(offset_metadata_max_bytes=5)
    errors = commit(h, {(TOPIC, 0): 1}, metadata="123456")
    assert errors == {(TOPIC, 0): E.OFFSET_METADATA_TOO_LARGE}
    assert commit(h, {(TOPIC, 1): 1}, metadata="12345") == {(TOPIC, 1): 0}
    assert fetch(h, {TOPIC: [0, 1]})[(TOPIC, 0)][0] == -1


def test_commits_from_members_are_checked_against_the_generation():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    form_group(h, [a, b])
    assert commit(h, {(TOPIC, 0): 5}, generation=1, member_id=a.member_id) == {(TOPIC, 0): 0}
    assert commit(h, {(TOPIC, 0): 6}, generation=0, member_id=a.member_id) == {(TOPIC, 0): E.ILLEGAL_GENERATION}
    assert commit(h, {(TOPIC, 0): 6}, generation=1, member_id="ghost") == {(TOPIC, 0): E.UNKNOWN_MEMBER_ID}
    # A "simple" commit (generation -1, no member) is refused while the group has members.
    assert commit(h, {(TOPIC, 0): 6}) == {(TOPIC, 0): E.UNKNOWN_MEMBER_ID}
    assert fetch(h, {TOPIC: [0]})[(TOPIC, 0)][0] == 5
    # Unknown group with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9.
    assert commit(h, {(TOPIC, 0): 1}, generation=3, member_id="x", group="nope", version=8) == \
        {(TOPIC, 0): E.ILLEGAL_GENERATION}
    assert commit(h, {(TOPIC, 0): 1}, generation=3, member_id="x", group="nope") == {(TOPIC, 0): E.GROUP_ID_NOT_FOUND}
    # During the sync phase commits get REBALANCE_IN_PROGRESS.
    (a if a.is_leader else b).join()
    (b if a.is_leader else a).join()
    h.advance(0)
    assert h.group().state.value == "CompletingRebalance"
    assert commit(h, {(TOPIC, 0): 7}, generation=2, member_id=a.member_id) == {(TOPIC, 0): E.REBALANCE_IN_PROGRESS}


def test_commit_keeps_a_member_alive_like_a_heartbeat():
    h = Harness()
    a = Client(h, "a", session=10_000)
    form_group(h, [a])
    for _ in range(5):
        h.advance(6_000)
        assert commit(h, {(TOPIC, 0): 1}, generation=1, member_id=a.member_id) == {(TOPIC, 0): 0}
    assert h.group().state.value == "Stable"


def test_offsets_of_an_empty_group_expire_after_the_retention_and_the_group_is_deleted():
    h = Harness(offsets_retention_ms=7 * DAY, offsets_retention_check_interval_ms=600_000)
    a = Client(h, "a")
    form_group(h, [a])
    commit(h, {(TOPIC, 0): 5}, generation=1, member_id=a.member_id)
    h.advance(3 * DAY)  # a stopped heartbeating long ago: the group went Empty 10 s after the commit
    assert h.group().state.value == "Empty"
    emptied_at = h.group().current_state_timestamp
    assert fetch(h, {TOPIC: [0]})[(TOPIC, 0)][0] == 5
    h.appends.clear()
    h.advance(emptied_at + 7 * DAY - h.now - 600_001)
    assert fetch(h, {TOPIC: [0]})[(TOPIC, 0)][0] == 5  # retention counts from when the group became Empty
    h.advance(1_200_000)
    assert fetch(h, {TOPIC: [0]})[(TOPIC, 0)][0] == -1
    assert h.group() is None
    tombstones = [r for a in h.appends for r in a.records]
    assert [rec.decode_record(k, v) for k, v in tombstones] == [
        rec.OffsetCommitRecord(rec.OffsetCommitKey(GROUP, TOPIC, 0), None),
        rec.GroupMetadataRecord(rec.GroupMetadataKey(GROUP), None)]


def test_simple_group_offsets_expire_from_their_commit_timestamp():
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=60_000)
    commit(h, {(TOPIC, 0): 1})
    h.advance(DAY // 2)
    commit(h, {(TOPIC, 1): 2})
    h.advance(DAY // 2 + 60_000)
    assert fetch(h, None) == {(TOPIC, 1): (2, 3, "m")}
    h.advance(DAY)
    assert fetch(h, None) == {} and h.group() is None


def test_explicit_retention_time_expires_at_its_timestamp():
    h = Harness(offsets_retention_ms=7 * DAY, offsets_retention_check_interval_ms=60_000)
    commit(h, {(TOPIC, 0): 1}, version=4, retention=120_000)
    assert rec.decode_record(*h.appends[-1].records[0]).value.expire_timestamp == h.now + 120_000
    h.advance(180_000)
    assert fetch(h, {TOPIC: [0]})[(TOPIC, 0)][0] == -1


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=60_000)
    a = Client(h, "a", session=60_000)
    form_group(h, [a])
    commit(h, {(TOPIC, 0): 1, ("old-topic", 0): 2}, generation=1, member_id=a.member_id)
    for _ in range(int(DAY / 50_000) + 3):
        h.advance(50_000)
        assert a.heartbeat() == E.NONE
    assert fetch(h, None) == {(TOPIC, 0): (1, 3, "m")}


def test_delete_groups():
    h = Harness()
    a = Client(h, "a")
    form_group(h, [a])
    commit(h, {(TOPIC, 0): 1}, generation=1, member_id=a.member_id)
    commit(h, {(TOPIC, 0): 1}, group="simple")
    response, actions = h.c.delete_groups(h.now, 2, {"groups_names": [GROUP, "simple", "missing"]})
    API_BY_KEY[42].encode_response(2, response)
    assert [r["error_code"] for r in response["results"]] == [E.NON_EMPTY_GROUP, 0, E.GROUP_ID_NOT_FOUND]
    assert len(actions) == 1 and [rec.decode_record(k, v) for k, v in actions[0].records] == [
        rec.OffsetCommitRecord(rec.OffsetCommitKey("simple", TOPIC, 0), None),
        rec.GroupMetadataRecord(rec.GroupMetadataKey("simple"), None)]
    assert "simple" not in h.c.groups and fetch(h, None, group="simple") == {}
    h.leave((a.member_id, None))
    response, actions = h.c.delete_groups(h.now, 2, {"groups_names": [GROUP]})
    assert response["results"][0]["error_code"] == 0 and h.group() is None


def test_offset_delete_refuses_subscribed_topics_of_a_stable_consumer_group():
    h = Harness()
    a = Client(h, "a")
    form_group(h, [a])
    commit(h, {(TOPIC, 0): 1, ("other", 0): 2}, generation=1, member_id=a.member_id)
    request = {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]},
                                             {"name": "other", "partitions": [{"partition_index": 0}]}]}
    response, actions = h.c.offset_delete(h.now, 0, request)
    API_BY_KEY[47].encode_response(0, response)
    assert response["error_code"] == 0
    assert [t["partitions"][0]["error_code"] for t in response["topics"]] == [E.GROUP_SUBSCRIBED_TO_TOPIC, 0]
    assert [rec.decode_record(k, v).key for k, v in actions[0].records] == [rec.OffsetCommitKey(GROUP, "other", 0)]
    assert fetch(h, None) == {(TOPIC, 0): (1, 3, "m")}
    assert h.c.offset_delete(h.now, 0, {"group_id": "nope", "topics": []})[0]["error_code"] == E.GROUP_ID_NOT_FOUND
    # A non-consumer protocol group with members: NON_EMPTY_GROUP.
    first = h.join_request("cx", group="connect-group", protocol_type="connect")
    h.join_request("cx2", group="connect-group", protocol_type="connect", member_id=first["member_id"])
    assert h.c.offset_delete(h.now, 0, {"group_id": "connect-group", "topics": []})[0]["error_code"] == \
        E.NON_EMPTY_GROUP
    # Once the group is empty every topic can be deleted.
    h.leave((a.member_id, None))
    response, actions = h.c.offset_delete(h.now, 0, {"group_id": GROUP, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]})
    assert response["topics"][0]["partitions"][0]["error_code"] == 0 and actions


def replay(h: Harness, **config) -> GroupCoordinator:
    """A restarted coordinator: every Append written so far, replayed partition by partition."""
    restarted = GroupCoordinator(**{**h.config, **config})
    by_partition: dict[int, list] = {}
    for append in h.appends:
        by_partition.setdefault(append.partition, []).extend(append.records)
    for partition, records in by_partition.items():
        restarted.load(records, h.now, partition=partition)
    return restarted


def test_load_restores_offsets_and_a_stable_group_whose_members_carry_on():
    h = Harness()
    a, b = Client(h, "a", instance_id="ia"), Client(h, "b")
    form_group(h, [a, b])
    commit(h, {(TOPIC, 0): 11, (TOPIC, 3): 33}, generation=1, member_id=a.member_id)
    commit(h, {("x", 0): 7}, group="simple")
    commit(h, {("x", 0): 8}, group="simple")
    commit(h, {("x", 1): 9}, group="simple")
    h.run(h.c.offset_delete(h.now, 0, {"group_id": "simple", "topics": [
        {"name": "x", "partitions": [{"partition_index": 1}]}]})[1])
    assert all(isinstance(x, Append) for x in h.appends)
    h.c = replay(h)
    assert fetch(h, None) == {(TOPIC, 0): (11, 3, "m"), (TOPIC, 3): (33, 3, "m")}
    assert fetch(h, None, group="simple") == {("x", 0): (8, 3, "m")}
    group = h.group()
    assert group.state.value == "Stable" and group.generation_id == 1 and group.protocol_name == "range"
    assert set(group.members) == {a.member_id, b.member_id}
    assert group.static_members == {"ia": a.member_id}
    assert group.subscribed_topics == {TOPIC}
    # Members keep heartbeating and syncing into the restored generation.
    assert a.heartbeat() == E.NONE and b.heartbeat() == E.NONE
    assert b.sync() is not None and b.synced() == b.assignment
    described = h.c.describe_groups(h.now, 5, {"groups": [GROUP]})["groups"][0]
    assert described["members"][0]["member_metadata"] == subscription(TOPIC)
    # A member that does not come back is expelled after its session timeout.
    for _ in range(2):
        h.advance(4_000)
        assert a.heartbeat() == E.NONE
    h.advance(2_500)
    assert b.member_id not in h.group().members and h.group().state.value == "PreparingRebalance"
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS


def test_load_restores_an_empty_group_and_honours_tombstones():
    h = Harness()
    a = Client(h, "a")
    form_group(h, [a])
    h.leave((a.member_id, None))
    commit(h, {(TOPIC, 0): 4})
    h.c = replay(h)
    group = h.group()
    assert group.state.value == "Empty" and group.generation_id == 2 and group.protocol_type == "consumer"
    assert fetch(h, None) == {(TOPIC, 0): (4, 3, "m")}
    h.run(h.c.delete_groups(h.now, 2, {"groups_names": [GROUP]})[1])
    h.c = replay(h)
    assert h.group() is None and fetch(h, None) == {}
    # A new generation starts from scratch after a deletion.
    c = Client(h, "c")
    form_group(h, [c])
    assert h.group().generation_id == 1


def test_load_skips_unknown_record_types():
    c = GroupCoordinator()
    key, value = rec.offset_commit_record("g", "t", 0, rec.OffsetCommitValue(5, "", 1))
    c.load([(b"\x00\x63\x00\x01g", b"\x00\x00unknown type"), (b"\x00\x03\x00\x01g", b"\x00\x00garbage"),
            (key, value)], 0)
    assert c.offsets["g"]["t"][0].offset == 5
    assert "g" not in c.consumer_groups


def test_consumer_group_offsets_expire_once_nobody_subscribes_and_the_empty_group_goes():
    day = 24 * 3600 * 1000
    c = GroupCoordinator(offsets_retention_ms=day, offsets_retention_check_interval_ms=1000)
    join = {"group_id": "kip848", "member_id": "m1", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    response, _ = c.consumer_group_heartbeat(0, 1, join, {"t": (b"\x01" * 16, 1)})
    assert response["error_code"] == 0
    commit = {"group_id": "kip848", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1,
              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    response, _ = c.offset_commit(0, 9, commit)
    assert response["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_MEMBER_ID  # group not empty
    leave = {**join, "member_epoch": -1, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
             "topic_partitions": None}
    c.consumer_group_heartbeat(1, 1, leave, {"t": (b"\x01" * 16, 1)})
    response, appends = c.offset_commit(2, 9, commit)
    assert response["topics"][0]["partitions"][0]["error_code"] == 0 and appends
    fetched = c.offset_fetch(3, 9, {"groups": [{"group_id": "kip848", "member_id": None, "member_epoch": -1,
                                                "topics": None}], "require_stable": False})
    assert fetched["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 7
    c.tick(day // 2)
    assert "kip848" in c.consumer_groups
    expired = c.tick(day + 10_000)
    assert "kip848" not in c.consumer_groups and not c.offsets.get("kip848")
    assert any(value is None for append in expired for _, value in append.records)


def test_offset_delete_of_a_consumer_protocol_group_refuses_only_the_subscribed_topics():
    c = GroupCoordinator()
    topics = {"t": (b"\x01" * 16, 1), "old": (b"\x02" * 16, 1)}
    join = {"group_id": "kip848", "member_id": "m1", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    response, _ = c.consumer_group_heartbeat(0, 1, join, topics)
    commit = {"group_id": "kip848", "generation_id_or_member_epoch": response["member_epoch"], "member_id": "m1",
              "group_instance_id": None, "retention_time_ms": -1,
              "topics": [{"name": name, "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}
                         for name in ("t", "old")]}
    response, _ = c.offset_commit(1, 9, commit)
    assert [t["partitions"][0]["error_code"] for t in response["topics"]] == [0, 0]
    request = {"group_id": "kip848", "topics": [{"name": name, "partitions": [{"partition_index": 0}]}
                                                for name in ("t", "old")]}
    response, appends = c.offset_delete(2, 0, request)
    API_BY_KEY[47].encode_response(0, response)
    assert response["error_code"] == 0
    assert [t["partitions"][0]["error_code"] for t in response["topics"]] == [E.GROUP_SUBSCRIBED_TO_TOPIC, 0]
    assert [rec.decode_record(k, v).key for k, v in appends[0].records] == [rec.OffsetCommitKey("kip848", "old", 0)]
    assert set(c.offsets["kip848"]) == {"t"}


def txn_commit(h: Harness, producer: tuple[int, int], offsets: dict[tuple[str, int], int]) -> Append:
    """A TxnOffsetCommit of a producer without a group protocol; its transactional Append."""
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
    response, appends = h.c.txn_offset_commit(h.now, 3, {
        "transactional_id": "tid", "group_id": GROUP, "producer_id": producer[0], "producer_epoch": producer[1],
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()]})
    assert all(p["error_code"] == 0 for t in response["topics"] for p in t["partitions"])
    (append,) = appends
    assert append.producer == producer and append.undo is not None
    return append


def test_a_txn_offset_commit_the_log_refuses_never_rides_on_the_producers_next_commit_marker():
    # A fenced instance (epoch 0) whose TxnOffsetCommit arrives after the new instance (epoch 1) took over: the
    # log refuses its write (stale epoch), and the shell undoes it; the new instance's commit must carry only
    # its own offsets, or partition 0's committed offset would move back and the input be read twice.
    h = Harness()
    commit(h, {(TOPIC, 0): 40, (TOPIC, 1): 50})
    txn_commit(h, (7, 1), {(TOPIC, 1): 60})
    txn_commit(h, (7, 0), {(TOPIC, 0): 5, (TOPIC, 1): 55}).undo()
    h.c.complete_transaction(h.c.partition_for(GROUP), 7, commit=True)
    assert fetch(h, {TOPIC: [0, 1]}) == {(TOPIC, 0): (40, 3, "m"), (TOPIC, 1): (60, -1, "")}
