"""A tiny adapter whose step fails in the way `$AUTOTUNE_TEST_FAULT` names.

- "nan": the loss is NaN from the first step (a broken config, not a fast one);
- "error": `loss` raises a ValueError (a bug in the user's code);
- "kill": the trial process SIGKILLs itself (what the kernel's OOM killer does).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

FAULT_ENV = "AUTOTUNE_TEST_FAULT"


class FaultyAdapter(SmallAdapter):
    batch_size = 4

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        fault = os.environ[FAULT_ENV]
        if fault == "nan":
            return super().loss(model, batch) * float("nan")
        if fault == "error":
            raise ValueError("bad batch in the user's loss")
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError(f"unknown {FAULT_ENV}={fault!r}")
