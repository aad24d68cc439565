"""A tiny adapter whose loss is NaN above batch size 8 (a config that diverges is broken, not
fast). Batch 8 (the baseline) trains normally. Each trial process records its pid in
`$AUTOTUNE_TEST_PID_DIR` (see ../base.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

THRESHOLD = 8


class NanLossAdapter(SmallAdapter):
    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        loss = super().loss(model, batch)
        return loss * float("nan") if len(batch[0]) > THRESHOLD else loss
