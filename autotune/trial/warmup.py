"""Warm-up before a step is timed: run it until compiling is done and its times settle, drain
the loader's prefetch queue at the step's pace, then drop what the loader's workers still hold
ready, so that the first timed window starts where training for hours runs.

The clock and the synchronization are injected, as in `measure`, so tests need no GPU.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from autotune.contract.request import MeasureSettings

__all__ = ["RECOMPILE_SECONDS", "RECOMPILING_STEPS", "Gather", "KEPT_UP", "QUEUE_EMPTY_WAIT",
           "RATE_STEPS", "RecompileStorm", "Skip", "Step", "StepResult", "WarmUp", "warm_up"]

KEPT_UP = 0.01
"""A loader kept up when the steps that drained its queue in warm-up waited for it at most
this share of their time: timed windows then need not span rounds of its workers."""

QUEUE_EMPTY_WAIT = 1e-3
"""Seconds a pull of a batch with no step between pulls must block at least before the
loader's queue counts as empty (a ready batch comes in under it on an idle host)."""

RATE_STEPS = 4
"""Steps per group when shapes vary: warm-up has settled when the last two groups' rates (items
over compute seconds) agree. Steps of different lengths never take equal times: a transformers
GPT-2 on padded batches of 512-1024 tokens was killed "still warming up" after 127 s on an H100
waiting for that."""

RECOMPILE_SECONDS = 0.01
"""Compile seconds a step or window must hold to count as recompiled (timers' rounding aside)."""

RECOMPILING_STEPS = 3
"""Warm-up steps after the first that compiled again before a trial gives up on its compile.
With dynamic shapes from the start, a step of varying shapes recompiles once or twice (none of
this project's 300-odd compiled H100 trials more than once); one that keeps recompiling gives
Dynamo a new specialization every few batches (a detection-style batch, a list of images of
varying sizes with a varying number of boxes each: on 2 CPUs its compile was still warming up
when the 84-s trial limit killed it), and would compile to Dynamo's recompile limit before
running eagerly under the compiled wrapper."""


class RecompileStorm(Exception):
    """A compiled step kept recompiling in warm-up (RECOMPILING_STEPS): its compile does not
    settle, whatever the mode."""

    def __init__(self, *, steps: int, recompiling: int, seconds: float,
                 specialized: str = "") -> None:
        super().__init__(
            f"its first compile specialized a dimension that varies between batches, so every "
            f"new size would compile again (Dynamo: {specialized})" if specialized else
            f"recompiled in {recompiling} of its first {steps} warm-up steps "
            f"({seconds:.0f} s compiling after the first step)")
        self.steps, self.recompiling, self.seconds = steps, recompiling, seconds
        self.specialized = specialized
        """Dynamo's words when a dimension marked dynamic was specialized (`compose`)."""
        self.reasons: tuple[str, ...] = ()
        """The guards that failed, each once (`CompileWatch.reasons`), set where it is read."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepResult:
    """What one optimizer step reports back."""

    items: int
    """Units (samples, tokens, ...) processed."""
    data_wait: float
    """Seconds blocked waiting for the DataLoader's next batch."""
    new_shape: bool = False
    """Whether a batch of it had shapes no earlier step ran (`window.one_off_shapes`)."""
    new_share: float = 1.0
    """The share of its micro-batches that did, when `new_shape` (`grad_accum` > 1)."""


class Step(Protocol):
    def __call__(self) -> StepResult: ...


Gather = Callable[[tuple[float, ...]], list[tuple[float, ...]]]
"""Every DDP rank's values of a tuple, in rank order (an all-gather across the ranks)."""

Skip = Callable[[float, int], int]
"""Drop the batches the loader has ready, pulling with no step between, until a pull blocks
at least the given seconds (the queue is empty) or the given count is dropped; returns the
count dropped (`TrainStep.skip_queued`)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WarmUp:
    steps: int
    compile_seconds: float
    """First step's time beyond a steady step: compilation and first-call setup."""
    settled: bool
    """Whether step times (rates, when shapes vary) settled (False: it hit max_warmup_steps)."""
    kept_up: bool
    """The loader kept up while its queue was drained (the steps waited at most KEPT_UP)."""
    step_wall: float
    """Seconds per step at the end of the drain, data wait included: sizes the windows."""


def warm_up(
    step: Step,
    *,
    sync: Callable[[], None],
    settings: MeasureSettings,
    clock: Callable[[], float],
    gather: Gather | None = None,
    on_first_step: Callable[[float], None] | None = None,
    skip: Skip | None = None,
    varying: Callable[[], bool] | None = None,
    compiled_seconds: Callable[[], float | None] | None = None,
) -> WarmUp:
    """Run `step` until its compute times settle and `settings.prefetch_batches` more batches
    are drained (fewer once the loader is behind: `_behind`); then, with `skip`, empty the
    loader's queue.

    `varying` says whether the batches' shapes have varied so far: while they do, settled means
    a stable rate (items per compute second over groups of RATE_STEPS steps), not equal step
    times. Without it, or while it says no, the rule is equal step times, as it always was.

    `compiled_seconds`: the process's compile seconds so far. A step after the first in which
    they grew recompiled; RECOMPILING_STEPS of them raise `RecompileStorm` (not with `gather`:
    each rank would decide alone).

    `on_first_step` is called once the first step is done, with its seconds. With `gather`
    (DDP ranks measuring as one), every decision is taken on the slowest rank's times.

    `skip` empties the loader's queue. Draining it at the step's pace leaves what the workers
    made meanwhile (tests/trial/test_measure_queue.py simulates it): behind a step 4.5x faster
    than its 16 workers, 128 batches drained left 25, and the first window read 1.17x the
    workers' rate; behind a step only 10% faster, the queue never emptied in warm-up and every
    window read the step's own rate, 1.1x what training gets. Dropped batches cost no step.
    After them, unless the drain saw the loader fall behind (its steady state is an empty
    queue), steps run until one did not wait for the workers' new batches, at most one more
    than a round of the workers.

    A pull counts as blocked from the larger of QUEUE_EMPTY_WAIT and a quarter of a batch's
    compute time. On a busy host a ready batch can take longer (0.1-3.4 ms on a 2-CPU VM with
    2 workers), and batches come in order (one slow batch blocks the ready ones behind it): the
    skip then ends early, and leaves what the drain left, as before there was a skip.
    """
    s = settings
    compute_times: list[float] = []
    wall_times: list[float] = []
    items: list[float] = []
    settled = False
    # Each step since step times settled (the drain): its batches, wall and compute seconds.
    waits: list[tuple[int, float, float]] = []
    steps = 0
    storm = _Storm(compiled_seconds if gather is None else None)
    while steps < s.max_warmup_steps:
        storm.before()
        t = _timed(step, sync, clock, gather, varying)
        storm.after(steps + 1)
        wall, compute = t.wall, t.compute
        wall_times.append(wall)
        compute_times.append(compute)
        items.append(t.items)
        steps += 1
        if steps == 1 and on_first_step is not None:
            on_first_step(wall_times[0])
        if settled:
            waits.append((s.grad_accum, wall, compute))
        elif t.vary:
            settled = steps > 2 * RATE_STEPS and steps >= s.min_warmup_steps and \
                _rates_settled(items, compute_times, s.settle_ratio)
        elif steps >= s.min_warmup_steps and _settled(compute_times[-2:], s.settle_ratio):
            settled = True
        if settled and (sum(n for n, _, _ in waits) >= s.prefetch_batches
                        or _behind(waits, s.num_workers)):
            break  # drained, or a round of the workers waited for: nothing queued is left
    kept_up = bool(waits) and sum(w - c for _, w, c in waits) <= KEPT_UP * sum(
        w for _, w, _ in waits)
    steady = statistics.median(compute_times[-2:])
    if skip is not None and s.prefetch_batches:
        steps += _empty_queue(step, skip, s, steady=steady, kept_up=kept_up, sync=sync,
                              clock=clock, gather=gather)
    return WarmUp(steps=steps, compile_seconds=max(0.0, compute_times[0] - steady),
                  settled=settled, kept_up=kept_up,
                  step_wall=statistics.median(wall_times[-2:]))


def _behind(waits: Sequence[tuple[int, float, float]], workers: int) -> bool:
    """Whether the last round of the workers' batches (`waits`: each step's batches, wall and
    compute seconds) waited for data more than KEPT_UP of its time in pulls that blocked: a
    queue still holding what it made earlier hands batches over without blocking, however its
    workers deliver. A pull counts as blocked as `_empty_queue` counts it (a batch's handover,
    unpickled in this process, costs every step a little). A held-out MobileNetV3 at batch 768,
    15 workers with 4 batches each in flight, 3.5 s of a worker's time a batch (H200,
    2026-11-28): draining all 60 at the loader's pace was still going when the search's end cut
    the trial after 33 s; with this, 15.7 s."""
    batches = wall = blocked = 0.0
    for n, w, c in reversed(waits):
        wait = w - c
        batches, wall = batches + n, wall + w
        blocked += wait if wait > _blocked_from(c / n) else 0.0
        if batches >= max(1, workers):
            return blocked > KEPT_UP * wall
    return False


def _blocked_from(batch_compute: float) -> float:
    """Seconds a pull must wait to count as blocked (the queue had nothing ready), for batches
    whose compute takes `batch_compute`: the larger of QUEUE_EMPTY_WAIT and a quarter of it."""
    return max(QUEUE_EMPTY_WAIT, batch_compute / 4)


def _empty_queue(step: Step, skip: Skip, s: MeasureSettings, *, steady: float, kept_up: bool,
                 sync: Callable[[], None], clock: Callable[[], float],
                 gather: Gather | None) -> int:
    """Drop what the loader's queue holds (`skip`), then, unless the loader fell behind, step
    until one did not wait for the workers' new batches: the steps run (`warm_up` says why)."""
    skip(_blocked_from(steady / s.grad_accum), 2 * s.prefetch_batches + s.num_workers)
    steps = 0
    for _ in range(math.ceil(s.num_workers / s.grad_accum) + 1 if kept_up else 0):
        t = _timed(step, sync, clock, gather)  # goes on while any rank waited
        steps += 1  # not a warm-up time: windows are sized by the drained steps
        if t.waited <= KEPT_UP * t.wall:
            break
    return steps


class _Storm:
    """Counts the warm-up steps after the first whose compile seconds grew (`RecompileStorm`)."""

    def __init__(self, compiled_seconds: Callable[[], float | None] | None) -> None:
        self._read = compiled_seconds
        self._before: float | None = None
        self.recompiling = 0
        self.seconds = 0.0

    def before(self) -> None:
        self._before = self._read() if self._read is not None else None

    def after(self, steps: int) -> None:
        """After warm-up step number `steps` (1: the first, where compiling is expected)."""
        now = self._read() if self._read is not None else None
        if steps == 1 or now is None or self._before is None:
            return
        if now - self._before > RECOMPILE_SECONDS:
            self.recompiling += 1
            self.seconds += now - self._before
        if self.recompiling >= RECOMPILING_STEPS:
            raise RecompileStorm(steps=steps, recompiling=self.recompiling, seconds=self.seconds)


class _Timed(NamedTuple):
    wall: float
    compute: float
    """Seconds not waiting for data."""
    waited: float
    items: float
    vary: bool
    """Whether the batches' shapes have varied so far."""


def _timed(step: Step, sync: Callable[[], None], clock: Callable[[], float],
           gather: Gather | None, varying: Callable[[], bool] | None = None) -> _Timed:
    """One step's wall seconds, seconds not waiting for data and seconds waiting, items, and
    whether shapes have varied so far; across ranks, the longest seconds of any rank, every
    rank's items and any rank's shapes (every rank then decides alike)."""
    t0 = clock()
    result = step()
    sync()
    wall = clock() - t0
    vary = varying is not None and varying()
    times = (wall, wall - result.data_wait, result.data_wait, float(result.items), float(vary))
    if gather is None:
        return _Timed(*times[:4], vary=vary)
    ranks = list(zip(*gather(times)))
    return _Timed(max(ranks[0]), max(ranks[1]), max(ranks[2]), sum(ranks[3]),
                  vary=max(ranks[4]) > 0)


def _settled(times: Sequence[float], ratio: float) -> bool:
    lo, hi = min(times), max(times)
    return lo > 0 and hi / lo <= ratio


def _rates_settled(items: Sequence[float], seconds: Sequence[float], ratio: float) -> bool:
    """Whether the last two groups of RATE_STEPS steps ran at rates (items over seconds) within
    `ratio` of each other: what steps of varying shapes agree on, where their times do not."""
    n = RATE_STEPS
    rates = [sum(items[i:i + n]) / sum(seconds[i:i + n]) if sum(seconds[i:i + n]) > 0 else 0.0
             for i in (len(items) - 2 * n, len(items) - n)]
    return _settled(rates, ratio)
