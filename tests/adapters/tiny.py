"""The smallest useful adapter: a linear classifier on 512 random samples (trials take seconds)."""

from __future__ import annotations

import torch
from torch import nn

import autotune

FEATURES = 8
CLASSES = 2
SAMPLES = 512


class TinyAdapter(autotune.Adapter):
    unit = "samples"
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(SAMPLES, FEATURES, generator=g)
        y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
        return torch.utils.data.TensorDataset(x, y)

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, CLASSES))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return [model[0], model[2]]
