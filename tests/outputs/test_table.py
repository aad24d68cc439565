"""One flat row per trial (trials.csv, the plot, `show`), from hand-built stored trials."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from helpers import stored_trial
from optuna.trial import TrialState

from autotune import TrainConfig
from autotune.contract.config import KNOBS
from autotune.outputs.table import COLUMNS, rows_to_csv, trial_rows
from autotune.study.confirmation.winner import pick_winner
from autotune.study.store.records import TrialRecord
from autotune.study.store.study_attrs import ConfirmationEntry

KNOB_NAMES = tuple(spec.name for spec in KNOBS)


def config(**changes: Any) -> dict[str, Any]:
    return TrainConfig(batch_size=8).replace(**changes).to_dict()


def result(status: str, throughput: float | None = None, **fields: Any) -> dict[str, Any]:
    return {"status": status, "throughput": throughput, "unit": "samples", "reason": "",
            "log": "", **fields}


def ok(number: int, value: float, baseline: bool = False, *, fields: dict[str, Any] | None = None,
       **changes: Any) -> TrialRecord:
    attrs: dict[str, Any] = {"config": config(**changes),
                             "result": result("ok", value, **{"spread": 0.01, "converged": True,
                                                              **(fields or {})})}
    if baseline:
        attrs.update(role="baseline", baseline=True)
    return stored_trial(number, value=value, attrs=attrs)


def failed(number: int, status: str, **changes: Any) -> TrialRecord:
    attrs = {"config": config(**changes), "result": result(status, reason=f"{status} happened")}
    return stored_trial(number, value=0.0, attrs=attrs)


@pytest.fixture
def trials() -> list[TrialRecord]:
    duplicate = {"config": config(batch_size=16),
                 "result": result("ok", 180.0, spread=0.01, converged=True), "duplicate_of": 3}
    return [
        ok(0, 100.0, baseline=True),
        ok(1, 250.0, batch_size=32, amp_dtype="bf16"),
        failed(2, "oom", batch_size=64),
        ok(3, 180.0, batch_size=16),
        stored_trial(4, state=TrialState.FAIL,
                     attrs={"config": config(num_workers=2), "result": result("interrupted")}),
        stored_trial(5, state=TrialState.RUNNING,
                     attrs={"config": config(batch_size=16, num_workers=1)}),
        stored_trial(6, value=1.0),  # told by someone else: no config, not ours to report
        stored_trial(7, value=180.0, attrs=duplicate),
    ]


def test_trial_rows(trials: list[TrialRecord]) -> None:
    rows = trial_rows(trials, baseline=100.0)
    by_number = {r["number"]: r for r in rows}
    assert list(by_number) == [0, 1, 2, 3, 4, 5, 7]  # trial 6 has no config
    for r in rows:
        assert set(COLUMNS) <= set(r)

    assert by_number[0]["baseline"] is True and by_number[1]["baseline"] is False
    assert by_number[0]["speedup"] == pytest.approx(1.0)
    assert by_number[1]["speedup"] == pytest.approx(2.5)
    assert by_number[1]["amp_dtype"] == "bf16" and by_number[1]["batch_size"] == 32
    assert by_number[1]["throughput"] == 250.0 and by_number[1]["converged"] is True

    assert by_number[2]["status"] == "oom" and by_number[2]["state"] == "COMPLETE"
    assert by_number[2]["speedup"] is None and by_number[2]["reason"] == "oom happened"
    assert by_number[4]["status"] == "interrupted" and by_number[4]["state"] == "FAIL"
    assert by_number[5]["status"] == "running" and by_number[5]["throughput"] is None
    assert by_number[7]["reason"] == "same config as trial 3: not re-run"
    assert {k: by_number[3][k] for k in KNOB_NAMES} == config(batch_size=16)


def test_columns_hold_every_knob_in_the_tables_order() -> None:
    assert COLUMNS[:4] == ("number", "state", "status", "baseline")
    assert COLUMNS[4:4 + len(KNOB_NAMES)] == KNOB_NAMES
    assert len(set(COLUMNS)) == len(COLUMNS)


def test_every_row_has_the_studys_unit(trials: list[TrialRecord]) -> None:
    # A trial pruned or cut by the parent knows no unit ("samples", TrialResult's default);
    # the study measures one (a "rows" adapter's pruned trial read "27431.7,samples").
    rows = trial_rows(trials, baseline=100.0, unit="rows")
    assert {r["unit"] for r in rows} == {"rows"}
    assert {r["unit"] for r in trial_rows(trials, baseline=100.0) if r["throughput"]} == {"samples"}


def test_trial_rows_without_baseline(trials: list[TrialRecord]) -> None:
    assert all(r["speedup"] is None for r in trial_rows(trials, baseline=None))


def test_rows_to_csv(trials: list[TrialRecord]) -> None:
    rows = trial_rows(trials, baseline=100.0)
    text = rows_to_csv(rows)
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == list(COLUMNS)
    parsed = list(reader)
    assert len(parsed) == len(rows) == 7
    first = parsed[0]
    assert first["number"] == "0" and first["status"] == "ok" and first["baseline"] == "True"
    assert first["prefetch_factor"] == ""  # None is an empty cell
    assert first["max_split_size_mb"] == ""
    assert float(parsed[1]["throughput"]) == 250.0
    assert parsed[1]["speedup"] == "2.5"
    assert parsed[5]["status"] == "running"


def test_rows_to_csv_formats_floats_compactly() -> None:
    t = ok(0, 12345.678901234, baseline=True, fields={"spread": 0.0123456789})
    row = next(csv.DictReader(io.StringIO(rows_to_csv(trial_rows([t], 12345.678901234)))))
    assert row["throughput"] == "12345.7"
    assert row["spread"] == "0.0123457"


def test_rows_to_csv_empty() -> None:
    assert rows_to_csv([]).strip() == ",".join(COLUMNS)


def test_diagnosis_and_host_cpu_go_into_rows() -> None:
    diagnosis = {"verdict": "input-bound", "suggestion": "more workers", "throughput": 300.0,
                 "loader_rate": 310.0, "compute_rate": 2000.0, "data_wait_fraction": 0.6,
                 "gpu_busy_fraction": None, "cpu_busy_fraction": 0.96}
    measured = ok(1, 300.0, num_workers=4, fields={
        "diagnosis": diagnosis, "host_cpu": {"busy_fraction": 0.96, "steal_fraction": 0.12}})
    rows = {r["number"]: r for r in trial_rows([ok(0, 100.0, baseline=True), measured], 100.0)}
    assert rows[1]["verdict"] == "input-bound"
    assert rows[1]["loader_rate"] == 310.0 and rows[1]["compute_rate"] == 2000.0
    assert rows[1]["gpu_busy_fraction"] is None
    assert rows[1]["cpu_busy_fraction"] == 0.96 and rows[1]["cpu_steal_fraction"] == 0.12
    # Not measured: empty cells, not errors.
    assert rows[0]["verdict"] is None and rows[0]["cpu_busy_fraction"] is None


def test_legacy_results_with_extra_still_fill_their_columns() -> None:
    # A study written before the typed fields kept these under the result's "extra".
    old = ok(1, 300.0, fields={"extra": {
        "diagnosis": {"verdict": "compute-bound", "suggestion": "", "throughput": 300.0,
                      "loader_rate": 9000.0, "compute_rate": 310.0, "data_wait_fraction": 0.0,
                      "gpu_busy_fraction": 0.9},
        "host_cpu": {"busy_fraction": 0.5, "steal_fraction": 0.0}}})
    row = trial_rows([old], None)[0]
    assert row["verdict"] == "compute-bound" and row["gpu_busy_fraction"] == 0.9
    assert row["cpu_busy_fraction"] == 0.5


def test_the_measured_noise_goes_into_rows() -> None:
    noise = {"seconds": 10.0, "cpus": 4, "other_cpu_seconds": 15.0,
             "busiest": [{"name": "pytest", "pid": 41, "cpu_seconds": 9.0},
                         {"name": "python3", "pid": 42, "cpu_seconds": 6.0}],
             "gpu_others": ["python3 (77)"], "gpu_clock_ratio": 0.8,
             "gpu_limits": ["sw_power_cap"], "cpu_throttle_events": 3}
    row = trial_rows([ok(0, 100.0, fields={"noise": noise})], None)[0]
    assert row["noise_other_cpus"] == 1.5  # 15 CPU-seconds over 10 s
    assert row["noise_busiest"] == "pytest (41); python3 (42)"
    assert row["noise_gpu_others"] == "python3 (77)"
    assert (row["noise_gpu_clock_ratio"], row["noise_gpu_limits"],
            row["noise_cpu_throttle_events"]) == (0.8, "sw_power_cap", 3)
    quiet = trial_rows([ok(1, 100.0)], None)[0]  # not measured: empty cells
    assert all(quiet[c] is None for c in COLUMNS if c.startswith("noise_"))
    assert sum(c.startswith("noise_") for c in COLUMNS) == 6


def test_phase_seconds_go_into_rows_beside_the_measured_warmup() -> None:
    phases = {"start": 2.5, "import": 0.5, "model": 0.25, "dataset": 0.125, "first_batch": 2.0,
              "warmup": 4.25, "windows": 3.0, "diagnosis": 1.0}
    row = trial_rows([ok(0, 100.0, fields={"phases": phases, "warmup_seconds": 4.0})], None)[0]
    assert (row["start_seconds"], row["import_seconds"], row["model_seconds"],
            row["dataset_seconds"], row["first_batch_seconds"], row["windows_seconds"],
            row["diagnosis_seconds"]) == (2.5, 0.5, 0.25, 0.125, 2.0, 3.0, 1.0)
    assert row["warmup_seconds"] == 4.0  # the result's own, one column
    assert COLUMNS.count("warmup_seconds") == 1


def test_the_winner_row_is_the_confirmed_winners_record() -> None:
    recs = [ok(0, 100.0, baseline=True), ok(1, 300.0, batch_size=16),
            stored_trial(2, value=290.0, attrs={"config": config(batch_size=16), "role": "confirm",
                                                "confirms": 1, "result": result("ok", 290.0)}),
            stored_trial(3, value=310.0, attrs={"config": config(batch_size=16), "role": "confirm",
                                                "confirms": 1, "result": result("ok", 310.0)}),
            stored_trial(4, value=300.0000001, attrs={"config": config(batch_size=16),
                                                      "role": "winner", "confirms": 1,
                                                      "result": result("ok", 300.0)})]
    entries = [ConfirmationEntry(trial=1, baseline=False, search_throughput=300.0,
                                 throughputs=(290.0, 310.0), median=300.0, spread=None,
                                 statuses=("ok", "ok")),
               ConfirmationEntry(trial=0, baseline=True, search_throughput=100.0,
                                 throughputs=(100.0,), median=100.0, spread=None,
                                 statuses=("ok",))]
    winner = pick_winner(recs, entries)
    rows = {r["number"]: r for r in trial_rows(recs, 100.0, winner)}
    assert [n for n, r in rows.items() if r["winner"]] == [4]
    assert rows[4]["role"] == "winner" and rows[4]["confidence"] == "high"
    assert rows[1]["confirmed_median"] == 300.0 and rows[1]["confirmed_runs"] == 2
    assert rows[0]["confirmed_runs"] == 1 and rows[2]["confirmed_median"] is None
    assert (rows[2]["role"], rows[2]["confirms"]) == ("confirm", 1)
    assert rows[3]["speedup"] == 3.1  # a fresh run against the baseline's fresh median
    # Unconfirmed (the confirmation is stale), the search's fastest trial is the one marked.
    stale = trial_rows(recs, 100.0, pick_winner(recs, None))
    assert [r["number"] for r in stale if r["winner"]] == [1]


def test_recompiles_and_shapes_go_into_the_csv() -> None:
    t = ok(0, 100.0, baseline=True, fields={
        "recompiles": 2, "recompile_seconds": 3.5, "dynamic_shapes": True, "shapes_vary": True,
        "shape_range": "input_ids[1] 512-1024", "shape_count": 437, "rising_windows": 5,
        "new_shape_windows": 3})
    row = next(csv.DictReader(io.StringIO(rows_to_csv(trial_rows([t], 100.0)))))
    assert row["recompiles"] == "2" and row["recompile_seconds"] == "3.5"
    assert row["dynamic_shapes"] == "True" and row["shapes_vary"] == "True"
    assert row["shape_range"] == "input_ids[1] 512-1024" and row["shape_count"] == "437"
    assert row["rising_windows"] == "5"  # windows dropped as a warm-up still climbing
    assert row["new_shape_windows"] == "3"  # windows set apart for a shape's first run


def test_a_trial_of_one_window_has_no_spread_to_show() -> None:
    # A held-out stream's trial measured one window and showed "0.0%*" (2-CPU VM, 2026-11-28).
    one = ok(0, 100.0, baseline=True, fields={"spread": 0.0, "windows": 1, "converged": False})
    two = ok(1, 100.0, fields={"spread": 0.0, "windows": 2})
    rows = trial_rows([one, two], 100.0)
    assert rows[0]["spread"] is None and rows[1]["spread"] == 0.0
