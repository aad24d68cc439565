"""Measure what else used the machine while a trial was timed: read before and after its
timed windows, never during them.

- CPU time outside the trial's process group on the CPUs it may use: the busy ticks of those
  CPUs (`/proc/stat`, one line per CPU) minus the ticks of the group's processes (utime,
  stime and their reaped children's cutime, cstime in `/proc/PID/stat`, proc(5)); the group
  holds the trial and its DataLoader workers. The busiest outside processes are named.
- Other processes on the trial's GPU, its SM clock against the maximum, its temperature and
  the active clock-limit reasons, from `nvidia-smi` when it is there.
- CPU thermal throttling events (`/sys/devices/system/cpu/cpuN/thermal_throttle`), where the
  kernel counts them.

Everything missing on a machine is reported as None, never guessed.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Collection
from pathlib import Path

from autotune.contract.noise import Noise, OtherProcess

__all__ = ["Probe", "finish", "gpu_uuid", "parse_gpu", "parse_limits", "start"]

PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc's unit (USER_HZ)
# nvidia-smi's clock event reasons bit mask (NVML nvmlClocksEventReason*).
LIMIT_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
              0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
              0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
              0x100: "display_clock_setting"}
SMI_SECONDS = 5.0

Run = Callable[[list[str]], str | None]
"""Runs a command and returns its stdout, or None when it cannot run or fails."""


@dataclasses.dataclass(frozen=True)
class Probe:
    """The readings taken right before the timed windows."""

    wall: float
    busy: int | None
    """Busy ticks of the trial's CPUs."""
    group: int | None
    """Ticks of the trial's process group."""
    others: dict[int, tuple[str, int]]
    """pid -> (name, ticks) of every process outside the group."""
    throttles: int | None


def start(*, pgrp: int | None = None, cpus: Collection[int] | None = None,
          proc: Path = PROC, sys_cpu: Path = SYS_CPU,
          clock: Callable[[], float] = time.monotonic) -> Probe:
    """Read the counters before the windows (`pgrp`: the trial's group, default this
    process's; `cpus`: those it may use, default its affinity)."""
    pgrp, cpus = _defaults(pgrp, cpus)
    group, others = _processes(proc, pgrp)
    return Probe(wall=clock(), busy=_busy_ticks(proc, cpus), group=group, others=others,
                 throttles=_throttles(sys_cpu, cpus))


def finish(before: Probe, *, pgrp: int | None = None, cpus: Collection[int] | None = None,
           gpu_uuid: str | None = None, proc: Path = PROC, sys_cpu: Path = SYS_CPU,
           clock: Callable[[], float] = time.monotonic, run: Run | None = None,
           top: int = 3) -> Noise:
    """Read again after the windows and say what happened in between. `gpu_uuid`: the trial's
    GPU (None on a CPU trial: no GPU query); `run`: how commands run (tests pass a fake)."""
    pgrp, cpus = _defaults(pgrp, cpus)
    seconds = clock() - before.wall
    group, others = _processes(proc, pgrp)
    busy = _busy_ticks(proc, cpus)
    other_seconds = None
    if None not in (busy, before.busy, group, before.group):
        other_seconds = max(0, (busy - before.busy) - (group - before.group)) / TICK
    used = []
    for pid, (name, ticks) in others.items():
        delta = ticks - before.others.get(pid, (name, 0))[1]
        if delta > 0:
            used.append(OtherProcess(name=name, pid=pid, cpu_seconds=delta / TICK))
    used.sort(key=lambda p: -p.cpu_seconds)
    throttles = _throttles(sys_cpu, cpus)
    gpu = _gpu(gpu_uuid, set(_group_pids(proc, pgrp)), run or _run) if gpu_uuid else {}
    return Noise(seconds=seconds, cpus=len(cpus), other_cpu_seconds=other_seconds,
                 busiest=tuple(used[:top]),
                 cpu_throttle_events=(throttles - before.throttles
                                      if throttles is not None and before.throttles is not None
                                      else None), **gpu)


def gpu_uuid(device: object) -> str | None:
    """A torch device's GPU as nvidia-smi names it (None on a CPU)."""
    import torch

    if getattr(device, "type", None) != "cuda":
        return None
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    return str(uuid) if uuid is not None else None


def _defaults(pgrp: int | None, cpus: Collection[int] | None) -> tuple[int, Collection[int]]:
    if pgrp is None:
        pgrp = os.getpgrp()
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(
            os.cpu_count() or 1)
    return pgrp, cpus


def _stat(path: Path) -> tuple[str, int, int, int] | None:
    """(name, pgrp, ticks, own ticks) from /proc/PID/stat: ticks include reaped children."""
    try:
        text = path.read_text()
    except OSError:  # the process ended between listing and reading
        return None
    name = text[text.find("(") + 1:text.rfind(")")]
    fields = text[text.rfind(")") + 2:].split()
    # After the name: state ppid pgrp ... utime(11) stime(12) cutime(13) cstime(14).
    try:
        own = int(fields[11]) + int(fields[12])
        return name, int(fields[2]), own + int(fields[13]) + int(fields[14]), own
    except (IndexError, ValueError):  # not the layout proc(5) describes: say nothing
        return None


def _processes(proc: Path, pgrp: int) -> tuple[int | None, dict[int, tuple[str, int]]]:
    """The group's ticks (with reaped children: a DataLoader worker that exits mid-window has
    its time added to the trial's), and each outside process's own ticks."""
    group, others, seen = 0, {}, False
    for entry in _pids(proc):
        stat = _stat(proc / str(entry) / "stat")
        if stat is None:
            continue
        name, group_id, ticks, own = stat
        seen = True
        if group_id == pgrp:
            group += ticks
        else:
            others[entry] = (name, own)
    return (group if seen else None), others


def _group_pids(proc: Path, pgrp: int) -> list[int]:
    return [pid for pid in _pids(proc)
            if (stat := _stat(proc / str(pid) / "stat")) is not None and stat[1] == pgrp]


def _pids(proc: Path) -> list[int]:
    try:
        return [int(p.name) for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _busy_ticks(proc: Path, cpus: Collection[int]) -> int | None:
    """Busy ticks (user, nice, system, irq, softirq) of the given CPUs, from their cpuN lines."""
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    total, found = 0, False
    for line in lines:
        parts = line.split()
        if parts and parts[0] in wanted and len(parts) >= 8:
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in parts[1:8])
            total += user + nice + system + irq + softirq
            found = True
    return total if found else None


def _throttles(sys_cpu: Path, cpus: Collection[int]) -> int | None:
    counts = []
    for c in cpus:
        try:
            counts.append(int((sys_cpu / f"cpu{c}" / "thermal_throttle" / "core_throttle_count")
                              .read_text()))
        except (OSError, ValueError):
            continue
    return sum(counts) if counts else None


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=SMI_SECONDS,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _gpu(uuid: str, ours: set[int], run: Run) -> dict[str, object]:
    """The GPU's facts from nvidia-smi (empty where it is missing or fails)."""
    facts: dict[str, object] = {}
    for field in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):  # new, old
        out = run(["nvidia-smi", f"--query-gpu=uuid,clocks.sm,clocks.max.sm,temperature.gpu,"
                   f"{field}", "--format=csv,noheader,nounits"])
        if out is not None:
            facts.update(parse_gpu(out, uuid))
            break
    apps = run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name",
                "--format=csv,noheader"])
    if apps is not None:
        listed = [(pid, name) for gpu, pid, name in _rows(apps, 3) if _same_gpu(gpu, uuid)]
        listed_pids = {int(pid) for pid, _ in listed if pid.isdigit()}
        if listed and listed_pids & ours:
            facts["gpu_others"] = tuple(f"{name} ({pid})" for pid, name in listed
                                        if not pid.isdigit() or int(pid) not in ours)
        # Else our own context is not among them: another PID namespace; names say nothing.
    return facts


def parse_gpu(text: str, uuid: str) -> dict[str, object]:
    """Clock ratio, temperature and active limits of GPU `uuid` from nvidia-smi's CSV."""
    for gpu, sm, max_sm, temp, reasons in _rows(text, 5):
        if _same_gpu(gpu, uuid):
            facts: dict[str, object] = {"gpu_limits": parse_limits(reasons)}
            if _number(sm) and _number(max_sm):
                facts["gpu_clock_ratio"] = float(sm) / float(max_sm)
            if _number(temp):
                facts["gpu_temperature_c"] = float(temp)
            return facts
    return {}


def parse_limits(mask: str) -> tuple[str, ...] | None:
    """Names of the set bits of a clock event reasons mask ("0x0000000000000004")."""
    try:
        bits = int(mask, 16)
    except ValueError:
        return None
    return tuple(name for bit, name in LIMIT_BITS.items() if bits & bit)


def _rows(text: str, width: int) -> list[list[str]]:
    rows = [[v.strip() for v in line.split(",")] for line in text.splitlines() if line.strip()]
    return [r for r in rows if len(r) == width]


def _same_gpu(listed: str, uuid: str) -> bool:
    return listed.removeprefix("GPU-").lower() == uuid.removeprefix("GPU-").lower()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return float(text) > 0
