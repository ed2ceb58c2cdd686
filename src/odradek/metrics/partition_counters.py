"""Per-partition load counters on a broker, and the deltas between two readings of them: where the balancer's
bytes in/out and request rates come from (the sampler reads them, balancer/sampler.py).

The broker counts, per partition it leads, with a dictionary lookup and a few integer additions:

- `bytes_in`, `produce_requests`: record batch bytes appended by producers (and the coordinators), as
  received, and the appends (one per partition of a Produce request), counted on success
  (ReplicaManager.append);
- `bytes_out`, `fetch_requests`: record batch bytes sent to consumers, and the consumer Fetch responses
  that carried the partition without an error (the Fetch handler, once per response, so a long poll that
  reads again counts once); follower fetches (replication) are not counted.

Counters are cumulative from the moment a partition's entry is made. `CounterDeltas` turns successive
readings into deltas; a counter that went backwards, or an entry made again (forgotten and recounted), is a
reset: its delta is its current value.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import NamedTuple

_made = itertools.count()


class PartitionCounters:
    __slots__ = ("made", "bytes_in", "bytes_out", "produce_requests", "fetch_requests")

    def __init__(self):
        self.made = next(_made)  # tells an entry made again from the one it replaces
        self.bytes_in = 0
        self.bytes_out = 0
        self.produce_requests = 0
        self.fetch_requests = 0

    def values(self) -> tuple[int, int, int, int]:
        return self.bytes_in, self.bytes_out, self.produce_requests, self.fetch_requests


class PartitionCounterTable:
    """The counters of every partition appended to or fetched from here, keyed by (topic, index)."""

    def __init__(self):
        self.partitions: dict[tuple[str, int], PartitionCounters] = {}

    def _new(self, key: tuple[str, int]) -> PartitionCounters:
        counters = self.partitions[key] = PartitionCounters()
        return counters

    # the hooks

    def appended(self, topic: str, index: int, size: int) -> None:
        """A produce (or coordinator) append of `size` bytes of record batches succeeded."""
        key = (topic, index)
        counters = self.partitions.get(key) or self._new(key)
        counters.bytes_in += size
        counters.produce_requests += 1

    def fetched(self, topic: str, index: int, size: int) -> None:
        """A consumer Fetch response carries `size` bytes of the partition's record batches (maybe 0)."""
        key = (topic, index)
        counters = self.partitions.get(key) or self._new(key)
        counters.bytes_out += size
        counters.fetch_requests += 1

    # reading

    def prune(self, keep: Iterable[tuple[str, int]]) -> None:
        """Forget the counters of partitions not in `keep` (no longer hosted here)."""
        keep = set(keep)
        for key in [k for k in self.partitions if k not in keep]:
            del self.partitions[key]


class CounterDelta(NamedTuple):
    bytes_in: int = 0
    bytes_out: int = 0
    produce_requests: int = 0
    fetch_requests: int = 0


ZERO = CounterDelta()


class CounterDeltas:
    """What each partition's counters gained since the previous `take` (the first take: since they were
    made, which is since the node started). Sans-I/O: the caller reads the table."""

    def __init__(self):
        self._last: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}

    def take(self, table: PartitionCounterTable) -> dict[tuple[str, int], CounterDelta]:
        """The partitions whose counters gained anything, with their gains (the others gained ZERO)."""
        deltas: dict[tuple[str, int], CounterDelta] = {}
        last: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}
        previous_of = self._last.get
        for key, c in table.partitions.items():
            now = (c.made, c.bytes_in, c.bytes_out, c.produce_requests, c.fetch_requests)
            last[key] = now
            previous = previous_of(key)
            if previous == now:
                continue
            if previous is None or previous[0] != now[0] or now[1] < previous[1] or now[2] < previous[2] \
                    or now[3] < previous[3] or now[4] < previous[4]:
                delta = CounterDelta(*now[1:])  # new, made again or reset: all of it is since the previous reading
            else:
                delta = CounterDelta(now[1] - previous[1], now[2] - previous[2], now[3] - previous[3],
                                     now[4] - previous[4])
            if any(delta):
                deltas[key] = delta
        self._last = last
        return deltas
