"""Processes that must not outlive their parent: trial processes and their DataLoader workers."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["die_with_parent", "with_parent_death"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(*_: Any) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (even by SIGKILL).

    Used by each trial process (its own session, so a killed search would otherwise leave it
    holding GPU memory) and, as `worker_init_fn`, by each DataLoader worker of a trial: PyTorch's
    workers only notice a dead parent between batches, so one stuck in `__getitem__` would live
    on. Takes and ignores arguments so it can serve as `worker_init_fn(worker_id)`.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def with_parent_death(worker_init_fn: Callable[[int], Any] | None) -> Callable[[int], Any]:
    """A DataLoader `worker_init_fn` that makes the worker die with the trial, then runs the
    adapter's own `worker_init_fn` (seeding, sharding, opening files) if it has one."""
    if worker_init_fn is None or worker_init_fn is die_with_parent:
        return die_with_parent
    if isinstance(worker_init_fn, functools.partial) and worker_init_fn.func is _die_then:
        return worker_init_fn  # chained already
    # A partial of a module-level function: picklable, for the spawn start method too.
    return functools.partial(_die_then, worker_init_fn)


def _die_then(worker_init_fn: Callable[[int], Any], worker_id: int) -> None:
    die_with_parent()
    worker_init_fn(worker_id)
