"""An adapter that forgets `optimizer`: the search must refuse it before any trial, naming it.

It does not subclass ../base.py's SmallAdapter: that would inherit the very method it lacks."""

from __future__ import annotations

import torch
from torch import nn

import autotune


class NoOptimizerAdapter(autotune.Adapter):
    batch_size = 8

    def dataset(self) -> torch.utils.data.Dataset:
        return torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))

    def model(self) -> nn.Module:
        return nn.Linear(4, 2)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
