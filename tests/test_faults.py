"""Fault injection: each kind of broken trial ends with its own status, keeps its log, leaves no
process behind, and the study goes on to a best.yaml from a good trial.

Each fault has a tiny adapter in tests/adapters/faults/ (or an existing test adapter) that
breaks only in some configs (above batch size 8, or with DataLoader workers), so a two-trial
search holds the baseline (good) and the fault. The six searches are real `python -m autotune`
processes, started together to keep the wall time down on a small machine.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import optuna
import pytest
import yaml
from helpers import (
    PID_DIR_ENV,
    REPO_ROOT,
    TAG_ENV,
    TEST_ADAPTERS,
    csv_rows,
    kill_all,
    leftovers,
    recorded_pids,
    run_autotune,
)
from optuna.trial import TrialState

from autotune import Status, load_config
from autotune.study.store.records import TrialRecord, read_records

FAULT_ADAPTERS = TEST_ADAPTERS / "faults"

# Trial 0 is the baseline (batch 8, no workers). Trial 1 takes the other value: in WORKER_SPACE
# it is the hand recipe (a worker); in BATCH_SPACE, where the recipe is the baseline, the
# sampler's with --seed 0 (checked by each test, so a change fails loudly instead of proving
# nothing).
BATCH_SPACE = "batch_size: {factors: [1, 4]}\n"
WORKER_SPACE = "num_workers: {choices: [0, 1]}\n"
# Long enough for the baseline to finish while six searches share two cores (it took 17 s
# here); a hang costs this.
HANG_LIMIT = 30
NO_LIMIT = 120


@dataclasses.dataclass(frozen=True)
class Fault:
    adapter: Path
    space: str
    knob: str
    value: int
    """The config value of trial 1, where the fault triggers."""
    status: str
    reason: tuple[str, ...]
    """Fragments the recorded reason must contain."""
    trial_timeout: int = NO_LIMIT
    records_pids: bool = True
    workers: bool = False
    """Whether the fault trial starts DataLoader workers (their pids are recorded too)."""


FAULTS: dict[str, Fault] = {
    "oom": Fault(TEST_ADAPTERS / "oom_above.py", BATCH_SPACE, "batch_size", 32, "oom",
                 ("OutOfMemoryError", "CUDA out of memory"), records_pids=False),
    "segfault": Fault(FAULT_ADAPTERS / "segfault.py", BATCH_SPACE, "batch_size", 32, "crashed",
                      ("SIGSEGV",)),
    "hang-step": Fault(FAULT_ADAPTERS / "hang_step.py", BATCH_SPACE, "batch_size", 32, "timeout",
                       (f"{HANG_LIMIT} s trial limit",), trial_timeout=HANG_LIMIT),
    "hang-worker": Fault(TEST_ADAPTERS / "hang_worker.py", WORKER_SPACE, "num_workers", 1,
                         "timeout", (f"{HANG_LIMIT} s trial limit",), trial_timeout=HANG_LIMIT,
                         workers=True),
    "nan": Fault(FAULT_ADAPTERS / "nan_loss.py", BATCH_SPACE, "batch_size", 32, "nan",
                 ("not finite",)),
    "worker-error": Fault(FAULT_ADAPTERS / "worker_error.py", WORKER_SPACE, "num_workers", 1,
                          "error", ("ValueError",), workers=True),
}


@dataclasses.dataclass
class FaultRun:
    fault: Fault
    out: Path
    pid_dir: Path
    tag: str
    returncode: int | None = None
    output: str = ""
    leftovers: dict[int, str | None] = dataclasses.field(default_factory=dict)
    """Processes of the search still there a few seconds after it ended, with their state."""


# -- processes ------------------------------------------------------------------------------------------


def all_recorded(pid_dir: Path) -> list[int]:
    return [p for kind in ("main", "worker", "step") for p in recorded_pids(pid_dir, kind)]


# -- the six searches -------------------------------------------------------------------------------------


def search_command(fault: Fault, space: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "autotune", "search", "--adapter", str(fault.adapter),
        "--device", "cpu", "--space", str(space), "--trials", "2", "--out", str(out),
        "--measure-seconds", "1", "--confirm", "0", "--seed", "0",
        "--trial-timeout", str(fault.trial_timeout),
    ]


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, FaultRun]]:
    """Run one two-trial search per fault, all at once; wait; look for leftover processes."""
    runs: dict[str, FaultRun] = {}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, IO[str]] = {}
    try:
        for name, fault in FAULTS.items():
            root = tmp_path_factory.mktemp(name)
            space = root / "space.yaml"
            space.write_text(fault.space)
            run = FaultRun(fault=fault, out=root / "out", pid_dir=root / "pids",
                           tag=f"faults-{name}-{uuid.uuid4().hex}")
            run.pid_dir.mkdir()
            env = {**os.environ, PID_DIR_ENV: str(run.pid_dir), TAG_ENV: run.tag,
                   # Six searches on two cores: one compute thread each, or they thrash.
                   "OMP_NUM_THREADS": "1"}
            logs[name] = (root / "output.txt").open("w")
            procs[name] = subprocess.Popen(
                search_command(fault, space, run.out), cwd=REPO_ROOT, env=env,
                stdout=logs[name], stderr=subprocess.STDOUT,
            )
            runs[name] = run
        deadline = time.monotonic() + 240
        for name, proc in procs.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            logs[name].close()
            runs[name].returncode = proc.returncode
            runs[name].output = Path(logs[name].name).read_text()
        for run in runs.values():
            run.leftovers = leftovers(all_recorded(run.pid_dir), run.tag)
        yield runs
    finally:
        for name, proc in procs.items():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            logs[name].close()
        for run in runs.values():
            kill_all(all_recorded(run.pid_dir), run.tag)


def load_study(run: FaultRun) -> optuna.Study:
    storage = f"sqlite:///{(run.out / 'study.db').resolve()}"
    return optuna.load_study(study_name=run.fault.adapter.stem, storage=storage)


def load_trials(run: FaultRun) -> list[TrialRecord]:
    """The trials that ran (a guided search may leave follow-ups WAITING for its next run)."""
    return [t for t in read_records(load_study(run)) if t.state != TrialState.WAITING]


def describe(run: FaultRun) -> str:
    return f"exit {run.returncode}\n{run.output[-3000:]}"


# -- each fault --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_is_recorded_and_the_study_goes_on(fault_runs: dict[str, FaultRun], name: str) -> None:
    run = fault_runs[name]
    fault = run.fault
    assert run.returncode == 0, describe(run)
    assert "Traceback" not in run.output, describe(run)

    trials = load_trials(run)
    assert [t.number for t in trials] == [0, 1]
    base, faulty = trials
    assert faulty.config is not None
    assert getattr(faulty.config, fault.knob) == fault.value, (
        "trial 1 did not sample the faulting config: the test proves nothing", faulty.config)
    assert faulty.duplicate_of is None

    # The fault: a finished (COMPLETE) trial, infeasible, with its status and reason.
    result = faulty.result
    assert result is not None
    assert faulty.state == TrialState.COMPLETE
    assert result.status.value == fault.status, result
    for fragment in fault.reason:
        assert fragment in result.reason, result
    assert load_study(run).trials[1].constraints == {"usable": 1.0}
    assert faulty.value == 0.0
    assert result.throughput is None

    # Its log is kept where the result says.
    log = run.out / "trials" / "1" / "log.txt"
    assert log.is_file()
    assert result.log == str(log)
    assert (run.out / "trials" / "1" / "request.json").is_file()
    if fault.status == "error":
        text = log.read_text()
        assert "Traceback (most recent call last)" in text
        assert "ValueError: bad sample 3" in text

    # The study went on: the baseline ran ok and best.yaml reports it.
    assert base.state == TrialState.COMPLETE
    assert base.baseline
    assert base.status is Status.OK, base.result
    best = yaml.safe_load((run.out / "best.yaml").read_text())
    assert best["measurement"]["trial"] == 0
    assert load_config(run.out / "best.yaml").config == base.config
    assert best["throughput"]["value"] == pytest.approx(base.value, rel=1e-3)
    rows = csv_rows(run.out / "trials.csv")
    assert [(r["number"], r["status"]) for r in rows] == [("0", "ok"), ("1", fault.status)]
    assert (run.out / "throughput.png").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_leaves_no_process_behind(fault_runs: dict[str, FaultRun], name: str) -> None:
    run = fault_runs[name]
    assert run.returncode is not None, describe(run)
    if run.fault.records_pids:
        # One trial process per trial (the baseline's and the fault's), and the fault's workers.
        assert len(recorded_pids(run.pid_dir, "main")) == 2, describe(run)
        if run.fault.workers:
            assert recorded_pids(run.pid_dir, "worker"), "no DataLoader worker ran: proves nothing"
    assert run.leftovers == {}, run.leftovers


@pytest.mark.slow
def test_worker_exception_reason_keeps_the_original_message(fault_runs: dict[str, FaultRun]) -> None:
    run = fault_runs["worker-error"]
    result = load_trials(run)[1].result
    assert result is not None and result.status is Status.ERROR, result
    assert "ValueError" in result.reason and "bad sample 3" in result.reason, result


@pytest.mark.slow
@pytest.mark.parametrize("name", ["segfault", "hang-step"])
def test_every_trial_folder_holds_its_outcome(fault_runs: dict[str, FaultRun], name: str) -> None:
    run = fault_runs[name]
    result = run.out / "trials" / "1" / "result.json"
    assert result.is_file(), sorted(p.name for p in result.parent.iterdir())
    assert json.loads(result.read_text())["status"] == run.fault.status


# -- adapters that cannot even be loaded ---------------------------------------------------------------------


@pytest.mark.slow  # the CLI as a subprocess
@pytest.mark.parametrize(
    ("adapter", "expected"),
    [
        ("import_error.py", "RuntimeError: adapter configuration failed: fault injected at import"),
        ("missing_method.py", "NoOptimizerAdapter does not define optimizer"),
    ],
)
def test_unloadable_adapter_exits_1_before_any_trial(tmp_path: Path, adapter: str, expected: str) -> None:
    path = FAULT_ADAPTERS / adapter
    out = tmp_path / "out"
    proc = run_autotune("search", "--adapter", path, "--device", "cpu", "--trials", "2",
                        "--out", out, "--measure-seconds", "1", "--confirm", "0")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert str(path) in proc.stderr
    assert expected in proc.stderr
    if adapter == "import_error.py":
        assert "Traceback" in proc.stderr and "_configure()" in proc.stderr  # where it failed
    assert not (out / "trials").exists()
    assert not (out / "study.db").exists()
