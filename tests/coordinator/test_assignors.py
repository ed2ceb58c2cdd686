"""The KIP-848 server assignors: every partition assigned once to a subscriber, balance, stickiness, and range
semantics matching Kafka's RangeAssignor."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.assignors import ASSIGNORS, MemberSubscription, range_assign, uniform_assign

T1, T2, T3 = b"\x01" * 16, b"\x02" * 16, b"\x03" * 16
NAMES = {T1: "t1", T2: "t2", T3: "t3"}


def subs(spec: dict[str, set[str]]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(m, None, frozenset(topics)) for m, topics in spec.items()}


def topics_of(counts: dict[bytes, int]) -> dict[bytes, tuple[str, int]]:
    return {t: (NAMES[t], n) for t, n in counts.items()}


def owner_map(result) -> dict[tuple[bytes, int], str]:
    owners: dict[tuple[bytes, int], str] = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            for p in partitions:
                assert (topic_id, p) not in owners, f"{topic_id!r}-{p} assigned twice"
                owners[(topic_id, p)] = member_id
    return owners


def assert_valid(members, topics, result) -> dict[tuple[bytes, int], str]:
    assert set(result) == set(members)
    owners = owner_map(result)
    for topic_id, (name, count) in topics.items():
        subscribers = {m for m, s in members.items() if name in s.topics}
        for p in range(count):
            if subscribers:
                assert owners.get((topic_id, p)) in subscribers, f"{name}-{p} not assigned to a subscriber"
            else:
                assert (topic_id, p) not in owners
    assert all(0 <= p < topics[t][1] for t, p in owners)
    return owners


def sizes(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def per_topic(result, topic_id) -> list[int]:
    return [len(a.get(topic_id, ())) for a in result.values()]


def moved(before, after) -> int:
    old, new = owner_map(before), owner_map(after)
    return sum(1 for tp, m in old.items() if tp in new and new[tp] != m)


# ------------------------------------------------------------------------------------------------ uniform

def test_uniform_single_topic_six_partitions_three_members_is_two_each():
    members = subs({"a": {"t1"}, "b": {"t1"}, "c": {"t1"}})
    result = uniform_assign(members, topics_of({T1: 6}), {})
    assert_valid(members, topics_of({T1: 6}), result)
    assert sizes(result) == {"a": 2, "b": 2, "c": 2}


def test_uniform_fresh_assignment_spreads_every_topic():
    members = subs({"a": {"t1", "t2"}, "b": {"t1", "t2"}})
    topics = topics_of({T1: 3, T2: 3})
    result = uniform_assign(members, topics, {})
    assert_valid(members, topics, result)
    assert sorted(per_topic(result, T1)) == [1, 2] and sorted(per_topic(result, T2)) == [1, 2]
    assert sizes(result) == {"a": 3, "b": 3}


def test_uniform_adding_a_member_moves_only_what_it_receives():
    topics = topics_of({T1: 6})
    before = uniform_assign(subs({"a": {"t1"}, "b": {"t1"}}), topics, {})
    after = uniform_assign(subs({"a": {"t1"}, "b": {"t1"}, "c": {"t1"}}), topics, before)
    assert sizes(after) == {"a": 2, "b": 2, "c": 2}
    assert moved(before, after) == 2
    for m in ("a", "b"):
        assert after[m][T1] <= before[m][T1]


def test_uniform_removing_a_member_keeps_everything_the_others_had():
    topics = topics_of({T1: 7, T2: 5})
    spec = {m: {"t1", "t2"} for m in "abcd"}
    before = uniform_assign(subs(spec), topics, {})
    del spec["c"]
    after = uniform_assign(subs(spec), topics, before)
    assert_valid(subs(spec), topics, after)
    for m in spec:
        for t, ps in before[m].items():
            assert ps <= after[m].get(t, set())
    assert max(sizes(after).values()) - min(sizes(after).values()) <= 1


def test_uniform_heterogeneous_gives_the_lone_topic_to_its_only_subscriber_and_balances_totals():
    members = subs({"a": {"t1"}, "b": {"t1", "t2"}})
    topics = topics_of({T1: 10, T2: 10})
    result = uniform_assign(members, topics, {})
    assert_valid(members, topics, result)
    assert sizes(result) == {"a": 10, "b": 10}
    assert result["b"][T2] == set(range(10))


def test_uniform_ignores_unknown_topics_and_unsubscribed_members():
    members = subs({"a": {"t1", "nope"}, "b": set()})
    topics = topics_of({T1: 3})
    result = uniform_assign(members, topics, {"b": {T1: {0}}})
    assert result == {"a": {T1: {0, 1, 2}}, "b": {}}


def test_uniform_drops_current_partitions_of_unsubscribed_or_shrunk_topics():
    members = subs({"a": {"t1"}, "b": {"t1"}})
    topics = topics_of({T1: 2})
    result = uniform_assign(members, topics, {"a": {T1: {0, 5}, T2: {0}}, "b": {T1: {0}}})
    assert_valid(members, topics, result)
    assert result == {"a": {T1: {0}}, "b": {T1: {1}}}


def test_assignors_are_deterministic_whatever_the_dict_order():
    rng = random.Random(7)
    spec = {f"m{i}": {"t1", "t2"} if i % 3 else {"t2", "t3"} for i in range(7)}
    topics = topics_of({T1: 11, T2: 4, T3: 9})
    for assign in ASSIGNORS.values():
        first = assign(subs(spec), topics, {})
        keys = list(spec)
        rng.shuffle(keys)
        shuffled = {k: spec[k] for k in keys}
        topic_keys = list(topics)
        rng.shuffle(topic_keys)
        assert assign(subs(shuffled), {k: topics[k] for k in topic_keys}, {}) == first


# ------------------------------------------------------------------------------------------------ range

def classic_range(member_ids: list[str], count: int) -> dict[str, set[int]]:
    """Kafka's classic RangeAssignor for one topic: sorted members, the first count % n get one more."""
    ordered = sorted(member_ids)
    base, extra = divmod(count, len(ordered))
    result, start = {}, 0
    for i, m in enumerate(ordered):
        n = base + (1 if i < extra else 0)
        result[m] = set(range(start, start + n))
        start += n
    return result


def test_range_from_scratch_is_the_classic_range_assignment_per_topic():
    members = subs({"c": {"t1", "t2"}, "a": {"t1", "t2"}, "b": {"t1"}})
    topics = topics_of({T1: 7, T2: 3})
    result = range_assign(members, topics, {})
    assert_valid(members, topics, result)
    expected_t1 = classic_range(["a", "b", "c"], 7)
    expected_t2 = classic_range(["a", "c"], 3)
    for m in "abc":
        assert result[m].get(T1, set()) == expected_t1[m]
        assert result[m].get(T2, set()) == expected_t2.get(m, set())


def test_range_co_partitioned_topics_line_up():
    members = subs({m: {"t1", "t2"} for m in "xyz"})
    result = range_assign(members, topics_of({T1: 8, T2: 8}), {})
    for m in "xyz":
        assert result[m][T1] == result[m][T2]


def test_range_is_sticky_when_a_member_joins():
    topics = topics_of({T1: 6})
    before = range_assign(subs({"a": {"t1"}, "c": {"t1"}}), topics, {})
    assert before == {"a": {T1: {0, 1, 2}}, "c": {T1: {3, 4, 5}}}
    after = range_assign(subs({"a": {"t1"}, "b": {"t1"}, "c": {"t1"}}), topics, before)
    assert after == {"a": {T1: {0, 1}}, "b": {T1: {2, 5}}, "c": {T1: {3, 4}}}


# ------------------------------------------------------------------------------------------------ properties

member_names = st.sampled_from([f"m{i}" for i in range(9)])
subscription = st.frozensets(st.sampled_from(["t1", "t2", "t3"]), min_size=0, max_size=3)
group_spec = st.dictionaries(member_names, subscription, min_size=1, max_size=9)
partition_counts = st.fixed_dictionaries({T1: st.integers(0, 12), T2: st.integers(0, 12), T3: st.integers(0, 30)})


@st.composite
def current_assignments(draw, members: dict, topics: dict):
    """A consistent previous assignment: each partition with at most one previous owner (any member, maybe gone)."""
    owners = [*members, "gone"]
    result: dict[str, dict[bytes, set[int]]] = {}
    for topic_id, (_, count) in topics.items():
        for p in range(count + 2):  # a few partitions that no longer exist
            owner = draw(st.sampled_from([None, *owners]))
            if owner is not None:
                result.setdefault(owner, {}).setdefault(topic_id, set()).add(p)
    return result


def kafka_balanced(members, topics, result) -> bool:
    """Kafka's criterion: no member could take a partition of a topic it subscribes to from an owner holding at
    least two partitions more than it."""
    size = sizes(result)
    owners = owner_map(result)
    for (topic_id, _), owner in owners.items():
        name = topics[topic_id][0]
        for m, s in members.items():
            if name in s.topics and size[m] + 1 < size[owner]:
                return False
    return True


@settings(max_examples=300, deadline=None)
@given(data=st.data(), spec=group_spec, counts=partition_counts)
def test_property_uniform_valid_balanced_and_stable(data, spec, counts):
    members, topics = subs(spec), topics_of(counts)
    current = data.draw(current_assignments(spec, topics))
    result = uniform_assign(members, topics, current)
    assert_valid(members, topics, result)
    assert kafka_balanced(members, topics, result)
    if len({s.topics for s in members.values()}) == 1:
        assert max(sizes(result).values()) - min(sizes(result).values()) <= 1
    assert uniform_assign(members, topics, result) == result  # a balanced assignment is a fixed point


@settings(max_examples=200, deadline=None)
@given(spec=group_spec, counts=partition_counts)
def test_property_uniform_from_scratch_balances_each_topic_when_subscriptions_match(spec, counts):
    same = {m: frozenset({"t1", "t2", "t3"}) for m in spec}
    result = uniform_assign(subs(same), topics_of(counts), {})
    for topic_id in counts:
        spread = per_topic(result, topic_id)
        assert max(spread) - min(spread) <= 1


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 8), counts=partition_counts)
def test_property_uniform_new_member_moves_the_minimum(data, n, counts):
    """Homogeneous group: adding a member revokes only what balance forces the others to give up."""
    topics = topics_of(counts)
    everything = frozenset({"t1", "t2", "t3"})
    spec = {f"m{i}": everything for i in range(n)}
    current = data.draw(current_assignments(spec, topics))
    before = uniform_assign(subs(spec), topics, current)
    spec["new"] = everything
    after = uniform_assign(subs(spec), topics, before)
    total = sum(counts.values())
    base, extras = divmod(total, len(spec))
    held = sorted((sum(len(ps) for ps in before[m].values()) for m in before), reverse=True)
    minimum = 0
    for count in held:  # the fullest members keep the extra partitions
        quota = base + 1 if extras > 0 and count > base else base
        if quota > base:
            extras -= 1
        minimum += max(0, count - quota)
    assert moved(before, after) == minimum


@settings(max_examples=300, deadline=None)
@given(data=st.data(), spec=group_spec, counts=partition_counts)
def test_property_range_valid_and_balanced_per_topic(data, spec, counts):
    members, topics = subs(spec), topics_of(counts)
    current = data.draw(current_assignments(spec, topics))
    result = range_assign(members, topics, current)
    assert_valid(members, topics, result)
    for topic_id, (name, count) in topics.items():
        subscribers = [m for m in spec if name in spec[m]]
        if subscribers:
            spread = [len(result[m].get(topic_id, ())) for m in subscribers]
            base, extra = divmod(count, len(subscribers))
            assert sorted(spread) == [base] * (len(subscribers) - extra) + [base + 1] * extra
    assert range_assign(members, topics, result) == result
    if not current:
        for topic_id, (name, count) in topics.items():
            subscribers = [m for m in spec if name in spec[m]]
            if subscribers:
                expected = classic_range(subscribers, count)
                assert {m: result[m].get(topic_id, set()) for m in subscribers} == expected
