"""Processes that must not outlive their parent: trial processes and their DataLoader workers."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

__all__ = ["die_with_parent"]

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
