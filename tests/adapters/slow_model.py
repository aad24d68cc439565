"""Compute-bound on purpose: the data is resident in memory, the model's forward takes 5 ms.

The sleep stands for heavy kernels and does not compete for the two cores of a CI machine, so
the model alone runs about 8 / 20 ms = 400 samples/s while the loader delivers far more. 20 ms,
not 5: on a loaded CI machine the trial process was descheduled inside its (microsecond) loads
for about 6 ms a step, and a 5-ms step read 54% data wait, input-bound.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import SmallAdapter  # noqa: E402

FORWARD_SECONDS = 0.02


class SlowLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(FORWARD_SECONDS)
        return super().forward(x)


class SlowModelAdapter(SmallAdapter):
    features = 8
    samples = 512

    def model(self) -> nn.Module:
        return SlowLinear(self.features, self.classes)
