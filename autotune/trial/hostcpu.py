"""How busy the machine's CPUs were while a trial was timed, and how much the hypervisor took.

Two numbers from the kernel's own accounting (`/proc/stat`, first line: time every CPU spent in
each state since boot, proc(5)), read at the start and the end of the timed windows:

- busy: the share of all CPU time spent working (user, nice, system, irq, softirq). An
  input-bound step with the CPUs near 100% busy cannot be helped by more DataLoader workers.
- steal: the share a virtual machine's CPUs were ready to run but the hypervisor ran someone
  else. Where it is high, CPU-bound rates change from run to run with the neighbours' load.

Linux only: elsewhere `read_cpu_times` returns None and nothing is reported.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autotune.contract.result import HostCpu

__all__ = ["CpuTimes", "cpu_usage", "read_cpu_times"]

PROC_STAT = Path("/proc/stat")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CpuTimes:
    """Cumulative clock ticks of all CPUs, by state."""

    busy: int
    idle: int
    """Idle and waiting for I/O."""
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal


def read_cpu_times(path: Path = PROC_STAT) -> CpuTimes | None:
    """The aggregate `cpu` line of /proc/stat, or None where there is none (not Linux)."""
    try:
        first = path.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already
    # counted in user and nice, so it is not added again.
    ticks = [int(v) for v in first[1:9]]
    ticks += [0] * (8 - len(ticks))  # kernels before 2.6.11 have no steal column
    user, nice, system, idle, iowait, irq, softirq, steal = ticks
    return CpuTimes(busy=user + nice + system + irq + softirq, idle=idle + iowait, steal=steal)


def cpu_usage(before: CpuTimes | None, after: CpuTimes | None) -> HostCpu | None:
    """Busy and steal fractions of all CPU time between two readings (None if either is
    missing or no tick passed)."""
    if before is None or after is None:
        return None
    total = after.total - before.total
    if total <= 0:
        return None
    return HostCpu(busy_fraction=(after.busy - before.busy) / total,
                   steal_fraction=(after.steal - before.steal) / total)
