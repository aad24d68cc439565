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
from autotune.study.processes import TrialProcess, kill_group
from autotune.study.runner import SubprocessRunner, child_env

__all__ = ["ForkServer", "ForkServerRunner"]

# How long the server may take to import torch, load the adapter and build its dataset.
START_TIMEOUT = 300.0


class ForkServer:
    """One running `autotune.trial.zygote` process for one adapter file."""

    def __init__(self, adapter: Path, *, log: Path, cache_dir: Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.adapter = adapter
        # A GPU slot's CUDA_VISIBLE_DEVICES and CPUs (`env`) are the server's own: every child
        # it forks inherits them, and starts CUDA itself, after they are set.
        server_env = child_env({}, cache_dir=cache_dir, extra=env)
        server_env.pop(LAUNCH_ENV, None)
        self._log = log.open("ab")
        launched = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autotune.trial.zygote", str(adapter)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=server_env,
            start_new_session=True,  # Ctrl-C reaches the search, which stops the trial itself
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.note = ""
        ready = self._next(START_TIMEOUT)
        if ready is None or not ready.get("ready"):
            self.close()
            why = (ready or {}).get("error", "it exited or did not answer")
            raise RuntimeError(f"the fork server did not start: {why} (see {log})")
        self.note = str(ready.get("note") or "")
        self.start_seconds = time.monotonic() - launched
        """What a fresh process of this adapter pays before its run: the interpreter, the torch,
        compile and adapter imports, the dataset build."""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._lines.put(json.loads(line))
            except ValueError:
                continue  # not ours (a library printing to stdout at import)
        self._lines.put(None)  # the server has exited

    def _next(self, timeout: float | None) -> dict[str, Any] | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, trial_dir: Path, env: dict[str, str]) -> ForkedChild:
        """Start one trial in a forked child; `env` is the child's environment changes."""
        assert self.proc.stdin is not None
        message = {"trial_dir": str(trial_dir), "env": env,
                   "unset": [n for n in (ALLOC_ENV, *OTHER_ALLOC_ENVS) if n not in env]}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        answer = self._next(60.0)
        if answer is None or "pid" not in answer:
            raise RuntimeError(f"the fork server did not fork a trial (answer {answer!r})")
        return ForkedChild(self, int(answer["pid"]))

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # the server's loop ends at end of input
            except OSError:
                pass
        if self.proc.poll() is None:
            kill_group(self.proc, grace_seconds=0.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


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
