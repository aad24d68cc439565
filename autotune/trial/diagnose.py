"""Is a configuration input-bound, compute-bound or overhead-bound? Measured, then classified.

Three numbers beside the trial's throughput: the DataLoader's own rate (batches pulled with no
model), the compute rate (one batch kept on the device, no loader) and, on CUDA, the fraction of
a compute step the GPU spends in kernels. Measuring is done in the trial process; classifying is
a pure function, tested with made-up numbers.

The rates are checked against each other first (`contract.consistency.contradicted`): a rate
that breaks the rules (283/s with data resident beside 2.0k/s end to end, a probe disturbed by
other work) is measured once more, and if it still does, set aside and named; no verdict rests
on it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from autotune.contract.consistency import contradicted
from autotune.contract.fmt import human
from autotune.contract.host import available_cpus
from autotune.contract.result import Diagnosis, Verdict
from autotune.trial.opcount import step_ops
from autotune.trial.warmup import QUEUE_EMPTY_WAIT

if TYPE_CHECKING:
    from autotune.trial.compose import TrainStep

__all__ = ["classify", "diagnose"]

# Input-bound: the loader alone this much slower than the model alone, and a wait this share.
INPUT_MARGIN = 0.9
MIN_DATA_WAIT = 0.05
# On CUDA, kernels filling less of a compute step than this mean launch/host overhead dominates.
MIN_GPU_BUSY = 0.6
# A step that waited this share of its time for data is input-bound even when the loader alone
# reads faster than the model: a short loader-only probe of a bursty loader can read high...
HEAVY_DATA_WAIT = 0.3
# ...though not this many times the end-to-end rate. The H100 grids' input-bound cells read
# their loader alone at 0.55-1.64x the step's rate. A held-out GRU under CUDA graphs waited 32%
# of a 3.8-ms step with its loader alone at 3.4x the step: the wait was the training process
# taking each batch over (unpinned), not the workers making them (H100, 2026-11-27).
HANDOVER = 2.5
# CPUs this busy during the timed windows leave nothing for another DataLoader worker to use.
CPU_SATURATED = 0.9


def classify(
    *,
    throughput: float,
    data_wait_fraction: float,
    loader_rate: float | None,
    compute_rate: float | None,
    gpu_busy_fraction: float | None,
    unit: str,
    cpu_busy_fraction: float | None = None,
    num_workers: int | None = None,
    cpus: int | None = None,
) -> Diagnosis:
    """Name what limits the step from the measured numbers. A rate that `contradicted` flags is
    reported as measured but left out of the verdict, and the suggestion says so."""
    bad_loader, bad_model = contradicted(throughput=throughput, loader_rate=loader_rate,
                                         compute_rate=compute_rate)
    unreliable = "; ".join(
        [f"the loader alone read {human(loader_rate)} {unit}/s, below the {human(throughput)} "
         f"{unit}/s end to end, which it fed"] * bad_loader
        + [f"the model with data resident read {human(compute_rate)} {unit}/s, below the "
           f"{human(throughput)} {unit}/s of model and loader together"] * bad_model)
    note = (f" (not used: {unreliable}; re-measured once, still so: the probe was likely "
            "disturbed by other work on the machine)") if unreliable else ""
    measured_loader, measured_compute = loader_rate, compute_rate
    if bad_loader:
        loader_rate = None
    if bad_model:
        compute_rate = None

    def make(verdict: Verdict, suggestion: str) -> Diagnosis:
        return Diagnosis(verdict=verdict, suggestion=suggestion + note, throughput=throughput,
                         loader_rate=measured_loader, compute_rate=measured_compute,
                         data_wait_fraction=data_wait_fraction,
                         gpu_busy_fraction=gpu_busy_fraction, cpu_busy_fraction=cpu_busy_fraction,
                         unreliable=unreliable)

    slower_loader = (loader_rate is not None and compute_rate is not None
                     and loader_rate < INPUT_MARGIN * compute_rate)
    handover = "" if slower_loader else _handover(throughput, data_wait_fraction, loader_rate,
                                                  unit, num_workers, cpu_busy_fraction)
    note = handover + note
    if (slower_loader and data_wait_fraction >= MIN_DATA_WAIT) \
            or (data_wait_fraction >= HEAVY_DATA_WAIT and not handover):
        rates = _rates(loader_rate, compute_rate, data_wait_fraction, unit, num_workers)
        if cpu_busy_fraction is not None and cpu_busy_fraction >= CPU_SATURATED:
            return make(Verdict.INPUT,
                        f"{rates}, and the CPUs are already {cpu_busy_fraction:.0%} busy: more "
                        "workers will not help; make the per-sample work cheaper or move it to "
                        "the GPU")
        if num_workers is not None and cpus is not None and num_workers >= cpus:
            # Seen on an H100 VM (16 CPUs, ResNet with 50 MB float batches): 16, 24 and 32
            # workers all gave 3.4k-3.8k images/s with the CPUs 60-64% busy.
            busy = (f" and the CPUs are only {cpu_busy_fraction:.0%} busy"
                    if cpu_busy_fraction is not None else "")
            return make(Verdict.INPUT,
                        f"{rates}; every CPU already has a worker{busy}: more workers are "
                        "unlikely to help; look at the per-batch hand-over (ship smaller "
                        "dtypes such as uint8 and normalize on the device) or cheaper transforms")
        return make(Verdict.INPUT, f"{rates}: more workers or cheaper transforms")
    if gpu_busy_fraction is not None and gpu_busy_fraction < MIN_GPU_BUSY:
        return make(Verdict.OVERHEAD,
                    f"kernels run only {gpu_busy_fraction:.0%} of a step and data is not the "
                    "limit: many small kernels or host work; try a larger batch, torch.compile, "
                    "or reduce-overhead (CUDA graphs)")
    if compute_rate:
        return make(Verdict.COMPUTE,
                    f"the model itself is the limit ({human(compute_rate)} {unit}/s with data "
                    "resident): precision, compile and batch size matter; more workers will "
                    "not help")
    # No trustworthy model rate: the data wait alone says the loader is not the limit.
    return make(Verdict.COMPUTE,
                ("the loader is not the limit" if handover else f"the step waited for data "
                 f"only {data_wait_fraction:.0%} of the time") + ", so the model side is the limit: precision, compile and batch size matter; more "
                "workers will not help")


def _rates(loader_rate: float | None, compute_rate: float | None, data_wait_fraction: float,
           unit: str, num_workers: int | None) -> str:
    """An input-bound verdict's numbers in words: the two rates, else the wait alone."""
    if loader_rate is None or compute_rate is None:  # a heavy wait says it without the rates
        return f"the step waited for data {data_wait_fraction:.0%} of the time"
    rates = (f"the loader delivers {human(loader_rate)} {unit}/s, the model consumes "
             f"{human(compute_rate)} {unit}/s")
    if num_workers == 0 and loader_rate >= compute_rate:
        # Without workers it loads between the steps (a held-out stream, 2-CPU VM, 2026-11-28).
        serial = 1.0 / (1.0 / loader_rate + 1.0 / compute_rate)
        rates += (", but with no workers the loading runs in the training process between "
                  f"steps: at most {human(serial)} {unit}/s together")
    return rates


def _handover(throughput: float, data_wait_fraction: float, loader_rate: float | None,
              unit: str, num_workers: int | None, cpu_busy_fraction: float | None) -> str:
    """A heavy data wait beside a loader `HANDOVER` times the step's rate, in words ("" when
    not): the training process taking each batch over, which more workers cannot shorten.
    Never without workers (the wait is then the loading itself, and the probe times that same
    work) nor with the CPUs saturated (the probe ran with the model idle)."""
    if loader_rate is None or throughput <= 0 or loader_rate < HANDOVER * throughput \
            or data_wait_fraction < HEAVY_DATA_WAIT or not num_workers \
            or (cpu_busy_fraction is not None and cpu_busy_fraction >= CPU_SATURATED):
        return ""
    return (f" (the step waited for data {data_wait_fraction:.0%} of the time, though the "
            f"loader alone delivers {human(loader_rate)} {unit}/s, {loader_rate / throughput:.1f}x "
            "the step's rate: the wait is the training process taking each batch over, not the "
            "workers making it; pin_memory, or fewer, larger batches)")


LOADER_ROUNDS = 3
"""Rounds of all workers the loader-alone probe times."""

LOADER_MAX = 3.0
"""Seconds the loader-alone probe's timing may stretch to for `LOADER_ROUNDS` rounds. Timed for
half a second from its start, under one round of 15 workers (MobileNetV3 at batch 96 on an
H200, 2026-11-28), the probe read 4.72k, 3.27k and 1.97k images/s for the same loader knobs in
three trials, and the verdict flipped between input- and overhead-bound with it."""


def diagnose(
    step: TrainStep,
    *,
    throughput: float,
    data_wait_fraction: float,
    prefetch_batches: int,
    seconds: float = 0.5,
    clock: Callable[[], float] = time.perf_counter,
    cpu_busy_fraction: float | None = None,
    step_seconds: float | None = None,
) -> Diagnosis:
    """Measure the loader and compute rates of a composed, warmed-up step, then classify.

    `cpu_busy_fraction` is how busy the CPUs were while the trial was timed (`hostcpu`).
    `step_seconds`, the measured step time, bounds the probes: a step longer than `seconds`
    is timed once, not three times (GPT-2 small in fp32 with 8 micro-batches: 1.3 s a step,
    which made the diagnosis take 12 s on an H100).
    """
    slow = step_seconds is not None and step_seconds > seconds / 3

    def probe_loader() -> float:
        return loader_rate(step, prefetch_batches=prefetch_batches, seconds=seconds, clock=clock,
                           throughput=throughput)

    def probe_model() -> float:
        return compute_rate(step, seconds=seconds, clock=clock, min_steps=1 if slow else 3)

    loader, compute = probe_loader(), probe_model()
    bad_loader, bad_model = contradicted(throughput=throughput, loader_rate=loader,
                                         compute_rate=compute)
    # A rate that contradicts the end-to-end one is measured once more (bounded: one probe
    # each); classify sets it aside if it still does.
    if bad_loader:
        loader = probe_loader()
    if bad_model:
        compute = probe_model()
    busy = (gpu_busy_fraction(step, steps=1 if slow else 3) if step.device.type == "cuda"
            else None)
    verdict = classify(throughput=throughput, data_wait_fraction=data_wait_fraction,
                       loader_rate=loader, compute_rate=compute, gpu_busy_fraction=busy,
                       unit=step.adapter.unit, cpu_busy_fraction=cpu_busy_fraction,
                       num_workers=step.config.num_workers, cpus=available_cpus())
    counted = step_ops(step)
    if counted is None:
        return verdict
    return dataclasses.replace(verdict, step_ops=counted[0], distinct_ops=counted[1])


def loader_rate(
    step: TrainStep, *, prefetch_batches: int, seconds: float, clock: Callable[[], float],
    throughput: float | None = None,
) -> float:
    """Units/s from the DataLoader alone, after skipping what its workers had queued ahead.

    Bounded in time: skipping stops after `seconds` (an input-bound loader's queue is empty
    already, and draining 64 queued batches of a slow loader took 11 s on an H100 host), and
    timing stops after `LOADER_ROUNDS` rounds of all workers or `seconds`, whichever comes
    first, timed from a batch's arrival. With `throughput` (the step's end-to-end units/s),
    `seconds` stretches to those rounds' time at that pace, up to `LOADER_MAX`: workers that
    finish their batches together hand them over in bursts, and a window shorter than a round
    reads a burst or a gap.
    """
    t0 = clock()
    for _ in range(prefetch_batches):
        if clock() - t0 > seconds:
            break
        step.next_batch()
    if prefetch_batches:  # and what the workers made meanwhile (warmup.Skip)
        step.skip_queued(QUEUE_EMPTY_WAIT, prefetch_batches + step.config.num_workers,
                         max(0.0, seconds - (clock() - t0)))
    workers = step.config.num_workers
    want = max(8, LOADER_ROUNDS * workers)  # a few full rounds of all workers
    # The clock starts as a batch arrives, not before: a burst that came just after the start
    # would be counted whole in no time.
    n = step.next_batch()[1]
    limit = seconds
    if throughput:  # the rounds' time at the step's own pace
        limit = max(seconds, min(LOADER_ROUNDS * workers * n / throughput, LOADER_MAX))
    items = batches = 0
    t0 = clock()
    while batches < 2 or (batches < want and clock() - t0 < limit):
        items += step.next_batch()[1]
        batches += 1
    return items / (clock() - t0)


def compute_rate(step: TrainStep, *, seconds: float, clock: Callable[[], float],
                 min_steps: int = 3) -> float:
    """Units/s of full optimizer steps on one batch kept on the device (no loader)."""
    batch, n = step.next_batch()
    batch = step.to_device(batch, non_blocking=False)
    accum = step.config.grad_accum
    step.resident_step(batch)
    step.sync()
    steps = 0
    t0 = clock()
    while steps < min_steps or clock() - t0 < seconds:
        step.resident_step(batch)
        steps += 1
    step.sync()
    return steps * accum * n / (clock() - t0)


def gpu_busy_fraction(step: TrainStep, steps: int = 3) -> float | None:
    """Share of the wall time of `steps` compute steps during which a GPU kernel ran.

    Kernel intervals come from the PyTorch profiler (CUPTI); overlapping kernels are merged so
    the fraction cannot exceed 1. None when the profiler records no kernels.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    from autotune.trial.breakdown import is_kernel, merged_us

    batch, _ = step.next_batch()
    first_run = step.shapes.run_last()
    batch = step.to_device(batch, non_blocking=False)
    if first_run:  # a shape's first run costs more than its next (eager BERT on an H100: 2.5x)
        step.resident_step(batch)
    step.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step.resident_step(batch)
        torch.cuda.synchronize(step.device)
        wall_us = (time.perf_counter() - t0) * 1e6
    # Kernels, copies and memsets; not a range projected onto the GPU's timeline (the
    # optimizer's own `Optimizer.step#...`), which spans its kernels and the gaps between them.
    intervals = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                       if is_kernel(e))
    if not intervals or wall_us <= 0:
        return None
    busy = merged_us(intervals)
    return min(1.0, busy / wall_us)
