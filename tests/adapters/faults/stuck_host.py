"""A tiny adapter whose every trial hangs in its first step while `$AUTOTUNE_TEST_STUCK` is set:
a search that is to be killed mid-trial (its host dies) runs with it, the searches beside it
without, and train normally.

The stuck trial records "step-<pid>" in `$AUTOTUNE_TEST_PID_DIR` once it hangs (the test waits
for it), as each trial records "main-<pid>" (see ../base.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter, record_pid  # noqa: E402

STUCK_ENV = "AUTOTUNE_TEST_STUCK"


class StuckHostAdapter(SmallAdapter):
    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if os.environ.get(STUCK_ENV):
            record_pid("step")
            time.sleep(3600)
        return super().loss(model, batch)
