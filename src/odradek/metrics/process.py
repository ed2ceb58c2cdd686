"""The process, its event loop and its disks: CPU, memory, file descriptors, loop idle ratio, log dir space.

`LoopIdle` stands in for Kafka's RequestHandlerAvgIdlePercent and NetworkProcessorAvgIdlePercent. A node's
network "processors" and request "handlers" are one event loop thread, so both are the share of wall time,
over the last `window_s` seconds, that the loop thread did not spend on the CPU: 1 - (thread CPU time
elapsed / wall time elapsed). The loop thread's CPU time is `time.thread_time()`, read on that thread (at
start and at each scrape, which run on the loop). Time the loop is blocked in a system call that sleeps (a
disk read that misses the page cache, an fsync) is not CPU time, so it counts as idle; the log cleaner's
thread is not the loop and does not count at all.

`WindowedStat` is Kafka's avg/max over a sample window, for the Raft commit latency.
"""

from __future__ import annotations

import math
import os
import resource
import time
from collections import deque
from collections.abc import Callable, Iterable

from odradek.metrics.registry import MetricFamily, counter_family, gauge_family

LOOP_IDLE_WINDOW_S = 60.0


class LoopIdle:
    def __init__(self, window_s: float = LOOP_IDLE_WINDOW_S, wall: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], float] = time.thread_time):
        self.window_s = window_s
        self.wall = wall
        self.cpu = cpu
        self._samples: deque[tuple[float, float]] = deque([(wall(), cpu())])

    def ratio(self) -> float:
        """The idle share since the oldest sample kept (at most `window_s` old once there are several)."""
        now_wall, now_cpu = self.wall(), self.cpu()
        samples = self._samples
        # keep the newest sample at least window_s old as the window's start
        while len(samples) > 1 and now_wall - samples[1][0] >= self.window_s:
            samples.popleft()
        start_wall, start_cpu = samples[0]
        samples.append((now_wall, now_cpu))
        elapsed = now_wall - start_wall
        if elapsed <= 0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (now_cpu - start_cpu) / elapsed))


class WindowedStat:
    """Average and maximum of the values recorded in the last `window_s` seconds (NaN when none, as Kafka)."""

    def __init__(self, window_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self.clock = clock
        self._values: deque[tuple[float, float]] = deque()

    def record(self, value: float) -> None:
        now = self.clock()
        self._values.append((now, value))
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self._values and now - self._values[0][0] > self.window_s:
            self._values.popleft()

    def avg_max(self) -> tuple[float, float]:
        self._expire(self.clock())
        if not self._values:
            return math.nan, math.nan
        values = [v for _, v in self._values]
        return sum(values) / len(values), max(values)


def _page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 4096


def process_families(start_time_s: float) -> Iterable[MetricFamily]:
    """Prometheus' standard process_* metrics, as its client libraries name them."""
    times = os.times()
    yield counter_family("process_cpu_seconds_total", "User and system CPU time of the node process (all "
                                                      "threads), in seconds.").add((), times.user + times.system)
    try:
        with open("/proc/self/statm") as f:
            virtual_pages, resident_pages = (int(x) for x in f.read().split()[:2])
        page = _page_size()
        resident, virtual = resident_pages * page, virtual_pages * page
    except OSError:  # not Linux: the peak resident size is what getrusage knows
        resident, virtual = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, math.nan
    yield gauge_family("process_resident_memory_bytes", "Resident memory of the node process, in bytes.").add(
        (), resident)
    yield gauge_family("process_virtual_memory_bytes", "Virtual memory of the node process, in bytes.").add(
        (), virtual)
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_fds = math.nan
    yield gauge_family("process_open_fds", "Open file descriptors (segment files, sockets).").add((), open_fds)
    yield gauge_family("process_max_fds", "Most file descriptors the process may open (RLIMIT_NOFILE).").add(
        (), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    yield gauge_family("process_start_time_seconds", "When the node started, in seconds since the epoch.").add(
        (), start_time_s)


def disk_families(log_dirs: Iterable[str], offline: set[str]) -> Iterable[MetricFamily]:
    """Space of each log dir's file system, and whether the dir is offline (Kafka's LogDirectoryOffline)."""
    free = gauge_family("odradek_log_dir_free_bytes", "Bytes available to the node in the file system of a "
                                                      "log dir (statvfs f_bavail).", ("log_dir",))
    total = gauge_family("odradek_log_dir_total_bytes", "Size of the file system of a log dir, in bytes.",
                         ("log_dir",))
    offline_family = gauge_family("kafka_log_logmanager_logdirectoryoffline", "1 if the log dir is offline "
                                  "(an I/O error took it out of service), else 0.", ("logdirectory",))
    count = 0
    for log_dir in log_dirs:
        is_offline = log_dir in offline
        count += is_offline
        offline_family.add((log_dir,), int(is_offline))
        try:
            stats = os.statvfs(log_dir)
        except OSError:
            continue
        free.add((log_dir,), stats.f_bavail * stats.f_frsize)
        total.add((log_dir,), stats.f_blocks * stats.f_frsize)
    yield free
    yield total
    yield offline_family
    yield gauge_family("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs offline after an I/O "
                                                                         "error.").add((), count)
