"""The GROUP BY operator's core, driven without Spark: windows, grace periods, sessions, EMIT FINAL."""

from odradek.sql.aggregation import Emit, GroupStep, Record, WindowSpec, make_aggregate


def records(*rowtimes, values=None):
    return [Record(t, (0, i), (values[i] if values else None,)) for i, t in enumerate(rowtimes)]


def count_step(window=None, emit_final=False):
    return GroupStep([make_aggregate("COUNT", star=True)], window, emit_final)


def test_unwindowed_count_emits_one_update_per_batch_and_keeps_counting():
    step = count_step()
    emits, state, wake = step.run(None, records(1, 2, 3), None, None, False)
    assert emits == [Emit(None, None, (3,), 3)] and wake is None
    emits, state, _ = step.run(state, records(7), None, None, False)
    assert emits == [Emit(None, None, (4,), 7)]


def test_tumbling_window_accepts_late_records_within_grace_and_drops_them_after():
    step = count_step(WindowSpec("TUMBLING", 10_000, 2_000))
    emits, state, wake = step.run(None, records(1_000, 5_000), 0, None, False)
    assert emits == [Emit(0, 10_000, (2,), 5_000)]
    assert wake == 12_000  # the window closes at its end plus the grace period
    # stream time 11,999: still open, so a late record counts
    emits, state, _ = step.run(state, records(9_000), 0, 11_999, False)
    assert emits == [Emit(0, 10_000, (3,), 9_000)]
    # stream time 12,000: closed; the record is dropped and the state let go
    emits, state, wake = step.run(state, records(9_500), 0, 12_000, False)
    assert emits == [] and state is None and wake is None


def test_emit_final_emits_once_when_the_window_closes():
    step = count_step(WindowSpec("TUMBLING", 10_000, 0), emit_final=True)
    emits, state, wake = step.run(None, records(1, 2), 0, None, False)
    assert emits == [] and wake == 10_000
    emits, state, _ = step.run(state, records(3), 0, 5_000, False)
    assert emits == []
    emits, state, _ = step.run(state, [], 0, 10_000, True)
    assert emits == [Emit(0, 10_000, (3,), 3)] and state is None


def test_session_windows_merge_and_retract_the_sessions_they_replace():
    step = count_step(WindowSpec("SESSION", 2_000, 5_000))
    emits, state, _ = step.run(None, records(0), None, None, False)
    assert emits == [Emit(0, 0, (1,), 0)]
    emits, state, _ = step.run(state, records(3_000), None, None, False)
    assert emits == [Emit(3_000, 3_000, (1,), 3_000)]
    # 1,500 is within the gap of both: the two sessions merge into [0, 3000] and both old keys are retracted
    emits, state, _ = step.run(state, records(1_500), None, None, False)
    retracted = [(e.window_start, e.window_end) for e in emits if e.results is None]
    assert sorted(retracted) == [(0, 0), (3_000, 3_000)]
    assert emits[-1] == Emit(0, 3_000, (3,), 3_000)
    assert len(state[0]) == 1


def test_a_session_record_beyond_the_grace_period_is_dropped():
    step = count_step(WindowSpec("SESSION", 1_000, 500))
    emits, state, _ = step.run(None, records(10_000), None, None, False)
    emits, state, _ = step.run(state, records(100), None, 10_000, False)
    assert emits == []  # a session [100, 100] closed at 100 + gap + grace = 1,600 < stream time
    assert [(s.start, s.end) for s in state[0]] == [(10_000, 10_000)]


def test_a_session_stays_open_for_its_gap_plus_grace_so_an_in_order_record_extends_it():
    step = count_step(WindowSpec("SESSION", 10, 0))
    _, state, wake = step.run(None, records(100), None, None, False)
    assert wake == 110  # the end plus the gap plus the grace period
    # stream time 108 (another key moved it): the record at 109 is within the gap of [100, 100]
    emits, state, _ = step.run(state, records(109), None, 108, False)
    assert emits[-1] == Emit(100, 109, (2,), 109)


def test_latest_by_offset_follows_batches_not_partition_numbers():
    step = GroupStep([make_aggregate("LATEST_BY_OFFSET", False), make_aggregate("EARLIEST_BY_OFFSET", False)])
    _, state, _ = step.run(None, [Record(1, (1, 5), ("a", "a"))], None, None, False)
    emits, _, _ = step.run(state, [Record(2, (0, 100), ("b", "b"))], None, None, False)
    assert emits[0].results == ("b", "a")


def test_aggregates_follow_ksqldb():
    step = GroupStep([make_aggregate(n, star=False) for n in
                      ("SUM", "AVG", "MIN", "MAX", "LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET", "COLLECT_LIST",
                       "COUNT", "COUNT_DISTINCT", "COLLECT_SET")])
    batch = [Record(1, (0, i), (v,) * 10) for i, v in enumerate([3, None, 7, 3])]
    emits, _, _ = step.run(None, batch, None, None, False)
    (total, avg, low, high, latest, earliest, listed, count, distinct, collected) = emits[0].results
    assert (total, avg, low, high) == (13, 13 / 3, 3, 7)
    assert (latest, earliest) == (3, 3)  # nulls are skipped by the *_BY_OFFSET aggregates
    assert listed == [3, None, 7, 3] and count == 3 and distinct == 2 and collected == [3, None, 7]


def test_a_closed_session_still_merges_with_a_record_within_its_gap_until_it_expires():
    step = count_step(WindowSpec("SESSION", 5_000, 2_000))
    _, state, _ = step.run(None, records(1_000, 10_000), None, None, False)
    # stream time 10,000: [1000, 1000] closed at 8,000 but is kept until 13,000 (a gap more), as Kafka Streams
    # keeps it in its store; 5,000 reaches both sessions and merges them
    emits, state, _ = step.run(state, [], None, 10_000, True)
    assert emits == []
    emits, state, _ = step.run(state, records(5_000), None, 10_000, False)
    assert emits[-1] == Emit(1_000, 10_000, (3,), 10_000)
    _, state, _ = step.run(state, [], None, 100_000, True)
    assert state is None
