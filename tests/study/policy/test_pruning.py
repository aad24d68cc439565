"""Pruning: a trial clearly below the best stops after its first windows, and a trial that
copies a pruned one's result carries the same running medians for the sampler."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from autotune.contract.events import WarmupEvent, WindowEvent
from autotune.study.store.records import read_warm_rate
from autotune.study.policy.pruning import (HOPELESS, IncumbentPruner, report_copy,
                                           report_windows, warm_bar)
from autotune.study.policy.starts import stoppable


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


def test_a_trial_whose_windows_still_climb_is_not_pruned_until_they_stop() -> None:
    # An eager BERT on padded batches: 105-ms steps became 66-ms ones over its first ~10 s.
    study = study_with_best(100.0)
    trial = study.ask()
    assert windows(trial, [30.0, 50.0, 80.0, 95.0]) == []  # each window above the median
    # Once a window no longer climbs, the running median judges it as before.
    flat = study.ask()
    reasons = windows(flat, [30.0, 50.0, 45.0, 46.0])
    assert len(reasons) == 1 and "after 3 window(s)" in reasons[0]
    # Past the first windows (2 x trend.MIN_WINDOWS) a high one no longer saves a slow trial.
    slow = study.ask()  # every window above the running median, but far below the best
    reasons = windows(slow, [4.0 * k for k in range(1, 21)])
    assert len(reasons) == 1 and "after 13 window(s)" in reasons[0]


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


# -- in warm-up: a trial at a fraction of the best (a Faster R-CNN at fp16 read 0.06x on an H100
# after 39 s of warm-up) --------------------------------------------------------------------------


def warm(trial: optuna.Trial, chunks: list[tuple[float, float]], *, windows: bool = True,
         then: list[float] = (), eager: bool = False) -> list[str]:  # type: ignore[assignment]
    pruned: list[str] = []
    on_event = report_windows(trial, pruned.append, windows=windows, eager=eager)
    for rate in then:
        on_event(WindowEvent(throughput=rate))
    for items, seconds in chunks:
        on_event(WarmupEvent(items=items, seconds=seconds, steps=1))
    return pruned


def test_a_trial_whose_warm_up_runs_at_a_fraction_of_the_best_is_stopped_there() -> None:
    study = study_with_best(100.0)
    trial = study.ask()
    reasons = warm(trial, [(20.0, 1.0), (25.0, 1.0), (10.0, 1.0)])
    assert len(reasons) == 1  # once, at the second chunk
    assert reasons[0] == ("pruned in warm-up: its steps ran at most 25/s, under 30% of the "
                          "best so far (100/s)")
    study.tell(trial, state=TrialState.PRUNED)
    assert study.trials[1].intermediate_values == {0: 25.0}  # what TPE learns from
    assert study.trials[1].value == 25.0


def test_a_slow_warm_up_short_of_hopeless_or_of_two_chunks_goes_on() -> None:
    study = study_with_best(100.0)
    assert warm(study.ask(), [(20.0, 1.0), (HOPELESS * 100.0 * 2, 2.0)]) == []  # one at 0.3x
    assert warm(study.ask(), [(5.0, 1.0)]) == []  # one chunk: not yet
    # Its windows began (the warm-up's chunks came late): the window pruner judges it.
    assert warm(study.ask(), [(5.0, 1.0), (5.0, 1.0)], then=[90.0]) == []
    empty = optuna.create_study(direction="maximize", pruner=IncumbentPruner())
    assert warm(empty.ask(), [(1.0, 1.0), (1.0, 1.0)]) == []  # no best to be judged against


def test_a_guided_start_is_stopped_only_in_warm_up() -> None:
    study = study_with_best(100.0)
    assert warm(study.ask(), [], windows=False, then=[10.0, 10.0, 10.0]) == []
    assert len(warm(study.ask(), [(2.0, 1.0), (2.0, 1.0)], windows=False)) == 1
    roles = {"baseline": False, "recipe": True, "": True, "explore: x": True,
             "eager: bs=8 fp16": True, "follow: bs=64 bf16": True}
    assert {role: stoppable(role) for role in roles} == roles


def test_an_eager_trial_is_judged_against_the_eager_trials() -> None:
    # A GRU loop on an H100: eager dtypes near 150k tokens/s, CUDA graphs 1.1M.
    study = optuna.create_study(direction="maximize")
    dist = {"compile": optuna.distributions.CategoricalDistribution(["none", "reduce-overhead"])}
    for compile, value in (("none", 150.0), ("reduce-overhead", 1100.0)):
        study.add_trial(optuna.trial.create_trial(params={"compile": compile},
                                                  distributions=dist, value=value))
    assert (warm_bar(study, eager=True), warm_bar(study)) == (150.0, 1100.0)
    eager_chunks = [(120.0, 1.0), (130.0, 1.0)]  # 0.12x the compiled best, 0.87x the eager one
    assert warm(study.ask(), eager_chunks, eager=True) == []
    assert len(warm(study.ask(), eager_chunks)) == 1  # a compiled trial that slow is hopeless
    reasons = warm(study.ask(), [(20.0, 1.0), (20.0, 1.0)], eager=True)
    assert reasons == ["pruned in warm-up: its steps ran at most 20/s, under 30% of the best "
                       "eager trial so far (150/s)"]


def test_a_copy_of_a_trial_stopped_in_warm_up_reports_its_rate_as_step_0() -> None:
    study = study_with_best(100.0)
    copy = study.ask()
    report_copy(copy, [], 5.0)
    study.tell(copy, state=TrialState.PRUNED)
    assert study.trials[1].intermediate_values == {0: 5.0} and study.trials[1].value == 5.0


def test_a_warm_up_of_new_shapes_is_judged_against_the_best_warm_up() -> None:
    # An eager BERT on padded batches (H100, 2026-11-27): each of its first steps is a new
    # length, so every trial's warm-up runs near 0.3x its settled rate; a twin of the 138k
    # leader read 40.9k there and was stopped. Judged against the leader's own warm-up, it runs.
    study = optuna.create_study(direction="maximize")
    leader = study.ask()
    warm(leader, [(40.0, 1.0), (42.0, 1.0)])  # then its windows read 138
    assert read_warm_rate(leader) == 42.0  # the faster of its first two chunks
    study.tell(leader, 138.0)
    assert warm_bar(study) == 42.0
    assert warm(study.ask(), [(40.0, 1.0), (40.9, 1.0)]) == []  # 0.97x the leader's warm-up
    reasons = warm(study.ask(), [(3.0, 1.0), (3.6, 1.0)])  # hopeless all the same
    assert reasons == ["pruned in warm-up: its steps ran at most 3.6/s, under 30% of the best "
                       "warm-up so far (42/s)"]
    # Another trial's warm rate does not move the bar: only the leader's own.
    slow = study.ask()
    warm(slow, [(5.0, 1.0), (5.0, 1.0)])
    study.tell(slow, 10.0)
    fast = study.ask()
    warm(fast, [(500.0, 1.0), (500.0, 1.0)])
    study.tell(fast, 100.0)
    assert warm_bar(study) == 42.0
    # A leader whose warm-up ran faster than its rate, or kept none, is judged by its rate.
    quick = study.ask()
    warm(quick, [(900.0, 1.0), (900.0, 1.0)])
    study.tell(quick, 200.0)
    assert warm_bar(study) == 200.0
    study.tell(study.ask(), 300.0)  # settled in under two chunks: no warm rate
    assert warm_bar(study) == 300.0 and warm_bar(optuna.create_study()) is None
    # A baseline is never stopped, but its warm rate is kept all the same.
    baseline = study.ask()
    on_event = report_windows(baseline, None)
    for rate in (7.0, 9.0):
        on_event(WarmupEvent(items=rate, seconds=1.0, steps=1))
    assert read_warm_rate(baseline) == 9.0
