"""A tiny adapter whose step hangs (sleeps an hour in `loss`) above batch size 8.

A deadlock or a stuck collective inside the training step: the trial never reports, so only the
trial time limit ends it. Batch 8 (the baseline) trains normally. Each trial process records its
pid in `$AUTOTUNE_TEST_PID_DIR` (see ../base.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

THRESHOLD = 8


class HangStepAdapter(SmallAdapter):
    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if len(batch[0]) > THRESHOLD:
            time.sleep(3600)
        return super().loss(model, batch)
