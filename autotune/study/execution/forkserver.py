"""Trials forked from a warm server instead of started cold.

A fresh Python process per trial pays the torch import, the adapter import and the dataset
build every time (2.9 s + 3.5-6 s of each 22-79 s trial on an H100 host). The fork server
(`autotune.trial.zygote`) pays them once and forks a child per trial: each child still has its
own process group, its own log, its own CUDA context started after its allocator settings are
set, and its own fate (an OOM or a segfault ends the child, not the server). Confirmation runs
stay in fresh processes (`SubprocessRunner`).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from autotune.contract.allocator import ALLOC_ENV, OTHER_ALLOC_ENVS
from autotune.contract.request import LAUNCH_ENV, TrialRequest
from autotune.study.execution.processes import TrialProcess, kill_group
from autotune.study.execution.runner import SubprocessRunner, child_env

__all__ = ["ForkServer", "ForkServerRunner", "ZygoteProcess"]

# How long the server may take to import torch, load the adapter and build its dataset.
START_TIMEOUT = 300.0


class ZygoteProcess:
    """A running `autotune.trial.zygote` for one adapter file, and its answers (one JSON object
    a line on its stdout): the fork server's, and with `once` a spare's (`study.spare`)."""

    def __init__(self, adapter: Path, *, log: Path, cache_dir: Path | None = None,
                 env: Mapping[str, str] | None = None, once: bool = False) -> None:
        self.adapter = adapter
        # A GPU slot's CUDA_VISIBLE_DEVICES and CPUs (`env`) are the process's own: every trial
        # it runs inherits them, and starts CUDA itself, after they are set. The launch time is
        # stamped per trial.
        zygote_env = child_env({}, cache_dir=cache_dir, extra=env)
        zygote_env.pop(LAUNCH_ENV, None)
        self._log = log.open("ab")  # its start-up's output; a trial's goes to the trial's log
        self.launched = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autotune.trial.zygote", str(adapter), *(["--once"] * once)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=zygote_env,
            # Its own process group: Ctrl-C reaches the search, which stops the trial itself,
            # and killpg reaches a spare's run's workers.
            start_new_session=True,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                try:
                    self._lines.put(json.loads(line))
                except ValueError:
                    continue  # not ours (a library printing to stdout at import)
        except (OSError, ValueError):
            pass  # closed by the parent meanwhile
        self._lines.put(None)  # it has exited

    def answer(self, timeout: float | None) -> dict[str, Any] | None:
        """Its next answer; None once it has exited; `queue.Empty` after `timeout` seconds."""
        return self._lines.get(timeout=timeout)

    def request(self, trial_dir: Path, env: dict[str, str], *, last: bool = False
                ) -> dict[str, Any] | None:
        """Ask it to run the trial in `trial_dir` (`env`: the trial's environment changes) and
        return its answer (None: none within a minute, or it exited). `last`: no more requests
        follow (a spare's only one): its stdin is closed."""
        assert self.proc.stdin is not None
        message = {"trial_dir": str(trial_dir), "env": env,
                   "unset": [n for n in (ALLOC_ENV, *OTHER_ALLOC_ENVS) if n not in env]}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        if last:
            self.proc.stdin.close()
        try:
            return self.answer(60.0)
        except queue.Empty:
            return None

    def close_pipes(self) -> None:
        """Close what the parent holds of it: its pipes and its start-up log."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()  # a fork server's loop ends at the end of its input
                except OSError:
                    pass
        self._log.close()


class ForkServer(ZygoteProcess):
    """The fork server: started and ready, or a `RuntimeError` saying why not."""

    def __init__(self, adapter: Path, *, log: Path, cache_dir: Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(adapter, log=log, cache_dir=cache_dir, env=env)
        self.note = ""
        try:
            ready = self.answer(START_TIMEOUT)
        except queue.Empty:
            ready = None
        if ready is None or not ready.get("ready"):
            self.close()
            why = (ready or {}).get("error", "it exited or did not answer")
            raise RuntimeError(f"the fork server did not start: {why} (see {log})")
        self.note = str(ready.get("note") or "")
        self.start_seconds = time.monotonic() - self.launched
        """What a fresh process of this adapter pays before its run: the interpreter, the torch,
        compile and adapter imports, the dataset build."""

    def _next(self, timeout: float | None) -> dict[str, Any] | None:
        try:
            return self.answer(timeout)
        except queue.Empty:
            raise TimeoutError from None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, trial_dir: Path, env: dict[str, str]) -> ForkedChild:
        """Start one trial in a forked child; `env` is the child's environment changes."""
        answer = self.request(trial_dir, env)
        if answer is None or "pid" not in answer:
            raise RuntimeError(f"the fork server did not fork a trial (answer {answer!r})")
        return ForkedChild(self, int(answer["pid"]))

    def close(self) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc, grace_seconds=0.0)
        self.close_pipes()


class ForkedChild:
    """A trial forked by the server: the `TrialProcess` the runner watches and kills."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0.0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        try:
            answer = self.server._next(timeout if timeout is None else max(timeout, 1e-3))
        except TimeoutError:
            raise subprocess.TimeoutExpired(f"trial pid {self.pid}", timeout or 0.0) from None
        if answer is None:  # the server itself died: its children died with it
            self.returncode = -9
        elif answer.get("exit") == self.pid:
            self.returncode = int(answer["returncode"])
        else:
            raise RuntimeError(f"unexpected answer from the fork server: {answer!r}")
        return self.returncode


class ForkServerRunner(SubprocessRunner):
    """`SubprocessRunner` whose trials are forked from a warm server (started on first use,
    restarted if it dies). Falls back to fresh processes when the server cannot start."""

    def __init__(self, *, log: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log
        self.server: ForkServer | None = None
        self.fallback_reason = ""
        self.start_seconds: float | None = None
        """The server's start-up (`ForkServer.start_seconds`), once it has started."""

    def _launch(self, request: TrialRequest, trial_dir: Path, log: BinaryIO) -> TrialProcess:
        server = self._server(Path(request.adapter))
        if server is None:
            return super()._launch(request, trial_dir, log)
        env = dict(request.config.env)
        env[LAUNCH_ENV] = repr(time.time())
        return server.fork(trial_dir, env)

    def _server(self, adapter: Path) -> ForkServer | None:
        if self.fallback_reason:
            return None
        if self.server is not None and (not self.server.alive or self.server.adapter != adapter):
            self.server.close()
            self.server = None
        if self.server is None:
            try:
                self.server = ForkServer(adapter, log=self.log, cache_dir=self.cache_dir,
                                         env=self.env)
                self.start_seconds = self.server.start_seconds
            except RuntimeError as exc:
                self.fallback_reason = str(exc)
                print(f"autotune: {exc}; each trial starts a fresh process instead",
                      file=sys.stderr)
                return None
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
