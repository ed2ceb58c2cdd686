"""The event loop's idle ratio, windowed averages, and the process and disk gauges."""

import math

from odradek.metrics.process import LoopIdle, WindowedStat, disk_families, process_families
from odradek.metrics.registry import render


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_loop_idle_is_the_share_of_wall_time_off_the_cpu_over_the_window():
    wall, cpu = Clock(), Clock()
    idle = LoopIdle(window_s=60, wall=wall, cpu=cpu)
    wall.t, cpu.t = 10, 2.5
    assert idle.ratio() == 0.75
    wall.t, cpu.t = 70, 2.5  # a minute later, idle since then: the window starts at the sample 60 s old
    assert idle.ratio() == 1.0
    wall.t, cpu.t = 140, 62.5  # busy for 60 s of the last 70: the window starts at the newest sample 60+ s old
    assert math.isclose(idle.ratio(), 1 - 60 / 70)
    wall.t = 140  # no time passed: idle by definition, and never outside 0..1
    assert 0 <= idle.ratio() <= 1


def test_windowed_stat_forgets_old_values():
    clock = Clock()
    stat = WindowedStat(window_s=30, clock=clock)
    assert all(math.isnan(v) for v in stat.avg_max())
    stat.record(10)
    clock.t = 10
    stat.record(30)
    assert stat.avg_max() == (20, 30)
    clock.t = 35
    assert stat.avg_max() == (30, 30)
    clock.t = 100
    assert all(math.isnan(v) for v in stat.avg_max())


def test_process_and_disk_gauges(tmp_path):
    text = render(process_families(1234.5))
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                 "process_max_fds"):
        (line,) = [line for line in text.splitlines() if line.startswith(name + " ")]
        assert float(line.split()[1]) > 0
    assert "process_start_time_seconds 1234.5" in text
    online, offline = str(tmp_path / "a"), str(tmp_path / "b")
    (tmp_path / "a").mkdir()
    text = render(disk_families([online, offline], {offline}))
    free = [line for line in text.splitlines() if line.startswith(f'odradek_log_dir_free_bytes{{log_dir="{online}"}}')]
    assert len(free) == 1 and float(free[0].split()[1]) > 0
    assert f'kafka_log_logmanager_logdirectoryoffline{{logdirectory="{offline}"}} 1' in text
    assert "kafka_log_logmanager_offlinelogdirectorycount 1" in text
