"""Why one config's runs disagree, measured while it was timed: what else ran on its CPUs and
its GPU, and whether clocks were held back. `likely_cause` turns the facts of some runs into
the sentence a warning gives when their spread is high."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from autotune.contract.fmt import human
from autotune.contract.stats import relative_spread

__all__ = ["Noise", "OtherProcess", "Run", "SPREAD_WARNING", "likely_cause", "spread_warning"]

SPREAD_WARNING = 0.1
"""Runs of one config whose (max - min) / median exceeds this get a warning naming the cause."""
# Others' CPU use that matters: half a CPU, or a tenth of the trial's CPUs on a larger machine.
OTHER_CPUS = 0.5
OTHER_CPUS_SHARE = 0.1
# A hypervisor taking this share of the CPUs makes CPU-bound rates vary (as outputs/best.py).
STEAL = 0.05
# The SM clock below this share of its maximum at the end of the windows: held back.
GPU_CLOCK = 0.85
# Clock-limit reasons (NVML's clocks event reasons) that slow a busy GPU down; the power cap is
# left out: a busy H100 sits at it, and a low clock ratio says when it costs speed.
SLOWDOWNS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                       "hw_power_brake_slowdown"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class OtherProcess:
    """A process outside the trial that used CPU time while it was timed."""

    name: str
    pid: int
    cpu_seconds: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Noise:
    """What else happened on the machine during a trial's timed windows (`trial/noiseprobe`)."""

    seconds: float
    """Wall seconds the readings span: the timed windows."""
    cpus: int
    """CPUs the trial may run on (its affinity)."""
    other_cpu_seconds: float | None = None
    """CPU time spent on those CPUs outside the trial's process group (its DataLoader workers
    are inside); None where /proc cannot tell."""
    busiest: tuple[OtherProcess, ...] = ()
    """The processes outside the trial that used the most CPU time, most first."""
    gpu_others: tuple[str, ...] | None = None
    """Other processes with a context on the trial's GPU ("name (pid)"); None where that
    cannot be seen (no nvidia-smi, a CPU trial, or a PID namespace that hides them)."""
    gpu_clock_ratio: float | None = None
    """SM clock over its maximum at the end of the windows."""
    gpu_temperature_c: float | None = None
    gpu_limits: tuple[str, ...] | None = None
    """Active clock-limit reasons at the end of the windows ("sw_power_cap", ...)."""
    cpu_throttle_events: int | None = None
    """Thermal throttling events counted on the trial's CPUs during the windows."""

    def __post_init__(self) -> None:
        busiest = tuple(p if isinstance(p, OtherProcess) else OtherProcess(**p)
                        for p in self.busiest)  # from JSON: dicts
        object.__setattr__(self, "busiest", busiest)
        for name in ("gpu_others", "gpu_limits"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def other_cpus(self) -> float | None:
        """CPUs kept busy by others, on average over the windows."""
        if self.other_cpu_seconds is None or self.seconds <= 0:
            return None
        return self.other_cpu_seconds / self.seconds

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["busiest"] = [dataclasses.asdict(p) for p in self.busiest]
        for name in ("gpu_others", "gpu_limits"):
            if data[name] is not None:
                data[name] = list(data[name])
        return data


class _Steal(Protocol):
    steal_fraction: float


class Run(Protocol):
    """What a warning reads of one run: a `TrialResult` (not imported: result.py imports this
    module for the `noise` field)."""

    @property
    def throughput(self) -> float | None: ...
    @property
    def noise(self) -> Noise | None: ...
    @property
    def host_cpu(self) -> _Steal | None: ...


def _causes(noise: Noise | None, steal: float | None) -> list[str]:
    """What in one run's facts would make its rate differ from another run's."""
    causes = []
    if noise is not None:
        others = noise.other_cpus
        if others is not None and others >= max(OTHER_CPUS, OTHER_CPUS_SHARE * noise.cpus):
            names = ", ".join(f"{p.name} (pid {p.pid}) {p.cpu_seconds / noise.seconds:.1f}"
                              for p in noise.busiest[:3]
                              if p.cpu_seconds / noise.seconds >= 0.05)  # not "0.0" CPUs
            causes.append(f"other processes kept {others:.1f} of the trial's {noise.cpus} CPUs "
                          "busy" + (f" (busiest: {names})" if names else ""))
        if noise.gpu_others:
            causes.append(f"{len(noise.gpu_others)} other process(es) on the GPU: "
                          + ", ".join(noise.gpu_others[:3]))
        slowed = sorted(SLOWDOWNS & set(noise.gpu_limits or ()))
        if slowed:
            causes.append("the GPU's clocks were limited: " + ", ".join(slowed))
        elif noise.gpu_clock_ratio is not None and noise.gpu_clock_ratio < GPU_CLOCK:
            causes.append(f"the GPU's SM clock was at {noise.gpu_clock_ratio:.0%} of its maximum"
                          + (f" ({', '.join(noise.gpu_limits)})" if noise.gpu_limits else ""))
        if noise.cpu_throttle_events:
            causes.append(f"{noise.cpu_throttle_events} CPU thermal throttling event(s)")
    if steal is not None and steal >= STEAL:
        causes.append(f"the hypervisor took {steal:.0%} of the CPUs' time")
    return causes


def likely_cause(runs: Sequence[Run]) -> str | None:
    """The measured causes of noise in these runs, one sentence; None when every measurement
    was quiet (or none was taken)."""
    seen: list[str] = []
    for i, run in enumerate(runs):
        steal = run.host_cpu.steal_fraction if run.host_cpu is not None else None
        for cause in _causes(run.noise, steal):
            label = f"run {i + 1}: {cause}" if len(runs) > 1 else cause
            seen.append(label)
    return "; ".join(seen) if seen else None


def spread_warning(runs: Sequence[Run], *, unit: str,
                   threshold: float = SPREAD_WARNING) -> str | None:
    """A warning when the ok runs of one config disagree by more than `threshold`, naming the
    likely cause where one was measured; None when they agree."""
    rates = [r.throughput for r in runs if r.throughput]
    if len(rates) < 2:
        return None
    spread = relative_spread(rates)
    if spread <= threshold:
        return None
    # Said as the fastest over the slowest, as best.yaml's other warnings and the PNG say it.
    text = (f"runs disagree by {max(rates) / min(rates):.3g}x ({human(min(rates))} to "
            f"{human(max(rates))} {unit}/s)")
    cause = likely_cause(runs)
    if cause:
        return f"{text}; likely cause: {cause}"
    if all(r.noise is not None for r in runs):
        # Name only what was measured: a CPU trial has no GPU to have read.
        gpu = any(r.noise is not None and r.noise.gpu_others is not None for r in runs)
        seen = "no CPU time outside the trial, " + ("no other GPU process, " if gpu else "") \
            + "no throttling"
        return f"{text}; nothing measured explains it ({seen}): the step's own time varies"
    return f"{text}; no cause could be measured on this machine"
