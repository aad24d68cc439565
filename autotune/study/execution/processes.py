"""A trial's process group: kill it whole, and know when nothing of it runs any more."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

__all__ = ["TrialProcess", "alive", "kill_group", "kill_pgid"]


class TrialProcess(Protocol):
    """What the runner needs of a trial process: a `subprocess.Popen`, or a forked child."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...


def kill_group(proc: TrialProcess, grace_seconds: float) -> None:
    """SIGTERM the process group, SIGKILL what is left after `grace_seconds`, reap the leader."""
    pgid = proc.pid  # the child leads a group with its own pid (its own session)
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


def kill_pgid(pgid: int, *, timeout: float = 5.0) -> None:
    """SIGKILL process group `pgid`, which is not our child's (a DDP rank: the launcher starts
    each in a session of its own), and wait until nothing of it runs."""
    _signal_group(pgid, signal.SIGKILL)
    _wait_group_dead(pgid, timeout=timeout)


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


def alive(pid: int) -> bool:
    """Whether a process of this pid exists on this host (one of another user's counts)."""
    if pid <= 0:  # 0 and negatives name process groups to os.kill, never one process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
