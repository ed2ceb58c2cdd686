"""The recent history behind the console's charts, sampled from the cluster as any client sees it.

Every few seconds, while someone is looking, the sampler asks for the log end offset of every partition
(one batched ListOffsets per leader) and, for the groups whose pages were opened lately, their committed
offsets. Records per second are the growth of log end offsets between samples; a group's lag is log end
minus committed offset, summed over its partitions. Nobody looking for `IDLE_STOP_S`: it stops asking. A
slow sample (many partitions) stretches the interval so that sampling takes at most a tenth of the time.

Beside it, on the same interval but on its own so that a node slow to answer delays nothing else, it reads
the nodes' own byte counters (their /metrics, `node_metrics`): bytes per second are the growth of each
node's counters since that node's previous reading, summed over the nodes read this time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping

from odradek.console.node_metrics import (
    ALL_TOPICS,
    BYTES_IN,
    BYTES_OUT,
    CounterKey,
    NodeCounters,
    NodeMetricsReader,
)

log = logging.getLogger(__name__)

HISTORY = 180  # samples kept per series: 15 minutes at 5 s
IDLE_STOP_S = 600.0
MAX_WATCHED_GROUPS = 20


class Series:
    """(time in epoch seconds, value) samples, the last `limit` of them."""

    def __init__(self, limit: int = HISTORY):
        self.points: deque[tuple[float, float]] = deque(maxlen=limit)

    def add(self, t: float, value: float) -> None:
        self.points.append((t, value))

    def values(self) -> list[tuple[float, float]]:
        return list(self.points)

    @property
    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None


def growth_rates(before: Mapping[Hashable, float], after: Mapping[Hashable, float],
                 seconds: float) -> dict[Hashable, float]:
    """Per key, how fast a counter grew between two samples (per second). Keys in only one sample (a topic
    created or deleted) have no rate; a counter that went down (a topic deleted and created again, a node
    restarted) counts 0."""
    if seconds <= 0:
        return {}
    return {key: max(0, after[key] - before[key]) / seconds for key in after.keys() & before.keys()}


def group_lag(committed: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> int:
    """Log end minus committed offset, summed over the partitions with both (a negative one counts 0)."""
    return sum(max(0, ends[tp] - offset) for tp, offset in committed.items() if tp in ends)


class Sampler:
    """Samples through `cluster` (a ClusterClient) while `touch()` keeps being called."""

    def __init__(self, cluster, interval_s: float, clock: Callable[[], float] = time.time):
        self.cluster = cluster
        self.interval_s = interval_s
        self.clock = clock
        self.records_in = Series()  # records/s written to the cluster, all topics
        self.topic_rates: dict[str, float] = {}  # records/s per topic, from the last two samples
        self.bytes_in = Series()  # bytes/s produced and consumed, all topics, summed over the nodes' counters
        self.bytes_out = Series()
        self.topic_bytes_in: dict[str, float] = {}
        self.topic_bytes_out: dict[str, float] = {}
        self.node_metrics = NodeMetricsReader(cluster)
        self.byte_rates_note: str | None = None  # which nodes' counters the byte rates leave out, and why
        self.group_lags: dict[str, Series] = {}
        self.watched: dict[str, float] = {}  # group -> when its page was last looked at
        self.last_error: str | None = None
        self.last_sample: float | None = None
        self._ends: dict[str, int] | None = None  # per topic, the sum of its partitions' log end offsets
        self._ends_at = 0.0
        self._node_readings: dict[int, tuple[float, dict[CounterKey, float]]] = {}  # node -> its last (time, counters)
        self._last_touch = 0.0
        self._task: asyncio.Task | None = None

    def touch(self) -> None:
        """Someone is looking: sample (again) if not already."""
        self._last_touch = self.clock()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def watch_group(self, group: str) -> Series:
        self.touch()
        self.watched[group] = self.clock()
        if len(self.watched) > MAX_WATCHED_GROUPS:
            oldest = min(self.watched, key=self.watched.get)
            del self.watched[oldest]
            self.group_lags.pop(oldest, None)
        return self.group_lags.setdefault(group, Series())

    def forget_group(self, group: str) -> None:
        self.watched.pop(group, None)
        self.group_lags.pop(group, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.node_metrics.close()

    async def _run(self) -> None:
        byte_rates = asyncio.get_running_loop().create_task(self._read_node_counters())
        try:
            await self._sample_cluster()
        finally:
            byte_rates.cancel()
            try:
                await byte_rates
            except (asyncio.CancelledError, Exception):
                pass

    async def _sample_cluster(self) -> None:
        while self.clock() - self._last_touch < IDLE_STOP_S:
            started = time.monotonic()
            try:
                await self.sample()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # shown on the pages; sampling goes on
                self.last_error = str(exc) or type(exc).__name__
                log.debug("console sample failed: %s", self.last_error)
            took = time.monotonic() - started
            await asyncio.sleep(max(self.interval_s, 10 * took))

    async def sample(self) -> None:
        metadata = await self.cluster.metadata(max_age_s=self.interval_s / 2)
        partitions = [(name, p) for name, topic in metadata.topics.items() if topic.error is None
                      for p in topic.partitions]
        ends = await self.cluster.offsets(partitions, "latest") if partitions else {}
        now = self.clock()
        sums: dict[str, int] = {}
        for (topic, _), offset in ends.items():
            if offset is not None:
                sums[topic] = sums.get(topic, 0) + offset
        if self._ends is not None:
            rates = growth_rates(self._ends, sums, now - self._ends_at)
            self.topic_rates = rates
            self.records_in.add(now, sum(rates.values()))
        self._ends, self._ends_at = sums, now
        known = {tp: offset for tp, offset in ends.items() if offset is not None}
        for group in list(self.watched):
            if now - self.watched[group] > IDLE_STOP_S:
                self.forget_group(group)
                continue
            committed = await self.cluster.committed(group)
            self.group_lags.setdefault(group, Series()).add(now, group_lag(committed, known))
        self.last_sample = now

    async def _read_node_counters(self) -> None:
        while True:
            try:
                counters = await self.node_metrics.read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # no byte rates this time; the next reading may have them
                self.byte_rates_note = f"the nodes' metrics could not be read: {str(exc) or type(exc).__name__}"
            else:
                self.add_byte_rates(counters, self.clock())
            await asyncio.sleep(self.interval_s)

    def add_byte_rates(self, counters: NodeCounters, now: float) -> None:
        """One reading of the nodes' counters: each node's growth since its own previous reading (a node missed
        once is not lost, its next rate spans the gap), summed over the nodes read now; which nodes are left
        out is said with the rates."""
        totals = {BYTES_IN: 0.0, BYTES_OUT: 0.0}
        topics: dict[str, dict[str, float]] = {BYTES_IN: {}, BYTES_OUT: {}}
        rated = False
        for node, values in counters.values.items():
            previous = self._node_readings.get(node)
            self._node_readings[node] = (now, values)
            if previous is None:
                continue
            rated = True
            for (name, topic), rate in growth_rates(previous[1], values, now - previous[0]).items():
                if name not in totals:
                    continue
                if topic == ALL_TOPICS:
                    totals[name] += rate
                else:
                    topics[name][topic] = topics[name].get(topic, 0.0) + rate
        if rated:
            self.bytes_in.add(now, totals[BYTES_IN])
            self.bytes_out.add(now, totals[BYTES_OUT])
            self.topic_bytes_in, self.topic_bytes_out = topics[BYTES_IN], topics[BYTES_OUT]
        self.byte_rates_note = "; ".join(f"node {node}: {why}" for node, why in sorted(counters.missing.items())) \
            or None
