"""An adapter whose activations grow by 1 GiB per sample: batch 256 cannot fit on any GPU."""

from __future__ import annotations

import torch
from torch import nn

import autotune

TOKENS = 4096
WIDTH = 65536  # 4096 tokens x 65536 floats x 4 bytes = 1 GiB of activations per sample


class HugeActivations(autotune.Adapter):
    unit = "samples"
    batch_size = 2

    def dataset(self) -> torch.utils.data.Dataset:
        ids = torch.randint(0, 1000, (512, TOKENS))
        return torch.utils.data.TensorDataset(ids, torch.zeros(512))

    def model(self) -> nn.Module:
        return nn.Embedding(1000, WIDTH)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, _ = batch
        return model(ids).square().mean()
