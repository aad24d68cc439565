"""The gate's decision on run figures (pure): the four cases of the issue's "Done when", the
interval branch, and the line people read."""

from __future__ import annotations

import pytest

from autotune.check.verdict import ExitCode, State, judge

STORED = 400.0


def test_an_unchanged_adapter_passes() -> None:
    verdict = judge([401.0, 399.0, 400.0], STORED, threshold=0.05)
    assert verdict.state is State.OK and verdict.exit_code is ExitCode.OK
    assert verdict.line("samples") == ("ok: 400 samples/s, 1.00x the stored 400 (3 runs, "
                                       "spread 0.5%)")


def test_a_15_percent_slowdown_in_every_run_fails() -> None:
    verdict = judge([340.0, 341.0, 339.0], STORED, threshold=0.05)
    assert verdict.state is State.REGRESSION and verdict.exit_code is ExitCode.REGRESSION
    assert verdict.ratio == pytest.approx(0.85)
    assert verdict.line("samples").startswith("regression: 340 samples/s, 0.85x the stored")
    assert "every run below 0.95x" in verdict.line("samples")


def test_a_2_percent_slowdown_passes() -> None:
    verdict = judge([392.0, 393.0, 391.0], STORED, threshold=0.05)
    assert verdict.state is State.OK and verdict.exit_code is ExitCode.OK


def test_runs_that_disagree_on_a_slowdown_do_not_fail_but_say_so() -> None:
    # A busy machine: two runs slowed by others, one at the stored rate.
    verdict = judge([200.0, 388.0, 240.0], STORED, threshold=0.05)
    assert verdict.state is State.NOISY and verdict.exit_code is ExitCode.OK
    assert verdict.interval[1] > 0.95
    assert "the runs do not agree on it" in verdict.line("samples")


def test_an_interval_below_the_threshold_fails_even_with_one_run_above_it() -> None:
    runs = [340.0] * 9 + [381.0]  # the last run reads 0.9525x, the interval stays below 0.95
    verdict = judge(runs, STORED, threshold=0.05)
    assert verdict.state is State.REGRESSION
    assert verdict.interval[1] < 0.95
    assert "95% interval" in verdict.line("samples")


def test_one_run_slower_than_the_threshold_is_a_regression_of_that_run() -> None:
    verdict = judge([300.0], STORED, threshold=0.05)
    assert verdict.state is State.REGRESSION and verdict.spread == 0.0
    assert verdict.to_dict()["interval"][1] is None  # unbounded: JSON has no infinity


def test_faster_runs_that_agree_ask_for_an_update() -> None:
    verdict = judge([460.0, 462.0, 458.0], STORED, threshold=0.05)
    assert verdict.state is State.FASTER and verdict.exit_code is ExitCode.OK
    assert "--update" in verdict.line("samples")


@pytest.mark.parametrize(("runs", "stored", "threshold"),
                         [([], 400.0, 0.05), ([0.0], 400.0, 0.05), ([1.0], 0.0, 0.05),
                          ([1.0], 400.0, 1.0)])
def test_bad_figures_are_refused(runs: list[float], stored: float, threshold: float) -> None:
    with pytest.raises(ValueError):
        judge(runs, stored, threshold=threshold)
