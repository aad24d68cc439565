"""DDP trials: each trial is N ranks started by PyTorch's own launcher, `torch.distributed.run`.

The launcher is the trial process the runner watches, started fresh for every trial (never
forked from the server: the ranks are its children, and each starts CUDA and NCCL itself),
leading its own process group and dying with this process (`autotune.trial.launch`), with the
parent's environment and the config's allocator settings (NCCL and multicast settings reach
every rank unchanged). The launcher starts each
rank in a session of its own; the ranks record their pids, and when the trial ends (done,
timed out, pruned, interrupted) every rank's process group is killed too, DataLoader workers
included. The ranks agree on the outcome and rank 0 writes it; when they could not agree (a
rank died or hangs), the outcomes the ranks left are merged here the same way.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

from autotune.contract.ranks import RANKS_DIR, merge_ranks, read_pids, read_ranks, waited_only
from autotune.contract.request import TrialRequest
from autotune.contract.result import Status, TrialResult
from autotune.study.execution.cache_repair import repair
from autotune.study.execution.processes import TrialProcess, kill_pgid
from autotune.study.execution.runner import EventCallback, SubprocessRunner, child_env

__all__ = ["DEFAULT_COLLECTIVE_TIMEOUT", "DDPRunner", "launch_command"]

DEFAULT_COLLECTIVE_TIMEOUT = 60.0
"""Seconds a rank waits in a collective for the others. Longer than any wait of a healthy
trial between two collectives on its ranks (a compile runs on every rank at once), far shorter
than the 300 s trial limit: a stuck rank is named in its peers' errors."""


def launch_command(trial_dir: Path, nproc_per_node: int) -> list[str]:
    """`torch.distributed.run` on this host (a local rendezvous on a free port), no restarts:
    a failed rank fails the trial. Through `autotune.trial.launch`: torchrun's own `main`, in a
    process that dies with this one."""
    return [sys.executable, "-m", "autotune.trial.launch", "--standalone",
            f"--nproc-per-node={nproc_per_node}", "--max-restarts=0",
            "-m", "autotune.trial.distributed", str(trial_dir)]


class DDPRunner(SubprocessRunner):
    """`SubprocessRunner` whose trials run as `nproc_per_node` DDP ranks."""

    def __init__(self, *, nproc_per_node: int,
                 collective_timeout: float = DEFAULT_COLLECTIVE_TIMEOUT, **kwargs: Any) -> None:
        if nproc_per_node < 1 or collective_timeout <= 0:
            raise ValueError(f"need nproc_per_node >= 1 and a positive collective_timeout, got "
                             f"{nproc_per_node=}, {collective_timeout=}")
        super().__init__(**kwargs)
        self.nproc_per_node = nproc_per_node
        self.collective_timeout = collective_timeout

    def run(self, request: TrialRequest, trial_dir: Path, *, timeout: float,
            on_event: EventCallback | None = None) -> TrialResult:
        # The diagnosis times the loader and the model apart, which DDP's ranks cannot do in
        # lockstep: a DDP trial is measured end to end only.
        request = dataclasses.replace(request, nproc_per_node=self.nproc_per_node,
                                      collective_timeout=self.collective_timeout, diagnose=False)
        shutil.rmtree(trial_dir / RANKS_DIR, ignore_errors=True)  # a re-run's old ranks
        try:
            result = super().run(request, trial_dir, timeout=timeout, on_event=on_event)
        finally:
            # The launcher's group is dead; each rank led a group of its own. A rank that is
            # gone already is a no-op (pids are not reused within seconds).
            for pid in read_pids(trial_dir):
                kill_pgid(pid)
            repair(self.cache_dir)  # a rank killed just now may have been writing a build
        merged = self._from_ranks(result, trial_dir)
        if merged is not result:
            merged.save(trial_dir / "result.json")
        return merged

    def _from_ranks(self, result: TrialResult, trial_dir: Path) -> TrialResult:
        """Without an agreed result, what the ranks' own outcomes say."""
        outcomes = read_ranks(trial_dir)
        if not outcomes or result.status not in (Status.CRASHED, Status.TIMEOUT):
            return result
        merged = merge_ranks(outcomes, collective_timeout=self.collective_timeout)
        if result.status is Status.TIMEOUT:
            return result.replace(reason=f"{result.reason}; {merged.reason}")
        missing = sorted(set(range(self.nproc_per_node)) - {o.rank for o in outcomes})
        if missing and (merged.status is Status.OK or all(
                o.waited for o in outcomes if o.result.status is not Status.OK)):
            # The ranks that left nothing are the cause, not those that waited for them.
            merged = waited_only(outcomes, collective_timeout=self.collective_timeout,
                                 missing=missing)
        return merged.replace(log=result.log, duration_seconds=result.duration_seconds)

    def close(self) -> None:
        """Nothing outlives a trial (as `ForkServerRunner.close`, for the caller's cleanup)."""

    def _launch(self, request: TrialRequest, trial_dir: Path, log: BinaryIO) -> TrialProcess:
        return subprocess.Popen(
            launch_command(trial_dir, self.nproc_per_node),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(request.config.env, cache_dir=self.cache_dir),
            start_new_session=True,  # its own process group: killpg reaches the launcher
        )
