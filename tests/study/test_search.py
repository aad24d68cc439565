"""The search loop in this process: a scripted fake runner for the logic, the in-process twin for
one real study. No trial subprocess is started here (the CLI tests do that)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers import FakeClock, FakeRunner, Script, csv_rows, ok_by_batch_size
from optuna.trial import TrialState

from autotune import (Adapter, Diagnosis, InputError, MeasureSettings, Status, TrainConfig,
                      TrialResult, Verdict, load_config)
from autotune.contract.errors import ContractError
from autotune.contract.phases import PHASES
from autotune.contract.request import TrialRequest
from autotune.outputs.display import QuietListener
from autotune.outputs.report import write_outputs
from autotune.study.execution.runner import InProcessRunner
from autotune.study.parallel import CONVERGED_REPEATS
from autotune.study.policy.starts import EXPLORE
from autotune.study.search import Interrupted, Search, SearchSettings
from autotune.study.space.file import SearchSpace, parse_space
from autotune.study.store.records import TrialRecord, read_records

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)

# Spaces with no compile knob: the hand recipe (bf16 + compile) is not in them, so trial 0 (the
# baseline) is the only enqueued trial.
ONE_CONFIG = {"batch_size": {"factors": [1]}}
SMALL = {"batch_size": {"factors": [1, 2, 4]}, "amp_dtype": {"choices": ["fp32", "bf16"]}}
LARGE = {
    "num_workers": {"low": 0, "high": 8},
    "batch_size": {"factors": [0.5, 1, 2, 4, 8]},
    "grad_accum": {"choices": [1, 2, 4]},
    "amp_dtype": {"choices": ["fp32", "bf16"]},
}


class Tiny(Adapter):
    """The class `load_adapter` returns for tests/adapters/tiny.py, as far as Search looks,
    letting the search change the effective batch (these tests climb to larger batches)."""

    batch_size = 8
    vary_global_batch = True


class Tokens(Adapter):
    unit = "tokens"
    batch_size = 8


def space_of(raw: dict[str, Any], adapter: type[Adapter] = Tiny) -> SearchSpace:
    return parse_space(raw, source="test-space.yaml", adapter=adapter, device_type="cpu", cpus=8)


def settings(tmp_path: Path, *, trials: int, adapter: Path | None = None, **changes: Any) -> SearchSettings:
    values: dict[str, Any] = {
        "adapter": adapter or Path("tests/adapters/tiny.py"),
        "space_source": "test-space.yaml",
        "device": "cpu",
        "out": tmp_path / "out",
        "storage": str(tmp_path / "study.db"),
        "study_name": "test",
        "trials": trials,
        "seed": 0,
        "measure": QUICK,
        "confirm": 0,
        **changes,
    }
    return SearchSettings(**values)


def search(
    tmp_path: Path, raw: dict[str, Any], *, trials: int, runner: Any = None,
    listener: Any = None, adapter_cls: type[Adapter] = Tiny, plot: bool = False, **changes: Any,
) -> Search:
    study_settings = settings(tmp_path, trials=trials, **changes)
    return Search(
        study_settings, space_of(raw, adapter_cls), adapter_cls,
        runner=runner or FakeRunner(), listener=listener or QuietListener(),
        # The plot (a second to draw) only where a test looks at it: drawn after every trial,
        # it was most of these tests' time.
        on_change=lambda study: write_outputs(study, study_settings, plot=plot),
    )


def study_of(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name="test", storage=f"sqlite:///{tmp_path / 'study.db'}")


def records_of(tmp_path: Path) -> list[TrialRecord]:
    """The stored trials that started, read as autotune reads them (a guided search may leave
    follow-ups enqueued, WAITING for the next run)."""
    return [r for r in read_records(study_of(tmp_path)) if r.state != TrialState.WAITING]


def constraints_of(tmp_path: Path) -> dict[int, Any]:
    """What the sampler was told about each trial's feasibility (Optuna's own field)."""
    return {t.number: t.constraints for t in study_of(tmp_path).get_trials()}


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- a real study in this process ---------------------------------------------------------------------


def test_in_process_search_baseline_first(tmp_path: Path, tiny_adapter: Path) -> None:
    s = search(tmp_path, SMALL, trials=3, runner=InProcessRunner(), adapter=tiny_adapter)
    winner = s.run()

    trials = records_of(tmp_path)
    assert len(trials) == 3
    waiting = [r for r in read_records(study_of(tmp_path)) if r.state == TrialState.WAITING]
    assert all(r.role.startswith("follow") and r.config is None for r in waiting), waiting
    base = trials[0]
    assert base.number == 0
    assert base.baseline and base.role == "baseline"
    assert study_of(tmp_path).trials[0].user_attrs["baseline"] is True  # for optuna-dashboard
    assert base.config == TrainConfig(batch_size=Tiny.batch_size)
    assert base.status is Status.OK
    assert [t.number for t in trials if t.baseline] == [0]
    constraints = constraints_of(tmp_path)
    for t in trials:
        assert t.state == TrialState.COMPLETE
        assert t.result is not None
        assert t.result.status is Status.OK, t.result.reason
        assert constraints[t.number] == {"usable": 0.0}
        assert t.value == t.result.throughput > 0
        assert t.owner is not None and t.owner["pid"] == os.getpid()
        # Diagnosed when near the best so far (the baseline always): the ladder follows it.
        diagnosed = t.result.diagnosis is not None
        assert set(PHASES) - {"diagnosis"} <= set(t.result.phases)
        assert ("diagnosis" in t.result.phases) == diagnosed
    assert trials[0].result.diagnosis is not None
    out = tmp_path / "out"
    assert winner is not None
    tuned = load_config(out / "best.yaml")
    assert tuned.config == winner.record.config and tuned.device == "cpu"
    assert len(csv_rows(out / "trials.csv")) == 3
    assert (out / "trials" / "0" / "result.json").is_file()


# -- the loop's logic, with a scripted runner ------------------------------------------------------------


def test_baseline_config_is_the_adapters_batch_with_pytorch_defaults(tmp_path: Path) -> None:
    runner = FakeRunner()
    search(tmp_path, LARGE, trials=1, runner=runner).run()
    assert runner.requests[0].config == TrainConfig(batch_size=8)
    assert runner.requests[0].number == 0


class CountingInProcessRunner(InProcessRunner):
    def __init__(self) -> None:
        self.numbers: list[int] = []

    def run(self, request: TrialRequest, trial_dir: Path, **kwargs: Any) -> TrialResult:
        self.numbers.append(request.number)
        return super().run(request, trial_dir, **kwargs)


def test_duplicates_are_not_re_run(tmp_path: Path, tiny_adapter: Path) -> None:
    runner = CountingInProcessRunner()
    search(tmp_path, ONE_CONFIG, trials=3, runner=runner, adapter=tiny_adapter).run()
    assert runner.numbers == [0]  # one config in the space: measured once
    trials = records_of(tmp_path)
    assert len(trials) == 3
    assert trials[0].status is Status.OK
    assert [t.duplicate_of for t in trials] == [None, 0, 0]
    for t in trials[1:]:
        assert t.state == TrialState.COMPLETE
        assert t.result == trials[0].result
        assert t.value == trials[0].value
    assert not (tmp_path / "out" / "trials" / "1").exists()
    rows = csv_rows(tmp_path / "out" / "trials.csv")
    assert "not re-run" in rows[1]["reason"]


def test_a_reading_taken_beside_other_work_is_measured_again_once_before_it_is_copied(
        tmp_path: Path) -> None:
    # A held-out user's bf16 recipe read 1.44k tokens/s while other processes held 0.9 of the
    # 2 CPUs (51.1k in a quiet run) and two later proposals copied it (2026-11-28).
    from autotune.contract.noise import Noise

    busy = Noise(seconds=4.0, cpus=2, other_cpu_seconds=6.0)

    def disturbed(i: int, request: TrialRequest) -> TrialResult:
        return TrialResult(status=Status.OK, throughput=100.0 * (i + 1), converged=False,
                           noise=busy)

    runner = FakeRunner(disturbed)
    search(tmp_path, ONE_CONFIG, trials=4, runner=runner, confirm=0).run()
    assert len(runner.requests) == 2  # measured again once, then copied: the faster reading
    assert [t.duplicate_of for t in records_of(tmp_path)] == [None, None, 1, 1]
    quiet = FakeRunner()
    (tmp_path / "q").mkdir()
    search(tmp_path / "q", ONE_CONFIG, trials=3, runner=quiet, confirm=0).run()
    assert len(quiet.requests) == 1  # a quiet reading is copied at once


def test_a_spent_space_ends_the_search_instead_of_filling_the_budget_with_copies(
        tmp_path: Path) -> None:
    runner = FakeRunner()
    s = search(tmp_path, ONE_CONFIG, trials=1_000_000, runner=runner, timeout=3600.0, confirm=0)
    s.run()
    assert len(runner.requests) == 1  # the one config, measured once
    trials = records_of(tmp_path)
    # The baseline, then CONVERGED_REPEATS copies in a row: the sampler has nothing new.
    assert len(trials) == 1 + CONVERGED_REPEATS
    assert all(t.duplicate_of == 0 for t in trials[1:])


def test_after_a_copy_a_config_not_measured_yet_is_explored(tmp_path: Path) -> None:
    runner = FakeRunner()
    space = space_of(SMALL, Tiny)
    s = search(tmp_path, SMALL, trials=1_000_000, runner=runner, timeout=3600.0, confirm=0,
               seed=3)
    s.run()
    measured = [r.config for r in runner.requests]
    assert len(measured) == len(set(measured))  # each config run once
    # The whole (small) space got measured, not a budget of copies of the sampler's favourite.
    assert set(measured) == set(space.enumerate())
    roles = [r.role for r in records_of(tmp_path)]
    assert any(role.startswith(EXPLORE) for role in roles)


def loader_bound(call: int, request: Any) -> TrialResult:
    """Every config waits for its loader, whose rate grows with the batch; compile buys nothing."""
    rate = 100.0 * request.config.batch_size
    return TrialResult(status=Status.OK, throughput=rate, duration_seconds=1.0,
                       diagnosis=Diagnosis(verdict=Verdict.INPUT, suggestion="", throughput=rate,
                                           loader_rate=rate, compute_rate=10 * rate,
                                           data_wait_fraction=0.8, gpu_busy_fraction=None))


def test_while_the_best_is_input_bound_exploration_compiles_nothing(tmp_path: Path) -> None:
    # The quick start spent 18 s of its 140 compiling a random config at 5.0k images/s while
    # the best, input-bound, ran 8.1k (2026-11-26).
    raw = {**SMALL, "compile": {"choices": ["none", "default"]}}
    s = search(tmp_path, raw, trials=40, runner=FakeRunner(loader_bound), timeout=3600.0,
               confirm=0, seed=3)
    s.run()
    explored = [r.config for r in records_of(tmp_path) if r.role.startswith(EXPLORE)]
    assert explored and all(c.compile == "none" for c in explored)


class RecordingListener(QuietListener):
    """Looks at the output folder each time a trial finishes."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: list[tuple[int, int, bool]] = []

    def trial_finished(self, number: int, *args: Any) -> None:
        rows = csv_rows(self.out / "trials.csv")
        self.seen.append((number, len(rows), (self.out / "best.yaml").is_file()))


def test_outputs_are_written_after_each_trial(tmp_path: Path) -> None:
    listener = RecordingListener(tmp_path / "out")
    search(tmp_path, LARGE, trials=3, listener=listener, plot=True).run()
    assert listener.seen == [(0, 1, True), (1, 2, True), (2, 3, True)]
    assert (tmp_path / "out" / "throughput.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_no_plot_is_drawn_while_no_trial_ran_ok(tmp_path: Path) -> None:
    # A chart of nothing but failures was written beside "no trial ran ok".
    runner = FakeRunner(lambda call, request: TrialResult(status=Status.OOM, reason="oom"))
    search(tmp_path, LARGE, trials=2, runner=runner, plot=True).run()
    assert (tmp_path / "out" / "trials.csv").is_file()
    assert not (tmp_path / "out" / "throughput.png").exists()


def test_failed_outcomes_are_complete_but_infeasible(tmp_path: Path) -> None:
    failures = [Status.OOM, Status.NAN, Status.ERROR, Status.TIMEOUT, Status.CRASHED]

    def script(call: int, request: TrialRequest) -> TrialResult:
        if 1 <= call <= len(failures):
            return TrialResult(status=failures[call - 1], reason=f"scripted {call}")
        return ok_by_batch_size(call, request)

    runner = FakeRunner(script)
    search(tmp_path, LARGE, trials=len(failures) + 2, runner=runner).run()
    trials = [t for t in records_of(tmp_path) if t.duplicate_of is None]
    constraints = constraints_of(tmp_path)
    statuses = {t.status for t in trials}
    assert statuses == {Status.OK, *failures}
    for t in trials:
        assert t.state == TrialState.COMPLETE
        if t.status is Status.OK:
            assert constraints[t.number] == {"usable": 0.0}
            assert t.value is not None and t.value > 0
        else:
            assert constraints[t.number] == {"usable": 1.0}, t.result
            assert t.value == 0.0


def test_interrupted_trial_is_failed_and_not_counted(tmp_path: Path) -> None:
    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            return TrialResult(status=Status.INTERRUPTED, reason="stopped")
        return ok_by_batch_size(call, request)

    search(tmp_path, LARGE, trials=3, runner=FakeRunner(script)).run()
    trials = records_of(tmp_path)
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) == 3
    assert states.count(TrialState.FAIL) == 1
    failed = next(t for t in trials if t.state == TrialState.FAIL)
    assert failed.status is Status.INTERRUPTED
    assert not failed.ok and failed.value is None


def test_timeout_cut_short_by_the_study_budget_is_failed(tmp_path: Path) -> None:
    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            return TrialResult(status=Status.TIMEOUT, reason="killed at the study's deadline")
        return ok_by_batch_size(call, request)

    runner = FakeRunner(script)
    # The study's budget (1000 s) is shorter than one trial's limit (5000 s): trials are cut by
    # the budget, so a timeout says nothing about the config.
    search(tmp_path, LARGE, trials=2, runner=runner, timeout=1000.0, trial_timeout=5000.0).run()
    assert all(t <= 1000.0 for t in runner.timeouts)
    trials = records_of(tmp_path)
    assert [t.state for t in trials].count(TrialState.FAIL) == 1
    assert next(t for t in trials if t.state == TrialState.FAIL).status is Status.TIMEOUT


def test_own_timeout_is_infeasible(tmp_path: Path) -> None:
    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            return TrialResult(status=Status.TIMEOUT, reason="killed after the trial limit")
        return ok_by_batch_size(call, request)

    runner = FakeRunner(script)
    search(tmp_path, LARGE, trials=2, runner=runner, trial_timeout=30.0).run()
    assert runner.timeouts == [30.0, 30.0]
    trials = records_of(tmp_path)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert constraints_of(tmp_path)[1] == {"usable": 1.0}


def test_no_trial_starts_without_enough_budget(tmp_path: Path) -> None:
    runner = FakeRunner()
    winner = search(tmp_path, LARGE, trials=3, runner=runner, timeout=1.0).run()
    assert winner is None
    assert runner.requests == []
    assert not (tmp_path / "out" / "best.yaml").exists()
    assert csv_rows(tmp_path / "out" / "trials.csv") == []


def test_signal_stops_the_search_and_keeps_outputs(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    installed: list[Any] = []

    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            # What SIGINT would do while this trial runs, without signalling the test process.
            handler = signal.getsignal(signal.SIGINT)
            installed.append(handler)
            assert callable(handler) and handler is not before
            handler(signal.SIGINT, None)
            return TrialResult(status=Status.INTERRUPTED, reason="stopped by SIGINT")
        return ok_by_batch_size(call, request)

    runner = FakeRunner(script)
    with pytest.raises(Interrupted) as excinfo:
        search(tmp_path, LARGE, trials=5, runner=runner).run()
    assert excinfo.value.signum == signal.SIGINT
    assert installed
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back
    assert len(runner.requests) == 2  # no trial started after the signal
    trials = records_of(tmp_path)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL]
    assert len(csv_rows(tmp_path / "out" / "trials.csv")) == 2
    assert (tmp_path / "out" / "best.yaml").is_file()


def test_resume_continues_the_same_study(tmp_path: Path) -> None:
    first = FakeRunner()
    search(tmp_path, LARGE, trials=2, runner=first).run()
    second = FakeRunner()
    search(tmp_path, LARGE, trials=4, runner=second).run()
    trials = records_of(tmp_path)
    assert len(trials) == 4
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert [t.number for t in trials if t.baseline] == [0]
    assert len(first.requests) == 2
    # Trials 2 and 3 are new (a repeat of an earlier config is answered from the study).
    assert len(second.requests) <= 2
    assert TrainConfig(batch_size=8) not in [r.config for r in second.requests]
    assert len(csv_rows(tmp_path / "out" / "trials.csv")) == 4


def test_resume_with_enough_trials_runs_nothing(tmp_path: Path) -> None:
    search(tmp_path, LARGE, trials=2).run()
    runner = FakeRunner()
    winner = search(tmp_path, LARGE, trials=2, runner=runner).run()
    assert runner.requests == []
    assert winner is not None
    assert len(records_of(tmp_path)) == 2


def test_study_of_another_unit_is_refused(tmp_path: Path) -> None:
    search(tmp_path, LARGE, trials=1).run()
    with pytest.raises(InputError, match="samples.*tokens"):
        search(tmp_path, LARGE, trials=2, adapter_cls=Tokens)


def test_study_of_another_space_is_refused(tmp_path: Path) -> None:
    search(tmp_path, SMALL, trials=1).run()
    changed = {**SMALL, "amp_dtype": {"choices": ["fp32"]}}  # other choices, same knob
    with pytest.raises(InputError, match="another search space"):
        search(tmp_path, changed, trials=3).run()


def test_stale_running_trial_of_a_dead_process_is_failed(tmp_path: Path) -> None:
    s = search(tmp_path, LARGE, trials=1)
    s.run()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = s.study.ask()
    stale.set_user_attr("owner", {"host": socket.gethostname(), "pid": int(dead.stdout)})
    alive = s.study.ask()
    alive.set_user_attr("owner", {"host": socket.gethostname(), "pid": os.getpid()})

    search(tmp_path, LARGE, trials=2).run()
    by_number = {t.number: t for t in records_of(tmp_path)}
    assert by_number[stale.number].state == TrialState.FAIL
    assert by_number[stale.number].status is Status.INTERRUPTED
    assert by_number[alive.number].state == TrialState.RUNNING  # its owner is still running


def test_confirmation_reruns_the_leaders_and_the_baseline(tmp_path: Path) -> None:
    runner = FakeRunner()
    s = search(tmp_path, LARGE, trials=4, runner=runner, confirm=2, confirm_repeats=2)
    winner = s.run()
    searched = [t for t in records_of(tmp_path) if t.search and t.duplicate_of is None]
    confirm_requests = runner.requests[len(searched):]  # after every search trial's request
    # A config the search did not diagnose is diagnosed in its first fresh run, never again.
    diagnosed = [r.config for r in confirm_requests if r.diagnose]
    assert len(diagnosed) == len(set(diagnosed))
    assert all(next(r for r in confirm_requests if r.config == c).diagnose for c in diagnosed)
    ok = sorted(searched, key=lambda t: -(t.value or 0.0))
    leaders = {t.config for t in ok[:2]}
    expected = leaders | {TrainConfig(batch_size=8)}
    assert {r.config for r in confirm_requests} == expected
    # Rates that never vary: one round shows the others behind, the fastest runs once more.
    fastest = max(expected, key=lambda c: c.batch_size)
    assert len(confirm_requests) == len(expected) + 1
    assert [r.config for r in confirm_requests].count(fastest) == 2
    assert winner is not None and winner.decision is not None
    assert winner.decision.confidence == "high"
    assert load_config(tmp_path / "out" / "best.yaml").config == fastest
    assert s.done() == 4  # the confirmation's trials are not search trials


def test_study_of_another_device_is_refused(tmp_path: Path) -> None:
    cuda_space = parse_space(LARGE, source="test-space.yaml", adapter=Tiny, device_type="cuda", cpus=8)
    Search(settings(tmp_path, trials=1, device="cuda"), cuda_space, Tiny, runner=FakeRunner(),
           listener=QuietListener()).run()
    with pytest.raises(InputError, match="cuda"):
        search(tmp_path, LARGE, trials=2, device="cpu")


def test_study_of_another_ddp_layout_is_refused(tmp_path: Path) -> None:
    search(tmp_path, LARGE, trials=1, nproc_per_node=2).run()
    assert study_of(tmp_path).user_attrs["nproc_per_node"] == 2
    with pytest.raises(InputError, match="ran 2 rank"):
        search(tmp_path, LARGE, trials=2)  # one process per trial: not comparable


def test_cuda_graphs_with_accumulation_are_recorded_but_never_launched(tmp_path: Path) -> None:
    # Graph replay with gradient accumulation: PyTorch overwrites the first micro-batch's
    # gradients between replays, so the search must refuse it without starting a process.
    raw = {"grad_accum": {"choices": [1, 2]}, "compile": {"choices": ["none", "reduce-overhead"]}}
    cuda_space = parse_space(raw, source="test-space.yaml", adapter=Tiny, device_type="cuda", cpus=8)
    runner = FakeRunner()
    Search(settings(tmp_path, trials=8, device="cuda"), cuda_space, Tiny, runner=runner,
           listener=QuietListener()).run()

    trials = [t for t in records_of(tmp_path) if t.duplicate_of is None]
    constraints = constraints_of(tmp_path)
    refused = [t for t in trials if t.config is not None and t.config.grad_accum > 1
               and t.config.compile == "reduce-overhead"]
    assert refused, "the sampler never proposed accumulation: the test proves nothing"
    for t in refused:
        assert t.result is not None
        assert t.result.status is Status.ERROR
        assert t.result.reason.startswith("not run: compile=reduce-overhead replays CUDA graphs")
        assert constraints[t.number] == {"usable": 1.0}
    launched = [r.config for r in runner.requests]
    assert any(c.grad_accum > 1 for c in launched)  # accumulation alone still runs
    assert all(c.grad_accum == 1 or c.compile == "none" for c in launched), launched


# -- a baseline that breaks the adapter contract ------------------------------------------------------


def vector_loss(call: int, request: TrialRequest) -> TrialResult:
    """Every config fails alike: the adapter's loss is not a scalar."""
    return TrialResult(status=Status.ERROR, contract_error="loss(model, batch)",
                       reason="TypeError: adapter.loss must return a scalar tensor, got Tensor "
                       "of shape (8,)", log=f"out/trials/{call}/log.txt")


def test_a_baseline_that_breaks_the_adapter_contract_stops_the_search(tmp_path: Path) -> None:
    runner = FakeRunner(vector_loss)
    with pytest.raises(ContractError) as excinfo:
        search(tmp_path, SMALL, trials=5, runner=runner).run()
    assert len(runner.requests) == 1  # not five identical failures
    message = str(excinfo.value)
    assert "baseline trial (#0" in message and "adapter contract" in message
    assert "adapter.loss must return a scalar tensor" in message
    assert "log: out/trials/0/log.txt" in message
    (base,) = records_of(tmp_path)
    # Recorded with its reason, but told as FAIL: it says nothing about the config.
    assert base.baseline and base.state == TrialState.FAIL
    assert base.result is not None and base.result.contract_error == "loss(model, batch)"
    assert "scalar tensor" in csv_rows(tmp_path / "out" / "trials.csv")[0]["reason"]

    # The adapter fixed, the same command runs the baseline again.
    fixed = FakeRunner()
    search(tmp_path, SMALL, trials=2, runner=fixed).run()
    assert TrainConfig(batch_size=Tiny.batch_size) in [r.config for r in fixed.requests]
    assert [r.state for r in records_of(tmp_path) if r.baseline] == [TrialState.FAIL,
                                                                      TrialState.COMPLETE]


def test_a_contract_error_beyond_the_baseline_only_marks_that_config(tmp_path: Path) -> None:
    # E.g. a dataset that fails only in DataLoader workers: the baseline (no workers) ran.
    def script(call: int, request: TrialRequest) -> TrialResult:
        return ok_by_batch_size(call, request) if call == 0 else vector_loss(call, request)

    runner = FakeRunner(script)
    search(tmp_path, SMALL, trials=3, runner=runner).run()
    assert len(runner.requests) == 3
    trials = records_of(tmp_path)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert constraints_of(tmp_path) == {0: {"usable": 0.0}, 1: {"usable": 1.0}, 2: {"usable": 1.0}}


# -- the effective batch ----------------------------------------------------------------------------


class Fixed(Adapter):
    """Trains 32 samples per optimizer step (8 x 4): tuning must keep that."""

    batch_size = 8
    global_batch_size = 32


@pytest.mark.parametrize("adapter_cls", [Fixed, Tokens], ids=["global-batch", "batch-size"])
def test_a_default_search_never_changes_the_effective_batch(
        tmp_path: Path, adapter_cls: type[Adapter]) -> None:
    # Larger micro-batches are faster here (ok_by_batch_size): the search would take them all.
    runner = FakeRunner()
    search(tmp_path, LARGE, trials=8, runner=runner, adapter_cls=adapter_cls).run()
    kept = adapter_cls.global_batch_size or adapter_cls.batch_size
    assert {r.config.effective_batch for r in runner.requests} == {kept}
    assert len({r.config.batch_size for r in runner.requests}) > 1  # the micro-batch did vary
    best = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text())
    assert best["effective_batch"] == {"value": kept, "adapter": kept}
    assert "# Note" not in (tmp_path / "out" / "best.yaml").read_text()


def test_a_search_asked_to_vary_the_effective_batch_says_so_in_best_yaml(tmp_path: Path) -> None:
    runner = FakeRunner()
    search(tmp_path, LARGE, trials=8, runner=runner, adapter_cls=Tiny).run()  # Tiny varies it
    assert len({r.config.effective_batch for r in runner.requests}) > 1
    text = (tmp_path / "out" / "best.yaml").read_text()
    best = yaml.safe_load(text)
    value = best["config"]["batch_size"] * best["config"]["grad_accum"]
    assert value > Tiny.batch_size  # the largest batches win here
    block = best["effective_batch"]
    assert block["value"] == value and block["adapter"] == Tiny.batch_size
    assert block["factor"] == value / Tiny.batch_size
    assert "learning rate" in block["note"] and "re-tune" in block["note"]
    assert "# Note: the effective batch is" in text


WITH_COMPILE = {**LARGE, "compile": {"choices": ["none", "default"]},
                "prefetch_factor": {"choices": [2, 4]},
                "persistent_workers": {"choices": [False, True]}}


def compute_bound_baseline(call: int, request: TrialRequest) -> TrialResult:
    """The baseline (the first request) is diagnosed compute-bound; larger batches are faster."""
    result = ok_by_batch_size(call, request)
    if call == 0:
        result = result.replace(diagnosis=Diagnosis(
            verdict=Verdict.COMPUTE, suggestion="", throughput=result.throughput or 0.0,
            loader_rate=1e6, compute_rate=result.throughput, data_wait_fraction=0.0,
            gpu_busy_fraction=None))
    return result


def overhead_bound(call: int, request: TrialRequest) -> TrialResult:
    """Every step takes as long at any batch (launches): the rate grows with the batch."""
    result = ok_by_batch_size(call, request)
    return result.replace(diagnosis=Diagnosis(
        verdict=Verdict.OVERHEAD, suggestion="", throughput=result.throughput or 0.0,
        loader_rate=1e9, compute_rate=result.throughput, data_wait_fraction=0.0,
        gpu_busy_fraction=0.2))


def test_small_batches_behind_an_overhead_bound_trial_are_told_not_run(tmp_path: Path) -> None:
    # One compile mode, batches 4-64: once bs 64 is measured overhead-bound, bs 16 or less can
    # read at most 1.5 x a quarter of its rate, under the pruner's 0.6: not run, told PRUNED
    # at that bound, which the sampler learns from.
    runner = FakeRunner(overhead_bound)
    space = {"batch_size": {"factors": [0.5, 1, 2, 4, 8]}, "num_workers": {"low": 0, "high": 4}}
    search(tmp_path, space, trials=30, runner=runner).run()
    implied = [r for r in records_of(tmp_path)
               if r.result is not None and r.result.reason.startswith("not run: at most")]
    assert implied
    measured_64 = min(i for i, q in enumerate(runner.requests) if q.config.batch_size == 64)
    assert all(q.config.batch_size > 16 for q in runner.requests[measured_64 + 1:])
    trials = {t.number: t for t in study_of(tmp_path).get_trials()}
    for r in implied:
        assert r.config is not None and r.config.batch_size <= 16
        assert r.state is TrialState.PRUNED
        assert trials[r.number].intermediate_values == {
            1: pytest.approx(1.5 * 6400 * r.config.batch_size / 64)}


def test_one_slot_runs_the_recipe_the_baselines_diagnosis_points_at(tmp_path: Path) -> None:
    runner = FakeRunner(compute_bound_baseline)
    search(tmp_path, WITH_COMPILE, trials=2, runner=runner).run()
    baseline, recipe = sorted(records_of(tmp_path), key=lambda r: r.number)[:2]
    assert baseline.baseline and recipe.role == "recipe"
    assert recipe.config is not None
    # The hand recipe (bf16, workers), at the largest batch the space holds (8 x 8).
    assert recipe.config.batch_size == 64
    assert recipe.config.amp_dtype == "bf16" and recipe.config.compile == "none"  # eager first
    assert runner.requests[1].config == recipe.config


def test_the_recipe_of_a_continued_study_follows_its_baseline(tmp_path: Path) -> None:
    # The first run stops after the baseline; the second queues the recipe from its diagnosis.
    search(tmp_path, WITH_COMPILE, trials=1, runner=FakeRunner(compute_bound_baseline)).run()
    assert [r.role for r in records_of(tmp_path)] == ["baseline"]
    later = FakeRunner(ok_by_batch_size)
    search(tmp_path, WITH_COMPILE, trials=2, runner=later).run()
    recipe = next(r for r in records_of(tmp_path) if r.role == "recipe")
    assert recipe.config is not None and recipe.config.batch_size == 64


def compiling(clock: FakeClock, compiled: set[Any], started: list[tuple[bool, float]], *,
              cold: float, warm: float, rest: float, gain: float) -> Script:
    """A scripted trial: a graph compiles `cold` seconds the first time and `warm` after (the
    persistent cache), an eager step 0.2 s; every trial `rest` seconds more on `clock`. A
    compiled config runs `gain` x its eager rate. Each start goes into `started` (cold?, when)
    and each graph into `compiled`."""
    def script(call: int, request: TrialRequest) -> TrialResult:
        graph = request.config.graph
        new = graph is not None and graph not in compiled
        compile_seconds = cold if new else (warm if graph else 0.2)
        started.append((new, clock.now))
        if graph is not None:
            compiled.add(graph)
        clock.now += compile_seconds + rest
        rate = 100.0 * request.config.batch_size * (gain if graph else 1.0)
        return TrialResult(status=Status.OK, throughput=rate + request.config.num_workers,
                           compile_seconds=compile_seconds, duration_seconds=compile_seconds + rest)
    return script


def test_a_new_graph_is_not_started_when_its_compile_cannot_finish_in_what_is_left(
    tmp_path: Path,
) -> None:
    # A compiled graph costs 30 s the first time and 1 s after (the persistent cache); every
    # trial 6 s more. With 150 s, the ladder climbs batch sizes until a climb's cold compile
    # no longer fits: that one is not started, a config whose graph is compiled runs instead.
    clock, compiled, started = FakeClock(), set(), []
    script = compiling(clock, compiled, started, cold=30.0, warm=1.0, rest=6.0, gain=1.5)
    raw = {"batch_size": {"factors": [1, 2, 4, 8]}, "compile": {"choices": ["none", "default"]},
           "num_workers": {"choices": [0, 1, 2, 3]}}
    runner = FakeRunner(script)
    Search(settings(tmp_path, trials=1000, timeout=150.0, trial_timeout=300.0), space_of(raw),
           Tiny, runner=runner, listener=QuietListener(), clock=clock).run()
    # Every cold compile started had the time to finish.
    assert all(limit >= 36.0 for (cold, _), limit in zip(started, runner.timeouts) if cold)
    trials = records_of(tmp_path)
    skipped = [t for t in trials if t.result is not None
               and t.result.reason.startswith("not run: compiling and running it")]
    assert skipped and all(t.state == TrialState.FAIL and t.status is Status.TIMEOUT
                           for t in skipped)  # says nothing about the config: TPE ignores it
    # Once too slow for what is left, the ladder never offers it again: the time left only
    # shrinks (a follow-up came back after each exploration before: bs=32 compile=default twice
    # here). The sampler, told nothing by it (FAIL), may propose it again: each such row costs
    # no time, and an exploration that fits runs after it.
    ladder = [t.config for t in skipped if t.role]
    assert len(set(ladder)) == len(ladder)
    for t in skipped:
        assert any(u.number > t.number and u.ok and u.role.startswith("explore") for u in trials)
    after = [t for t in trials if t.number > skipped[0].number and t.ok]
    assert after and all(t.config is not None and t.config.graph in compiled | {None}
                         for t in after)
    assert clock.now <= 150.0


def test_once_a_compile_lost_to_eager_no_compiled_config_runs_again(tmp_path: Path) -> None:
    # Compiling costs 60 s cold and halves the rate; with 120 s, the recipe runs eager and the
    # ladder compiles the eager leader once. Its gain (0.5x) then holds every compiled proposal
    # back, told to TPE as pruned at its bound (held-out ViT, nn.TransformerEncoder on a 2-CPU
    # VM: TPE had gone on proposing compiled configs, 9 such rows here).
    clock = FakeClock()
    script = compiling(clock, set(), [], cold=60.0, warm=0.2, rest=3.0, gain=0.5)
    raw = {"batch_size": {"factors": [1, 2, 4, 8]}, "compile": {"choices": ["none", "default"]},
           "num_workers": {"choices": [0, 1, 2, 3]}, "amp_dtype": {"choices": ["fp32", "bf16"]}}
    runner = FakeRunner(script)
    Search(settings(tmp_path, trials=1000, timeout=120.0, trial_timeout=300.0, seed=3),
           space_of(raw), Tiny, runner=runner, listener=QuietListener(),
           clock=clock).run()
    trials = records_of(tmp_path)
    assert trials[1].role == "recipe" and trials[1].config is not None \
        and trials[1].config.compile == "none"
    compiled = [q.config for q in runner.requests if q.config.compile != "none"]
    assert len(compiled) == 1  # the ladder's one compile of the eager leader
    held_back = [t for t in trials if t.config is not None and t.config.compile != "none"
                 and t.result is not None and t.result.reason.startswith("not run:")]
    assert held_back and all(t.state == TrialState.PRUNED for t in held_back)
    later = [t for t in trials if t.number > held_back[0].number and t.search and t.ok]
    assert len(later) >= 5


# -- the adapter's own knobs -------------------------------------------------------------------


def test_a_search_finds_the_fast_value_of_an_adapters_knob_and_writes_it_under_params(
        tmp_path: Path, test_adapters: Path) -> None:
    """tests/adapters/slow_knob.py: its default `forward: slow` sleeps 20 ms a step."""
    from rich.console import Console

    from autotune import load_adapter
    from autotune.outputs.show import show

    path = test_adapters / "slow_knob.py"
    cls = load_adapter(path)
    winner = search(tmp_path, ONE_CONFIG, trials=4, runner=InProcessRunner(), adapter=path,
                    adapter_cls=cls).run()
    trials = records_of(tmp_path)
    assert trials[0].config is not None and trials[0].config.params == {"forward": "slow"}
    assert {t.config.params["forward"] for t in trials if t.config} == {"slow", "fast"}
    assert winner is not None and winner.record.config.params == {"forward": "fast"}
    out = tmp_path / "out"
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["params"] == {"forward": "fast"} and "params" not in best["config"]
    assert load_config(out / "best.yaml").params == {"forward": "fast"}
    rows = csv_rows(out / "trials.csv")
    assert [r["params.forward"] for r in rows][:1] == ["slow"]
    assert "fast" in {r["params.forward"] for r in rows}
    console = Console(record=True, width=200)
    show(out, console=console)
    assert "forward=fast" in console.export_text()


def test_the_search_ends_when_what_is_left_is_shorter_than_any_trial_took(
        tmp_path: Path) -> None:
    # Every trial takes 22 s and no knob is quicker. With 100 s, four trials run and the 12 s
    # left would fit none: the search ends there instead of asking for configs it would not
    # start, up to CONVERGED_REPEATS "not run" rows (ten before).
    clock = FakeClock()
    script = compiling(clock, set(), [], cold=0.0, warm=0.0, rest=22.0, gain=1.0)
    raw = {"batch_size": {"factors": [1, 2, 4, 8]}, "num_workers": {"choices": [0, 1, 2, 3]},
           "amp_dtype": {"choices": ["fp32", "bf16"]}}
    runner = FakeRunner(script)
    Search(settings(tmp_path, trials=1000, timeout=100.0, trial_timeout=300.0), space_of(raw),
           Tiny, runner=runner, listener=QuietListener(), clock=clock).run()
    trials = records_of(tmp_path)
    assert len(runner.requests) == 4 and clock.now == pytest.approx(88.8)
    assert [t.number for t in trials] == [0, 1, 2, 3]
    assert all(t.ok for t in trials)


def test_after_a_config_too_slow_to_start_the_exploration_is_one_that_fits(
        tmp_path: Path) -> None:
    # bf16 (fastest) makes every trial take 40 s, fp32 8 s. Near the end a proposal with bf16
    # is not run; the exploration queued after it is an fp32 config that fits in what is left
    # (a held-out DeepLabV3's exploration asked for cuDNN's benchmark, 37 s, with 13 s left).
    clock = FakeClock()

    def script(call: int, request: TrialRequest) -> TrialResult:
        c = request.config
        seconds = 40.0 if c.amp_dtype == "bf16" else 8.0
        clock.now += seconds
        rate = 100.0 * c.batch_size * (1.2 if c.amp_dtype == "bf16" else 1.0) + c.num_workers
        return TrialResult(status=Status.OK, throughput=rate, duration_seconds=seconds)

    raw = {"batch_size": {"factors": [1, 2, 4, 8]}, "num_workers": {"choices": [0, 1, 2, 3]},
           "amp_dtype": {"choices": ["fp32", "bf16"]}}
    Search(settings(tmp_path, trials=1000, timeout=200.0, trial_timeout=300.0), space_of(raw),
           Tiny, runner=FakeRunner(script), listener=QuietListener(), clock=clock).run()
    trials = records_of(tmp_path)
    slow = [t for t in trials if t.result is not None
            and t.result.reason.startswith("not run: eager trials with")]
    assert slow, [(t.number, t.role, t.result and t.result.reason) for t in trials]
    explored = [t for t in trials if t.number > slow[0].number and t.role.startswith("explore")]
    assert explored and all(t.ok and t.config is not None and t.config.amp_dtype == "fp32"
                            for t in explored), [(t.number, t.role) for t in explored]
    # Both configs that fit ran (each exploration's draws seeded apart: the trials not run
    # between them are not counted, and the same seed drew the same configs again).
    assert {t.config.num_workers for t in explored if t.config is not None} == {2, 3}
    # Once no unmeasured config fits (bs=8 fp32 with 0, 2 and 3 workers ran; batches over 8
    # and a worker ran only with bf16, 40 s), the search ends: no row of proposals not run.
    assert sum(1 for t in trials if t.number > explored[-1].number) <= 1
