"""The broker's per-partition counters and the deltas the sampler takes of them."""

from odradek.metrics.partition_counters import ZERO, CounterDelta, CounterDeltas, PartitionCounterTable


def test_appends_and_fetches_count_bytes_and_requests_per_partition():
    table = PartitionCounterTable()
    table.appended("orders", 0, 100)
    table.appended("orders", 0, 50)
    table.appended("orders", 1, 7)
    table.fetched("orders", 0, 150)
    table.fetched("orders", 0, 0)  # an empty response still counts as a request
    assert table.partitions[("orders", 0)].values() == (150, 150, 2, 2)
    assert table.partitions[("orders", 1)].values() == (7, 0, 1, 0)


def test_deltas_are_the_gains_since_the_previous_reading():
    table, deltas = PartitionCounterTable(), CounterDeltas()
    table.appended("t", 0, 10)
    assert deltas.take(table) == {("t", 0): CounterDelta(10, 0, 1, 0)}
    table.appended("t", 0, 5)
    table.fetched("t", 0, 15)
    assert deltas.take(table) == {("t", 0): CounterDelta(5, 15, 1, 1)}
    assert deltas.take(table) == {}  # nothing gained: nothing listed


def test_a_counter_made_again_after_it_was_forgotten_counts_from_zero():
    table, deltas = PartitionCounterTable(), CounterDeltas()
    table.appended("t", 0, 1000)
    deltas.take(table)
    table.prune([])  # the partition moved away ...
    table.appended("t", 0, 2000)  # ... and back: a new entry, larger than the old one
    assert deltas.take(table) == {("t", 0): CounterDelta(2000, 0, 1, 0)}


def test_a_counter_that_went_backwards_is_a_reset():
    """A node restart (a new table read by the same reader) or a recreated entry with lower counts: the delta is
    what the counter holds now, never negative."""
    table, deltas = PartitionCounterTable(), CounterDeltas()
    for _ in range(5):
        table.appended("t", 0, 100)
    deltas.take(table)
    restarted = PartitionCounterTable()
    restarted.appended("t", 0, 30)
    assert deltas.take(restarted) == {("t", 0): CounterDelta(30, 0, 1, 0)}
    table.partitions[("t", 0)].bytes_in = 10  # the same entry, lower: still a reset
    assert deltas.take(table) == {("t", 0): CounterDelta(10, 0, 5, 0)}
    assert deltas.take(table).get(("t", 0), ZERO) == ZERO


def test_pruning_keeps_the_hosted_partitions():
    table = PartitionCounterTable()
    table.appended("a", 0, 1)
    table.appended("b", 0, 1)
    table.prune([("a", 0)])
    assert list(table.partitions) == [("a", 0)]
