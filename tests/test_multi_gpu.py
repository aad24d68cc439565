"""`autotune search --gpus`: trials side by side, one per GPU, as real processes. CI has no GPUs,
so two are emulated (`AUTOTUNE_EMULATE_GPUS=2`, the trials train on the CPU); what each trial
process saw (its CUDA_VISIBLE_DEVICES, its CPUs, its DataLoader workers' CPUs, when it stepped) is
reported from inside it by tests/adapters/slot_probe.py."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
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
from autotune.contract.host import cpu_ids
from autotune.study.execution.layout import EMULATE_ENV
from autotune.study.store.records import read_records

PROBE = TEST_ADAPTERS / "slot_probe.py"
SLOT_DIR_ENV = "AUTOTUNE_TEST_SLOT_DIR"
CRASH_ENV = "AUTOTUNE_TEST_CRASH_GPU"
HANG_ENV = "AUTOTUNE_TEST_HANG"
SPACE = "num_workers: {low: 0, high: cores}\nbatch_size: {factors: [1, 2, 4, 8]}\n"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(cpu_ids()) < 2,
                       reason="pins two trials to CPUs of their own: needs Linux and 2 CPUs"),
]


def search_args(tmp_path: Path, *extra: str) -> list[str]:
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    return [sys.executable, "-m", "autotune", "search", "--adapter", str(PROBE), "--device", "cpu",
            "--gpus", "all", "--space", str(space), "--out", str(tmp_path / "out"),
            "--measure-seconds", "1", "--seed", "0", "--trial-timeout", "120", *extra]


def reports(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{kind}-*.json"))]


def test_two_gpus_run_trials_at_once_each_pinned_and_a_crash_stays_in_its_slot(
        tmp_path: Path) -> None:
    slots = tmp_path / "slots"
    slots.mkdir()
    # NCCL_NVLS_ENABLE stands for what a multi-GPU host must keep: trials only add to the
    # environment they inherit.
    env = {**os.environ, EMULATE_ENV: "2", SLOT_DIR_ENV: str(slots), CRASH_ENV: "1",
           "NCCL_NVLS_ENABLE": "0"}
    done = subprocess.run(search_args(tmp_path, "--trials", "4", "--confirm", "1",
                                      "--confirm-repeats", "1", "--confirm-measure-seconds", "1"),
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)

    host = cpu_ids()
    share = {"0": host[:len(host) // 2], "1": host[len(host) // 2:2 * (len(host) // 2)]}
    trials = reports(slots, "trial")
    assert {t["gpu"] for t in trials} == {"0", "1"}
    for t in trials:
        assert t["cpus"] == share[t["gpu"]], t  # pinned to its slot's CPUs, from inside
    workers = reports(slots, "worker")
    assert workers, "no trial had DataLoader workers: proves less"
    for w in workers:
        assert w["cpus"] == share[w["gpu"]], w  # workers inherit the pinning
    # Trials of the two slots overlapped in time.
    spans = [(t["gpu"], t["first"], t["last"]) for t in trials if not t.get("crashed")]
    assert any(a[0] != b[0] and a[1] < b[2] and b[1] < a[2]
               for a, b in itertools.combinations(spans, 2)), spans
    # The environment reached the trials (the fork servers' children) and kept what it had.
    for log in (tmp_path / "out").glob("forkserver-gpu*.log"):
        assert log.is_file()

    study = optuna.load_study(study_name="slot_probe",
                              storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    # The search's trials (the confirmation's runs are stored in the study too).
    records = [r for r in read_records(study) if r.state != TrialState.WAITING and r.search]
    # The first trial on GPU 1 crashed (a later trial of its config may copy the outcome).
    crashed = [r for r in records if r.status is Status.CRASHED and r.duplicate_of is None]
    assert len(crashed) == 1 and "SIGSEGV" in crashed[0].result.reason
    finished = [r for r in records if r.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == 4  # the other slot (and GPU 1's later trials) went on
    measured = [repr(r.config) for r in records if r.duplicate_of is None]
    assert len(measured) == len(set(measured))  # no config measured twice
    assert all(r.config.num_workers <= len(share["0"]) for r in records)  # the share bounds it

    best = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text())
    layout = best["layout"]
    assert layout["trials_at_once"] == 2 and layout["gpus"] == ["0", "1"]
    assert layout["cpus_per_trial"] == len(share["0"])
    assert "DDP job of 2 ranks" in layout["holds_for"]
    # Confirmation ran each config on both GPUs at once, as a 2-rank job would.
    runs = sorted((tmp_path / "out" / "confirm").iterdir())
    assert runs and all((run / "gpu0" / "result.json").is_file()
                        and (run / "gpu1" / "result.json").is_file() for run in runs)
    assert best["throughput"]["from"] == "median of the confirmation runs"


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_a_signal_stops_both_slots_and_leaves_no_process(tmp_path: Path,
                                                         sig: signal.Signals) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    tag = f"gpus-{uuid.uuid4().hex}"
    env = {**os.environ, EMULATE_ENV: "2", PID_DIR_ENV: str(pids), TAG_ENV: tag, HANG_ENV: "1"}
    log = tmp_path / "search.txt"
    with log.open("w") as out:
        proc = subprocess.Popen(search_args(tmp_path, "--trials", "4", "--confirm", "0"),
                                cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while (len(recorded_pids(pids, "step")) < 2 and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.1)
        assert len(recorded_pids(pids, "step")) == 2, ("both slots never hung", log.read_text())
        os.kill(proc.pid, sig)
        returncode = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        left = leftovers(recorded_pids(pids), tag)
        kill_all(recorded_pids(pids), tag)
    assert returncode == 128 + sig, log.read_text()
    assert left == {}, left  # trials, their workers and both fork servers are gone
    study = optuna.load_study(study_name="slot_probe",
                              storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    stopped = [r for r in read_records(study) if r.state != TrialState.WAITING]
    assert [(r.state, r.status) for r in stopped] == [(TrialState.FAIL, Status.INTERRUPTED)] * 2
