"""A check end to end with a scripted runner (no process starts): the baseline read and written,
the refusals (exit 2), the noise said, an interrupt that writes nothing."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from helpers import REPO_ROOT, TEST_ADAPTERS, FakeRunner

from autotune.check.baseline import read_baseline
from autotune.check.run import CheckSettings, Outcome, run_check
from autotune.contract.noise import Noise, OtherProcess
from autotune.contract.request import MeasureSettings, TrialRequest
from autotune.contract.result import Status, TrialResult

ADAPTER = TEST_ADAPTERS / "paced.py"
BUSY = Noise(seconds=10.0, cpus=2, other_cpu_seconds=16.0,
             busiest=(OtherProcess(name="make", pid=4242, cpu_seconds=12.0),))


def baseline_file(path: Path, *, unit: str = "samples/s", **provenance: object) -> Path:
    """A baseline file as --update writes it: the adapter's default config at 400 units/s."""
    prov = {"device_kind": "cpu", "torch": torch.__version__, **provenance}
    path.write_text(json.dumps({"autotune_check_baseline": 1, "config": {"batch_size": 8},
                                "throughput": {"value": 400.0, "unit": unit}, "runs": [400.0],
                                "provenance": prov}))
    return path


def rates(*values: float, noise: Noise | None = None) -> FakeRunner:
    """A runner whose runs read `values` in turn."""
    return FakeRunner(lambda i, request: TrialResult(status=Status.OK, throughput=values[i],
                                                     noise=noise))


def check(against: Path, runner: FakeRunner, **settings: object) -> Outcome:
    return run_check(CheckSettings(adapter=ADAPTER, against=against,
                                   measure=MeasureSettings(budget_seconds=1.0), **settings),
                     runner=runner)


def test_update_writes_this_machines_baseline_and_a_check_reads_it(tmp_path: Path) -> None:
    written = tmp_path / "baseline.json"
    runner = rates(410.0, 390.0, 400.0)
    outcome = check(baseline_file(tmp_path / "best.json"), runner, update=written)
    assert outcome.code == 0 and outcome.line.startswith(f"wrote {written}: 400 samples/s")
    assert all(r.config.batch_size == 8 and r.device == "cpu" for r in runner.requests)
    stored = read_baseline(written)
    assert (stored.throughput, stored.runs, stored.unit) == (400.0, (410.0, 390.0, 400.0),
                                                            "samples")
    assert stored.torch == torch.__version__ and stored.device is not None
    again = check(written, rates(399.0, 401.0, 400.0))
    assert (again.code, again.verdict and again.verdict.state.value) == (0, "ok")


def test_update_from_runs_that_contradict_each_other_writes_nothing(tmp_path: Path) -> None:
    written = tmp_path / "baseline.json"
    outcome = check(baseline_file(tmp_path / "b.json"), rates(150.0, 400.0, 390.0, noise=BUSY),
                    update=written)
    assert outcome.code == 2 and "contradict each other" in outcome.line
    assert not written.exists() and "likely cause" in outcome.notes[0]


def test_a_slowdown_the_runs_agree_on_exits_1(tmp_path: Path) -> None:
    outcome = check(baseline_file(tmp_path / "b.json"), rates(340.0, 342.0, 338.0))
    assert outcome.code == 1 and outcome.line.startswith("regression: 340 samples/s, 0.85x")
    assert outcome.to_dict()["state"] == "regression"


def test_runs_made_noisy_by_a_busy_machine_pass_and_name_the_cause(tmp_path: Path) -> None:
    outcome = check(baseline_file(tmp_path / "b.json"), rates(200.0, 388.0, 240.0, noise=BUSY))
    assert outcome.code == 0 and outcome.line.startswith("noisy: 240 samples/s")
    assert any("other processes kept 1.6 of the trial's 2 CPUs busy" in n and "make" in n
               for n in outcome.notes)


def test_an_interrupted_check_writes_nothing_and_exits_130(tmp_path: Path) -> None:
    def interrupted(i: int, request: TrialRequest) -> TrialResult:
        if i == 1:  # Ctrl-C during the second run
            os.kill(os.getpid(), signal.SIGINT)
            return TrialResult(status=Status.INTERRUPTED, reason="interrupted")
        return TrialResult(status=Status.OK, throughput=400.0)

    written = tmp_path / "baseline.json"
    runner = FakeRunner(interrupted)
    outcome = check(baseline_file(tmp_path / "b.json"), runner, update=written)
    assert (outcome.code, outcome.to_dict()["state"]) == (130, "interrupted")
    assert len(runner.requests) == 2 and not written.exists()


@pytest.mark.parametrize(("provenance", "unit", "reason"), [
    ({"torch": "1.13.0"}, "samples/s", "another torch version: the baseline's 1.13.0"),
    ({"device": "NVIDIA H100 80GB HBM3"}, "samples/s", "measured on another device"),
    ({}, "tokens/s", "the adapter counts samples/s, the baseline tokens/s"),
])
def test_another_torch_device_or_unit_is_refused_before_any_run(
        tmp_path: Path, provenance: dict[str, str], unit: str, reason: str) -> None:
    runner = rates(400.0, 400.0, 400.0)
    outcome = check(baseline_file(tmp_path / "b.json", unit=unit, **provenance), runner)
    assert outcome.code == 2 and reason in outcome.line and not runner.requests


def test_params_the_adapter_does_not_declare_are_refused_before_any_run(tmp_path: Path) -> None:
    # A held-out user checked one adapter against another's best.yaml (2026-11-28): the first
    # run failed inside the trial with a traceback ("declares no knob(s) ['pad_to_multiple_of']").
    path = baseline_file(tmp_path / "b.json")
    doc = json.loads(path.read_text())
    doc["config"]["params"] = {"pad_to_multiple_of": 64}
    path.write_text(json.dumps(doc))
    runner = rates(400.0, 400.0, 400.0)
    outcome = check(path, runner)
    assert outcome.code == 2 and not runner.requests
    assert f"{path}: params ['pad_to_multiple_of'] are not knobs of " in outcome.line
    assert "tune again: autotune search --adapter" in outcome.line


def test_allow_torch_change_compares_across_torch_versions(tmp_path: Path) -> None:
    outcome = check(baseline_file(tmp_path / "b.json", torch="1.13.0"),
                    rates(400.0, 400.0, 400.0), allow_torch_change=True)
    assert outcome.code == 0


def test_bad_input_and_no_ok_run_exit_2_with_the_reason(tmp_path: Path) -> None:
    missing = check(tmp_path / "nope.yaml", rates(400.0))
    assert missing.code == 2 and "cannot read it (No such file or directory)" in missing.line
    (tmp_path / "knobs.yaml").write_text("batch_size: 8\n")
    knobs = check(tmp_path / "knobs.yaml", rates(400.0))
    assert knobs.code == 2 and "no config and throughput" in knobs.line
    broken = FakeRunner(lambda i, r: TrialResult(status=Status.ERROR, reason="ValueError: x"))
    failed = check(baseline_file(tmp_path / "b.json"), broken, runs=2)
    assert failed.code == 2 and "no run finished ok (run 1: error: ValueError: x)" in failed.line
    assert failed.notes == ("run 2: error: ValueError: x",)
    runner = rates(400.0)
    nowhere = check(baseline_file(tmp_path / "b.json"), runner, update=tmp_path / "no" / "b.json")
    assert nowhere.code == 2 and "no folder" in nowhere.line and not runner.requests


def test_best_yaml_gives_its_confirmed_figure_and_provenance() -> None:
    # A real best.yaml: GPT-2 small's H100 search of 2026-11-23 (results/h100/search/gpt/ then).
    stored = read_baseline(REPO_ROOT / "tests/data/gpt-best-h100.yaml")
    assert (stored.throughput, stored.unit, stored.runs) == (420413.7, "tokens",
                                                             (421230.9, 419596.4))
    assert (stored.device, stored.device_kind, stored.torch) == ("NVIDIA H100 80GB HBM3", "cuda",
                                                                 "2.11.0+cu130")
    assert stored.how == "median of the confirmation runs" and stored.config.compile == "default"


def test_a_run_that_fails_while_others_pass_is_a_regression(tmp_path: Path) -> None:
    """A change that makes the config run out of memory now and then has regressed: the runs
    that passed do not speak for it."""
    def some_oom(i: int, request: TrialRequest) -> TrialResult:
        return (TrialResult(status=Status.OOM, reason="CUDA out of memory") if i < 2
                else TrialResult(status=Status.OK, throughput=400.0))

    outcome = check(baseline_file(tmp_path / "b.json"), FakeRunner(some_oom))
    assert outcome.code == 1 and outcome.line.startswith("failed: 2 of 3 runs did not finish ok")
    assert outcome.notes == ("run 2: oom: CUDA out of memory",)


def test_best_yamls_adapter_knobs_are_run(tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    best.write_text(json.dumps({"config": {"batch_size": 8}, "params": {"forward": "fast"},
                                "throughput": {"value": 400.0, "unit": "samples/s"},
                                "provenance": {"device_kind": "cpu", "torch": torch.__version__}}))
    assert dict(read_baseline(best).config.params) == {"forward": "fast"}
