"""`autotune check` as a user runs it: real fresh processes on a CPU adapter whose steps are
paced, unchanged and then slowed 15% by an environment variable (tests/adapters/paced.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO_ROOT, TEST_ADAPTERS

ADAPTER = TEST_ADAPTERS / "paced.py"
PACE = 8 / 0.05  # paced.py: batch 8 every STEP_SECONDS


@pytest.mark.slow
@pytest.mark.parametrize(("slowdown", "code", "state"), [("0", 0, "ok"), ("0.15", 1, "regression")])
def test_check_passes_unchanged_and_fails_slowed_15_percent(
        tmp_path: Path, slowdown: str, code: int, state: str) -> None:
    baseline = tmp_path / "baseline.json"  # what --update writes, at the adapter's pace
    baseline.write_text(json.dumps({
        "autotune_check_baseline": 1, "config": {"batch_size": 8},
        "throughput": {"value": PACE, "unit": "samples/s"},
        "provenance": {"device_kind": "cpu", "torch": torch.__version__}}))
    # Two short runs each (the default is 3 of up to 20 s): enough for a pace set by sleeps.
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "check", "--adapter", str(ADAPTER), "--against",
         str(baseline), "--runs", "2", "--measure-seconds", "1", "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "AUTOTUNE_TEST_SLOWDOWN": slowdown})
    assert proc.returncode == code, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert (result["state"], result["exit_code"], result["statuses"]) == (state, code, ["ok"] * 2)
    assert result["ratio"] == pytest.approx(1 / (1 + float(slowdown)), rel=0.04)
    assert "run 2/2:" in proc.stderr  # progress, apart from the JSON



@pytest.mark.parametrize("args", [
    ["--adapter", str(ADAPTER)],  # no --against
    ["--adapter", str(ADAPTER), "--against", "best.yaml", "--runs", "0"],
    ["--adapter", str(ADAPTER), "--against", "best.yaml", "--threshold", "1"],
    ["--adapter", str(ADAPTER), "--against", "best.yaml", "--typo"],  # an unknown flag
])
def test_a_usage_error_exits_2_not_1_which_means_a_regression(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from autotune.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["check", *args])
    assert exc.value.code == 2
    assert "usage: autotune check" in capsys.readouterr().err
