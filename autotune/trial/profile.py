"""The `autotune profile` process: build the step as a trial does, time it, profile it, say
where its time goes.

Run as `python -m autotune.trial.profile DIR`: reads `DIR/request.json` (a `ProfileRequest`),
writes into DIR `trace.json` (Chrome/Perfetto, `torch.profiler`'s own export),
`tensorboard/` when asked, `memory-snapshot.pickle` on CUDA and `breakdown.json`. The parent
has set the config's allocator environment, as for a trial (`study.execution.runner`).

The order: the step is timed first as a trial times it (which also warms it up and compiles
it), then profiled on the `torch.profiler` schedule, then diagnosed (when best.yaml recorded
no diagnosis): the diagnosis's probes drain the loader's queue, which must not happen before
the profiled steps.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.contract.host import pin_to_share
from autotune.contract.profile import Breakdown, ProfileRequest, ProfileSettings
from autotune.trial import peaks, steps
from autotune.trial.lifetime import die_with_parent
from autotune.trial.progress import Progress

if TYPE_CHECKING:
    import torch

    from autotune.trial.compose import TrainStep

__all__ = ["MEMORY_SNAPSHOT", "TRACE", "main", "profile_steps", "run_profile"]

TRACE = "trace.json"
MEMORY_SNAPSHOT = "memory-snapshot.pickle"
TENSORBOARD = "tensorboard"
DRAIN_SECONDS = 15.0
"""The longest the queued batches are dropped for before the traced steps (a slow loader's
queue is empty long before)."""
MEMORY_HISTORY_ENTRIES = 100_000
"""Allocator events kept for the snapshot (PyTorch's memory docs use this many): enough for
several steps of a large model, bounded so a long profile cannot grow without end."""


def run_profile(request: ProfileRequest, out: Path) -> Breakdown:
    """Build, time, profile and diagnose the request's step; write the files into `out`."""
    import torch

    trial = request.trial
    progress = Progress(None, None)
    steps.import_trial_code()
    device = torch.device(trial.device)
    steps.prepare(trial, device)
    adapter_cls, dataset = steps.load(trial, None)
    fingerprint = steps.start_device(device, None)
    step = steps.build(adapter_cls, dataset, trial.config, device, progress, None)
    try:
        step.start_loader()
        settings = steps.settings_for(trial.config, trial.measure,
                                      epoch_batches=step.epoch_batches())
        timed = steps.time_step(step, trial, settings, progress, None, device)
        print(f"timed: {timed.measurement.throughput:.4g} {adapter_cls.unit}/s, "
              f"step {timed.measurement.step_seconds * 1e3:.2f} ms; profiling", flush=True)
        prof, files = profile_steps(step, request.settings, out, device)
        memory = peaks.memory(device)
        diagnosed = steps.Diagnosed(diagnosis=request.diagnosis)
        if request.diagnosis is None and trial.diagnose:
            diagnosed = steps.diagnosed(step, timed, settings.prefetch_batches)
    finally:
        step.close()
    breakdown = _breakdown(prof, request, device, fingerprint.device, adapter_cls.unit)
    m = timed.measurement
    return dataclasses.replace(
        breakdown, throughput=m.throughput, measured_step_seconds=m.step_seconds,
        data_wait_fraction=m.data_wait_fraction, peak_allocated_mb=memory.peak_allocated_mb,
        peak_reserved_mb=memory.peak_reserved_mb, peak_rss_mb=memory.peak_rss_mb,
        diagnosis=diagnosed.diagnosis, diagnosis_error=diagnosed.error,
        diagnosis_from=("" if diagnosed.diagnosis is None else
                        "best.yaml" if request.diagnosis is not None else "this run"),
        files=files)


def profile_steps(step: TrainStep, settings: ProfileSettings, out: Path,
                  device: torch.device) -> tuple[Any, tuple[str, ...]]:
    """Run the schedule's steps under `torch.profiler` with the step's regions recorded;
    export the trace (and the memory snapshot on CUDA). Returns the profiler and the files."""
    import torch
    from torch.profiler import (
        ProfilerActivity,
        profile,
        record_function,
        schedule,
        tensorboard_trace_handler,
    )

    from autotune.trial.breakdown import recorded_name
    from autotune.trial.compose import no_region

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda
    handler = (tensorboard_trace_handler(str(out / TENSORBOARD)) if settings.tensorboard
               else None)
    snapshot = cuda and settings.memory_snapshot
    step.sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)  # the peaks of the profiled steps
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=MEMORY_HISTORY_ENTRIES)
    before = settings.wait + settings.warmup
    # A loader's workers each hand over a whole batch at a time: fewer traced steps than a few
    # rounds of all of them read one burst (the design's measurement rules). The drained ResNet
    # above traced 5 steps of 236 ms for a timed 61 ms with 16 workers.
    active = max(settings.active, 3 * step.config.num_workers)
    step.region = lambda name: record_function(recorded_name(name))
    try:
        with profile(activities=activities, on_trace_ready=handler,
                     schedule=schedule(wait=settings.wait, warmup=settings.warmup,
                                       active=active, repeat=1)) as prof:
            for i in range(before + active):
                step()
                # Each step's range ends when its kernels do: otherwise the host runs ahead by
                # the launch queue and a step reads short (an H100 GPT-2: 123 ms traced for
                # 156 ms timed). One synchronization a step costs the GPU microseconds.
                with step.region("GPU wait"):
                    step.sync()
                if snapshot and i == before - 1:  # the steps before the traced ones, dumped
                    _dump_memory(out)             # in the last untraced step's range
                if i == before - 1:
                    _drain(step)
                prof.step()
        step.sync()
        if snapshot and not before:
            _dump_memory(out)
    finally:
        step.region = no_region
    files = [TRACE]
    if settings.tensorboard:
        # Kineto saves a trace once: the handler has exported it, trace.json is its copy.
        written = sorted((out / TENSORBOARD).glob("*.pt.trace.json"),
                         key=lambda path: path.stat().st_mtime)
        shutil.copyfile(written[-1], out / TRACE)
    else:
        prof.export_chrome_trace(str(out / TRACE))
    if snapshot:
        files.append(MEMORY_SNAPSHOT)
    if settings.tensorboard:
        files.append(TENSORBOARD)
    return prof, tuple(files)


def _drain(step: TrainStep) -> None:
    """Drop the batches the loader's workers queued while the profiler and the memory history
    started, so the traced steps wait for their loader as the timed ones did: an input-bound
    ResNet on an H100 (16 workers, prefetch 4) waited 78% of its timed steps and 0.6% of its
    traced ones, served from the queue."""
    workers = step.config.num_workers
    if workers:
        # All of them, not only until a pull blocks: batches come back in sampler order, so
        # the next one may be late while later ones wait ready behind it (the same ResNet
        # still read 0% data wait traced when draining stopped at the first pull that waited).
        queued = workers * (step.config.prefetch_factor or 2)
        step.skip_queued(math.inf, queued + workers, DRAIN_SECONDS)


def _dump_memory(out: Path) -> None:
    """Write the allocator's history and stop recording it: recording keeps each allocation's
    Python stack, a cost the traced steps should not carry."""
    import torch

    torch.cuda.memory._dump_snapshot(str(out / MEMORY_SNAPSHOT))
    torch.cuda.memory._record_memory_history(enabled=None)


def _breakdown(prof: Any, request: ProfileRequest, device: torch.device, where: str,
               unit: str) -> Breakdown:
    from autotune.trial import breakdown as read

    cuda = device.type == "cuda"
    events = prof.events()
    spans = read.step_spans(events)
    gpu = read.gpu_time(events, spans) if cuda else None
    return Breakdown(
        adapter=request.trial.adapter, config=request.trial.config, device=where, unit=unit,
        steps=spans.count, step_seconds=spans.total_us / spans.count * 1e-6,
        regions=read.regions(events, spans, cuda=cuda),
        top_ops=read.top_ops(prof.key_averages(), spans, cuda=cuda),
        gpu_busy_fraction=None if gpu is None else gpu.busy_fraction,
        gpu_idle_seconds=None if gpu is None else gpu.idle_seconds,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autotune.trial.profile DIR", file=sys.stderr)
        return 2
    die_with_parent()
    pin_to_share()  # before torch starts its thread pool, as a trial
    out = Path(args[0])
    request = ProfileRequest.from_dict(json.loads((out / "request.json").read_text()))
    started = time.perf_counter()
    breakdown = run_profile(request, out)
    breakdown.save(out / "breakdown.json")
    print(f"profiled {breakdown.steps} steps in {time.perf_counter() - started:.1f} s: "
          f"{', '.join(breakdown.files)} and breakdown.json in {out}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
