"""`odradek groups`: list, describe, reset the offsets of, and delete consumer groups.

Like Kafka's `kafka-consumer-groups.sh`. The group side goes through the admin API (ListGroups,
DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups); log start and end offsets and offsets by time
come from a consumer that never joins a group (ListOffsets).

The parser and the pure parts (parsing specs, lag rows, the reset plan) import no client library, so
building the `odradek` parser stays cheap; the client is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from odradek.cli.main import ArgumentParser, CliError, non_negative_int, timestamp_ms
from odradek.cli.output import print_json, print_table

TopicPartitionKey = tuple[str, int]

# Kafka's names for group states (ConsumerGroupState / GroupState), in the order Kafka lists them.
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
TYPES = ("classic", "consumer")
# States in which the group has no active members, so its offsets may be reset (as Kafka checks).
INACTIVE_STATES = frozenset({"Empty", "Dead"})
REBALANCING_STATES = frozenset({"PreparingRebalance", "CompletingRebalance"})

# librdkafka insists on a group id for a consumer; this one never joins, subscribes or commits.
LOOKUP_GROUP = "odradek-groups-cli"


# ---------------------------------------------------------------------------------------------------
# Parser


def add_groups_parser(commands, client, output) -> None:
    groups = commands.add_parser("groups", help="list, describe, reset offsets of and delete consumer groups",
                                 description="Manage consumer groups, like kafka-consumer-groups.sh.")
    sub = groups.add_subparsers(dest="groups_command", metavar="ACTION", parser_class=ArgumentParser)
    sub.required = True

    p = sub.add_parser("list", parents=[client, output], help="list consumer groups",
                       description="List consumer groups with their type and state.")
    p.add_argument("--state", metavar="STATE", type=state_list, action="append", default=[],
                   help=f"only groups in this state (repeatable or comma-separated): {', '.join(STATES)}")
    p.add_argument("--type", metavar="TYPE", type=type_list, action="append", default=[],
                   help="only groups of this type (repeatable or comma-separated): classic, consumer")
    p.set_defaults(run=list_groups)

    p = sub.add_parser("describe", parents=[client, output], help="describe consumer groups",
                       description="Describe consumer groups. By default one row per partition with the "
                                   "committed offset, log end offset, lag and owning member.")
    p.add_argument("groups", metavar="GROUP", nargs="+")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", dest="view", action="store_const", const="members",
                      help="list the members with their assigned partitions")
    view.add_argument("--state", dest="view", action="store_const", const="state",
                      help="show the coordinator, assignment strategy, state and member count")
    p.set_defaults(view="offsets", run=describe_groups)

    p = sub.add_parser(
        "reset-offsets", parents=[client, output], help="reset a group's committed offsets",
        description="Reset the committed offsets of an inactive group (state Empty or Dead). Prints the "
                    "plan; only --execute commits it (--dry-run is the default).")
    p.add_argument("--group", metavar="GROUP", required=True, help="the consumer group")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", metavar="TOPIC[:P,P]", dest="topics", type=topic_spec, action="append",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has offsets for")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", dest="reset", action="store_const", const=ResetSpec("earliest"),
                        help="the log start offset")
    target.add_argument("--to-latest", dest="reset", action="store_const", const=ResetSpec("latest"),
                        help="the log end offset")
    target.add_argument("--to-offset", dest="reset", metavar="N", type=to_offset,
                        help="offset N (clamped into the log's range)")
    target.add_argument("--to-datetime", dest="reset", metavar="TIME", type=to_datetime,
                        help="the first offset whose timestamp is at or after TIME: ISO 8601 "
                             "(naive times are local) or epoch milliseconds")
    target.add_argument("--shift-by", dest="reset", metavar="N", type=shift_by,
                        help="the committed offset plus N (N may be negative; clamped into the log's range)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", dest="execute", action="store_false",
                      help="only print the plan (the default)")
    mode.add_argument("--execute", dest="execute", action="store_true", help="commit the new offsets")
    p.set_defaults(execute=None, run=reset_offsets)

    p = sub.add_parser("delete", parents=[client], help="delete consumer groups",
                       description="Delete consumer groups and their committed offsets. A group must be "
                                   "empty (no active members).")
    p.add_argument("--group", metavar="GROUP", dest="groups", action="append", required=True,
                   help="a group to delete (repeatable)")
    p.set_defaults(run=delete_groups)


# ---------------------------------------------------------------------------------------------------
# Argument types (pure)


def to_offset(text: str) -> ResetSpec:
    return ResetSpec("offset", non_negative_int(text))


def to_datetime(text: str) -> ResetSpec:
    return ResetSpec("datetime", timestamp_ms(text))


def shift_by(text: str) -> ResetSpec:
    try:
        return ResetSpec("shift", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None


def state_list(text: str) -> list[str]:
    """Comma-separated group states, case-insensitive, as Kafka's names."""
    by_lower = {s.lower(): s for s in STATES}
    states = []
    for item in text.split(","):
        name = by_lower.get(item.strip().lower())
        if name is None:
            raise argparse.ArgumentTypeError(f"unknown state '{item.strip()}' (expected one of {', '.join(STATES)})")
        states.append(name)
    return states


def type_list(text: str) -> list[str]:
    types = []
    for item in text.split(","):
        name = item.strip().lower()
        if name not in TYPES:
            raise argparse.ArgumentTypeError(f"unknown type '{item.strip()}' (expected classic or consumer)")
        types.append(name)
    return types


def topic_spec(text: str) -> tuple[str, tuple[int, ...] | None]:
    """`TOPIC` (every partition) or `TOPIC:P,P,...` (those partitions), as kafka-consumer-groups' --topic."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P, got '{text}'")
    if not sep:
        return topic, None
    numbers = []
    for item in partitions.split(","):
        item = item.strip()
        if not item.isdigit():
            raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P with partition numbers, got '{text}'")
        numbers.append(int(item))
    return topic, tuple(dict.fromkeys(numbers))


def flatten(lists: Iterable[list[str]]) -> list[str]:
    return list(dict.fromkeys(item for items in lists for item in items))


# ---------------------------------------------------------------------------------------------------
# Describe: one row per partition (pure)


@dataclass(frozen=True)
class Member:
    consumer_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartitionKey, ...] = ()
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PartitionRow:
    group: str
    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    def as_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "current_offset": self.current_offset,
                "log_end_offset": self.log_end_offset, "lag": self.lag, "consumer_id": self.consumer_id,
                "host": self.host, "client_id": self.client_id}


def lag(committed: int | None, log_end: int | None) -> int | None:
    """Log end offset minus committed offset; unknown (None) without a commit or a log end."""
    if committed is None or log_end is None:
        return None
    return log_end - committed


def partition_rows(group: str, members: Sequence[Member], committed: Mapping[TopicPartitionKey, int],
                   log_end: Mapping[TopicPartitionKey, int | None]) -> list[PartitionRow]:
    """Kafka's default describe view: every assigned partition with its owner, every committed partition
    no member owns, and a row without a partition for a member that owns none. Sorted by topic and partition."""
    rows = []
    owned = set()
    for member in members:
        if not member.assignment:
            rows.append(PartitionRow(group, None, None, None, None, None,
                                     member.consumer_id, member.host, member.client_id))
        for tp in member.assignment:
            owned.add(tp)
            current = committed.get(tp)
            end = log_end.get(tp)
            rows.append(PartitionRow(group, tp[0], tp[1], current, end, lag(current, end),
                                     member.consumer_id, member.host, member.client_id))
    for tp, current in committed.items():
        if tp not in owned:
            end = log_end.get(tp)
            rows.append(PartitionRow(group, tp[0], tp[1], current, end, lag(current, end), None, None, None))
    rows.sort(key=lambda r: (r.topic is None, r.topic or "", r.partition if r.partition is not None else -1,
                             r.consumer_id or ""))
    return rows


def assignment_text(assignment: Iterable[TopicPartitionKey]) -> str:
    """Kafka's verbose member view: `orders(0,1),events(2)`, topics sorted; '-' when empty."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return "-"
    return ",".join(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in sorted(by_topic.items()))


# ---------------------------------------------------------------------------------------------------
# Reset plan (pure)


@dataclass(frozen=True)
class ResetSpec:
    """What to reset to: earliest, latest, offset (value N), datetime (value epoch ms), shift (value N)."""

    kind: str
    value: int | None = None

    def describe(self) -> str:
        return {"earliest": "--to-earliest", "latest": "--to-latest", "offset": f"--to-offset {self.value}",
                "datetime": f"--to-datetime {self.value}", "shift": f"--shift-by {self.value}"}[self.kind]


@dataclass(frozen=True)
class PlannedOffset:
    topic: str
    partition: int
    current_offset: int | None
    new_offset: int

    def as_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "current_offset": self.current_offset,
                "new_offset": self.new_offset}


@dataclass
class ResetInputs:
    """What the plan is computed from: committed offsets, (log start, log end) per partition, and for
    --to-datetime the offset found for the time (None: no record at or after it)."""

    committed: Mapping[TopicPartitionKey, int]
    watermarks: Mapping[TopicPartitionKey, tuple[int, int]]
    offsets_for_time: Mapping[TopicPartitionKey, int | None] = field(default_factory=dict)


def partitions_to_reset(topics: Sequence[tuple[str, tuple[int, ...] | None]] | None, all_topics: bool,
                        partition_counts: Mapping[str, int],
                        committed: Mapping[TopicPartitionKey, int]) -> list[TopicPartitionKey]:
    """The partitions named by --topic (all of a topic, or the listed ones) or, for --all-topics, every
    partition the group has a committed offset for (in topics that still exist)."""
    if all_topics:
        return sorted(tp for tp in committed if tp[1] < partition_counts.get(tp[0], 0))
    chosen: dict[TopicPartitionKey, None] = {}
    problems = []
    for topic, partitions in topics or ():
        count = partition_counts.get(topic)
        if count is None:
            problems.append(f"topic '{topic}' does not exist")
            continue
        if partitions is None:
            partitions = tuple(range(count))
        missing = [p for p in partitions if p >= count]
        if missing:
            problems.append(f"topic '{topic}' has no partition {', '.join(map(str, missing))} (it has {count})")
            continue
        chosen.update(((topic, p), None) for p in partitions)
    if problems:
        raise CliError("; ".join(problems))
    return sorted(chosen)


def clamp(offset: int, low: int, high: int) -> int:
    """Into [log start, log end], as Kafka's reset does for explicit and shifted offsets."""
    return max(low, min(offset, high))


def reset_plan(partitions: Sequence[TopicPartitionKey], spec: ResetSpec, inputs: ResetInputs) -> list[PlannedOffset]:
    plan = []
    for tp in partitions:
        low, high = inputs.watermarks[tp]
        current = inputs.committed.get(tp)
        if spec.kind == "earliest":
            new = low
        elif spec.kind == "latest":
            new = high
        elif spec.kind == "offset":
            new = clamp(spec.value, low, high)
        elif spec.kind == "shift":
            if current is None:
                raise CliError(f"cannot shift the offset of {tp[0]}-{tp[1]}: the group has no committed offset for it")
            new = clamp(current + spec.value, low, high)
        elif spec.kind == "datetime":
            found = inputs.offsets_for_time.get(tp)
            # No record at or after that time: the log end, as Kafka does.
            new = high if found is None or found < 0 else clamp(found, low, high)
        else:  # pragma: no cover - the parser only makes the kinds above
            raise ValueError(f"unknown reset kind {spec.kind!r}")
        plan.append(PlannedOffset(tp[0], tp[1], current, new))
    return plan


# ---------------------------------------------------------------------------------------------------
# Client helpers


def state_name(state) -> str:
    """Kafka's name for a librdkafka ConsumerGroupState."""
    if state is None:
        return "Unknown"
    names = {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING": "CompletingRebalance"}
    name = getattr(state, "name", str(state))
    return names.get(name, name.replace("_", " ").title().replace(" ", ""))


def type_name(group_type) -> str | None:
    name = getattr(group_type, "name", None)
    if name is None or name == "UNKNOWN":
        return None
    return name.title()


def error_code(exc: Exception):
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


def group_request_failed(exc: Exception, args: argparse.Namespace, action: str) -> NoReturn:
    """A failed request to the group coordinator. The cluster answered the metadata request just before,
    so a timeout here means the coordinator did not answer (none found, or it never replied)."""
    from odradek.cli.main import is_unreachable, kafka_error_text, raise_for_kafka_error

    err = exc.args[0] if exc.args else None
    if hasattr(err, "code") and is_unreachable(err):
        raise CliError(f"{action}: no answer from the group coordinator within {args.timeout:g}s "
                       f"({kafka_error_text(err)})") from None
    raise_for_kafka_error(exc, args, action)


def connect(args: argparse.Namespace):
    """An admin client, after one metadata request (where 'cannot reach' shows); returns (admin, metadata)."""
    from odradek.cli.topics import admin_client, cluster_metadata

    admin = admin_client(args)
    return admin, cluster_metadata(admin, args)


def describe_group_objects(admin, groups: Sequence[str], args: argparse.Namespace) -> tuple[dict, list[str]]:
    """({group id: ConsumerGroupDescription}, [groups the coordinator does not know: GROUP_ID_NOT_FOUND]).

    Older coordinators describe an unknown group as state Dead instead; callers check that too."""
    from confluent_kafka import KafkaError, KafkaException

    futures = admin.describe_consumer_groups(list(groups), request_timeout=args.timeout)
    described = {}
    missing = []
    for group in groups:
        try:
            description = futures[group].result()
        except KafkaException as exc:
            if error_code(exc) == KafkaError.GROUP_ID_NOT_FOUND:
                missing.append(group)
                continue
            group_request_failed(exc, args, f"cannot describe group '{group}'")
        described[group] = description
    return described, missing


def committed_offsets(admin, group: str, args: argparse.Namespace) -> dict[TopicPartitionKey, int]:
    """The group's committed offsets (OffsetFetch for every partition)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=args.timeout)
    try:
        result = futures[group].result()
    except KafkaException as exc:
        group_request_failed(exc, args, f"cannot fetch the committed offsets of group '{group}'")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or ()
            if tp.error is None and tp.offset >= 0}


class OffsetLookup:
    """Log start / end offsets and offsets by time, through a consumer that never joins a group."""

    def __init__(self, args: argparse.Namespace):
        from confluent_kafka import Consumer, KafkaException

        from odradek.cli.main import client_config, raise_for_kafka_error

        self.args = args
        config = client_config(args, {"group.id": LOOKUP_GROUP},
                               {"enable.auto.commit": False, "enable.auto.offset.store": False})
        try:
            self.consumer = Consumer(config)
        except KafkaException as exc:
            raise_for_kafka_error(exc, args, "invalid client configuration")
        except (ValueError, TypeError) as exc:
            raise CliError(f"invalid client configuration: {exc}") from None

    def close(self) -> None:
        self.consumer.close()

    def watermarks(self, partitions: Iterable[TopicPartitionKey], strict: bool
                   ) -> dict[TopicPartitionKey, tuple[int, int] | None]:
        """(log start, log end) per partition; a failed lookup is an error when strict, else None."""
        from confluent_kafka import KafkaException, TopicPartition

        from odradek.cli.main import raise_for_kafka_error

        found: dict[TopicPartitionKey, tuple[int, int] | None] = {}
        for topic, partition in partitions:
            try:
                low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                timeout=self.args.timeout, cached=False)
            except KafkaException as exc:
                if strict:
                    raise_for_kafka_error(exc, self.args, f"cannot look up the offsets of {topic}-{partition}")
                found[(topic, partition)] = None
                continue
            found[(topic, partition)] = (low, high)
        return found

    def offsets_for_time(self, partitions: Sequence[TopicPartitionKey], timestamp: int
                         ) -> dict[TopicPartitionKey, int | None]:
        from confluent_kafka import KafkaException, TopicPartition

        from odradek.cli.main import kafka_error_text, raise_for_kafka_error

        if not partitions:
            return {}
        query = [TopicPartition(t, p, timestamp) for t, p in partitions]
        try:
            answers = self.consumer.offsets_for_times(query, timeout=self.args.timeout)
        except KafkaException as exc:
            raise_for_kafka_error(exc, self.args, "cannot look up offsets by timestamp")
        found: dict[TopicPartitionKey, int | None] = {}
        for tp in answers:
            if tp.error is not None:
                raise CliError(f"cannot look up the offset by timestamp of {tp.topic}-{tp.partition}: "
                               f"{kafka_error_text(tp.error)}")
            found[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return found


def note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------
# list


def list_groups(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType, KafkaException

    from odradek.cli.main import raise_for_kafka_error

    admin, _ = connect(args)
    states = flatten(args.state)
    types = flatten(args.type)
    options: dict = {"request_timeout": args.timeout}
    if states:
        by_name = {state_name(s): s for s in ConsumerGroupState}
        options["states"] = {by_name[s] for s in states if s in by_name}
    if types:
        options["types"] = {ConsumerGroupType[t.upper()] for t in types}
    try:
        result = admin.list_consumer_groups(**options).result()
    except KafkaException as exc:
        raise_for_kafka_error(exc, args, "cannot list groups")
    if result.errors:
        first = result.errors[0]
        raise_for_kafka_error(first if isinstance(first, KafkaException) else KafkaException(first), args,
                              "cannot list groups")
    rows = [{"group": g.group_id, "type": type_name(getattr(g, "type", None)),
             "state": state_name(getattr(g, "state", None))}
            for g in sorted(result.valid or (), key=lambda g: g.group_id)]
    if args.output == "json":
        print_json({"groups": rows})
    elif rows:
        print_table(["GROUP", "TYPE", "STATE"], [(r["group"], r["type"], r["state"]) for r in rows])
    return 0


# ---------------------------------------------------------------------------------------------------
# describe


def members_of(description) -> list[Member]:
    members = []
    for m in description.members or ():
        assignment = m.assignment.topic_partitions if m.assignment is not None else []
        members.append(Member(consumer_id=m.member_id, client_id=m.client_id, host=m.host,
                              assignment=tuple(sorted((tp.topic, tp.partition) for tp in assignment)),
                              group_instance_id=m.group_instance_id))
    return sorted(members, key=lambda m: m.consumer_id)


def coordinator_of(description) -> dict | None:
    node = description.coordinator
    if node is None or node.id is None or node.id < 0:
        return None
    return {"id": node.id, "host": node.host, "port": node.port}


def describe_groups(args: argparse.Namespace) -> int:
    admin, _ = connect(args)
    groups = list(dict.fromkeys(args.groups))
    described, missing = describe_group_objects(admin, groups, args)
    missing += [g for g, d in described.items() if state_name(getattr(d, "state", None)) == "Dead"]
    if missing:
        raise CliError("; ".join(f"group '{g}' does not exist" for g in groups if g in missing))

    documents = []
    if args.view == "offsets":
        lookup = OffsetLookup(args)
        try:
            for group in groups:
                description = described[group]
                members = members_of(description)
                committed = committed_offsets(admin, group, args)
                wanted = set(committed) | {tp for m in members for tp in m.assignment}
                ends = lookup.watermarks(sorted(wanted), strict=False)
                log_end = {tp: (w[1] if w is not None else None) for tp, w in ends.items()}
                rows = partition_rows(group, members, committed, log_end)
                documents.append({"group": group, "state": state_name(description.state), "rows": rows})
        finally:
            lookup.close()
    else:
        for group in groups:
            description = described[group]
            documents.append({"group": group, "description": description, "members": members_of(description),
                              "state": state_name(description.state)})

    if args.output == "json":
        print_json({"groups": [describe_json(args.view, d) for d in documents]})
        return 0
    for d in documents:
        if d["state"] == "Empty":
            note(f"group '{d['group']}' has no active members")
        elif d["state"] in REBALANCING_STATES:
            note(f"group '{d['group']}' is rebalancing")
    if args.view == "offsets":
        print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                     "HOST", "CLIENT-ID"],
                    [(r.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id,
                      r.host, r.client_id) for d in documents for r in d["rows"]])
    elif args.view == "members":
        print_table(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                     "ASSIGNMENT"],
                    [(d["group"], m.consumer_id, m.group_instance_id, m.host, m.client_id, len(m.assignment),
                      assignment_text(m.assignment)) for d in documents for m in d["members"]])
    else:
        rows = []
        for d in documents:
            coordinator = coordinator_of(d["description"])
            rows.append((d["group"],
                         f"{coordinator['host']}:{coordinator['port']} ({coordinator['id']})" if coordinator else None,
                         d["description"].partition_assignor or None, d["state"],
                         type_name(getattr(d["description"], "type", None)), len(d["members"])))
        print_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "TYPE", "#MEMBERS"], rows)
    return 0


def describe_json(view: str, d: dict) -> dict:
    if view == "offsets":
        return {"group": d["group"], "state": d["state"], "partitions": [r.as_json() for r in d["rows"]]}
    if view == "members":
        return {"group": d["group"], "state": d["state"], "members": [{
            "consumer_id": m.consumer_id,
            "group_instance_id": m.group_instance_id,
            "host": m.host,
            "client_id": m.client_id,
            "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
        } for m in d["members"]]}
    description = d["description"]
    return {
        "group": d["group"],
        "coordinator": coordinator_of(description),
        "assignment_strategy": description.partition_assignor or None,
        "state": d["state"],
        "type": type_name(getattr(description, "type", None)),
        "simple": bool(description.is_simple_consumer_group),
        "member_count": len(d["members"]),
    }


# ---------------------------------------------------------------------------------------------------
# reset-offsets


def reset_offsets(args: argparse.Namespace) -> int:
    admin, metadata = connect(args)
    group = args.group
    described, missing = describe_group_objects(admin, [group], args)
    state = "Dead" if missing else state_name(described[group].state)
    if state not in INACTIVE_STATES:
        raise CliError(f"assignments can only be reset if the group '{group}' is inactive, "
                       f"but the current state is {state}")
    committed = committed_offsets(admin, group, args)
    counts = {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}
    partitions = partitions_to_reset(args.topics, args.all_topics, counts, committed)
    if not partitions:
        raise CliError(f"group '{group}' has no committed offsets to reset (name partitions with --topic)")

    lookup = OffsetLookup(args)
    try:
        inputs = ResetInputs(committed, lookup.watermarks(partitions, strict=True))
        if args.reset.kind == "datetime":
            inputs.offsets_for_time = lookup.offsets_for_time(partitions, args.reset.value)
    finally:
        lookup.close()
    plan = reset_plan(partitions, args.reset, inputs)

    if args.execute:
        commit_plan(admin, group, plan, args)
    if args.output == "json":
        print_json({"group": group, "executed": bool(args.execute),
                    "partitions": [entry.as_json() for entry in plan]})
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                    [(group, e.topic, e.partition, e.current_offset, e.new_offset) for e in plan])
    if args.execute is None:
        note("nothing was executed: this was a dry run (use --execute to reset the offsets, "
             "--dry-run to only show the plan)")
    return 0


def commit_plan(admin, group: str, plan: Sequence[PlannedOffset], args: argparse.Namespace) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    from odradek.cli.main import kafka_error_text

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(e.topic, e.partition, e.new_offset) for e in plan])
    futures = admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)
    try:
        result = futures[group].result()
    except KafkaException as exc:
        group_request_failed(exc, args, f"cannot reset the offsets of group '{group}'")
    failed = [tp for tp in result.topic_partitions or () if tp.error is not None]
    if failed:
        raise CliError(f"cannot reset the offsets of group '{group}': " + "; ".join(
            f"{tp.topic}-{tp.partition}: {kafka_error_text(tp.error)}" for tp in failed))


# ---------------------------------------------------------------------------------------------------
# delete


def delete_groups(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, KafkaException


    admin, _ = connect(args)
    groups = list(dict.fromkeys(args.groups))
    futures = admin.delete_consumer_groups(groups, request_timeout=args.timeout)
    failures = []
    for group in groups:
        try:
            futures[group].result()
        except KafkaException as exc:
            code = error_code(exc)
            if code == KafkaError.NON_EMPTY_GROUP:
                failures.append(f"group '{group}' is not empty")
            elif code == KafkaError.GROUP_ID_NOT_FOUND:
                failures.append(f"group '{group}' does not exist")
            else:
                try:
                    group_request_failed(exc, args, f"cannot delete group '{group}'")
                except CliError as error:
                    failures.append(str(error))
            continue
        print(f"Deleted group {group}.")
    if failures:
        raise CliError("; ".join(failures))
    return 0
