"""The JOIN operator's core, driven without Spark: each join kind and type, windows, grace, null padding."""

from odradek.sql.joins import LEFT, RIGHT, Joined, JoinRecord, JoinSpec, JoinStep


def rec(side, rowtime, values, offset=0):
    return JoinRecord(side, rowtime, (0, offset), values)


def test_stream_table_join_uses_the_table_row_as_of_the_stream_record():
    step = JoinStep(JoinSpec("STREAM_TABLE", "INNER"))
    out, state, wake = step.run(None, [rec(LEFT, 1, ("o1",)), rec(RIGHT, 2, ("alice",)), rec(LEFT, 3, ("o2",)),
                                       rec(RIGHT, 3, ("alicia",))], None)
    # o1 came before the user existed; o2 at 3 sees the update at 3 (the table side goes first at equal times)
    assert out == [Joined(("o2",), ("alicia",), 3)] and state == ("alicia",) and wake is None
    out, state, _ = step.run(state, [rec(RIGHT, 4, None), rec(LEFT, 5, ("o3",))], None)
    assert out == [] and state is None  # the user was deleted


def test_stream_table_left_join_pads_a_miss_with_nulls():
    step = JoinStep(JoinSpec("STREAM_TABLE", "LEFT"))
    out, _, _ = step.run(None, [rec(LEFT, 1, ("o1",))], None)
    assert out == [Joined(("o1",), None, 1)]


def test_table_table_join_types_decide_between_upsert_and_tombstone():
    for join_type, expected in (("INNER", [True, False, True]), ("LEFT", [False, False, True]),
                                ("FULL", [False, False, False])):
        step = JoinStep(JoinSpec("TABLE_TABLE", join_type))
        out1, state, _ = step.run(None, [rec(LEFT, 1, ("a",))], None)
        out2, state, _ = step.run(state, [rec(RIGHT, 2, ("b",))], None)
        out3, state, _ = step.run(state, [rec(LEFT, 3, None)], None)
        tombstones = [out1[0].tombstone, out2[0].tombstone, out3[0].tombstone]
        assert tombstones == expected, join_type
        assert out2[0] == Joined(("a",), ("b",), 2)


def test_stream_stream_join_matches_within_the_window_only():
    step = JoinStep(JoinSpec("STREAM_STREAM", "INNER", before_ms=10, after_ms=20, grace_ms=5))
    out, state, wake = step.run(None, [rec(LEFT, 100, ("l",)), rec(RIGHT, 89, ("too early",)),
                                       rec(RIGHT, 90, ("r1",)), rec(RIGHT, 120, ("r2",)),
                                       rec(RIGHT, 121, ("too late",))], None)
    assert sorted(j.right for j in out) == [("r1",), ("r2",)]
    assert wake == 89 + 10 + 5  # the earliest buffered record's window closes first


def test_stream_stream_late_records_are_dropped_and_expired_ones_forgotten():
    step = JoinStep(JoinSpec("STREAM_STREAM", "INNER", before_ms=10, after_ms=10, grace_ms=0))
    _, state, _ = step.run(None, [rec(LEFT, 100, ("l",))], None)
    out, state, _ = step.run(state, [rec(RIGHT, 105, ("r",))], 200)  # stream time 200: both have closed
    assert out == [] and state is None


def test_stream_stream_left_and_full_joins_pad_unmatched_records_when_their_window_closes():
    left = JoinStep(JoinSpec("STREAM_STREAM", "LEFT", before_ms=10, after_ms=10, grace_ms=5))
    _, state, wake = left.run(None, [rec(LEFT, 100, ("l",)), rec(RIGHT, 300, ("r",))], None)
    assert wake == 115
    out, state, _ = left.run(state, [], 114)
    assert out == []
    out, state, _ = left.run(state, [], 115)
    assert out == [Joined(("l",), None, 100)]
    out, _, _ = left.run(state, [], 400)
    assert out == []  # an unmatched right record is dropped silently in a LEFT join
    full = JoinStep(JoinSpec("STREAM_STREAM", "FULL", before_ms=10, after_ms=10, grace_ms=5))
    _, state, _ = full.run(None, [rec(RIGHT, 300, ("r",))], None)
    out, _, _ = full.run(state, [], 400)
    assert out == [Joined(None, ("r",), 300)]
