"""The history checker of the nemesis test: what a producer was told and what consumers read, judged against the
final log.

A history is plain data recorded by the test's clients while faults were injected:

- `attempted`: every value the producer handed to the client library (values are unique numbers);
- `acked`: value -> (partition, offset) for each delivery report that said "written";
- `failed`: value -> error text for each delivery report that said "not written" (the record may still be in
  the log: a timeout does not say the write did not happen);
- `live_reads`: reader name -> partition -> the (offset, value) pairs it read, in order, while faults ran;
- `final_reads`: reader name -> partition -> (offset, value) pairs of one full read after the cluster healed.
  The first one is the final log; the others must agree with it.

Each check is a pure function returning a list of violations, one sentence each that says what was expected and
what was found; `violations()` runs them all and `assert_valid()` turns them into one AssertionError.
"""

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

Records = list[tuple[int, int]]  # (offset, value) pairs in read order
Read = Mapping[int, Records]  # partition -> records

MAX_REPORTED = 15  # violations quoted per check; the rest are counted


@dataclass
class History:
    attempted: set[int] = field(default_factory=set)
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    live_reads: dict[str, dict[int, Records]] = field(default_factory=dict)
    final_reads: dict[str, dict[int, Records]] = field(default_factory=dict)

    @property
    def final(self) -> Read:
        """The final log: the first final read."""
        return next(iter(self.final_reads.values()), {})


def offsets_strictly_increasing(name: str, read: Read) -> list[str]:
    """Within one read of a partition, every offset is greater than the one before (no rewind, no repeat)."""
    found = []
    for partition, records in sorted(read.items()):
        for (before, _), (offset, value) in zip(records, records[1:], strict=False):
            if offset <= before:
                found.append(f"{name} read partition {partition} offset {offset} (value {value}) after offset "
                             f"{before}: offsets must strictly increase")
    return found


def acked_offsets_distinct(acked: Mapping[int, tuple[int, int]]) -> list[str]:
    """Two acknowledged records never share a (partition, offset)."""
    by_position = defaultdict(list)
    for value, position in acked.items():
        by_position[position].append(value)
    return [f"values {sorted(values)} were all acknowledged at partition {partition} offset {offset}"
            for (partition, offset), values in sorted(by_position.items()) if len(values) > 1]


def acked_not_lost(acked: Mapping[int, tuple[int, int]], final: Read) -> list[str]:
    """Every acknowledged value is in the final log at the partition and offset its acknowledgement gave."""
    at = {(partition, offset): value for partition, records in final.items() for offset, value in records}
    where = {value: (partition, offset) for (partition, offset), value in at.items()}
    found = []
    for value, (partition, offset) in sorted(acked.items()):
        if at.get((partition, offset)) == value:
            continue
        if (partition, offset) in at:
            holds = f"that offset holds value {at[(partition, offset)]}"
        else:
            end = max((o for o, _ in final.get(partition, [])), default=-1) + 1
            holds = f"that offset is missing (the log of partition {partition} ends at offset {end})"
        elsewhere = f"; the value is at partition {where[value][0]} offset {where[value][1]}" if value in where \
            else "; the value is nowhere in the log"
        found.append(f"acknowledged value {value} (partition {partition}, offset {offset}) is lost: {holds}"
                     f"{elsewhere}")
    return found


def no_duplicates(final: Read, failed: Mapping[int, str] | None = None) -> list[str]:
    """Each value is at most once in the whole final log, whether its delivery succeeded or failed."""
    positions = defaultdict(list)
    for partition, records in sorted(final.items()):
        for offset, value in records:
            positions[value].append((partition, offset))
    found = []
    for value, where in sorted(positions.items()):
        if len(where) > 1:
            note = f" (its delivery failed: {failed[value]})" if failed and value in failed else ""
            found.append(f"value {value}{note} is {len(where)} times in the final log, at "
                         + ", ".join(f"partition {p} offset {o}" for p, o in where))
    return found


def no_phantoms(final: Read, attempted: set[int]) -> list[str]:
    """Every value in the final log is one the producer sent."""
    return [f"partition {partition} offset {offset} holds value {value}, which was never sent"
            for partition, records in sorted(final.items()) for offset, value in records if value not in attempted]


def producer_order_kept(final: Read) -> list[str]:
    """The one idempotent producer wrote each partition in increasing value order, so the log keeps that order."""
    found = []
    for partition, records in sorted(final.items()):
        for (_, before), (offset, value) in zip(records, records[1:], strict=False):
            if value < before:
                found.append(f"partition {partition} offset {offset} holds value {value} after value {before}: "
                             "the idempotent producer's order is not kept")
    return found


def prefix_of_final(name: str, read: Read, final: Read) -> list[str]:
    """A read of a partition is the final log of that partition up to where the read stopped: same offsets, same
    values, nothing skipped. A consumer must never see a record that a later leader does not have."""
    found = []
    for partition, records in sorted(read.items()):
        if not records:
            continue
        log = final.get(partition, [])
        last = max(offset for offset, _ in records)
        expected = [(offset, value) for offset, value in log if offset <= last]
        if records == expected:
            continue
        for index, (got, want) in enumerate(zip(records, expected, strict=False)):
            if got != want:
                found.append(f"{name} read of partition {partition} is not a prefix of the final log: record "
                             f"#{index} read is offset {got[0]} value {got[1]}, the final log has offset {want[0]} "
                             f"value {want[1]}")
                break
        else:
            if len(records) > len(expected):
                extra = records[len(expected)]
                found.append(f"{name} read of partition {partition} is not a prefix of the final log: it read "
                             f"offset {extra[0]} value {extra[1]}, which the final log of that partition "
                             f"{'ends before' if not log or extra[0] > log[-1][0] else 'does not hold'}")
            else:
                missing = expected[len(records)]
                found.append(f"{name} read of partition {partition} skipped offset {missing[0]} (value "
                             f"{missing[1]}) of the final log")
    return found


def final_reads_agree(final_reads: Mapping[str, Read]) -> list[str]:
    """Every full read after healing saw the same log."""
    if not final_reads:
        return ["no final read of the log"]
    (reference_name, reference), *others = final_reads.items()
    found = []
    for name, read in others:
        for partition in sorted(set(reference) | set(read)):
            mine, theirs = list(reference.get(partition, [])), list(read.get(partition, []))
            if mine != theirs:
                mismatch = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                                min(len(mine), len(theirs)))
                found.append(f"final reads differ on partition {partition}: {reference_name} read {len(mine)} "
                             f"records, {name} read {len(theirs)}; first difference at record #{mismatch}: "
                             f"{mine[mismatch] if mismatch < len(mine) else 'end'} vs "
                             f"{theirs[mismatch] if mismatch < len(theirs) else 'end'}")
    return found


def violations(history: History) -> dict[str, list[str]]:
    """Check name -> its violations, for the checks that found any."""
    final = history.final
    checks = {
        "final reads agree": final_reads_agree(history.final_reads),
        "acknowledged offsets distinct": acked_offsets_distinct(history.acked),
        "no acknowledged record lost": acked_not_lost(history.acked, final),
        "no duplicates": no_duplicates(final, history.failed),
        "no phantom records": no_phantoms(final, history.attempted),
        "producer order kept": producer_order_kept(final),
    }
    increasing, prefix = [], []
    for name, read in {**history.final_reads, **history.live_reads}.items():
        increasing += offsets_strictly_increasing(name, read)
    for name, read in history.live_reads.items():
        prefix += prefix_of_final(name, read, final)
    checks["offsets strictly increasing"] = increasing
    checks["live reads are prefixes of the final log"] = prefix
    return {check: found for check, found in checks.items() if found}


def summary(history: History) -> str:
    final = history.final
    counts = Counter({partition: len(records) for partition, records in final.items()})
    live = ", ".join(f"{name} {sum(len(r) for r in read.values())}" for name, read in history.live_reads.items())
    return (f"{len(history.attempted)} sent, {len(history.acked)} acknowledged, {len(history.failed)} failed; "
            f"final log {dict(sorted(counts.items()))} records per partition; live reads: {live or 'none'}")


def assert_valid(history: History, context: str = "") -> None:
    """Raise one AssertionError naming every violated property (the first MAX_REPORTED of each)."""
    found = violations(history)
    if not found:
        return
    lines = [f"{context}history violates: {', '.join(found)} ({summary(history)})"]
    for check, messages in found.items():
        lines.append(f"{check}: {len(messages)} violation(s)")
        lines += [f"  - {message}" for message in messages[:MAX_REPORTED]]
        if len(messages) > MAX_REPORTED:
            lines.append(f"  ... and {len(messages) - MAX_REPORTED} more")
    raise AssertionError("\n".join(lines))
