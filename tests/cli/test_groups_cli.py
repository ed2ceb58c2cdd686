"""`odradek groups`: parsing, the lag rows and the reset plan as pure functions, the commands over a fake
admin client, then real `python -m odradek groups ...` runs against a node with live consumer groups."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from concurrent.futures import Future
from datetime import UTC, datetime

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Node,
    TopicPartition,
)
from confluent_kafka.admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ListConsumerGroupsResult,
    MemberAssignment,
    MemberDescription,
)

from odradek.cli import groups
from odradek.cli import main as cli
from odradek.cli.groups import Member, PlannedOffset, ResetInputs, ResetSpec

# ---------------------------------------------------------------------------------------------------
# Units: parsing


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_groups_list_takes_states_and_types_repeated_or_comma_separated_case_insensitively():
    args = parse("groups", "list", "--state", "stable,EMPTY", "--state", "preparingrebalance", "--type", "classic")
    assert groups.flatten(args.state) == ["Stable", "Empty", "PreparingRebalance"]
    assert groups.flatten(args.type) == ["classic"]
    assert args.output == "table" and args.bootstrap_server == "localhost:9092" and args.timeout == 10.0
    assert parse("groups", "list").state == []


def test_groups_describe_views_default_to_offsets_and_exclude_each_other(capsys):
    assert parse("groups", "describe", "a", "b").view == "offsets"
    assert parse("groups", "describe", "a", "b").groups == ["a", "b"]
    assert parse("groups", "describe", "a", "--members").view == "members"
    assert parse("groups", "describe", "a", "--state", "-o", "json").view == "state"
    assert cli.main(["groups", "describe", "a", "--members", "--state"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: argument --state: not allowed with argument --members")
    assert len(err.splitlines()) == 1


def test_groups_reset_offsets_flags():
    args = parse("groups", "reset-offsets", "--group", "g", "--topic", "t", "--topic", "u:2,0",
                 "--shift-by", "-3", "--execute")
    assert args.group == "g" and args.topics == [("t", None), ("u", (2, 0))] and not args.all_topics
    assert args.reset == ResetSpec("shift", -3) and args.execute is True
    args = parse("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest")
    assert args.all_topics and args.reset == ResetSpec("earliest") and args.execute is None
    assert parse("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run").execute is False
    assert parse("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "42").reset == \
        ResetSpec("offset", 42)
    at = parse("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "2024-05-01T12:00:00Z")
    assert at.reset == ResetSpec("datetime", int(datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000))


def test_groups_delete_takes_repeated_groups():
    assert parse("groups", "delete", "--group", "a", "--group", "b").groups == ["a", "b"]


@pytest.mark.parametrize("argv, message", [
    (["groups"], "error: the following arguments are required: ACTION"),
    (["groups", "describe"], "error: the following arguments are required: GROUP"),
    (["groups", "list", "--state", "Sleeping"], "error: argument --state: unknown state 'Sleeping'"),
    (["groups", "list", "--type", "share"], "error: argument --type: unknown type 'share'"),
    (["groups", "reset-offsets", "--group", "g", "--to-earliest"],
     "error: one of the arguments --topic --all-topics is required"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics"], "error: one of the arguments --to-earliest"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"],
     "error: argument --to-latest: not allowed with argument --to-earliest"),
    (["groups", "reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-earliest"],
     "error: argument --all-topics: not allowed with argument --topic"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run", "--execute"],
     "error: argument --execute: not allowed with argument --dry-run"),
    (["groups", "reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"],
     "error: argument --topic: expected TOPIC or TOPIC:P,P"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "-1"],
     "error: argument --to-offset: expected a non-negative integer"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--shift-by", "two"],
     "error: argument --shift-by: expected an integer, got 'two'"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "soon"],
     "error: argument --to-datetime: expected ISO 8601"),
    (["groups", "reset-offsets", "--all-topics", "--to-earliest"],
     "error: the following arguments are required: --group"),
    (["groups", "delete"], "error: the following arguments are required: --group"),
])
def test_groups_usage_errors_are_one_error_line_and_exit_1(capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert len(err.splitlines()) == 1


def test_topic_spec_is_a_topic_or_a_topic_with_partitions():
    assert groups.topic_spec("orders") == ("orders", None)
    assert groups.topic_spec("orders:0") == ("orders", (0,))
    assert groups.topic_spec("orders:3, 1,3") == ("orders", (3, 1))
    for bad in ("orders:", ":1", "orders:1,", "orders:-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            groups.topic_spec(bad)


def test_building_the_parser_imports_no_client_library():
    code = ("import sys; from odradek.cli.main import build_parser; build_parser(); "
            "print('confluent_kafka' in sys.modules, any(m.startswith('odradek.broker') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------------------------------------------
# Units: describe rows


def test_lag_is_log_end_minus_committed_and_unknown_without_a_commit():
    assert groups.lag(4, 10) == 6
    assert groups.lag(10, 10) == 0
    assert groups.lag(None, 10) is None
    assert groups.lag(3, None) is None


def test_partition_rows_cover_assigned_committed_and_idle_members_sorted():
    members = [
        Member("m-2", "c2", "/10.0.0.2", (("t", 1),)),
        Member("m-1", "c1", "/10.0.0.1", (("t", 0), ("u", 0))),
        Member("m-3", "c3", "/10.0.0.3", ()),
    ]
    committed = {("t", 0): 4, ("t", 1): 10, ("v", 2): 1}
    log_end = {("t", 0): 10, ("t", 1): 10, ("u", 0): 5, ("v", 2): None}
    rows = groups.partition_rows("g", members, committed, log_end)
    assert [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id) for r in rows] == [
        ("t", 0, 4, 10, 6, "m-1"),
        ("t", 1, 10, 10, 0, "m-2"),
        ("u", 0, None, 5, None, "m-1"),     # assigned, nothing committed yet
        ("v", 2, 1, None, None, None),      # committed, owned by nobody, log end unknown
        (None, None, None, None, None, "m-3"),  # a member without partitions
    ]
    assert rows[0].host == "/10.0.0.1" and rows[0].client_id == "c1" and rows[0].group == "g"
    assert list(rows[0].as_json()) == ["topic", "partition", "current_offset", "log_end_offset", "lag",
                                       "consumer_id", "host", "client_id"]


def test_partition_rows_of_a_group_without_members_are_its_committed_offsets():
    rows = groups.partition_rows("g", [], {("t", 1): 3, ("t", 0): 2}, {("t", 0): 2, ("t", 1): 9})
    assert [(r.partition, r.lag, r.consumer_id) for r in rows] == [(0, 0, None), (1, 6, None)]


def test_assignment_text_groups_partitions_by_topic_like_kafka():
    assert groups.assignment_text([("t", 2), ("a", 0), ("t", 0)]) == "a(0),t(0,2)"
    assert groups.assignment_text([]) == "-"


def test_state_and_type_names_are_kafkas():
    assert groups.state_name(ConsumerGroupState.PREPARING_REBALANCING) == "PreparingRebalance"
    assert groups.state_name(ConsumerGroupState.COMPLETING_REBALANCING) == "CompletingRebalance"
    assert groups.state_name(ConsumerGroupState.STABLE) == "Stable"
    assert groups.state_name(ConsumerGroupState.EMPTY) == "Empty"
    assert groups.state_name(ConsumerGroupState.DEAD) == "Dead"
    assert groups.state_name(None) == "Unknown"
    assert sorted(groups.state_name(s) for s in ConsumerGroupState if s.name != "UNKNOWN") == sorted(groups.STATES)
    assert groups.type_name(ConsumerGroupType.CLASSIC) == "Classic"
    assert groups.type_name(ConsumerGroupType.CONSUMER) == "Consumer"
    assert groups.type_name(ConsumerGroupType.UNKNOWN) is None


# ---------------------------------------------------------------------------------------------------
# Units: the reset plan

COUNTS = {"t": 3, "u": 1}
COMMITTED = {("t", 0): 5, ("t", 1): 0, ("gone", 0): 7}
WATERMARKS = {("t", 0): (2, 10), ("t", 1): (0, 4), ("t", 2): (3, 3), ("u", 0): (0, 0)}


def plan(partitions, spec, committed=COMMITTED, offsets_for_time=None):
    inputs = ResetInputs(committed, WATERMARKS, offsets_for_time or {})
    return [(p.topic, p.partition, p.current_offset, p.new_offset) for p in groups.reset_plan(partitions, spec, inputs)]


def test_partitions_to_reset_from_topics_or_every_committed_partition():
    assert groups.partitions_to_reset([("t", None)], False, COUNTS, COMMITTED) == [("t", 0), ("t", 1), ("t", 2)]
    assert groups.partitions_to_reset([("t", (2, 0)), ("u", None), ("t", (0,))], False, COUNTS, COMMITTED) == [
        ("t", 0), ("t", 2), ("u", 0)]
    # --all-topics: what the group committed, in topics that still exist.
    assert groups.partitions_to_reset(None, True, COUNTS, COMMITTED) == [("t", 0), ("t", 1)]


def test_partitions_to_reset_rejects_unknown_topics_and_partitions():
    with pytest.raises(cli.CliError, match="topic 'nope' does not exist; topic 't' has no partition 3, 7 \\(it has 3\\)"):
        groups.partitions_to_reset([("nope", None), ("t", (0, 3, 7))], False, COUNTS, COMMITTED)


def test_reset_to_earliest_and_latest_are_the_log_start_and_end():
    parts = [("t", 0), ("t", 1), ("t", 2)]
    assert plan(parts, ResetSpec("earliest")) == [("t", 0, 5, 2), ("t", 1, 0, 0), ("t", 2, None, 3)]
    assert plan(parts, ResetSpec("latest")) == [("t", 0, 5, 10), ("t", 1, 0, 4), ("t", 2, None, 3)]


def test_reset_to_offset_is_clamped_into_the_log_range():
    parts = [("t", 0), ("t", 1), ("t", 2)]
    assert plan(parts, ResetSpec("offset", 3)) == [("t", 0, 5, 3), ("t", 1, 0, 3), ("t", 2, None, 3)]
    assert plan(parts, ResetSpec("offset", 0)) == [("t", 0, 5, 2), ("t", 1, 0, 0), ("t", 2, None, 3)]
    assert plan(parts, ResetSpec("offset", 1000)) == [("t", 0, 5, 10), ("t", 1, 0, 4), ("t", 2, None, 3)]


def test_shift_by_moves_the_committed_offset_within_the_log_range():
    parts = [("t", 0), ("t", 1)]
    assert plan(parts, ResetSpec("shift", -2)) == [("t", 0, 5, 3), ("t", 1, 0, 0)]
    assert plan(parts, ResetSpec("shift", 3)) == [("t", 0, 5, 8), ("t", 1, 0, 3)]
    assert plan(parts, ResetSpec("shift", -100)) == [("t", 0, 5, 2), ("t", 1, 0, 0)]
    assert plan(parts, ResetSpec("shift", 100)) == [("t", 0, 5, 10), ("t", 1, 0, 4)]


def test_shift_by_needs_a_committed_offset():
    with pytest.raises(cli.CliError, match="cannot shift the offset of t-2: the group has no committed offset"):
        plan([("t", 0), ("t", 2)], ResetSpec("shift", 1))


def test_reset_to_datetime_uses_the_offset_for_the_time_or_the_log_end():
    found = {("t", 0): 6, ("t", 1): None}
    assert plan([("t", 0), ("t", 1)], ResetSpec("datetime", 1714564800000), offsets_for_time=found) == [
        ("t", 0, 5, 6), ("t", 1, 0, 4)]


def test_planned_offsets_have_stable_json_keys():
    assert PlannedOffset("t", 1, None, 3).as_json() == {"topic": "t", "partition": 1, "current_offset": None,
                                                        "new_offset": 3}


# ---------------------------------------------------------------------------------------------------
# The commands over a fake admin client (the glue between librdkafka's objects and the output)


def done(value=None, error: int | None = None) -> Future:
    future: Future = Future()
    if error is not None:
        future.set_exception(KafkaException(KafkaError(error)))
    else:
        future.set_result(value)
    return future


def description(group: str, state: ConsumerGroupState, members=()) -> ConsumerGroupDescription:
    return ConsumerGroupDescription(group, False, list(members), "range", state, Node(1, "127.0.0.1", 9092),
                                    type=ConsumerGroupType.CLASSIC)


def member(member_id: str, *assigned: tuple[str, int]) -> MemberDescription:
    return MemberDescription(member_id, "client-" + member_id, "/127.0.0.1",
                             MemberAssignment([TopicPartition(t, p) for t, p in assigned]))


class FakeTopic:
    def __init__(self, partitions: int):
        self.partitions = dict.fromkeys(range(partitions))
        self.error = None


class FakeMetadata:
    def __init__(self, topics: dict[str, int]):
        self.topics = {name: FakeTopic(n) for name, n in topics.items()}


class FakeAdmin:
    def __init__(self, descriptions=None, committed=None, delete_errors=None, listings=()):
        self.descriptions = descriptions or {}
        self.committed = committed or {}
        self.delete_errors = delete_errors or {}
        self.listings = list(listings)
        self.altered = []
        self.list_options = None

    def list_consumer_groups(self, **options):
        self.list_options = options
        return done(ListConsumerGroupsResult(valid=self.listings, errors=[]))

    def describe_consumer_groups(self, group_ids, request_timeout):
        return {g: done(self.descriptions[g]) if g in self.descriptions else done(error=KafkaError.GROUP_ID_NOT_FOUND)
                for g in group_ids}

    def list_consumer_group_offsets(self, requests, request_timeout):
        [request] = requests
        tps = [TopicPartition(t, p, o) for (t, p), o in self.committed.get(request.group_id, {}).items()]
        tps.append(TopicPartition("t", 9, -1001))  # no commit: left out
        return {request.group_id: done(ConsumerGroupTopicPartitions(request.group_id, tps))}

    def alter_consumer_group_offsets(self, requests, request_timeout):
        [request] = requests
        self.altered.append((request.group_id, [(tp.topic, tp.partition, tp.offset) for tp in request.topic_partitions]))
        return {request.group_id: done(ConsumerGroupTopicPartitions(request.group_id, request.topic_partitions))}

    def delete_consumer_groups(self, group_ids, request_timeout):
        return {g: done(error=self.delete_errors[g]) if g in self.delete_errors else done() for g in group_ids}


class FakeLookup:
    WATERMARKS = {("t", 0): (0, 10), ("t", 1): (2, 6)}

    def __init__(self, args):
        pass

    def close(self):
        pass

    def watermarks(self, partitions, strict):
        return {tp: self.WATERMARKS.get(tp) for tp in partitions}

    def offsets_for_time(self, partitions, timestamp):
        return {tp: 4 for tp in partitions}


@pytest.fixture
def fake(monkeypatch):
    admin = FakeAdmin()
    monkeypatch.setattr(groups, "connect", lambda args: (admin, FakeMetadata({"t": 2})))
    monkeypatch.setattr(groups, "OffsetLookup", FakeLookup)
    return admin


def test_list_passes_the_filters_and_prints_sorted_groups(fake, capsys):
    fake.listings = [ConsumerGroupListing("b", False, ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC),
                     ConsumerGroupListing("a", False, ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC)]
    assert cli.main(["groups", "list", "--state", "Stable,Empty", "--type", "classic", "-o", "json"]) == 0
    assert fake.list_options["states"] == {ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY}
    assert fake.list_options["types"] == {ConsumerGroupType.CLASSIC}
    assert json.loads(capsys.readouterr().out) == {"groups": [
        {"group": "a", "type": "Classic", "state": "Stable"}, {"group": "b", "type": "Classic", "state": "Empty"}]}
    assert cli.main(["groups", "list"]) == 0
    assert capsys.readouterr().out.splitlines() == ["GROUP  TYPE     STATE", "a      Classic  Stable",
                                                    "b      Classic  Empty"]


def test_describe_offsets_view(fake, capsys):
    fake.descriptions["g"] = description("g", ConsumerGroupState.STABLE, [member("m1", ("t", 0))])
    fake.committed["g"] = {("t", 0): 7, ("t", 1): 3}
    assert cli.main(["groups", "describe", "g", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"groups": [{"group": "g", "state": "Stable", "partitions": [
        {"topic": "t", "partition": 0, "current_offset": 7, "log_end_offset": 10, "lag": 3, "consumer_id": "m1",
         "host": "/127.0.0.1", "client_id": "client-m1"},
        {"topic": "t", "partition": 1, "current_offset": 3, "log_end_offset": 6, "lag": 3, "consumer_id": None,
         "host": None, "client_id": None}]}]}
    assert cli.main(["groups", "describe", "g"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[1].split() == ["g", "t", "0", "7", "10", "3", "m1", "/127.0.0.1", "client-m1"]
    assert lines[2].split() == ["g", "t", "1", "3", "6", "3", "-", "-", "-"]


def test_describe_members_and_state_views(fake, capsys):
    fake.descriptions["g"] = description("g", ConsumerGroupState.STABLE,
                                         [member("m2"), member("m1", ("t", 1), ("t", 0))])
    assert cli.main(["groups", "describe", "g", "--members", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["groups"][0]["members"] == [
        {"consumer_id": "m1", "group_instance_id": None, "host": "/127.0.0.1", "client_id": "client-m1",
         "assignment": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]},
        {"consumer_id": "m2", "group_instance_id": None, "host": "/127.0.0.1", "client_id": "client-m2",
         "assignment": []}]
    assert cli.main(["groups", "describe", "g", "--members"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["g", "m1", "-", "/127.0.0.1", "client-m1", "2",
                                                               "t(0,1)"]
    assert cli.main(["groups", "describe", "g", "--state", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"groups": [{
        "group": "g", "coordinator": {"id": 1, "host": "127.0.0.1", "port": 9092}, "assignment_strategy": "range",
        "state": "Stable", "type": "Classic", "simple": False, "member_count": 2}]}
    assert cli.main(["groups", "describe", "g", "--state"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["g", "127.0.0.1:9092", "(1)", "range", "Stable",
                                                               "Classic", "2"]


def test_describe_unknown_or_dead_groups_is_an_error(fake, capsys):
    fake.descriptions["dead"] = description("dead", ConsumerGroupState.DEAD)
    fake.descriptions["g"] = description("g", ConsumerGroupState.EMPTY)
    assert cli.main(["groups", "describe", "g", "nope", "dead"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: group 'nope' does not exist; group 'dead' does not exist\n"


def test_reset_refuses_an_active_group(fake, capsys):
    fake.descriptions["g"] = description("g", ConsumerGroupState.STABLE, [member("m1", ("t", 0))])
    assert cli.main(["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run"]) == 1
    assert capsys.readouterr().err == ("error: assignments can only be reset if the group 'g' is inactive, "
                                       "but the current state is Stable\n")
    assert fake.altered == []


def test_reset_dry_run_by_default_prints_the_plan_and_a_note(fake, capsys):
    fake.descriptions["g"] = description("g", ConsumerGroupState.EMPTY)
    fake.committed["g"] = {("t", 0): 7, ("t", 1): 3}
    assert cli.main(["groups", "reset-offsets", "--group", "g", "--all-topics", "--shift-by", "-4"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["GROUP  TOPIC  PARTITION  CURRENT-OFFSET  NEW-OFFSET",
                                         "g      t      0          7               3",
                                         "g      t      1          3               2"]
    assert captured.err.startswith("note: nothing was executed")
    assert fake.altered == []
    assert cli.main(["groups", "reset-offsets", "--group", "g", "--all-topics", "--shift-by", "-4", "--dry-run"]) == 0
    assert capsys.readouterr().err == ""


def test_reset_execute_commits_the_plan_even_for_an_unknown_group(fake, capsys):
    argv = ["groups", "reset-offsets", "--group", "new", "--topic", "t:1", "--to-datetime", "1700000000000",
            "--execute", "-o", "json"]
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"group": "new", "executed": True, "partitions": [
        {"topic": "t", "partition": 1, "current_offset": None, "new_offset": 4}]}
    assert fake.altered == [("new", [("t", 1, 4)])]


def test_reset_all_topics_without_commits_is_an_error(fake, capsys):
    fake.descriptions["g"] = description("g", ConsumerGroupState.EMPTY)
    assert cli.main(["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest"]) == 1
    assert capsys.readouterr().err.startswith("error: group 'g' has no committed offsets to reset")


def test_delete_reports_each_group_and_fails_for_non_empty_and_unknown(fake, capsys):
    fake.delete_errors = {"busy": KafkaError.NON_EMPTY_GROUP, "nope": KafkaError.GROUP_ID_NOT_FOUND}
    assert cli.main(["groups", "delete", "--group", "a", "--group", "busy", "--group", "nope", "--group", "b"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "Deleted group a.\nDeleted group b.\n"
    assert captured.err == "error: group 'busy' is not empty; group 'nope' does not exist\n"


# ---------------------------------------------------------------------------------------------------
# End to end: `python -m odradek groups ...` against a node with real consumer groups

JOIN_TIMEOUT_S = 30.0


def run_cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "odradek", *argv], capture_output=True, timeout=timeout)
    proc.stdout_text = proc.stdout.decode("utf-8", errors="replace")
    proc.stderr_text = proc.stderr.decode("utf-8", errors="replace")
    return proc


def odradek(node, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(*argv, "--bootstrap-server", node.bootstrap)
    assert "Traceback" not in proc.stderr_text, proc.stderr_text
    if check:
        assert proc.returncode == 0, f"odradek {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr_text}"
    return proc


def odradek_json(node, *argv: str) -> dict:
    return json.loads(odradek(node, *argv, "--output", "json").stdout)


def assert_error_line(proc: subprocess.CompletedProcess, starts_with: str) -> None:
    assert proc.returncode == 1, proc.stderr_text
    lines = proc.stderr_text.splitlines()
    assert len(lines) == 1, proc.stderr_text
    assert lines[0].startswith(starts_with), lines[0]


def admin(node):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 0})


def create_topic(node, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(node)  # keep the client alive until the future resolves
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(node, topic: str, counts: dict[int, int], timestamp_ms: int | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": node.bootstrap, "log_level": 0})
    for partition, count in counts.items():
        for i in range(count):
            kwargs = {"timestamp": timestamp_ms} if timestamp_ms is not None else {}
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition, **kwargs)
    assert producer.flush(30) == 0


class GroupMember:
    """A live member of a consumer group (subscribe()), committing offsets explicitly."""

    def __init__(self, node, group: str, topics: list[str]):
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": node.bootstrap, "group.id": group, "client.id": f"member-of-{group}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
        })
        self.consumer.subscribe(topics)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while not self.consumer.assignment():
            assert time.monotonic() < deadline, f"no partitions assigned in group {group} within {JOIN_TIMEOUT_S}s"
            self.consumer.poll(0.2)

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


def committed(node, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, straight from the admin API."""
    client = admin(node)
    futures = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
    result = futures[group].result()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def inactive_group(node, group: str, topic: str, offsets: dict[tuple[str, int], int]) -> None:
    """A group that has committed `offsets` and has no members left (state Empty)."""
    member = GroupMember(node, group, [topic])
    member.commit(offsets)
    member.close()


def test_describe_shows_lag_while_a_producer_runs_ahead(shared_node):
    topic, group = "lagging", "lag-group"
    create_topic(shared_node, topic, 2)
    produce(shared_node, topic, {0: 10, 1: 4})
    member = GroupMember(shared_node, group, [topic])
    try:
        member.commit({(topic, 0): 4, (topic, 1): 4})
        produce(shared_node, topic, {0: 5, 1: 3})  # the producer runs ahead of the group

        [described] = odradek_json(shared_node, "groups", "describe", group)["groups"]
        assert described["state"] == "Stable"
        rows = {(r["topic"], r["partition"]): r for r in described["partitions"]}
        assert set(rows) == {(topic, 0), (topic, 1)}
        assert (rows[(topic, 0)]["current_offset"], rows[(topic, 0)]["log_end_offset"], rows[(topic, 0)]["lag"]) == \
            (4, 15, 11)
        assert (rows[(topic, 1)]["current_offset"], rows[(topic, 1)]["log_end_offset"], rows[(topic, 1)]["lag"]) == \
            (4, 7, 3)
        member_id = member.consumer.memberid()
        assert {r["consumer_id"] for r in rows.values()} == {member_id}
        assert {r["client_id"] for r in rows.values()} == {f"member-of-{group}"}

        table = odradek(shared_node, "groups", "describe", group).stdout_text.splitlines()
        assert table[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        assert table[1].split()[:7] == [group, topic, "0", "4", "15", "11", member_id]

        [members] = odradek_json(shared_node, "groups", "describe", group, "--members")["groups"]
        [only] = members["members"]
        assert only["consumer_id"] == member_id and only["client_id"] == f"member-of-{group}"
        assert only["assignment"] == [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]

        [state] = odradek_json(shared_node, "groups", "describe", group, "--state")["groups"]
        assert state["state"] == "Stable" and state["member_count"] == 1
        assert state["coordinator"]["port"] == shared_node.port
        assert state["assignment_strategy"]
    finally:
        member.close()

    # Without members the committed offsets are still described, owned by nobody.
    [described] = odradek_json(shared_node, "groups", "describe", group)["groups"]
    assert described["state"] == "Empty"
    assert [(r["partition"], r["current_offset"], r["lag"], r["consumer_id"]) for r in described["partitions"]] == [
        (0, 4, 11, None), (1, 4, 3, None)]


def test_reset_offsets_dry_run_then_execute(shared_node):
    topic, group = "resettable", "reset-group"
    create_topic(shared_node, topic, 2)
    produce(shared_node, topic, {0: 10, 1: 6})
    inactive_group(shared_node, group, topic, {(topic, 0): 8, (topic, 1): 5})

    # Neither --dry-run nor --execute: a dry run, with a note saying so.
    proc = odradek(shared_node, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest")
    assert proc.stdout_text.splitlines()[1].split() == [group, topic, "0", "8", "0"]
    assert "nothing was executed" in proc.stderr_text
    assert committed(shared_node, group) == {(topic, 0): 8, (topic, 1): 5}
    doc = odradek_json(shared_node, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                       "--dry-run")
    assert doc == {"group": group, "executed": False, "partitions": [
        {"topic": topic, "partition": 0, "current_offset": 8, "new_offset": 0},
        {"topic": topic, "partition": 1, "current_offset": 5, "new_offset": 0}]}
    assert committed(shared_node, group) == {(topic, 0): 8, (topic, 1): 5}

    odradek(shared_node, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    assert committed(shared_node, group) == {(topic, 0): 0, (topic, 1): 0}

    odradek(shared_node, "groups", "reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "3",
            "--execute")
    assert committed(shared_node, group) == {(topic, 0): 0, (topic, 1): 3}

    # Explicit offsets past the end are clamped to the log end.
    doc = odradek_json(shared_node, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset",
                       "1000", "--execute")
    assert [p["new_offset"] for p in doc["partitions"]] == [10, 6] and doc["executed"]
    assert committed(shared_node, group) == {(topic, 0): 10, (topic, 1): 6}

    odradek(shared_node, "groups", "reset-offsets", "--group", group, "--all-topics", "--shift-by", "-4",
            "--execute")
    assert committed(shared_node, group) == {(topic, 0): 6, (topic, 1): 2}
    odradek(shared_node, "groups", "reset-offsets", "--group", group, "--all-topics", "--shift-by", "-100",
            "--execute")
    assert committed(shared_node, group) == {(topic, 0): 0, (topic, 1): 0}

    odradek(shared_node, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute")
    assert committed(shared_node, group) == {(topic, 0): 10, (topic, 1): 6}

    # The group's lag follows its offsets.
    [described] = odradek_json(shared_node, "groups", "describe", group)["groups"]
    assert [r["lag"] for r in described["partitions"]] == [0, 0]


def test_reset_offsets_to_datetime(shared_node):
    topic, group = "timed", "datetime-group"
    create_topic(shared_node, topic, 1)
    early = int(datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000)
    produce(shared_node, topic, {0: 3}, timestamp_ms=early)           # offsets 0-2
    produce(shared_node, topic, {0: 4}, timestamp_ms=early + 3600_000)  # offsets 3-6, one hour later
    inactive_group(shared_node, group, topic, {(topic, 0): 7})

    for when, expected in [("2024-05-01T12:30:00Z", 3), ("2024-05-01T14:00:00+02:00", 0),
                           (str(early + 3600_000), 3), ("2024-05-01T13:00:00.001Z", 7)]:
        odradek(shared_node, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-datetime", when,
                "--execute")
        assert committed(shared_node, group) == {(topic, 0): expected}, when


def test_reset_offsets_of_a_new_group_creates_its_offsets(shared_node):
    topic, group = "fresh-reset", "never-joined"
    create_topic(shared_node, topic, 2)
    produce(shared_node, topic, {0: 2, 1: 5})
    odradek(shared_node, "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")
    assert committed(shared_node, group) == {(topic, 0): 2, (topic, 1): 5}
    assert_error_line(odradek(shared_node, "groups", "reset-offsets", "--group", "never-joined-either", "--topic",
                              topic, "--shift-by", "1", check=False),
                      f"error: cannot shift the offset of {topic}-0: the group has no committed offset for it")


def test_reset_offsets_refuses_an_active_group_and_unknown_topics(shared_node):
    topic, group = "busy-reset", "busy-reset-group"
    create_topic(shared_node, topic, 1)
    produce(shared_node, topic, {0: 3})
    member = GroupMember(shared_node, group, [topic])
    try:
        member.commit({(topic, 0): 2})
        for mode in ("--dry-run", "--execute"):
            proc = odradek(shared_node, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                           mode, check=False)
            assert_error_line(proc, f"error: assignments can only be reset if the group '{group}' is inactive, "
                                    "but the current state is Stable")
        assert committed(shared_node, group) == {(topic, 0): 2}
    finally:
        member.close()
    assert_error_line(odradek(shared_node, "groups", "reset-offsets", "--group", group, "--topic", "no-such-topic",
                              "--to-earliest", check=False), "error: topic 'no-such-topic' does not exist")
    assert_error_line(odradek(shared_node, "groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0,5",
                              "--to-earliest", check=False), f"error: topic '{topic}' has no partition 5 (it has 1)")


def test_list_filters_by_state_and_type(shared_node):
    topic = "listed"
    create_topic(shared_node, topic, 1)
    produce(shared_node, topic, {0: 1})
    inactive_group(shared_node, "listed-empty", topic, {(topic, 0): 1})
    member = GroupMember(shared_node, "listed-stable", [topic])
    try:
        def listed(*flags: str) -> dict[str, dict]:
            return {g["group"]: g for g in odradek_json(shared_node, "groups", "list", *flags)["groups"]
                    if g["group"].startswith("listed-")}

        everything = listed()
        assert {g: d["state"] for g, d in everything.items()} == {"listed-empty": "Empty", "listed-stable": "Stable"}
        assert list(everything["listed-empty"]) == ["group", "type", "state"]
        assert set(listed("--state", "Stable")) == {"listed-stable"}
        assert set(listed("--state", "empty")) == {"listed-empty"}
        assert set(listed("--state", "Stable,Empty")) == {"listed-empty", "listed-stable"}
        assert set(listed("--state", "Dead")) == set()
        assert set(listed("--type", "classic")) == {"listed-empty", "listed-stable"}
        assert set(listed("--type", "consumer")) == set()

        table = odradek(shared_node, "groups", "list", "--state", "Stable").stdout_text.splitlines()
        assert table[0].split() == ["GROUP", "TYPE", "STATE"]
        assert ["listed-stable", "Classic", "Stable"] in [line.split() for line in table[1:]]
    finally:
        member.close()


def test_delete_groups(shared_node):
    topic = "deletable"
    create_topic(shared_node, topic, 1)
    produce(shared_node, topic, {0: 2})
    inactive_group(shared_node, "delete-empty", topic, {(topic, 0): 1})
    member = GroupMember(shared_node, "delete-busy", [topic])
    try:
        proc = odradek(shared_node, "groups", "delete", "--group", "delete-busy", check=False)
        assert_error_line(proc, "error: group 'delete-busy' is not empty")
        proc = odradek(shared_node, "groups", "delete", "--group", "delete-empty", "--group", "delete-unknown",
                       check=False)
        assert proc.stdout_text == "Deleted group delete-empty.\n"
        assert_error_line(proc, "error: group 'delete-unknown' does not exist")
    finally:
        member.close()
    assert committed(shared_node, "delete-empty") == {}
    listed = {g["group"] for g in odradek_json(shared_node, "groups", "list")["groups"]}
    assert "delete-empty" not in listed and "delete-busy" in listed
    assert odradek(shared_node, "groups", "delete", "--group", "delete-busy").stdout_text == \
        "Deleted group delete-busy.\n"


def test_describe_unknown_group_is_an_error_line(shared_node):
    assert_error_line(odradek(shared_node, "groups", "describe", "no-such-group", check=False),
                      "error: group 'no-such-group' does not exist")


def test_unreachable_server_is_one_error_line():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for argv in (["groups", "list"], ["groups", "describe", "g"], ["groups", "delete", "--group", "g"],
                 ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"]):
        proc = run_cli(*argv, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "1")
        assert_error_line(proc, f"error: cannot reach 127.0.0.1:{port}")
