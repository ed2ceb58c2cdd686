"""The nemesis test's history checker on hand-made histories: a good one passes, and each kind of violation is
caught with a message that names the record."""

import pytest

from tests.e2e.history import (
    History,
    acked_not_lost,
    assert_valid,
    final_reads_agree,
    no_duplicates,
    offsets_strictly_increasing,
    prefix_of_final,
    violations,
)


def good_history() -> History:
    """Values 0..9 over two partitions; 9 timed out but was written, 8 failed and was not."""
    final = {0: [(0, 0), (1, 2), (2, 4), (3, 6)], 1: [(0, 1), (1, 3), (2, 5), (3, 7), (4, 9)]}
    return History(
        attempted=set(range(10)),
        acked={0: (0, 0), 2: (0, 1), 4: (0, 2), 6: (0, 3), 1: (1, 0), 3: (1, 1), 5: (1, 2), 7: (1, 3)},
        failed={8: "Local: Message timed out", 9: "Local: Message timed out"},
        live_reads={"live": {0: [(0, 0), (1, 2)], 1: [(0, 1), (1, 3), (2, 5), (3, 7), (4, 9)]},
                    "late starter": {0: [], 1: [(0, 1)]}},
        final_reads={"confluent": final, "kcat": {p: list(r) for p, r in final.items()}},
    )


def test_a_good_history_passes():
    history = good_history()
    assert violations(history) == {}
    assert_valid(history)


def test_a_lost_acknowledged_record_is_caught():
    history = good_history()
    for read in history.final_reads.values():
        read[1] = read[1][:3]  # acked value 7 (offset 3) is gone, and value 9 (failed delivery) with it
    found = violations(history)
    assert found["no acknowledged record lost"] == [
        "acknowledged value 7 (partition 1, offset 3) is lost: that offset is missing (the log of partition 1 ends "
        "at offset 3); the value is nowhere in the log"]
    # The live reader saw offsets 3 and 4 that are gone: it read records the final log does not hold.
    assert "live read of partition 1 is not a prefix" in found["live reads are prefixes of the final log"][0]


def test_an_acknowledged_record_overwritten_at_its_offset_is_caught():
    history = good_history()
    for read in history.final_reads.values():
        read[0][1] = (1, 8)  # another value took acked value 2's offset
    message = violations(history)["no acknowledged record lost"][0]
    assert message.startswith("acknowledged value 2 (partition 0, offset 1) is lost: that offset holds value 8")


def test_an_acknowledged_record_at_another_offset_is_caught():
    history = good_history()
    history.acked[4] = (0, 3)  # the broker said offset 3, the log has it at 2
    history.acked[6] = (0, 2)
    found = acked_not_lost(history.acked, history.final)
    assert found[0] == ("acknowledged value 4 (partition 0, offset 3) is lost: that offset holds value 6; the value "
                        "is at partition 0 offset 2")


def test_two_records_acknowledged_at_one_offset_are_caught():
    history = good_history()
    history.acked[8] = (0, 3)
    assert violations(history)["acknowledged offsets distinct"] == [
        "values [6, 8] were all acknowledged at partition 0 offset 3"]


def test_a_duplicated_acknowledged_record_is_caught():
    history = good_history()
    for read in history.final_reads.values():
        read[0].append((4, 5))
    assert no_duplicates(history.final, history.failed) == [
        "value 5 is 2 times in the final log, at partition 0 offset 4, partition 1 offset 2"]
    assert "no duplicates" in violations(history)


def test_a_duplicated_failed_record_is_caught():
    history = good_history()
    for read in history.final_reads.values():
        read[1].append((5, 9))
    assert no_duplicates(history.final, history.failed) == [
        "value 9 (its delivery failed: Local: Message timed out) is 2 times in the final log, at partition 1 "
        "offset 4, partition 1 offset 5"]


def test_a_failed_record_may_be_absent_or_present_once():
    history = good_history()
    assert 8 not in {v for records in history.final.values() for _, v in records}
    assert 9 in {v for records in history.final.values() for _, v in records}
    assert "no duplicates" not in violations(history)


def test_a_value_never_sent_is_caught():
    history = good_history()
    history.attempted.discard(9)
    assert violations(history)["no phantom records"] == [
        "partition 1 offset 4 holds value 9, which was never sent"]


def test_offsets_going_back_in_a_read_are_caught():
    read = {0: [(0, 0), (1, 2), (1, 2)], 1: [(0, 1), (2, 5), (1, 3)]}
    assert offsets_strictly_increasing("live", read) == [
        "live read partition 0 offset 1 (value 2) after offset 1: offsets must strictly increase",
        "live read partition 1 offset 1 (value 3) after offset 2: offsets must strictly increase"]


def test_a_live_read_that_rewinds_is_caught_by_the_full_check():
    history = good_history()
    history.live_reads["live"][0] = [(0, 0), (1, 2), (0, 0)]
    assert "offsets strictly increasing" in violations(history)


def test_a_live_read_of_a_value_the_final_log_replaced_is_caught():
    """The consumer saw offset 1 = value 2 from a leader whose write was later truncated and replaced."""
    history = good_history()
    history.live_reads["live"][0] = [(0, 0), (1, 99)]
    assert violations(history)["live reads are prefixes of the final log"] == [
        "live read of partition 0 is not a prefix of the final log: record #1 read is offset 1 value 99, the final "
        "log has offset 1 value 2"]


def test_a_live_read_that_skipped_a_record_is_caught():
    history = good_history()
    history.live_reads["live"][1] = [(0, 1), (2, 5)]
    assert prefix_of_final("live", history.live_reads["live"], history.final) == [
        "live read of partition 1 is not a prefix of the final log: record #1 read is offset 2 value 5, the final "
        "log has offset 1 value 3"]


def test_a_live_read_past_the_end_of_the_final_log_is_caught():
    history = good_history()
    history.live_reads["live"][0] = [(0, 0), (1, 2), (2, 4), (3, 6), (4, 8)]
    assert prefix_of_final("live", history.live_reads["live"], history.final) == [
        "live read of partition 0 is not a prefix of the final log: it read offset 4 value 8, which the final log "
        "of that partition ends before"]


def test_final_reads_that_disagree_are_caught():
    history = good_history()
    history.final_reads["kcat"][1] = history.final_reads["kcat"][1][:-1]
    assert final_reads_agree(history.final_reads) == [
        "final reads differ on partition 1: confluent read 5 records, kcat read 4; first difference at record #4: "
        "(4, 9) vs end"]


def test_a_reordered_partition_is_caught():
    history = good_history()
    for read in history.final_reads.values():
        read[0][1], read[0][2] = (1, 4), (2, 2)
    assert violations(history)["producer order kept"] == [
        "partition 0 offset 2 holds value 2 after value 4: the idempotent producer's order is not kept"]


def test_assert_valid_names_every_violated_property_and_the_context():
    history = good_history()
    history.final_reads = {name: {0: read[0], 1: read[1][:2]} for name, read in history.final_reads.items()}
    history.attempted.discard(0)
    with pytest.raises(AssertionError) as caught:
        assert_valid(history, "seed 42: ")
    text = str(caught.value)
    assert text.startswith("seed 42: history violates: no acknowledged record lost, no phantom records, ")
    assert "acknowledged value 5 (partition 1, offset 2) is lost" in text
    assert "acknowledged value 7 (partition 1, offset 3) is lost" in text
