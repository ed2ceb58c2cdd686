"""Replica placement: spread each partition's replicas over brokers and, when brokers name racks, over racks."""

from __future__ import annotations


def rack_alternated(racks: dict[int, str | None]) -> list[int]:
    """Broker ids ordered so that neighbours sit in different racks where possible: one from each rack in turn.

    Brokers without a rack form one group of their own, as Kafka treats a mix of racked and unracked brokers.
    """
    by_rack: dict[str | None, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    groups = [by_rack[rack] for rack in sorted(by_rack, key=lambda r: (r is None, r or ""))]
    ordered = []
    for position in range(max((len(g) for g in groups), default=0)):
        ordered += [group[position] for group in groups if position < len(group)]
    return ordered


def place_replicas(racks: dict[int, str | None], num_partitions: int, replication_factor: int,
                   first_index: int = 0) -> dict[int, list[int]]:
    """Replicas of partitions first_index.. : partition i starts at the i-th broker of the rack-alternated
    order (so leaders, the first replicas, spread evenly) and takes the following brokers (shifted by one more
    each round over the brokers) of racks it does not use yet, then, when racks run out, the following
    brokers. Rack spread comes before broker evenness."""
    brokers = rack_alternated(racks)
    count = len(brokers)
    placed = {}
    for i in range(num_partitions):
        start = (first_index + i) % count
        rest = brokers[start + 1:] + brokers[:start]
        # Each round over the brokers shifts the followers, so the same leader gets other followers.
        shift = (first_index + i) // count % max(1, count - 1)
        ring = [brokers[start], *rest[shift:], *rest[:shift]]
        chosen: list[int] = []
        used: set[str | None] = set()
        for broker in ring:
            if len(chosen) < replication_factor and racks[broker] not in used:
                chosen.append(broker)
                used.add(racks[broker])
        chosen += [b for b in ring if b not in chosen][:replication_factor - len(chosen)]
        placed[first_index + i] = chosen
    return placed
