"""Report functions on hand-built Optuna trials: rows, CSV, best and baseline."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from optuna.trial import FrozenTrial, TrialState, create_trial

from autotune import TrainConfig
from autotune.report import COLUMNS, KNOBS, best_and_baseline, pick_winner, rows_to_csv, trial_rows


def config(**changes: Any) -> dict[str, Any]:
    return TrainConfig(batch_size=8).replace(**changes).to_dict()


def result(status: str, throughput: float | None = None, **extra: Any) -> dict[str, Any]:
    return {"status": status, "throughput": throughput, "unit": "samples", "reason": "",
            "log": "", **extra}


def trial(
    number: int,
    *,
    state: TrialState = TrialState.COMPLETE,
    value: float | None = None,
    attrs: dict[str, Any] | None = None,
    feasible: bool | None = None,
) -> FrozenTrial:
    constraints = None if feasible is None else {"usable": 0.0 if feasible else 1.0}
    t = create_trial(state=state, value=value, user_attrs=attrs or {}, constraints=constraints)
    t.number = number
    return t


def ok(number: int, value: float, baseline: bool = False, **changes: Any) -> FrozenTrial:
    attrs: dict[str, Any] = {"config": config(**changes),
                             "result": result("ok", value, spread=0.01, converged=True)}
    if baseline:
        attrs["baseline"] = True
    return trial(number, value=value, attrs=attrs, feasible=True)


def failed(number: int, status: str, **changes: Any) -> FrozenTrial:
    attrs = {"config": config(**changes), "result": result(status, reason=f"{status} happened")}
    return trial(number, value=0.0, attrs=attrs, feasible=False)


@pytest.fixture
def trials() -> list[FrozenTrial]:
    return [
        ok(0, 100.0, baseline=True),
        ok(1, 250.0, batch_size=32, amp_dtype="bf16"),
        failed(2, "oom", batch_size=64),
        ok(3, 180.0, batch_size=16),
        trial(4, state=TrialState.FAIL,
              attrs={"config": config(num_workers=2), "result": result("interrupted")}),
        trial(5, state=TrialState.RUNNING, attrs={"config": config(batch_size=16, num_workers=1)}),
        trial(6, value=1.0),  # told by someone else: no config, not ours to report
        trial(7, value=180.0, attrs={**ok(3, 180.0, batch_size=16).user_attrs, "duplicate_of": 3},
              feasible=True),
    ]


# -- best and baseline ----------------------------------------------------------------------------------


def test_best_and_baseline(trials: list[FrozenTrial]) -> None:
    best, baseline = best_and_baseline(trials)
    assert best is not None and best.number == 1
    assert baseline == 100.0


def test_best_ignores_trials_that_did_not_run_ok() -> None:
    odd = failed(1, "oom")
    odd.value = 1e9  # a value on a failed trial must not make it the best
    best, baseline = best_and_baseline([ok(0, 100.0, baseline=True), odd])
    assert best is not None and best.number == 0
    assert baseline == 100.0


def test_no_baseline_when_it_failed() -> None:
    base = failed(0, "oom")
    base.user_attrs["baseline"] = True
    best, baseline = best_and_baseline([base, ok(1, 50.0)])
    assert best is not None and best.number == 1
    assert baseline is None


def test_nothing_ok() -> None:
    assert best_and_baseline([failed(0, "error"), failed(1, "timeout")]) == (None, None)
    assert best_and_baseline([]) == (None, None)


def test_pick_winner_without_confirmation(trials: list[FrozenTrial]) -> None:
    winner = pick_winner(trials, {})
    assert winner is not None
    assert winner.trial.number == 1
    assert winner.throughput == 250.0 and winner.baseline == 100.0
    assert winner.speedup == pytest.approx(2.5)
    assert pick_winner([failed(0, "oom")], {}) is None


def test_pick_winner_from_confirmation_runs(trials: list[FrozenTrial]) -> None:
    # Re-measured, trial 3 beats trial 1 (whose search window was lucky).
    confirmation = [
        {"trial": 3, "baseline": False, "median": 200.0, "throughputs": [199.0, 201.0]},
        {"trial": 1, "baseline": False, "median": 190.0, "throughputs": [185.0, 195.0]},
        {"trial": 0, "baseline": True, "median": 95.0, "throughputs": [94.0, 96.0]},
    ]
    winner = pick_winner(trials, {"confirmation": confirmation})
    assert winner is not None
    assert winner.trial.number == 3
    assert winner.throughput == 200.0 and winner.baseline == 95.0


# -- rows -----------------------------------------------------------------------------------------------


def test_trial_rows(trials: list[FrozenTrial]) -> None:
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
    assert {k: by_number[3][k] for k in KNOBS} == config(batch_size=16)


def test_trial_rows_without_baseline(trials: list[FrozenTrial]) -> None:
    assert all(r["speedup"] is None for r in trial_rows(trials, baseline=None))


def test_rows_to_csv(trials: list[FrozenTrial]) -> None:
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
    t = ok(0, 12345.678901234, baseline=True)
    t.user_attrs["result"]["spread"] = 0.0123456789
    row = next(csv.DictReader(io.StringIO(rows_to_csv(trial_rows([t], 12345.678901234)))))
    assert row["throughput"] == "12345.7"
    assert row["spread"] == "0.0123457"


def test_rows_to_csv_empty() -> None:
    assert rows_to_csv([]).strip() == ",".join(COLUMNS)


# -- host CPU ---------------------------------------------------------------------------------------


def test_host_cpu_goes_into_rows_and_best_yaml_with_a_steal_warning(tmp_path: Any) -> None:
    from pathlib import Path

    from autotune.report import Winner, best_document
    from autotune.search import SearchSettings

    def measured(number: int, steal: float) -> FrozenTrial:
        t = ok(number, 300.0, num_workers=4)
        t.user_attrs["result"]["extra"] = {"host_cpu": {"busy_fraction": 0.96,
                                                        "steal_fraction": steal}}
        return t

    noisy, quiet = measured(1, 0.12), measured(2, 0.01)
    rows = {r["number"]: r for r in trial_rows([ok(0, 100.0, baseline=True), noisy], 100.0)}
    assert rows[1]["cpu_busy_fraction"] == 0.96 and rows[1]["cpu_steal_fraction"] == 0.12
    assert rows[0]["cpu_busy_fraction"] is None  # not measured: an empty cell, not an error

    settings = SearchSettings(adapter=Path("a.py"), space_source="s.yaml", device="cpu",
                              out=Path(tmp_path), storage=str(Path(tmp_path) / "s.db"),
                              study_name="t")

    def measurement(t: FrozenTrial) -> dict[str, Any]:
        winner = Winner(trial=t, throughput=300.0, baseline=100.0, confirmation=None)
        return best_document(winner, {"unit": "samples"}, settings)["measurement"]

    assert measurement(noisy)["cpu_busy_fraction"] == 0.96
    assert "12% of the CPUs' time" in measurement(noisy)["warning"]
    assert measurement(quiet)["cpu_steal_fraction"] == 0.01
    assert "warning" not in measurement(quiet)
