"""Searches on several hosts sharing one study on a real PostgreSQL server (tests/postgres.py):
the same `autotune search` command runs twice at once, one is killed with SIGKILL while a trial
of it runs, and the other steps over its trial (failed by Optuna's heartbeat check), finishes
the study without measuring any config twice, and confirms; a host starting late confirms
nothing again. (Two live searches racing for the confirmation: tests/study/store/test_claim.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO

import optuna
import pytest
from helpers import (
    PID_DIR_ENV,
    REPO_ROOT,
    TAG_ENV,
    TEST_ADAPTERS,
    kill_all,
    leftovers,
    recorded_pids,
)
from optuna.trial import TrialState

from autotune import Status
from autotune.study.store.claim import read_claim
from autotune.study.store.records import read_records
from autotune.study.store.storage import open_storage

ADAPTER = TEST_ADAPTERS / "faults" / "stuck_host.py"
STUCK_ENV = "AUTOTUNE_TEST_STUCK"  # every trial of the search it is set for hangs in its step
TRIALS = 5


def open_when_made(url: str, deadline: float) -> optuna.Study:
    """The shared study, once the first search has made it."""
    storage = open_storage(url)
    while True:
        try:
            return optuna.load_study(study_name="shared", storage=storage)
        except KeyError:  # Optuna: no study of that name yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes from /proc")
def test_two_hosts_one_killed_mid_trial_and_a_late_one(postgres_url: str, tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("batch_size: {factors: [0.5, 1, 2, 4]}\n")  # with the effective batch free
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    tag = f"hosts-{uuid.uuid4().hex}"

    def host(name: str, seed: int, **env: str) -> tuple[subprocess.Popen[bytes], IO[str]]:
        log = (tmp_path / f"{name}.txt").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "autotune", "search", "--adapter", str(ADAPTER),
             "--device", "cpu", "--space", str(space), "--vary-global-batch",
             "--storage", postgres_url, "--study-name", "shared", "--out", str(tmp_path / name),
             "--trials", str(TRIALS), "--seed", str(seed), "--measure-seconds", "1",
             "--trial-timeout", "300", "--heartbeat-interval", "1", "--grace-period", "2",
             "--no-prune", "--confirm", "2", "--confirm-repeats", "1",
             "--confirm-measure-seconds", "1"],
            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, TAG_ENV: tag, PID_DIR_ENV: str(pid_dir), "OMP_NUM_THREADS": "1",
                 **env},
            start_new_session=True,  # its own process group, killed whole below
        )
        return proc, log

    hosts: dict[str, tuple[subprocess.Popen[bytes], IO[str]]] = {}
    try:
        # The same command on two hosts: host a hangs in the first trial it takes (the
        # baseline), host b runs beside it.
        hosts["a"] = host("a", 0, **{STUCK_ENV: "1"})
        deadline = time.monotonic() + 300  # a loaded machine is slow
        while not recorded_pids(pid_dir, "step") and time.monotonic() < deadline \
                and hosts["a"][0].poll() is None:
            time.sleep(0.1)
        assert recorded_pids(pid_dir, "step"), (tmp_path / "a.txt").read_text()
        hosts["b"] = host("b", 1)
        pids = {name: proc.pid for name, (proc, _) in hosts.items()}
        # Once host b runs a trial beside it, host a dies. (Host b may be waiting for host a's
        # trial: it does not measure a config that another search is measuring.)
        study = open_when_made(postgres_url, deadline)
        while time.monotonic() < deadline and not any(
                r.owner and r.owner["pid"] == pids["b"] for r in read_records(study)):
            time.sleep(0.2)
        os.killpg(pids["a"], signal.SIGKILL)
        codes = {name: proc.wait(timeout=180) for name, (proc, _) in hosts.items()}
        # A host starting late, when the study is done: no trial, no second confirmation.
        hosts["late"] = host("late", 2)
        codes["late"] = hosts["late"][0].wait(timeout=120)
    finally:
        for proc, log in hosts.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
        left = leftovers(recorded_pids(pid_dir), tag, wait=10)
        kill_all(recorded_pids(pid_dir), tag)
    logs = {name: " ".join((tmp_path / f"{name}.txt").read_text().split()) for name in hosts}
    assert codes == {"a": -signal.SIGKILL, "b": 0, "late": 0}, logs
    assert left == {}, left  # host a's fork server and stuck trial died with it

    trials = read_records(study)
    assert sorted(t.number for t in trials) == list(range(len(trials)))  # each recorded once
    assert not [t.number for t in trials if t.state == TrialState.RUNNING]
    # The trial host a was running when it died: failed by host b's heartbeat check.
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1, [(t.number, t.state, t.status, t.owner) for t in trials]
    dead = failed[0]
    assert dead.owner is not None and dead.owner["pid"] == pids["a"]
    assert dead.status is Status.INTERRUPTED and dead.result is not None
    assert "stopped sending heartbeats" in dead.result.reason
    # Host b finished the study; no config was measured twice.
    finished = [t for t in trials if t.search and t.state in (TrialState.COMPLETE,
                                                              TrialState.PRUNED)]
    assert len(finished) >= TRIALS
    assert {t.owner["pid"] for t in finished if t.owner} == {pids["b"]}
    measured = [t.config for t in finished if t.duplicate_of is None]
    assert len(measured) == len(set(measured)), measured
    assert dead.role == "baseline"  # the first trial host a took
    # Measured again by host b, once: queued again, or taken over by b's trial of the same
    # config that was waiting for it.
    baselines = [t for t in finished if t.baseline]
    assert len(baselines) == 1 and baselines[0].duplicate_of is None, baselines
    # Host b confirmed, once; the late host said so and ran nothing.
    assert (tmp_path / "b" / "confirm").is_dir() and not (tmp_path / "late" / "confirm").exists()
    claim = read_claim(study)
    assert claim is not None and claim.state == "finished" and claim.pid == pids["b"]
    assert f"done by another search (host {claim.host}, pid {pids['b']})" in logs["late"], logs
    assert "(5 trial(s) done before)" in logs["late"]
    assert len(read_records(study)) == len(trials)
