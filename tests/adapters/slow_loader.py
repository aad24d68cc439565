"""Input-bound on purpose: every sample takes 4 ms to load, the model is one small linear layer.

The DataLoader delivers about 8 / 32 ms = 250 samples/s in one process; the model alone runs
tens of thousands: a diagnosis must call it input-bound.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/adapters: the shared base
from base import Samples, SmallAdapter  # noqa: E402

SAMPLE_SECONDS = 0.004


class SlowDataset(Samples):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SAMPLE_SECONDS)  # decoding, augmentation: what a slow input pipeline costs
        return super().__getitem__(i)


class SlowLoaderAdapter(SmallAdapter):
    features = 8
    samples = 256

    def dataset(self) -> torch.utils.data.Dataset:
        return SlowDataset(self.samples, self.features, self.classes)
