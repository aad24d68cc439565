"""Input-bound on purpose: every sample takes 4 ms to load, the model is one small linear layer.

The DataLoader delivers about 8 / 32 ms = 250 samples/s in one process; the model alone runs
tens of thousands: a diagnosis must call it input-bound.
"""

from __future__ import annotations

import time

import torch
from torch import nn

import autotune

FEATURES = 8
CLASSES = 2
SAMPLES = 256
SAMPLE_SECONDS = 0.004


class SlowDataset(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(SAMPLES, FEATURES, generator=g)
        self.y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SAMPLE_SECONDS)  # decoding, augmentation: what a slow input pipeline costs
        return self.x[i], self.y[i]


class SlowLoaderAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        return SlowDataset()

    def model(self) -> nn.Module:
        return nn.Linear(FEATURES, CLASSES)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
