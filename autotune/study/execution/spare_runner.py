"""Fresh processes for confirmation, each started one run ahead.

A confirmation run must be a fresh process (nothing of a search trial in it), and a fresh process
pays its start-up before it measures anything: the torch import, the lazy imports of
`torch.compile` and the optimizers, the adapter, the dataset. On the H100 host that was 9-15 s
of each 31-40 s GPT-2 confirmation run against 2 s in a forked search trial: 6 runs, a third of
the confirmation.

`SpareRunner` starts the next run's process (`autotune.trial.zygote --once`) as soon as the
current run has started, so its start-up overlaps the current run's compose, compile and
warm-up. The current run stops it (SIGSTOP to its process group) when its timed windows start
(`trial.spare`), and the runner lets it go on once the run has ended: nothing of it runs while
that run measures. (In a gang of GPU slots, a slot's spare may go on while another slot still
measures; each keeps to its slot's CPUs.)
When its turn comes it gets its request and runs it itself, as the process it was launched as,
leading its own process group: the allocator settings reach it as they reach a forked trial,
before CUDA starts. If a spare cannot start, every run is a plain fresh process (`SubprocessRunner`).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from autotune.contract.request import LAUNCH_ENV, SPARE_ENV, TrialRequest
from autotune.study.execution.forkserver import START_TIMEOUT, ZygoteProcess
from autotune.study.execution.processes import TrialProcess, kill_group
from autotune.study.execution.runner import SubprocessRunner

__all__ = ["Spare", "SpareRunner"]


class Spare(ZygoteProcess):
    """One fresh process making its start-up ahead of the run it will be."""

    def __init__(self, adapter: Path, *, log: Path, cache_dir: Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(adapter, log=log, cache_dir=cache_dir, env=env, once=True)
        self._ready: bool | None = None
        self.error = ""

    def ready(self, timeout: float = START_TIMEOUT, *,
              stop: Callable[[], bool] = lambda: False) -> bool | None:
        """Wait until its start-up is done: True; False if it failed or took longer than
        `timeout`; None (not known yet) as soon as `stop()` says to give up waiting."""
        if self._ready is None:
            self.resume()
            deadline = time.monotonic() + timeout
            answer: dict[str, Any] | None = None
            while True:
                if stop():
                    return None
                try:
                    answer = self.answer(min(0.2, max(0.0, deadline - time.monotonic())))
                    break
                except queue.Empty:
                    if time.monotonic() >= deadline:
                        break
            self._ready = bool(answer and answer.get("ready"))
            if not self._ready:
                self.error = str((answer or {}).get("error")
                                 or f"no answer in {timeout:.0f} s, or it exited")
        return self._ready

    def go(self, trial_dir: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Give it its run (`env`: the run's environment changes); it is the run's process."""
        answer = self.request(trial_dir, env, last=True)
        if answer is None or answer.get("pid") != self.proc.pid:
            raise RuntimeError(f"the spare process did not take its run (answer {answer!r})")
        return self.proc

    def resume(self) -> None:
        """Let its process group go on after a run stopped it (harmless when not stopped)."""
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Kill its process group (whatever it started, even when it died itself) and close
        what the parent holds of it."""
        kill_group(self.proc, grace_seconds=0.0)
        self.close_pipes()


class SpareRunner(SubprocessRunner):
    """`SubprocessRunner` whose fresh processes are started one run ahead (`Spare`).

    For a GPU: the start-up overlaps the run before it on host cores its step leaves idle. On a
    CPU device the step itself uses the cores, and an overlapping start-up only moves time into
    that run's warm-up (a 2-CPU VM, transformers BERT: 4.3 s less start-up a run, as much more
    warm-up): there plain fresh processes are used."""

    starts_ahead = True

    def __init__(self, *, log: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log
        self.fallback_reason = ""
        self._next: Spare | None = None
        """The next run's process, making its start-up."""
        self._running: Spare | None = None
        """The process of the run under way."""

    def _launch(self, request: TrialRequest, trial_dir: Path, log: BinaryIO, *,
                extra: Mapping[str, str] | None = None) -> TrialProcess:
        adapter = Path(request.adapter)
        spare = self._take(adapter, request.time_limit or START_TIMEOUT)
        # The next run's process starts its start-up now, while this one composes and compiles
        # (not when the run was stopped while it waited: it is about to be killed).
        self._next = None if self._stop.is_set() else self._start(adapter)
        stop_next = {SPARE_ENV: str(self._next.proc.pid)} if self._next is not None else {}
        if spare is not None:
            env = {**request.config.env, **stop_next, LAUNCH_ENV: repr(time.time())}
            try:
                self._running = spare
                return spare.go(trial_dir, env)
            except (OSError, RuntimeError) as exc:  # it died meanwhile: this run starts cold
                spare.close()
                self._running = None
                print(f"autotune: {exc}; this run starts a fresh process instead",
                      file=sys.stderr)
        return super()._launch(request, trial_dir, log, extra={**(extra or {}), **stop_next})

    def _start(self, adapter: Path) -> Spare | None:
        if self.fallback_reason:
            return None
        try:
            return Spare(adapter, log=self.log, cache_dir=self.cache_dir, env=self.env)
        except OSError as exc:  # out of processes or file descriptors: no spare this time
            print(f"autotune: no spare process ({exc})", file=sys.stderr)
            return None

    def _take(self, adapter: Path, timeout: float) -> Spare | None:
        """A spare whose start-up is done (started now if none is waiting), or None: none could
        start, or the run was stopped while it waited (it then starts plain, to be killed)."""
        if self.fallback_reason:
            return None
        spare, self._next = self._next, None
        if spare is not None and (spare.adapter != adapter or spare.proc.poll() is not None):
            spare.close()
            spare = None
        if spare is None:
            spare = self._start(adapter)
            if spare is None:
                return None
        ready = spare.ready(min(START_TIMEOUT, timeout), stop=self._stop.is_set)
        if ready:
            return spare
        spare.close()
        if ready is False:
            self.fallback_reason = f"a spare process did not start: {spare.error} (see {self.log})"
            print(f"autotune: {self.fallback_reason}; each confirmation run starts a fresh "
                  "process instead", file=sys.stderr)
        return None

    def _ended(self) -> None:
        if self._running is not None:  # the runner killed and reaped its process group
            self._running.close_pipes()
            self._running = None
        if self._next is not None:
            self._next.resume()  # the run that stopped it is over

    def close(self) -> None:
        for spare in (self._running, self._next):
            if spare is not None:
                spare.close()
        self._running = self._next = None
