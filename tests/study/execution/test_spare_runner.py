"""Confirmation runs in fresh processes started one run ahead (`study.spare`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import PID_DIR_ENV, TAG_ENV, kill_all, leftovers, process_state, recorded_pids

from autotune import MeasureSettings, Status, TrainConfig
from autotune.contract.request import SPARE_ENV, TrialRequest
from autotune.study.execution.spare_runner import SpareRunner

QUICK = MeasureSettings(window_seconds=0.02, budget_seconds=0.2, max_windows=5)


def _events(trial_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (trial_dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_each_run_is_a_fresh_process_started_during_the_one_before(
    tmp_path: Path, tiny_adapter: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    tag = f"spare-{uuid.uuid4().hex}"
    runner = SpareRunner(log=tmp_path / "spares.log", env={PID_DIR_ENV: str(pids), TAG_ENV: tag})
    # The allocator settings of each run reach it (the trial checks its environment).
    configs = [TrainConfig(batch_size=8), TrainConfig(batch_size=8, expandable_segments=True),
               TrainConfig(batch_size=8, max_split_size_mb=64)]
    handed: list[int] = []
    try:
        for i, config in enumerate(configs):
            request = TrialRequest(adapter=str(tiny_adapter), config=config, device="cpu",
                                   measure=QUICK, number=i, diagnose=False)
            result = runner.run(request, tmp_path / str(i), timeout=120)
            assert result.status is Status.OK, (result.reason, (tmp_path / "spares.log").read_text())
            assert runner.fallback_reason == ""
            paused = [e for e in _events(tmp_path / str(i)) if e["event"] == "spare_paused"]
            # The run stopped the next run's spare before its windows, and it was let go after.
            assert len(paused) == 1, _events(tmp_path / str(i))
            handed.append(int(paused[0]["pid"]))
            assert process_state(handed[-1]) not in (None, "T", "t")
            assert "Traceback" not in (tmp_path / str(i) / "log.txt").read_text()
    finally:
        runner.close()
        left = leftovers(recorded_pids(pids), tag)
        kill_all(recorded_pids(pids), tag)
    ran = recorded_pids(pids, "main")  # each run's process records itself
    assert len(ran) == len(configs)  # a fresh process each
    # Run i+1 is the process run i stopped (it was started while run i ran): every run but the
    # first was a spare handed over, and the last run's spare never ran.
    assert len(set(ran) - set(handed)) == 1 and set(handed[:-1]) < set(ran)
    assert handed[-1] not in ran
    assert left == {}, left  # closing the runner killed the spare left over


@pytest.mark.slow  # a fork server that fails to start, then a fresh trial process
def test_a_spare_that_cannot_start_falls_back_to_plain_fresh_processes(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no adapter here')\n")
    runner = SpareRunner(log=tmp_path / "spares.log")
    request = TrialRequest(adapter=str(broken), config=TrainConfig(batch_size=8), device="cpu",
                           measure=QUICK, number=0, diagnose=False)
    try:
        result = runner.run(request, tmp_path / "0", timeout=120)
    finally:
        runner.close()
    assert "no adapter here" in runner.fallback_reason
    # The run itself still happened, in a fresh process, and reports the adapter's own error.
    assert result.status is Status.ERROR and "no adapter here" in result.reason, result.reason
    assert "spares.log" in runner.fallback_reason


def test_the_spare_pid_is_only_paused_when_it_is_a_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.trial.spare import pause_spare

    # Two live processes, each leading its own group: one is not a spare, the other looks like
    # one (its command line names the zygote).
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    spare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                              "autotune.trial.zygote"], start_new_session=True)
    try:
        time.sleep(0.2)
        monkeypatch.setenv(SPARE_ENV, str(other.pid))
        assert pause_spare() is None
        assert process_state(other.pid) not in ("T", "t")
        monkeypatch.setenv(SPARE_ENV, str(spare.pid))
        assert pause_spare() == spare.pid
        deadline = time.monotonic() + 5
        while process_state(spare.pid) not in ("T", "t") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process_state(spare.pid) in ("T", "t")
    finally:
        for proc in (other, spare):
            proc.kill()
            proc.wait()
    monkeypatch.setenv(SPARE_ENV, "not a pid")
    assert pause_spare() is None
    monkeypatch.delenv(SPARE_ENV)
    assert pause_spare() is None


@pytest.mark.slow
def test_a_run_cut_at_its_limit_lets_the_next_spare_go_on_and_a_dead_spare_is_replaced(
    tmp_path: Path, tiny_adapter: Path
) -> None:
    tag = f"spare-{uuid.uuid4().hex}"
    runner = SpareRunner(log=tmp_path / "spares.log", env={TAG_ENV: tag})
    # One window of more steps than the run's limit holds (a window never ends before its
    # fewest steps): the run is cut at its limit while timing, after it stopped the next spare.
    # (Windows alone end before the limit; a window sized by time was sized from warm-up steps,
    # which on a busy machine were slow enough to make it short.)
    endless = MeasureSettings(window_seconds=60.0, budget_seconds=600.0, max_windows=100_000,
                              min_window_steps=100_000_000, tolerance=1e-9)
    try:
        request = TrialRequest(adapter=str(tiny_adapter), config=TrainConfig(batch_size=8),
                               device="cpu", measure=endless, number=0, diagnose=False)
        cut = runner.run(request, tmp_path / "0", timeout=15)
        assert cut.status is Status.TIMEOUT, cut.reason
        assert any(e["event"] == "spare_paused" for e in _events(tmp_path / "0"))
        spare = runner._next
        assert spare is not None and process_state(spare.proc.pid) not in ("T", "t", None)
        # The spare dies before its turn: the next run gets a new one, and runs.
        spare.proc.kill()
        spare.proc.wait()
        ok = runner.run(TrialRequest(adapter=str(tiny_adapter), config=TrainConfig(batch_size=8),
                                     device="cpu", measure=QUICK, number=1, diagnose=False),
                        tmp_path / "1", timeout=120)
        assert ok.status is Status.OK, ok.reason
        assert runner.fallback_reason == ""
    finally:
        runner.close()
        left = leftovers([], tag)
        kill_all([], tag)
    assert left == {}, left


@pytest.mark.slow
def test_a_gang_s_spares_outlive_the_run_that_started_them(tmp_path: Path, tiny_adapter: Path
                                                          ) -> None:
    from autotune.study.execution.slots import GangRunner

    pids = tmp_path / "pids"
    pids.mkdir()
    tag = f"gang-{uuid.uuid4().hex}"
    env = {PID_DIR_ENV: str(pids), TAG_ENV: tag}
    gang = GangRunner([SpareRunner(log=tmp_path / f"spares-{n}.log", env=env) for n in "ab"],
                      ["a", "b"])
    try:
        for i in range(2):
            request = TrialRequest(adapter=str(tiny_adapter), config=TrainConfig(batch_size=8),
                                   device="cpu", measure=QUICK, number=i, diagnose=False)
            result = gang.run(request, tmp_path / str(i), timeout=120)
            assert result.status is Status.OK, result.reason
        handed = {name: [int(e["pid"]) for i in range(2)
                         for e in _events(tmp_path / str(i) / name) if e["event"] == "spare_paused"]
                  for name in "ab"}
    finally:
        gang.close()
        left = leftovers(recorded_pids(pids), tag)
        kill_all(recorded_pids(pids), tag)
    ran = set(recorded_pids(pids, "main"))
    # Each slot's second run is the spare its first run stopped: it lived past that run.
    for name in "ab":
        assert len(handed[name]) == 2 and handed[name][0] in ran, (name, handed, ran)
    assert len(ran) == 4 and left == {}, (ran, left)
