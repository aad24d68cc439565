"""Read a finished `torch.profiler` run into a breakdown: the share of the step in each region,
the slowest operators and kernels by self time, and the GPU's idle time between kernels.

Times in the profiler's events are microseconds; everything returned is seconds per step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from autotune.contract.profile import Op, Region
from autotune.trial.compose import REGIONS

__all__ = ["PREFIX", "STEP_PREFIX", "GpuTime", "Spans", "gpu_time", "is_kernel", "merged_us",
           "recorded_name", "regions", "step_spans", "top_ops"]

PREFIX = "autotune: "
"""How the regions' names begin in the trace, apart from PyTorch's own ("aten::mm")."""
STEP_PREFIX = "ProfilerStep"
"""The range `profile.step()` records around each step: "ProfilerStep#7" in the trace,
"ProfilerStep*" in the profiler's events (torch.profiler)."""
TOP = 10
US = 1e-6


def recorded_name(region: str) -> str:
    return PREFIX + region


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spans:
    """The profiled steps on the host's clock."""

    count: int
    total_us: float
    """Their summed wall time."""
    start_us: float
    end_us: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuTime:
    busy_fraction: float
    """Kernel time (overlaps merged) over the span from the first step's start to the end of
    the last step or of its last kernel, whichever is later."""
    idle_seconds: float
    """Time per step in that span with no kernel running."""


def step_spans(events: Iterable[Any]) -> Spans:
    """The steps the profiler recorded (its `ProfilerStep#N` ranges on the host; on CUDA Kineto
    also projects each onto the GPU's timeline, which would count every step twice: an H100
    profile of 5 steps read 10, each averaging a host step and its shorter projection)."""
    steps = [e for e in events if e.name.startswith(STEP_PREFIX) and _is_host(e)]
    if not steps:
        raise RuntimeError("the profiler recorded no step (no ProfilerStep range): nothing to "
                           "break down")
    return Spans(count=len(steps), total_us=sum(e.time_range.elapsed_us() for e in steps),
                 start_us=min(e.time_range.start for e in steps),
                 end_us=max(e.time_range.end for e in steps))


def regions(events: Iterable[Any], spans: Spans, *, cuda: bool) -> tuple[Region, ...]:
    """Each region's wall time and share of the step, and "other" for the rest (the step's
    Python between regions, the loss's accumulation), so the shares sum to 1. On CUDA, each
    region's GPU time is the kernels launched inside its host range; backward's are launched
    by autograd's own thread, outside it, so the steps' kernels no region launched count as
    backward's."""
    events = list(events)
    host = dict.fromkeys(REGIONS, 0.0)
    gpu = dict.fromkeys(REGIONS, 0.0)
    names = {recorded_name(r): r for r in REGIONS}
    for e in events:
        region = names.get(e.name)
        if region is None or not _is_host(e):  # not its projection onto the GPU's timeline
            continue
        host[region] += e.time_range.elapsed_us()
        # The kernels launched inside the range and its children's (FunctionEvent's total).
        gpu[region] += getattr(e, "device_time_total", 0.0) if cuda else 0.0
    if cuda:
        kernels = sum(e.time_range.elapsed_us() for e in events if is_kernel(e)
                      and spans.start_us <= e.time_range.start < spans.end_us)
        gpu["backward"] += max(0.0, kernels - sum(gpu.values()))
    found = [Region(name=r, host_seconds=host[r] / spans.count * US,
                    host_share=host[r] / spans.total_us,
                    gpu_seconds=gpu[r] / spans.count * US if cuda else None)
             for r in REGIONS]
    rest = max(0.0, spans.total_us - sum(host.values()))  # regions never nest: no double count
    other = Region(name="other", host_seconds=rest / spans.count * US,
                   host_share=rest / spans.total_us, gpu_seconds=None)
    return (*found, other)


def top_ops(averages: Iterable[Any], spans: Spans, *, cuda: bool) -> tuple[Op, ...]:
    """The TOP operators by host self time, and on CUDA the TOP kernels by device self time.
    The step's own ranges are left out: their self time is the Python around the operators."""
    ops, kernels = [], []
    for a in averages:
        if a.key.startswith((PREFIX, STEP_PREFIX)):
            continue
        if is_kernel(a):
            kernels.append(a)
        elif a.self_cpu_time_total > 0:
            ops.append(a)
    per_step = spans.total_us / spans.count

    def op(a: Any, kind: str, self_us: float) -> Op:
        return Op(name=a.key, kind=kind, self_seconds=self_us / spans.count * US,
                  calls=a.count / spans.count, share=self_us / spans.count / per_step)

    chosen = [op(a, "cpu", a.self_cpu_time_total)
              for a in sorted(ops, key=lambda a: -a.self_cpu_time_total)[:TOP]]
    if cuda:
        chosen += [op(a, "cuda", _device_self(a))
                   for a in sorted(kernels, key=lambda a: -_device_self(a))[:TOP]]
    return tuple(chosen)


def gpu_time(events: Iterable[Any], spans: Spans) -> GpuTime | None:
    """Busy and idle time of the GPU over the profiled steps (None: no kernel recorded)."""
    intervals = sorted((e.time_range.start, e.time_range.end) for e in events if is_kernel(e))
    if not intervals:
        return None
    busy = merged_us(intervals)
    start = min(spans.start_us, intervals[0][0])
    end = max(spans.end_us, max(e for _, e in intervals))
    span = end - start
    if span <= 0:
        return None
    return GpuTime(busy_fraction=min(1.0, busy / span),
                   idle_seconds=max(0.0, span - busy) / spans.count * US)


def merged_us(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length of sorted intervals, overlaps counted once (kernels on several streams)."""
    busy = 0.0
    start, end = intervals[0]
    for s, e in intervals[1:]:
        if s > end:
            busy += end - start
            start, end = s, e
        else:
            end = max(end, e)
    return busy + (end - start)


def is_kernel(event: Any) -> bool:
    """A kernel, copy or memset on the GPU. Not a `record_function` range projected onto the
    GPU's timeline (Kineto's gpu_user_annotation, a CUDA event of the range's name): it spans
    its kernels and the gaps between them."""
    from torch.autograd import DeviceType

    return event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation",
                                                                 False)


def _is_host(event: Any) -> bool:
    from torch.autograd import DeviceType

    return event.device_type == DeviceType.CPU


def _device_self(average: Any) -> float:
    # Named cuda_* before torch 2.4.
    return getattr(average, "self_device_time_total", None) or \
        getattr(average, "self_cuda_time_total", 0.0)
