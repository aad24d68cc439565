"""Run one trial: in a fresh process group with a time limit, or in-process for fast tests.

One directory per trial: `request.json` in, `result.json` out, `log.txt` (the process's stdout
and stderr) and `events.jsonl` (windows as they finish) beside them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from autotune.contract.allocator import ALLOC_ENV, OTHER_ALLOC_ENVS
from autotune.contract.request import LAUNCH_ENV, TrialRequest
from autotune.contract.result import Status, TrialResult

__all__ = ["InProcessRunner", "Runner", "SubprocessRunner", "kill_group"]

EventCallback = Callable[[dict[str, Any]], None]


class Runner(Protocol):
    def run(
        self,
        request: TrialRequest,
        trial_dir: Path,
        *,
        timeout: float,
        on_event: EventCallback | None = None,
    ) -> TrialResult: ...


def _prepare(request: TrialRequest, trial_dir: Path) -> None:
    trial_dir.mkdir(parents=True, exist_ok=True)
    for name in ("result.json", "events.jsonl"):
        (trial_dir / name).unlink(missing_ok=True)
    (trial_dir / "request.json").write_text(json.dumps(request.to_dict(), indent=2))


class SubprocessRunner:
    """Each trial in a fresh Python process leading its own process group.

    A fresh process is what makes the allocator settings take effect (they are read when CUDA
    starts) and keeps OOMs, CUDA errors and compile caches in memory from leaking into the next
    trial. Its own process group lets a timeout or interruption kill the DataLoader workers too.
    """

    def __init__(self, *, poll_seconds: float = 0.2, grace_seconds: float = 3.0) -> None:
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        self._stop = threading.Event()
        self._stop_reason = ""

    def interrupt(self, reason: str) -> None:
        """Stop the running trial (from a signal handler): it ends as `interrupted`."""
        self._stop_reason = reason
        self._stop.set()

    def run(
        self,
        request: TrialRequest,
        trial_dir: Path,
        *,
        timeout: float,
        on_event: EventCallback | None = None,
    ) -> TrialResult:
        _prepare(request, trial_dir)
        log_path = trial_dir / "log.txt"
        env = _child_env(request)
        start = time.monotonic()
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "autotune.trial.worker", str(trial_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: killpg reaches its workers
            )
            events = _EventTail(trial_dir / "events.jsonl", on_event)
            outcome: Status | None = None
            try:
                while True:
                    try:
                        proc.wait(timeout=self.poll_seconds)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    events.poll()
                    if self._stop.is_set():
                        outcome = Status.INTERRUPTED
                        break
                    if time.monotonic() - start > timeout:
                        outcome = Status.TIMEOUT
                        break
            finally:
                # Whatever happened (even an exception here), leave no process behind.
                kill_group(proc, self.grace_seconds if outcome is not None else 0.0)
            events.poll()
        duration = time.monotonic() - start
        result = _read_result(trial_dir, proc.returncode, outcome, duration, timeout,
                              self._stop_reason, windows=events.windows)
        result.save(trial_dir / "result.json")  # every trial folder holds its outcome
        return result


def _child_env(request: TrialRequest) -> dict[str, str]:
    env = dict(os.environ)
    for name in (ALLOC_ENV, *OTHER_ALLOC_ENVS):
        env.pop(name, None)
    env.update(request.config.env)
    env[LAUNCH_ENV] = repr(time.time())
    env["PYTHONUNBUFFERED"] = "1"
    # The child imports this very package, wherever it was imported from.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH", "")) if p
    )
    return env


def kill_group(proc: subprocess.Popen[bytes], grace_seconds: float) -> None:
    """SIGTERM the process group, SIGKILL what is left after `grace_seconds`, reap the leader."""
    pgid = proc.pid  # start_new_session=True: the child leads a group with its own pid
    if grace_seconds > 0 and proc.poll() is None:
        _signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            pass
    # SIGKILL the rest of the group too: DataLoader workers may outlive a dead leader.
    _signal_group(pgid, signal.SIGKILL)
    proc.wait()
    # SIGKILL is delivered asynchronously: a worker can still be running its last instructions
    # when killpg returns (seen in CI: a worker in state R after the leader was reaped). Wait
    # until the group has only zombies left, so no process of the trial runs after we return.
    _wait_group_dead(pgid, timeout=5.0)


def _group_running(pgid: int) -> bool:
    """Whether any process of group `pgid` is still alive (zombies do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():  # no procfs: the group exists while killpg(0) finds a member
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # After the command name: state, ppid, pgrp (proc(5)).
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _wait_group_dead(pgid: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _group_running(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already empty


def _read_result(
    trial_dir: Path,
    returncode: int,
    outcome: Status | None,
    duration: float,
    timeout: float,
    stop_reason: str,
    *,
    windows: int,
) -> TrialResult:
    log = str(trial_dir / "log.txt")
    if outcome is Status.INTERRUPTED:
        return TrialResult(status=outcome, reason=stop_reason or "interrupted", log=log,
                           duration_seconds=duration)
    if outcome is Status.TIMEOUT:
        # Say whether it got as far as timing: a trial still warming up was compiling (or its
        # loader never delivered), which is where slow compile modes spend their minutes.
        where = (f"after {windows} timed window(s)" if windows
                 else "while still compiling / warming up (no timed window yet)")
        return TrialResult(status=outcome, reason=f"killed at the {timeout:.0f} s trial limit {where}",
                           log=log, duration_seconds=duration)
    path = trial_dir / "result.json"
    if path.is_file():
        return TrialResult.load(path).replace(log=log, duration_seconds=duration)
    if returncode < 0:
        name = signal.Signals(-returncode).name
        reason = f"killed by {name}"
    else:
        reason = f"exited with code {returncode} without a result; last log line: {_last_line(log)}"
    return TrialResult(status=Status.CRASHED, reason=reason, log=log, duration_seconds=duration)


def _last_line(log: str) -> str:
    try:
        lines = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


class _EventTail:
    """Reads new lines of the trial's events file and hands them to a callback."""

    def __init__(self, path: Path, callback: EventCallback | None) -> None:
        self.path = path
        self.callback = callback
        self.offset = 0
        self.windows = 0

    def poll(self) -> None:
        if not self.path.is_file():
            return
        with self.path.open() as f:
            f.seek(self.offset)
            while True:
                line = f.readline()
                if not line.endswith("\n"):
                    break  # incomplete: read it next time
                self.offset = f.tell()
                event = json.loads(line)
                self.windows += event.get("event") == "window"
                if self.callback is not None:
                    self.callback(event)


class InProcessRunner:
    """The same contract in this process: fast, for tests. No isolation, no time limit, no
    allocator settings (they would need a fresh process)."""

    def run(
        self,
        request: TrialRequest,
        trial_dir: Path,
        *,
        timeout: float,
        on_event: EventCallback | None = None,
    ) -> TrialResult:
        _prepare(request, trial_dir)
        start = time.monotonic()
        events = trial_dir / "events.jsonl"
        from autotune.trial.worker import run_trial  # the twin runs the trial side right here

        result = run_trial(dataclasses.replace(request, check_env=False), events)
        if on_event is not None and events.is_file():
            for line in events.read_text().splitlines():
                on_event(json.loads(line))
        result = result.replace(duration_seconds=time.monotonic() - start)
        result.save(trial_dir / "result.json")
        return result
