"""Final confirmation: which configs are re-run, in what order, how the winner is then picked and
reported; and one real small study in this process that confirms its leaders."""

from __future__ import annotations

import dataclasses
import random
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers import FakeRunner, csv_rows, stored_trial
from optuna.trial import TrialState

from autotune import Adapter, MeasureSettings, Status, TrainConfig, TrialResult, load_config
from autotune.contract.request import TrialRequest
from autotune.contract.result import Diagnosis, Verdict
from autotune.outputs.best import best_document
from autotune.outputs.display import QuietListener
from autotune.outputs.report import write_outputs
from autotune.study.confirmation.budget import (
    FRESH_PROCESS_SECONDS,
    SPARE_PROCESS_SECONDS,
    WARM_COMPILE_SECONDS,
    estimate_seconds,
    fit_to_time,
    reserve_seconds,
    run_seconds,
    start_costs,
)
from autotune.study.confirmation import candidate as candidate_module
from autotune.study.confirmation.candidate import BEHIND, Candidate, candidates
from autotune.study.confirmation.rounds import run_confirmation
from autotune.study.confirmation.winner import pick_winner
from autotune.study.execution.protocol import RunnerBase
from autotune.study.execution.runner import InProcessRunner
from autotune.study.search import Interrupted, Search, SearchSettings
from autotune.study.space.file import parse_space
from autotune.study.store.records import TrialRecord, read_records
from autotune.study.store.study_attrs import ConfirmationEntry, StudyInfo, read_confirmation

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)
DIAGNOSIS = Diagnosis(verdict=Verdict.COMPUTE, suggestion="", throughput=300.0,
                      loader_rate=1e4, compute_rate=310.0, data_wait_fraction=0.0,
                      gpu_busy_fraction=None)


def config(**changes: Any) -> dict[str, Any]:
    return TrainConfig(batch_size=8).replace(**changes).to_dict()


def trial(
    number: int,
    value: float,
    *,
    status: str = "ok",
    baseline: bool = False,
    duration: float = 10.0,
    state: TrialState = TrialState.COMPLETE,
    extra_attrs: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    **changes: Any,
) -> TrialRecord:
    """A trial as the study stores it (its user attributes), read back as a record."""
    attrs: dict[str, Any] = {
        "config": config(**changes),
        "result": {"status": status, "throughput": value if status == "ok" else None,
                   "unit": "samples", "duration_seconds": duration, **(result or {})},
        "role": "baseline" if baseline else "",
        "baseline": baseline,
        **(extra_attrs or {}),
    }
    return stored_trial(number, state=state, value=value, attrs=attrs)


@pytest.fixture
def trials() -> list[TrialRecord]:
    return [
        trial(0, 100.0, baseline=True, duration=5.0),
        trial(1, 300.0, batch_size=32, duration=20.0),
        trial(2, 1e9, status="oom", batch_size=64),  # a failed trial's value must not count
        trial(3, 250.0, batch_size=16, duration=12.0),
        trial(4, 280.0, batch_size=32),  # the same config as trial 1, measured again: slower
        trial(5, 300.0, batch_size=32, extra_attrs={"duplicate_of": 1}),
        trial(6, 200.0, batch_size=16, amp_dtype="bf16", duration=8.0),
        trial(7, 0.0, state=TrialState.FAIL, batch_size=4),
        trial(8, 0.0, state=TrialState.RUNNING, batch_size=2),
    ]


# -- candidates ---------------------------------------------------------------------------------------


def test_candidates_are_the_k_fastest_distinct_ok_configs_and_the_baseline(
    trials: list[TrialRecord],
) -> None:
    cands = candidates(trials, 2)
    assert [c.trial for c in cands] == [1, 3, 0]
    assert [c.baseline for c in cands] == [False, False, True]
    assert cands[0].config == TrainConfig(batch_size=32)
    assert cands[0].search_throughput == 300.0
    assert cands[0].duration_seconds == 20.0
    assert cands[2].config == TrainConfig(batch_size=8)


def test_candidates_k_larger_than_the_configs(trials: list[TrialRecord]) -> None:
    cands = candidates(trials, 10)
    # Distinct ok configs only: trial 4 repeats trial 1's config, 5 is a duplicate, 2 failed.
    assert [c.trial for c in cands] == [1, 3, 6, 0]
    assert len({c.config for c in cands}) == 4


def test_baseline_among_the_fastest_is_not_added_twice() -> None:
    ts = [trial(0, 500.0, baseline=True), trial(1, 260.0, batch_size=4),
          trial(2, 300.0, batch_size=16)]
    cands = candidates(ts, 2)
    assert [c.trial for c in cands] == [0, 2]
    assert [c.baseline for c in cands] == [True, False]


def test_a_config_read_below_half_the_fastest_is_no_candidate() -> None:
    # T5-small on an H100: the recipe read 0.45x the leader; two fresh runs of it were held
    # back from a compile trial, and the confirmation never ran it.
    ts = [trial(0, 69_900.0, baseline=True), trial(3, 84_600.0, batch_size=4),
          trial(1, 37_800.0, batch_size=16), trial(2, 42_400.0, batch_size=2)]
    assert [c.trial for c in candidates(ts, 3)] == [3, 0, 2]
    assert BEHIND * 84_600.0 <= 42_400.0
    slow_base = [trial(0, 30_000.0, baseline=True), *ts[1:]]
    assert [c.trial for c in candidates(slow_base, 3)] == [3, 2, 0]  # the baseline stays


def test_failed_baseline_is_not_a_candidate() -> None:
    ts = [trial(0, 0.0, status="oom", baseline=True), trial(1, 100.0, batch_size=4),
          trial(2, 200.0, batch_size=16)]
    assert [c.trial for c in candidates(ts, 2)] == [2, 1]


def test_the_fastest_steady_config_takes_the_last_place_when_no_leader_settled() -> None:
    # The H100's held-out tabular model: leaders read 64-67k with windows 17-24% apart and ran
    # 44-52k fresh; a config read 58.6k with windows 5.5% apart and was left out.
    def noisy(number: int, rate: float, spread: float, converged: bool, **c: Any
              ) -> TrialRecord:
        return trial(number, rate, result={"spread": spread, "converged": converged}, **c)

    ts = [noisy(0, 21_000.0, 0.13, False, baseline=True),
          noisy(9, 67_300.0, 0.24, False, batch_size=16),
          noisy(6, 64_800.0, 0.04, False, batch_size=32),
          noisy(23, 64_100.0, 0.17, False, batch_size=64),
          noisy(13, 58_600.0, 0.055, True, batch_size=4),
          noisy(30, 50_400.0, 0.02, True, batch_size=2)]  # steady too, but slower
    cands = candidates(ts, 3)
    assert [c.trial for c in cands] == [9, 6, 13, 0]
    assert [c.steady for c in cands] == [False, False, True, False]
    # Kept as the leader is when time is short: the noisy runner-up goes first.
    assert [c.trial for c in fit_to_time(cands, 10.0, lambda c: c.duration_seconds)] == [9, 13, 0]
    # Not when one leader settled, nor when the steady config is below the leader's spread.
    settled = [*ts[:3], noisy(23, 64_100.0, 0.02, True, batch_size=64), *ts[4:]]
    assert [c.trial for c in candidates(settled, 3)] == [9, 6, 23, 0]
    tight = [ts[0], noisy(9, 67_300.0, 0.05, False, batch_size=16), *ts[2:]]
    assert [c.trial for c in candidates(tight, 3)] == [9, 6, 23, 0]
    assert [c.trial for c in candidates(ts, 1)] == [9, 0]  # one place: the leader's
    # A baseline among the fastest is no leader, nor does it take a place from a config.
    fast_base = [noisy(0, 70_000.0, 0.2, True, baseline=True), *ts[1:]]
    assert [c.trial for c in candidates(fast_base, 3)] == [0, 9, 13]
    assert [c.trial for c in candidates(fast_base, 2)] == [0, 9]


def test_no_candidates_without_ok_trials() -> None:
    assert candidates([trial(0, 0.0, status="error", baseline=True)], 3) == []
    assert candidates([], 3) == []


def test_start_costs_follow_the_measured_start_up_and_the_runner() -> None:
    class Ahead(RunnerBase):
        starts_ahead = True

    forked = RunnerBase()
    assert start_costs(forked, RunnerBase()) == (FRESH_PROCESS_SECONDS, FRESH_PROCESS_SECONDS)
    forked.start_seconds = 2.5  # the fork server started: its start-up was measured
    assert start_costs(forked, RunnerBase()) == (2.5, 2.5)
    assert start_costs(forked, Ahead()) == (2.5, 2.5)  # never more than the whole start-up
    forked.start_seconds = 14.0
    assert start_costs(forked, Ahead()) == (14.0, SPARE_PROCESS_SECONDS)


def test_the_reserve_keeps_two_runs_of_the_leaders_when_a_third_of_the_budget_does_not(
        trials: list[TrialRecord]) -> None:
    cands = candidates(trials, 2)  # trials of 20, 12 and 5 (the baseline) seconds, no compile
    run = [20.0 + FRESH_PROCESS_SECONDS, 12.0 + FRESH_PROCESS_SECONDS, 5.0 + FRESH_PROCESS_SECONDS]
    plan = {"measure_gap_seconds": 0.0, "start_seconds": FRESH_PROCESS_SECONDS,
            "later_start_seconds": FRESH_PROCESS_SECONDS}
    full = estimate_seconds(cands, 3)
    assert reserve_seconds(cands, 3, timeout=None, **plan) == full  # no budget: all of it
    assert reserve_seconds(cands, 3, timeout=10 * full, **plan) == full  # it fits a third
    two_runs = 2 * run[0] + 2 * run[1] + run[2]  # the two leaders twice, the baseline once
    # A third of 300 s is 100 s, less than two runs of each leader and one of the baseline
    # (129 s).
    assert reserve_seconds(cands, 3, timeout=300.0, **plan) == pytest.approx(two_runs)
    # ... which is held back up to half the budget, never more.
    assert reserve_seconds(cands, 3, timeout=200.0, **plan) == pytest.approx(100.0)
    # One leader: its two runs and the baseline's (81 s) fit in a third (100 s).
    one = [c for c in cands if c.baseline or c.search_throughput == max(
        x.search_throughput for x in cands)]
    assert len(one) == 2 and reserve_seconds(one, 3, timeout=240.0, **plan) == pytest.approx(
        2 * run[0] + run[2])
    # Without a leader (the baseline alone) nothing is held back.
    assert reserve_seconds([c for c in cands if c.baseline], 3, timeout=100.0, **plan) == 0.0


def test_estimate_seconds(trials: list[TrialRecord]) -> None:
    cands = candidates(trials, 2)  # trials of 20, 12 and 5 (the baseline) seconds, no compile
    run = [20.0 + FRESH_PROCESS_SECONDS, 12.0 + FRESH_PROCESS_SECONDS, 5.0 + FRESH_PROCESS_SECONDS]
    # A first round of all, then repeats - 1 more of the two leaders by the search.
    assert estimate_seconds(cands, 3) == sum(run) + 2 * (run[0] + run[1])
    # Half the confirmation's longer measurement for a config whose search windows converged,
    # all of it for one whose did not.
    assert estimate_seconds(cands, 1, measure_gap_seconds=4.0) == sum(run) + 3 * 2.0
    noisy = [c.__class__(**{**c.__dict__, "converged": c.trial != cands[0].trial}) for c in cands]
    assert estimate_seconds(noisy, 1, measure_gap_seconds=4.0) == sum(run) + 2 * 2.0 + 4.0
    compiled = [c.__class__(**{**c.__dict__, "compile_seconds": 4.0}) for c in cands]
    assert estimate_seconds(compiled, 1) == sum(run) - 3 * 4.0
    # A compiled config's cold compile is not paid again, its compile from the cache is.
    cold = [c.__class__(**{**c.__dict__, "compile_seconds": 30.0,
                           "duration_seconds": c.duration_seconds + 30.0,
                           "config": c.config.replace(compile="default")}) for c in cands]
    assert estimate_seconds(cold, 1) == pytest.approx(sum(run) + 3 * WARM_COMPILE_SECONDS)
    # Runs started ahead pay less start-up after the first, which pays all of it.
    assert estimate_seconds(cands, 1, start_seconds=9.0, later_start_seconds=1.0) == (
        sum(run) - 3 * FRESH_PROCESS_SECONDS + 8.0 + 3 * 1.0)
    assert estimate_seconds([], 3) == 0.0
    # The baseline alone is never confirmed: no time is held back for it (a short budget
    # would otherwise end the search after its first trial).
    assert estimate_seconds([c for c in cands if c.baseline], 3) == 0.0



def test_a_compiled_config_of_varying_shapes_is_planned_to_compile_again_in_its_fresh_run() -> None:
    # A Llama-style transformers LM padded per batch (H100, 2026-11-26): its search trial ran
    # 169 s, 118 of them compiling; its fresh run took 141 s (89 compiling). Planned at a 4.5-s
    # warm compile (about 70 s), the first fresh run left no time for the second.
    compiled = TrainConfig(batch_size=8, amp_dtype="tf32", compile="default")
    varying = Candidate(trial=6, config=compiled, search_throughput=81.2e3,
                        duration_seconds=169.0, compile_seconds=118.0, converged=False,
                        shapes_vary=True)
    planned = run_seconds(varying, measure_gap_seconds=0.0, start_seconds=FRESH_PROCESS_SECONDS)
    assert planned >= 141.0
    one_shape = dataclasses.replace(varying, shapes_vary=False)
    assert run_seconds(one_shape, measure_gap_seconds=0.0,
                       start_seconds=FRESH_PROCESS_SECONDS) == pytest.approx(
        169.0 - 118.0 + WARM_COMPILE_SECONDS + FRESH_PROCESS_SECONDS)
    # Read from the trial's result.
    record = TrialRecord(number=6, state=TrialState.COMPLETE, value=81.2e3, config=compiled,
                         result=TrialResult(status=Status.OK, throughput=81.2e3,
                                            duration_seconds=169.0, compile_seconds=118.0,
                                            shapes_vary=True),
                         role="recipe")
    assert [c.shapes_vary for c in candidates([record], 3)] == [True]


# -- run_confirmation with a scripted runner -----------------------------------------------------------


class ScriptedRunner(RunnerBase):
    """Answers each run with the next throughput scripted for that trial number."""

    def __init__(self, script: dict[int, list[TrialResult]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.calls: list[tuple[int, Path, float, TrialRequest]] = []

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        self.calls.append((request.number, trial_dir, timeout, request))
        return self.script[request.number].pop(0)

    @property
    def order(self) -> list[int]:
        return [n for n, *_ in self.calls]

    def count(self, number: int) -> int:
        return self.order.count(number)


def ok(value: float) -> TrialResult:
    return TrialResult(status=Status.OK, throughput=value)


def oks(*values: float) -> list[TrialResult]:
    return [ok(v) for v in values]


def cand(number: int, search: float, *, baseline: bool = False, duration: float = 10.0,
         **changes: Any) -> Candidate:
    return Candidate(trial=number, config=TrainConfig(batch_size=8).replace(**changes),
                     search_throughput=search, duration_seconds=duration, baseline=baseline)


def timed_confirmation(tmp_path: Path, cands: list[Candidate], runner: Any, *,
                       lengths: dict[int, float] | None, deadline: float, seed: int) -> None:
    """run_confirmation on a simulated clock: each run moves it on by its trial's length
    (None: by the seconds its result says it took)."""
    now = [0.0]

    def timed(cand: Candidate, result: TrialResult) -> None:
        now[0] += lengths[cand.trial] if lengths is not None else result.duration_seconds or 0.0

    run_confirmation(cands, adapter=Path("a.py"), device="cpu", runner=runner,
                     out=tmp_path / str(seed), repeats=2, trial_timeout=300.0, seed=seed,
                     measure=MeasureSettings(), deadline=deadline, clock=lambda: now[0],
                     on_result=timed)


def confirm_phase_of(tmp_path: Path, runner: Any, *, max_repeats: int | None,
                     trial_timeout: float, listener: Any, clock: Any) -> Any:
    """A ConfirmPhase of 2 repeats on `runner` (search and confirmation alike), writing under
    `tmp_path`, with no study: the tests using it replace `record_confirmation`."""
    from types import SimpleNamespace

    from autotune.study.confirmation import phase as phase_module

    settings = SimpleNamespace(adapter=Path("adapter.py"), device="cpu", out=tmp_path,
                               confirm_repeats=2, confirm_max_repeats=max_repeats,
                               trial_timeout=trial_timeout, confirm_measure=None, measure=QUICK,
                               seed=1)
    return phase_module.ConfirmPhase(
        settings=settings, study=None, lock=None, space=None,  # type: ignore[arg-type]
        listener=listener, search_runner=runner, confirm_runner=runner, clock=clock,
        signalled=lambda: False)


def test_a_short_confirmation_drops_the_slowest_so_that_the_leader_runs_twice() -> None:
    # The H100 ResNet search: 3 leaders and the baseline, ~40 s a run, 185 s left. Each ran
    # once, none twice, and no lead could be called. The slowest by the search goes.
    cands = [cand(7, 3880.0, duration=40.0, batch_size=32), cand(6, 3970.0, duration=40.0),
             cand(1, 3850.0, duration=40.0, batch_size=64),
             cand(0, 796.0, baseline=True, duration=40.0)]
    def run(c: Candidate) -> float:
        return c.duration_seconds

    assert [c.trial for c in fit_to_time(cands, 185.0, run)] == [7, 6, 0]
    assert [c.trial for c in fit_to_time(cands, 200.0, run)] == [7, 6, 1, 0]  # fits: all stay
    # Never the leader nor the baseline, however short the time.
    assert [c.trial for c in fit_to_time(cands, 10.0, run)] == [6, 0]
    # Planned as estimate_seconds plans a run.
    assert run_seconds(cands[0], measure_gap_seconds=10.0, start_seconds=4.0) == 40.0 + 4.0 + 5.0


CANDS = [cand(3, 300.0, batch_size=32, duration=20.0), cand(5, 280.0, batch_size=16),
         cand(0, 100.0, baseline=True, duration=400.0)]
# Rates no number of runs tells apart: each config's runs (and search rate) span the others'.
TIED = {3: oks(200.0, 260.0, 230.0, 215.0, 245.0), 5: oks(255.0, 205.0, 240.0, 220.0, 235.0),
        0: oks(210.0, 250.0, 225.0, 238.0, 212.0)}
TIED_CANDS = [cand(3, 240.0, batch_size=32, duration=20.0), cand(5, 235.0, batch_size=16),
              cand(0, 250.0, baseline=True, duration=400.0)]


def confirm(runner: ScriptedRunner, tmp_path: Path, cands: list[Candidate] = CANDS,
            repeats: int = 2, seed: int | None = 1, **kw: Any) -> list[ConfirmationEntry]:
    return run_confirmation(cands, adapter=Path("adapter.py"), device="cpu", runner=runner,
                            out=tmp_path, repeats=repeats, trial_timeout=300.0, measure=QUICK,
                            seed=seed, **kw)


def test_rounds_interleave_the_candidates_in_a_shuffled_order(tmp_path: Path) -> None:
    runner = ScriptedRunner(TIED)
    confirm(runner, tmp_path, cands=TIED_CANDS, seed=1, max_repeats=3)
    order = runner.order
    assert len(order) == 9  # a tie runs everyone to the cap
    rounds = [order[0:3], order[3:6], order[6:9]]
    assert all(sorted(r) == [0, 3, 5] for r in rounds)  # every candidate once a round
    rng = random.Random(1)
    expected = []
    for _ in range(3):
        one = [3, 5, 0]
        rng.shuffle(one)
        expected += one
    assert order == expected  # the seed makes the order reproducible...
    assert len({tuple(r) for r in rounds}) > 1  # ...and the rounds are shuffled anew


def test_a_clear_lead_stops_early(tmp_path: Path) -> None:
    # After one round, trial 5 and the baseline are behind trial 3 by their fresh run and their
    # search rate alike: they run no more; trial 3 runs once more, and its lead is clear.
    runner = ScriptedRunner({3: oks(310.0, 305.0, 300.0), 5: oks(150.0, 150.0),
                             0: oks(90.0, 90.0)})
    summary = confirm(runner, tmp_path, cands=[cand(3, 300.0), cand(5, 160.0),
                                               cand(0, 100.0, baseline=True)])
    assert sorted(runner.order[:3]) == [0, 3, 5]
    assert runner.order[3:] == [3]
    assert [s.trial for s in summary] == [3, 5, 0]
    assert summary[0].throughputs == (310.0, 305.0)


def test_runs_are_added_only_where_the_decision_is_open(tmp_path: Path) -> None:
    # Trials 3 and 5 are within each other's noise; the baseline is far behind from the start.
    runner = ScriptedRunner({3: oks(280.0, 250.0, 290.0, 260.0, 275.0),
                             5: oks(295.0, 270.0, 255.0, 285.0, 265.0), 0: oks(90.0)})
    summary = confirm(runner, tmp_path, repeats=2, max_repeats=4)
    assert runner.count(0) == 1
    assert runner.count(3) == runner.count(5) == 4  # to the cap: never separated
    for i in range(1, 4):  # after the first round, each round runs both, shuffled
        assert sorted(runner.order[3 + 2 * (i - 1):3 + 2 * i]) == [3, 5]
    assert {s.trial: len(s.throughputs) for s in summary} == {3: 4, 5: 4, 0: 1}


def test_a_lead_that_clears_with_more_runs_stops_there(tmp_path: Path) -> None:
    # One fresh run each agrees with the search that 3 leads 5, but not by enough to drop 5
    # (its search rate beats 3's run); the second round separates them.
    cands = [cand(3, 300.0), cand(5, 290.0), cand(0, 100.0, baseline=True)]
    runner = ScriptedRunner({3: oks(285.0, 320.0, 330.0), 5: oks(250.0, 240.0, 245.0),
                             0: oks(90.0)})
    confirm(runner, tmp_path, cands=cands, repeats=2, max_repeats=3)
    assert runner.count(3) == runner.count(5) == 2 and runner.count(0) == 1


def test_configs_shown_equally_fast_run_no_more(tmp_path: Path) -> None:
    # Two runs each put their ratio within 2% of 1: more runs would not make either the winner.
    cands = [cand(3, 420000.0), cand(5, 419000.0), cand(0, 50000.0, baseline=True)]
    runner = ScriptedRunner({3: oks(417722.5, 417407.6, 418188.2),
                             5: oks(416844.6, 417899.2, 417000.0), 0: oks(51071.0)})
    summary = confirm(runner, tmp_path, cands=cands, repeats=2, max_repeats=5)
    assert (runner.count(3), runner.count(5), runner.count(0)) == (2, 2, 1)
    assert [s.trial for s in summary] == [3, 5, 0]


def test_confirmation_stops_at_the_deadline(tmp_path: Path) -> None:
    runner = ScriptedRunner(TIED)
    now = [0.0]

    def clock() -> float:
        now[0] += 20.0  # each look at the clock is one run later
        return now[0]

    summary = run_confirmation(TIED_CANDS, adapter=Path("a.py"), device="cpu", runner=runner,
                               out=tmp_path, repeats=3, trial_timeout=300.0,
                               measure=MeasureSettings(), deadline=75.0, clock=clock)
    assert len(runner.order) == 3  # the clock read 20, 40, 60, then 80: past 75 - 10
    assert sorted(runner.order) == [0, 3, 5]
    assert all(len(e.throughputs) == 1 for e in summary)
    assert max(timeout for *_, timeout, _ in runner.calls) <= 75.0 - 20.0


def test_a_first_round_cut_by_the_deadline_has_run_the_search_leader(tmp_path: Path) -> None:
    # A 60-s CPU search (2026-11-23): the baseline led the search (1.7k/s), trial 2 (1.6k/s)
    # ran first in the shuffled round and the deadline came before the baseline's run; the
    # winner was then trial 2, at 0.94x the baseline by the search. The leader runs first.
    for seed in range(8):
        runner = ScriptedRunner({2: oks(1590.0), 4: oks(1100.0), 0: oks(1700.0)})
        now = [0.0]

        def clock() -> float:
            return now[0]

        def timed(cand: Candidate, result: TrialResult) -> None:
            now[0] += 30.0

        cands = [cand(2, 1600.0, num_workers=2), cand(4, 1130.0), cand(0, 1700.0, baseline=True)]
        summary = run_confirmation(cands, adapter=Path("a.py"), device="cpu", runner=runner,
                                   out=tmp_path / str(seed), repeats=2, trial_timeout=300.0,
                                   seed=seed, measure=MeasureSettings(), deadline=35.0,
                                   clock=clock, on_result=timed)
        assert runner.order == [0]
        assert [e.trial for e in summary if e.throughputs] == [0]


def test_no_run_starts_that_its_earlier_fresh_runs_say_cannot_finish(tmp_path: Path) -> None:
    # Each run takes 30 s. Round 1 runs the three candidates (clock 0, 30, 60); at 90 s, with
    # 40 s left of the 130-s budget, trial 5's second run (30 s) still fits; then 10 s is left,
    # no more than MIN_RUN_SECONDS, and the confirmation stops without a run cut short.
    slow = {n: [r.replace(duration_seconds=30.0) for r in rs] for n, rs in TIED.items()}
    runner = ScriptedRunner(slow)
    now = [0.0]
    cands = TIED_CANDS

    def clock() -> float:
        return now[0]

    def timed(cand: Candidate, result: TrialResult) -> None:
        now[0] += 30.0

    summary = run_confirmation(cands, adapter=Path("a.py"), device="cpu", runner=runner,
                               out=tmp_path, repeats=3, trial_timeout=300.0, seed=1,
                               measure=MeasureSettings(), deadline=130.0, clock=clock,
                               on_result=timed)
    assert all(timeout >= 30.0 for *_, timeout, _ in runner.calls)  # every run could finish
    assert len(runner.calls) == 4
    assert sum(len(e.statuses) for e in summary) == 4


def test_a_runs_expected_seconds_are_its_earlier_ok_fresh_runs_median() -> None:
    from autotune.study.confirmation.rounds import _expected_seconds

    assert _expected_seconds([]) == 0.0
    assert _expected_seconds([ok(1.0).replace(duration_seconds=30.0),
                              ok(1.0).replace(duration_seconds=20.0),
                              TrialResult(status=Status.TIMEOUT, duration_seconds=99.0)]) == 25.0


def test_requests_folders_and_time_limits(tmp_path: Path) -> None:
    runner = ScriptedRunner(TIED)
    confirm(runner, tmp_path, cands=TIED_CANDS, repeats=2, max_repeats=2)
    assert len(runner.calls) == 6
    for i, (number, trial_dir, timeout, request) in enumerate(runner.calls):
        assert trial_dir == tmp_path / "confirm" / f"{i:02d}-trial{number}"
        c = next(c for c in CANDS if c.trial == number)
        assert request.config == c.config
        assert request.number == number
        assert request.device == "cpu" and request.adapter == "adapter.py"
        assert request.measure == QUICK
        assert request.diagnose is False  # the search diagnosed it already
        # Twice what the trial took plus a minute, never past the trial limit.
        assert timeout == min(300.0, 2 * c.duration_seconds + 60)
    assert {timeout for n, _, timeout, _ in runner.calls if n == 0} == {300.0}
    assert {timeout for n, _, timeout, _ in runner.calls if n == 3} == {100.0}


def test_a_candidate_the_search_did_not_diagnose_is_diagnosed_in_its_first_run_only(
        tmp_path: Path) -> None:
    runner = ScriptedRunner(TIED)
    cands = [dataclasses.replace(TIED_CANDS[0], diagnosed=False), *TIED_CANDS[1:]]
    confirm(runner, tmp_path, cands=cands, repeats=2, max_repeats=2)
    asked = [(number, request.diagnose) for number, _, _, request in runner.calls]
    assert [d for n, d in asked if n == 3] == [True, False]
    assert not any(d for n, d in asked if n != 3)


def test_candidates_know_whether_their_search_trial_was_diagnosed() -> None:
    diagnosed = trial(1, 300.0, batch_size=16)
    assert diagnosed.result is not None
    diagnosed = dataclasses.replace(diagnosed, result=diagnosed.result.replace(
        diagnosis=DIAGNOSIS))
    by = {c.trial: c for c in candidates([trial(0, 100.0, baseline=True), diagnosed], k=2)}
    assert by[1].diagnosed is True and by[0].diagnosed is False


def test_summary_has_medians_sorted_fastest_first(tmp_path: Path) -> None:
    runner = ScriptedRunner({
        3: oks(200.0, 210.0, 190.0),  # the search's 300 was a lucky window
        5: oks(260.0, 250.0, 270.0),
        0: oks(90.0, 100.0, 95.0),
    })
    summary = confirm(runner, tmp_path, seed=7, repeats=3, max_repeats=3)
    assert [s.trial for s in summary] == [5, 3, 0]
    by = {s.trial: s for s in summary}
    assert by[5].median == 260.0 and by[5].throughputs == (260.0, 250.0, 270.0)
    assert by[5].spread == pytest.approx(20.0 / 260.0)
    assert by[3].search_throughput == 300.0 and by[3].median is not None
    assert by[0].baseline is True and by[5].baseline is False
    assert by[5].statuses == ("ok",) * 3
    assert len(by[0].throughputs) == 1  # behind everyone after one run


def test_failed_runs_are_left_out_and_not_repeated(tmp_path: Path) -> None:
    oom = TrialResult(status=Status.OOM, reason="out of memory")
    runner = ScriptedRunner({
        3: [oom, oom],  # fits no more (another process holds memory): never ranked first
        5: [ok(260.0), TrialResult(status=Status.TIMEOUT, reason="slow"), ok(255.0)],
        0: oks(90.0, 100.0),
    })
    summary = confirm(runner, tmp_path, repeats=2)
    by = {s.trial: s for s in summary}
    assert runner.count(3) == 1  # no ok run: out of the decision
    assert by[3].median is None and by[3].throughputs == () and by[3].statuses == ("oom",)
    assert by[5].throughputs == (260.0, 255.0) and by[5].statuses == ("ok", "timeout", "ok")
    assert summary[-1].trial == 3
    assert [s.trial for s in summary][:2] == [5, 0]


def test_an_interrupted_run_stops_the_confirmation(tmp_path: Path) -> None:
    runner = ScriptedRunner({n: [TrialResult(status=Status.INTERRUPTED, reason="SIGINT")] * 3
                             for n in (0, 3, 5)})
    seen: list[tuple[int, Status]] = []
    summary = confirm(runner, tmp_path,
                      on_result=lambda c, r: seen.append((c.trial, r.status)))
    assert len(runner.calls) == 1
    assert seen == [(runner.order[0], Status.INTERRUPTED)]
    assert all(s.median is None for s in summary)


def test_on_result_sees_every_run(tmp_path: Path) -> None:
    runner = ScriptedRunner(TIED)
    seen: list[int] = []
    confirm(runner, tmp_path, cands=TIED_CANDS, repeats=2,
            on_result=lambda c, r: seen.append(c.trial))
    assert seen == runner.order and len(seen) == 15  # the default cap: 2 x 2 + 1 runs each


# -- the confirmed winner is the one reported -----------------------------------------------------------


INFO = StudyInfo(adapter="tests/adapters/tiny.py", unit="samples", space="test-space.yaml",
                 device="cpu")


def search_settings(tmp_path: Path, **changes: Any) -> SearchSettings:
    values: dict[str, Any] = {"adapter": Path("tests/adapters/tiny.py"),
                              "space_source": "test-space.yaml", "device": "cpu",
                              "out": tmp_path / "out", "storage": str(tmp_path / "study.db"),
                              "study_name": "test", "confirm": 2, **changes}
    return SearchSettings(**values)


def test_confirmation_overrules_the_search(tmp_path: Path) -> None:
    # The search saw trial 3 fastest; re-measured, trial 5 is faster and the baseline slower.
    ts = [trial(0, 100.0, baseline=True), trial(3, 300.0, batch_size=32),
          trial(4, 150.0, batch_size=4), trial(5, 280.0, batch_size=16)]
    cands = candidates(ts, 2)
    assert [c.trial for c in cands] == [3, 5, 0]
    runner = ScriptedRunner({3: [ok(200.0), ok(210.0)], 5: [ok(260.0), ok(270.0)],
                             0: [ok(80.0), ok(90.0)]})
    summary = confirm(runner, tmp_path, cands=cands, repeats=2, seed=0)

    searched = pick_winner(ts, None)
    assert searched is not None and searched.record.number == 3
    winner = pick_winner(ts, summary)
    assert winner is not None
    assert winner.record.number == 5
    assert winner.throughput == 265.0  # the median of its confirmation runs
    # The baseline re-measured, not its search value: once, as it was clearly behind.
    assert runner.count(0) == 1 and winner.baseline == 80.0
    assert winner.speedup == pytest.approx(265.0 / 80.0)
    assert winner.confirmation == summary
    d = winner.decision
    assert d is not None and d.confidence == "high" and d.verdict == "clear lead"
    assert d.runner_up == 3 and d.runs == 2 and d.runner_up_runs == 2
    assert d.ratio == pytest.approx(265.0 / 205.0)
    assert d.interval == pytest.approx((260.0 / 210.0, 270.0 / 200.0))  # worst vs best, 2 runs
    assert d.baseline_spread == pytest.approx(100.0 / 80.0)  # its fresh run and search rate
    assert d.speedup_confirmed and d.speedup_interval == pytest.approx((2.6, 270.0 / 80.0))

    doc = best_document(winner, INFO, None, search_settings(tmp_path))
    assert doc["config"] == config(batch_size=16)
    assert doc["throughput"] == {"value": 265.0, "unit": "samples/s",
                                 "from": "median of the confirmation runs"}
    assert doc["baseline"] == {"value": 80.0, "unit": "samples/s"}
    assert doc["speedup"] == pytest.approx(265.0 / 80.0, rel=1e-3)
    assert doc["confidence"] == "high"
    assert doc["decision"]["verdict"] == "clear lead" and doc["decision"]["runner_up"] == 3
    assert doc["decision"]["interval"] == [1.238, 1.35] and "warnings" not in doc["decision"]
    assert doc["decision"]["speedup_confirmed"] is True
    # Fastest over slowest, under a name of its own: "spread" elsewhere is a fraction.
    assert doc["decision"]["runs_apart"] == pytest.approx(270.0 / 260.0, rel=1e-3)
    assert doc["decision"]["baseline_runs_apart"] == 1.25 and "spread" not in doc["decision"]
    assert doc["measurement"]["trial"] == 5
    assert [c["trial"] for c in doc["confirmation"]] == [5, 3, 0]
    first = doc["confirmation"][0]
    assert sorted(first["runs"]) == [260.0, 270.0]
    assert first["median"] == 265.0 and first["search"] == 280.0 and first["baseline"] is False
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc  # best.yaml is plain YAML


def test_without_confirmation_best_document_says_the_search(tmp_path: Path) -> None:
    ts = [trial(0, 100.0, baseline=True), trial(3, 300.0, batch_size=32)]
    winner = pick_winner(ts, None)
    assert winner is not None and winner.record.number == 3
    doc = best_document(winner, INFO, None, search_settings(tmp_path))
    assert doc["throughput"]["from"] == "the search trial's median window"
    assert doc["throughput"]["value"] == 300.0
    assert doc["confirmation"] is None


def test_confirmation_where_every_run_failed_falls_back_to_the_search() -> None:
    ts = [trial(0, 100.0, baseline=True), trial(3, 300.0, batch_size=32)]
    confirmation = [ConfirmationEntry(trial=3, baseline=False, median=None, throughputs=(),
                                      search_throughput=300.0, spread=None, statuses=("oom",))]
    winner = pick_winner(ts, confirmation)
    assert winner is not None
    assert winner.record.number == 3 and winner.throughput == 300.0
    assert winner.confirmation is None


# -- one real study, confirmed ----------------------------------------------------------------------------


class Tiny(Adapter):
    """What Search reads of tests/adapters/tiny.py's adapter class."""

    batch_size = 8


@pytest.mark.slow  # a real search: trials and confirmation runs measured in this process
def test_search_confirms_its_leaders(tmp_path: Path, tiny_adapter: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    raw = {"batch_size": {"factors": [1, 2, 4]}, "amp_dtype": {"choices": ["fp32", "bf16"]}}
    space = parse_space(raw, source="test-space.yaml", adapter=Tiny, device_type="cpu", cpus=2)
    # Not pruned, and no config left out as far behind: on a busy CPU the tiny step's readings
    # swing 10x (bf16 read 202 and 2,494 against a baseline of 584-2,216 here), and a recipe
    # stopped in warm-up, or bf16 read under BEHIND of the baseline (CI and a clean clone, 2026-11-29),
    # leaves the baseline alone, and nothing to confirm. Both filters have their own tests.
    monkeypatch.setattr(candidate_module, "BEHIND", 0.0)
    settings = search_settings(tmp_path, adapter=tiny_adapter, trials=3, seed=0, measure=QUICK,
                               confirm=2, confirm_repeats=2, prune=False)
    confirmed: list[tuple[int, Status]] = []

    class Listener(QuietListener):
        def confirm_result(self, c: Candidate, result: TrialResult) -> None:
            confirmed.append((c.trial, result.status))

    winner = Search(settings, space, Tiny, runner=InProcessRunner(), listener=Listener(),
           on_change=lambda study: write_outputs(study, settings, plot=False)).run()

    study = optuna.load_study(study_name="test", storage=f"sqlite:///{tmp_path / 'study.db'}")
    confirmation = read_confirmation(study)
    assert confirmation is not None
    assert 2 <= len(confirmation) <= 3
    assert sum(c.baseline for c in confirmation) == 1
    for c in confirmation:  # adaptive: one run for a config behind, up to 2 x 2 + 1
        assert set(c.statuses) == {"ok"} and 1 <= len(c.statuses) <= 5, c
        assert len(c.throughputs) == len(c.statuses) and c.median is not None and c.median > 0
    medians = [c.median for c in confirmation]
    assert medians == sorted(medians, reverse=True)
    runs = sum(len(c.statuses) for c in confirmation)
    assert len(confirmed) == runs
    assert len(list((tmp_path / "out" / "confirm").iterdir())) == runs

    assert winner is not None and winner.confirmation == confirmation
    assert winner.decision is not None
    assert winner.record.number in (confirmation[0].trial, *winner.decision.tied)
    by_number = {r.number: r for r in read_records(study)}
    assert {c.trial for c in confirmation if c.baseline} == {0}
    assert by_number[0].baseline
    # Each run is a trial of the study, and the winner's record is its best trial.
    roles = [r.role for r in read_records(study)]
    assert roles.count("confirm") == runs and roles.count("winner") == 1
    assert study.best_trial.number == winner.study_trial
    assert study.best_trial.user_attrs["config"] == winner.record.config.to_dict()
    best = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text())
    assert best["throughput"]["from"] == "median of the confirmation runs"
    assert best["throughput"]["value"] == pytest.approx(winner.throughput, rel=1e-3)
    assert best["study"]["best_trial"] == study.best_trial.number
    assert best["study"]["value"] == study.best_value
    assert best["confidence"] in ("high", "low")
    assert [c["trial"] for c in best["confirmation"]] == [c.trial for c in confirmation]
    tuned = load_config(tmp_path / "out" / "best.yaml")
    assert tuned.config == winner.record.config
    assert tuned.device == "cpu"


class NoisySteps(Adapter):
    """What Search reads of tests/adapters/noisy_steps.py's adapter class."""

    batch_size = 8
    vary_global_batch = True


@pytest.mark.slow  # a real search: up to 13 runs of 1 s measured in this process
@pytest.mark.parametrize("noisy", [False, True])
def test_confidence_follows_the_runs_agreement(tmp_path: Path, test_adapters: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               noisy: bool) -> None:
    # Batch 16 is twice batch 8's rate. Stable runs show it plainly: high confidence. Runs
    # inflated 4x every other time contradict each other: low confidence, and a warning.
    if noisy:
        monkeypatch.setenv("AUTOTUNE_TEST_NOISE_DIR", str(tmp_path))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = parse_space({"batch_size": {"factors": [1, 2]}}, source="test-space.yaml",
                        adapter=NoisySteps, device_type="cpu", cpus=2)
    measure = MeasureSettings(window_seconds=0.1, budget_seconds=1.0, max_windows=6)
    settings = search_settings(tmp_path, adapter=test_adapters / "noisy_steps.py", trials=3,
                               seed=0, measure=measure, confirm=2, confirm_repeats=2,
                               prune=False)
    winner = Search(settings, space, NoisySteps, runner=InProcessRunner(),
                    listener=QuietListener(),
                    on_change=lambda study: write_outputs(study, settings, plot=False)).run()
    study = optuna.load_study(study_name="test", storage=f"sqlite:///{tmp_path / 'study.db'}")
    seen = [(r.number, r.role, r.config and r.config.batch_size, r.status, r.value)
            for r in read_records(study)]
    assert winner is not None and winner.confirmation is not None, seen
    assert len(winner.confirmation) == 2, seen  # the baseline and batch 16
    best = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text())
    if noisy:
        assert best["confidence"] == "low"
        assert any("runs disagree by" in w for w in best["decision"]["warnings"])
        assert all(len(c["runs"]) == 5 for c in best["confirmation"])  # to the cap: never clear
        assert "confirmed" not in (best["decision"]["note"] or "").replace("not confirmed", "")
    else:
        assert best["confidence"] == "high", best["decision"]
        assert best["decision"]["verdict"] == "clear lead"
        assert best["config"]["batch_size"] == 16
        assert best["decision"]["speedup_confirmed"] is True
        assert sum(len(c["runs"]) for c in best["confirmation"]) == 3  # the baseline ran once


def test_a_ctrl_c_during_the_confirmation_keeps_the_fresh_runs_that_ended(
        tmp_path: Path) -> None:
    # They were dropped: trials.csv showed no fresh run, though two had ended (found on the
    # 2-CPU VM, 2026-11-28). Kept as trials; no summary, so a resumed search confirms again.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    raw = {"batch_size": {"factors": [0.5, 1, 2]}}
    space = parse_space(raw, source="test-space.yaml", adapter=NoisySteps, device_type="cpu",
                        cpus=2)
    settings = search_settings(tmp_path, trials=3, seed=0, measure=QUICK, confirm=2)
    fresh: list[int] = []

    class CtrlC(FakeRunner):
        def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
                on_event: Any = None) -> TrialResult:
            if "confirm" not in trial_dir.parts:
                return super().run(request, trial_dir, timeout=timeout, on_event=on_event)
            fresh.append(1)
            if len(fresh) < 3:
                return ok(100.0 * len(fresh))
            search._on_signal(signal.SIGINT)
            return TrialResult(status=Status.INTERRUPTED, reason="stopped by SIGINT")

    search = Search(settings, space, NoisySteps, runner=CtrlC(), listener=QuietListener(),
                    on_change=lambda study: write_outputs(study, settings, plot=False))
    with pytest.raises(Interrupted):
        search.run()
    kept = [r for r in read_records(search.study) if r.role == "confirm"]
    assert sorted(r.result.throughput for r in kept) == [100.0, 200.0]  # not the interrupted
    assert read_confirmation(search.study) is None
    assert not any(r.role == "winner" for r in read_records(search.study))
    rows = csv_rows(tmp_path / "out" / "trials.csv")
    assert len([r for r in rows if r["role"] == "confirm"]) == 2


def test_a_resumed_study_is_not_confused_by_its_confirmation_trials(tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    raw = {"batch_size": {"factors": [0.5, 1, 2, 4]}, "amp_dtype": {"choices": ["fp32", "bf16"]}}
    space = parse_space(raw, source="test-space.yaml", adapter=NoisySteps, device_type="cpu",
                        cpus=2)

    def run(trials: int) -> tuple[Search, Any]:
        settings = search_settings(tmp_path, trials=trials, seed=0, measure=QUICK, confirm=2)
        s = Search(settings, space, NoisySteps, runner=FakeRunner(), listener=QuietListener(),
                   on_change=lambda study: write_outputs(study, settings, plot=False))
        return s, s.run()

    first, _ = run(3)
    before = read_records(first.study)
    assert [r.role for r in before].count("winner") == 1
    second, winner = run(5)
    recs = read_records(second.study)
    # --trials counts the search's trials only; the confirmation's are extra.
    assert second.done() == 5 == len([r for r in recs if r.search and r.state.is_finished()])
    assert len([r for r in recs if not r.search]) > len([r for r in before if not r.search])
    # The confirmation re-ran search trials, never an earlier confirmation run or winner.
    confirmed = read_confirmation(second.study) or []
    assert {c.trial for c in confirmed} <= {r.number for r in recs if r.search}
    assert winner is not None and winner.study_trial is not None
    assert winner.study_trial == max(r.number for r in recs if r.role == "winner")
    assert second.study.best_trial.number == winner.study_trial
    rows = csv_rows(tmp_path / "out" / "trials.csv")
    assert [r["number"] for r in rows if r["winner"] == "True"] == [str(winner.study_trial)]


def test_the_cap_may_not_be_below_the_repeats(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="confirm_repeats <= confirm_max_repeats"):
        search_settings(tmp_path, confirm_repeats=3, confirm_max_repeats=2)
    assert search_settings(tmp_path, confirm_repeats=3, confirm_max_repeats=3).confirm_max_repeats == 3


def test_every_round_under_a_deadline_runs_the_leader_first(tmp_path: Path) -> None:
    # Three 140-s quick starts on a 2-CPU VM (2026-11-26): round 2 ran the contender first,
    # the deadline came before the leader's second run, and one fresh run of the winner cannot
    # make confidence high. Whatever the shuffle, round 2 starts with the leader.
    for seed in range(8):
        runner = ScriptedRunner({3: oks(300.0, 305.0), 5: oks(290.0, 296.0), 0: oks(100.0)})
        cands = [cand(5, 310.0), cand(3, 300.0), cand(0, 100.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=defaultdict(lambda: 30.0),
                           deadline=125.0, seed=seed)
        assert runner.order[0] == 5  # the search's leader first
        assert runner.order[3] == 3  # then the fresh runs' leader: 300 beat 290
        assert len(runner.order) == 4


def test_under_a_deadline_the_baseline_runs_right_after_the_leader_until_it_has_run(
        tmp_path: Path) -> None:
    # A held-out 120-s search (2-CPU VM, 2026-11-28): the leader's fresh run took the time
    # left, the baseline got none, and the speedup was told against its search trial alone.
    for seed in range(8):
        runner = ScriptedRunner({5: oks(300.0, 305.0, 302.0, 301.0, 303.0),
                                 3: oks(290.0, 291.0, 292.0, 289.0, 290.0),
                                 4: oks(280.0, 281.0, 279.0, 280.0, 282.0),
                                 0: oks(100.0, 101.0, 99.0, 100.0, 100.0)})
        cands = [cand(5, 310.0), cand(3, 300.0), cand(4, 295.0), cand(0, 100.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=defaultdict(lambda: 30.0),
                           deadline=1000.0, seed=seed)
        assert runner.order[:2] == [5, 0]


def test_once_the_leader_has_its_runs_a_config_not_yet_run_goes_first(tmp_path: Path) -> None:
    # A held-out MobileNetV3 search (H200, 2026-11-28), its seconds: the leader's fresh runs
    # took 55 and 44 s, then a third 39 s, while its near twins, 3.87k and 3.74k in the search
    # (the leader 4.0k), never ran and the verdict was "too few runs". Once the leader has its
    # two runs, a third is owed nothing: the fastest twin not yet run goes first.
    def took(seconds: float, *rates: float) -> list[TrialResult]:
        return [r.replace(duration_seconds=seconds) for r in oks(*rates)]

    for seed in range(6):
        runner = ScriptedRunner({
            9: [r.replace(duration_seconds=d) for r, d in
                zip(oks(3770.0, 3480.0, 3850.0), (55.5, 44.3, 38.9))],
            8: took(33.0, 3800.0, 3790.0), 10: took(33.0, 3700.0), 0: took(19.5, 630.0)})
        cands = [cand(9, 4000.0, duration=16.1), cand(8, 3870.0, duration=16.6),
                 cand(10, 3740.0, duration=15.0), cand(0, 711.0, baseline=True, duration=25.1)]
        timed_confirmation(tmp_path, cands, runner, lengths=None, deadline=185.0, seed=seed)
        assert runner.order == [9, 0, 9, 8], runner.order


def test_once_the_leader_has_its_runs_a_tied_config_run_less_goes_first(tmp_path: Path) -> None:
    # The quick start (2-CPU VM, 2026-11-28) ran its leader four times and the config tied with
    # it once. Once the leader has its two runs, the round runs the tied config first: the time
    # left (one run here) goes to it, not to the leader's third.
    for seed in range(4):
        runner = ScriptedRunner({2: oks(5430.0, 5680.0, 5560.0), 5: oks(5500.0, 5600.0, 5450.0),
                                 0: oks(3100.0)})
        cands = [cand(2, 5540.0), cand(5, 5490.0), cand(0, 3180.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=defaultdict(lambda: 10.0),
                           deadline=61.0, seed=seed)
        assert runner.order[:2] == [2, 0] and runner.order[-1] == 5, runner.order
        assert runner.count(5) == 3 and runner.count(2) == 2, runner.order


def test_a_baseline_whose_runs_disagree_runs_again_while_time_is_left(tmp_path: Path) -> None:
    # A held-out search on a loaded 2-CPU VM (2026-11-28): its baseline read 5.03k in the search
    # and 467 in its one fresh run, the winner was called 40x, and 40 s of the budget were left.
    for seed in range(4):
        runner = ScriptedRunner({7: oks(18706.0, 18684.0), 0: oks(467.0, 4980.0, 5010.0)})
        cands = [cand(7, 19127.0), cand(0, 5030.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=defaultdict(lambda: 10.0),
                           deadline=150.0, seed=seed)
        # Three runs, a median the outlier cannot set: 4.98k.
        assert runner.count(0) == 3 and runner.count(7) == 2, runner.order
    # Runs that agree, or a deadline that leaves no room: once.
    agree = ScriptedRunner({7: oks(18706.0, 18684.0), 0: oks(4990.0, 5000.0)})
    timed_confirmation(tmp_path, [cand(7, 19127.0), cand(0, 5030.0, baseline=True)], agree,
                       lengths=defaultdict(lambda: 10.0), deadline=150.0, seed=9)
    assert agree.count(0) == 1
    short = ScriptedRunner({7: oks(18706.0, 18684.0), 0: oks(467.0, 4980.0)})
    timed_confirmation(tmp_path, [cand(7, 19127.0), cand(0, 5030.0, baseline=True)], short,
                       lengths=defaultdict(lambda: 10.0), deadline=35.0, seed=9)
    assert short.count(0) == 1


def test_a_config_far_behind_gives_way_to_the_leaders_second_run(tmp_path: Path) -> None:
    # The quick start on a 2-CPU VM (2026-11-26): forked search trials of 3-6 s planned the
    # confirmation, its fresh runs took 11 s each, and a config the search read at 0.69x the
    # leader ran in the 47 s left while the leader's second run did not fit.
    for seed in range(6):
        rates = {2: oks(8280.0, 8350.0), 3: oks(8100.0), 1: oks(5800.0), 0: oks(5300.0)}
        runner = ScriptedRunner({n: [r.replace(duration_seconds=11.0) for r in rs]
                                 for n, rs in rates.items()})
        cands = [cand(2, 8210.0), cand(3, 8000.0), cand(1, 5640.0),
                 cand(0, 5240.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=defaultdict(lambda: 11.0),
                           deadline=47.0, seed=seed)
        assert runner.count(2) == 2 and runner.count(0) == 1, runner.order
        assert runner.count(1) == 0  # the slowest by the search gave way


def test_the_steady_config_runs_once_before_it_may_give_way(tmp_path: Path) -> None:
    # The slowest by the search, it gave way first in every round, and the unsettled leader
    # whose search read it stood in for ran twice instead (found in review, 2026-11-26).
    for seed in range(6):
        rates = {9: oks(46_000.0, 47_000.0), 13: oks(59_000.0), 0: oks(21_000.0)}
        runner = ScriptedRunner({n: [r.replace(duration_seconds=11.0) for r in rs]
                                 for n, rs in rates.items()})
        cands = [cand(9, 67_300.0), dataclasses.replace(cand(13, 58_600.0), steady=True),
                 cand(0, 21_000.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=defaultdict(lambda: 11.0),
                           deadline=35.0, seed=seed)
        assert runner.count(13) == 1, runner.order


def test_runs_are_costed_at_their_own_length_and_the_nearest_contender_is_not_crowded_out(
        tmp_path: Path) -> None:
    # A compiled leader's fresh runs take 40 s, the eager configs' 10 s: sized at the
    # leader's length, the eager contender nearest the leader gave way while a slower one ran
    # (found in review). Each now costs its own: all fit, and the leader runs twice. (The
    # leader's runs compile for 30 s of their 40: what an eager run pays is the other 10.)
    for seed in range(6):
        lengths = {5: 40.0, 3: 10.0, 4: 10.0, 6: 10.0, 0: 10.0}
        rates = {5: oks(300.0, 305.0), 3: oks(280.0), 4: oks(250.0), 6: oks(240.0),
                 0: oks(200.0)}
        runner = ScriptedRunner({n: [r.replace(duration_seconds=lengths[n],
                                               compile_seconds=30.0 if n == 5 else None)
                                     for r in rs]
                                 for n, rs in rates.items()})
        cands = [cand(5, 300.0, duration=40.0, compile="default"), cand(3, 290.0),
                 cand(4, 250.0), cand(6, 240.0), cand(0, 200.0, baseline=True)]
        timed_confirmation(tmp_path, cands, runner, lengths=lengths,
                           deadline=140.0, seed=seed)
        assert runner.count(5) == 2 and runner.count(3) == 1 and runner.count(0) == 1, \
            runner.order


def test_configs_not_yet_run_cost_at_least_what_every_fresh_run_pays(tmp_path: Path) -> None:
    # The quick start on a 2-CPU VM (2026-11-26 11:13): the leader's search trial ran 6.9 s
    # (not converged), the others' 5.5-6.0 s; every fresh run took 11.6-13.2 s. Scaled by the
    # leader's 12.75 / 6.9, the others looked like 10-11 s runs, all four first runs were
    # started, and the leader's second run missed the deadline by a second. Costed at no
    # less than the leader's fresh run, the slowest by the search gives way.
    lengths = {2: 12.75, 0: 11.6, 3: 13.2, 4: 12.5}
    for seed in range(6):
        rates = {2: oks(8120.0, 8050.0), 4: oks(7820.0), 3: oks(7450.0), 0: oks(5120.0)}
        runner = ScriptedRunner({n: [r.replace(duration_seconds=lengths[n]) for r in rs]
                                 for n, rs in rates.items()})
        cands = [cand(2, 7930.0, duration=6.9), cand(4, 7420.0, duration=5.7),
                 cand(3, 7410.0, duration=5.5), cand(0, 5140.0, baseline=True, duration=6.0)]
        timed_confirmation(tmp_path, cands, runner, lengths=lengths,
                           deadline=61.7, seed=seed)
        assert runner.count(2) == 2 and runner.count(0) == 1, runner.order
        assert runner.count(3) == 0, runner.order  # the slowest by the search gave way


def test_a_compiled_candidate_may_run_as_long_as_its_trial_did_past_the_trial_limit(
        tmp_path: Path) -> None:
    # Its search trial compiled 126 s of 175 under a 144-s limit that counted compile apart;
    # its fresh run, cut at 144 s while still compiling, made the baseline the winner (a
    # Llama-style transformers LM padded per batch, H100, 2026-11-26).
    compiled = cand(6, 77.8e3, duration=175.0, compile="default")
    runner = ScriptedRunner({6: oks(75.0e3, 76.0e3), 0: oks(30.0e3, 30.5e3)})
    run_confirmation([compiled, cand(0, 30.1e3, baseline=True, duration=24.0)],
                     adapter=Path("adapter.py"), device="cpu", runner=runner, out=tmp_path,
                     repeats=2, trial_timeout=144.0, measure=QUICK, seed=1, max_repeats=2)
    assert {timeout for n, _, timeout, _ in runner.calls if n == 6} == {175.0 + 60}
    assert {timeout for n, _, timeout, _ in runner.calls if n == 0} == {2 * 24.0 + 60}


def test_when_every_kept_config_fails_its_fresh_runs_those_left_out_get_the_time_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same search: its two eager runners-up (2.08x, 2.00x the baseline) had been left out
    # to give the compiled leader two runs; the leader's run failed and the baseline, run
    # twice, was the winner at 1.00x.
    from autotune.study.confirmation import phase as phase_module

    recorded: list[list[ConfirmationEntry]] = []
    monkeypatch.setattr(phase_module, "record_confirmation",
                        lambda study, summary, runs: recorded.append(summary))
    leader = cand(6, 77.8e3, duration=175.0, compile="default")
    base = cand(0, 30.1e3, baseline=True, duration=24.0)
    fused, tf32 = cand(5, 62.8e3, batch_size=16), cand(2, 60.1e3, batch_size=32)
    runner = ScriptedRunner({6: [TrialResult(status=Status.TIMEOUT, reason="cut")],
                             0: oks(30.7e3, 30.1e3), 5: oks(62.0e3, 61.6e3),
                             2: oks(60.5e3, 59.9e3)})
    confirm_phase = confirm_phase_of(tmp_path, runner, max_repeats=2, trial_timeout=144.0,
                                     listener=QuietListener(), clock=lambda: 0.0)
    assert confirm_phase._rounds([leader, base], None, [fused, tf32])
    (summary,) = recorded
    medians = {e.trial: e.median for e in summary}
    assert medians[6] is None and medians[5] == pytest.approx(61.8e3)
    assert 5 in runner.order and runner.order.index(5) > runner.order.index(6)
    # Folders go on numbering after the first rounds' runs.
    folders = [d.name for _, d, _, _ in runner.calls]
    assert len(set(folders)) == len(folders)


def test_a_kept_config_that_gave_way_to_the_leader_is_no_failure_to_run_others_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A held-out token-budget loader (2-CPU VM, 2026-11-27): the kept contender gave way so the
    # baseline, the search's leader, could run twice; having no median, it read as a kept config
    # that failed, and a config left out, slower by the search than the one that gave way, took
    # the time left.
    from autotune.study.confirmation import phase as phase_module

    recorded: list[list[ConfirmationEntry]] = []
    monkeypatch.setattr(phase_module, "record_confirmation",
                        lambda study, summary, runs: recorded.append(summary))
    base = cand(0, 13.2e3, baseline=True, duration=10.0)
    contender = cand(3, 11.0e3, batch_size=16, duration=14.0)
    left_out = cand(1, 10.5e3, batch_size=32)
    fresh = [TrialResult(status=Status.OK, throughput=v, duration_seconds=10.0)
             for v in (12.3e3, 12.7e3)]
    runner = ScriptedRunner({0: [*fresh, *fresh], 3: oks(12.0e3), 1: oks(12.0e3)})
    now = [0.0]

    class Clocked(QuietListener):
        def confirm_result(self, c: Any, result: TrialResult) -> None:
            now[0] += 10.0

    confirm_phase = confirm_phase_of(tmp_path, runner, max_repeats=None, trial_timeout=144.0,
                                     listener=Clocked(), clock=lambda: now[0])
    # After the baseline's first run, 22 s left, its second and the contender's need 24: the
    # contender gives way. After the second, 12 s left: enough to start one more run.
    assert confirm_phase._rounds([base, contender], 32.0, [left_out])
    assert runner.order == [0, 0]
    (summary,) = recorded
    assert {e.trial: e.statuses for e in summary} == {0: ("ok", "ok"), 3: (), 1: ()}


def test_a_resumed_confirmation_numbers_its_folders_after_the_earlier_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A Ctrl-C'd search, resumed (2-CPU VM, 2026-11-28): its confirm/ held 00-trial0,
    # 01-trial0 and 01-trial8, the second confirmation numbering from 0 again.
    from autotune.study.confirmation import phase as phase_module

    monkeypatch.setattr(phase_module, "record_confirmation", lambda study, summary, runs: None)
    for name in ("00-trial0", "01-trial8"):
        (tmp_path / "confirm" / name).mkdir(parents=True)
    runner = ScriptedRunner({8: oks(2.1e3, 2.0e3), 0: oks(1.0e3, 1.0e3)})
    confirm_phase = confirm_phase_of(tmp_path, runner, max_repeats=2, trial_timeout=60.0,
                                     listener=QuietListener(), clock=lambda: 0.0)
    assert confirm_phase._rounds([cand(8, 2.1e3), cand(0, 1.0e3, baseline=True)], None)
    folders = sorted(d.name for _, d, _, _ in runner.calls)
    assert folders and all(int(name[:2]) >= 2 for name in folders)
