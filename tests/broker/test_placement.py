"""Replica placement: the rack-alternated broker order and the replicas it gives each partition."""

from collections import Counter

import pytest

from odradek.controller.placement import place_replicas, rack_alternated


def racks_spanned(racks: dict[int, str | None], replicas: list[int]) -> int:
    return len({racks[b] for b in replicas})


# rack_alternated


def test_brokers_without_racks_keep_id_order():
    assert rack_alternated({3: None, 1: None, 2: None}) == [1, 2, 3]


def test_no_brokers_give_an_empty_order():
    assert rack_alternated({}) == []


def test_brokers_take_turns_by_rack_in_rack_name_order():
    racks = {1: "b", 2: "b", 3: "a", 4: "a", 5: "c", 6: "c"}
    assert rack_alternated(racks) == [3, 1, 5, 4, 2, 6]


def test_uneven_racks_take_turns_while_each_lasts():
    assert rack_alternated({1: "a", 2: "a", 3: "a", 4: "b"}) == [1, 4, 2, 3]
    assert rack_alternated({1: "a", 2: "b", 3: "b", 4: "c", 5: "b"}) == [1, 2, 4, 3, 5]


def test_unracked_brokers_form_one_group_after_the_racks():
    assert rack_alternated({1: None, 2: "a", 3: None, 4: "b", 5: "a"}) == [2, 4, 1, 5, 3]


def test_the_order_does_not_depend_on_how_the_brokers_were_listed():
    racks = {1: "a", 2: "b", 3: None, 4: "a", 5: "b", 6: None}
    assert rack_alternated(dict(reversed(racks.items()))) == rack_alternated(racks) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("racks", [
    {1: None},
    {1: "a", 2: "a", 3: "b"},
    {7: None, 3: "z", 9: "a", 4: None, 5: "a"},
    {b: f"r{b % 4}" for b in range(1, 12)},
])
def test_every_broker_appears_exactly_once(racks):
    assert sorted(rack_alternated(racks)) == sorted(racks)


# place_replicas


def test_each_partition_starts_one_broker_further_and_each_round_shifts_the_followers():
    racks = dict.fromkeys([1, 2, 3])
    assert place_replicas(racks, 6, 2) == {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3], 4: [2, 1], 5: [3, 2]}


def test_runs_follow_the_rack_alternated_order():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}  # alternated: 1, 3, 2, 4
    assert place_replicas(racks, 4, 2) == {0: [1, 3], 1: [3, 2], 2: [2, 4], 3: [4, 1]}


def test_no_partitions_place_nothing():
    assert place_replicas({1: None, 2: None}, 0, 2) == {}


@pytest.mark.parametrize("brokers", [1, 2, 3, 5, 8])
def test_replicas_of_a_partition_are_distinct_brokers(brokers):
    racks = dict.fromkeys(range(1, brokers + 1))
    for replication_factor in range(1, brokers + 1):
        for replicas in place_replicas(racks, 2 * brokers + 1, replication_factor).values():
            assert len(replicas) == replication_factor
            assert len(set(replicas)) == replication_factor


def test_replication_factor_of_every_broker_puts_each_partition_everywhere():
    racks = {1: "a", 2: "b", 3: None}
    assert all(sorted(r) == [1, 2, 3] for r in place_replicas(racks, 6, 3).values())


def test_leaders_and_replicas_spread_evenly():
    racks = dict.fromkeys([10, 20, 30, 40, 50])
    placed = place_replicas(racks, 50, 3)
    assert Counter(replicas[0] for replicas in placed.values()) == dict.fromkeys(racks, 10)
    assert Counter(b for replicas in placed.values() for b in replicas) == dict.fromkeys(racks, 30)


@pytest.mark.parametrize("first_index", [1, 3, 4, 7])
def test_first_index_continues_the_rotation(first_index):
    racks = {1: "a", 2: "a", 3: "b", 4: "c"}
    whole = place_replicas(racks, first_index + 5, 2)
    added = place_replicas(racks, 5, 2, first_index=first_index)
    assert sorted(added) == list(range(first_index, first_index + 5))
    assert added == {i: whole[i] for i in added}


def test_partitions_added_later_keep_the_leaders_even():
    racks = dict.fromkeys([1, 2, 3])
    first = place_replicas(racks, 2, 1)
    later = place_replicas(racks, 4, 1, first_index=2)
    assert Counter(r[0] for r in [*first.values(), *later.values()]) == {1: 2, 2: 2, 3: 2}


@pytest.mark.parametrize("replication_factor", [2, 3])
def test_even_racks_give_each_partition_distinct_racks(replication_factor):
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for replicas in place_replicas(racks, 12, replication_factor).values():
        assert racks_spanned(racks, replicas) == replication_factor, replicas


def test_unracked_brokers_count_as_one_more_rack():
    racks = {1: "a", 2: "a", 3: None, 4: None}
    for replicas in place_replicas(racks, 8, 2).values():
        assert racks_spanned(racks, replicas) == 2, replicas


def test_mixed_racked_and_unracked_brokers_all_get_leaders():
    racks = {1: "a", 2: "b", 3: None, 4: None, 5: "a"}
    placed = place_replicas(racks, 10, 3)
    assert Counter(r[0] for r in placed.values()) == dict.fromkeys(racks, 2)
    assert all(len(set(r)) == 3 for r in placed.values())


def test_uneven_racks_keep_leaders_even_over_the_brokers():
    racks = {1: "a", 2: "a", 3: "a", 4: "b"}
    placed = place_replicas(racks, 8, 2)
    assert Counter(r[0] for r in placed.values()) == dict.fromkeys(racks, 2)
    # Rack spread comes first: the only broker of rack b holds a replica of every partition.
    assert all(4 in r for r in placed.values())
    in_rack_a = Counter(b for r in placed.values() for b in r if b != 4)
    assert sum(in_rack_a.values()) == 8 and max(in_rack_a.values()) - min(in_rack_a.values()) <= 1


def test_uneven_racks_still_give_each_partition_as_many_racks_as_it_can_use():
    racks = {1: "a", 2: "a", 3: "a", 4: "b"}
    for replicas in place_replicas(racks, 8, 2).values():
        assert racks_spanned(racks, replicas) == 2, replicas
