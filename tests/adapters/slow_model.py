"""Compute-bound on purpose: the data is resident in memory, the model's forward takes 5 ms.

The sleep stands for heavy kernels and does not compete for the two cores of a CI machine, so
the model alone runs about 8 / 5 ms = 1600 samples/s while the loader delivers far more.
"""

from __future__ import annotations

import time

import torch
from torch import nn

import autotune

FEATURES = 8
CLASSES = 2
SAMPLES = 512
FORWARD_SECONDS = 0.005


class SlowLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEATURES, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(FORWARD_SECONDS)
        return self.linear(x)


class SlowModelAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(SAMPLES, FEATURES, generator=g)
        y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
        return torch.utils.data.TensorDataset(x, y)

    def model(self) -> nn.Module:
        return SlowLinear()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
