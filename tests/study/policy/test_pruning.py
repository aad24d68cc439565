"""Pruning: a trial clearly below the best stops after its first windows, and a trial that
copies a pruned one's result carries the same running medians for the sampler."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from autotune.contract.events import WindowEvent
from autotune.study.policy.pruning import IncumbentPruner, report_copy, report_windows


@pytest.fixture(autouse=True)
def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def study_with_best(value: float) -> optuna.Study:
    study = optuna.create_study(direction="maximize", pruner=IncumbentPruner(ratio=0.6, min_windows=2))
    trial = study.ask()
    study.tell(trial, value)
    return study


def windows(trial: optuna.Trial, rates: list[float]) -> list[str]:
    pruned: list[str] = []
    on_event = report_windows(trial, pruned.append)
    for rate in rates:
        on_event(WindowEvent(throughput=rate))
        if pruned:
            break
    return pruned


def test_a_trial_clearly_below_the_best_is_pruned_after_its_first_windows() -> None:
    study = study_with_best(100.0)
    trial = study.ask()
    reasons = windows(trial, [50.0, 40.0, 45.0])
    assert len(reasons) == 1 and "after 2 window(s)" in reasons[0]
    assert trial.should_prune()


def test_a_trial_near_the_best_is_measured_to_the_end() -> None:
    study = study_with_best(100.0)
    trial = study.ask()
    assert windows(trial, [70.0, 65.0, 80.0, 75.0]) == []
    # The first window alone never prunes, however low.
    other = study.ask()
    windows(other, [1.0])
    assert not other.should_prune()


def test_without_a_completed_trial_nothing_is_pruned() -> None:
    study = optuna.create_study(direction="maximize", pruner=IncumbentPruner())
    trial = study.ask()
    assert windows(trial, [1.0, 1.0, 1.0]) == []


def test_a_copy_of_a_pruned_trial_reports_the_same_running_medians() -> None:
    study = study_with_best(100.0)
    original = study.ask()
    windows(original, [50.0, 30.0])
    study.tell(original, state=TrialState.PRUNED)
    copy = study.ask()
    report_copy(copy, [50.0, 30.0])
    study.tell(copy, state=TrialState.PRUNED)
    first, second = study.trials[1], study.trials[2]
    assert second.intermediate_values == first.intermediate_values == {1: 50.0, 2: 40.0}


def test_the_ratio_and_window_count_are_checked() -> None:
    with pytest.raises(ValueError, match="ratio"):
        IncumbentPruner(ratio=1.5)
    with pytest.raises(ValueError, match="min_windows"):
        IncumbentPruner(min_windows=0)
