"""Server-side partition assignors of KIP-848 consumer groups: Kafka's "uniform" and "range".

Pure functions: the same input always gives the same output (members, topics and partitions are visited in
sorted order, ties broken by member id), and nothing is mutated.

    members  member id -> MemberSubscription (topic *names*; a regex subscription is resolved by the caller)
    topics   topic id -> (name, partition count): the group's subscribed topics that exist
    current  member id -> {topic id: partitions}: the group's current *target* assignment (stickiness)
    result   member id -> {topic id: partitions}, for every member (an empty dict when it gets nothing)

Every partition of a topic that has at least one subscriber is assigned to exactly one subscriber of that
topic; nothing is assigned to a member not subscribed to its topic. Subscribed names missing from `topics`
are ignored (a topic that does not exist has nothing to assign). Rack ids are accepted and not used: Kafka
4.0's uniform assignor no longer does rack-aware placement either.

uniform (Kafka's UniformAssignor; Balance > Stickiness):
- every member subscribes to the same topics (homogeneous): each member gets floor(P/M) or ceil(P/M) of the P
  partitions in total. A member keeps as many of its current partitions as its quota allows, and the members
  holding the most keep the ceil quotas, so the number of partitions that change owner is the minimum
  possible. New or freed partitions go round-robin to the members below quota, which spreads each topic
  over the members when the assignment starts from scratch.
- otherwise (heterogeneous): current partitions still subscribed are kept; unassigned partitions go, topic by
  topic (most partitions per subscriber first), to the subscriber holding the fewest partitions; then
  partitions move one at a time from a member to a less loaded subscriber of the same topic until no member
  could take a partition from a member holding two or more partitions more than it (Kafka's balance
  criterion). Totals are balanced, not each topic.

range (Kafka's server-side RangeAssignor, sticky range): topic by topic, the S subscribers sorted by member id
get floor(N/S) partitions and the first N % S of them one more; a member keeps its lowest-numbered current
partitions up to its quota (and one extra while extras remain), and the free partitions are handed out in
contiguous ascending ranges in member-id order. From scratch this is exactly the classic range assignment,
so co-partitioned topics line up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ASSIGNORS", "MemberSubscription", "TopicPartitions", "range_assign", "uniform_assign"]

TopicPartitions = dict[bytes, set[int]]


@dataclass(frozen=True)
class MemberSubscription:
    member_id: str
    rack_id: str | None
    topics: frozenset[str]


def _subscribed_ids(members: dict[str, MemberSubscription],
                    topics: dict[bytes, tuple[str, int]]) -> dict[str, tuple[bytes, ...]]:
    by_name = {name: topic_id for topic_id, (name, count) in topics.items() if count > 0}
    return {member_id: tuple(sorted(by_name[name] for name in sub.topics if name in by_name))
            for member_id, sub in members.items()}


def _current_partitions(member_ids: list[str], subscribed: dict[str, tuple[bytes, ...]],
                        counts: dict[bytes, int], current: dict[str, TopicPartitions]
                        ) -> dict[str, list[tuple[bytes, int]]]:
    """Each member's current partitions that still exist and that it still subscribes to, sorted; a partition
    claimed by two members (never the case for a consistent target assignment) stays with the first by id."""
    taken: set[tuple[bytes, int]] = set()
    result = {}
    for member_id in member_ids:
        topics = set(subscribed[member_id])
        kept = []
        for topic_id, partitions in sorted(current.get(member_id, {}).items()):
            if topic_id not in topics:
                continue
            for partition in sorted(partitions):
                tp = (topic_id, partition)
                if 0 <= partition < counts[topic_id] and tp not in taken:
                    taken.add(tp)
                    kept.append(tp)
        result[member_id] = kept
    return result


def _to_result(member_ids, owned: dict[str, list[tuple[bytes, int]]]) -> dict[str, TopicPartitions]:
    result: dict[str, TopicPartitions] = {}
    for member_id in member_ids:
        assignment: TopicPartitions = {}
        for topic_id, partition in owned[member_id]:
            assignment.setdefault(topic_id, set()).add(partition)
        result[member_id] = assignment
    return result


def uniform_assign(members: dict[str, MemberSubscription], topics: dict[bytes, tuple[str, int]],
                   current: dict[str, TopicPartitions]) -> dict[str, TopicPartitions]:
    member_ids = sorted(members)
    subscribed = _subscribed_ids(members, topics)
    counts = {topic_id: count for topic_id, (_, count) in topics.items()}
    kept = _current_partitions(member_ids, subscribed, counts, current)
    if not member_ids:
        return {}
    if len({subscribed[m] for m in member_ids}) == 1:
        owned = _uniform_homogeneous(member_ids, subscribed[member_ids[0]], counts, kept)
    else:
        owned = _uniform_heterogeneous(member_ids, subscribed, counts, kept)
    return _to_result(member_ids, owned)


def _uniform_homogeneous(member_ids: list[str], topic_ids: tuple[bytes, ...], counts: dict[bytes, int],
                         kept: dict[str, list[tuple[bytes, int]]]) -> dict[str, list[tuple[bytes, int]]]:
    total = sum(counts[t] for t in topic_ids)
    base, extras = divmod(total, len(member_ids))
    owned: dict[str, list[tuple[bytes, int]]] = {}
    quota: dict[str, int] = {}
    # The members holding the most keep the extra partitions: that revokes the fewest.
    for member_id in sorted(member_ids, key=lambda m: (-len(kept[m]), m)):
        held = kept[member_id]
        quota[member_id] = base
        if len(held) > base and extras > 0:
            quota[member_id] = base + 1
            extras -= 1
        owned[member_id] = held[:quota[member_id]]
    for member_id in member_ids:  # extras left over go to members that did not keep one, by member id
        if extras == 0:
            break
        if quota[member_id] == base:
            quota[member_id] = base + 1
            extras -= 1
    assigned = {tp for held in owned.values() for tp in held}
    free = [(t, p) for t in topic_ids for p in range(counts[t]) if (t, p) not in assigned]
    unfilled = [m for m in member_ids if len(owned[m]) < quota[m]]
    i = 0
    for tp in free:  # round-robin over the members below quota
        while len(owned[unfilled[i % len(unfilled)]]) >= quota[unfilled[i % len(unfilled)]]:
            i += 1
        owned[unfilled[i % len(unfilled)]].append(tp)
        i += 1
    return owned


def _uniform_heterogeneous(member_ids: list[str], subscribed: dict[str, tuple[bytes, ...]],
                           counts: dict[bytes, int], kept: dict[str, list[tuple[bytes, int]]]
                           ) -> dict[str, list[tuple[bytes, int]]]:
    subscribers: dict[bytes, list[str]] = {}
    for member_id in member_ids:
        for topic_id in subscribed[member_id]:
            subscribers.setdefault(topic_id, []).append(member_id)
    # Most partitions per subscriber first, then fewest subscribers, then topic id (Kafka's order).
    topic_order = sorted(subscribers, key=lambda t: (-counts[t] / len(subscribers[t]), len(subscribers[t]), t))
    owner: dict[tuple[bytes, int], str] = {}
    size = {m: len(kept[m]) for m in member_ids}
    for member_id in member_ids:
        for tp in kept[member_id]:
            owner[tp] = member_id

    def least_loaded(topic_id: bytes) -> str:
        return min(subscribers[topic_id], key=lambda m: (size[m], m))

    for topic_id in topic_order:
        for partition in range(counts[topic_id]):
            if (topic_id, partition) not in owner:
                member_id = least_loaded(topic_id)
                owner[(topic_id, partition)] = member_id
                size[member_id] += 1
    # Each move lowers the sum of squared sizes, so this ends.
    moved = True
    while moved:
        moved = False
        for topic_id in topic_order:
            if len(subscribers[topic_id]) < 2:
                continue
            for partition in range(counts[topic_id]):
                current_owner = owner[(topic_id, partition)]
                candidate = least_loaded(topic_id)
                if size[candidate] + 1 < size[current_owner]:
                    owner[(topic_id, partition)] = candidate
                    size[current_owner] -= 1
                    size[candidate] += 1
                    moved = True
    owned: dict[str, list[tuple[bytes, int]]] = {m: [] for m in member_ids}
    for tp in sorted(owner):
        owned[owner[tp]].append(tp)
    return owned


def range_assign(members: dict[str, MemberSubscription], topics: dict[bytes, tuple[str, int]],
                 current: dict[str, TopicPartitions]) -> dict[str, TopicPartitions]:
    member_ids = sorted(members)
    subscribed = _subscribed_ids(members, topics)
    result: dict[str, TopicPartitions] = {m: {} for m in member_ids}
    for topic_id in sorted(topics):
        count = topics[topic_id][1]
        topic_members = [m for m in member_ids if topic_id in subscribed[m]]
        if not topic_members or count <= 0:
            continue
        base, extras = divmod(count, len(topic_members))
        held: dict[str, list[int]] = {}
        claimed: set[int] = set()
        for member_id in topic_members:  # a partition held twice (never in a consistent input) stays with one
            mine = sorted(p for p in current.get(member_id, {}).get(topic_id, ()) if 0 <= p < count
                          and p not in claimed)
            claimed.update(mine)
            held[member_id] = mine
        sticky: set[int] = set()
        remaining: list[tuple[str, int]] = []
        for member_id in topic_members:
            keep = held[member_id][:base]
            need = base - len(held[member_id])
            if need < 0 and extras > 0:
                extras -= 1
                keep = held[member_id][:base + 1]
            else:
                remaining.append((member_id, need))
            sticky.update(keep)
            if keep:
                result[member_id][topic_id] = set(keep)
        free = [p for p in range(count) if p not in sticky]
        start = 0
        for member_id, need in remaining:
            if extras > 0:
                need += 1
                extras -= 1
            if need > 0:
                chunk = free[start:start + need]
                start += need
                if chunk:
                    result[member_id].setdefault(topic_id, set()).update(chunk)
    return result


ASSIGNORS: dict[str, Callable[[dict[str, MemberSubscription], dict[bytes, tuple[str, int]],
                               dict[str, TopicPartitions]], dict[str, TopicPartitions]]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
