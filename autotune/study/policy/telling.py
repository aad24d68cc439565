"""How a trial's result is told to Optuna, so that its samplers learn what the config is worth.

Measured: its throughput. Pruned after its first windows: PRUNED (its intermediate values
were reported as it ran, and TPE learns from them). Outcomes that are a property of the config
(oom, nan, error, timeout, crashed): COMPLETE but infeasible (`trial.set_constraint`), so TPE
learns to avoid them. Interruptions, a baseline failing in the adapter's own code and trials cut
short by the study's own budget say nothing about the config: FAIL.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from autotune.contract.result import Status, TrialResult
from autotune.study.store import records

__all__ = ["tell"]


def tell(study: optuna.Study, trial: optuna.Trial, result: TrialResult, *, budget_cut: bool,
         says_nothing: bool = False) -> None:
    """Record `result` on `trial` and tell the study (nothing when another search has failed
    the trial already: its heartbeat was late, on a slow or cut network)."""
    try:
        records.write_result(trial, result)
    except optuna.exceptions.UpdateFinishedTrialError:
        return
    if result.status is Status.PRUNED:
        study.tell(trial, state=TrialState.PRUNED)
    elif result.status is Status.OK:
        trial.set_constraint(records.FEASIBLE, 0.0)
        study.tell(trial, result.throughput)
    elif result.status.says_something and not says_nothing \
            and not (budget_cut and result.status is Status.TIMEOUT):
        trial.set_constraint(records.FEASIBLE, 1.0)
        study.tell(trial, 0.0)
    else:
        study.tell(trial, state=TrialState.FAIL)
