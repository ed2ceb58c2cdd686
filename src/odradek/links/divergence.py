"""Divergence search: the first offset at which a mirror partition's log and its source partition's differ.

A mirror copies the source's batches byte for byte at their offsets, but stamps each with the destination's
own leader epoch, so it cannot compare epochs as a follower does: it compares batches. Two batches are the
same when every byte but the partitionLeaderEpoch field is (base offset, length, CRC, attributes, offsets,
timestamps, producer fields and records). Agreement is monotone in the offset: two logs that hold the same
batch at an offset agree on everything before it (a log's prefix property), and two that differ at an offset
differ from there on. The one exception bytes cannot see: a batch written again byte for byte (a producer
without idempotence retrying it) that lands, after an unclean election, at the same offset over other records.

A compacted log's cleaner rewrites batches on each side on its own schedule: it keeps a batch's base offset,
last offset delta and producer fields but drops records (or the whole batch), so on a compacted topic two
batches also count as the same when those fields agree and so does every record both still hold (at least
one, unless a producer id says they are one batch), and a batch
the source no longer has at all (a later one follows) counts as held.

So the search first asks about the mirror's last batch (agreement there means agreement everywhere, the
common answer, after one question), and otherwise bisects the mirror's offsets. Sans-I/O: the search says
which offset to look at next; the caller finds the mirror's batch holding it (or the first after it),
asks the source about that batch, and reports the answer.
"""

from __future__ import annotations

from odradek.protocol.records import PARTITION_LEADER_EPOCH_OFFSET, decode_batch, read_batch_info

_EPOCH_END = PARTITION_LEADER_EPOCH_OFFSET + 4


def same_batch(mirror_batch, source_batch, *, compacted: bool = False) -> bool:
    """Whether two whole batches are the same but for their partitionLeaderEpoch fields; on a `compacted` topic,
    also whether they can be one batch that either side's cleaner has rewritten."""
    mirror, source = memoryview(mirror_batch), memoryview(source_batch)
    if (len(mirror) == len(source) and mirror[:PARTITION_LEADER_EPOCH_OFFSET] == source[:PARTITION_LEADER_EPOCH_OFFSET]
            and mirror[_EPOCH_END:] == source[_EPOCH_END:]):
        return True
    return compacted and _same_but_cleaned(mirror, source)


def _same_but_cleaned(mirror: memoryview, source: memoryview) -> bool:
    mine, theirs = read_batch_info(mirror), read_batch_info(source)
    fields = ("base_offset", "last_offset_delta", "producer_id", "producer_epoch", "base_sequence",
              "is_transactional", "is_control")
    if any(getattr(mine, name) != getattr(theirs, name) for name in fields):
        return False
    held = {record.offset: record for record in decode_batch(mirror, mine)}
    kept = decode_batch(source, theirs)
    if mine.producer_id < 0 and not any(record.offset in held for record in kept):
        return False  # no producer id and no record in common: nothing says these are one batch
    return all(held.get(record.offset, record) == record for record in kept)


class DivergenceSearch:
    """Finds the first offset in [start, end) of a mirror's log whose batch the source does not hold.

    Invariants: every mirror batch that ends at or before `low` is on the source; the mirror batch that
    starts at `divergence` is not (or `divergence` is `end`: none found yet); no mirror batch starts in
    [limit, divergence). The search is over when low >= limit: the mirror then keeps what is below
    `divergence` and drops the rest. A batch that straddles `start` (a log start moved into it) counts from
    `start`: the mirror never truncates below its own log start.
    """

    def __init__(self, start: int, end: int):
        if end < start:
            raise ValueError(f"log end {end} is below log start {start}")
        self.start = start
        self.end = end
        self.low = start
        self.limit = end
        self.divergence = end
        self.probes = 0  # batches asked about

    @property
    def done(self) -> bool:
        return self.low >= self.limit

    @property
    def diverged(self) -> bool:
        """Whether the search found a batch of the mirror's that the source does not hold."""
        return self.divergence < self.end

    def next_offset(self) -> int | None:
        """The offset whose batch (the mirror's batch holding it, or the first after it) to ask about next;
        None once the search is over. The first question is about the last batch."""
        if self.done:
            return None
        if self.probes == 0 and self.limit == self.end:
            return self.end - 1
        return (self.low + self.limit) // 2

    def no_batch_from(self, offset: int) -> None:
        """The mirror holds no batch that starts in [offset, limit) (a gap in a compacted log, or its end)."""
        self._check(offset)
        self.limit = offset
        self.probes += 1  # the first question was asked, even if nothing could be compared

    def record(self, base_offset: int, next_offset: int, on_source: bool) -> None:
        """The answer for the mirror's batch [base_offset, next_offset): whether the source holds it."""
        if next_offset <= base_offset:
            raise ValueError(f"empty batch [{base_offset}, {next_offset})")
        if base_offset >= self.limit or next_offset <= self.low:
            raise ValueError(f"batch [{base_offset}, {next_offset}) lies outside the search [{self.low}, {self.limit})")
        self.probes += 1
        if on_source:
            self.low = next_offset
        else:
            self.limit = self.divergence = max(base_offset, self.start)

    def _check(self, offset: int) -> None:
        if not self.low <= offset < self.limit:
            raise ValueError(f"offset {offset} lies outside the search [{self.low}, {self.limit})")
