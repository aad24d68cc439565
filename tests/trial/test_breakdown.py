"""Reading profiler events into a breakdown, on made-up events: the CUDA side (kernel time per
region, idle time between kernels, the slowest kernels) is checked here on any machine."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from torch.autograd import DeviceType

from autotune.trial.breakdown import gpu_time, recorded_name, regions, step_spans, top_ops
from autotune.trial.compose import REGIONS


def event(name: str, start: float, end: float, *, cuda: bool = False,
          device_total: float = 0.0, annotation: bool = False) -> Any:
    return SimpleNamespace(
        name=name, device_type=DeviceType.CUDA if cuda else DeviceType.CPU,
        is_user_annotation=annotation,
        time_range=SimpleNamespace(start=start, end=end, elapsed_us=lambda: end - start),
        device_time_total=device_total)


def average(key: str, *, cpu: float = 0.0, device: float = 0.0, count: int = 1,
            cuda: bool = False, annotation: bool = False) -> Any:
    return SimpleNamespace(key=key, self_cpu_time_total=cpu, self_device_time_total=device,
                           count=count, device_type=DeviceType.CUDA if cuda else DeviceType.CPU,
                           is_user_annotation=annotation)


# Two steps of 1000 us each: forward 300 us, backward 500 us on the host; kernels of
# 200 + 200 us (overlapping by 100) and 300 us a step.
EVENTS = [
    event("ProfilerStep*", 0, 1000), event("ProfilerStep*", 1000, 2000),
    event(recorded_name("forward"), 0, 300, device_total=250),
    event(recorded_name("forward"), 1000, 1300, device_total=250),
    event(recorded_name("backward"), 300, 800, device_total=300),
    event(recorded_name("backward"), 1300, 1800, device_total=300),
    event("gemm", 100, 300, cuda=True), event("gemm", 200, 400, cuda=True),
    event("gemm", 500, 800, cuda=True), event("gemm", 1100, 1300, cuda=True),
    event("gemm", 1200, 1400, cuda=True), event("gemm", 1500, 1800, cuda=True),
    # A range as Kineto projects it onto the GPU: it spans the kernels and their gaps.
    event("Optimizer.step#SGD.step", 0, 2000, cuda=True, annotation=True),
    # The steps and regions projected too: never a step or a region of their own.
    event("ProfilerStep*", 100, 800, cuda=True, annotation=True),
    event("ProfilerStep*", 1100, 1800, cuda=True, annotation=True),
    event(recorded_name("forward"), 100, 400, cuda=True, annotation=True, device_total=300),
]


def test_steps_are_the_profilers_step_ranges() -> None:
    spans = step_spans(EVENTS)
    assert (spans.count, spans.total_us, spans.start_us, spans.end_us) == (2, 2000, 0, 2000)
    with pytest.raises(RuntimeError, match="no step"):
        step_spans([event("aten::mm", 0, 1)])


def test_region_shares_sum_to_one_with_other_and_gpu_time_per_step() -> None:
    found = {r.name: r for r in regions(EVENTS, step_spans(EVENTS), cuda=True)}
    assert list(found) == [*REGIONS, "other"]
    assert found["forward"].host_share == pytest.approx(0.3)
    assert found["backward"].host_seconds == pytest.approx(500e-6)
    assert found["other"].host_share == pytest.approx(0.2)
    assert found["data wait"].host_share == 0.0
    assert sum(r.host_share for r in found.values()) == pytest.approx(1.0)
    # 700 us of kernels a step, 250 launched in forward's range, 300 in backward's, and 150
    # by no region's (autograd's thread launches backward's kernels): backward's.
    assert found["backward"].gpu_seconds == pytest.approx(450e-6)
    assert found["forward"].gpu_seconds == pytest.approx(250e-6)
    assert found["other"].gpu_seconds is None
    on_cpu = regions(EVENTS, step_spans(EVENTS), cuda=False)
    assert all(r.gpu_seconds is None for r in on_cpu)


def test_gpu_idle_time_merges_overlapping_kernels() -> None:
    gpu = gpu_time(EVENTS, step_spans(EVENTS))
    assert gpu is not None
    # 600 us of kernels a step (100-400 merged, 500-800) in 1000 us: 400 us idle.
    assert gpu.busy_fraction == pytest.approx(0.6)
    assert gpu.idle_seconds == pytest.approx(400e-6)
    assert gpu_time(EVENTS[:6] + EVENTS[-4:], step_spans(EVENTS)) is None  # no kernel


def test_top_ops_leave_the_regions_out_and_list_kernels_on_cuda() -> None:
    averages = [average(recorded_name("forward"), cpu=900), average("ProfilerStep*", cpu=999),
                *(average(f"aten::op{i}", cpu=float(i), count=2) for i in range(1, 13)),
                average("gemm", device=1200, count=6, cuda=True),
                average("Optimizer.step#SGD.step", device=4000, cuda=True, annotation=True)]
    spans = step_spans(EVENTS)
    ops = top_ops(averages, spans, cuda=True)
    cpu = [op for op in ops if op.kind == "cpu"]
    assert [op.name for op in cpu] == [f"aten::op{i}" for i in range(12, 2, -1)]
    assert cpu[0].calls == 1.0 and cpu[0].self_seconds == pytest.approx(6e-6)
    (kernel,) = [op for op in ops if op.kind == "cuda"]
    assert kernel.name == "gemm" and kernel.share == pytest.approx(0.6)
    assert all(op.kind == "cpu" for op in top_ops(averages, spans, cuda=False))
