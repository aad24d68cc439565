"""`autotune lab`: its rows, the rotated order, the table; and one real run on the CPU."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import TEST_ADAPTERS, run_autotune

from autotune import Adapter, InputError, Noise, Status, TrainConfig, TrialResult
from autotune.lab import (LabRow, lab_rows, next_steps, noise_warnings, run_lab, summarize,
                          to_markdown)
from autotune.trial.measure import MeasureSettings
from autotune.contract.request import TrialRequest
from autotune.study.execution.protocol import RunnerBase

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2)
TUNED = TrainConfig(batch_size=16, num_workers=1, prefetch_factor=2)


class Eight(Adapter):
    batch_size = 8


class Accumulating(Adapter):
    batch_size = 8
    global_batch_size = 32


# -- rows ---------------------------------------------------------------------------------------------


def test_four_rows_without_a_yaml_five_with() -> None:
    rows = lab_rows(Eight, device="cpu", cpus=4, tuned=None)
    assert [r.index for r in rows] == [1, 2, 3, 4]
    rows = lab_rows(Eight, device="cpu", cpus=4, tuned=TUNED)
    assert [r.index for r in rows] == [1, 2, 3, 4, 5]
    assert rows[4].config == TUNED
    assert len({r.name for r in rows}) == 5


def test_the_yaml_row_runs_the_adapters_own_knobs() -> None:
    knobs = type("Knobs", (Adapter,), {"batch_size": 8, "knobs": {"pad": {"choices": [1, 64]}}})
    tuned = TUNED.replace(params={"pad": 64})
    rows = lab_rows(knobs, device="cpu", cpus=4, tuned=tuned)
    assert rows[-1].config.params == {"pad": 64} and rows[0].config.params == {}  # defaults
    with pytest.raises(InputError, match=r"sets params \['pad'\], knobs Eight does not declare"):
        lab_rows(Eight, device="cpu", cpus=4, tuned=tuned)


def test_row_configs_build_on_each_other() -> None:
    defaults, bf16, compiled, recipe = (r.config for r in
                                        lab_rows(Eight, device="cpu", cpus=4, tuned=None))
    assert defaults == TrainConfig(batch_size=8)
    assert bf16 == defaults.replace(amp_dtype="bf16")
    assert compiled == bf16.replace(compile="default")
    assert recipe == compiled.replace(num_workers=2, persistent_workers=True, prefetch_factor=4)


def test_the_lab_points_to_profile_and_after_apply_to_check() -> None:
    (alone,) = next_steps(Path("a.py"), None)
    assert alone.endswith("autotune profile --adapter a.py")
    profile, check = next_steps(Path("a.py"), Path("best.yaml"))[1:]
    assert profile.endswith("autotune profile --adapter a.py --config best.yaml")
    assert "after autotune apply" in check
    assert check.endswith("autotune check --adapter a.py --against best.yaml")


@pytest.mark.parametrize(("device", "pinned"), [("cpu", False), ("cuda", True)])
def test_hand_recipe_pins_memory_only_on_cuda(device: str, pinned: bool) -> None:
    recipe = lab_rows(Eight, device=device, cpus=16, tuned=None)[3]
    assert recipe.index == 4 and recipe.name == "hand recipe"
    assert recipe.config.pin_memory is pinned
    assert recipe.config.num_workers == 8  # half the cores


def test_hand_recipe_has_a_worker_on_one_core() -> None:
    assert lab_rows(Eight, device="cpu", cpus=1, tuned=None)[3].config.num_workers == 1


def test_rows_keep_the_global_batch() -> None:
    for row in lab_rows(Accumulating, device="cpu", cpus=2, tuned=None):
        assert row.config.batch_size * row.config.grad_accum == 32, row


# -- run_lab with a scripted runner ----------------------------------------------------------------------


class RecordingRunner(RunnerBase):
    def __init__(self, fail: set[int] | None = None) -> None:
        self.fail = fail or set()
        self.calls: list[tuple[int, Path, float, TrialRequest]] = []

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: Any = None) -> TrialResult:
        self.calls.append((request.number, trial_dir, timeout, request))
        if request.number in self.fail:
            return TrialResult(status=Status.ERROR, reason="RuntimeError: scripted")
        return TrialResult(status=Status.OK, throughput=100.0 * request.number + len(self.calls))


def lab(runner: RecordingRunner, tmp_path: Path, repeats: int, tuned: TrainConfig | None = TUNED,
        **kw: Any) -> tuple[list[LabRow], dict[int, list[TrialResult]]]:
    rows = lab_rows(Eight, device="cpu", cpus=2, tuned=tuned)
    results = run_lab(rows, adapter_path=Path("adapter.py"), device="cpu", runner=runner,
                      out=tmp_path, repeats=repeats, trial_timeout=123.0, measure=QUICK, **kw)
    return rows, results


def test_order_rotates_between_repeats(tmp_path: Path) -> None:
    runner = RecordingRunner()
    lab(runner, tmp_path, repeats=6)
    order = [n for n, *_ in runner.calls]
    assert order == [1, 2, 3, 4, 5,
                     2, 3, 4, 5, 1,
                     3, 4, 5, 1, 2,
                     4, 5, 1, 2, 3,
                     5, 1, 2, 3, 4,
                     1, 2, 3, 4, 5]  # a full turn, then again from row 1


def test_every_row_runs_once_per_round_in_its_own_folder(tmp_path: Path) -> None:
    runner = RecordingRunner()
    rows, results = lab(runner, tmp_path, repeats=3, tuned=None)
    assert {i: len(rs) for i, rs in results.items()} == {1: 3, 2: 3, 3: 3, 4: 3}
    folders = [d for _, d, _, _ in runner.calls]
    assert len(set(folders)) == len(folders) == 12
    assert tmp_path / "runs" / "row2-rep1" in folders
    for number, folder, timeout, request in runner.calls:
        row = rows[number - 1]
        assert folder.name.startswith(f"row{number}-rep")
        assert request.config == row.config
        assert request.diagnose is False
        assert request.measure == QUICK and request.device == "cpu"
        assert timeout == 123.0
        # The compile counts apart, as in a search (the runner applies it to compiled rows).
        assert request.compile_grace == 123.0


def test_on_result_sees_each_run_with_its_round(tmp_path: Path) -> None:
    runner = RecordingRunner()
    seen: list[tuple[int, int]] = []
    lab(runner, tmp_path, repeats=2, on_result=lambda row, rep, r: seen.append((row.index, rep)))
    assert seen == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0),
                    (2, 1), (3, 1), (4, 1), (5, 1), (1, 1)]


# -- summarize / to_markdown -------------------------------------------------------------------------------


def ok(value: float, **kw: Any) -> TrialResult:
    return TrialResult(status=Status.OK, throughput=value, **kw)


@pytest.fixture
def rows() -> list[LabRow]:
    return lab_rows(Eight, device="cpu", cpus=2, tuned=TUNED)


@pytest.fixture
def results() -> dict[int, list[TrialResult]]:
    return {
        1: [ok(100.0, peak_rss_mb=300.0), ok(110.0, peak_rss_mb=310.0), ok(90.0)],
        2: [ok(150.0), ok(160.0), ok(140.0)],
        3: [TrialResult(status=Status.ERROR, reason="InductorError: no compiler")] * 2
        + [TrialResult(status=Status.TIMEOUT, reason="killed")],
        4: [ok(200.0, compile_seconds=12.0), ok(220.0, compile_seconds=14.0),
            TrialResult(status=Status.OOM, reason="out of memory")],
        5: [ok(300.0, peak_reserved_mb=2048.0, peak_rss_mb=100.0), ok(330.0), ok(300.0)],
    }


def test_summarize_medians_spread_and_ratios(
    rows: list[LabRow], results: dict[int, list[TrialResult]]
) -> None:
    table = summarize(rows, results)
    by = {t["row"]: t for t in table}
    assert [t["row"] for t in table] == [1, 2, 3, 4, 5]
    assert by[1]["throughput"] == 100.0
    assert by[1]["spread"] == pytest.approx(0.2)  # (110 - 90) / 100
    assert by[1]["peak_mb"] == 310.0
    assert by[5]["peak_mb"] == 2048.0  # device memory first, when there is some
    assert by[4]["throughput"] == 210.0  # the OOM run is not a throughput
    assert by[4]["throughputs"] == [200.0, 220.0]
    assert by[4]["compile_seconds"] == 13.0
    assert by[4]["statuses"] == ["ok", "ok", "oom"]
    assert by[4]["reasons"] == ["out of memory"]
    assert by[3]["throughput"] is None and by[3]["spread"] is None
    assert by[3]["reasons"] == ["InductorError: no compiler", "killed"]
    assert by[3]["vs_defaults"] is None and by[3]["vs_best_recipe"] is None
    # x defaults: against row 1; x best of 2-4: against the best recipe row (row 4: 210).
    assert by[1]["vs_defaults"] == 1.0
    assert by[5]["vs_defaults"] == 3.0
    assert by[2]["vs_best_recipe"] == pytest.approx(150.0 / 210.0)
    assert by[4]["vs_best_recipe"] == 1.0
    assert by[5]["vs_best_recipe"] == pytest.approx(300.0 / 210.0)
    assert by[1]["config"] == TrainConfig(batch_size=8).to_dict()
    assert all(t["mfu"] is None for t in table)
    json.dumps(table)  # lab.json


def test_rows_whose_runs_disagree_are_warned_about_with_the_measured_cause(
    rows: list[LabRow]
) -> None:
    busy = Noise(seconds=10.0, cpus=2, other_cpu_seconds=12.0)
    results = {1: [ok(100.0), ok(104.0)],  # agree: no warning
               2: [ok(100.0), TrialResult(status=Status.OK, throughput=160.0, noise=busy)]}
    assert noise_warnings(rows, results, unit="samples") == [
        "row 2 (+ bf16 autocast): runs disagree by 1.6x (100 to 160 samples/s); likely cause: "
        "run 2: other processes kept 1.2 of the trial's 2 CPUs busy"]


def test_best_recipe_ignores_rows_1_and_5(rows: list[LabRow]) -> None:
    results = {1: [ok(1000.0)], 2: [ok(100.0)], 3: [ok(50.0)], 4: [ok(80.0)], 5: [ok(5000.0)]}
    by = {t["row"]: t for t in summarize(rows, results)}
    assert by[2]["vs_best_recipe"] == 1.0
    assert by[5]["vs_best_recipe"] == 50.0
    assert by[1]["vs_best_recipe"] == 10.0


def test_no_ratios_when_defaults_and_recipes_failed(rows: list[LabRow]) -> None:
    failed = [TrialResult(status=Status.OOM, reason="oom")]
    results = {1: failed, 2: failed, 3: failed, 4: failed, 5: [ok(300.0)]}
    by = {t["row"]: t for t in summarize(rows, results)}
    assert by[5]["throughput"] == 300.0
    assert by[5]["vs_defaults"] is None and by[5]["vs_best_recipe"] is None


@pytest.mark.parametrize(
    ("flops", "peak", "expected"),
    [(1e9, 1e12, 0.3), (None, 1e12, None), (1e9, None, None)],
    ids=["both", "no-flops", "no-peak"],
)
def test_mfu_only_with_flops_and_peak(
    rows: list[LabRow], results: dict[int, list[TrialResult]], flops: float | None,
    peak: float | None, expected: float | None,
) -> None:
    table = summarize(rows, results, flops_per_item=flops, peak_flops=peak)
    by = {t["row"]: t for t in table}
    if expected is None:
        assert all(t["mfu"] is None for t in table)
    else:
        assert by[5]["mfu"] == pytest.approx(expected)  # 300 items/s x 1 GFLOP / 1 TFLOP/s
        assert by[1]["mfu"] == pytest.approx(0.1)
        assert by[3]["mfu"] is None  # no throughput, no MFU


def test_markdown_has_one_line_per_row(
    rows: list[LabRow], results: dict[int, list[TrialResult]]
) -> None:
    table = summarize(rows, results)
    text = to_markdown(table, unit="samples", header="adapter: x")
    lines = text.splitlines()
    assert lines[0] == "adapter: x"
    body = [line for line in lines if line.startswith("| ") and line[2].isdigit()]
    assert len(body) == 5
    assert [line.split("|")[1].strip() for line in body] == [
        f"{r.index}. {r.name}" for r in rows]
    assert "median samples/s" in lines[1]
    assert "MFU" not in text
    row3 = body[2].split("|")
    assert "error" in row3[2] and "timeout" in row3[2]  # no throughput: what happened instead
    assert body[0].split("|")[6].strip() == "1.00"  # x defaults of row 1
    assert len(lines) == 1 + 2 + 5


def test_markdown_adds_mfu_column_when_known(
    rows: list[LabRow], results: dict[int, list[TrialResult]]
) -> None:
    table = summarize(rows, results, flops_per_item=1e9, peak_flops=1e12)
    text = to_markdown(table, unit="tokens")
    lines = text.splitlines()
    assert lines[0].rstrip(" |").endswith("MFU")
    assert "30.0%" in lines[2 + 4]
    assert len(lines) == 2 + 5


# -- one real run of the command ---------------------------------------------------------------------------


@pytest.mark.slow
def test_lab_command_on_cpu(tmp_path: Path) -> None:
    # Rows 3 and 4 compile (10-20 s each on two cores); the YAML row (5) is cheap.
    best = tmp_path / "best.yaml"
    best.write_text(yaml.safe_dump({"config": TUNED.to_dict()}))
    out = tmp_path / "lab"
    proc = run_autotune("lab", "--adapter", TEST_ADAPTERS / "tiny.py", "--config", best,
                        "--repeats", "1", "--device", "cpu", "--measure-seconds", "1",
                        "--out", out)
    assert proc.returncode == 0, failure(proc)
    data = json.loads((out / "lab.json").read_text())
    assert [r["row"] for r in data["rows"]] == [1, 2, 3, 4, 5]
    for row in data["rows"]:
        assert row["throughput"] and row["throughput"] > 0, row
        assert row["statuses"] == ["ok"]
    assert data["rows"][4]["config"] == TUNED.to_dict()
    assert data["rows"][3]["config"]["pin_memory"] is False
    assert data["rows"][2]["compile_seconds"] > 0  # compiled, and its compile time recorded
    assert data["meta"]["device"].startswith("cpu")
    assert data["meta"]["repeats"] == 1
    md = (out / "lab.md").read_text()
    assert len([line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]) == 5
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        f"row{i}-rep0" for i in range(1, 6)]
    assert "wrote" in proc.stdout


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
