"""Which config a study hands back: the confirmed winner, else the search's fastest ok trial,
with the baseline it is compared against."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import stored_trial
from optuna.trial import TrialState

from autotune import TrainConfig
from autotune.study.records import ConfirmationEntry, TrialRecord
from autotune.study.winner import Winner, best_and_baseline, pick_winner


def config(**changes: Any) -> dict[str, Any]:
    return TrainConfig(batch_size=8).replace(**changes).to_dict()


def ok(number: int, value: float, baseline: bool = False, **changes: Any) -> TrialRecord:
    attrs: dict[str, Any] = {"config": config(**changes),
                             "result": {"status": "ok", "throughput": value}}
    if baseline:
        attrs.update(role="baseline", baseline=True)
    return stored_trial(number, value=value, attrs=attrs)


def failed(number: int, status: str, value: float = 0.0, baseline: bool = False) -> TrialRecord:
    attrs: dict[str, Any] = {"config": config(), "result": {"status": status, "reason": status}}
    if baseline:
        attrs.update(role="baseline", baseline=True)
    return stored_trial(number, value=value, attrs=attrs)


def entry(trial: int, median: float | None, *, baseline: bool = False,
          runs: tuple[float, ...] = ()) -> ConfirmationEntry:
    return ConfirmationEntry(trial=trial, baseline=baseline, search_throughput=0.0,
                             throughputs=runs, median=median, spread=None,
                             statuses=("ok",) * len(runs))


@pytest.fixture
def trials() -> list[TrialRecord]:
    return [
        ok(0, 100.0, baseline=True),
        ok(1, 250.0, batch_size=32, amp_dtype="bf16"),
        failed(2, "oom"),
        ok(3, 180.0, batch_size=16),
        stored_trial(4, state=TrialState.RUNNING, attrs={"config": config(batch_size=64)}),
    ]


# -- best and baseline ----------------------------------------------------------------------------


def test_best_and_baseline(trials: list[TrialRecord]) -> None:
    best, baseline = best_and_baseline(trials)
    assert best is not None and best.number == 1
    assert baseline == 100.0


def test_best_ignores_trials_that_did_not_run_ok() -> None:
    odd = failed(1, "oom", value=1e9)  # a value on a failed trial must not make it the best
    best, baseline = best_and_baseline([ok(0, 100.0, baseline=True), odd])
    assert best is not None and best.number == 0
    assert baseline == 100.0


def test_no_baseline_when_it_failed() -> None:
    best, baseline = best_and_baseline([failed(0, "oom", baseline=True), ok(1, 50.0)])
    assert best is not None and best.number == 1
    assert baseline is None


def test_nothing_ok() -> None:
    assert best_and_baseline([failed(0, "error"), failed(1, "timeout")]) == (None, None)
    assert best_and_baseline([]) == (None, None)


# -- the winner ------------------------------------------------------------------------------------


def test_pick_winner_without_confirmation(trials: list[TrialRecord]) -> None:
    winner = pick_winner(trials, None)
    assert winner is not None
    assert winner.record.number == 1
    assert winner.record.config == TrainConfig(batch_size=32, amp_dtype="bf16")
    assert winner.throughput == 250.0 and winner.baseline == 100.0
    assert winner.speedup == pytest.approx(2.5)
    assert winner.confirmation is None
    assert pick_winner(trials, []) == winner  # an empty confirmation is none
    assert pick_winner([failed(0, "oom")], None) is None


def test_pick_winner_from_confirmation_runs(trials: list[TrialRecord]) -> None:
    # Re-measured, trial 3 beats trial 1 (whose search window was lucky).
    confirmation = [entry(3, 200.0, runs=(199.0, 201.0)), entry(1, 190.0, runs=(185.0, 195.0)),
                    entry(0, 95.0, baseline=True, runs=(94.0, 96.0))]
    winner = pick_winner(trials, confirmation)
    assert winner is not None
    assert winner.record.number == 3
    assert winner.throughput == 200.0 and winner.baseline == 95.0
    assert winner.confirmation == confirmation


def test_confirmation_without_the_baseline_keeps_the_searched_baseline(
    trials: list[TrialRecord],
) -> None:
    winner = pick_winner(trials, [entry(3, 200.0, runs=(200.0,))])
    assert winner is not None and winner.baseline == 100.0


def test_confirmation_where_every_run_failed_falls_back_to_the_search(
    trials: list[TrialRecord],
) -> None:
    winner = pick_winner(trials, [entry(3, None)])
    assert winner is not None
    assert winner.record.number == 1 and winner.throughput == 250.0
    assert winner.confirmation is None


def test_confirmation_of_a_trial_the_study_no_longer_holds_is_ignored(
    trials: list[TrialRecord],
) -> None:
    winner = pick_winner(trials, [entry(99, 1000.0, runs=(1000.0,))])
    assert winner is not None and winner.record.number == 1 and winner.confirmation is None


def test_speedup_needs_a_baseline(trials: list[TrialRecord]) -> None:
    record = trials[1]
    assert Winner(record, 250.0, None, None).speedup is None
    assert Winner(record, 250.0, 0.0, None).speedup is None
    assert Winner(record, 250.0, 125.0, None).speedup == 2.0
