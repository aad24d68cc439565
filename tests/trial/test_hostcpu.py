"""CPU accounting from /proc/stat: parsed from written files, and read for real where it exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import HostCpu
from autotune.trial.hostcpu import CpuTimes, cpu_usage, read_cpu_times


def stat_file(tmp_path: Path, name: str, cpu_line: str) -> Path:
    path = tmp_path / name
    path.write_text(f"{cpu_line}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n")
    return path


def test_busy_and_steal_fractions_between_two_readings(tmp_path: Path) -> None:
    #                         user nice system idle iowait irq softirq steal guest guest_nice
    before = read_cpu_times(stat_file(tmp_path, "a", "cpu  1000 0 200 5000 100 0 0 0 300 0"))
    after = read_cpu_times(stat_file(tmp_path, "b", "cpu  1700 0 300 5150 150 0 50 100 800 0"))
    assert before == CpuTimes(busy=1200, idle=5100, steal=0)  # guest is inside user already
    assert after == CpuTimes(busy=2050, idle=5300, steal=100)
    usage = cpu_usage(before, after)
    assert isinstance(usage, HostCpu)
    # 1150 ticks passed: 850 busy, 200 idle or waiting, 100 stolen.
    assert usage.busy_fraction == pytest.approx(850 / 1150)
    assert usage.steal_fraction == pytest.approx(100 / 1150)


def test_old_kernels_without_a_steal_column(tmp_path: Path) -> None:
    times = read_cpu_times(stat_file(tmp_path, "old", "cpu  10 0 5 100 1 0 0"))
    assert times == CpuTimes(busy=15, idle=101, steal=0)


def test_nothing_to_read_is_none_not_an_error(tmp_path: Path) -> None:
    assert read_cpu_times(tmp_path / "missing") is None
    empty = tmp_path / "empty"
    empty.write_text("")
    assert read_cpu_times(empty) is None
    other = tmp_path / "other"
    other.write_text("intr 1 2 3\n")
    assert read_cpu_times(other) is None
    reading = CpuTimes(busy=1, idle=1, steal=0)
    assert cpu_usage(None, reading) is None
    assert cpu_usage(reading, None) is None
    assert cpu_usage(reading, reading) is None  # no tick passed


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="Linux only")
def test_busy_work_shows_as_busy_cpu_time() -> None:
    import time

    before = read_cpu_times()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # keep one CPU busy
        pass
    usage = cpu_usage(before, read_cpu_times())
    assert usage is not None
    assert 0.0 < usage.busy_fraction <= 1.0
    assert 0.0 <= usage.steal_fraction < 1.0
