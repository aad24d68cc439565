"""Interruption and durability: Ctrl-C / SIGTERM stop the running trial and keep what finished,
the same command resumes, outputs are never half-written, and two searches can share a study."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

import optuna
import pytest
import yaml
from helpers import (
    PID_DIR_ENV,
    REPO_ROOT,
    TAG_ENV,
    TEST_ADAPTERS,
    FakeRunner,
    csv_rows,
    kill_all,
    leftovers,
    ok_by_batch_size,
    recorded_pids,
)
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from rich.console import Console

from autotune import Adapter, Status, TrainConfig, TrialResult, Verdict, load_config
from autotune.contract.files import atomic_write_text
from autotune.contract.request import TrialRequest
from autotune.outputs.display import QuietListener, RichDisplay
from autotune.outputs.report import write_outputs
from autotune.outputs.table import COLUMNS
from autotune.study.search import Search, SearchSettings
from autotune.study.space.file import parse_space
from autotune.study.store.records import TrialRecord, read_records

SLOW_ADAPTER = TEST_ADAPTERS / "faults" / "slow_step.py"
SLEEP_ENV = "AUTOTUNE_TEST_STEP_SLEEP"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_END = b"IEND\xaeB`\x82"  # the last chunk of every complete PNG


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- Ctrl-C and SIGTERM, then resume ---------------------------------------------------------------------


def slow_search_args(space: Path, out: Path) -> list[str]:
    return [
        "search", "--adapter", str(SLOW_ADAPTER), "--device", "cpu", "--space", str(space),
        "--trials", "2", "--out", str(out), "--measure-seconds", "1", "--confirm", "0",
        "--seed", "1", "--trial-timeout", "120",
        # Not pruned: the resumed recipe (a DataLoader worker on a tiny step) may be stopped in
        # warm-up since 0860f56, and this test counts the trials that complete.
        "--no-prune",
    ]


def load_sqlite_trials(out: Path, name: str) -> list[TrialRecord]:
    """The trials that ran (a guided search may leave follow-ups WAITING for its next run)."""
    storage = f"sqlite:///{(out / 'study.db').resolve()}"
    return [t for t in read_records(optuna.load_study(study_name=name, storage=storage))
            if t.state != TrialState.WAITING]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_signal_stops_the_running_trial_and_the_same_command_resumes(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    space = tmp_path / "space.yaml"
    # Trial 0: the baseline (batch 8, no workers); trial 1: the hand recipe, with a DataLoader
    # worker, stuck waiting for its batch.
    space.write_text("num_workers: {choices: [0, 1]}\nbatch_size: {factors: [1, 4]}\n")
    out = tmp_path / "out"
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    args = slow_search_args(space, out)
    tag = f"interrupt-{uuid.uuid4().hex}"
    env = {**os.environ, PID_DIR_ENV: str(pid_dir), TAG_ENV: tag, SLEEP_ENV: "3600"}
    first_log = tmp_path / "first.txt"
    with first_log.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "autotune", *args], cwd=REPO_ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        # Wait until trial 1 is stuck inside its step, then stop the search as a user would.
        deadline = time.monotonic() + 120
        while (not recorded_pids(pid_dir, "step") and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.1)
        assert recorded_pids(pid_dir, "step"), ("trial 1 never reached its step", first_log.read_text())
        assert recorded_pids(pid_dir, "worker"), "trial 1 has no DataLoader worker: proves less"
        assert (out / "trials" / "1" / "request.json").is_file()
        os.kill(proc.pid, sig)
        returncode = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        left = leftovers(recorded_pids(pid_dir), tag)
        kill_all(recorded_pids(pid_dir), tag)
    output = " ".join(first_log.read_text().split())  # the display wraps lines
    assert returncode == code, output
    assert f"interrupted by {sig.name}" in output and "run the same command again" in output
    assert "Traceback" not in output, output
    # The stuck trial, its DataLoader worker and the search are gone.
    assert len(recorded_pids(pid_dir, "main")) == 2  # the baseline's and the stuck trial's
    assert left == {}, left

    trials = load_sqlite_trials(out, "slow_step")
    assert [t.number for t in trials] == [0, 1]
    base, stopped = trials
    assert base.state == TrialState.COMPLETE and base.status is Status.OK
    assert stopped.config is not None and stopped.result is not None
    # The recipe follows the baseline's diagnosis of this tiny, noisy CPU step: the largest batch
    # of the space when it read compute- or overhead-bound, the user's batch otherwise.
    verdict = base.result.diagnosis.verdict if base.result.diagnosis is not None else None
    recipe_batch = 32 if verdict in (Verdict.COMPUTE, Verdict.OVERHEAD) else 8
    assert (stopped.config.batch_size, stopped.config.num_workers) == (recipe_batch, 1), \
        (verdict, stopped.config)
    assert stopped.role == "recipe"
    assert stopped.state == TrialState.FAIL  # says nothing about the config: not counted
    assert stopped.status is Status.INTERRUPTED
    assert sig.name in stopped.result.reason
    assert (out / "trials" / "1" / "log.txt").is_file()
    # Outputs for what finished are written.
    rows = csv_rows(out / "trials.csv")
    assert [(r["number"], r["state"], r["status"]) for r in rows] == [
        ("0", "COMPLETE", "ok"), ("1", "FAIL", "interrupted")]
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["measurement"]["trial"] == 0
    assert best["throughput"]["value"] == pytest.approx(base.value, rel=1e-3)

    # The same command (the step no longer stuck) continues the study to --trials finished.
    tag = f"resume-{uuid.uuid4().hex}"
    env = {**os.environ, PID_DIR_ENV: str(pid_dir), TAG_ENV: tag}
    resumed = subprocess.run([sys.executable, "-m", "autotune", *args], cwd=REPO_ROOT, env=env,
                             capture_output=True, text=True, timeout=240, check=False)
    left = leftovers(recorded_pids(pid_dir), tag)
    kill_all(recorded_pids(pid_dir), tag)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "(1 trial(s) done before)" in " ".join(resumed.stdout.split())
    assert left == {}, left

    trials = load_sqlite_trials(out, "slow_step")
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 2
    assert [(t.number, t.state) for t in trials if t.state != TrialState.COMPLETE] == [
        (1, TrialState.FAIL)]
    assert trials[1].status is Status.INTERRUPTED
    assert [t.number for t in trials if t.baseline] == [0]
    assert [t.number for t in trials if t.config == base.config
            and t.duplicate_of is None] == [0]  # the baseline is not measured again
    ok = [t for t in complete if t.ok]
    fastest = max(ok, key=lambda t: t.value or 0.0)
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["measurement"]["trial"] == fastest.number
    assert best["throughput"]["value"] == pytest.approx(fastest.value, rel=1e-3)
    assert best["throughput"]["from"] == "the search trial's median window"
    rows = csv_rows(out / "trials.csv")
    assert [r["number"] for r in rows] == [str(t.number) for t in trials]


def test_interrupted_trial_line_keeps_status_and_config_apart() -> None:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    display = RichDisplay(console)
    display.trial_started(1, TrainConfig(batch_size=32), 60.0)
    display.trial_finished(1, TrialResult(status=Status.INTERRUPTED, reason="stopped by SIGINT"), None)
    line = console.file.getvalue()
    assert "stopped by SIGINT" in line
    assert "interrupted bs=32" in " ".join(line.split()), line


# -- atomic outputs ----------------------------------------------------------------------------------------

_DIE_MID_WRITE = """
import os, signal, sys
from pathlib import Path
import autotune.contract.files

real_fdopen = os.fdopen


class DiesHalfway:
    # The temporary file's handle: writes half of the data, then the process is SIGKILLed.
    def __init__(self, f):
        self.f = f
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
    def write(self, data):
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        os.kill(os.getpid(), signal.SIGKILL)


autotune.contract.files.os.fdopen = lambda fd, mode: DiesHalfway(real_fdopen(fd, mode))
autotune.contract.files.atomic_write_text(Path(sys.argv[1]), "throughput: 2.0\\n" * 10000)
"""


def test_write_killed_halfway_leaves_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "best.yaml"
    old = "throughput: 1.0\n"
    target.write_text(old)
    proc = subprocess.run([sys.executable, "-c", _DIE_MID_WRITE, str(target)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # The half-written data went to a temporary file (left by the killed process), never here.
    partial = [p for p in tmp_path.iterdir() if p != target]
    assert partial and all(p.name.startswith(".best.yaml.") for p in partial), partial
    assert target.read_text() == old


def test_failed_write_leaves_the_previous_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "trials.csv"
    target.write_text("number,status\n0,ok\n")

    def disk_full(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("autotune.contract.files.os.replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(target, "number,status\n0,ok\n1,oom\n")
    assert target.read_text() == "number,status\n0,ok\n"
    assert [p.name for p in tmp_path.iterdir()] == ["trials.csv"]


class Tiny(Adapter):
    batch_size = 8


def check_outputs(out: Path, finished: int) -> None:
    """Every output parses completely and lists every finished trial."""
    with (out / "trials.csv").open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    assert [r["number"] for r in rows] == [str(n) for n in range(finished)]
    assert all(r["status"] in {s.value for s in Status} for r in rows), rows
    doc = yaml.safe_load((out / "best.yaml").read_text())
    assert rows[doc["measurement"]["trial"]]["status"] == "ok"
    load_config(out / "best.yaml")
    png = (out / "throughput.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and png.endswith(PNG_END)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


class CheckingListener(QuietListener):
    def __init__(self, out: Path) -> None:
        self.out = out
        self.checked: list[int] = []

    def trial_finished(self, number: int, *args: Any) -> None:
        check_outputs(self.out, number + 1)
        self.checked.append(number)


def test_outputs_are_complete_after_every_trial_whatever_it_ended_as(tmp_path: Path) -> None:
    # The OOM last: it implies that larger batches run out of memory too, and those would not
    # be run (nor their scripted outcomes happen).
    statuses = [Status.OK, Status.CRASHED, Status.OK, Status.TIMEOUT, Status.NAN, Status.OOM]

    def script(call: int, request: TrialRequest) -> TrialResult:
        if statuses[call] is Status.OK:
            return ok_by_batch_size(call, request)
        return TrialResult(status=statuses[call], reason=f"scripted {statuses[call].value}")

    raw = {"num_workers": {"low": 0, "high": 8}, "batch_size": {"factors": [0.5, 1, 2, 4, 8]},
           "grad_accum": {"choices": [1, 2, 4]}}
    space = parse_space(raw, source="durable.yaml", adapter=Tiny, device_type="cpu", cpus=8)
    out = tmp_path / "out"
    settings = SearchSettings(adapter=Path("tests/adapters/tiny.py"), space_source="durable.yaml",
                              device="cpu", out=out, storage=str(tmp_path / "study.db"),
                              study_name="durable", trials=len(statuses), seed=0, confirm=0)
    listener = CheckingListener(out)
    runner = FakeRunner(script)
    Search(settings, space, Tiny, runner=runner, listener=listener,
           on_change=lambda study: write_outputs(study, settings)).run()
    assert len(runner.requests) == len(statuses)  # every scripted outcome happened
    assert listener.checked == list(range(len(statuses)))


# -- two searches sharing one study ------------------------------------------------------------------------


def check_snapshot(out: Path) -> int:
    """Parse whatever outputs exist right now; a half-written file fails. Returns files read."""
    read = 0
    if (out / "trials.csv").exists():
        with (out / "trials.csv").open() as f:
            reader = csv.DictReader(f)
            assert tuple(reader.fieldnames or ()) == COLUMNS
            assert all(r["number"].isdigit() for r in reader)
        read += 1
    if (out / "best.yaml").exists():
        assert "config" in yaml.safe_load((out / "best.yaml").read_text())
        read += 1
    if (out / "throughput.png").exists():
        png = (out / "throughput.png").read_bytes()
        assert png.startswith(PNG_SIGNATURE) and png.endswith(PNG_END)
        read += 1
    return read


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes from /proc")
def test_two_searches_share_a_journal_study(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("batch_size: {factors: [1, 2, 4]}\n")
    journal = tmp_path / "study.log"
    tag = f"shared-{uuid.uuid4().hex}"
    env = {**os.environ, TAG_ENV: tag, "OMP_NUM_THREADS": "1"}
    outs = [tmp_path / "a", tmp_path / "b"]
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[IO[str]] = []
    try:
        for i, out in enumerate(outs):
            logs.append((tmp_path / f"{out.name}.txt").open("w"))
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "autotune", "search", "--adapter",
                 str(TEST_ADAPTERS / "tiny.py"), "--device", "cpu", "--space", str(space),
                 "--trials", "3", "--storage", str(journal), "--study-name", "shared",
                 "--out", str(out), "--measure-seconds", "1", "--confirm", "0", "--seed", str(i)],
                cwd=REPO_ROOT, env=env, stdout=logs[-1], stderr=subprocess.STDOUT,
            ))
        # While they run, every output either process has written must parse completely.
        snapshots = 0
        deadline = time.monotonic() + 240
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            snapshots += sum(check_snapshot(out) for out in outs)
            time.sleep(0.05)
        codes = [p.wait(timeout=10) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
        left = leftovers([], tag)
        kill_all([], tag)
    output = "\n".join((tmp_path / f"{out.name}.txt").read_text() for out in outs)
    assert codes == [0, 0], output
    assert snapshots > 0, "no output was read while the searches ran: proves nothing"
    assert left == {}, left

    study = optuna.load_study(study_name="shared",
                              storage=JournalStorage(JournalFileBackend(str(journal))))
    assert len({t._trial_id for t in study.get_trials()}) == len(study.get_trials())
    trials = read_records(study)
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers)) == numbers[-1] + 1  # each trial recorded once
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) >= 3
    assert not [t.number for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert all(isinstance(t.status, Status) for t in complete)
    assert all(t.owner is not None for t in trials)
    owners = {t.owner["pid"] for t in trials if t.owner is not None}
    assert owners == {p.pid for p in procs}, "both processes should have run trials"
    for out in outs:
        assert check_snapshot(out) == 3
        listed = [int(r["number"]) for r in csv_rows(out / "trials.csv")]
        assert len(listed) == len(set(listed))
