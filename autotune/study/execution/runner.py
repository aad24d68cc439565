"""Run one trial: in a fresh process group with a time limit, or in-process for fast tests.

One directory per trial: `request.json` in, `result.json` out, `log.txt` (the process's stdout
and stderr) and `events.jsonl` (windows as they finish) beside them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from autotune.contract.allocator import ALLOC_ENV, OTHER_ALLOC_ENVS
from autotune.contract.events import decode
from autotune.contract.phases import MEASURED
from autotune.contract.request import LAUNCH_ENV, TrialRequest, compile_cache_env
from autotune.contract.result import Status, TrialResult
from autotune.study.execution.cache_repair import repair
from autotune.study.execution.processes import TrialProcess, kill_group
from autotune.study.execution.protocol import RunnerBase
from autotune.study.execution.tail import EventCallback, EventTail

__all__ = ["InProcessRunner", "SubprocessRunner", "child_env", "kill_group"]


def _prepare(request: TrialRequest, trial_dir: Path) -> None:
    trial_dir.mkdir(parents=True, exist_ok=True)
    for name in ("result.json", "events.jsonl", MEASURED):
        (trial_dir / name).unlink(missing_ok=True)
    (trial_dir / "request.json").write_text(json.dumps(request.to_dict(), indent=2))


class SubprocessRunner(RunnerBase):
    """Each trial in a fresh Python process leading its own process group.

    A fresh process is what makes the allocator settings take effect (they are read when CUDA
    starts) and keeps OOMs, CUDA errors and compile caches in memory from leaking into the next
    trial. Its own process group lets a timeout or interruption kill the DataLoader workers too.
    """

    prunes = True

    def __init__(self, *, poll_seconds: float = 0.2, grace_seconds: float = 3.0,
                 cache_dir: Path | None = None, env: Mapping[str, str] | None = None) -> None:
        self.cache_dir = cache_dir
        """A persistent compile cache shared by the trials (see `compile_cache_env`)."""
        self.env = dict(env or {})
        """Added to each trial's environment: a GPU slot's `CUDA_VISIBLE_DEVICES` and CPUs."""
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        self._stop = threading.Event()
        self._stop_reason = ""
        self._prune = threading.Event()
        self._prune_reason = ""

    def interrupt(self, reason: str) -> None:
        """Stop the running trial (from a signal handler): it ends as `interrupted`."""
        self._stop_reason = reason
        self._stop.set()

    def prune(self, reason: str) -> None:
        """Stop the running trial early (it is clearly slower): it ends as `pruned`, with the
        rate of the windows it timed."""
        self._prune_reason = reason
        self._prune.set()

    def run(
        self,
        request: TrialRequest,
        trial_dir: Path,
        *,
        timeout: float,
        on_event: EventCallback | None = None,
    ) -> TrialResult:
        # The limit this runner enforces travels with the request, from when its clock starts
        # (before a spare's or the fork server's start-up): the trial ends its windows and
        # starts no diagnosis it could not finish (`trial.steps.REPORT_RESERVE`,
        # `DIAGNOSIS_RESERVE`).
        start = time.monotonic()
        request = dataclasses.replace(request, time_limit=timeout, deadline=time.time() + timeout)
        _prepare(request, trial_dir)
        self._prune.clear()
        log_path = trial_dir / "log.txt"
        with log_path.open("ab") as log:
            proc = self._launch(request, trial_dir, log)
            events = EventTail(trial_dir / "events.jsonl", on_event)
            outcome: Status | None = None
            stuck = ""
            grace = request.compile_grace if request.config.compile != "none" else 0.0
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
                    if self._prune.is_set():
                        outcome = Status.PRUNED
                        break
                    if time.monotonic() - start > timeout + events.compile_allowance(grace):
                        outcome = Status.TIMEOUT
                        # Where it is stuck, read now: killing it takes a grace period.
                        stuck = events.stalled(compiling=request.config.compile != "none",
                                               counts_steps=request.nproc_per_node == 1)
                        break
            finally:
                # Whatever happened (even an exception here), leave no process behind.
                kill_group(proc, self.grace_seconds if outcome is not None else 0.0)
                if outcome is Status.TIMEOUT:  # the log says why it ends here
                    limit = timeout + events.compile_allowance(grace)
                    log.write(f"[autotune] killed at the {limit:.0f} s trial limit: "
                              f"{stuck}\n".encode())
                if outcome is not None or proc.returncode:  # killed, or died, maybe mid-build
                    for path in repair(self.cache_dir):
                        log.write(f"[autotune] removed a compiled library the trial left cut "
                                  f"short: {path}\n".encode())
                self._ended()
            events.poll()
        duration = time.monotonic() - start
        reason = self._prune_reason if outcome is Status.PRUNED else self._stop_reason
        if outcome is Status.TIMEOUT:
            reason = stuck
        result = _read_result(trial_dir, proc.returncode, outcome, duration,
                              timeout + events.compile_allowance(grace), reason,
                              windows=events.rates, warmup=events.warmup_rates)
        r = events.recompiled
        if result.status is Status.TIMEOUT and r is not None:  # killed recompiling: the CSV says so
            result = result.replace(recompiles=r.count, recompile_seconds=r.seconds,
                                    recompile_reason=r.reasons)
        result.save(trial_dir / "result.json")  # every trial folder holds its outcome
        return result

    def _ended(self) -> None:
        """Called once a run's process group is gone (a subclass lets its spare go on)."""

    def _launch(self, request: TrialRequest, trial_dir: Path, log: BinaryIO, *,
                extra: Mapping[str, str] | None = None) -> TrialProcess:
        """Start the trial process, leading a process group of its own (`extra`: added to
        its environment)."""
        return subprocess.Popen(
            [sys.executable, "-m", "autotune.trial.worker", str(trial_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(request.config.env, cache_dir=self.cache_dir,
                          extra={**self.env, **(extra or {})}),
            start_new_session=True,  # its own process group: killpg reaches its workers
        )


def child_env(config_env: dict[str, str], *, cache_dir: Path | None,
              extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent's environment with the config's allocator settings (and `extra`, a GPU
    slot's): trials inherit everything else (NCCL and multicast settings included) and only
    add to it."""
    env = dict(os.environ)
    for name in (ALLOC_ENV, *OTHER_ALLOC_ENVS):
        env.pop(name, None)
    env.update(config_env)
    env.update(extra or {})
    env[LAUNCH_ENV] = repr(time.time())
    if cache_dir is not None:
        env.update(compile_cache_env(cache_dir))
    env["PYTHONUNBUFFERED"] = "1"
    # The child imports this very package, wherever it was imported from: the folder above
    # autotune/ (this file is autotune/study/execution/runner.py).
    package_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH", "")) if p
    )
    return env


def _read_result(
    trial_dir: Path,
    returncode: int,
    outcome: Status | None,
    duration: float,
    timeout: float,
    stop_reason: str,
    *,
    windows: list[float],
    warmup: Sequence[float] = (),
) -> TrialResult:
    log = str(trial_dir / "log.txt")
    if outcome is Status.INTERRUPTED:
        return TrialResult(status=outcome, reason=stop_reason or "interrupted", log=log,
                           duration_seconds=duration)
    if outcome is Status.PRUNED:
        # Stopped in warm-up (no window): its fastest chunk, what it was judged on.
        return TrialResult(status=outcome, reason=stop_reason or "pruned", log=log,
                           duration_seconds=duration,
                           throughput=statistics.median(windows) if windows else
                           max(warmup, default=None),
                           windows=len(windows), window_throughputs=tuple(windows))
    if outcome is Status.TIMEOUT:
        # Say where it was stuck, and for how long: "no batch from the DataLoader after 55 s"
        # and "still compiling after 120 s" call for different fixes.
        where = f": {stop_reason}" if stop_reason else ""
        reason = f"killed at the {timeout:.0f} s trial limit{where}"
        kept = _kept(trial_dir, log, duration, reason)
        return kept or TrialResult(status=outcome, reason=reason, log=log,
                                   duration_seconds=duration)
    if returncode < 0:
        reason = f"killed by {signal.Signals(-returncode).name}"
    elif (trial_dir / "result.json").is_file():  # the usual end: read below, no log read
        reason = ""
    else:
        reason = f"exited with code {returncode} without a result; last log line: {_last_line(log)}"
    return _kept(trial_dir, log, duration, reason) or TrialResult(
        status=Status.CRASHED, reason=reason, log=log, duration_seconds=duration)


def _kept(trial_dir: Path, log: str, duration: float, reason: str) -> TrialResult | None:
    """What a trial that ended without reporting had got to: its whole result when it wrote
    one (it was killed or died after, ending), else what it measured before diagnosing (the
    diagnosis cut by `reason`), else None."""
    path = trial_dir / "result.json"
    if path.is_file():
        return TrialResult.load(path).replace(log=log, duration_seconds=duration)
    measured = trial_dir / MEASURED
    if measured.is_file():  # killed diagnosing: its windows were measured, and stand
        return TrialResult.load(measured).replace(log=log, duration_seconds=duration,
                                                  diagnosis_error=reason)
    return None


def _last_line(log: str) -> str:
    try:
        lines = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


class InProcessRunner(RunnerBase):
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
                event = decode(line)
                if event is not None:
                    on_event(event)
        result = result.replace(duration_seconds=time.monotonic() - start)
        result.save(trial_dir / "result.json")
        return result
