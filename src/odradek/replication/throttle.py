"""Replication throttles (Kafka's KIP-73): a cap on the bytes per second a node spends on catching-up replicas.

A topic names the throttled replicas as `partition:broker` pairs or `*`: a leader throttles what it sends
for the partitions `leader.replication.throttled.replicas` names with its own id, a follower what it
fetches for those `follower.replication.throttled.replicas` names with its id (kafka-reassign-partitions
--throttle lists a partition's current replicas in the first, its new ones in the second); the brokers'
`leader.replication.throttled.rate` and `follower.replication.throttled.rate` are the caps. As in Kafka, only a replica out of the ISR is held back
(one a reassignment is filling): an in-sync follower always gets its data, so acks=all writes never wait on a
throttle. While the measured rate is over the cap, a throttled partition is left out of fetches; the rate
is measured over the last 11 one-second samples, Kafka's default window.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

SAMPLES = 11  # Kafka's replication.quota.window.num
SAMPLE_S = 1.0  # Kafka's replication.quota.window.size.seconds


def is_throttled(throttled_replicas: str, partition: int, broker_id: int) -> bool:
    """Whether a topic's throttled-replicas setting names this partition's replica on `broker_id`."""
    text = throttled_replicas.strip()
    if text == "*":
        return True
    for entry in text.split(","):
        part, _, broker = entry.strip().partition(":")
        if part.strip() == str(partition) and broker.strip() == str(broker_id):
            return True
    return False


class ReplicationQuota:
    """Bytes replicated for throttled partitions, against a cap read at each check (it is dynamic)."""

    def __init__(self, limit: Callable[[], int], clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.clock = clock
        self._samples: deque[list] = deque()  # [start, bytes], oldest first
        self._created = clock()

    def record(self, size: int) -> None:
        now = self.clock()
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_S:
            self._samples.append([now, 0])
        self._samples[-1][1] += size
        self._expire(now)

    def rate(self) -> float:
        """Bytes per second over the window (or the meter's age, while it is younger)."""
        now = self.clock()
        self._expire(now)
        window = max(min(now - self._created, SAMPLES * SAMPLE_S), SAMPLE_S)
        return sum(size for _, size in self._samples) / window

    def exceeded(self) -> bool:
        return self.rate() > self.limit()

    def _expire(self, now: float) -> None:
        while self._samples and now - self._samples[0][0] >= SAMPLES * SAMPLE_S:
            self._samples.popleft()
