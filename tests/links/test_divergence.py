"""The divergence search of a mirror partition against its source: it finds the first batch the source does not
hold, asking about the last batch first and bisecting after, through gaps and a log start inside a batch; and
what counts as the same batch (on a compacted topic, also one either side's cleaner rewrote)."""

from __future__ import annotations

import math
import random

import pytest

from odradek.links.divergence import DivergenceSearch, same_batch
from odradek.protocol import compression
from odradek.protocol.records import BATCH_HEADER_SIZE, build_batch, read_batch_info, stamp_leader_epoch
from odradek.storage.cleaner import _parse_records, _rebuild

NOW = 1_700_000_000_000


def batch(base_offset: int, values: list[str], leader_epoch: int = 0) -> bytearray:
    built = bytearray(build_batch([(None, value) for value in values], base_offset=base_offset, timestamp_ms=1000,
                                  producer_id=7, producer_epoch=0, base_sequence=base_offset))
    stamp_leader_epoch(built, [read_batch_info(built)], leader_epoch)
    return built


def test_batches_are_the_same_whatever_their_leader_epochs_and_differ_in_any_other_byte():
    mirrored, source = batch(10, ["a", "b"], leader_epoch=3), batch(10, ["a", "b"], leader_epoch=9)
    assert same_batch(mirrored, source)
    assert not same_batch(mirrored, batch(11, ["a", "b"]))  # another base offset
    assert not same_batch(mirrored, batch(10, ["a", "c"]))  # other records (and so another CRC)
    assert not same_batch(mirrored, batch(10, ["a", "b", "c"]))  # another length
    assert not same_batch(mirrored, batch(10, ["a", "b"])[:-1])


def cleaned(built: bytes, keep, horizon: int | None = None) -> bytes:
    """The batch as this node's log cleaner rewrites it, keeping the records whose offsets `keep` accepts."""
    info = read_batch_info(built)
    body = compression.decompress(info.compression, memoryview(built)[BATCH_HEADER_SIZE:])
    kept = [record for record in _parse_records(body, info.record_count)
            if keep(info.base_offset + record.offset_delta)]
    return _rebuild(info, body, kept, horizon)


def test_on_a_compacted_topic_batches_either_cleaner_rewrote_are_the_same_and_other_records_are_not():
    mirrored = batch(10, ["a", "b", "c", "d"], leader_epoch=3)
    by_source = cleaned(batch(10, ["a", "b", "c", "d"], leader_epoch=9), lambda offset: offset % 2 == 1, NOW)
    by_mirror = cleaned(mirrored, lambda offset: offset >= 12)
    assert not same_batch(mirrored, by_source) and not same_batch(by_mirror, by_source)
    assert same_batch(mirrored, by_source, compacted=True)
    assert same_batch(by_mirror, by_source, compacted=True)  # offsets 11 and 13 and 12 and 13: 13 agrees
    assert not same_batch(mirrored, batch(10, ["a", "b", "x", "d"]), compacted=True)
    assert not same_batch(by_mirror, cleaned(batch(10, ["a", "b", "c", "e"]), lambda offset: offset == 13),
                          compacted=True)
    assert not same_batch(mirrored, batch(10, ["a", "b", "c"]), compacted=True)  # another last offset


def search(mirror: list[tuple[int, int]], held: set[int], start: int | None = None,
           unknown: set[int] = frozenset()) -> tuple[DivergenceSearch, list[int]]:
    """Run a search over `mirror`'s batches [(base, next)], the source holding those whose base is in `held`;
    returns it and the bases asked about. A base in `unknown` stops it (the source cannot tell yet)."""
    start = mirror[0][0] if start is None else start
    end = mirror[-1][1] if mirror else start
    found = DivergenceSearch(start, end)
    asked = []
    while (offset := found.next_offset()) is not None:
        holding = next(((base, next_) for base, next_ in mirror if next_ > offset), None)
        if holding is None or holding[0] >= found.limit:
            found.no_batch_from(offset)
            continue
        if holding[0] in unknown:
            break
        asked.append(holding[0])
        found.record(*holding, holding[0] in held)
        assert len(asked) <= 200, "the search does not end"
    return found, asked


def contiguous(sizes: list[int], start: int = 0) -> list[tuple[int, int]]:
    batches, offset = [], start
    for size in sizes:
        batches.append((offset, offset + size))
        offset += size
    return batches


def test_a_mirror_the_source_holds_whole_takes_one_question_about_its_last_batch():
    mirror = contiguous([5, 1, 3, 7])
    found, asked = search(mirror, {base for base, _ in mirror})
    assert asked == [9] and not found.diverged and found.divergence == 16


def test_an_empty_mirror_asks_nothing():
    found = DivergenceSearch(42, 42)
    assert found.next_offset() is None and not found.diverged


def test_a_source_that_lost_every_batch_truncates_the_mirror_to_its_log_start():
    mirror = contiguous([3, 3, 3], start=100)
    found, _ = search(mirror, set())
    assert found.divergence == 100 and found.diverged


def test_a_first_batch_straddling_the_log_start_is_cut_at_the_log_start_not_before():
    mirror = contiguous([10, 4, 4])  # the log starts at 6, inside the first batch
    found, _ = search(mirror, held=set(), start=6)
    assert found.divergence == 6


def test_only_the_last_batch_differs():
    mirror = contiguous([2] * 50)
    found, asked = search(mirror, {base for base, _ in mirror[:-1]})
    assert found.divergence == 98 and asked[0] == 98 and len(asked) <= 1 + math.ceil(math.log2(50))


def test_a_source_that_cannot_tell_yet_stops_the_search_undecided():
    mirror = contiguous([4] * 8)
    found, asked = search(mirror, {0, 4, 8}, unknown={28})
    assert asked == [] and not found.done and not found.diverged


def test_answers_outside_the_search_are_refused():
    found = DivergenceSearch(0, 10)
    with pytest.raises(ValueError):
        found.record(10, 12, True)
    with pytest.raises(ValueError):
        found.record(4, 4, True)
    with pytest.raises(ValueError):
        found.no_batch_from(10)
    with pytest.raises(ValueError):
        DivergenceSearch(5, 4)


def test_seeded_random_logs_with_gaps_find_the_first_batch_the_source_does_not_hold(seed):
    rng = random.Random(seed)
    for case in range(500):
        batches, offset = [], rng.randrange(0, 1000)
        for _ in range(rng.randrange(1, 120)):
            offset += rng.choice((0, 0, 0, rng.randrange(1, 50)))  # a gap, as compaction leaves
            size = rng.randrange(1, 20)
            batches.append((offset, offset + size))
            offset += size
        start = rng.randrange(batches[0][0], batches[0][1])  # a log start inside the first batch, or at it
        first_lost = rng.randrange(0, len(batches) + 1)  # agreement is monotone: a prefix of batches is held
        held = {base for base, _ in batches[:first_lost]}
        found, asked = search(batches, held, start=start)
        expected = max(batches[first_lost][0], start) if first_lost < len(batches) else batches[-1][1]
        context = f"seed {seed}, case {case}: batches {batches}, log start {start}, first lost {first_lost}"
        assert found.done and found.divergence == expected, context
        assert found.diverged == (first_lost < len(batches)), context
        span = batches[-1][1] - start
        assert len(asked) <= 2 + math.ceil(math.log2(span + 1)), context
