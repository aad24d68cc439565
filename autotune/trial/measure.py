"""Steady-state timing of a training step: warm-up, then synchronized windows until the median
is known to a tolerance.

Rules (see shared/design.md): discard warm-up; bracket each timed window with synchronization;
`perf_counter`, never `time.time`; no `.item()` inside timed steps; count what the user pays
(the wait for the DataLoader and the host-to-device copy happen inside the step); report the
median of several windows and its confidence interval, and keep measuring until the interval is
within the tolerance or the budget ends. Clock and synchronization are injected (no GPU in tests).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

from autotune.contract.request import MeasureSettings
from autotune.contract.stats import median_uncertainty, relative_spread
from autotune.trial.trend import EXTEND, still_rising
from autotune.trial.warmup import RECOMPILE_SECONDS, Gather, Skip, Step, StepResult, warm_up
from autotune.trial.window import (FirstRuns, Window, WindowPlan, burst_plan, plan_windows,
                                   time_window)

__all__ = ["Measurement", "MeasureSettings", "NonFiniteLoss", "StepResult", "Window", "measure",
           "relative_spread"]

MAX_RECOMPILED_WINDOWS = 3
"""Timed windows dropped because Dynamo compiled inside them, at most. A recompile (a new shape,
a new path) is a fixed cost, like the first compile: a transformers GPT-2 on padded batches
recompiled once 45 steps in, and the one window around it read 845 tokens/s against 70k
(H100, 2026-11-25). Past this many, recompiles are the step's steady state and count."""


class NonFiniteLoss(Exception):
    """The loss became NaN or infinite: the configuration is broken, not fast."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
    windows: tuple[Window, ...]
    warmup_steps: int
    warmup_seconds: float
    """Wall time of the whole warm-up (compile included)."""
    compile_seconds: float
    """First step's time beyond a steady step: compilation and first-call setup."""
    converged: bool
    settled: bool
    """Whether warm-up saw step times settle (False: it hit max_warmup_steps)."""
    tolerance: float
    agree: int = 3
    recompiled_windows: int = 0
    """Windows timed again because Dynamo compiled inside them (`MAX_RECOMPILED_WINDOWS`)."""
    rising_windows: int = 0
    """Windows dropped because the rate still climbed when the budget ended (`trend`)."""
    new_shape_windows: int = 0
    """Windows set apart because a batch shape ran for the first time in them (a one-off
    cost, `window.one_off_shapes`), and timed again."""

    @property
    def throughput(self) -> float:
        """Median units/s over the timed windows."""
        return statistics.median(w.throughput for w in self.windows)

    @property
    def spread(self) -> float:
        """Relative spread of the last windows' throughputs ((max - min) / median)."""
        return relative_spread([w.throughput for w in self.windows[-self.agree:]])

    @property
    def uncertainty(self) -> float:
        """Half-width of the median's 95% confidence interval, relative to the median."""
        return median_uncertainty([w.throughput for w in self.windows])

    @property
    def step_seconds(self) -> float:
        """Median seconds per optimizer step."""
        return statistics.median(w.seconds / w.steps for w in self.windows)

    @property
    def data_wait_fraction(self) -> float:
        """Share of timed wall time spent waiting for input."""
        return sum(w.data_wait for w in self.windows) / sum(w.seconds for w in self.windows)

    def summary(self) -> dict[str, float | int | bool]:
        return {
            "throughput": self.throughput,
            "spread": self.spread,
            "step_seconds": self.step_seconds,
            "data_wait_fraction": self.data_wait_fraction,
            "warmup_steps": self.warmup_steps,
            "warmup_seconds": self.warmup_seconds,
            "compile_seconds": self.compile_seconds,
            "windows": len(self.windows),
            "converged": self.converged,
            "settled": self.settled,
        }


def measure(
    step: Step,
    *,
    sync: Callable[[], None],
    finite: Callable[[], bool],
    settings: MeasureSettings,
    clock: Callable[[], float] = time.perf_counter,
    on_window: Callable[[Window], None] | None = None,
    on_timed_start: Callable[[], None] | None = None,
    on_first_step: Callable[[float], None] | None = None,
    gather: Gather | None = None,
    stop_at: float | Callable[[], float | None] | None = None,
    skip: Skip | None = None,
    varying: Callable[[], bool] | None = None,
    compiled_seconds: Callable[[], float | None] | None = None,
) -> Measurement:
    """Warm `step` up, then time windows of it until they agree or the budget ends.

    `sync` waits for queued device work (torch.cuda.synchronize); `finite` syncs and says whether
    every loss so far was finite. `on_timed_start` is called once, right before the first timed
    window (after warm-up); `on_first_step` once the first warm-up step (where compiling
    happens) is done, with its seconds. Raises `NonFiniteLoss` as soon as a check fails.

    `gather` makes the DDP ranks of one trial measure as one: every decision (warm-up over,
    window length, stop) is taken on values all ranks agree on, the slowest rank's times, so
    all run the same steps; a window counts the items of every rank over the slowest rank's
    seconds (the global rate). `finite` must then agree across the ranks too.

    `stop_at`: a `clock()` time by which the windows end, whatever the budget (the trial's own
    time limit, less what it needs to report): no window starts that, as long as the last one,
    would end past it (a run killed at its limit loses every window); not with `gather`. A
    callable is asked once warm-up is over (the limit may have grown by the compile's time).

    `skip` empties the loader's queue before the windows (`warmup.warm_up` says why and how).
    `varying`: whether the batches' shapes have varied so far; warm-up then waits for a stable
    rate, not equal step times (`warmup.warm_up`). Windows compare rates either way.

    `compiled_seconds`: the process's compile seconds so far (None: unknown). A window in which
    they grew held a recompile, a fixed cost: it is dropped and timed again, at most
    `MAX_RECOMPILED_WINDOWS` times (not with `gather`: the ranks would drop windows apart).
    In warm-up, a step that keeps recompiling raises `warmup.RecompileStorm`.
    """
    s = settings
    start = clock()
    warm = warm_up(step, sync=sync, settings=s, clock=clock, gather=gather,
                   on_first_step=on_first_step, skip=skip, varying=varying,
                   compiled_seconds=compiled_seconds)
    if not finite():
        raise NonFiniteLoss(f"loss was not finite during warm-up ({warm.steps} steps)")
    warmup_seconds = clock() - start
    until = stop_at() if callable(stop_at) else stop_at

    plan = plan_windows(warm, s, gathered=gather is not None)
    if on_timed_start is not None:
        on_timed_start()
    windows, dropped, converged, rising, first_seen = _timed_windows(
        step, plan, s, sync=sync, clock=clock, finite=finite, gather=gather, on_window=on_window,
        until=until, compiled_seconds=compiled_seconds)
    return Measurement(
        windows=tuple(windows),
        warmup_steps=warm.steps,
        warmup_seconds=warmup_seconds,
        compile_seconds=warm.compile_seconds,
        converged=converged,
        settled=warm.settled,
        tolerance=s.tolerance,
        agree=s.agree,
        recompiled_windows=dropped,
        rising_windows=rising,
        new_shape_windows=first_seen,
    )


def _agreed(window: Window, elapsed: float, gather: Gather) -> tuple[Window, float]:
    """The window of all ranks: every rank's items over the slowest rank's seconds (its mean
    data wait), and the longest time any rank has spent in timed windows."""
    ranks = gather((window.seconds, float(window.items), window.data_wait, elapsed))
    seconds, items, waits, elapsed_all = zip(*ranks)
    return Window(steps=window.steps, items=int(sum(items)), seconds=max(seconds),
                  data_wait=statistics.fmean(waits)), max(elapsed_all)


def _timed_windows(step: Step, plan: WindowPlan, s: MeasureSettings, *,
                   sync: Callable[[], None], clock: Callable[[], float],
                   finite: Callable[[], bool], gather: Gather | None,
                   on_window: Callable[[Window], None] | None, until: float | None,
                   compiled_seconds: Callable[[], float | None] | None
                   ) -> tuple[list[Window], int, bool, int, int]:
    """Timed windows until their median is known to the tolerance, the budget ends, or another
    would end past `until`: the windows, how many recompiled ones were dropped, whether they
    converged, how many were dropped as still rising, and how many were set apart (or counted
    without its known cost) for a shape run there first (`measure` says what each argument
    is). A window that ran a shape first is set apart only while the budget still fits the
    windows that must count; once the windows show such runs costing nothing (`shapes_cost`),
    those set apart count after all, and once they show a cost, a window that must count
    counts without it (`FirstRuns.counted`). Windows planned short for a loader that kept up
    in warm-up start over, 3 rounds of its workers long, once one stalls for data
    (`window.burst_plan`)."""
    windows: list[Window] = []
    dropped: list[Window] = []
    first = FirstRuns()
    converged, rising, budget = False, 0, s.budget_seconds
    timed_start = clock()
    while True:
        before = compiled_seconds() if compiled_seconds is not None else None
        window = time_window(step, plan, sync, clock)
        first.stamp(window)
        after = compiled_seconds() if compiled_seconds is not None else None
        recompiled = (before is not None and after is not None
                      and after - before > RECOMPILE_SECONDS)
        elapsed = clock() - timed_start
        if gather is not None:
            window, elapsed = _agreed(window, elapsed, gather)
        longer = None if gather is not None else burst_plan(plan, window, s)
        per_step = window.seconds / max(1, window.steps)
        if longer is not None and until is not None \
                and clock() + per_step * longer.min_steps >= until:
            longer = None  # a longer window would end past the trial's limit: keep these
        # Room to set a window apart: the budget still fits the windows that must count.
        room = elapsed + max(0, s.min_windows - len(windows)) * window.seconds < budget
        if longer is not None:  # the short windows read the queue's bunches: time anew
            plan, windows, first = longer, [], FirstRuns(first.known)  # (its windows dropped)
            budget = min(EXTEND * s.budget_seconds,
                         max(budget, elapsed + s.min_windows * longer.steps * per_step))
        elif recompiled and gather is None and len(dropped) < MAX_RECOMPILED_WINDOWS:
            dropped.append(window)  # not reported either: the pruner would read a compile
        elif recompiled or gather is not None or not first.take(window, windows + dropped,
                                                               room=room):
            if not recompiled and gather is None:  # its first runs' known cost taken out
                window = first.counted(window, windows + dropped)
            windows.append(window)
            if on_window is not None:
                on_window(window)
        windows = first.settle(windows)  # (set apart, not reported either: a one-off cost)
        if not finite():
            raise NonFiniteLoss("loss was not finite in timed window "
                                f"{len(windows) + len(dropped) + len(first.apart)}")
        if len(windows) >= s.min_windows \
                and median_uncertainty([w.throughput for w in windows]) <= s.tolerance:
            converged = True
            break
        out_of_time = elapsed >= budget
        if (out_of_time or len(windows) >= s.max_windows) and gather is None \
                and elapsed < EXTEND * s.budget_seconds \
                and still_rising([w.throughput for w in windows], s.tolerance):
            rising += len(windows) // 2  # a warm-up the step had not finished (`trend`)
            del windows[:len(windows) // 2]  # and half a budget more to time what is left
            budget = min(EXTEND * s.budget_seconds, max(budget, elapsed + s.budget_seconds / 2))
            out_of_time = False
        if len(windows) >= s.max_windows or (out_of_time and len(windows) >= s.min_windows):
            break
        usual = windows[-1].seconds if windows else (
            per_step * plan.min_steps if plan.min_steps > window.steps else window.seconds)
        if gather is None and until is not None and clock() + usual >= until:
            break  # another window would end past it: unconverged, but measured, not killed
    windows = first.top_up(windows, s.min_windows)
    if not windows:  # only recompiled windows fitted: they are what was measured
        windows, dropped = dropped, []
    return windows, len(dropped), converged, rising, len(first.apart) + first.discounted
