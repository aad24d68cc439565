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
from helpers import FakeRunner, csv_rows, ok_by_batch_size
from optuna.trial import TrialState

from autotune import Adapter, InputError, MeasureSettings, Status, TrainConfig, TrialResult, load_config
from autotune.display import QuietListener
from autotune.runner import InProcessRunner
from autotune.search import Interrupted, Search, SearchSettings
from autotune.space import SearchSpace, parse_space
from autotune.worker import TrialRequest

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
    """The class `load_adapter` returns for tests/adapters/tiny.py, as far as Search looks."""

    batch_size = 8


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
    listener: Any = None, adapter_cls: type[Adapter] = Tiny, **changes: Any,
) -> Search:
    return Search(
        settings(tmp_path, trials=trials, **changes), space_of(raw, adapter_cls), adapter_cls,
        runner=runner or FakeRunner(), listener=listener or QuietListener(),
    )


def trials_of(tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name="test", storage=f"sqlite:///{tmp_path / 'study.db'}")
    return study.get_trials()


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- a real study in this process ---------------------------------------------------------------------


def test_in_process_search_baseline_first(tmp_path: Path, tiny_adapter: Path) -> None:
    s = search(tmp_path, SMALL, trials=3, runner=InProcessRunner(), adapter=tiny_adapter)
    winner = s.run()

    trials = trials_of(tmp_path)
    assert len(trials) == 3
    base = trials[0]
    assert base.number == 0
    assert base.user_attrs["baseline"] is True
    assert base.user_attrs["config"] == TrainConfig(batch_size=Tiny.batch_size).to_dict()
    assert base.user_attrs["result"]["status"] == "ok"
    assert [t.number for t in trials if t.user_attrs.get("baseline")] == [0]
    for t in trials:
        assert t.state == TrialState.COMPLETE
        assert t.user_attrs["result"]["status"] == "ok", t.user_attrs["result"]["reason"]
        assert t.constraints == {"usable": 0.0}
        assert t.value == t.user_attrs["result"]["throughput"] > 0
    out = tmp_path / "out"
    assert winner is not None
    assert load_config(out / "best.yaml") == TrainConfig(**winner.trial.user_attrs["config"])
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
    trials = trials_of(tmp_path)
    assert len(trials) == 3
    assert trials[0].user_attrs["result"]["status"] == "ok"
    assert [t.user_attrs.get("duplicate_of") for t in trials] == [None, 0, 0]
    for t in trials[1:]:
        assert t.state == TrialState.COMPLETE
        assert t.user_attrs["result"] == trials[0].user_attrs["result"]
        assert t.value == trials[0].value
    assert not (tmp_path / "out" / "trials" / "1").exists()
    rows = csv_rows(tmp_path / "out" / "trials.csv")
    assert "not re-run" in rows[1]["reason"]


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
    search(tmp_path, LARGE, trials=3, listener=listener).run()
    assert listener.seen == [(0, 1, True), (1, 2, True), (2, 3, True)]
    assert (tmp_path / "out" / "throughput.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_failed_outcomes_are_complete_but_infeasible(tmp_path: Path) -> None:
    failures = [Status.OOM, Status.NAN, Status.ERROR, Status.TIMEOUT, Status.CRASHED]

    def script(call: int, request: TrialRequest) -> TrialResult:
        if 1 <= call <= len(failures):
            return TrialResult(status=failures[call - 1], reason=f"scripted {call}")
        return ok_by_batch_size(call, request)

    runner = FakeRunner(script)
    search(tmp_path, LARGE, trials=len(failures) + 2, runner=runner).run()
    trials = [t for t in trials_of(tmp_path) if "duplicate_of" not in t.user_attrs]
    statuses = {t.user_attrs["result"]["status"] for t in trials}
    assert statuses == {"ok"} | {s.value for s in failures}
    for t in trials:
        assert t.state == TrialState.COMPLETE
        if t.user_attrs["result"]["status"] == "ok":
            assert t.constraints == {"usable": 0.0} and t.value is not None and t.value > 0
        else:
            assert t.constraints == {"usable": 1.0}, t.user_attrs["result"]
            assert t.value == 0.0


def test_interrupted_trial_is_failed_and_not_counted(tmp_path: Path) -> None:
    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            return TrialResult(status=Status.INTERRUPTED, reason="stopped")
        return ok_by_batch_size(call, request)

    search(tmp_path, LARGE, trials=3, runner=FakeRunner(script)).run()
    trials = trials_of(tmp_path)
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) == 3
    assert states.count(TrialState.FAIL) == 1
    failed = next(t for t in trials if t.state == TrialState.FAIL)
    assert failed.user_attrs["result"]["status"] == "interrupted"


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
    trials = trials_of(tmp_path)
    assert [t.state for t in trials].count(TrialState.FAIL) == 1
    assert next(t for t in trials if t.state == TrialState.FAIL).user_attrs["result"]["status"] == "timeout"


def test_own_timeout_is_infeasible(tmp_path: Path) -> None:
    def script(call: int, request: TrialRequest) -> TrialResult:
        if call == 1:
            return TrialResult(status=Status.TIMEOUT, reason="killed after the trial limit")
        return ok_by_batch_size(call, request)

    runner = FakeRunner(script)
    search(tmp_path, LARGE, trials=2, runner=runner, trial_timeout=30.0).run()
    assert runner.timeouts == [30.0, 30.0]
    trials = trials_of(tmp_path)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert trials[1].constraints == {"usable": 1.0}


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
    trials = trials_of(tmp_path)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL]
    assert len(csv_rows(tmp_path / "out" / "trials.csv")) == 2
    assert (tmp_path / "out" / "best.yaml").is_file()


def test_resume_continues_the_same_study(tmp_path: Path) -> None:
    first = FakeRunner()
    search(tmp_path, LARGE, trials=2, runner=first).run()
    second = FakeRunner()
    search(tmp_path, LARGE, trials=4, runner=second).run()
    trials = trials_of(tmp_path)
    assert len(trials) == 4
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert [t.number for t in trials if t.user_attrs.get("baseline")] == [0]
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
    assert len(trials_of(tmp_path)) == 2


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
    by_number = {t.number: t for t in trials_of(tmp_path)}
    assert by_number[stale.number].state == TrialState.FAIL
    assert by_number[stale.number].user_attrs["result"]["status"] == "interrupted"
    assert by_number[alive.number].state == TrialState.RUNNING  # its owner is still running


def test_confirmation_reruns_the_leaders_and_the_baseline(tmp_path: Path) -> None:
    runner = FakeRunner()
    s = search(tmp_path, LARGE, trials=4, runner=runner, confirm=2, confirm_repeats=2)
    winner = s.run()
    searched = [t for t in trials_of(tmp_path) if "duplicate_of" not in t.user_attrs]
    confirm_requests = runner.requests[len(searched):]
    ok = sorted(searched, key=lambda t: -(t.value or 0.0))
    leaders = {TrainConfig(**t.user_attrs["config"]) for t in ok[:2]}
    expected = leaders | {TrainConfig(batch_size=8)}
    assert {r.config for r in confirm_requests} == expected
    assert len(confirm_requests) == 2 * len(expected)
    assert winner is not None
    fastest = max(expected, key=lambda c: c.batch_size)
    assert load_config(tmp_path / "out" / "best.yaml") == fastest


def test_study_of_another_device_is_refused(tmp_path: Path) -> None:
    cuda_space = parse_space(LARGE, source="test-space.yaml", adapter=Tiny, device_type="cuda", cpus=8)
    Search(settings(tmp_path, trials=1, device="cuda"), cuda_space, Tiny, runner=FakeRunner(),
           listener=QuietListener()).run()
    with pytest.raises(InputError, match="cuda"):
        search(tmp_path, LARGE, trials=2, device="cpu")


def test_cuda_graphs_with_accumulation_are_recorded_but_never_launched(tmp_path: Path) -> None:
    # Graph replay with gradient accumulation: PyTorch overwrites the first micro-batch's
    # gradients between replays, so the search must refuse it without starting a process.
    raw = {"grad_accum": {"choices": [1, 2]}, "compile": {"choices": ["none", "reduce-overhead"]}}
    cuda_space = parse_space(raw, source="test-space.yaml", adapter=Tiny, device_type="cuda", cpus=8)
    runner = FakeRunner()
    Search(settings(tmp_path, trials=8, device="cuda"), cuda_space, Tiny, runner=runner,
           listener=QuietListener()).run()

    trials = [t for t in trials_of(tmp_path) if "duplicate_of" not in t.user_attrs]
    refused = [t for t in trials if t.user_attrs["config"]["grad_accum"] > 1
               and t.user_attrs["config"]["compile"] == "reduce-overhead"]
    assert refused, "the sampler never proposed accumulation: the test proves nothing"
    for t in refused:
        result = t.user_attrs["result"]
        assert result["status"] == "error"
        assert result["reason"].startswith("not run: compile=reduce-overhead replays CUDA graphs")
        assert t.constraints == {"usable": 1.0}
    launched = [r.config for r in runner.requests]
    assert any(c.grad_accum > 1 for c in launched)  # accumulation alone still runs
    assert all(c.grad_accum == 1 or c.compile == "none" for c in launched), launched
