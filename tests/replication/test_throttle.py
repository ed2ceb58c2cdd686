"""Replication throttles: which replicas a topic's setting names, and the windowed byte rate against the cap."""

from odradek.replication.throttle import SAMPLE_S, SAMPLES, ReplicationQuota, is_throttled


def test_throttled_replica_lists_name_partitions_and_brokers_as_kafka_writes_them():
    assert is_throttled("*", 3, 7)
    assert is_throttled("0:1,0:2,1:2", 0, 2) and is_throttled(" 1 : 2 ", 1, 2)
    assert not is_throttled("0:1,1:2", 0, 2) and not is_throttled("", 0, 1)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_is_measured_over_the_window_and_old_samples_expire():
    clock = Clock()
    limit = [1000]
    quota = ReplicationQuota(lambda: limit[0], clock)
    assert not quota.exceeded()
    quota.record(500)  # a young meter divides by at least one second
    assert quota.rate() == 500 and not quota.exceeded()
    clock.now += 0.5
    quota.record(1000)
    assert quota.exceeded()
    clock.now += 10  # 1500 bytes over the meter's 10.5 s
    assert quota.rate() == 1500 / 10.5 and not quota.exceeded()
    limit[0] = 100  # the cap is read at each check: a dynamic change applies at once
    assert quota.exceeded()
    clock.now += SAMPLES * SAMPLE_S  # every sample has aged out
    assert quota.rate() == 0 and not quota.exceeded()
