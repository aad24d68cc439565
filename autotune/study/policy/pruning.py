"""Stop a trial that is clearly slower than the best so far, after its first timed windows.

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

from autotune.contract.events import TrialEvent, WindowEvent

__all__ = ["PRUNE_RATIO", "IncumbentPruner", "report_copy", "report_windows"]

PRUNE_RATIO = 0.6
"""A trial whose running median stays under this share of the best so far is pruned."""


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
        best = max((t.value for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                    if t.value), default=None)
        if best is None:
            return False
        return trial.intermediate_values[step] < self.ratio * best


def report_windows(trial: optuna.Trial, prune: Callable[[str], None] | None
                   ) -> Callable[[TrialEvent], None]:
    """A trial's event callback: report each window's running median to Optuna and, when the
    pruner says so, stop the trial through `prune` (its runner's; None: never pruned)."""
    rates: list[float] = []

    def on_event(event: TrialEvent) -> None:
        if not isinstance(event, WindowEvent) or prune is None:
            return
        rates.append(float(event.throughput))
        trial.report(statistics.median(rates), len(rates))
        if trial.should_prune():
            prune(f"pruned after {len(rates)} window(s): "
                  f"{statistics.median(rates):.4g}/s is clearly below the best so far")

    return on_event


def report_copy(trial: optuna.Trial, windows: Sequence[float]) -> None:
    """Report a pruned trial's window rates again on a trial that copies its result, so that
    the sampler weighs the copy as it weighs the pruned original (its running medians)."""
    for k in range(1, len(windows) + 1):
        trial.report(statistics.median(windows[:k]), k)
