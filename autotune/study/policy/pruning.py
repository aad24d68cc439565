"""Stop a trial that is clearly slower than the best so far, after its first timed windows, or
in its warm-up when it runs at a fraction of the best (`HOPELESS`).

The trial process streams each window's rate; the search reports the running median to Optuna
(`trial.report`) and asks this pruner. A pruned trial is told as PRUNED with its intermediate
values, which TPE still learns from, and its partial rate is kept in the result.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import optuna
from optuna.pruners import BasePruner
from optuna.trial import FrozenTrial, TrialState

from autotune.contract.events import TrialEvent, WarmupEvent, WindowEvent
from autotune.study.store.records import read_warm_rate, write_warm_rate
from autotune.trial.trend import MIN_WINDOWS, RISE

__all__ = ["HOPELESS", "HOPELESS_CHUNKS", "PRUNE_RATIO", "IncumbentPruner", "best_so_far",
           "climbing", "report_copy", "report_windows", "warm_bar"]

PRUNE_RATIO = 0.6
"""A trial whose running median stays under this share of the best so far is pruned."""

HOPELESS = 0.3
"""A trial whose fastest warm-up chunk (`WarmupEvent`: steps after the first that compiled
nothing) ran under this share of the best so far is stopped before its windows. Half the window
pruner's bar: warm-up steps can run slower than timed ones (a loader's first rounds, allocator
growth). On an H100 a Faster R-CNN at fp16 read 0.06x the best after 39 s of warm-up
(2026-11-26); the slowest dtype a held-out ViT-B/16 ran eager read 0.24x."""

HOPELESS_CHUNKS = 2
"""Warm-up chunks (a second of steps each at least) seen before a trial is judged hopeless. The
fastest of a trial's first HOPELESS_CHUNKS is its warm rate (`records.write_warm_rate`), and the
bar is HOPELESS x the lower of the leader's rate and its warm rate (`warm_bar`): an eager BERT on
padded batches ran its first 10 steps at 0.3x its settled rate (each a new length), and a twin of
its 138k-tokens/s leader was stopped at 40.9k (H100, 2026-11-27)."""


class IncumbentPruner(BasePruner):
    """Prune when, after `min_windows` windows, the trial's running median is below `ratio`
    times the best completed trial's rate.

    The margin is wide on purpose: search-phase windows are short, and a trial within noise of
    the best must be measured to the end (a config at 0.6x the best is not).
    """

    def __init__(self, *, ratio: float = PRUNE_RATIO, min_windows: int = 2) -> None:
        if not 0 < ratio < 1:
            raise ValueError(f"ratio must be in (0, 1), got {ratio=}")
        if min_windows < 1:
            raise ValueError(f"min_windows must be at least 1, got {min_windows=}")
        self.ratio = ratio
        self.min_windows = min_windows

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None or step < self.min_windows:
            return False
        best = best_so_far(study)
        if best is None:
            return False
        return trial.intermediate_values[step] < self.ratio * best


def _leader(study: optuna.Study, *, eager: bool = False) -> FrozenTrial | None:
    """The trial that completed with the highest rate (None: none yet); with `eager`, of the
    trials that compiled nothing."""
    return max((t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if t.value and not (eager and t.params.get("compile", "none") != "none")),
               key=lambda t: float(t.value or 0.0), default=None)


def best_so_far(study: optuna.Study, *, eager: bool = False) -> float | None:
    """The highest rate a trial completed with (None: none yet); with `eager`, of the trials
    that compiled nothing."""
    best = _leader(study, eager=eager)
    return None if best is None else float(best.value or 0.0)


def warm_bar(study: optuna.Study, *, eager: bool = False) -> float | None:
    """What a warm-up is judged against: the best rate so far, or the leader's own warm rate
    (`records.read_warm_rate`) where that is lower (None: none completed). The leader's alone:
    another trial's warm rate says nothing of how far the leader's warm-up ran below its rate."""
    best = _leader(study, eager=eager)
    if best is None:
        return None
    rate, warm = float(best.value or 0.0), read_warm_rate(best)
    return rate if warm is None else min(rate, warm)


def report_windows(trial: optuna.Trial, prune: Callable[[str], None] | None, *,
                   windows: bool = True, eager: bool = False) -> Callable[[TrialEvent], None]:
    """A trial's event callback: report each window's running median to Optuna and, when the
    pruner says so, stop the trial through `prune` (its runner's; None: never pruned). Before
    the windows, a trial whose warm-up ran under HOPELESS x `warm_bar` is stopped too, its
    fastest chunk reported as step 0; with `windows` False (a guided start) only that. Every
    trial's warm rate is kept, whether it may be stopped or not.
    An `eager` trial (no compile) is judged against the eager trials: it ranks eager configs,
    whose compiled forms come later (a GRU loop's eager dtypes ran at 0.14x its compiled best,
    and the dtype that led eager was the one compiled)."""
    rates: list[float] = []
    warm: list[float] = []
    stopped: list[bool] = []  # once: the runner kills it a poll later, events may come first

    def on_event(event: TrialEvent) -> None:
        if isinstance(event, WarmupEvent) and event.seconds > 0 and not rates:
            warm.append(event.items / event.seconds)
            if len(warm) == HOPELESS_CHUNKS:  # kept for every trial, a baseline's too
                try:
                    write_warm_rate(trial, max(warm))
                except Exception:  # noqa: BLE001 - optional: a locked or finished trial loses
                    pass  # only a lower bar for later warm-ups, never the search
            bar = warm_bar(trial.study, eager=eager) if prune is not None else None
            if len(warm) >= HOPELESS_CHUNKS and bar is not None and max(warm) < HOPELESS * bar \
                    and not stopped:
                stopped.append(True)
                trial.report(max(warm), 0)
                what = "trial " if eager else ""
                if bar != best_so_far(trial.study, eager=eager):
                    what = "warm-up "
                prune(f"pruned in warm-up: its steps ran at most {max(warm):.4g}/s, under "
                      f"{HOPELESS:.0%} of the best {'eager ' if eager else ''}{what}so far "
                      f"({bar:.4g}/s)")
            return
        if prune is None:
            return
        if not isinstance(event, WindowEvent) or not windows:
            return
        rates.append(float(event.throughput))
        trial.report(statistics.median(rates), len(rates))
        if trial.should_prune() and not climbing(rates):
            prune(f"pruned after {len(rates)} window(s): "
                  f"{statistics.median(rates):.4g}/s is clearly below the best so far")

    return on_event


def climbing(rates: Sequence[float]) -> bool:
    """Whether the latest of a trial's first windows (2 x `trend.MIN_WINDOWS` at most) ran
    clearly faster than their running median (by `trend.RISE`): a warm-up still going on into
    the windows, which measuring drops if it lasts (an eager BERT on padded batches went from
    105-ms to 66-ms steps over its first ~10 s on an H100). Such a trial is not pruned on that
    window; the next one judges it again. Past the first windows a high one is noise."""
    return 2 <= len(rates) <= 2 * MIN_WINDOWS and rates[-1] > (1 + RISE) * statistics.median(rates)


def report_copy(trial: optuna.Trial, windows: Sequence[float], rate: float | None = None
                ) -> None:
    """Report a pruned trial's window rates again on a trial that copies its result, so that
    the sampler weighs the copy as it weighs the pruned original (its running medians); one
    stopped in warm-up (no window) reported its `rate` as step 0."""
    if not windows and rate:
        trial.report(rate, 0)
    for k in range(1, len(windows) + 1):
        trial.report(statistics.median(windows[:k]), k)
