"""A tiny adapter whose step hangs (sleeps an hour in `loss`) on DDP rank 0 only, at its third
step: the other rank waits for it in DDP's all-reduce. Only the trial limit, or the collective
timeout, ends it. Outside DDP (no `RANK`) it trains normally.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

AFTER_STEPS = 2


class HangRank0Adapter(SmallAdapter):
    steps = 0

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if os.environ.get("RANK") == "0":
            self.steps += 1
            if self.steps > AFTER_STEPS:
                time.sleep(3600)
        return super().loss(model, batch)
