"""A tiny adapter whose step runs out of memory on DDP rank 1 only, at its third step.

The other rank is then waiting for rank 1's gradients in DDP's all-reduce: the trial must still
end as `oom`, with the ranks agreeing on it. Outside DDP (no `RANK`) it trains normally.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

AFTER_STEPS = 2


class OomRank1Adapter(SmallAdapter):
    steps = 0

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if os.environ.get("RANK") == "1":
            self.steps += 1
            if self.steps > AFTER_STEPS:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB "
                                             "(injected on rank 1)")
        return super().loss(model, batch)
