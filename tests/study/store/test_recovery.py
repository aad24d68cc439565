"""Trials a dead process left RUNNING are failed with a result that says why, through a real
storage (SQLite). The heartbeat's way, on a server, with starts queued again or taken over:
tests/study/store/test_claim.py."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autotune import Status, TrialResult
from autotune.study.store import records, recovery


@pytest.fixture
def study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s",
                               direction="maximize")


def test_a_stale_running_trial_is_failed_with_its_result(study: optuna.Study) -> None:
    study.ask()
    stale = study.ask()
    result = TrialResult(status=Status.INTERRUPTED, reason="the process stopped")
    recovery.fail(study, records.trial_id(study, stale.number), result)
    by_number = {r.number: r for r in records.read_records(study)}
    assert by_number[1].state == TrialState.FAIL and by_number[1].result == result
    assert by_number[0].state == TrialState.RUNNING


def test_only_the_trials_of_a_gone_process_on_this_host_are_failed(study: optuna.Study) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    owners = [{"host": socket.gethostname(), "pid": int(gone.stdout)},  # its process is gone
              None]  # this process's: alive
    for owner in owners:
        trial = study.ask()
        if owner is None:
            records.write_owner(trial)
        else:
            trial.set_user_attr("owner", owner)
    recovery.recover_stale(study)
    dead, live = records.read_records(study)
    assert dead.state == TrialState.FAIL and dead.status is Status.INTERRUPTED
    assert dead.result is not None and "stopped before it finished" in dead.result.reason
    assert live.state == TrialState.RUNNING and live.result is None
