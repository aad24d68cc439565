"""A confirmation run's side of the spare process (`study.spare`): stop it before measuring."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from autotune.contract.request import SPARE_ENV

__all__ = ["pause_spare"]


def pause_spare() -> int | None:
    """SIGSTOP the spare named in this process's environment (its process group: it leads
    one), if it still is one: its start-up (imports, the dataset build) would take CPU time
    from the windows about to be timed. The run's parent sends SIGCONT once the run has ended.
    Returns the pid stopped, or None."""
    try:
        pid = int(os.environ.get(SPARE_ENV) or 0)
    except ValueError:
        return None
    if pid <= 0:
        return None
    try:
        # The pid could have been reused if the spare died meanwhile: stop only a spare.
        if b"autotune.trial.zygote" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
        os.killpg(pid, signal.SIGSTOP)
    except OSError:
        return None
    return pid
